//! The workspace as MCP resources (and, first in the listing, the sessions:
//! [`super::session_resources`]; the tools' references are [`super::reference`]'s, a template
//! here): `resources/list` (paged), `resources/templates/list`,
//! `resources/read`, and subscriptions. URI mapping and paging are [`crate::workspace::uri`]; file
//! access is [`crate::workspace`], the same calls the workspace tools make, with the same PII
//! rule (paths and text reach the client tokenized; tokens in a URI are turned back).
//!
//! Subscriptions are the session's: after a tool of this session (execute_code, write or
//! delete) changes a subscribed file, the session is sent `notifications/resources/updated`, and
//! `notifications/resources/list_changed` when files appeared or went away. Changes made by
//! other sessions are not announced.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ErrorCode, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult,
    ResourceTemplate,
};
use rmcp::{Peer, RoleServer};

use crate::app::App;
use crate::privacy::{self, Privacy, Refusal, Shown};
use crate::workspace::uri::{self, ResourceError};

/// URIs one session may subscribe to at once.
pub const MAX_SUBSCRIPTIONS: usize = 1000;

/// The URIs a session subscribed to.
#[derive(Debug, Clone, Default)]
pub struct Subscriptions(Arc<Mutex<BTreeSet<String>>>);

impl Subscriptions {
    pub fn subscribe(&self, privacy: &Privacy, uri: String) -> Result<(), Refusal> {
        uri::path_of(&uri).map_err(|e| invalid(privacy, e))?;
        let mut set = self.0.lock().expect("subscriptions lock");
        if set.len() >= MAX_SUBSCRIPTIONS && !set.contains(&uri) {
            return Err(privacy.refusal(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "at most {MAX_SUBSCRIPTIONS} subscriptions per session: unsubscribe from some first"
                ),
            ));
        }
        set.insert(uri);
        Ok(())
    }

    pub fn unsubscribe(&self, uri: &str) {
        self.0.lock().expect("subscriptions lock").remove(uri);
    }

    /// Tells the client which of `uris` (files that changed) it subscribed to changed, and
    /// that the list changed when `listing_changed`.
    pub async fn announce(&self, peer: &Peer<RoleServer>, uris: &[Shown], listing_changed: bool) {
        let updated: Vec<Shown> = {
            let set = self.0.lock().expect("subscriptions lock");
            uris.iter()
                .filter(|u| set.contains(u.as_str()))
                .cloned()
                .collect()
        };
        for uri in updated {
            let _ = peer
                .notify_resource_updated(privacy::resource_updated(uri))
                .await;
        }
        if listing_changed {
            let _ = peer.notify_resource_list_changed().await;
        }
    }
}

impl Subscriptions {
    /// Tells the client of a file that came in through an upload link: `resources/updated`
    /// for the URIs it subscribed to (each in its own words; every one of them when the
    /// change may be wider than its URIs), and that the list changed.
    pub async fn announce_arrival(
        &self,
        privacy: &Privacy,
        peer: &Peer<RoleServer>,
        change: &crate::app::events::ResourceChange,
    ) {
        let updated: Vec<String> = {
            let set = self.0.lock().expect("subscriptions lock");
            set.iter()
                .filter(|u| change.more || change.uris.contains(u))
                .cloned()
                .collect()
        };
        for uri in updated {
            let _ = peer
                .notify_resource_updated(privacy::resource_updated(privacy.echoed(uri)))
                .await;
        }
        if change.listing_changed || change.more {
            let _ = peer.notify_resource_list_changed().await;
        }
    }
}

fn invalid(privacy: &Privacy, e: ResourceError) -> Refusal {
    privacy.refusal(ErrorCode::INVALID_PARAMS, e)
}

/// The workspace path of a URI from the client (tokens turned back into values).
fn path_from_client(app: &App, uri: &str) -> Result<String, Refusal> {
    uri::path_of(uri)
        .map(|path| app.privacy().from_model(path))
        .map_err(|e| invalid(app.privacy(), e))
}

pub async fn list(app: &App, cursor: Option<String>) -> Result<ListResourcesResult, Refusal> {
    let listing = app
        .with_workspace(|ws| ws.list_files(""))
        .await
        .map_err(|e| app.privacy().refusal(ErrorCode::INTERNAL_ERROR, e))?;
    let (files, next) =
        uri::page(&listing, cursor.as_deref()).map_err(|e| invalid(app.privacy(), e))?;
    // The sessions first, on the first page: a tenant holds few (--session-max-count).
    let sessions = match cursor {
        None => super::session_resources::list(app),
        Some(_) => Vec::new(),
    };
    let resources = sessions
        .into_iter()
        .chain(files.iter().map(|path| {
            let shown = app.privacy().text(path.clone());
            let uri_shown = shown.clone().framed(uri::uri_for);
            let mut resource = privacy::resource(uri_shown, shown);
            resource.mime_type = Some(uri::mime_for(path));
            resource
        }))
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = next;
    Ok(result)
}

// The template's URI, name and description are constants: no data a call brought.
#[allow(clippy::disallowed_methods)]
pub fn templates() -> ListResourceTemplatesResult {
    let mut template = ResourceTemplate::new(uri::URI_TEMPLATE, "workspace file");
    template.description = Some(
        "A file of the sandbox workspace (/workspace/<path> inside code), by its path relative to the workspace".into(),
    );
    ListResourceTemplatesResult::with_all_items(vec![template, super::reference::template()])
}

pub async fn read(app: &App, uri: String) -> Result<ReadResourceResult, Refusal> {
    if super::skill_resources::is_skill_uri(&uri) {
        return super::skill_resources::read(app, uri).await;
    }
    if uri.starts_with(crate::sessions::view::SCHEME) {
        return super::session_resources::read(app, uri).await;
    }
    let path = path_from_client(app, &uri)?;
    let mime = uri::mime_for(&path);
    let file = app
        .with_workspace(move |ws| ws.read_file(&path))
        .await
        // Not found, not a regular file, a symlink, too large, a refused path: the tools' words,
        // which may quote the path with the values its tokens stand for.
        .map_err(|e| app.privacy().refusal(ErrorCode::RESOURCE_NOT_FOUND, e))?;
    let contents = if uri::is_text(&mime, &file.bytes) {
        let text = String::from_utf8(file.bytes).expect("checked as UTF-8");
        privacy::text_contents(app.privacy().text(text), uri).with_mime_type(mime)
    } else {
        privacy::blob_contents(&file.bytes, uri).with_mime_type(mime)
    };
    Ok(ReadResourceResult::new(vec![contents]))
}
