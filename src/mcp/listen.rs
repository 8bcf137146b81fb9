//! `subscriptions/listen` (MCP 2026-07-28), which replaced `resources/subscribe`: one request
//! per stream, whose filter names what the client wants to hear of. This module only turns the
//! tenant's events ([`crate::app::events`]) into the stream's notifications; which events a
//! stream gets, the bounds and what a lagging stream is told live there.
//!
//! Accepted: `toolsListChanged`, `resourcesListChanged`, and `resourceSubscriptions` for
//! `workspace:///` URIs (others are left out of the acknowledgment, which is how the client
//! learns which it got). Too many streams or URIs end the stream right after the
//! acknowledgment with an error saying what to do (rmcp acknowledges before it hands the
//! stream over).
//!
//! Sessions of the handshake era keep `resources/subscribe` (see `resources.rs`), and hear of
//! `tools/list` changes on their session ([`forward_tool_changes`]), since the server
//! advertises `tools.listChanged` to every client.

use std::time::Duration;

use rmcp::model::{ErrorCode, SubscriptionFilter};
use rmcp::service::{SubscriptionContext, SubscriptionSendError};
use rmcp::{Peer, RoleServer};
use tracing::Instrument;

use crate::app::App;
use crate::app::events::{Interest, ListenError, Notice};
use crate::privacy::Refusal;
use crate::workspace::uri;

/// How often a handshake-era forwarder checks that its session is still there.
const SESSION_CHECK: Duration = Duration::from_secs(10);

/// What this server accepts of `requested`: both list changes, and its workspace URIs.
pub fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let uris: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|u| uri::path_of(u).is_ok())
        .cloned()
        .collect();
    let mut filter = SubscriptionFilter::builder()
        .tools_list_changed()
        .resources_list_changed();
    if !uris.is_empty() {
        filter = filter.resource_subscriptions(uris);
    }
    filter.build()
}

/// Serves one stream until the client ends it or the tenant goes.
pub async fn listen(app: &App, context: SubscriptionContext) -> Result<(), Refusal> {
    let accepted = context.accepted();
    let interest = Interest {
        resources_list: accepted.resources_list_changed == Some(true),
        tools_list: accepted.tools_list_changed == Some(true),
        uris: accepted
            .resource_subscriptions
            .iter()
            .flatten()
            .cloned()
            .collect(),
    };
    let mut listener = app.events().listen(interest).map_err(|e| refused(app, e))?;
    let sink = context.sink();
    loop {
        let notice = tokio::select! {
            _ = context.cancelled() => return Ok(()),
            notice = listener.next() => match notice {
                Some(notice) => notice,
                None => return Ok(()),
            },
        };
        let sent = match notice {
            // A URI this stream subscribed to: the client's own words.
            Notice::ResourceUpdated(uri) => {
                let uri = app.privacy().echoed(uri);
                crate::privacy::notify_resource_updated(sink, uri).await
            }
            Notice::ResourcesListChanged => sink.notify_resource_list_changed().await,
            Notice::ToolsListChanged => sink.notify_tool_list_changed().await,
        };
        match sent {
            Ok(()) => {}
            Err(
                e @ (SubscriptionSendError::NotificationNotAccepted(_)
                | SubscriptionSendError::UnsupportedNotification(_)),
            ) => tracing::debug!("listen stream: {e}"),
            // The stream or its connection ended.
            Err(_) => return Ok(()),
        }
    }
}

fn refused(app: &App, e: ListenError) -> Refusal {
    let code = match e {
        ListenError::TooManyUris { .. } => ErrorCode::INVALID_PARAMS,
        ListenError::TooManyStreams { .. } => ErrorCode::INVALID_REQUEST,
    };
    app.privacy().refusal(code, e)
}

/// Sends `notifications/tools/list_changed` on a handshake-era session whenever the tenant's
/// `tools/list` changes, until the session ends (checked every [`SESSION_CHECK`]) or the
/// tenant goes. Only for a tenant with upstreams: without, the listing never changes.
pub fn forward_tool_changes(app: &App, peer: Peer<RoleServer>) {
    if !super::has_upstreams(app) {
        return;
    }
    let mut changes = app.events().tool_changes();
    let forward = async move {
        let mut check = tokio::time::interval(SESSION_CHECK);
        loop {
            tokio::select! {
                changed = changes.next() => {
                    if changed.is_none() || peer.notify_tool_list_changed().await.is_err() {
                        return;
                    }
                }
                _ = check.tick() => if peer.is_transport_closed() { return },
            }
        }
    };
    tokio::spawn(forward.instrument(app.span().clone()));
}

/// Tells a handshake-era session of the files that come in through upload links (no MCP
/// call of its own made them, so nothing else would), until the session ends or the tenant
/// goes.
pub fn forward_arrivals(
    app: &App,
    subscriptions: super::resources::Subscriptions,
    peer: Peer<RoleServer>,
) {
    let mut arrivals = app.events().arrivals();
    let privacy = app.privacy().clone();
    let forward = async move {
        let mut check = tokio::time::interval(SESSION_CHECK);
        loop {
            tokio::select! {
                change = arrivals.next() => match change {
                    Some(change) => subscriptions.announce_arrival(&privacy, &peer, &change).await,
                    None => return,
                },
                _ = check.tick() => if peer.is_transport_closed() { return },
            }
        }
    };
    tokio::spawn(forward.instrument(app.span().clone()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_both_list_changes_and_only_workspace_uris() {
        let requested = SubscriptionFilter::builder()
            .resource_subscriptions([
                "workspace:///a.txt",
                "file:///etc/passwd",
                "workspace:///b%2Fc",
            ])
            .build();
        let a = accepted(&requested);
        assert_eq!(a.tools_list_changed, Some(true));
        assert_eq!(a.resources_list_changed, Some(true));
        assert_eq!(
            a.resource_subscriptions,
            Some(vec!["workspace:///a.txt".to_string()])
        );
        // rmcp intersects this with what was asked: a filter without URIs gets none.
        assert_eq!(
            accepted(&SubscriptionFilter::new()).resource_subscriptions,
            None
        );
    }
}
