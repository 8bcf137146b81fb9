//! Personal data: whether what the model sees is tokenized, and how tokens are kept.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::ConfigError;
use super::range::Range;

/// What happens to personal data in what `execute_code` returns to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PiiOutput {
    /// Printed lines, the result and error text pass through the PII engine: values become
    /// tokens like [EMAIL_ab12cd34] (workspace files and the code itself keep real values).
    Tokenize,
    /// Output is returned as the code produced it.
    Off,
}

const PII_VAULT_SIZE: Range = Range::at_least("--pii-vault-size", 1);

#[derive(Debug, Clone, Args)]
pub struct PiiConfig {
    /// Personal data in execute_code's output to the model: tokenized (default) or left as is.
    #[arg(long, env = "CEM_PII_OUTPUT", value_enum, default_value_t = PiiOutput::Tokenize)]
    pub pii_output: PiiOutput,

    /// PII tokens the server remembers for restore_pii (oldest forgotten first).
    #[arg(long, env = "CEM_PII_VAULT_SIZE", default_value_t = 100_000, value_parser = PII_VAULT_SIZE.parser::<usize>())]
    pub pii_vault_size: usize,

    /// File holding the PII key: 32 bytes as 64 hex digits (`openssl rand -hex 32`; in a swarm,
    /// a Docker secret). With it, each tenant's tokens are keyed by a secret derived from the key
    /// and its vault is kept, encrypted, in its data directory, so servers sharing the key and
    /// the storage restore each other's tokens (a tenant keeps them when it moves to another
    /// server). Without it, a random secret per run and a vault in memory.
    #[arg(long, env = "CEM_PII_KEY_FILE")]
    pub pii_key_file: Option<PathBuf>,
}

impl PiiConfig {
    /// The flags' ranges, for a configuration built in code.
    pub fn validate(&self) -> Result<(), ConfigError> {
        PII_VAULT_SIZE.check(self.pii_vault_size)?;
        Ok(())
    }

    /// Whether what the tools show the model is tokenized.
    pub fn tokenizes(&self) -> bool {
        self.pii_output == PiiOutput::Tokenize
    }
}
