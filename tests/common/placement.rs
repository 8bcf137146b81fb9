//! Where a suite's sandboxes really run. CI runs suites again under gVisor (`CEM_RUNTIME=runsc`)
//! and with the image's `/usr` served from the host copy (`CEM_IMAGE_TREE=host`); the test
//! servers take both from the environment, as the binary does (`Config::defaults`). Were a
//! variable lost on its way, every case would run where the step did not mean it to, take that
//! branch and pass. [`assert_runs_where_asked`] starts a server as the suites do and checks, from
//! inside one sandbox and from the engine's record of the same container, that the runtime and
//! the source of `/usr` are the ones the environment asks for (unset: the engine's default
//! runtime, and what `--image-tree auto` decides on this engine). Each suite such a step runs
//! calls it in a test of its own.

use bollard::models::ContainerInspectResponse;
use code_execution_mcp::config::ImageTreeMode;
use code_execution_mcp::sandbox::container::runtime::RuntimeKind;
use code_execution_mcp::sandbox::image::tree as image_tree;

use super::{TestApp, assert_ok, inspect_pooled};

/// Sandbox code: its kernel's release and banner, and its mounts of directories of `/usr`
/// (mount point, root on the host's filesystem, options), which the host copy is mounted as
/// (Docker's init, `/usr/sbin/docker-init`, is mounted in every container).
const PROBE: &str = r#"
import platform
usr = []
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if f[4].startswith("/usr/") and f[4].count("/") == 2:
        usr.append([f[4], f[3], f[5]])
result = {"release": platform.release(), "version": open("/proc/version").read(), "usr": usr}
"#;

/// A variable CI sets for a step, when set and not empty.
fn asked(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// Starts a server as the suites do (pool of one), runs [`PROBE`] in the pooled container after
/// inspecting it, and asserts the runtime and the image tree the environment asks for.
pub async fn assert_runs_where_asked() {
    let t = TestApp::start().await;
    let inspected = inspect_pooled(&t.app).await;
    let podman = t.app.engine_info().kind == "Podman";
    // Read now: the container is single-use, gone once the probe has run in it.
    let recorded = recorded_runtime(&inspected, podman);
    let pooled_before = t.app.stats().snapshot().executions_pooled;
    let o = t.run(PROBE).await;
    assert_ok(&o);
    // The code ran in the container inspected above: the only one the pool held.
    assert_eq!(
        t.app.stats().snapshot().executions_pooled,
        pooled_before + 1,
        "the probe did not run in the pooled container"
    );
    let engine = &code_execution_mcp::sandbox::Engine::connect()
        .await
        .expect("engine");
    let info = engine.client().info().await.expect("the engine's info");
    let inside = &o.result;

    // The runtime: the engine's record of the container, then the kernel the code saw.
    let wanted = asked("CEM_RUNTIME").unwrap_or_else(|| default_runtime(&info, podman));
    assert_eq!(
        recorded,
        wanted,
        "the sandbox ran under {recorded}, not the runtime asked for (CEM_RUNTIME={:?})",
        asked("CEM_RUNTIME")
    );
    let registrations = engine.runtimes().await.expect("the engine's runtimes");
    let kind = registrations
        .get(&wanted)
        .map_or(RuntimeKind::Native, |r| r.kind());
    let release = inside["release"].as_str().unwrap_or_default();
    let version = inside["version"].as_str().unwrap_or_default();
    let engine_kernel = info.kernel_version.clone().unwrap_or_default();
    match kind {
        // gVisor's kernel reports a release of its own (4.4.0), never the host's.
        RuntimeKind::Gvisor => assert!(
            release != engine_kernel && release == "4.4.0",
            "{wanted} is gVisor, but the sandbox's kernel is {release} ({version}); the engine's is {engine_kernel}"
        ),
        RuntimeKind::Native => assert_eq!(
            release, engine_kernel,
            "{wanted} runs on the engine's kernel, but the sandbox's is {release} ({version})"
        ),
    }

    // The image's /usr: a read-only bind of the host copy of this image, or the image's own.
    let mode = asked("CEM_IMAGE_TREE").map_or(ImageTreeMode::Auto, |m| {
        clap::ValueEnum::from_str(&m, true)
            .unwrap_or_else(|e| panic!("CEM_IMAGE_TREE={m} is no mode: {e}"))
    });
    let storage = engine.storage().await.expect("the engine's storage");
    let host_tree = image_tree::choose(mode, &storage).host;
    let image = inspected.image.clone().unwrap_or_default();
    let short = image_tree::short_id(&image).expect("the container's image id");
    let usr: Vec<(String, String, String)> =
        serde_json::from_value(inside["usr"].clone()).expect("the probe's mounts");
    let binds: Vec<(String, String, bool)> = (inspected.mounts.iter().flatten())
        .filter(|m| {
            (m.destination.as_deref())
                .is_some_and(|d| d.starts_with("/usr/") && d.matches('/').count() == 2)
        })
        .map(|m| {
            let source = m.source.clone().unwrap_or_default();
            (
                m.destination.clone().unwrap_or_default(),
                source,
                m.rw == Some(true),
            )
        })
        .collect();
    let what = format!(
        "CEM_IMAGE_TREE={:?}, storage driver {}: inside {usr:?}, engine {binds:?}",
        asked("CEM_IMAGE_TREE"),
        storage.driver
    );
    if host_tree {
        let lib = usr.iter().find(|(target, _, _)| target == "/usr/lib");
        let (_, root, options) =
            lib.unwrap_or_else(|| panic!("/usr/lib is not the host copy: {what}"));
        assert!(
            root.contains(short),
            "/usr/lib is not this image's copy: {what}"
        );
        assert!(
            options.split(',').any(|o| o == "ro"),
            "/usr/lib is writable: {what}"
        );
        let bind = binds.iter().find(|(target, _, _)| target == "/usr/lib");
        let (_, source, rw) =
            bind.unwrap_or_else(|| panic!("the engine binds no /usr/lib: {what}"));
        assert!(source.contains(short) && !rw, "{what}");
    } else {
        assert!(
            usr.is_empty() && binds.is_empty(),
            "/usr is not the image's own: {what}"
        );
    }
    t.finish().await;
}

/// The runtime the engine records for a container (Podman's compatible inspect says "oci" for
/// every runtime; its own CLI names it).
fn recorded_runtime(inspected: &ContainerInspectResponse, podman: bool) -> String {
    if podman {
        let id = inspected.id.clone().unwrap_or_default();
        return podman_format(&["inspect", "--format", "{{.OCIRuntime}}", &id]);
    }
    (inspected.host_config.as_ref())
        .and_then(|h| h.runtime.clone())
        .unwrap_or_default()
}

/// The runtime a container gets when none is named.
fn default_runtime(info: &bollard::models::SystemInfo, podman: bool) -> String {
    if podman {
        return podman_format(&["info", "--format", "{{.Host.OCIRuntime.Name}}"]);
    }
    info.default_runtime.clone().unwrap_or_default()
}

/// What the podman CLI beside the Podman engine prints for `args`.
fn podman_format(args: &[&str]) -> String {
    let out = std::process::Command::new("podman")
        .args(args)
        .output()
        .expect("the podman CLI beside the Podman engine");
    assert!(out.status.success(), "podman {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
