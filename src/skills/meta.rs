//! Skill metadata: [`SkillMeta`] as stored in `NAME.json`, the lenient form read from disk
//! (hand-written or shipped metadata may lack fields), and how a partial record is completed
//! from the code file. No I/O here; the readers in the store hand in the bytes they read.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Metadata of one version of a skill, as stored in `NAME.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillMeta {
    pub name: String,
    pub description: String,
    /// When the skill was first saved (kept across overwrites).
    #[serde(with = "rfc3339")]
    pub created: DateTime<Utc>,
    /// When this version was saved.
    #[serde(with = "rfc3339")]
    pub updated: DateTime<Utc>,
    /// Lower-case hex SHA-256 of the code.
    pub sha256: String,
    /// 1 for the first save, one more for each later one (also across a delete).
    pub version: u64,
    /// Size of the code in bytes.
    pub size: u64,
}

/// A skill with its code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    pub meta: SkillMeta,
    pub code: String,
}

/// Serde for timestamps: RFC 3339 in UTC with microseconds, e.g. `2025-01-31T12:00:00.123456Z`.
mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Micros, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let s = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&s)
            .map(|t| t.with_timezone(&Utc))
            .map_err(serde::de::Error::custom)
    }
}

/// `NAME.json` as found on disk: every field optional, so that hand-written metadata (or the
/// shipped `{"description": …}` form) is accepted and completed from the code file.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct RawMeta {
    pub(super) name: Option<String>,
    pub(super) description: Option<String>,
    pub(super) created: Option<String>,
    pub(super) updated: Option<String>,
    pub(super) sha256: Option<String>,
    pub(super) version: Option<u64>,
    pub(super) size: Option<u64>,
}

pub(super) enum MetaRead {
    Missing,
    Malformed(String),
    Found(RawMeta),
}

/// Now, to the microsecond (what the metadata stores, so values round-trip exactly).
pub(super) fn now() -> DateTime<Utc> {
    let t = Utc::now();
    DateTime::from_timestamp_micros(t.timestamp_micros()).unwrap_or(t)
}

pub(super) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

fn parse_time(field: &str, value: &str) -> std::result::Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{field} {value:?} is not an RFC 3339 timestamp ({e})"))
}

/// Completes `raw` into metadata for `name`. With `code`, hash and size are computed from it
/// (the code is the truth); without, they must be in `raw`.
pub(super) fn complete_meta(
    name: &str,
    raw: &RawMeta,
    code: Option<&str>,
    mtime: DateTime<Utc>,
) -> std::result::Result<SkillMeta, String> {
    if let Some(n) = &raw.name
        && n != name
    {
        return Err(format!("its name field says {n:?}"));
    }
    let created = match &raw.created {
        Some(s) => parse_time("created", s)?,
        None => mtime,
    };
    let updated = match &raw.updated {
        Some(s) => parse_time("updated", s)?,
        None => mtime.max(created),
    };
    if let Some(h) = &raw.sha256
        && (h.len() != 64 || !h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    {
        return Err(format!("sha256 {h:?} is not 64 lower-case hex digits"));
    }
    let (sha256, size) = match code {
        Some(code) => {
            let sha = sha256_hex(code.as_bytes());
            if raw.sha256.as_ref().is_some_and(|h| *h != sha) {
                tracing::warn!(
                    skill = name,
                    "the code of this skill was changed outside the store; reporting the hash of the file"
                );
            }
            (sha, code.len() as u64)
        }
        None => match (&raw.sha256, raw.size) {
            (Some(h), Some(s)) => (h.clone(), s),
            _ => return Err("sha256 or size is missing".into()),
        },
    };
    Ok(SkillMeta {
        name: name.to_owned(),
        description: raw.description.clone().unwrap_or_default(),
        created,
        updated,
        sha256,
        version: raw.version.unwrap_or(1).max(1),
        size,
    })
}
