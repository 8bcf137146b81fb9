//! Upload and download links: how large an upload may be, how long a link lives, how much one
//! tenant may upload, where the routes are served on stdio, and the key that signs the links.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::ConfigError;
use super::range::Range;
use crate::links::LinkSettings;

const UPLOAD_MAX_MB: Range = Range::new("--upload-max-mb", 1, 1 << 20);
const LINK_TTL: Range = Range::new("--link-ttl-secs", 60, 7 * 24 * 3600);
const UPLOADS_CONCURRENT: Range = Range::new("--uploads-concurrent", 1, 1000);
const UPLOAD_MB_PER_HOUR: Range = Range::new("--upload-mb-per-hour", 1, 1 << 30);

#[derive(Debug, Clone, Args)]
pub struct LinksConfig {
    /// Largest file one upload link accepts, in MiB (a link may ask for less; the workspace
    /// quota applies too).
    #[arg(long, env = "CEM_UPLOAD_MAX_MB", default_value_t = 512, value_parser = UPLOAD_MAX_MB.parser::<u64>())]
    pub upload_max_mb: u64,

    /// Longest a link stays usable, in seconds (a link may ask for less); also its default
    /// lifetime.
    #[arg(long, env = "CEM_LINK_TTL_SECS", default_value_t = 3600, value_parser = LINK_TTL.parser::<u64>())]
    pub link_ttl_secs: u64,

    /// Uploads one tenant may have in progress at once on this server; more are answered 429.
    #[arg(long, env = "CEM_UPLOADS_CONCURRENT", default_value_t = 4, value_parser = UPLOADS_CONCURRENT.parser::<u64>())]
    pub uploads_concurrent: u64,

    /// MiB one tenant may upload per hour on this server (a sliding hour); an upload past it
    /// is refused with 429 and the time to wait.
    #[arg(long, env = "CEM_UPLOAD_MB_PER_HOUR", default_value_t = 4096, value_parser = UPLOAD_MB_PER_HOUR.parser::<u64>())]
    pub upload_mb_per_hour: u64,

    /// With stdio: the address the link routes are served on (loopback, with --public-url
    /// naming how a browser reaches it). Over HTTP they are served beside /mcp.
    #[arg(long, env = "CEM_LINKS_LISTEN")]
    pub links_listen: Option<SocketAddr>,

    /// File holding the key links are signed with (32 bytes or more); every node of a swarm
    /// must have the same [default: DATA_DIR/links/key, made at the first start].
    #[arg(long, env = "CEM_LINKS_KEY_FILE")]
    pub links_key_file: Option<PathBuf>,
}

impl LinksConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        UPLOAD_MAX_MB.check(self.upload_max_mb)?;
        LINK_TTL.check(self.link_ttl_secs)?;
        UPLOADS_CONCURRENT.check(self.uploads_concurrent)?;
        UPLOAD_MB_PER_HOUR.check(self.upload_mb_per_hour)?;
        Ok(())
    }

    /// The links' settings; `public_url` is `--public-url` normalized (links are built on it,
    /// never on a request's Host header), `data_dir` holds the default key file.
    pub fn settings(&self, public_url: Option<String>, data_dir: &std::path::Path) -> LinkSettings {
        LinkSettings {
            public_url,
            max_upload_bytes: self.upload_max_mb.saturating_mul(1 << 20),
            max_ttl: Duration::from_secs(self.link_ttl_secs),
            concurrent_uploads: usize::try_from(self.uploads_concurrent).unwrap_or(usize::MAX),
            bytes_per_hour: self.upload_mb_per_hour.saturating_mul(1 << 20),
            key_file: self
                .links_key_file
                .clone()
                .unwrap_or_else(|| data_dir.join(crate::links::DIR_NAME).join("key")),
        }
    }
}
