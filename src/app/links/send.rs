//! A download through a link: the file opened beneath the workspace (never through a link),
//! sent by the HTTP transport (whole, or the range asked for), and the link spent by the
//! first download that sent the file to its last byte (the whole file, or a range that ends
//! with it: a resumed download). Such a download holds the link on this server while it
//! runs, so a second one meanwhile is refused rather than served too; ranges that stop short
//! of the end neither hold nor spend it.

use super::Transfer;
use super::receive::{blocking, check_link};
use crate::app::App;
use crate::links::{Kind, Link, LinkError, Outcome};
use crate::workspace::WorkspaceError;

/// A file to send.
#[derive(Debug)]
pub struct Outgoing {
    pub file: std::fs::File,
    pub size: u64,
    /// Its workspace path.
    pub path: String,
}

/// How a download ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// Bytes sent.
    pub sent: u64,
    /// SHA-256 of the whole file, when the whole file went out (not a range).
    pub whole: Option<String>,
    /// What was asked for (the file, or its range) went out.
    pub complete: bool,
    /// It ends with the file's last byte (the whole file, or a range to its end): complete,
    /// it spends the link.
    pub to_the_end: bool,
    /// The client's address, keyed-hashed.
    pub client: String,
}

/// Why a download cannot start.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// A download to the file's end in progress through a link; dropping it ends it.
#[derive(Debug)]
pub struct Sending {
    running: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    id: String,
}

impl Drop for Sending {
    fn drop(&mut self) {
        self.running.lock().expect("sending lock").remove(&self.id);
    }
}

impl App {
    /// Opens the file of a download link that may still be used.
    pub async fn open_download(&self, link: &Link) -> Result<Outgoing, DownloadError> {
        check_link(self, link, Kind::Download)?;
        let path = link.path.clone().ok_or(LinkError::Invalid)?;
        let ws = self.workspace.clone();
        let opened = path.clone();
        let (file, size) = blocking(move || ws.open_for_download(&opened)).await?;
        Ok(Outgoing { file, size, path })
    }

    /// Holds `link` for a download to the file's end: `Ok(None)` while another one runs
    /// here, an error when one spent it since the link was checked.
    pub fn begin_sending(&self, link: &Link) -> Result<Option<Sending>, LinkError> {
        let running = self.links.sending.clone();
        if !running
            .lock()
            .expect("sending lock")
            .insert(link.id.clone())
        {
            return Ok(None);
        }
        let held = Sending {
            running,
            id: link.id.clone(),
        };
        if self.links.markers.is_used(link) {
            return Err(LinkError::Used);
        }
        Ok(Some(held))
    }

    /// A download through `link` ended; one that sent the file to its last byte spends the
    /// link.
    pub async fn download_ended(&self, link: &Link, outgoing_path: &str, end: Ended) {
        let (outcome, status) = match (end.complete, end.to_the_end) {
            (true, true) => {
                let markers = self.links.markers.clone();
                let spent = link.clone();
                let _ = tokio::task::spawn_blocking(move || markers.spend(&spent)).await;
                (Outcome::Ok, "ok")
            }
            (true, false) => (Outcome::Ok, "partial"),
            (false, _) => (Outcome::Failed, "incomplete"),
        };
        let done = Transfer {
            outcome,
            status: status.into(),
            name: Some(outgoing_path.to_string()),
            size: end.sent,
            sha256: end.whole,
            client: end.client,
        };
        self.record_transfer(link, done).await;
    }

    /// Counts a use of a link that was refused before anything moved, and records the first
    /// of each link on this server: whoever holds a spent or expired link may ask again and
    /// again, and the trail's rotation must not lose older records to that.
    pub async fn link_refused(&self, link: &Link, why: &LinkError, client: String) {
        if !self.links.first_refusal(link) {
            self.links.stats.ended(link.kind, Outcome::BadLink, 0);
            return;
        }
        let done = Transfer {
            outcome: Outcome::BadLink,
            status: super::link_status(why).into(),
            name: link.path.clone(),
            size: 0,
            sha256: None,
            client,
        };
        self.record_transfer(link, done).await;
    }
}
