//! The server as a non-root user against a rootless Docker engine of that user. The engine
//! is one `tests/engines/rootless.sh up` started: the caller's, when
//! `CEM_TEST_ROOTLESS_DOCKER_HOST` names its socket (the script's last line, without
//! `DOCKER_HOST=`) and `CEM_TEST_ROOTLESS_USER` its user; else the test starts one itself and
//! stops it (`down`) at its end, failed or not. Run as root, which starts the binary as the user.
//!
//! The engine is one without cgroups (rootless on cgroup v1, as on CI's machines; an engine with
//! cgroups is skipped, which fails under CI). The server refuses to start there, saying why and
//! what to do; with `--allow-unenforced-limits` it serves, every result names the limits not
//! enforced (memory and pids), and what SECURITY.md says holds either way is checked by the
//! security suite's own probes (`tests/security/probes/`), run through that server: seccomp
//! (system calls the profile refuses), the setuid block, no new privileges, no network, the
//! read-only root, `/tmp`'s size and the deadline. The sandbox writes the workspace, and what it
//! writes belongs to the user, who can delete it.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

/// `/tmp`'s size for the server with the flag, in MiB: small, so filling it is quick.
const TMPFS_MB: u64 = 8;

/// Python preludes of the security suite's probes: `call(name, *args)`, a raw system call's
/// errno name, and `probe(targets)`, each target's TCP connect and UDP send outcome.
const PRELUDES: [&str; 2] = [
    include_str!("security/probes/syscalls.py"),
    include_str!("security/probes/net_probe.py"),
];

/// The security suite's probes run here, by the name of their verdict: each a top-level script
/// that leaves it in `result`, as in the suite's cases 28, 29, 30, 34, 13, 7 and 11. Filling
/// `/tmp` goes last.
const PROBES: [(&str, &str); 7] = [
    (
        "posture",
        include_str!("security/probes/case_28_posture.py"),
    ),
    ("setuid", include_str!("security/probes/case_29_setuid.py")),
    (
        "namespaces",
        include_str!("security/probes/case_30_namespaces.py"),
    ),
    (
        "kernel",
        include_str!("security/probes/case_34_kernel_facilities.py"),
    ),
    ("network", NETWORK),
    (
        "root_writes",
        include_str!("security/probes/case_07_root_writes.py"),
    ),
    (
        "fill_tmp",
        include_str!("security/probes/case_11_fill_tmp.py"),
    ),
];

/// Case 13's probe: every target unreachable, no interface but `lo`, no route.
const NETWORK: &str = r#"
out = {"targets": probe(targets)}
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
out["routes"] = open("/proc/net/route").read().splitlines()[1:]
result = out
"#;

/// Errno names of a refused system call: the profile's `EPERM`, or `ENOSYS`.
const REFUSED: [&str; 2] = ["EPERM", "ENOSYS"];

/// The rootless engine and its user.
struct Rootless {
    docker_host: String,
    user: String,
    uid: u32,
    gid: u32,
}

/// The script that starts and stops a rootless engine.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/engines/rootless.sh");
/// The user of an engine this test starts itself.
const OWN_USER: &str = "cem-rootless";

/// An engine this test started (`rootless.sh up`), stopped with everything `up` made when
/// dropped, also when the test fails.
struct OwnEngine;

impl Drop for OwnEngine {
    fn drop(&mut self) {
        let _ = std::process::Command::new("bash")
            .args([SCRIPT, "down", OWN_USER])
            .status();
    }
}

/// The engine `CEM_TEST_ROOTLESS_DOCKER_HOST` and `CEM_TEST_ROOTLESS_USER` name, or one this
/// test starts; `None` when neither can be had (the test then skips, or fails in CI).
fn rootless(test: &str) -> Option<(Rootless, Option<OwnEngine>)> {
    common::require_root("running the server as the rootless engine's user");
    let given = (
        std::env::var("CEM_TEST_ROOTLESS_DOCKER_HOST"),
        std::env::var("CEM_TEST_ROOTLESS_USER"),
    );
    let (docker_host, user, own) = match given {
        (Ok(host), Ok(user)) => (host, user, None),
        _ => {
            // What an interrupted run left, then a fresh engine.
            let _ = std::process::Command::new("bash")
                .args([SCRIPT, "down", OWN_USER])
                .status();
            let out = std::process::Command::new("bash")
                .args([SCRIPT, "up", OWN_USER])
                .output()
                .expect("bash");
            let own = OwnEngine;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let host = (stdout.lines().last())
                .and_then(|l| l.strip_prefix("DOCKER_HOST="))
                .map(str::to_string);
            let Some(host) = host.filter(|_| out.status.success()) else {
                common::skip(
                    test,
                    &format!(
                        "no rootless engine: set CEM_TEST_ROOTLESS_DOCKER_HOST and CEM_TEST_ROOTLESS_USER, or let `{SCRIPT} up` start one (Debian: rootlesskit uidmap slirp4netns acl); it said: {}",
                        String::from_utf8_lossy(&out.stderr)
                    ),
                );
                return None;
            };
            (host, OWN_USER.to_string(), Some(own))
        }
    };
    let id = |flag: &str| -> u32 {
        let out = std::process::Command::new("id")
            .args([flag, &user])
            .output()
            .expect("id");
        assert!(out.status.success(), "no user {user}");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    let engine = Rootless {
        uid: id("-u"),
        gid: id("-g"),
        docker_host,
        user,
    };
    Some((engine, own))
}

/// The server, doctor and the workspace against a rootless engine, one after the other (each
/// checks that no sandbox is left on the engine).
#[tokio::test]
#[ignore = "needs root: starts a rootless engine and the server as its user"]
async fn a_server_on_a_rootless_engine() {
    let test = "a_server_on_a_rootless_engine";
    let Some((engine, _own)) = rootless(test) else {
        return;
    };
    let driver = engine.docker(&["info", "--format", "{{.CgroupDriver}}"]);
    if driver.trim() != "none" {
        common::skip(
            test,
            &format!(
                "the rootless engine at {} has cgroups (driver {}): this test covers one without (cgroup v1)",
                engine.docker_host,
                driver.trim()
            ),
        );
        return;
    }
    without_the_flag_a_server_on_an_engine_without_cgroups_refuses_to_serve(&engine).await;
    with_the_flag_results_name_the_limits_not_enforced_and_the_rest_holds(&engine).await;
    doctor_says_rootless_and_names_the_real_fix(&engine).await;
}

impl Rootless {
    /// A directory the user owns (0700) for one server's workspace, skills and data.
    fn dir(&self) -> tempfile::TempDir {
        let dir = tempfile::Builder::new()
            .prefix("cem-rootless-test-")
            .tempdir_in("/tmp")
            .unwrap();
        for sub in ["", "workspace", "skills", "data"] {
            let path = dir.path().join(sub);
            std::fs::create_dir_all(&path).unwrap();
            std::os::unix::fs::chown(&path, Some(self.uid), Some(self.gid)).unwrap();
        }
        // The binary where the user can run it (a checkout may sit in root's home).
        let bin = dir.path().join("code-execution-mcp");
        std::fs::hard_link(common::BIN, &bin)
            .or_else(|_| std::fs::copy(common::BIN, &bin).map(drop))
            .unwrap();
        dir
    }

    /// `command args` as the user (no supplementary groups), against the rootless engine.
    fn as_user(&self, program: &str, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("setpriv");
        command
            .args([
                &format!("--reuid={}", self.uid),
                &format!("--regid={}", self.gid),
                "--clear-groups",
                "--",
                program,
            ])
            .args(args)
            .env("DOCKER_HOST", &self.docker_host)
            .env("CEM_IMAGE_PROFILE", "minimal")
            .env("CEM_PRELOAD", "none")
            .kill_on_drop(true);
        command
    }

    /// `serve` over stdio as the user, its data in `dir`.
    fn serve(&self, dir: &Path, args: &[&str]) -> tokio::process::Command {
        let p = |sub: &str| dir.join(sub).display().to_string();
        let (workspace, skills) = (p("workspace"), p("skills"));
        let mut all = vec![
            "serve",
            "--workspace-quota-mb",
            "0",
            "--pool-size",
            "1",
            "--pool-max",
            "1",
            "--workspace",
            &workspace,
            "--skills-dir",
            &skills,
        ];
        all.extend_from_slice(args);
        let bin = dir.join("code-execution-mcp");
        let mut command = self.as_user(bin.to_str().unwrap(), &all);
        command.env("CEM_DATA_DIR", dir.join("data"));
        command
    }

    fn docker(&self, args: &[&str]) -> String {
        common::docker::docker_at(&self.docker_host, args)
    }

    fn assert_no_sandboxes(&self) {
        let left = self.docker(&[
            "ps",
            "-aq",
            "--filter",
            "label=io.code-execution-mcp.managed",
        ]);
        assert!(left.trim().is_empty(), "sandboxes left behind: {left}");
    }
}

async fn without_the_flag_a_server_on_an_engine_without_cgroups_refuses_to_serve(
    engine: &Rootless,
) {
    let dir = engine.dir();
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        engine
            .serve(dir.path(), &[])
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the server decides within 180 s")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it served:\n{stderr}");
    for part in [
        "refusing to serve: the sandbox's memory_mb and pids_limit are not enforced",
        "a 64 MB sandbox allocated 256 MB and ended ok",
        "a sandbox limited to 32 processes started 96 threads",
        "rootless Docker",
        "cgroup v1",
        "Delegate=",
        "rootful engine",
        "--allow-unenforced-limits",
    ] {
        assert!(stderr.contains(part), "{part:?} missing:\n{stderr}");
    }
    engine.assert_no_sandboxes();
}

/// One server with `--allow-unenforced-limits` (and an 8 MiB `/tmp`): its results name memory
/// and pids as not enforced, the workspace is the user's, and what SECURITY.md says holds on a
/// rootless engine does.
async fn with_the_flag_results_name_the_limits_not_enforced_and_the_rest_holds(engine: &Rootless) {
    use rmcp::ServiceExt;
    let dir = engine.dir();
    let mut child = engine
        .serve(
            dir.path(),
            &[
                "--allow-unenforced-limits",
                "--tmpfs-mb",
                &TMPFS_MB.to_string(),
            ],
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = ().serve(io).await.expect("MCP handshake over stdio");

    let code = "import os\n\
        os.makedirs('made/deeper', exist_ok=True)\n\
        open('made/deeper/data.txt', 'w').write('rootless')\n\
        open('top.txt', 'w').write('x')\n\
        result = {'uid': os.getuid(), 'gid': os.getgid()}";
    let (is_error, answer) = common::call_tool(
        &client,
        "execute_code",
        json!({"code": code, "memory_mb": 128}),
    )
    .await;
    assert!(!is_error, "{answer}");
    assert_eq!(answer["status"], "ok", "{answer}");
    // Root of the engine's user namespace: the user, on the host.
    assert_eq!(answer["result"], json!({"uid": 0, "gid": 0}), "{answer}");
    assert_eq!(answer["limits"]["memory_mb"], 128, "{answer}");
    let notes = answer["notes"].as_array().cloned().unwrap_or_default();
    let noted = |s: &str| {
        notes
            .iter()
            .any(|n| n.as_str().is_some_and(|n| n.contains(s)))
    };
    assert_eq!(
        answer["limits"]["not_enforced"],
        json!(["memory_mb", "pids_limit"]),
        "{answer}"
    );
    assert!(
        noted("limits not enforced: this server's engine (rootless Docker")
            && noted("--allow-unenforced-limits"),
        "{answer}"
    );

    // The files are the user's, in a workspace no wider than the user made it.
    let workspace = dir.path().join("workspace");
    for file in ["top.txt", "made", "made/deeper", "made/deeper/data.txt"] {
        let meta = std::fs::metadata(workspace.join(file)).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (engine.uid, engine.gid), "{file}");
        assert_eq!(meta.mode() & 0o002, 0, "{file} is world-writable");
    }
    assert_eq!(
        std::fs::metadata(&workspace).unwrap().mode() & 0o777,
        0o755,
        "the workspace's mode changed"
    );
    // A second execution sees them, through the pool.
    let (_, again) = common::call_tool(
        &client,
        "execute_code",
        json!({"code": "result = open('made/deeper/data.txt').read()"}),
    )
    .await;
    assert_eq!(again["result"], "rootless", "{again}");

    the_isolation_holds(&client).await;
    a_busy_loop_ends_at_the_deadline(&client).await;

    client.cancel().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server exits within 60 s of its client leaving")
        .unwrap();
    assert!(status.success(), "the server exited with {status}");
    engine.assert_no_sandboxes();

    // The user deletes what the sandbox made.
    let paths: Vec<PathBuf> = ["made", "top.txt"].map(|f| workspace.join(f)).to_vec();
    let mut rm = vec!["-r"];
    rm.extend(paths.iter().map(|p| p.to_str().unwrap()));
    let removed = engine
        .as_user("rm", &rm)
        .status()
        .await
        .expect("rm as the user");
    assert!(
        removed.success(),
        "{} could not delete the files",
        engine.user
    );
    assert!(paths.iter().all(|p| !p.exists()));
}

async fn doctor_says_rootless_and_names_the_real_fix(engine: &Rootless) {
    let dir = engine.dir();
    let bin = dir.path().join("code-execution-mcp");
    let out = engine
        .as_user(bin.to_str().unwrap(), &["doctor"])
        .env("CEM_DATA_DIR", dir.path().join("data"))
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        let at = (stdout.lines())
            .position(|l| l.get(5..).is_some_and(|rest| rest.starts_with(name)))
            .unwrap_or_else(|| panic!("no {name} check:\n{stdout}"));
        let lines: Vec<&str> = stdout.lines().collect();
        let fix = lines
            .get(at + 1)
            .filter(|l| l.trim_start().starts_with("fix:"));
        (lines[at].to_string(), fix.map(|f| f.to_string()))
    };
    let (rootless, _) = line("rootless");
    assert!(
        rootless.starts_with("ok") && rootless.contains("rootless Docker"),
        "{stdout}"
    );
    assert!(!out.status.success(), "{stdout}");
    for name in ["memory limit", "pids limit"] {
        let (check, fix) = line(name);
        assert!(check.starts_with("FAIL"), "{stdout}");
        let fix = fix.unwrap_or_else(|| panic!("{name} has no fix:\n{stdout}"));
        assert!(
            fix.contains("rootless") && fix.contains("Delegate=") && !fix.contains("swapaccount"),
            "{name}'s fix: {fix}"
        );
        assert!(fix.contains("--allow-unenforced-limits"), "{fix}");
    }
}

/// The security suite's probes, in one sandbox of the server with the flag: what SECURITY.md
/// says holds on a rootless engine without cgroups.
async fn the_isolation_holds(client: &rmcp::service::Peer<rmcp::RoleClient>) {
    let mut code = PRELUDES.concat() + "\nverdicts = {}\n";
    for (name, probe) in PROBES {
        code += &format!("{probe}\nverdicts[{name:?}] = result\n");
    }
    code += "result = verdicts\n";
    // Public, the metadata service, the engine's bridge and slirp4netns's gateway to the host.
    let targets = json!({
        "public_web": ["1.1.1.1", 443],
        "metadata": ["169.254.169.254", 80],
        "engine_bridge": ["172.17.0.1", 2375],
        "slirp_gateway": ["10.0.2.2", 22],
    });
    let (_, answer) = common::call_tool(
        client,
        "execute_code",
        json!({"code": code, "context_vars": {"targets": targets}, "timeout_seconds": 120}),
    )
    .await;
    assert_eq!(answer["status"], "ok", "{answer}");
    let v = &answer["result"];

    // Seccomp: the profile's filter is on, and the calls it refuses are refused.
    let refused = |set: &serde_json::Value, expected: usize| {
        let calls = set.as_object().unwrap();
        assert_eq!(calls.len(), expected, "{set}");
        for (name, outcome) in calls {
            let outcome = outcome.as_str().unwrap_or("");
            assert!(REFUSED.contains(&outcome), "{name}: {outcome}");
        }
    };
    let posture = &v["posture"];
    assert_eq!(posture["Seccomp"], "2", "{posture}");
    assert_eq!(posture["prctl"]["seccomp"], "2", "{posture}");
    refused(&v["namespaces"], 18);
    let kernel = if std::env::consts::ARCH == "x86_64" {
        16
    } else {
        14
    };
    refused(&v["kernel"], kernel);

    // No capabilities, no new privileges, and no setuid or setgid mode by any road.
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(posture[cap], "0000000000000000", "{cap}: {posture}");
    }
    assert_eq!(posture["NoNewPrivs"], "1", "{posture}");
    assert_eq!(posture["prctl"]["no_new_privs"], "1", "{posture}");
    let setuid = &v["setuid"];
    for (what, outcome) in setuid["refused"].as_object().unwrap() {
        let expected = match what.as_str() {
            "tarfile errorlevel 2" => "ExtractError could not change mode",
            _ => "PermissionError EPERM",
        };
        assert_eq!(outcome, expected, "{what}: {setuid}");
    }
    for (what, outcome) in setuid["commands"].as_object().unwrap() {
        let err = outcome["err"].as_str().unwrap();
        assert!(err.contains("Operation not permitted"), "{what}: {outcome}");
    }
    assert_eq!(setuid["raw"]["fchmodat2 4755"], "EPERM", "{setuid}");
    for (what, outcome) in setuid["allowed"].as_object().unwrap() {
        assert_eq!(outcome, "ok", "{what}: {setuid}");
    }
    assert_eq!(setuid["modes"]["./myid"], "0o755", "{setuid}");

    // No network: no interface but loopback, no route, nothing reachable.
    let network = &v["network"];
    assert_eq!(network["interfaces"], json!(["lo"]), "{network}");
    assert_eq!(network["routes"], json!([]), "{network}");
    let outcomes = network["targets"].as_object().unwrap();
    assert_eq!(outcomes.len(), 8, "{network}");
    for (label, outcome) in outcomes {
        assert_eq!(outcome, "ENETUNREACH", "{label}: {network}");
    }

    // A read-only root: every write under it is EROFS and nothing is left.
    assert!(
        posture["root_opts"]
            .as_array()
            .unwrap()
            .contains(&json!("ro")),
        "{posture}"
    );
    // Besides the workspace, the engine's binds of the host's device nodes (it cannot make
    // nodes) and of /dev/null over masked /proc files; and as uid 0 of the namespace, the
    // sandbox owns the engine's /dev tmpfs (64 MiB), which runc's uid 10001 does not.
    let devices = [
        "/dev/full",
        "/dev/null",
        "/dev/random",
        "/dev/tty",
        "/dev/urandom",
    ];
    let mut host_mounts = devices.to_vec();
    host_mounts.extend(["/dev/zero", "/proc/keys", "/proc/timer_list", "/workspace"]);
    assert_eq!(
        posture["writable_host_mounts"],
        json!(host_mounts),
        "{posture}"
    );
    let points = [
        "/dev",
        "/dev/mqueue",
        "/dev/pts",
        "/dev/shm",
        "/tmp",
        "/workspace",
    ];
    assert_eq!(posture["writable_points"], json!(points), "{posture}");
    let writes = v["root_writes"].as_object().unwrap();
    assert_eq!(writes.len(), 15, "{writes:?}");
    for (what, errno) in writes.iter().filter(|(what, _)| *what != "left") {
        assert_eq!(errno, "EROFS", "{what}: {writes:?}");
    }
    assert_eq!(v["root_writes"]["left"], json!([]));

    // /tmp: a tmpfs of the server's size, full at it.
    assert_eq!(posture["tmp"]["fstype"], "tmpfs", "{posture}");
    let tmp = &v["fill_tmp"];
    assert_eq!(tmp["errno"], "ENOSPC", "{tmp}");
    assert_eq!(tmp["size"], TMPFS_MB << 20, "{tmp}");
    let written = tmp["written"].as_u64().unwrap();
    assert!(
        (TMPFS_MB << 19..=TMPFS_MB << 20).contains(&written),
        "{tmp}"
    );
}

/// A busy loop ends at its deadline with the status `timeout`.
async fn a_busy_loop_ends_at_the_deadline(client: &rmcp::service::Peer<rmcp::RoleClient>) {
    let (_, answer) = common::call_tool(
        client,
        "execute_code",
        json!({"code": "print('looping')\nwhile True: pass", "timeout_seconds": 2}),
    )
    .await;
    assert_eq!(answer["status"], "timeout", "{answer}");
    let error = answer["error"].as_str().unwrap_or_default();
    assert!(error.contains("timed out after 2 seconds"), "{answer}");
    assert_eq!(answer["output"], json!(["looping"]), "{answer}");
    // Ended at the deadline, not left running: generous bounds, not a timing measurement.
    let ms = answer["execution_time_ms"].as_u64().unwrap();
    assert!((2000..32_000).contains(&ms), "{answer}");
}
