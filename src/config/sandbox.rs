//! The sandbox containers: which image, what runs in it ahead of the job, under which
//! runtime and with which per-container limits. [`SandboxConfig::container`] is the one
//! conversion into what every container is made with: a new container flag is a field here,
//! a line there, and a field of `sandbox::spec::ContainerOptions` with its use in
//! `sandbox::spec::container_body`.

use std::time::Duration;

use clap::Args;

use crate::sandbox::pool::preload::Preload;

use super::ConfigError;
use super::range::Range;
use crate::sandbox::container::spec::ContainerOptions;
pub use crate::sandbox::image::ImageProfile;
pub use crate::sandbox::image::tree::ImageTreeMode;

const TMPFS_MB: Range = Range::at_least("--tmpfs-mb", 1);
const START_TIMEOUT_SECS: Range = Range::new("--start-timeout-secs", 1, 600);
const PIDS_LIMIT_MIN: i64 = 16;
const PIDS_LIMIT: Range = Range::at_least("--pids-limit", PIDS_LIMIT_MIN as u64);

#[derive(Debug, Clone, Args)]
pub struct SandboxConfig {
    /// Sandbox image to run [default: the image of --image-profile,
    /// code-execution-mcp-sandbox:PROFILE-<hash of the embedded images/python>, built on first
    /// start when missing]. An image made by `image build --requirements` goes here.
    #[arg(long, env = "CEM_IMAGE")]
    pub image: Option<String>,

    /// Which sandbox image to build and run when --image is not given: `data` (numpy, pandas,
    /// pyarrow where available, scipy, matplotlib, openpyxl, ...) or `minimal` (the standard
    /// library only: a smaller image, faster to build).
    #[arg(long, env = "CEM_IMAGE_PROFILE", value_enum, default_value_t = ImageProfile::Data)]
    pub image_profile: ImageProfile,

    /// Modules pooled containers import before their job arrives, comma-separated, so code that
    /// uses them does not wait for the import. Default (`auto`): what the tenant's last ten
    /// executions imported, in the share of the pool those executions make up (at least one
    /// container, while the latest call's code imports one of them), so code that imports
    /// nothing never pays for them. `none` turns it off; a
    /// list fixes it for every container. Each module costs idle memory and start-up CPU.
    #[arg(long, env = "CEM_PRELOAD", value_delimiter = ',')]
    pub preload: Option<Vec<String>>,

    /// Base image to build the sandbox image on when it is missing, instead of the pinned
    /// python:3.13-slim-trixie digest (e.g. the offline base of images/offline-base.sh).
    #[arg(long, env = "CEM_BASE_IMAGE")]
    pub base_image: Option<String>,

    /// OCI runtime the sandbox containers run under, as registered with the engine (runsc for
    /// gVisor, crun, kata-runtime). Default: the engine's default runtime (usually runc).
    #[arg(long, env = "CEM_RUNTIME")]
    pub runtime: Option<String>,

    /// Processes and threads one sandbox may have at once.
    #[arg(long, env = "CEM_PIDS_LIMIT", default_value_t = 128, value_parser = clap::value_parser!(i64).range(PIDS_LIMIT_MIN..))]
    pub pids_limit: i64,

    /// Size of the sandbox's writable /tmp (tmpfs), in MiB; counts against its memory limit.
    #[arg(long, env = "CEM_TMPFS_MB", default_value_t = 64, value_parser = TMPFS_MB.parser::<u64>())]
    pub tmpfs_mb: u64,

    /// Where sandboxes read the image's /usr from: `host` bind-mounts a read-only copy made
    /// once per image under --image-tree-dir, `engine` reads it from the engine's storage,
    /// `auto` takes the host copy where the engine's storage driver reads through a filesystem
    /// in user space (fuse-overlayfs), where it makes Python's imports about 2.7 times as fast.
    /// When the copy cannot be made, the server warns and reads from the engine's storage.
    #[arg(long, env = "CEM_IMAGE_TREE", value_enum, default_value_t = ImageTreeMode::Auto)]
    pub image_tree: ImageTreeMode,

    /// Directory of the host copies of sandbox images' /usr, one per image id, shared safely
    /// by servers on one host [default: DATA_DIR/image-trees]. A local disk: with
    /// --shared-data, `auto` reads from the engine's storage unless this is set.
    #[arg(long, env = "CEM_IMAGE_TREE_DIR")]
    pub image_tree_dir: Option<std::path::PathBuf>,

    /// Longest wait for a sandbox container to be ready for an execution (taken from the pool,
    /// or created and started), in seconds; past it the call fails saying the engine is slow.
    /// The code's own timeout starts after this.
    #[arg(long, env = "CEM_START_TIMEOUT_SECS", default_value_t = 30, value_parser = START_TIMEOUT_SECS.parser::<u64>())]
    pub start_timeout_secs: u64,
}

impl SandboxConfig {
    /// The sandbox image to run: `--image`, else the profile's default tag.
    pub fn image_tag(&self) -> String {
        self.image
            .clone()
            .unwrap_or_else(|| crate::sandbox::image::default_tag(self.image_profile))
    }

    /// What pooled containers import ahead (see `--preload`).
    pub fn preload(&self) -> Preload {
        // An empty value (CEM_PRELOAD= in a compose file) means the default, like no value.
        let given = self
            .preload
            .as_ref()
            .filter(|list| list.iter().any(|m| !m.trim().is_empty()));
        match given {
            None => Preload::Learned,
            Some(list) if list.iter().any(|m| m.trim() == "auto") => Preload::Learned,
            Some(list) if list.iter().any(|m| m.trim() == "none") => Preload::Fixed(Vec::new()),
            Some(list) => Preload::Fixed(
                list.iter()
                    .map(|m| m.trim().to_string())
                    .filter(|m| !m.is_empty())
                    .collect(),
            ),
        }
    }

    pub fn start_timeout(&self) -> Duration {
        Duration::from_secs(self.start_timeout_secs)
    }

    /// What every container of the sandbox is made with.
    pub fn container(&self) -> ContainerOptions {
        ContainerOptions {
            pids_limit: self.pids_limit,
            tmpfs_bytes: self.tmpfs_mb * 1024 * 1024,
            runtime: self.runtime.clone(),
            runtime_kind: Default::default(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        TMPFS_MB.check(self.tmpfs_mb)?;
        START_TIMEOUT_SECS.check(self.start_timeout_secs)?;
        PIDS_LIMIT.check(self.pids_limit)?;
        if let Some(runtime) = &self.runtime {
            let allowed = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
            if runtime.is_empty() || runtime.len() > 64 || !runtime.chars().all(allowed) {
                return Err(ConfigError::Invalid {
                    flag: "--runtime",
                    problem: format!(
                        "{runtime:?} is not a runtime name (letters, digits, '.', '_', '-'; at most 64)"
                    ),
                });
            }
        }
        let fixed = match self.preload() {
            Preload::Fixed(modules) => modules,
            Preload::Learned => Vec::new(),
        };
        for module in fixed {
            let ok = module.len() <= 100
                && module.split('.').all(|part| {
                    part.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
            if !ok {
                return Err(ConfigError::Invalid {
                    flag: "--preload",
                    problem: format!(
                        "{module:?} is not a module name (dotted Python identifiers, such as pandas or matplotlib.pyplot; `none` for no preloading)"
                    ),
                });
            }
        }
        Ok(())
    }
}
