//! The installer's container: where packages are resolved and installed for the sandbox image
//! (`crate::packages`), never in a sandbox. It is made from the sandbox image itself, so the
//! resolution is for the image's exact Python and platform, and it is hardened like a sandbox
//! (read-only root, no capabilities, no new privileges, the seccomp profile, a non-root user,
//! memory and pids limits, no network). It reaches the package index as sandboxes reach their
//! `egress` hosts: through the server's proxy, on a socket in its own read-only `/mnt/egress`,
//! which lets through the configured index and nothing else (none at all with a wheelhouse). It
//! mounts nothing but the directory it installs into, that directory and the wheelhouse: no
//! workspace, no secrets, no user code. It runs under the engine's default runtime.

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig};

use crate::sandbox::container::egress_dir::EGRESS_MOUNT;
use crate::sandbox::container::runtime::RuntimeKind;
use crate::sandbox::container::spec::{Seccomp, bind};

/// Where the install goes inside the installer container.
pub const OUT_MOUNT: &str = "/out";
/// Where a wheelhouse directory appears (the driver installs from it alone when present).
pub const WHEELHOUSE_MOUNT: &str = "/wheelhouse";

/// One install's container.
#[derive(Debug, Clone)]
pub struct InstallerSpec {
    pub image: String,
    pub uid: u32,
    pub gid: u32,
    /// The staging directory, as the engine names it.
    pub out: PathBuf,
    pub wheelhouse: Option<PathBuf>,
    /// Its egress directory, as the engine names it (none with a wheelhouse).
    pub egress: Option<PathBuf>,
    /// `PIP_*` settings, as `NAME=value`.
    pub env: Vec<String>,
    pub memory_bytes: i64,
    pub tmpfs_bytes: u64,
    pub pids_limit: i64,
    pub seccomp: Seccomp,
    pub labels: HashMap<String, String>,
    /// The driver program and the requirements.
    pub driver: String,
    pub requirements: Vec<String>,
}

/// The create-container body of an install.
pub fn installer_body(spec: &InstallerSpec) -> ContainerCreateBody {
    let mut env = vec!["HOME=/tmp".to_string(), "LANG=C.UTF-8".into()];
    env.extend(spec.env.iter().cloned());
    let cmd: Vec<String> = ["python3", "-I", "-c", spec.driver.as_str()]
        .into_iter()
        .map(String::from)
        .chain(spec.requirements.iter().cloned())
        .collect();
    let mounts = std::iter::once(bind(&spec.out, OUT_MOUNT, false))
        .chain(
            spec.wheelhouse
                .iter()
                .map(|d| bind(d, WHEELHOUSE_MOUNT, true)),
        )
        .chain(spec.egress.iter().map(|d| bind(d, EGRESS_MOUNT, true)))
        .collect();
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        user: Some(format!("{}:{}", spec.uid, spec.gid)),
        hostname: Some("installer".into()),
        env: Some(env),
        cmd: Some(cmd),
        entrypoint: Some(Vec::new()),
        working_dir: Some("/tmp".into()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        network_disabled: Some(true),
        labels: Some(spec.labels.clone()),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            readonly_rootfs: Some(true),
            memory: Some(spec.memory_bytes),
            memory_swap: Some(spec.memory_bytes),
            pids_limit: Some(spec.pids_limit),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec![
                "no-new-privileges=true".into(),
                spec.seccomp.security_opt(RuntimeKind::Native),
            ]),
            tmpfs: Some(HashMap::from([(
                "/tmp".to_string(),
                format!("rw,nosuid,nodev,size={},mode=1777", spec.tmpfs_bytes),
            )])),
            mounts: Some(mounts),
            init: Some(true),
            ipc_mode: Some("private".into()),
            log_config: Some(HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            privileged: Some(false),
            auto_remove: Some(false),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(wheelhouse: bool) -> InstallerSpec {
        InstallerSpec {
            image: "img".into(),
            uid: 65534,
            gid: 65534,
            out: "/srv/packages/staging/x".into(),
            wheelhouse: wheelhouse.then(|| "/srv/wheels".into()),
            egress: (!wheelhouse).then(|| "/run/cem-egress/i/x".into()),
            env: vec!["PIP_INDEX_URL=https://pypi.org/simple".into()],
            memory_bytes: 1 << 30,
            tmpfs_bytes: 1 << 30,
            pids_limit: 256,
            seccomp: Seccomp::Inline,
            labels: HashMap::new(),
            driver: "print(1)".into(),
            requirements: vec!["humanize".into()],
        }
    }

    #[test]
    fn the_installer_is_hardened_has_no_network_and_mounts_only_its_own_directories() {
        for wheelhouse in [false, true] {
            let body = installer_body(&spec(wheelhouse));
            let hc = body.host_config.as_ref().unwrap();
            assert_eq!(hc.network_mode.as_deref(), Some("none"));
            assert_eq!(body.network_disabled, Some(true));
            assert_eq!(hc.readonly_rootfs, Some(true));
            assert_eq!(hc.cap_drop.as_deref(), Some(&["ALL".to_string()][..]));
            assert!(hc.security_opt.as_ref().unwrap()[0].starts_with("no-new-privileges"));
            assert_eq!(hc.runtime, None, "the engine's default runtime");
            let targets: Vec<&str> = (hc.mounts.iter().flatten())
                .map(|m| m.target.as_deref().unwrap())
                .collect();
            let way = if wheelhouse {
                WHEELHOUSE_MOUNT
            } else {
                EGRESS_MOUNT
            };
            assert_eq!(targets, [OUT_MOUNT, way]);
            assert_eq!(body.user.as_deref(), Some("65534:65534"));
        }
    }
}
