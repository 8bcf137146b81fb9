//! The tenants of an HTTP server with bearer tokens or OAuth. Each tenant is its own [`App`] (workspace,
//! skills, PII vault, stats, sandbox pool and concurrency limit, under
//! `DATA_DIR/tenants/NAME/`) behind its own MCP session manager, so a session id of one tenant
//! means nothing to another. A tenant is opened at its first authenticated request, not at
//! start: configured tenants that never call cost no containers.
//!
//! The server answers while it starts, so a tenant's first request may come before what every
//! tenant shares is ready: the tenant's start ([`App::begin_tenant`]) waits for the shared one,
//! then opens the tenant, in the background, and its sessions are answered meanwhile (`S`, made
//! from that start). On a server that has started, a tenant's first request waits for its
//! opening (a second or so), as it did before. Authentication needs neither: a missing or wrong
//! token is answered at once. A tenant that could not be opened is started anew at its next
//! request (its sessions are gone with it: their clients start new ones).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::app::{App, Shared, StartError, StartState, Starting};

/// One tenant's start and whatever the transport keeps per tenant (`S`: the HTTP service with
/// its sessions).
pub struct Tenant<S> {
    pub starting: Starting,
    pub service: S,
}

impl<S> Tenant<S> {
    /// The tenant's app, once it is open.
    pub fn app(&self) -> Option<Arc<App>> {
        match self.starting.now() {
            StartState::Ready(app) => Some(app),
            _ => None,
        }
    }

    /// Whether its opening failed for a cause of its own (not the server's start, nor a stop),
    /// so that its next request opens it anew.
    fn failed_alone(&self) -> bool {
        matches!(self.starting.now(), StartState::Failed(e) if matches!(*e, StartError::TenantUnavailable))
    }
}

/// How long a request waits for its tenant's opening on a server that has started.
pub const OPEN_WAIT: Duration = Duration::from_secs(10);

pub struct Tenants<S> {
    shared: Starting<Arc<Shared>>,
    make_service: Box<dyn Fn(Starting) -> S + Send + Sync>,
    open: Mutex<HashMap<String, Arc<Tenant<S>>>>,
}

impl<S> Tenants<S> {
    /// The tenants over the shared start; `make_service` makes what serves a tenant's
    /// sessions from its start.
    pub fn new(
        shared: Starting<Arc<Shared>>,
        make_service: impl Fn(Starting) -> S + Send + Sync + 'static,
    ) -> Self {
        Self {
            shared,
            make_service: Box::new(make_service),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The tenant `name` (an authenticated caller's), its start begun at its first request
    /// (two first requests at once begin it once). On a server that has started, its opening
    /// (a second or so) is waited for up to [`OPEN_WAIT`], so that its first request meets it
    /// open; while the server starts it is not.
    pub async fn get(&self, name: &str) -> Arc<Tenant<S>> {
        let tenant = self.begun(name);
        if matches!(self.shared.now(), StartState::Ready(_)) {
            tenant.starting.wait(OPEN_WAIT).await;
        }
        tenant
    }

    /// The tenant `name`, its start begun if it has none yet or its opening failed.
    fn begun(&self, name: &str) -> Arc<Tenant<S>> {
        let mut open = self.open.lock().expect("the tenant map is never poisoned");
        if let Some(tenant) = open.get(name)
            && !tenant.failed_alone()
        {
            return tenant.clone();
        }
        let starting = App::begin_tenant(&self.shared, name);
        let tenant = Arc::new(Tenant {
            service: (self.make_service)(starting.clone()),
            starting,
        });
        open.insert(name.to_string(), tenant.clone());
        tenant
    }

    /// The tenants open now (started, not failed).
    pub fn opened(&self) -> Vec<Arc<App>> {
        let open = self.open.lock().expect("the tenant map is never poisoned");
        open.values().filter_map(|t| t.app()).collect()
    }

    /// Stops the tenants' starts still running and the shared one, then shuts down every
    /// opened tenant's sandbox (at once: each waits for its removals) and what they share.
    pub async fn shutdown(&self) {
        let tenants: Vec<Arc<Tenant<S>>> = {
            let open = self.open.lock().expect("the tenant map is never poisoned");
            open.values().cloned().collect()
        };
        let ended = futures::future::join_all(tenants.iter().map(|t| t.starting.cancel())).await;
        let apps = ended.into_iter().filter_map(|state| match state {
            StartState::Ready(app) => Some(app),
            _ => None,
        });
        futures::future::join_all(apps.map(|app| async move { app.shutdown().await })).await;
        if let StartState::Ready(shared) = self.shared.cancel().await {
            shared.shutdown().await;
        }
    }
}
