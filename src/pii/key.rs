//! The deployment's PII key (`--pii-key-file`) and the secrets derived from it.
//!
//! Why a key file: without it every server (every tenant of it) draws a random token secret at
//! start, so tokens die with the process and no other server can restore them. Servers started
//! with the same key derive the same per-tenant secrets, so a tenant that moves to another server
//! (its node died) keeps its tokens; the encrypted vault file (`vault_file.rs`) carries their
//! values across.
//!
//! Derivation: HMAC-SHA256(key, label ‖ 0x00 ‖ scope), where the label says what the secret is for
//! (the token secret, the vault file's encryption key) and the scope whose it is: `tenant:NAME`,
//! or `single` for the one tenant of stdio and of HTTP without tokens (tenant names never contain
//! `:`, so no tenant's scope equals it). So every server sharing the key mints the same tokens for
//! the same tenant, two tenants never share a secret, and the vault key is never a token secret
//! (a token, which shows MAC bytes, tells nothing about the key that encrypts the values).

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::token::Keyed;

/// Label of the per-tenant token secret.
const TOKEN_LABEL: &[u8] = b"code-execution-mcp/pii/token-secret/v1";
/// Label of the per-tenant key of the vault file.
const VAULT_LABEL: &[u8] = b"code-execution-mcp/pii/vault-key/v1";

/// Why the key file could not be used. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error(
        "cannot read the PII key file {path}: {error}. Point --pii-key-file (CEM_PII_KEY_FILE) at a file this server can read (in a swarm, the Docker secret's path, /run/secrets/NAME), or leave the setting out for tokens that last one server run"
    )]
    // `error`, not `source`: the message holds the cause, so it is not chained again.
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "the PII key file {path} holds {found} characters (surrounding whitespace ignored), not 64: it must hold a 32-byte key as 64 hex digits, such as `openssl rand -hex 32` prints"
    )]
    Length { path: PathBuf, found: usize },
    #[error(
        "the PII key file {path} holds a character that is not a hex digit (at position {position}): it must hold a 32-byte key as 64 hex digits (0-9, a-f), such as `openssl rand -hex 32` prints"
    )]
    NotHex { path: PathBuf, position: usize },
}

/// Whose secrets: one tenant of an HTTP server with tokens, or the single tenant of stdio and of
/// HTTP without tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    Single,
    Tenant(&'a str),
}

impl<'a> Scope<'a> {
    /// `None` is the single tenant (as `App::open` names tenants).
    pub fn of(tenant: Option<&'a str>) -> Self {
        tenant.map_or(Scope::Single, Scope::Tenant)
    }

    /// The bytes that name this scope in derivations and as the vault's associated data.
    pub(crate) fn label(&self) -> Vec<u8> {
        match self {
            Scope::Single => b"single".to_vec(),
            Scope::Tenant(name) => [b"tenant:".as_slice(), name.as_bytes()].concat(),
        }
    }
}

/// The 32-byte key of `--pii-key-file`. Its `Debug` does not show it.
#[derive(Clone)]
pub struct PiiKey(Keyed);

impl fmt::Debug for PiiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PiiKey(<secret>)")
    }
}

impl PiiKey {
    pub fn new(key: [u8; 32]) -> Self {
        PiiKey(Keyed::new(&key))
    }

    /// Reads the key from `path`: 64 hex digits, surrounding whitespace ignored.
    pub fn from_file(path: &Path) -> Result<Self, KeyFileError> {
        let unreadable = |error| KeyFileError::Unreadable {
            path: path.to_path_buf(),
            error,
        };
        // A few KiB at most: a key file is 65 bytes, and a wrong path may name something huge.
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(4096).read_to_end(&mut bytes))
            .map_err(unreadable)?;
        // Bytes that are not UTF-8 become U+FFFD, which is not a hex digit either.
        Self::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| e.at(path))
    }

    /// Parses 64 hex digits (either case), surrounding whitespace ignored.
    pub fn parse(text: &str) -> Result<Self, KeyFileError> {
        let hex = text.trim();
        if let Some(position) = hex.chars().position(|c| !c.is_ascii_hexdigit()) {
            return Err(KeyFileError::NotHex {
                path: PathBuf::new(),
                position,
            });
        }
        if hex.len() != 64 {
            return Err(KeyFileError::Length {
                path: PathBuf::new(),
                found: hex.len(),
            });
        }
        let mut key = [0u8; 32];
        hex::decode_to_slice(hex, &mut key).expect("64 hex digits");
        Ok(Self::new(key))
    }

    /// The secret tokens of `scope` are minted under.
    pub fn token_secret(&self, scope: Scope<'_>) -> [u8; 32] {
        self.0.mac_parts(&[TOKEN_LABEL, &[0], &scope.label()])
    }

    /// The key that encrypts the vault file of `scope`.
    pub fn vault_key(&self, scope: Scope<'_>) -> [u8; 32] {
        self.0.mac_parts(&[VAULT_LABEL, &[0], &scope.label()])
    }
}

impl KeyFileError {
    fn at(self, at: &Path) -> Self {
        let path = at.to_path_buf();
        match self {
            KeyFileError::Unreadable { error, .. } => KeyFileError::Unreadable { path, error },
            KeyFileError::Length { found, .. } => KeyFileError::Length { path, found },
            KeyFileError::NotHex { position, .. } => KeyFileError::NotHex { path, position },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn parses_hex_with_surrounding_whitespace() {
        let a = PiiKey::parse(&format!("  {KEY}\n")).unwrap();
        let b = PiiKey::parse(&KEY.to_uppercase()).unwrap();
        assert_eq!(a.token_secret(Scope::Single), b.token_secret(Scope::Single));
    }

    #[test]
    fn key_file_errors_say_what_happened_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = PiiKey::from_file(&missing).unwrap_err();
        assert!(matches!(e, KeyFileError::Unreadable { .. }), "{e}");
        assert!(
            e.to_string().contains("nope") && e.to_string().contains("CEM_PII_KEY_FILE"),
            "{e}"
        );

        let short = dir.path().join("short");
        std::fs::write(&short, "abcd\n").unwrap();
        let e = PiiKey::from_file(&short).unwrap_err();
        assert!(matches!(e, KeyFileError::Length { found: 4, .. }), "{e}");
        assert!(
            e.to_string().contains("openssl rand -hex 32") && e.to_string().contains("short"),
            "{e}"
        );

        let long = dir.path().join("long");
        std::fs::write(&long, format!("{KEY}00")).unwrap();
        assert!(matches!(
            PiiKey::from_file(&long).unwrap_err(),
            KeyFileError::Length { found: 66, .. }
        ));

        let not_hex = dir.path().join("not-hex");
        std::fs::write(&not_hex, format!("{}zz", &KEY[..62])).unwrap();
        let e = PiiKey::from_file(&not_hex).unwrap_err();
        assert!(
            matches!(e, KeyFileError::NotHex { position: 62, .. }),
            "{e}"
        );
        assert!(!e.to_string().contains(&KEY[..62]), "never echoes the key");

        // A key with a space inside is not a key.
        let spaced = dir.path().join("spaced");
        std::fs::write(&spaced, format!("{} {}", &KEY[..32], &KEY[32..])).unwrap();
        assert!(matches!(
            PiiKey::from_file(&spaced).unwrap_err(),
            KeyFileError::NotHex { position: 32, .. }
        ));

        let good = dir.path().join("good");
        std::fs::write(&good, format!("{KEY}\n")).unwrap();
        assert!(PiiKey::from_file(&good).is_ok());
    }

    #[test]
    fn secrets_differ_by_scope_and_purpose() {
        let key = PiiKey::parse(KEY).unwrap();
        let secrets = [
            key.token_secret(Scope::Single),
            key.token_secret(Scope::Tenant("a")),
            key.token_secret(Scope::Tenant("b")),
            key.vault_key(Scope::Single),
            key.vault_key(Scope::Tenant("a")),
        ];
        for (i, a) in secrets.iter().enumerate() {
            for b in &secrets[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // Deterministic: another server with the same key derives the same.
        let again = PiiKey::parse(KEY).unwrap();
        assert_eq!(
            again.token_secret(Scope::Tenant("a")),
            key.token_secret(Scope::Tenant("a"))
        );
        assert_eq!(format!("{key:?}"), "PiiKey(<secret>)");
    }
}
