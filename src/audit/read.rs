//! Reading the trail back for `code-execution-mcp audit`: every node's files of the chosen
//! tenants (current and rotated), records (executions and transfers) filtered by time and
//! execution, sorted by time.
//! A line that is not a record (one a full disk cut short) is reported and skipped, never
//! fatal; a line past [`MAX_LINE_BYTES`] is skipped the same way.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::record::AuditEntry;

/// The longest line read as a record (a record with `--audit-code` carries at most the
/// largest code a call may send, tokenized).
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// Which records to read.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// Tenant directories to read (`_default` for a server without tenants); empty: all.
    pub tenants: Vec<String>,
    /// Only records at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Only this execution's record (no transfers).
    pub execution_id: Option<String>,
}

/// Why the trail could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(
        "no audit trail at {0}: the server writes it under DATA_DIR/audit (pass --data-dir, or CEM_DATA_DIR, as the server has it)"
    )]
    Missing(PathBuf),
    #[error(
        "{0:?} is not a tenant: tenant names are lowercase letters, digits, '_' and '-' (or _default for a server without tenants)"
    )]
    BadTenant(String),
    #[error("no audit records for tenant {0} under {1}")]
    NoTenant(String, PathBuf),
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A line that was skipped, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub file: PathBuf,
    pub line: usize,
    pub why: String,
}

/// The records under `DATA_DIR/audit` that `query` selects, oldest first, and the lines
/// skipped on the way.
pub fn read(data_dir: &Path, query: &Query) -> Result<(Vec<AuditEntry>, Vec<Skipped>), ReadError> {
    let root = data_dir.join(super::DIR_NAME);
    if !root.is_dir() {
        return Err(ReadError::Missing(root));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ReadError::Io { path, source }
    };
    let tenants: Vec<String> = if query.tenants.is_empty() {
        let mut all: Vec<String> = std::fs::read_dir(&root)
            .map_err(io(&root))?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| super::valid_tenant_dir(name))
            .collect();
        all.sort();
        all
    } else {
        for t in &query.tenants {
            if !super::valid_tenant_dir(t) {
                return Err(ReadError::BadTenant(t.clone()));
            }
        }
        query.tenants.clone()
    };
    let (mut records, mut skipped) = (Vec::new(), Vec::new());
    for tenant in &tenants {
        let dir = root.join(tenant);
        // The directory itself, never a link out of the trail.
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            _ if query.tenants.is_empty() => continue,
            _ => return Err(ReadError::NoTenant(tenant.clone(), root.clone())),
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(io(&dir))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        for file in files {
            read_file(&file, query, &mut records, &mut skipped)?;
        }
    }
    // RFC 3339 UTC with fixed digits sorts as text; ties keep file order.
    records.sort_by(|a, b| a.time().cmp(b.time()));
    Ok((records, skipped))
}

fn read_file(
    file: &Path,
    query: &Query,
    records: &mut Vec<AuditEntry>,
    skipped: &mut Vec<Skipped>,
) -> Result<(), ReadError> {
    let opened = std::fs::File::open(file).map_err(|source| ReadError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    let mut reader = std::io::BufReader::new(opened);
    let mut buf = Vec::new();
    let mut number = 0;
    loop {
        buf.clear();
        number += 1;
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|source| ReadError::Io {
                path: file.to_path_buf(),
                source,
            })?;
        if n == 0 {
            return Ok(());
        }
        let skip = |why: String| Skipped {
            file: file.to_path_buf(),
            line: number,
            why,
        };
        if buf.len() > MAX_LINE_BYTES {
            skipped.push(skip(format!("longer than {MAX_LINE_BYTES} bytes")));
            // The rest of the long line.
            let mut rest = Vec::new();
            reader
                .read_until(b'\n', &mut rest)
                .map_err(|source| ReadError::Io {
                    path: file.to_path_buf(),
                    source,
                })?;
            continue;
        }
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let record: AuditEntry = match serde_json::from_str(text) {
            Ok(r) => r,
            Err(e) => {
                skipped.push(skip(format!("not a record: {e}")));
                continue;
            }
        };
        if let Some(since) = query.since {
            match DateTime::parse_from_rfc3339(record.time()) {
                Ok(t) if t.with_timezone(&Utc) >= since => {}
                Ok(_) => continue,
                Err(e) => {
                    skipped.push(skip(format!("bad time {:?}: {e}", record.time())));
                    continue;
                }
            }
        }
        if let Some(id) = &query.execution_id
            && record.execution().is_none_or(|e| e.execution_id != *id)
        {
            continue;
        }
        records.push(record);
    }
}

/// `--since`: an RFC 3339 time, a date (`2026-11-26`, midnight UTC), or a span back from `now`
/// (`30s`, `15m`, `2h`, `7d`).
pub fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).expect("midnight").and_utc());
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: i64 = digits
        .parse()
        .ok()
        .filter(|n| *n <= 100_000)
        .ok_or_else(|| bad_since(text))?;
    let span = match unit {
        "s" => chrono::Duration::seconds(n),
        "m" => chrono::Duration::minutes(n),
        "h" => chrono::Duration::hours(n),
        "d" => chrono::Duration::days(n),
        _ => return Err(bad_since(text)),
    };
    Ok(now - span)
}

fn bad_since(text: &str) -> String {
    format!(
        "--since {text:?} is not a time: give an RFC 3339 time (2026-11-26T10:00:00Z), a date (2026-11-26) or a span back from now (30s, 15m, 2h, 7d)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditRecord;
    use crate::audit::log::{AuditLog, AuditSettings};
    use crate::audit::record::sample;

    fn record(tenant: &str, time: &str, id: &str) -> AuditRecord {
        sample(Some(tenant), time, id)
    }

    fn transfer(tenant: &str, time: &str, link: &str) -> crate::audit::TransferRecord {
        crate::audit::TransferRecord {
            kind: crate::audit::TransferKind::Upload,
            time: time.into(),
            tenant: Some(tenant.into()),
            node: "n1".into(),
            link_id: link.into(),
            name: Some("in.csv".into()),
            size: 3,
            sha256: None,
            client: "c".into(),
            status: "ok".into(),
        }
    }

    #[test]
    fn reads_every_node_sorted_filtered_and_skips_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let settings = AuditSettings {
            max_file_bytes: 1 << 20,
            keep_rotated: 2,
            include_code: false,
            required: false,
        };
        let n1 = AuditLog::new(dir.path(), "alice", "n1", settings);
        let n2 = AuditLog::new(dir.path(), "alice", "n2", settings);
        let bob = AuditLog::new(dir.path(), "bob", "n1", settings);
        n1.append(&record("alice", "2026-11-26T10:00:02.000Z", "a2"))
            .unwrap();
        n2.append(&record("alice", "2026-11-26T10:00:01.000Z", "a1"))
            .unwrap();
        bob.append(&record("bob", "2026-11-26T10:00:03.000Z", "b1"))
            .unwrap();
        // A transfer, read beside the executions.
        bob.append(&transfer("bob", "2026-11-26T10:00:04.000Z", "l1"))
            .unwrap();
        // A line a full disk cut short.
        let path = dir.path().join("audit/alice/n2.jsonl");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"time\": \"2026-11-26T1");
        std::fs::write(&path, text).unwrap();

        let ids = |q: &Query| {
            let (records, skipped) = read(dir.path(), q).unwrap();
            (
                records
                    .into_iter()
                    .map(|r| match r {
                        AuditEntry::Execution(e) => e.execution_id.clone(),
                        AuditEntry::Transfer(t) => format!("{:?}:{}", t.kind, t.link_id),
                    })
                    .collect::<Vec<_>>(),
                skipped.len(),
            )
        };
        assert_eq!(
            ids(&Query::default()),
            (
                vec!["a1".into(), "a2".into(), "b1".into(), "Upload:l1".into()],
                1
            )
        );
        let alice = Query {
            tenants: vec!["alice".into()],
            ..Query::default()
        };
        assert_eq!(ids(&alice).0, vec!["a1", "a2"]);
        let since = Query {
            since: Some(parse_since("2026-11-26T10:00:02Z", Utc::now()).unwrap()),
            ..Query::default()
        };
        assert_eq!(ids(&since).0, vec!["a2", "b1", "Upload:l1"]);
        let one = Query {
            execution_id: Some("b1".into()),
            ..Query::default()
        };
        assert_eq!(ids(&one).0, vec!["b1"]);
        let bad = Query {
            tenants: vec!["../x".into()],
            ..Query::default()
        };
        assert!(matches!(
            read(dir.path(), &bad),
            Err(ReadError::BadTenant(_))
        ));
        let absent = Query {
            tenants: vec!["carol".into()],
            ..Query::default()
        };
        assert!(matches!(
            read(dir.path(), &absent),
            Err(ReadError::NoTenant(..))
        ));
        assert!(matches!(
            read(&dir.path().join("nowhere"), &Query::default()),
            Err(ReadError::Missing(_))
        ));
    }

    #[test]
    fn since_takes_times_dates_and_spans() {
        let now = DateTime::parse_from_rfc3339("2026-11-26T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let at = |s: &str| parse_since(s, now).unwrap().to_rfc3339();
        assert_eq!(at("15m"), "2026-11-26T11:45:00+00:00");
        assert_eq!(at("2h"), "2026-11-26T10:00:00+00:00");
        assert_eq!(at("1d"), "2026-11-25T12:00:00+00:00");
        assert_eq!(at("2026-11-20"), "2026-11-20T00:00:00+00:00");
        assert_eq!(at("2026-11-26T13:00:00+02:00"), "2026-11-26T11:00:00+00:00");
        for bad in ["", "yesterday", "5w", "-3h", "99999999999h"] {
            assert!(parse_since(bad, now).is_err(), "{bad}");
        }
    }
}
