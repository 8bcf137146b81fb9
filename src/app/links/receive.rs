//! An upload through a link: the body streamed into an unnamed file on the workspace's
//! filesystem ([`crate::workspace::Staged`]), counted against the link's limit, the soft
//! quota and the tenant's hourly allowance as it arrives, then moved in whole. Nothing is
//! held in memory but one batch of [`BATCH`] bytes; a client that stalls for [`IDLE`] or
//! takes longer than [`DEADLINE`] is cut off. The link is spent when the file is moved in;
//! a failed or cancelled upload leaves no file and the link usable.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::Transfer;
use crate::app::App;
use crate::links::page::Received;
use crate::links::{BudgetRefusal, Kind, Link, LinkError, Outcome};
use crate::workspace::{Committed, Staged, WorkspaceError, validate_relative_path};

/// Bytes gathered before one write to the staged file.
const BATCH: usize = 1 << 20;
/// Longest a client may send nothing.
pub const IDLE: Duration = Duration::from_secs(30);
/// Longest one upload may take.
pub const DEADLINE: Duration = Duration::from_secs(3600);

/// An upload's request, once its link checked.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub link: Link,
    /// The name the browser or client gave the file (used when the link fixes none).
    pub name_hint: Option<String>,
    /// The client's address, keyed-hashed.
    pub client: String,
}

/// Why an upload did not land; nothing was written in every case.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error(transparent)]
    Busy(#[from] BudgetRefusal),
    #[error(
        "the file is larger than {limit} bytes, the most {what} allows: ask the assistant for a link with a larger max_mb, or send a smaller file"
    )]
    TooLarge { limit: u64, what: &'static str },
    #[error(
        "the upload has no file name: this link names none, so send one (the browser's file name, or curl -T FILE URL/NAME)"
    )]
    NoName,
    #[error("the file name is not usable: {0}")]
    BadName(WorkspaceError),
    #[error(transparent)]
    Workspace(WorkspaceError),
    #[error("the upload stalled: nothing arrived for {} s. Try again", IDLE.as_secs())]
    Idle,
    #[error("the upload took longer than {} minutes, the most one may take", DEADLINE.as_secs() / 60)]
    Deadline,
    #[error("the upload was cut short ({0}): try again")]
    Body(String),
}

impl UploadError {
    /// The counters' name for it.
    pub fn outcome(&self) -> Outcome {
        match self {
            UploadError::Link(_) => Outcome::BadLink,
            UploadError::Busy(BudgetRefusal::Hourly(..)) | UploadError::TooLarge { .. } => {
                Outcome::TooLarge
            }
            UploadError::Workspace(WorkspaceError::Full { .. }) => Outcome::TooLarge,
            UploadError::Busy(_) => Outcome::Busy,
            UploadError::NoName | UploadError::BadName(_) => Outcome::BadRequest,
            UploadError::Workspace(
                WorkspaceError::Exists { .. } | WorkspaceError::IsDirectory { .. },
            ) => Outcome::Conflict,
            _ => Outcome::Failed,
        }
    }
}

impl App {
    /// Checks an upload link before its body is read: the kind, the expiry, that it was not
    /// spent. (The signature and the tenant were checked by whoever picked this tenant.)
    pub fn check_upload_link(&self, link: &Link) -> Result<(), LinkError> {
        check_link(self, link, Kind::Upload)
    }

    /// Receives `body` through `incoming`'s link into the workspace. Once the body has
    /// arrived, the move into place, the clients' notice and the audit record run to their
    /// end whatever becomes of the request (a client that leaves then does not stop them).
    pub async fn receive<S, E>(
        self: &Arc<Self>,
        incoming: Incoming,
        body: S,
    ) -> Result<Received, UploadError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin + Send,
        E: std::fmt::Display,
    {
        let mut size = 0;
        let (staged, name, permit) = match self.receive_body(&incoming, body, &mut size).await {
            Ok(arrived) => arrived,
            Err(e) => {
                self.record_upload(&incoming, Err(&e), size).await;
                return Err(e);
            }
        };
        let app = self.clone();
        let landing = tokio::spawn(async move {
            let committed = app.commit(staged, &incoming.link, name.clone()).await;
            drop(permit);
            let result = match committed {
                Ok(committed) => Ok(app.landed(name, committed).await),
                Err(e) => Err(e),
            };
            app.record_upload(&incoming, result.as_ref(), size).await;
            result
        });
        landing.await.unwrap_or_else(|e| {
            Err(UploadError::Body(format!(
                "the server's writer failed: {e}"
            )))
        })
    }

    /// Records an upload's end: what landed, or why nothing did (the name only when the link
    /// fixed it: a client's name that was refused is not worth keeping).
    async fn record_upload(
        &self,
        incoming: &Incoming,
        result: Result<&Received, &UploadError>,
        size: u64,
    ) {
        let done = match result {
            Ok(r) => Transfer {
                outcome: Outcome::Ok,
                status: "ok".into(),
                name: Some(r.name.clone()),
                size: r.size,
                sha256: Some(r.sha256.clone()),
                client: incoming.client.clone(),
            },
            Err(e) => Transfer {
                outcome: e.outcome(),
                status: match e {
                    UploadError::Link(e) => super::link_status(e),
                    e => e.outcome().as_str(),
                }
                .into(),
                name: incoming.link.path.clone(),
                size,
                sha256: None,
                client: incoming.client.clone(),
            },
        };
        self.record_transfer(&incoming.link, done).await;
    }

    /// The body, received into a staged file within the limits, with the name it is to get
    /// and the budget's hold on the upload.
    async fn receive_body<S, E>(
        &self,
        incoming: &Incoming,
        body: S,
        size: &mut u64,
    ) -> Result<(Staged, String, crate::links::UploadPermit), UploadError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin + Send,
        E: std::fmt::Display,
    {
        let link = &incoming.link;
        self.check_upload_link(link)?;
        let name = self.upload_name(link, incoming.name_hint.as_deref())?;
        let permit = self.links.budget.begin(&link.id)?;
        let ws = self.workspace.clone();
        let checked = name.clone();
        let overwrite = link.overwrite;
        let (staged, room) = blocking(move || {
            // A name that may not be replaced is refused before the body is read.
            if !overwrite && ws.file_size(&checked).is_ok() {
                return Err(WorkspaceError::Exists { path: checked });
            }
            Ok((ws.stage()?, ws.room_left()?))
        })
        .await
        .map_err(UploadError::Workspace)?;
        let limit = match room {
            Some(0) => return Err(UploadError::Workspace(self.workspace.full())),
            Some(room) if room < link.max_bytes => (room, "the workspace's free space"),
            _ => (link.max_bytes, "this link"),
        };
        let staged = tokio::time::timeout(DEADLINE, async {
            self.stream_into(staged, body, &permit, limit, size).await
        })
        .await
        .map_err(|_| UploadError::Deadline)??;
        Ok((staged, name, permit))
    }

    /// The name the file gets: the link's, else the client's (one name, no directories),
    /// checked like every workspace path.
    fn upload_name(&self, link: &Link, hint: Option<&str>) -> Result<String, UploadError> {
        let name = match (&link.path, hint) {
            (Some(path), _) => path.clone(),
            (None, Some("")) | (None, None) => return Err(UploadError::NoName),
            (None, Some(hint)) if hint.contains(['/', '\\']) => {
                return Err(UploadError::BadName(WorkspaceError::InvalidPath {
                    path: hint.to_string(),
                    reason: "a file's own name is one name, without directories".into(),
                    max_len: crate::workspace::MAX_NAME_LEN,
                }));
            }
            (None, Some(hint)) => hint.to_string(),
        };
        // As every workspace tool names it (`a//b` and `./a` are `a/b` and `a`).
        let comps = validate_relative_path(&name, self.workspace.limits().max_path_len)
            .map_err(UploadError::BadName)?;
        Ok(comps.join("/"))
    }

    /// Writes `body` into `staged` in batches, within the limits; returns it full.
    async fn stream_into<S, E>(
        &self,
        mut staged: Staged,
        mut body: S,
        permit: &crate::links::UploadPermit,
        (limit, what): (u64, &'static str),
        size: &mut u64,
    ) -> Result<Staged, UploadError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin + Send,
        E: std::fmt::Display,
    {
        let mut batch: Vec<u8> = Vec::with_capacity(BATCH);
        loop {
            let next = tokio::time::timeout(IDLE, body.next())
                .await
                .map_err(|_| UploadError::Idle)?;
            let chunk = match next {
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) => return Err(UploadError::Body(e.to_string())),
                None => break,
            };
            *size += chunk.len() as u64;
            if *size > limit {
                return Err(UploadError::TooLarge { limit, what });
            }
            permit.count(chunk.len() as u64)?;
            batch.extend_from_slice(&chunk);
            if batch.len() >= BATCH {
                (staged, batch) = self.write_batch(staged, batch).await?;
            }
        }
        if !batch.is_empty() {
            (staged, _) = self.write_batch(staged, batch).await?;
        }
        Ok(staged)
    }

    async fn write_batch(
        &self,
        mut staged: Staged,
        mut batch: Vec<u8>,
    ) -> Result<(Staged, Vec<u8>), UploadError> {
        let ws = self.workspace.clone();
        blocking(move || {
            staged.write(&batch, &ws)?;
            batch.clear();
            Ok((staged, batch))
        })
        .await
        .map_err(UploadError::Workspace)
    }

    /// Spends the link and moves the file in; a move that fails gives the link back.
    async fn commit(
        &self,
        staged: Staged,
        link: &Link,
        name: String,
    ) -> Result<Committed, UploadError> {
        let ws = self.workspace.clone();
        let markers = self.links.markers.clone();
        let (link, overwrite) = (link.clone(), link.overwrite);
        tokio::task::spawn_blocking(move || {
            match markers.spend(&link) {
                Ok(true) => {}
                Ok(false) => return Err(UploadError::Link(LinkError::Used)),
                Err(e) => {
                    return Err(UploadError::Workspace(WorkspaceError::io(
                        "cannot record the link as used",
                        e,
                    )));
                }
            }
            staged.commit(&ws, &name, overwrite).map_err(|e| {
                markers.unspend(&link);
                match e {
                    WorkspaceError::InvalidPath { .. }
                    | WorkspaceError::Escapes { .. }
                    | WorkspaceError::Symlink { .. }
                    | WorkspaceError::NotADirectory { .. } => UploadError::BadName(e),
                    e => UploadError::Workspace(e),
                }
            })
        })
        .await
        .map_err(|e| UploadError::Body(format!("the server's writer failed: {e}")))?
    }

    /// What follows a file landing: its hash remembered for listings, the clients told.
    async fn landed(&self, name: String, committed: Committed) -> Received {
        let ws = self.workspace.clone();
        let path = name.clone();
        if let Ok(stat) = blocking(move || ws.file_stat(&path)).await {
            self.links.remember(&name, stat, committed.sha256.clone());
        }
        let shown = self.privacy().text(name.clone());
        let uri = shown.framed(crate::workspace::uri::uri_for);
        self.events
            .arrived(uri.as_str().to_owned(), !committed.replaced);
        tracing::info!(size = committed.size, "received an upload");
        Received {
            uri: crate::workspace::uri::uri_for(&name),
            name,
            size: committed.size,
            sha256: committed.sha256,
            overwritten: committed.replaced,
        }
    }
}

/// Whether `link` may be used as a `kind` link now.
pub(super) fn check_link(app: &App, link: &Link, kind: Kind) -> Result<(), LinkError> {
    if link.kind != kind {
        return Err(LinkError::WrongKind(link.kind.as_str(), kind.as_str()));
    }
    if link.tenant.as_deref() != app.tenant() {
        return Err(LinkError::Invalid);
    }
    if link.expired() {
        return Err(LinkError::Expired(link.expires_at()));
    }
    if app.links.markers.is_used(link) {
        return Err(LinkError::Used);
    }
    Ok(())
}

/// Runs blocking workspace work off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, WorkspaceError> {
    tokio::task::spawn_blocking(op).await.unwrap_or_else(|e| {
        Err(WorkspaceError::io(
            "the server's workspace worker failed",
            std::io::Error::other(e.to_string()),
        ))
    })
}
