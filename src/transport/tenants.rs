//! The tenants of an HTTP server with bearer tokens. Each tenant is its own [`App`] (workspace,
//! skills, PII vault, stats, sandbox pool and concurrency limit, under
//! `DATA_DIR/tenants/NAME/`) behind its own MCP session manager, so a session id of one tenant
//! means nothing to another. A tenant is opened at its first authenticated request, not at
//! start: configured tenants that never call cost no containers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use crate::app::{App, Shared, StartError};
use crate::tenancy::tokens::{AuthFailure, TokenTable};

/// Why a request found no tenant to serve it.
#[derive(Debug, thiserror::Error)]
pub enum TenantError {
    #[error(transparent)]
    Auth(#[from] AuthFailure),
    /// The cause goes to the server's log only: it names server paths.
    #[error(
        "the server could not open this tenant's workspace or skills: retry later, or ask the administrator, who finds the cause in the server's log"
    )]
    Open(StartError),
}

/// One tenant's application and whatever the transport keeps per tenant (`S`: the HTTP
/// service with its sessions).
pub struct Tenant<S> {
    pub app: Arc<App>,
    pub service: S,
}

pub struct Tenants<S> {
    shared: Arc<Shared>,
    tokens: TokenTable,
    make_service: Box<dyn Fn(Arc<App>) -> S + Send + Sync>,
    open: Mutex<OpenTenants<S>>,
}

/// Each tenant's slot, filled at its first request.
type OpenTenants<S> = HashMap<String, Arc<OnceCell<Arc<Tenant<S>>>>>;

impl<S> Tenants<S> {
    pub fn new(
        shared: Arc<Shared>,
        tokens: TokenTable,
        make_service: impl Fn(Arc<App>) -> S + Send + Sync + 'static,
    ) -> Self {
        Self {
            shared,
            tokens,
            make_service: Box::new(make_service),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The tenant an `Authorization` header value authenticates, opened on first use (two
    /// first requests at once open it once).
    pub async fn get(&self, authorization: Option<&[u8]>) -> Result<Arc<Tenant<S>>, TenantError> {
        let name = self.tokens.authenticate(authorization)?.to_string();
        let cell = self
            .open
            .lock()
            .expect("the tenant map is never poisoned")
            .entry(name.clone())
            .or_default()
            .clone();
        let tenant = cell
            .get_or_try_init(|| async {
                let dirs = self.shared.config().storage.tenant_dirs(&name);
                let app = App::open(self.shared.clone(), dirs, Some(&name))
                    .await
                    .map_err(|e| {
                        tracing::error!("cannot open tenant {name}: {e}");
                        TenantError::Open(e)
                    })?;
                let app = Arc::new(app);
                Ok::<_, TenantError>(Arc::new(Tenant {
                    service: (self.make_service)(app.clone()),
                    app,
                }))
            })
            .await?;
        Ok(tenant.clone())
    }

    /// The tenants opened so far.
    pub fn opened(&self) -> Vec<Arc<Tenant<S>>> {
        let open = self.open.lock().expect("the tenant map is never poisoned");
        open.values().filter_map(|c| c.get().cloned()).collect()
    }

    /// Shuts every opened tenant's sandbox down (at once: each waits for its removals).
    pub async fn shutdown(&self) {
        let opened = self.opened();
        futures::future::join_all(opened.iter().map(|t| t.app.shutdown())).await;
        self.shared.shutdown().await;
    }
}
