//! Upload and download links: how a person's file reaches the workspace, and a result leaves
//! it, without passing through the model's context.
//!
//! # Why it is built this way
//!
//! * **Self-contained.** A link carries what it grants (kind, tenant, path, size limit,
//!   overwrite, expiry and a random id) and an HMAC-SHA256 over all of it ([`token`]), keyed
//!   by a file every node of a swarm shares ([`key`]). Any node checks any link without asking
//!   another; changing one byte (another tenant, a longer life, a larger limit) breaks the
//!   signature.
//! * **Single use, on the tenant's volume.** A link is spent by an exclusive-create marker
//!   named after its id beside the tenant's data ([`markers`]): the first commit (or the first
//!   complete download) creates it, every later one finds it, on whichever node.
//! * **Bounded per tenant.** Uploads in progress and bytes per sliding hour are counted per
//!   tenant and node ([`budget`]), and a link's id is held while an upload runs, so a second
//!   upload of the same link at once is refused (409) rather than raced.
//! * **Pages without a way out.** The upload page ([`page`]) loads only its own script and
//!   stylesheet; downloads are sandboxed attachments (the HTTP transport sets the headers).
//!
//! The subsystem knows nothing of MCP, tenants' applications or the workspace's files: the
//! application issues links and commits uploads, the HTTP transport serves the routes.

pub mod budget;
pub mod key;
pub mod markers;
pub mod page;
pub mod stats;
pub mod token;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use budget::{Budget, BudgetRefusal, UploadPermit};
pub use key::LinkKey;
pub use stats::{LinkStats, Outcome};

/// The directory under the data directory (and under a tenant's) holding links' state.
pub const DIR_NAME: &str = "links";

/// The path the routes are served under (`PUBLIC_URL/links/TOKEN`).
pub const ROUTE_PREFIX: &str = "/links/";

/// What the links' flags set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSettings {
    /// `--public-url`, normalized: links are built on it (never on a request's Host).
    pub public_url: Option<String>,
    /// Largest upload a link may allow.
    pub max_upload_bytes: u64,
    /// Longest, and default, lifetime of a link.
    pub max_ttl: Duration,
    /// Uploads one tenant may have in progress at once.
    pub concurrent_uploads: usize,
    /// Bytes one tenant may upload per sliding hour.
    pub bytes_per_hour: u64,
    /// The key file links are signed with.
    pub key_file: PathBuf,
}

/// What a link is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    #[serde(rename = "u")]
    Upload,
    #[serde(rename = "d")]
    Download,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Upload => "upload",
            Kind::Download => "download",
        }
    }
}

/// What a link grants: the signed part of its token. Short field names keep URLs short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    #[serde(rename = "k")]
    pub kind: Kind,
    /// The tenant whose workspace it reaches (none on a server without tenants).
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// A download's file; an upload's name when the link fixes one.
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// An upload's size limit, in bytes.
    #[serde(rename = "m", default)]
    pub max_bytes: u64,
    /// An upload may replace an existing file.
    #[serde(rename = "o", default)]
    pub overwrite: bool,
    /// When it expires, in seconds since the Unix epoch.
    #[serde(rename = "e")]
    pub expires: u64,
    /// 32 hex digits, random: names its single-use marker and its audit records.
    #[serde(rename = "i")]
    pub id: String,
}

impl Link {
    /// A new link of `kind` for `tenant` living `ttl` from now, with a fresh id.
    pub fn new(kind: Kind, tenant: Option<String>, ttl: Duration) -> Self {
        let mut id = [0u8; 16];
        getrandom::fill(&mut id).expect("the system's random source works");
        Self {
            kind,
            tenant,
            path: None,
            max_bytes: 0,
            overwrite: false,
            expires: now_secs().saturating_add(ttl.as_secs()),
            id: hex::encode(id),
        }
    }

    /// Whether its expiry has passed.
    pub fn expired(&self) -> bool {
        now_secs() >= self.expires
    }

    /// Its expiry as RFC 3339 UTC (seconds).
    pub fn expires_at(&self) -> String {
        rfc3339(self.expires)
    }

    /// Whether the id has the form links are made with (it names a marker file).
    pub fn id_is_valid(&self) -> bool {
        self.id.len() == 32 && self.id.bytes().all(|b| b.is_ascii_hexdigit())
    }
}

/// Why a link cannot be used; the HTTP transport maps each to a status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error(
        "this link is not valid (it was changed, cut short, or signed by another server's key): ask the assistant for a new one"
    )]
    Invalid,
    #[error("this link expired at {0}: ask the assistant for a new one")]
    Expired(String),
    #[error("this link was used already (each link works once): ask the assistant for a new one")]
    Used,
    #[error(
        "this link is for {0}s, not {1}s: use it as the assistant described, or ask for a new one"
    )]
    WrongKind(&'static str, &'static str),
}

/// Seconds since the Unix epoch, now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `secs` since the epoch as RFC 3339 UTC.
pub fn rfc3339(secs: u64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(i64::try_from(secs).unwrap_or(i64::MAX), 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The URL of `token` on `public_url`.
pub fn url(public_url: &str, token: &str) -> String {
    format!("{}{ROUTE_PREFIX}{token}", public_url.trim_end_matches('/'))
}

/// `bytes` as a person reads it: "512 bytes", "1.5 KiB", "50 MiB".
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let shown = format!("{value:.1}");
    format!("{} {}", shown.trim_end_matches(".0"), UNITS[unit])
}

/// Whether `text` holds a link URL's path (`/links/` followed by a token's first
/// characters): what the gateway treats as a secret in arguments to upstream tools.
pub fn mentions_link(text: &str) -> bool {
    text.match_indices(ROUTE_PREFIX).any(|(at, _)| {
        let rest = &text[at + ROUTE_PREFIX.len()..];
        rest.bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            .count()
            >= token::MIN_LEN
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_have_fresh_ids_and_say_their_expiry() {
        let a = Link::new(Kind::Upload, None, Duration::from_secs(60));
        let b = Link::new(Kind::Upload, None, Duration::from_secs(60));
        assert_ne!(a.id, b.id);
        assert!(a.id_is_valid() && !a.expired());
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        let gone = Link {
            expires: 1,
            ..a.clone()
        };
        assert!(gone.expired());
    }

    #[test]
    fn link_paths_are_recognised_in_text() {
        let token = "a".repeat(token::MIN_LEN);
        assert!(mentions_link(&format!(
            "see https://x.example/links/{token} now"
        )));
        assert!(!mentions_link("see https://x.example/links/abc"));
        assert!(!mentions_link("no link here"));
        assert_eq!(url("https://x.example/", "T"), "https://x.example/links/T");
        assert_eq!(human_bytes(512), "512 bytes");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(50 << 20), "50 MiB");
    }
}
