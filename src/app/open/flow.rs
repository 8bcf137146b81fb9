//! What sandbox code may hold in clear: a tenant's flow over its upstreams and its `egress`
//! entries together (`gateway::flow`), for `detokenize_pii` and the tokens the model writes
//! into the workspace. A value of an upstream or a host whose values enter the sandbox
//! tokenized stays a token there: in clear, the code could send it anywhere.

use std::sync::Arc;

use crate::app::Shared;
use crate::app::open::egress::TenantEgress;
use crate::gateway::GatewayView;
use crate::privacy::MayHold;

/// The tenant's rule for what the sandbox may hold (none without an upstreams file: every
/// value).
pub(crate) fn sandbox_may_hold(
    shared: &Shared,
    view: Option<&GatewayView>,
    egress: Option<&TenantEgress>,
) -> Option<MayHold> {
    let gateway = shared.gateway.clone()?;
    let mut sources = view.map(GatewayView::server_names).unwrap_or_default();
    if let Some(egress) = egress {
        sources.extend(egress.rules.entries().iter().map(|e| e.origin()));
    }
    Some(Arc::new(move |origins| {
        gateway.flow().sandbox_may_hold(origins, &sources)
    }))
}
