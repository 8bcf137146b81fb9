//! `request_upload` and `request_download`: links a person opens in a browser, so that a file
//! reaches the workspace, or leaves it, without passing through the model. The links
//! themselves are [`crate::app::links`]'s; these tools shape the answer.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::CodeExecutionServer;
use crate::app::links::{IssueError, Issued, UploadRequest};
use crate::privacy::{Json, Reply};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadArgs {
    #[serde(default)]
    pub filename: Option<String>,
    #[serde(default)]
    pub max_mb: Option<u64>,
    #[serde(default)]
    pub expires_in_seconds: Option<u64>,
    #[serde(default)]
    pub overwrite: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DownloadArgs {
    pub path: String,
    #[serde(default)]
    pub expires_in_seconds: Option<u64>,
}

// The listing keeps to the fields every answer has (`success`, `url`, `expires_at`); the
// tools' references (docs://tools/NAME) describe them all.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct LinkResponse {
    pub success: bool,
    /// The link to give the person; it works once.
    pub url: String,
    /// When the link stops working (RFC 3339, UTC).
    pub expires_at: String,
    /// The workspace path an upload will have, when the link fixes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The `workspace:///` URI of that path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// An upload's size limit, or a download's size, in bytes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_bytes: u64,
    /// The link's id, as the audit trail names it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub link_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LinkResponse {
    fn of(issued: Issued, message: String) -> Self {
        Self {
            success: true,
            uri: issued.name.as_deref().map(crate::workspace::uri::uri_for),
            url: issued.url,
            expires_at: issued.expires_at,
            name: issued.name,
            max_bytes: issued.max_bytes,
            link_id: issued.link_id,
            message,
        }
    }
}

#[tool_router(router = link_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "A link the user opens to upload a file into the workspace. Give them `url`, then check list_workspace_files.",
        annotations(destructive_hint = false, open_world_hint = false)
    )]
    async fn request_upload(
        &self,
        Parameters(args): Parameters<UploadArgs>,
    ) -> Result<Json<LinkResponse>, Reply> {
        let privacy = self.app.privacy();
        let request = UploadRequest {
            filename: args.filename.map(|f| privacy.from_model(f)),
            max_mb: args.max_mb,
            expires_in_seconds: args.expires_in_seconds,
            overwrite: args.overwrite,
        };
        let issued = self
            .app
            .issue_upload(request)
            .await
            .map_err(|e| self.refused(e))?;
        let message = format!(
            "Give the user this link to upload their file (it works once, until {}); the file will appear in the workspace, listed by list_workspace_files.",
            issued.expires_at
        );
        Ok(privacy.json_keeping(LinkResponse::of(issued, message), MINTED))
    }

    #[tool(
        description = "A link the user opens to download a workspace file.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn request_download(
        &self,
        Parameters(args): Parameters<DownloadArgs>,
    ) -> Result<Json<LinkResponse>, Reply> {
        let privacy = self.app.privacy();
        let path = privacy.from_model(args.path);
        let issued = self
            .app
            .issue_download(path, args.expires_in_seconds)
            .await
            .map_err(|e| self.refused(e))?;
        let message = format!(
            "Give the user this link to download the file (it works once, until {}).",
            issued.expires_at
        );
        Ok(privacy.json_keeping(LinkResponse::of(issued, message), MINTED))
    }
}

/// The fields the server minted whole (its public URL and a signed token, a random id):
/// nothing of the user's, and a token the engine took for a key would break the link.
const MINTED: &[&str] = &["url", "link_id"];

impl CodeExecutionServer {
    fn refused(&self, e: IssueError) -> Reply {
        match e {
            IssueError::Workspace(e) => self.failure(e),
            e => self.error(e),
        }
    }
}
