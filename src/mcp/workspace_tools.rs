//! Workspace file tools with the original's result fields (`success`, `message`, `filename`,
//! `content`, `size`, `path`, `files`, `count`, `error`). All path handling is in
//! `crate::workspace`, which never follows a link out of the workspace.

use base64::Engine as _;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::service::RequestContext;
use rmcp::{RoleServer, tool, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CodeExecutionServer, MessageResponse};
use crate::privacy::{Json, Reply};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// Relative to the workspace.
    pub filename: String,
    pub content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileArgs {
    /// Relative to the workspace.
    pub filename: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    // Default: the whole workspace.
    #[serde(default = "dot")]
    pub subpath: String,
}

fn dot() -> String {
    ".".into()
}

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ReadResponse {
    pub success: bool,
    pub filename: String,
    /// The file's text; for a file that is not UTF-8, its bytes in base64.
    pub content: String,
    /// "utf-8" or "base64".
    pub encoding: String,
    /// Size in bytes.
    pub size: u64,
}

impl ReadResponse {
    /// The field that holds the file, as text or as base64.
    const CONTENT: &str = "content";
}

/// `encoding` of a file that is not UTF-8 text.
const BASE64: &str = "base64";

#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ListResponse {
    pub success: bool,
    pub path: String,
    /// Regular files, relative to the workspace, sorted.
    pub files: Vec<String>,
    /// Each file's size in bytes, in the order of `files`.
    #[serde(default)]
    pub sizes: Vec<u64>,
    /// SHA-256 of the listed files that came in through upload links, unchanged since.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sha256: Vec<FileHash>,
    pub count: usize,
    /// True when the listing stopped at the server's entry limit.
    pub truncated: bool,
    /// Entries left out because their names are not printable UTF-8.
    pub skipped: usize,
}

/// A listed file's SHA-256, known from its upload.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct FileHash {
    pub path: String,
    pub sha256: String,
}

#[tool_router(router = workspace_router, vis = "pub(crate)")]
impl CodeExecutionServer {
    #[tool(
        description = "Write a text file into the workspace (code sees /workspace/<filename>), atomically.",
        annotations(
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn write_workspace_file(
        &self,
        Parameters(args): Parameters<WriteArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MessageResponse>, Reply> {
        let filename = args.filename.clone();
        let (path, content) = (
            self.app.privacy().from_model(args.filename),
            self.app.privacy().from_model(args.content),
        );
        let len = content.len();
        let written = path.clone();
        let existed = self
            .app
            .with_workspace(move |ws| {
                let existed = ws.file_size(&path).is_ok();
                ws.write_file(&path, content.as_bytes()).map(|_| existed)
            })
            .await
            .map_err(|e| self.failure(e))?;
        self.announce_changes(&ctx.peer, &[written], !existed, false)
            .await;
        Ok(self.app.privacy().json(MessageResponse::ok(format!(
            "Written {len} bytes to {filename}"
        ))))
    }

    #[tool(
        description = "Read a workspace file: text as is, other files as base64.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_workspace_file(
        &self,
        Parameters(args): Parameters<FileArgs>,
    ) -> Result<Json<ReadResponse>, Reply> {
        let filename = args.filename.clone();
        let path = self.app.privacy().from_model(args.filename);
        let file = self
            .app
            .with_workspace(move |ws| ws.read_file(&path))
            .await
            .map_err(|e| self.failure(e))?;
        let (content, encoding) = match String::from_utf8(file.bytes) {
            Ok(text) => (text, "utf-8"),
            Err(e) => (
                base64::engine::general_purpose::STANDARD.encode(e.into_bytes()),
                BASE64,
            ),
        };
        let response = ReadResponse {
            success: true,
            filename,
            content,
            encoding: encoding.into(),
            size: file.size,
        };
        Ok(if encoding == BASE64 {
            // A file that is not text: its base64 is bytes, not something to tokenize.
            self.app
                .privacy()
                .json_keeping(response, &[ReadResponse::CONTENT])
        } else {
            self.app.privacy().json(response)
        })
    }

    #[tool(
        description = "List the files in the sandbox workspace (recursive, relative paths, sizes).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_workspace_files(
        &self,
        Parameters(args): Parameters<ListArgs>,
    ) -> Result<Json<ListResponse>, Reply> {
        let path = args.subpath.clone();
        let subpath = self.app.privacy().from_model(args.subpath);
        let listing = self
            .app
            .with_workspace(move |ws| ws.list_files(&subpath))
            .await
            .map_err(|e| self.failure(e))?;
        let links = self.app.links();
        let sha256 = (listing.files.iter().zip(&listing.stats))
            .filter_map(|(path, stat)| {
                let sha256 = links.known_hash(path, *stat)?;
                Some(FileHash {
                    path: path.clone(),
                    sha256,
                })
            })
            .collect();
        Ok(self.app.privacy().json(ListResponse {
            success: true,
            path,
            count: listing.files.len(),
            sizes: listing.stats.iter().map(|s| s.size).collect(),
            sha256,
            files: listing.files,
            truncated: listing.truncated,
            skipped: listing.skipped,
        }))
    }

    #[tool(
        description = "Delete a file from the sandbox workspace.",
        annotations(destructive_hint = true, open_world_hint = false)
    )]
    async fn delete_workspace_file(
        &self,
        Parameters(args): Parameters<FileArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<MessageResponse>, Reply> {
        let filename = args.filename.clone();
        let path = self.app.privacy().from_model(args.filename);
        let deleted = path.clone();
        self.app
            .with_workspace(move |ws| ws.delete_file(&path))
            .await
            .map_err(|e| self.failure(e))?;
        self.announce_changes(&ctx.peer, &[deleted], true, false)
            .await;
        Ok(self
            .app
            .privacy()
            .json(MessageResponse::ok(format!("Deleted {filename}"))))
    }
}
