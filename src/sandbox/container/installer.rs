//! The installer's container: where packages are resolved and installed for the sandbox image
//! (`crate::packages`), never in a sandbox. It is made from the sandbox image itself, so the
//! resolution is for the image's exact Python and platform, and it is hardened like a sandbox
//! (read-only root, no capabilities, no new privileges, the seccomp profile, a non-root user,
//! memory and pids limits) with one difference: the network, to reach the package index (none
//! at all with a wheelhouse). It mounts nothing but the directory it installs into, the
//! certificate bundle and the wheelhouse: no workspace, no secrets, no user code. It runs
//! under the engine's default runtime (gVisor's runsc is registered with `--network=none`).

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig};

use crate::sandbox::container::runtime::RuntimeKind;
use crate::sandbox::container::spec::{Seccomp, bind};

/// Where the install goes inside the installer container.
pub const OUT_MOUNT: &str = "/out";
/// Where a wheelhouse directory appears (the driver installs from it alone when present).
pub const WHEELHOUSE_MOUNT: &str = "/wheelhouse";
/// Where the certificate bundle appears: the system bundle's own path, so that pip's
/// system trust store and `PIP_CERT` agree.
pub const CA_MOUNT: &str = "/etc/ssl/certs/ca-certificates.crt";

/// One install's container.
#[derive(Debug, Clone)]
pub struct InstallerSpec {
    pub image: String,
    pub uid: u32,
    pub gid: u32,
    /// The staging directory, as the engine names it.
    pub out: PathBuf,
    pub wheelhouse: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    /// The engine network it joins when it has no wheelhouse (`bridge`, or a test's
    /// `container:ID`).
    pub network: String,
    /// `PIP_*` settings and proxies, as `NAME=value`.
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
    let offline = spec.wheelhouse.is_some();
    let mut env = vec!["HOME=/tmp".to_string(), "LANG=C.UTF-8".into()];
    env.extend(spec.env.iter().cloned());
    if spec.ca_file.is_some() {
        env.push(format!("PIP_CERT={CA_MOUNT}"));
    }
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
        .chain(spec.ca_file.iter().map(|f| bind(f, CA_MOUNT, true)))
        .collect();
    let network = if offline {
        "none"
    } else {
        spec.network.as_str()
    };
    // A container that joins another's network namespace has that one's host name: the engine
    // refuses one of its own.
    let shared = network.starts_with("container:");
    ContainerCreateBody {
        image: Some(spec.image.clone()),
        user: Some(format!("{}:{}", spec.uid, spec.gid)),
        hostname: (!shared).then(|| "installer".into()),
        env: Some(env),
        cmd: Some(cmd),
        entrypoint: Some(Vec::new()),
        working_dir: Some("/tmp".into()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        network_disabled: Some(offline),
        labels: Some(spec.labels.clone()),
        host_config: Some(HostConfig {
            network_mode: Some(network.into()),
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
            ca_file: Some("/etc/ssl/certs/ca-certificates.crt".into()),
            network: "bridge".into(),
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
    fn the_installer_is_hardened_and_mounts_only_its_own_directories() {
        let body = installer_body(&spec(false));
        let hc = body.host_config.as_ref().unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("bridge"));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(hc.cap_drop.as_deref(), Some(&["ALL".to_string()][..]));
        assert!(hc.security_opt.as_ref().unwrap()[0].starts_with("no-new-privileges"));
        assert_eq!(hc.runtime, None, "the engine's default runtime");
        let targets: Vec<&str> = (hc.mounts.iter().flatten())
            .map(|m| m.target.as_deref().unwrap())
            .collect();
        assert_eq!(targets, [OUT_MOUNT, CA_MOUNT]);
        assert_eq!(body.user.as_deref(), Some("65534:65534"));
        assert!(body.env.unwrap().contains(&format!("PIP_CERT={CA_MOUNT}")));

        let offline = installer_body(&spec(true));
        let hc = offline.host_config.as_ref().unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert!(
            (hc.mounts.iter().flatten()).any(|m| m.target.as_deref() == Some(WHEELHOUSE_MOUNT))
        );

        let joined = installer_body(&InstallerSpec {
            network: "container:index".into(),
            ..spec(false)
        });
        let hc = joined.host_config.as_ref().unwrap();
        assert_eq!(hc.network_mode.as_deref(), Some("container:index"));
        assert_eq!(
            joined.hostname, None,
            "the engine refuses a host name there"
        );
        assert_eq!(body.hostname.as_deref(), Some("installer"));
    }
}
