//! What an execution produced besides text, made ready for the client: the images it returned
//! (bounded and re-encoded by [`crate::app::execution::pictures`]), the workspace files it asked to return as
//! resource links (checked against the workspace like any tool path), and the files it created
//! or changed (from workspace snapshots taken before and after the job). Blocking: the caller
//! runs it on the blocking pool.

use crate::app::execution::pictures::{self, PictureBounds, Png};
use crate::sandbox::run::returned::Returned;
use crate::workspace::uri;
use crate::workspace::{FileChange, Snapshot, Workspace};

/// Files listed per execution; more are counted.
pub const MAX_FILES_LISTED: usize = 100;

/// An image ready to send.
#[derive(Debug, Clone)]
pub struct ReadyImage {
    pub source: String,
    pub png: Png,
}

/// A workspace file the client can fetch as a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducedFile {
    pub path: String,
    pub uri: String,
    pub size: u64,
    pub mime_type: String,
    /// "created" or "modified" (changed files), "linked" (a `resource_link` of the code).
    pub change: &'static str,
    pub description: Option<String>,
}

/// Everything besides text that goes back to the client.
#[derive(Debug, Clone, Default)]
pub struct Produced {
    pub images: Vec<ReadyImage>,
    /// Why images or links were left out, one line each.
    pub notes: Vec<String>,
    /// Files the execution created or changed, sorted (at most [`MAX_FILES_LISTED`]).
    pub files: Vec<ProducedFile>,
    /// More files changed than are listed, or the workspace was too large to compare whole.
    pub files_truncated: bool,
    /// Files appeared or went away (the resource list changed).
    pub listing_changed: bool,
    pub links: Vec<ProducedFile>,
}

/// Builds the client's view of what an execution returned besides text; `before` is the
/// workspace as the execution found it (`None`: changed files are not listed).
pub fn prepare(
    returned: Returned,
    bounds: PictureBounds,
    workspace: &Workspace,
    before: Option<&Snapshot>,
) -> Produced {
    let mut produced = Produced::default();
    for sent in returned.images {
        match pictures::prepare(&sent.data, bounds) {
            Ok(png) => produced.images.push(ReadyImage {
                source: sent.source,
                png,
            }),
            Err(why) => produced
                .notes
                .push(format!("{}: not returned, {why}", sent.source)),
        }
    }
    // Only the first drops are named; the count covers them all.
    let unnamed = returned
        .dropped_count
        .saturating_sub(returned.dropped.len());
    produced.notes.extend(returned.dropped);
    if unnamed > 0 {
        produced.notes.push(format!(
            "{unnamed} more images were not returned ({} in all past the limits)",
            returned.dropped_count
        ));
    }
    for link in returned.links {
        match workspace.file_size(&link.path) {
            Ok(size) => produced
                .links
                .push(file(&link.path, size, "linked", link.description)),
            Err(e) => produced
                .notes
                .push(format!("resource_link({:?}) not returned: {e}", link.path)),
        }
    }
    if returned.links_dropped > 0 {
        produced.notes.push(format!(
            "{} more resource links were not returned (at most {} per execution)",
            returned.links_dropped,
            crate::sandbox::run::returned::MAX_LINKS
        ));
    }
    if let Some(before) = before {
        match workspace.snapshot() {
            Ok(after) => {
                let changes = after.changes_since(before);
                produced.listing_changed =
                    changes.iter().any(|c| c.created) || !after.removed_since(before).is_empty();
                produced.files_truncated =
                    before.truncated || after.truncated || changes.len() > MAX_FILES_LISTED;
                produced.files = changes
                    .into_iter()
                    .take(MAX_FILES_LISTED)
                    .map(
                        |FileChange {
                             path,
                             size,
                             created,
                         }| {
                            file(
                                &path,
                                size,
                                if created { "created" } else { "modified" },
                                None,
                            )
                        },
                    )
                    .collect();
            }
            Err(e) => tracing::warn!("cannot list the files an execution changed: {e}"),
        }
    }
    produced
}

fn file(path: &str, size: u64, change: &'static str, description: Option<String>) -> ProducedFile {
    ProducedFile {
        path: path.to_string(),
        uri: uri::uri_for(path),
        size,
        mime_type: uri::mime_for(path),
        change,
        description,
    }
}
