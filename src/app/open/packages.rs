//! The server's package cache (`crate::packages`), opened once for every tenant, and its
//! installer: `images/installer/driver.py` in a container made from the sandbox image
//! (`sandbox::container::installer`), so the resolution is for the image's exact Python and
//! platform. pip runs there because it is the reference resolver for the index and the
//! wheels, and because in a container it reaches the index and nothing else: no network of its
//! own, the configured index's hosts through the server's egress proxy ([`InstallerEgress`],
//! the server verifying the index's certificate and going through the operator's proxy), no
//! workspace, no secrets, no user code, and no file of the host but its staging directory.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::app::StartError;
use crate::app::open::egress::ServerEgress;
use crate::config::Config;
use crate::gateway::egress::connect::Connector;
use crate::gateway::egress::rules::EgressRules;
use crate::gateway::egress::{Egress, EgressLimits, Grant};
use crate::packages::installer::InstallAnswer;
use crate::packages::installer::{DRIVER, read_answer};
use crate::packages::{InstallFailure, Installer, PackageSets, PackageSettings, TreeLimits};
use crate::sandbox::container::egress_dir::EgressDir;
use crate::sandbox::container::installer::{InstallerSpec, installer_body};
use crate::sandbox::container::spec::{
    LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER, Seccomp, current_owner,
};
use crate::sandbox::engine::paths::HostPaths;
use crate::sandbox::{Engine, StateDirs};

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
    /// How it reaches the index (none with a wheelhouse).
    way_out: Option<InstallerEgress>,
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
        let name = format!("cem-install-{}", uuid::Uuid::new_v4().simple());
        let way_out = (self.way_out.as_ref()).map(|w| w.open(&name)).transpose()?;
        let mut env = self.env.clone();
        if self.way_out.as_ref().is_some_and(|w| w.http) {
            env.push("CEM_EGRESS_HTTP=1".into());
        }
        let spec = InstallerSpec {
            image: self.image.clone(),
            uid: self.ids.0,
            gid: self.ids.1,
            out: for_engine(staging)?,
            wheelhouse: self.wheelhouse.as_deref().map(for_engine).transpose()?,
            egress: way_out.as_ref().map(|w| w.engine.clone()),
            env,
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
        let finished = (self.engine)
            .run_to_end(&name, installer_body(&spec), self.timeout, MAX_OUTPUT)
            .await
            .map_err(|e| failed(e.to_string()))?;
        if finished.timed_out {
            return Err(InstallFailure::TimedOut {
                secs: self.timeout.as_secs(),
            });
        }
        let answer = read_answer(&finished.stdout, finished.exit_code, &finished.stderr);
        match (answer, way_out) {
            (Err(e), Some(way)) => Err(way.explain(e)),
            (answer, _) => answer,
        }
    }
}

/// The installer's way out: for each install, an egress directory of its own with a socket
/// served by a grant of the index's hosts alone (`gateway::egress::installer`), reached by the
/// server with the packages' roots and the operator's proxy.
pub(crate) struct InstallerEgress {
    egress: Arc<Egress>,
    connector: Arc<Connector>,
    rules: EgressRules,
    limits: EgressLimits,
    /// This server's installer directories (`<--egress-socket-dir>/<id>/`).
    dirs: StateDirs,
    /// Some index is plain `http://`.
    http: bool,
}

/// One install's way out, open while it runs: dropped, the socket stops and its directory goes.
struct OpenWayOut {
    /// The directory as the engine names it.
    engine: PathBuf,
    host: PathBuf,
    grant: Arc<Grant>,
    _listening: crate::sandbox::run::egress::Listening,
}

impl OpenWayOut {
    /// A failed install's cause as the server saw it, when pip's words hide it (a proxy's 502
    /// reads "no version" to pip): the index unreachable, or a link off the index.
    fn explain(&self, failure: InstallFailure) -> InstallFailure {
        let Some(problem) = self.grant.last_problem() else {
            return failure;
        };
        let asked = format!("{} {}{}", problem.method, problem.host, problem.path);
        match (&failure, problem.error) {
            (InstallFailure::HashMismatch { .. } | InstallFailure::Unhashed { .. }, _) => failure,
            (_, Some(error)) => InstallFailure::Unreachable { said: error },
            (_, None) => InstallFailure::Failed {
                said: format!(
                    "the index sent pip to {asked}, which is not the package index (HTTP {}): the installer reaches the configured index and nothing else; name that host with PIP_FIND_LINKS or PIP_EXTRA_INDEX_URL if it is meant",
                    problem.status
                ),
            },
        }
    }
}

impl Drop for OpenWayOut {
    fn drop(&mut self) {
        crate::sandbox::container::state_dir::remove(&self.host);
    }
}

impl InstallerEgress {
    fn open(&self, name: &str) -> Result<OpenWayOut, InstallFailure> {
        let failed = |e: std::io::Error| InstallFailure::Failed {
            said: format!("the installer's way to the index could not be opened: {e}"),
        };
        let dir = EgressDir {
            dir: self.dirs.for_container(name),
            ca_pem: Arc::from(self.egress.ca_pem()),
        };
        crate::host::blocking_here(|| dir.create()).map_err(failed)?;
        let grant = Arc::new(Grant::with(
            self.egress.clone(),
            self.connector.clone(),
            self.limits,
            self.rules.clone(),
            None,
            Arc::default(),
        ));
        let listening = crate::sandbox::run::egress::listen(&dir.dir.host, grant.clone());
        let listening = listening.map_err(|e| {
            crate::sandbox::container::state_dir::remove(&dir.dir.host);
            failed(e)
        })?;
        Ok(OpenWayOut {
            engine: dir.dir.engine.clone(),
            host: dir.dir.host.clone(),
            grant,
            _listening: listening,
        })
    }
}

/// The installer's way out under the server's egress: the index's hosts, the packages' roots,
/// the operator's proxy. None with a wheelhouse.
fn installer_egress(
    config: &Config,
    server: Option<&ServerEgress>,
) -> Result<Option<InstallerEgress>, StartError> {
    let packages = &config.packages;
    let urls = packages.index_urls();
    let (Some(server), false) = (server, urls.is_empty()) else {
        return Ok(None);
    };
    let fail = |why: String| StartError::Packages(why);
    let rules = crate::gateway::egress::installer::installer_rules(&urls).map_err(fail)?;
    // A named bundle is all pip would trust (PIP_CERT's meaning): the system's roots only
    // without one.
    let named = packages.ca_file();
    let roots = match &named {
        Some(file) => crate::config::pem_roots(file, "--packages-ca-file")?,
        None => Vec::new(),
    };
    let proxy = (packages.proxy())
        .map(|url| {
            reqwest::Proxy::all(&url)
                .map(|p| p.no_proxy(reqwest::NoProxy::from_env()))
                .map_err(|e| fail(format!("the proxy {url:?} (HTTPS_PROXY): {e}")))
        })
        .transpose()?;
    let never = crate::gateway::egress::address::Never::default();
    let connector = Connector::new(roots, named.is_none(), never, packages.timeout(), proxy)
        .map_err(|e| fail(e.to_string()))?;
    let max_set = packages.packages_max_mb << 20;
    let limits = EgressLimits {
        max_requests: 10_000,
        max_bytes_in: 4 * max_set + (256 << 20),
        max_bytes_out: 16 << 20,
        max_connections: 32,
        max_response_bytes: max_set + (64 << 20),
        // The installer's grant has no personal data to scan.
        max_scanned_bytes: 0,
        timeout: packages.timeout(),
    };
    let dirs = server.installer_dirs().map_err(|e| fail(e.to_string()))?;
    Ok(Some(InstallerEgress {
        egress: server.egress.clone(),
        connector: Arc::new(connector),
        http: rules.entries().iter().any(|e| e.http),
        rules,
        limits,
        dirs,
    }))
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
    /// The server's egress, which the installer reaches the index through.
    pub egress: Option<&'a ServerEgress>,
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
        way_out: installer_egress(config, from.egress)?,
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
