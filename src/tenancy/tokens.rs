//! Bearer tokens for HTTP: which tenant a request's `Authorization: Bearer TOKEN` header names.
//!
//! Tokens come from a file (`--tokens-file`, one `TENANT:TOKEN` per line) and/or the
//! environment (`CEM_TOKENS`, `TENANT:TOKEN,…`). Tenant names are checked by allowlist because
//! they become directory names; tokens must be long enough that guessing one is hopeless. The
//! table keeps only SHA-256 digests of the tokens, and a lookup compares the digest of the
//! presented token with every entry in constant time, so neither timing nor memory reveals one.
//! Nothing here ever formats a token into a message.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{MAX_TENANT_CHARS, valid_tenant_name};

/// Shortest token accepted: 32 characters of the allowed set carry well over 128 bits when
/// generated randomly (e.g. `openssl rand -hex 32` gives 64).
pub const MIN_TOKEN_CHARS: usize = 32;
const MAX_TOKEN_CHARS: usize = 512;
/// A tokens file larger than this is not a tokens file.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error(
        "cannot read the tokens file {path}: {source}. Point --tokens-file (CEM_TOKENS_FILE) at a readable file of TENANT:TOKEN lines"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the tokens file {path} is over 1 MiB: it should hold one TENANT:TOKEN per line")]
    TooLarge { path: PathBuf },
    #[error("{origin}: {problem}")]
    Entry { origin: String, problem: String },
    #[error(
        "no tokens in {0}: add TENANT:TOKEN lines, or leave tokens out to serve on loopback without authentication"
    )]
    Empty(String),
}

/// Why a request was not authenticated. The messages are the 401 answers' text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error(
        "this server requires a bearer token: send the header `Authorization: Bearer <token>` with the token your administrator gave you"
    )]
    Missing,
    #[error(
        "the bearer token is not valid: check that the client sends the token your administrator gave you, unchanged"
    )]
    Invalid,
}

/// Digests of the configured tokens and the tenant each belongs to.
#[derive(Clone)]
pub struct TokenTable {
    entries: Vec<([u8; 32], String)>,
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenTable")
            .field("tenants", &self.tenants())
            .finish()
    }
}

impl TokenTable {
    /// Reads the tokens of a file and of an environment value (either may be absent, not
    /// both). A malformed entry fails the whole table, naming where it is, never its token.
    pub fn load(file: Option<&Path>, env: Option<&str>) -> Result<Self, TokenError> {
        let mut entries = Vec::new();
        let mut origins = Vec::new();
        if let Some(path) = file {
            let text = read_bounded(path)?;
            origins.push(path.display().to_string());
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let origin = format!("{} line {}", path.display(), n + 1);
                entries.push(parse_entry(line, &origin)?);
            }
        }
        if let Some(env) = env {
            origins.push("CEM_TOKENS".into());
            for (n, item) in env.split(',').enumerate() {
                let item = item.trim();
                if item.is_empty() {
                    continue;
                }
                let origin = format!("CEM_TOKENS entry {}", n + 1);
                entries.push(parse_entry(item, &origin)?);
            }
        }
        if entries.is_empty() {
            return Err(TokenError::Empty(origins.join(" and ")));
        }
        let mut seen = BTreeSet::new();
        for (digest, tenant) in &entries {
            if !seen.insert(*digest) {
                return Err(TokenError::Entry {
                    origin: format!("tenant {tenant}"),
                    problem: "a token is listed twice; every token must be unique (one tenant may have several)".into(),
                });
            }
        }
        Ok(Self { entries })
    }

    /// The tenant an `Authorization` header value authenticates.
    pub fn authenticate(&self, authorization: Option<&[u8]>) -> Result<&str, AuthFailure> {
        self.tenant_of(bearer(authorization)?)
            .ok_or(AuthFailure::Invalid)
    }

    /// The tenant a bearer token belongs to, if it is one of the table's.
    pub fn tenant_of(&self, token: &str) -> Option<&str> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Every entry is compared, in constant time, whichever matches.
        let mut found = None;
        for (digest, tenant) in &self.entries {
            if constant_time_eq(digest, &presented) {
                found = Some(tenant.as_str());
            }
        }
        found
    }

    /// The tenants, each once, sorted.
    pub fn tenants(&self) -> Vec<&str> {
        let set: BTreeSet<&str> = self.entries.iter().map(|(_, t)| t.as_str()).collect();
        set.into_iter().collect()
    }
}

/// The token of an `Authorization: Bearer TOKEN` header value: [`AuthFailure::Missing`] without
/// one (no header, another scheme, an empty token), [`AuthFailure::Invalid`] when it is not text.
pub fn bearer(authorization: Option<&[u8]>) -> Result<&str, AuthFailure> {
    let Some(value) = authorization else {
        return Err(AuthFailure::Missing);
    };
    let value = std::str::from_utf8(value).map_err(|_| AuthFailure::Invalid)?;
    match value.trim().split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(token.trim())
        }
        _ => Err(AuthFailure::Missing),
    }
}

/// Characters a token may hold: those of hex, base64 and base64url.
fn valid_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/=".contains(c)
}

fn parse_entry(entry: &str, origin: &str) -> Result<([u8; 32], String), TokenError> {
    let problem = |problem: String| TokenError::Entry {
        origin: origin.to_string(),
        problem,
    };
    let Some((tenant, token)) = entry.split_once(':') else {
        return Err(problem("expected TENANT:TOKEN".into()));
    };
    let (tenant, token) = (tenant.trim(), token.trim());
    if !valid_tenant_name(tenant) {
        return Err(problem(format!(
            "tenant name {tenant:?} is not allowed: use 1 to {MAX_TENANT_CHARS} of a-z, 0-9, '_' and '-', starting with a letter or digit"
        )));
    }
    let chars = token.chars().count();
    if !(MIN_TOKEN_CHARS..=MAX_TOKEN_CHARS).contains(&chars) {
        return Err(problem(format!(
            "the token of tenant {tenant} has {chars} characters; use {MIN_TOKEN_CHARS} to {MAX_TOKEN_CHARS} random ones (e.g. `openssl rand -hex 32`)"
        )));
    }
    if !token.chars().all(valid_token_char) {
        return Err(problem(format!(
            "the token of tenant {tenant} holds a character outside A-Z a-z 0-9 - . _ ~ + / = (e.g. use `openssl rand -hex 32`)"
        )));
    }
    Ok((Sha256::digest(token.as_bytes()).into(), tenant.to_string()))
}

fn read_bounded(path: &Path) -> Result<String, TokenError> {
    let read_err = |source| TokenError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(TokenError::TooLarge {
            path: path.to_owned(),
        });
    }
    crate::host::safe_fs::warn_if_readable_by_all(path, &meta, "the tokens file");
    std::fs::read_to_string(path).map_err(read_err)
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn bearer(token: &str) -> Vec<u8> {
        format!("Bearer {token}").into_bytes()
    }

    #[test]
    fn tokens_map_to_their_tenant() {
        let t = TokenTable::load(None, Some(&format!("alice:{A}, bob:{B}"))).unwrap();
        assert_eq!(t.authenticate(Some(&bearer(A))), Ok("alice"));
        assert_eq!(t.authenticate(Some(&bearer(B))), Ok("bob"));
        assert_eq!(
            t.authenticate(Some(format!("bearer  {B} ").as_bytes())),
            Ok("bob")
        );
        assert_eq!(t.tenants(), vec!["alice", "bob"]);
    }

    #[test]
    fn missing_and_wrong_tokens_are_told_apart() {
        let t = TokenTable::load(None, Some(&format!("alice:{A}"))).unwrap();
        assert_eq!(t.authenticate(None), Err(AuthFailure::Missing));
        assert_eq!(
            t.authenticate(Some(format!("Basic {A}").as_bytes())),
            Err(AuthFailure::Missing)
        );
        assert_eq!(t.authenticate(Some(&bearer(B))), Err(AuthFailure::Invalid));
        // A prefix, a longer token and the empty token are all wrong.
        assert_eq!(
            t.authenticate(Some(&bearer(&A[..39]))),
            Err(AuthFailure::Invalid)
        );
        assert_eq!(
            t.authenticate(Some(&bearer(&format!("{A}a")))),
            Err(AuthFailure::Invalid)
        );
        assert_eq!(t.authenticate(Some(b"Bearer ")), Err(AuthFailure::Missing));
        assert_eq!(
            t.authenticate(Some(&[0x42, 0xff, 0x20, 0x41])),
            Err(AuthFailure::Invalid)
        );
    }

    #[test]
    fn file_entries_comments_and_several_tokens_per_tenant() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(
            &path,
            format!("# team tokens\n\nalice:{A}\n  alice : {B}  \n"),
        )
        .unwrap();
        let t = TokenTable::load(Some(&path), None).unwrap();
        assert_eq!(t.authenticate(Some(&bearer(A))), Ok("alice"));
        assert_eq!(t.authenticate(Some(&bearer(B))), Ok("alice"));
        assert_eq!(t.tenants(), vec!["alice"]);
    }

    #[test]
    fn bad_entries_name_their_place_and_never_the_token() {
        let cases = [
            (format!("alice{A}"), "expected TENANT:TOKEN"),
            (format!("../x:{A}"), "tenant name"),
            (format!("Alice:{A}"), "tenant name"),
            (format!("-a:{A}"), "tenant name"),
            ("alice:short-token".to_string(), "has 11 characters"),
            (format!("alice:{A} x"), "outside"),
            (format!("alice:{A},bob:{A}"), "listed twice"),
        ];
        for (env, expected) in cases {
            let err = TokenTable::load(None, Some(&env)).unwrap_err().to_string();
            assert!(err.contains(expected), "{env}: {err}");
            assert!(!err.contains(A), "the error shows a token: {err}");
            assert!(
                err.contains("CEM_TOKENS") || err.contains("tenant"),
                "{err}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        std::fs::write(&path, format!("alice:{A}\nbob {B}\n")).unwrap();
        let err = TokenTable::load(Some(&path), None).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(!err.contains(B), "{err}");
    }

    #[test]
    fn empty_and_unreadable_sources_are_errors() {
        let err = TokenTable::load(None, Some(" , ")).unwrap_err().to_string();
        assert!(err.contains("no tokens"), "{err}");
        let err = TokenTable::load(Some(Path::new("/nonexistent/tokens")), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("--tokens-file"), "{err}");
    }

    #[test]
    fn tenant_names_are_allowlisted() {
        for ok in ["a", "team-1", "ci_runner", "0x"] {
            assert!(valid_tenant_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "A", "_a", "a b", "é", &"a".repeat(33)] {
            assert!(!valid_tenant_name(bad), "{bad}");
        }
    }

    #[test]
    fn debug_output_holds_no_token() {
        let t = TokenTable::load(None, Some(&format!("alice:{A}"))).unwrap();
        let shown = format!("{t:?}");
        assert!(shown.contains("alice") && !shown.contains(A), "{shown}");
    }
}
