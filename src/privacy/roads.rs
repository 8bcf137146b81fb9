//! rmcp's constructors of what reaches the model by the roads other than a tool's response,
//! each taking its texts as [`Shown`]: errors, resources and their contents, progress reports,
//! task statuses, resource notifications. clippy.toml bans rmcp's own constructors of these
//! (`disallowed-methods`) and the types with public fields (`disallowed-types`); the crate
//! denies both lints, and the privacy module is where they are allowed.

use base64::Engine as _;
use rmcp::model::{
    ErrorCode, ErrorData, ProgressNotificationParam, ProgressToken, Resource, ResourceContents,
    ResourceUpdatedNotificationParam,
};
use rmcp::service::{SubscriptionSendError, SubscriptionSink};
use rmcp::task_manager::{TaskContext, TaskOptions};

use super::Shown;

/// rmcp's JSON-RPC error, under the one name the rest of the crate may use for it (handlers
/// return it): its values are made here ([`refusal`], [`super::Privacy::refusal`]), and no
/// struct literal of it is written outside this module (tests/privacy_lints.rs).
pub type Refusal = ErrorData;

/// A JSON-RPC error whose message the model reads.
pub fn refusal(code: ErrorCode, message: Shown) -> ErrorData {
    ErrorData::new(code, message.into_string(), None)
}

/// A `notifications/progress` of a request.
pub fn progress_note(
    token: ProgressToken,
    progress: f64,
    message: Shown,
) -> ProgressNotificationParam {
    ProgressNotificationParam::new(token, progress).with_message(message.into_string())
}

/// A task's options with its first status message.
pub fn with_task_status(options: TaskOptions, message: Shown) -> TaskOptions {
    options.with_status_message(message.into_string())
}

/// A running task's status message, as `tasks/get` shows it.
pub fn set_task_status(task: &TaskContext, message: Shown) {
    task.set_status_message(message.into_string());
}

/// A resource as `resources/list` lists it.
pub fn resource(uri: Shown, name: Shown) -> Resource {
    Resource::new(uri.into_string(), name.into_string())
}

/// A text resource's contents, under the URI the client asked for.
pub fn text_contents(text: Shown, requested_uri: String) -> ResourceContents {
    ResourceContents::text(text.into_string(), requested_uri)
}

/// A binary resource's contents (bytes, not text: nothing the engine reads), under the URI the
/// client asked for.
pub fn blob_contents(bytes: &[u8], requested_uri: String) -> ResourceContents {
    let blob = base64::engine::general_purpose::STANDARD.encode(bytes);
    ResourceContents::blob(blob, requested_uri)
}

/// A handshake-era session's `notifications/resources/updated`.
pub fn resource_updated(uri: Shown) -> ResourceUpdatedNotificationParam {
    ResourceUpdatedNotificationParam::new(uri.into_string())
}

/// A listen stream's `notifications/resources/updated`.
pub async fn notify_resource_updated(
    sink: &SubscriptionSink,
    uri: Shown,
) -> Result<(), SubscriptionSendError> {
    sink.notify_resource_updated(uri.into_string()).await
}
