//! Upload and download links for one tenant: made by the `request_upload` and
//! `request_download` tools ([`App::issue_upload`], [`App::issue_download`]), used through the
//! HTTP routes ([`receive`], [`send`]). What a link is and how it is signed and spent is the
//! [`crate::links`] subsystem's; this module puts a tenant's workspace, budget, events, audit
//! trail and counters around it.

pub mod receive;
pub mod send;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::app::{App, Shared};
use crate::audit::{TransferKind, TransferRecord};
use crate::links::markers::Markers;
use crate::links::{Budget, Kind, Link, LinkKey, LinkSettings, LinkStats, Outcome, token};
use crate::workspace::{FileStat, validate_relative_path};

/// The hashes of uploaded files one tenant remembers (for listings), at most.
const MAX_KNOWN_HASHES: usize = 10_000;

/// The links of a server: their settings and key (present when `--public-url` is set).
#[derive(Debug)]
pub struct ServerLinks {
    pub settings: LinkSettings,
    pub(crate) key: LinkKey,
    public_url: String,
}

impl ServerLinks {
    /// The links of `settings`, with their key (made when missing); `None` without a public
    /// URL, which links are built on.
    pub fn open(settings: LinkSettings) -> Result<Option<Self>, crate::links::key::KeyError> {
        let Some(public_url) = settings.public_url.clone() else {
            return Ok(None);
        };
        let key = LinkKey::load_or_create(&settings.key_file)?;
        Ok(Some(Self {
            settings,
            key,
            public_url,
        }))
    }

    /// The link a token carries, when this server's key signed it.
    pub fn open_token(&self, token: &str) -> Result<Link, crate::links::LinkError> {
        token::open(token, &self.key)
    }

    fn url(&self, link: &Link) -> String {
        crate::links::url(&self.public_url, &token::seal(link, &self.key))
    }

    /// The client address as the audit trail keeps it: keyed, so that the same address gives
    /// the same value on every node, and cannot be read back by trying all addresses.
    pub fn client_hash(&self, addr: IpAddr) -> String {
        let tag = self
            .key
            .sign(&[b"client address ", addr.to_string().as_bytes()]);
        hex::encode(&tag[..12])
    }
}

/// One tenant's part: its markers, upload budget, counters and the hashes of files it
/// received.
#[derive(Debug)]
pub struct TenantLinks {
    pub(crate) markers: Markers,
    pub(crate) budget: Arc<Budget>,
    pub stats: LinkStats,
    known: Mutex<HashMap<String, (FileStat, String)>>,
    /// Download links whose download to the file's end runs on this server.
    pub(crate) sending: Arc<Mutex<std::collections::HashSet<String>>>,
    /// Links whose refusal the audit trail has (at most [`MAX_KNOWN_HASHES`]).
    refused: Mutex<std::collections::HashSet<String>>,
}

impl TenantLinks {
    pub fn new(shared: &Shared, links_dir: std::path::PathBuf) -> Self {
        let links = &shared.config.links;
        let markers = Markers::new(links_dir);
        let swept = markers.sweep();
        if swept > 0 {
            tracing::debug!(swept, "removed the single-use markers of expired links");
        }
        Self {
            markers,
            budget: Budget::new(
                usize::try_from(links.uploads_concurrent).unwrap_or(usize::MAX),
                links.upload_mb_per_hour.saturating_mul(1 << 20),
            ),
            stats: LinkStats::default(),
            known: Mutex::default(),
            sending: Arc::default(),
            refused: Mutex::default(),
        }
    }

    /// Remembers the hash of a file received now.
    fn remember(&self, path: &str, stat: FileStat, sha256: String) {
        let mut known = self.known.lock().expect("hashes lock");
        if known.len() >= MAX_KNOWN_HASHES && !known.contains_key(path) {
            known.clear();
        }
        known.insert(path.to_string(), (stat, sha256));
    }

    /// Whether this is the first refusal of `link` on this server.
    fn first_refusal(&self, link: &Link) -> bool {
        let mut refused = self.refused.lock().expect("refusals lock");
        if refused.len() >= MAX_KNOWN_HASHES {
            refused.clear();
        }
        refused.insert(link.id.clone())
    }

    /// The SHA-256 of `path` when it was received through a link and has not changed since
    /// (same size and modification time): never computed here.
    pub fn known_hash(&self, path: &str, stat: FileStat) -> Option<String> {
        let known = self.known.lock().expect("hashes lock");
        known
            .get(path)
            .filter(|(seen, _)| *seen == stat)
            .map(|(_, hash)| hash.clone())
    }
}

/// What `request_upload` asks for.
#[derive(Debug, Clone, Default)]
pub struct UploadRequest {
    pub filename: Option<String>,
    pub max_mb: Option<u64>,
    pub expires_in_seconds: Option<u64>,
    pub overwrite: bool,
}

/// A link made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    pub url: String,
    pub expires_at: String,
    /// An upload's workspace path when the link fixes it.
    pub name: Option<String>,
    pub max_bytes: u64,
    pub link_id: String,
}

/// Why a link was not made.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error(
        "this server makes no links: it needs --public-url (CEM_PUBLIC_URL), the address a browser reaches it at (with stdio, also --links-listen). Until then, use write_workspace_file"
    )]
    NoPublicUrl,
    #[error("{0}")]
    Bad(String),
    #[error(transparent)]
    Workspace(#[from] crate::workspace::WorkspaceError),
}

impl App {
    /// The server's links, when it makes them.
    fn server_links(&self) -> Result<&Arc<ServerLinks>, IssueError> {
        self.shared.links.as_ref().ok_or(IssueError::NoPublicUrl)
    }

    /// This tenant's link counters and hashes.
    pub fn links(&self) -> &TenantLinks {
        &self.links
    }

    /// The lifetime a call asks for, checked against `--link-ttl-secs`.
    fn ttl(&self, asked: Option<u64>) -> Result<Duration, IssueError> {
        let max = self.config.links.link_ttl_secs;
        match asked {
            None => Ok(Duration::from_secs(max)),
            Some(s) if (30..=max).contains(&s) => Ok(Duration::from_secs(s)),
            Some(s) => Err(IssueError::Bad(format!(
                "expires_in_seconds {s} must be between 30 and {max} (this server's --link-ttl-secs)"
            ))),
        }
    }

    /// A link through which a person uploads one file into this tenant's workspace.
    pub async fn issue_upload(&self, request: UploadRequest) -> Result<Issued, IssueError> {
        let links = self.server_links()?;
        let max_mb = self.config.links.upload_max_mb;
        let max_bytes = match request.max_mb {
            None => max_mb << 20,
            Some(mb) if (1..=max_mb).contains(&mb) => mb << 20,
            Some(mb) => {
                return Err(IssueError::Bad(format!(
                    "max_mb {mb} must be between 1 and {max_mb} (this server's --upload-max-mb)"
                )));
            }
        };
        if request.overwrite && request.filename.is_none() {
            return Err(IssueError::Bad(
                "overwrite needs a filename: say which file the upload may replace".into(),
            ));
        }
        let filename = match &request.filename {
            Some(name) => {
                Some(validate_relative_path(name, self.workspace.limits().max_path_len)?.join("/"))
            }
            None => None,
        };
        if let Some(name) = &filename {
            let path = name.clone();
            let exists = self
                .with_workspace(move |ws| {
                    Ok::<_, crate::workspace::WorkspaceError>(ws.file_size(&path).is_ok())
                })
                .await?;
            if exists && !request.overwrite {
                return Err(crate::workspace::WorkspaceError::Exists { path: name.clone() }.into());
            }
        }
        let mut link = Link::new(
            Kind::Upload,
            self.tenant.clone(),
            self.ttl(request.expires_in_seconds)?,
        );
        link.path = filename;
        link.max_bytes = max_bytes;
        link.overwrite = request.overwrite;
        self.issued(links, link)
    }

    /// A link through which a person downloads the workspace file `path`.
    pub async fn issue_download(
        &self,
        path: String,
        expires_in_seconds: Option<u64>,
    ) -> Result<Issued, IssueError> {
        let links = self.server_links()?;
        let ttl = self.ttl(expires_in_seconds)?;
        let path = validate_relative_path(&path, self.workspace.limits().max_path_len)?.join("/");
        let checked = path.clone();
        let size = self
            .with_workspace(move |ws| ws.file_size(&checked))
            .await?;
        let mut link = Link::new(Kind::Download, self.tenant.clone(), ttl);
        link.path = Some(path);
        link.max_bytes = size;
        self.issued(links, link)
    }

    fn issued(&self, links: &ServerLinks, link: Link) -> Result<Issued, IssueError> {
        let url = links.url(&link);
        if url.len() > links.public_url.len() + crate::links::ROUTE_PREFIX.len() + token::MAX_LEN {
            return Err(IssueError::Bad(
                "this path makes a link longer than links may be: use a shorter one".into(),
            ));
        }
        self.links.stats.issued(link.kind);
        tracing::info!(
            link = %link.id,
            kind = link.kind.as_str(),
            expires = %link.expires_at(),
            "made a link"
        );
        Ok(Issued {
            url,
            expires_at: link.expires_at(),
            name: link.path.clone().filter(|_| link.kind == Kind::Upload),
            max_bytes: link.max_bytes,
            link_id: link.id,
        })
    }

    /// Records a use of `link` in the audit trail (when it is kept) and the counters.
    pub(crate) async fn record_transfer(&self, link: &Link, done: Transfer) {
        self.links.stats.ended(link.kind, done.outcome, done.size);
        let Some(log) = self.audit.clone() else {
            return;
        };
        let origin = crate::pii::Origin::Workspace;
        let name = done.name.map(|n| self.pii.sanitize_from(&n, &origin).text);
        let record = TransferRecord {
            kind: match link.kind {
                Kind::Upload => TransferKind::Upload,
                Kind::Download => TransferKind::Download,
            },
            time: crate::audit::record::now(),
            tenant: self.tenant.clone(),
            node: self.node_name().to_string(),
            link_id: link.id.clone(),
            name,
            size: done.size,
            sha256: done.sha256,
            client: done.client,
            status: done.status,
        };
        let _ = tokio::task::spawn_blocking(move || log.append(&record)).await;
    }
}

/// The audit trail's status of a link that could not be used.
pub(crate) fn link_status(e: &crate::links::LinkError) -> &'static str {
    use crate::links::LinkError;
    match e {
        LinkError::Expired(_) => "expired",
        LinkError::Used => "used",
        LinkError::WrongKind(..) => "wrong_kind",
        LinkError::Invalid => "invalid",
    }
}

/// How one use of a link ended, for [`App::record_transfer`].
#[derive(Debug, Clone)]
pub(crate) struct Transfer {
    pub outcome: Outcome,
    pub status: String,
    pub name: Option<String>,
    pub size: u64,
    pub sha256: Option<String>,
    pub client: String,
}
