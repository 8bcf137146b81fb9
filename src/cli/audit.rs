//! `audit`: the audit trail's records as JSON lines on stdout, oldest first, for `jq`, a log
//! shipper or a person. Lines the reader skipped (one a full disk cut short) are reported on
//! stderr with their file and line.

use std::io::Write;
use std::path::PathBuf;

use crate::audit::read::{self, Query, ReadError};

/// What `audit` was asked for (its flags).
#[derive(Debug, clap::Args)]
pub struct Audit {
    /// The server's data directory (the trail is DATA_DIR/audit).
    #[arg(long, env = "CEM_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Only this tenant's records (repeatable); `_default` is a server without tenants.
    #[arg(long)]
    pub tenant: Vec<String>,
    /// Only records from this time on: RFC 3339 (2026-11-26T10:00:00Z), a date (2026-11-26), or
    /// a span back from now (30s, 15m, 2h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Only the record of this execution (its `exe_…` id, as logs and results name it).
    #[arg(long)]
    pub execution: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AuditCommandError {
    #[error("{0}")]
    Since(String),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("cannot write to stdout: {0}")]
    Output(std::io::Error),
}

/// Prints the records `audit` selects; returns how many.
pub fn run(audit: Audit) -> Result<usize, AuditCommandError> {
    let since = match &audit.since {
        Some(text) => {
            Some(read::parse_since(text, chrono::Utc::now()).map_err(AuditCommandError::Since)?)
        }
        None => None,
    };
    let data_dir = audit.data_dir.unwrap_or_else(crate::config::data_home);
    let query = Query {
        tenants: audit.tenant,
        since,
        execution_id: audit.execution,
    };
    let (records, skipped) = read::read(&data_dir, &query)?;
    for s in &skipped {
        eprintln!(
            "code-execution-mcp audit: skipped {} line {}: {}",
            s.file.display(),
            s.line,
            s.why
        );
    }
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for record in &records {
        let line = serde_json::to_string(record).expect("a record serializes");
        writeln!(out, "{line}").map_err(AuditCommandError::Output)?;
    }
    out.flush().map_err(AuditCommandError::Output)?;
    Ok(records.len())
}
