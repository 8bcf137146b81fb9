//! An execution's egress: the grant its job carries (`sandbox::run::egress` serves it on the
//! container's proxy socket), whose records are read once the run is over.

use std::sync::Arc;

use crate::app::App;
use crate::gateway::Confirm;
use crate::gateway::egress::Grant;

impl App {
    /// A grant for one execution, when the tenant has egress entries.
    pub(super) fn egress_grant(&self, confirm: Option<Arc<dyn Confirm>>) -> Option<Arc<Grant>> {
        self.egress.as_ref().map(|e| e.grant(confirm))
    }
}
