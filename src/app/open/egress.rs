//! The server's guarded egress, opened when the upstreams file has an `egress` object or the
//! package installer needs a way to its index: the authority and TLS client
//! ([`crate::gateway::egress::Egress`]), and the root of the containers' egress directories on
//! local disk, as this process and as the engine name it. Each tenant then gets the entries it
//! may use, its counters, and (when it has entries) an egress directory per container.

use std::path::Path;
use std::sync::Arc;

use crate::app::{Shared, StartError};
use crate::config::Config;
use crate::gateway::egress::address::Never;
use crate::gateway::egress::personal::EgressPii;
use crate::gateway::egress::rules::EgressRules;
use crate::gateway::egress::stats::EgressStats;
use crate::gateway::egress::{Egress, Grant};
use crate::pii::PiiEngine;
use crate::sandbox::StateDirs;
use crate::sandbox::container::egress_dir::EgressDirs;
use crate::sandbox::engine::paths::HostPaths;

/// What every tenant's egress shares.
pub(crate) struct ServerEgress {
    pub egress: Arc<Egress>,
    pub rules: EgressRules,
    /// `--egress-socket-dir`, on the host and as the engine names it.
    pub root: StateDirs,
}

/// One tenant's egress: its entries (never empty), its counters and its personal data.
pub(crate) struct TenantEgress {
    pub egress: Arc<Egress>,
    pub rules: EgressRules,
    pub stats: Arc<EgressStats>,
    pub pii: Option<Arc<EgressPii>>,
}

impl TenantEgress {
    /// A grant for one execution, asking `confirm` where an entry's policy says so.
    pub fn grant(&self, confirm: Option<Arc<dyn crate::gateway::confirm::Confirm>>) -> Arc<Grant> {
        Arc::new(Grant::new(
            self.egress.clone(),
            self.rules.clone(),
            confirm,
            self.stats.clone(),
            self.pii.clone(),
        ))
    }
}

impl ServerEgress {
    /// A directory of this server's for the installer's egress directories, reaped with the
    /// sandboxes' when the server is gone.
    pub fn installer_dirs(&self) -> std::io::Result<StateDirs> {
        let id = format!("installer-{}", uuid::Uuid::new_v4().simple());
        let owner = crate::sandbox::container::spec::current_owner();
        StateDirs::open(&self.root.host, &self.root.engine, &id, &owner, None)
    }
}

/// The server's egress for `rules`, or for the package installer alone (none when neither
/// needs it).
pub(crate) fn open(
    config: &Config,
    rules: EgressRules,
    host_paths: &HostPaths,
) -> Result<Option<ServerEgress>, StartError> {
    let installer = config.packages.enabled() && !config.packages.index_urls().is_empty();
    if rules.is_empty() && !installer {
        return Ok(None);
    }
    let egress = Egress::new(
        config.egress.limits(),
        config.egress.extra_roots()?,
        never(config),
    )
    .map_err(|e| StartError::Egress(e.to_string()))?;
    let dir = config.egress.socket_dir();
    let root = socket_root(&dir, host_paths)?;
    // What servers that are gone left (the sandboxes' and the installer's directories).
    crate::host::blocking_here(|| crate::sandbox::cleanup::reaper::reap_state_dirs(&root.host));
    tracing::info!(
        "guarded egress: {} entries; sandboxes' proxy sockets under {}",
        rules.entries().len(),
        dir.display()
    );
    Ok(Some(ServerEgress {
        egress: Arc::new(egress),
        rules,
        root,
    }))
}

/// The tenant's egress and its containers' directories (none when no entry is its); its
/// personal data goes through `pii` (none with `--pii-output off`) under the upstreams
/// file's flow rules.
pub(crate) fn for_tenant(
    shared: &Shared,
    tenant: Option<&str>,
    gid: Option<u32>,
    pii: Option<Arc<PiiEngine>>,
) -> (Option<TenantEgress>, Option<EgressDirs>) {
    let Some(server) = &shared.egress else {
        return (None, None);
    };
    let rules = server.rules.for_tenant(tenant);
    if rules.is_empty() {
        return (None, None);
    }
    let dirs = EgressDirs {
        dirs: StateDirs {
            gid,
            ..server.root.clone()
        },
        ca_pem: Arc::from(server.egress.ca_pem()),
    };
    let flow = shared
        .gateway
        .as_ref()
        .map(|g| g.flow().clone())
        .unwrap_or_default();
    let pii = pii.map(|engine| Arc::new(EgressPii::new(engine, &rules, &flow)));
    let egress = TenantEgress {
        egress: server.egress.clone(),
        rules,
        stats: Arc::default(),
        pii,
    };
    (Some(egress), Some(dirs))
}

/// Addresses no entry reaches: the server's own listeners, and the engine's API when
/// `DOCKER_HOST` names it on TCP.
fn never(config: &Config) -> Never {
    let mut addrs = vec![config.transport.listen];
    addrs.extend(config.operations.metrics_listen);
    if let Ok(docker_host) = std::env::var("DOCKER_HOST") {
        addrs.extend(engine_tcp(&docker_host));
    }
    Never::new(addrs)
}

/// The socket addresses of the engine API `docker_host` names on TCP (none for a Unix socket,
/// or a name that does not resolve); the port defaults to 2375, as the engine's client does.
fn engine_tcp(docker_host: &str) -> Vec<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let Some(rest) = ["tcp://", "http://", "https://"]
        .iter()
        .find_map(|p| docker_host.strip_prefix(p))
    else {
        return Vec::new();
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let has_port = !authority.ends_with(']')
        && (authority.rsplit_once(':')).is_some_and(|(_, port)| port.parse::<u16>().is_ok());
    let with_port = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:2375")
    };
    (with_port.to_socket_addrs()).map_or_else(|_| Vec::new(), Iterator::collect)
}

/// The root of the containers' egress directories: made (only its owner may list it), and
/// named as the engine names it.
fn socket_root(dir: &Path, host_paths: &HostPaths) -> Result<StateDirs, StartError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let fail = |why: String| {
        StartError::Egress(format!(
            "the sockets' directory {} (--egress-socket-dir): {why}",
            dir.display()
        ))
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(dir)
        .map_err(|e| fail(e.to_string()))?;
    // In a shared /tmp another user could have made it first, or put a link there.
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| fail(e.to_string()))?;
    if !meta.is_dir() || meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(fail(
            "it is a link, or belongs to another user: point --egress-socket-dir at a directory of this server's user".into(),
        ));
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| fail(e.to_string()))?;
    let host = dir.canonicalize().map_err(|e| fail(e.to_string()))?;
    let engine = host_paths.to_engine(&host).map_err(|e| {
        fail(format!(
            "{e}; under compose, mount a host directory there (compose.yaml mounts CEM_EGRESS_HOST_DIR)"
        ))
    })?;
    Ok(StateDirs {
        host,
        engine,
        gid: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_api_on_tcp_is_named_with_its_port() {
        let one = |s: &str| {
            engine_tcp(s)
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(one("tcp://127.0.0.1:2376"), ["127.0.0.1:2376"]);
        assert_eq!(one("tcp://10.1.2.3"), ["10.1.2.3:2375"]);
        assert_eq!(one("http://[::1]/"), ["[::1]:2375"]);
        assert_eq!(one("tcp://[::1]:4243"), ["[::1]:4243"]);
        assert!(one("unix:///var/run/docker.sock").is_empty());
        assert!(one("ssh://user@host").is_empty());
    }
}
