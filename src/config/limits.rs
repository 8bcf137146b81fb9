//! What one execution may take and give back: its timeout and memory (the defaults, and the
//! most a caller may ask for), the code it is sent, the output, result and images it returns.

use clap::Args;

use super::ConfigError;
use super::range::Range;
use crate::sandbox::HarnessLimits;

/// Longest `--max-timeout-secs` (a day).
const MAX_TIMEOUT_SECS: u64 = 86_400;
/// Code travels to the sandbox in one 8 MiB frame.
const MAX_CODE_BYTES: u64 = 4 * 1024 * 1024;
const MAX_RESULT_BYTES: u64 = 64 * 1024 * 1024;

const MAX_TIMEOUT: Range = Range::new("--max-timeout-secs", 1, MAX_TIMEOUT_SECS);
const MAX_CODE: Range = Range::new("--max-code-bytes", 1, MAX_CODE_BYTES);
const MAX_OUTPUT: Range = Range::new("--max-output-bytes", 1, MAX_RESULT_BYTES);
const MAX_RESULT: Range = Range::new("--max-result-bytes", 1, MAX_RESULT_BYTES);
const MAX_IMAGES: Range = Range::new("--max-images", 0, 64);
const IMAGE_MAX_SIDE: Range = Range::new("--image-max-side", 64, 8192);
const IMAGE_MAX_KB: Range = Range::new("--image-max-kb", 16, 5 * 1024);

/// Below this the interpreter itself does not start reliably.
pub const MIN_MEMORY_MB: u64 = 32;
#[derive(Debug, Clone, Args)]
pub struct LimitsConfig {
    /// Timeout of an execution when the caller gives none, in seconds.
    #[arg(long, env = "CEM_DEFAULT_TIMEOUT_SECS", default_value_t = 30)]
    pub default_timeout_secs: u64,

    /// Largest timeout a caller may ask for, in seconds; larger requests are clamped.
    #[arg(long, env = "CEM_MAX_TIMEOUT_SECS", default_value_t = 300, value_parser = MAX_TIMEOUT.parser::<u64>())]
    pub max_timeout_secs: u64,

    /// Memory limit of an execution when the caller gives none, in MiB (swap is not allowed).
    #[arg(long, env = "CEM_DEFAULT_MEMORY_MB", default_value_t = 500)]
    pub default_memory_mb: u64,

    /// Largest memory limit a caller may ask for, in MiB; larger requests are clamped.
    #[arg(long, env = "CEM_MAX_MEMORY_MB", default_value_t = 4096)]
    pub max_memory_mb: u64,

    /// Serve even where the engine does not enforce the sandbox's memory or pids limits (a
    /// rootless engine without cgroups: see README, "Engines"). Without it the server refuses
    /// to start there; with it every result lists the limits not enforced.
    #[arg(long, env = "CEM_ALLOW_UNENFORCED_LIMITS")]
    pub allow_unenforced_limits: bool,

    /// Largest accepted `code` argument, in bytes.
    #[arg(long, env = "CEM_MAX_CODE_BYTES", default_value_t = 1024 * 1024, value_parser = MAX_CODE.parser::<usize>())]
    pub max_code_bytes: usize,

    /// Output kept per stream (stdout, stderr) of an execution, in bytes; the rest is dropped
    /// and the response says it was truncated.
    #[arg(long, env = "CEM_MAX_OUTPUT_BYTES", default_value_t = 128 * 1024, value_parser = MAX_OUTPUT.parser::<usize>())]
    pub max_output_bytes: usize,

    /// Largest `result` value returned, in bytes of JSON; larger ones are truncated.
    #[arg(long, env = "CEM_MAX_RESULT_BYTES", default_value_t = 256 * 1024, value_parser = MAX_RESULT.parser::<usize>())]
    pub max_result_bytes: usize,

    /// Images one execution may return (show_image, matplotlib figures); more are dropped and
    /// the result says so. 0 turns images off.
    #[arg(long, env = "CEM_MAX_IMAGES", default_value_t = 8, value_parser = MAX_IMAGES.parser::<usize>())]
    pub max_images: usize,

    /// Longest side of a returned image, in pixels; larger images are scaled down to it.
    #[arg(long, env = "CEM_IMAGE_MAX_SIDE", default_value_t = 1568, value_parser = IMAGE_MAX_SIDE.parser::<u32>())]
    pub image_max_side: u32,

    /// Largest returned image, in KiB of PNG; a larger one is scaled down until it fits.
    #[arg(long, env = "CEM_IMAGE_MAX_KB", default_value_t = 1024, value_parser = IMAGE_MAX_KB.parser::<u32>())]
    pub image_max_kb: u32,
}

impl LimitsConfig {
    /// What the harness in each container cuts and drops.
    pub fn harness_limits(&self) -> HarnessLimits {
        HarnessLimits {
            max_output_bytes: self.max_output_bytes,
            max_result_bytes: self.max_result_bytes,
            max_images: self.max_images,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        MAX_TIMEOUT.check(self.max_timeout_secs)?;
        MAX_CODE.check(self.max_code_bytes)?;
        MAX_OUTPUT.check(self.max_output_bytes)?;
        MAX_RESULT.check(self.max_result_bytes)?;
        MAX_IMAGES.check(self.max_images)?;
        IMAGE_MAX_SIDE.check(self.image_max_side)?;
        IMAGE_MAX_KB.check(self.image_max_kb)?;
        if self.default_timeout_secs == 0 || self.default_timeout_secs > self.max_timeout_secs {
            return Err(ConfigError::Conflict(format!(
                "--default-timeout-secs {} must be between 1 and --max-timeout-secs {}",
                self.default_timeout_secs, self.max_timeout_secs
            )));
        }
        let min_memory = MIN_MEMORY_MB;
        if self.default_memory_mb < min_memory || self.default_memory_mb > self.max_memory_mb {
            return Err(ConfigError::Conflict(format!(
                "--default-memory-mb {} must be between {min_memory} and --max-memory-mb {}",
                self.default_memory_mb, self.max_memory_mb
            )));
        }
        Ok(())
    }
}
