//! The server's package cache (`crate::packages`), opened once for every tenant, and its
//! installer: `images/installer/driver.py` in a container made from the sandbox image
//! (`sandbox::container::installer`), so the resolution is for the image's exact Python and
//! platform. pip runs there because it is the reference resolver for the index and the
//! wheels, and because in a container it gets the network to the index and nothing else: no
//! workspace, no secrets, no user code, and no file of the host but its staging directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::app::StartError;
use crate::config::Config;
use crate::packages::installer::InstallAnswer;
use crate::packages::installer::{DRIVER, read_answer};
use crate::packages::{InstallFailure, Installer, PackageSets, PackageSettings, TreeLimits};
use crate::sandbox::Engine;
use crate::sandbox::container::installer::{InstallerSpec, installer_body};
use crate::sandbox::container::spec::{
    LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER, Seccomp, current_owner,
};
use crate::sandbox::engine::paths::HostPaths;

/// The cache's directory under the data directory.
pub const DIR_NAME: &str = "packages";
/// Most files in one set (scikit-learn with its dependencies has about 2,000).
const MAX_FILES: u64 = 100_000;
/// Output of the installer kept (its answer is one line; the rest is for a failure's cause).
const MAX_OUTPUT: usize = 1 << 20;
/// Processes and threads the installer may run (pip and its subprocesses).
const PIDS_LIMIT: i64 = 256;
/// The installer's memory besides its /tmp, which counts against it.
const MEMORY_BYTES: i64 = 1 << 30;
/// pip's room in /tmp besides the downloads and the unpacked set (twice the set's bound).
const TMP_BYTES: u64 = 256 << 20;

/// Installs in a container of its own on the server's engine.
pub(crate) struct EngineInstaller {
    engine: Engine,
    image: String,
    ids: (u32, u32),
    host_paths: HostPaths,
    seccomp: Seccomp,
    env: Vec<String>,
    ca_file: Option<PathBuf>,
    /// The bundle was named (`--packages-ca-file`, `PIP_CERT`) rather than the host's default.
    ca_named: bool,
    network: String,
    wheelhouse: Option<PathBuf>,
    timeout: Duration,
    max_set_bytes: u64,
}

#[async_trait::async_trait]
impl Installer for EngineInstaller {
    async fn install(
        &self,
        requirements: &[String],
        staging: &Path,
    ) -> Result<InstallAnswer, InstallFailure> {
        let failed = |said: String| InstallFailure::Failed { said };
        let for_engine = |p: &Path| {
            (self.host_paths)
                .to_engine(&p.canonicalize().unwrap_or(p.to_path_buf()))
                .map_err(|e| failed(e.to_string()))
        };
        let spec = InstallerSpec {
            image: self.image.clone(),
            uid: self.ids.0,
            gid: self.ids.1,
            out: for_engine(staging)?,
            wheelhouse: self.wheelhouse.as_deref().map(for_engine).transpose()?,
            ca_file: self.ca_file()?,
            network: self.network.clone(),
            env: self.env.clone(),
            memory_bytes: MEMORY_BYTES + (TMP_BYTES + 2 * self.max_set_bytes) as i64,
            tmpfs_bytes: TMP_BYTES + 2 * self.max_set_bytes,
            pids_limit: PIDS_LIMIT,
            seccomp: self.seccomp.clone(),
            labels: HashMap::from([
                (LABEL_MANAGED.to_string(), "true".to_string()),
                (LABEL_INSTANCE.to_string(), "installer".to_string()),
                (LABEL_OWNER.to_string(), current_owner()),
            ]),
            driver: DRIVER.to_string(),
            requirements: requirements.to_vec(),
        };
        let name = format!("cem-install-{}", uuid::Uuid::new_v4().simple());
        let finished = (self.engine)
            .run_to_end(&name, installer_body(&spec), self.timeout, MAX_OUTPUT)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if finished.timed_out {
            return Err(InstallFailure::TimedOut {
                secs: self.timeout.as_secs(),
            });
        }
        read_answer(&finished.stdout, finished.exit_code, &finished.stderr)
    }
}

impl EngineInstaller {
    /// The certificate bundle as the engine names it. The host's default bundle may be the
    /// server container's own file, which the engine cannot mount: the installer then uses
    /// the image's bundle. A named one must be mountable.
    fn ca_file(&self) -> Result<Option<PathBuf>, InstallFailure> {
        let Some(file) = &self.ca_file else {
            return Ok(None);
        };
        match self.host_paths.to_engine(file) {
            Ok(path) => Ok(Some(path)),
            Err(_) if !self.ca_named => Ok(None),
            Err(e) => Err(InstallFailure::Failed {
                said: format!(
                    "the certificate bundle {} cannot be given to the installer: {e}. Put it on a volume the server's container mounts",
                    file.display()
                ),
            }),
        }
    }
}

/// What the cache needs from the server's start.
pub(crate) struct PackagesFrom<'a> {
    pub engine: &'a Engine,
    pub image: &'a str,
    pub host_paths: &'a HostPaths,
    pub seccomp: &'a Seccomp,
    /// The ids sandboxes run as on this engine, given the server's own
    /// (`EngineLimits::sandbox_ids`).
    pub ids: (u32, u32),
}

/// Opens the cache under DATA_DIR/packages, or nothing with `--packages off`.
pub(crate) fn open(
    config: &Config,
    from: PackagesFrom<'_>,
) -> Result<Option<Arc<PackageSets>>, StartError> {
    let packages = &config.packages;
    if !packages.enabled() {
        return Ok(None);
    }
    let max_set_bytes = packages.packages_max_mb << 20;
    let installer = EngineInstaller {
        engine: from.engine.clone(),
        image: from.image.to_string(),
        // Never root inside: the server's own ids when it is not root, else nobody's.
        ids: if from.ids.0 == 0 && rustix::process::geteuid().is_root() {
            (65534, 65534)
        } else {
            from.ids
        },
        host_paths: from.host_paths.clone(),
        seccomp: match from.seccomp {
            Seccomp::Inline => Seccomp::Inline,
            Seccomp::File(path) => Seccomp::File(
                (from.host_paths)
                    .to_engine(path)
                    .map_err(|e| StartError::Packages(e.to_string()))?,
            ),
        },
        env: packages.installer_env(),
        ca_file: packages.ca_file(),
        ca_named: (packages.packages_ca_file.as_ref()).is_some_and(|f| !f.as_os_str().is_empty())
            || std::env::var_os("PIP_CERT").is_some_and(|v| !v.is_empty()),
        network: (packages.installer_network.clone()).unwrap_or_else(|| "bridge".into()),
        wheelhouse: packages.packages_wheelhouse.clone(),
        timeout: packages.timeout(),
        max_set_bytes,
    };
    let settings = PackageSettings {
        root: config.storage.data_dir().join(DIR_NAME),
        tree: TreeLimits {
            max_bytes: max_set_bytes,
            max_files: MAX_FILES,
        },
        cache_bytes: packages.packages_cache_mb << 20,
        source: packages.source(),
    };
    PackageSets::open(settings, Arc::new(installer))
        .map(|sets| Some(Arc::new(sets)))
        .map_err(|e| StartError::Packages(e.to_string()))
}
