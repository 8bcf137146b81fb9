//! Sessions as MCP resources: `session://HANDLE` for each session of this tenant, listed with
//! `resources/list` and read as JSON (its variables with type, size, shape or length and a
//! short preview, its modules, revisions and packages), from the session's files alone. The
//! text takes the privacy path of every output: previews are tokenized. A new revision, a new
//! session and expired ones are announced to listen streams (`app::events`).

use rmcp::model::{ErrorCode, ReadResourceResult};

use crate::app::App;
use crate::privacy::{self, Refusal, Shown};
use crate::sessions::view;

pub use view::handle_of;

/// The tenant's sessions as resources.
// Each resource is made by `privacy::resource` from shown texts; what is set here after it
// is the server's own words (a MIME type, a fixed description).
#[allow(clippy::disallowed_types)]
pub fn list(app: &App) -> Vec<rmcp::model::Resource> {
    let mut handles = app.session_handles();
    handles.sort();
    handles
        .into_iter()
        .map(|handle| {
            // A handle is the server's own (`ses_` and hex digits): no data a call brought.
            let uri = view::uri(&handle);
            let name = format!("session {handle}");
            let mut resource = privacy::resource(app.privacy().text(uri), app.privacy().text(name));
            resource.mime_type = Some("application/json".into());
            resource.description = Some(
                "What this session holds: variables (type, size, shape, preview), revisions, packages"
                    .into(),
            );
            resource
        })
        .collect()
}

/// `resources/read` of `session://HANDLE`.
pub async fn read(app: &App, uri: String) -> Result<ReadResourceResult, Refusal> {
    let Some(handle) = handle_of(&uri) else {
        return Err(app.privacy().refusal(
            ErrorCode::INVALID_PARAMS,
            format!("{uri:?} is not a session's URI: session://HANDLE, HANDLE as a result's `session` gives it"),
        ));
    };
    let seen = app
        .session_view(handle.to_string())
        .await
        .map_err(|e| app.privacy().refusal(ErrorCode::RESOURCE_NOT_FOUND, e))?;
    let text = serde_json::to_string_pretty(&seen).expect("a view serializes");
    let shown: Shown = app.privacy().text(text);
    Ok(ReadResourceResult::new(vec![
        privacy::text_contents(shown, uri).with_mime_type("application/json"),
    ]))
}
