//! The hardened container definition, in one place. Every execution's container (cold or, later,
//! pre-started) is created from [`container_body`]; a change to the sandbox's posture is a change
//! to this file, and `tests/security/` checks each property against the real engine.

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountBindOptions,
    MountBindOptionsPropagationEnum, MountType, ResourcesUlimits,
};

use crate::sandbox::container::runtime::RuntimeKind;
#[cfg(test)]
use crate::sandbox::container::runtime::SECCOMP_PROFILE;

/// The image's directory served from the host, and where it is mounted in the sandbox.
pub const SERVED: &str = "usr";

/// A tree the sandbox mounts: the image id it was made from, its directory as the engine
/// names it, and the directories of its [`SERVED`] directory mounted over the image's
/// (`/usr/lib`, `/usr/local`, ...: all but `KEPT_IN_IMAGE` of [`crate::sandbox::image::tree`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeMount {
    pub image_id: String,
    pub root: PathBuf,
    pub dirs: Vec<String>,
}

/// This process as an owner label: `hostname:pid:starttime` (starttime from /proc guards
/// against pid reuse).
pub fn current_owner() -> String {
    let pid = std::process::id();
    format!(
        "{}:{}:{}",
        crate::host::process::hostname(),
        pid,
        crate::host::process::process_start_time(pid).unwrap_or(0)
    )
}

/// Label every container of this project carries; the reaper and `doctor` select on it.
pub const LABEL_MANAGED: &str = "io.code-execution-mcp.managed";
/// Label naming the server instance that created the container.
pub const LABEL_INSTANCE: &str = "io.code-execution-mcp.instance";
/// Label naming the owning process (`host:pid:starttime`), so a restarted server can tell a
/// crashed owner's containers from a live one's.
pub const LABEL_OWNER: &str = "io.code-execution-mcp.owner";

/// Where the workspace appears inside the sandbox.
pub const WORKSPACE_MOUNT: &str = "/workspace";
/// Where the saved skills appear inside the sandbox (read-only: code changes them only through
/// `save_skill`, which the server validates).
pub const SKILLS_MOUNT: &str = "/skills";

/// Where the generated tools packages appear (read-only): `SERVERS_MOUNT/<version>/servers/…`.
/// The harness links `/servers` to the version of its job.
pub const SERVERS_MOUNT: &str = "/mnt/servers";

/// Where the installed package sets appear (read-only, not listable): `PACKAGES_MOUNT/<set>/…`.
/// The harness puts the set its job names on `sys.path`.
pub const PACKAGES_MOUNT: &str = "/mnt/packages";

/// Where each container's own state directory appears (read-only, `container::state_dir`): a
/// session's blobs, linked there when the container is given its state, are mapped by the
/// harness instead of received through the channel (see `sandbox::carry`).
pub const STATE_MOUNT: &str = "/mnt/state";

/// Directories an engine may cover with a writable tmpfs of its own when the root is read-only
/// (Podman's `read_only_tmpfs`, on by default: /run and /var/tmp). The sandbox covers them with
/// an empty read-only tmpfs instead, so /tmp (sized) and the workspace stay the only writable
/// places on every engine.
pub const READ_ONLY_TMPFS: [&str; 2] = ["/run", "/var/tmp"];

/// Open files one sandbox may hold.
pub const NOFILE_LIMIT: i64 = 1024;

/// The most RLIMIT_NPROC the sandbox user gets. The kernel counts it per uid across every
/// container that shares the uid, so it sits far above what a pool of sandboxes runs
/// (`--pids-limit` is the per-container bound). It is set explicitly so no engine picks its own:
/// Podman's Docker-compatible API, given any ulimit, adds its maximum (1048576) for the ones left
/// out, which runc cannot set where the engine lacks CAP_SYS_RESOURCE (rootless, or nested).
pub const NPROC_LIMIT: i64 = 32768;

/// The nproc limit containers get: [`NPROC_LIMIT`], or this process's hard limit where that is
/// lower (a small host's kernel default is about RAM / 256 KiB), which an engine beside the
/// server can set without privileges.
pub fn nproc_limit() -> i64 {
    static LIMIT: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nproc).maximum;
        hard.map_or(NPROC_LIMIT, |h| {
            NPROC_LIMIT.min(i64::try_from(h).unwrap_or(i64::MAX))
        })
    })
}

/// How the seccomp profile reaches the engine: inline (Docker), or as a file the engine opens
/// (Podman's Docker-compatible API; see `seccomp_file`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Seccomp {
    #[default]
    Inline,
    /// The profile written by `seccomp_file::write`, as the engine sees the path.
    File(PathBuf),
}

impl Seccomp {
    /// The `SecurityOpt` entry, with the profile for `runtime` when inline (a file holds the
    /// profile it was written with).
    pub(super) fn security_opt(&self, runtime: RuntimeKind) -> String {
        match self {
            Seccomp::Inline => format!("seccomp={}", runtime.seccomp_profile()),
            Seccomp::File(path) => format!("seccomp={}", path.display()),
        }
    }
}

/// What every container of a sandbox is made with, as configured
/// (`config::SandboxConfig::container`).
#[derive(Debug, Clone)]
pub struct ContainerOptions {
    /// Processes and threads the code may run at once (`--pids-limit`); the engine's limit is
    /// this scaled for the runtime ([`RuntimeKind::engine_pids_limit`]).
    pub pids_limit: i64,
    /// Size of the writable /tmp (tmpfs); counts against the memory limit.
    pub tmpfs_bytes: u64,
    /// Another OCI runtime registered with the engine (runsc, crun, kata); `None` = default.
    pub runtime: Option<String>,
    /// What kind of runtime `runtime` is, from its registration (`Native` for the default).
    pub runtime_kind: RuntimeKind,
}

/// Everything that varies between containers.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    pub image: String,
    pub memory_bytes: i64,
    pub container: ContainerOptions,
    pub workspace: PathBuf,
    /// The skills directory, mounted read-only at [`SKILLS_MOUNT`].
    pub skills: Option<PathBuf>,
    /// The tools packages, mounted read-only at [`SERVERS_MOUNT`].
    pub servers: Option<PathBuf>,
    /// The package cache's sets, mounted read-only at [`PACKAGES_MOUNT`].
    pub packages: Option<PathBuf>,
    pub uid: u32,
    pub gid: u32,
    pub labels: HashMap<String, String>,
    /// Modules the harness imports before its job arrives (pooled containers only: a cold
    /// start would only wait longer).
    pub preload: Vec<String>,
    /// The installed package set put on `sys.path` before the preload and the state load (a
    /// container prepared for a session that has one).
    pub package_set: Option<String>,
    /// The container's own state directory, mounted read-only at [`STATE_MOUNT`]: a session's
    /// blobs are linked into it when the container is given the session's state.
    pub state: Option<crate::sandbox::container::state_dir::StateDir>,
    /// The container's own egress directory, mounted read-only at
    /// [`EGRESS_MOUNT`](crate::sandbox::container::egress_dir::EGRESS_MOUNT): the proxy's
    /// socket appears in it while an execution with egress runs.
    pub egress: Option<crate::sandbox::container::egress_dir::EgressDir>,
    pub seccomp: Seccomp,
    /// A copy of the image's tree on the host (`image_tree`): the directories it names are
    /// mounted read-only over the image's own under `/usr`.
    pub image_tree: Option<TreeMount>,
}

/// The create-container body: network none, read-only root, memory without swap, pids limit,
/// no capabilities, no new privileges, our seccomp profile, non-root user, size-limited /tmp,
/// the workspace as the only writable host path, no logs kept by the engine; with a host tree,
/// its `/usr` read-only over the image's (setuid bits and device nodes were left out when it
/// was made, and no-new-privileges holds either way).
pub fn container_body(spec: &SandboxSpec) -> ContainerCreateBody {
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        user: Some(format!("{}:{}", spec.uid, spec.gid)),
        hostname: Some("sandbox".into()),
        env: Some(env(spec)),
        working_dir: Some(WORKSPACE_MOUNT.into()),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        open_stdin: Some(true),
        stdin_once: Some(true),
        tty: Some(false),
        network_disabled: Some(true),
        labels: Some(spec.labels.clone()),
        host_config: Some(host_config(spec)),
        ..Default::default()
    }
}

/// The limits and isolation the engine enforces (see [`container_body`]).
fn host_config(spec: &SandboxSpec) -> HostConfig {
    HostConfig {
        network_mode: Some("none".into()),
        readonly_rootfs: Some(true),
        memory: Some(spec.memory_bytes),
        memory_swap: Some(spec.memory_bytes),
        memory_swappiness: Some(0),
        pids_limit: Some(
            (spec.container.runtime_kind).engine_pids_limit(spec.container.pids_limit),
        ),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec![
            "no-new-privileges=true".into(),
            spec.seccomp.security_opt(spec.container.runtime_kind),
        ]),
        tmpfs: Some(tmpfs(spec)),
        mounts: Some(mounts(spec)),
        ulimits: Some(ulimits(spec)),
        init: Some(true),
        ipc_mode: Some("private".into()),
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".into()),
            config: None,
        }),
        privileged: Some(false),
        auto_remove: Some(false),
        runtime: spec.container.runtime.clone(),
        ..Default::default()
    }
}

/// A size-limited, writable `/tmp`, and the directories of [`READ_ONLY_TMPFS`] empty and
/// read-only.
fn tmpfs(spec: &SandboxSpec) -> HashMap<String, String> {
    let tmpfs_options = format!(
        "rw,nosuid,nodev,noexec,size={},mode=1777",
        spec.container.tmpfs_bytes
    );
    std::iter::once(("/tmp".to_string(), tmpfs_options))
        .chain(READ_ONLY_TMPFS.iter().map(|dir| {
            (
                dir.to_string(),
                "ro,nosuid,nodev,noexec,size=4k,mode=755".into(),
            )
        }))
        .collect()
}

/// The host paths a sandbox sees: the workspace (its only writable one), and read-only the
/// skills, the tools packages, a session's snapshot and the host tree's directories.
fn mounts(spec: &SandboxSpec) -> Vec<Mount> {
    std::iter::once(bind(&spec.workspace, WORKSPACE_MOUNT, false))
        .chain(spec.skills.iter().map(|dir| bind(dir, SKILLS_MOUNT, true)))
        .chain(
            spec.servers
                .iter()
                .map(|dir| bind(dir, SERVERS_MOUNT, true)),
        )
        .chain(
            spec.packages
                .iter()
                .map(|dir| bind(dir, PACKAGES_MOUNT, true)),
        )
        .chain(
            spec.state
                .iter()
                .map(|dir| bind(&dir.engine, STATE_MOUNT, true)),
        )
        .chain(spec.egress.iter().map(|egress| {
            let mount = crate::sandbox::container::egress_dir::EGRESS_MOUNT;
            bind(&egress.dir.engine, mount, true)
        }))
        .chain(spec.image_tree.iter().flat_map(|tree| {
            let served = tree.root.join(SERVED);
            (tree.dirs.iter()).map(move |dir| {
                let target = format!("/{}/{dir}", SERVED);
                bind(&served.join(dir), &target, true)
            })
        }))
        .collect()
}

/// Open files, processes (the runtime's choice) and no core dumps.
fn ulimits(spec: &SandboxSpec) -> Vec<ResourcesUlimits> {
    let nproc = (spec.container.runtime_kind).nproc_limit(spec.container.pids_limit, nproc_limit());
    vec![
        ResourcesUlimits {
            name: Some("nofile".into()),
            soft: Some(NOFILE_LIMIT),
            hard: Some(NOFILE_LIMIT),
        },
        ResourcesUlimits {
            name: Some("nproc".into()),
            soft: Some(nproc),
            hard: Some(nproc),
        },
        ResourcesUlimits {
            name: Some("core".into()),
            soft: Some(0),
            hard: Some(0),
        },
    ]
}

/// The interpreter's environment, with the modules to preload when there are any.
fn env(spec: &SandboxSpec) -> Vec<String> {
    [
        "HOME=/tmp".to_string(),
        "LANG=C.UTF-8".into(),
        "PYTHONDONTWRITEBYTECODE=1".into(),
        "PYTHONUNBUFFERED=1".into(),
    ]
    .into_iter()
    .chain((!spec.preload.is_empty()).then(|| format!("CEM_PRELOAD={}", spec.preload.join(","))))
    .chain((spec.package_set.as_ref()).map(|set| format!("CEM_PACKAGES={set}")))
    .collect()
}

pub(super) fn bind(source: &std::path::Path, target: &str, read_only: bool) -> Mount {
    Mount {
        target: Some(target.into()),
        source: Some(source.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        bind_options: Some(MountBindOptions {
            propagation: Some(MountBindOptionsPropagationEnum::RPRIVATE),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SandboxSpec {
        SandboxSpec {
            image: "img".into(),
            memory_bytes: 256 << 20,
            container: ContainerOptions {
                pids_limit: 64,
                tmpfs_bytes: 64 << 20,
                runtime: None,
                runtime_kind: RuntimeKind::Native,
            },
            workspace: "/srv/ws".into(),
            skills: Some("/srv/skills".into()),
            servers: Some("/srv/servers".into()),
            packages: Some("/srv/packages/sets".into()),
            uid: 10001,
            gid: 10001,
            labels: HashMap::from([(LABEL_MANAGED.into(), "true".into())]),
            preload: Vec::new(),
            package_set: None,
            state: None,
            egress: None,
            seccomp: Seccomp::Inline,
            image_tree: None,
        }
    }

    #[test]
    fn body_carries_every_hardening_setting() {
        let body = container_body(&spec());
        let hc = body.host_config.as_ref().unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(hc.memory, hc.memory_swap);
        assert_eq!(hc.pids_limit, Some(64));
        assert_eq!(hc.cap_drop.as_deref(), Some(&["ALL".to_string()][..]));
        let sec = hc.security_opt.as_ref().unwrap();
        assert!(sec.iter().any(|s| s == "no-new-privileges=true"));
        assert!(sec.iter().any(|s| s.starts_with("seccomp={")));
        assert_eq!(hc.log_config.as_ref().unwrap().typ.as_deref(), Some("none"));
        let tmpfs = hc.tmpfs.as_ref().unwrap();
        assert!(tmpfs["/tmp"].contains("size=67108864"));
        for dir in READ_ONLY_TMPFS {
            assert!(tmpfs[dir].starts_with("ro,"), "{dir}: {}", tmpfs[dir]);
        }
        assert_eq!(body.user.as_deref(), Some("10001:10001"));
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(hc.auto_remove, Some(false));
        let ulimits: Vec<_> = (hc.ulimits.as_ref().unwrap().iter())
            .map(|u| (u.name.as_deref().unwrap(), u.soft.unwrap(), u.hard.unwrap()))
            .collect();
        assert_eq!(
            ulimits,
            [
                ("nofile", NOFILE_LIMIT, NOFILE_LIMIT),
                ("nproc", nproc_limit(), nproc_limit()),
                ("core", 0, 0)
            ]
        );
        let mounts = hc.mounts.as_ref().unwrap();
        assert_eq!(mounts.len(), 4);
        assert_eq!(mounts[0].read_only, Some(false));
        assert_eq!(mounts[1].target.as_deref(), Some(SKILLS_MOUNT));
        assert_eq!(
            mounts[1].read_only,
            Some(true),
            "skills are read-only in the sandbox"
        );
        assert_eq!(mounts[2].target.as_deref(), Some(SERVERS_MOUNT));
        assert_eq!(
            mounts[2].read_only,
            Some(true),
            "the tools package is read-only in the sandbox"
        );
        assert_eq!(mounts[3].target.as_deref(), Some(PACKAGES_MOUNT));
        assert_eq!(
            mounts[3].read_only,
            Some(true),
            "installed packages are read-only in the sandbox"
        );
    }

    #[test]
    fn a_host_tree_is_mounted_read_only_over_usr() {
        let body = container_body(&SandboxSpec {
            image_tree: Some(TreeMount {
                image_id: "sha256:0123456789ab".into(),
                root: "/srv/cem/image-trees/0123456789ab".into(),
                dirs: vec!["lib".into(), "local".into()],
            }),
            ..spec()
        });
        let hc = body.host_config.unwrap();
        let mounts = hc.mounts.unwrap();
        let under_usr: Vec<_> = (mounts.iter())
            .filter(|m| m.target.as_deref().is_some_and(|t| t.starts_with("/usr")))
            .collect();
        let targets: Vec<_> = under_usr
            .iter()
            .map(|m| m.target.as_deref().unwrap())
            .collect();
        assert_eq!(targets, ["/usr/lib", "/usr/local"]);
        assert_eq!(
            under_usr[0].source.as_deref(),
            Some("/srv/cem/image-trees/0123456789ab/usr/lib")
        );
        for m in under_usr {
            assert_eq!(m.read_only, Some(true));
            assert_eq!(m.typ, Some(MountType::BIND));
        }
        assert_eq!(hc.readonly_rootfs, Some(true), "the root stays read-only");
        let without = container_body(&spec()).host_config.unwrap().mounts.unwrap();
        assert!(
            without
                .iter()
                .all(|m| !m.target.as_deref().unwrap().starts_with("/usr"))
        );
    }

    #[test]
    fn a_profile_file_is_named_by_its_path() {
        let body = container_body(&SandboxSpec {
            seccomp: Seccomp::File("/srv/cem/engine/seccomp-0123.json".into()),
            ..spec()
        });
        let sec = body.host_config.unwrap().security_opt.unwrap();
        assert!(sec.contains(&"seccomp=/srv/cem/engine/seccomp-0123.json".to_string()));
        assert!(!sec.iter().any(|s| s.contains('{')));
    }

    #[test]
    fn seccomp_profile_denies_io_uring_and_is_valid_json() {
        let profile: serde_json::Value = serde_json::from_str(SECCOMP_PROFILE).unwrap();
        assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
        let allowed: Vec<&str> = profile["syscalls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|rule| rule["action"] == "SCMP_ACT_ALLOW")
            .flat_map(|rule| rule["names"].as_array().unwrap())
            .filter_map(|n| n.as_str())
            .collect();
        assert!(allowed.contains(&"read"));
        for denied in [
            "io_uring_setup",
            "io_uring_enter",
            "unshare",
            "mount",
            "bpf",
        ] {
            assert!(!allowed.contains(&denied), "{denied} must not be allowed");
        }
    }

    /// Calls that can set S_ISUID/S_ISGID are allowed only by entries that check the mode
    /// argument (`mode & 06000 == 0`), never unconditionally; openat2, whose mode seccomp cannot
    /// read, gets ENOSYS so callers fall back to openat.
    #[test]
    fn seccomp_profile_refuses_setuid_and_setgid_modes() {
        let profile: serde_json::Value = serde_json::from_str(SECCOMP_PROFILE).unwrap();
        let rules = profile["syscalls"].as_array().unwrap();
        let naming = |name: &str| -> Vec<&serde_json::Value> {
            rules
                .iter()
                .filter(|rule| rule["names"].as_array().unwrap().iter().any(|n| n == name))
                .collect()
        };
        for (name, mode_arg) in [
            ("chmod", 1),
            ("fchmod", 1),
            ("creat", 1),
            ("mknod", 1),
            ("open", 2),
            ("fchmodat", 2),
            ("fchmodat2", 2),
            ("mknodat", 2),
            ("openat", 3),
        ] {
            let entries = naming(name);
            assert_eq!(entries.len(), 1, "{name} has exactly one entry");
            let rule = entries[0];
            assert_eq!(rule["action"], "SCMP_ACT_ALLOW", "{name}");
            assert_eq!(
                rule["args"],
                serde_json::json!([{
                    "index": mode_arg,
                    "value": 0o6000,
                    "valueTwo": 0,
                    "op": "SCMP_CMP_MASKED_EQ"
                }]),
                "{name}: allowed only when the mode (argument {mode_arg}) has no 06000 bit"
            );
        }
        let openat2 = naming("openat2");
        assert_eq!(openat2.len(), 1);
        assert_eq!(openat2[0]["action"], "SCMP_ACT_ERRNO");
        assert_eq!(openat2[0]["errnoRet"], 38, "ENOSYS, so libc falls back");
        assert!(openat2[0].get("args").is_none());
    }
}
