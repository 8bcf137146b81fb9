//! Opaque access tokens, asked about at the authorization server (RFC 7662) with the client
//! credentials of `--oauth-introspection-credentials` (a file: never argv or the environment).
//! Answers are kept for [`CACHE_TTL`] (an active token no longer than its `exp`), so that a
//! client's calls do not each cost a round trip: a revoked token keeps working for at most that
//! long. This is also the only way revocation is seen at all: a JWT is valid until its `exp`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::Refusal;
use super::fetch::Fetcher;

/// How long an introspection answer is used before the token is asked about again.
pub const CACHE_TTL: Duration = Duration::from_secs(30);
/// Most answers kept of each kind (active, not active): when full, expired ones are dropped,
/// and a new answer is not kept if none had expired (those kept go on being used).
const MAX_CACHED: usize = 10_000;
/// Largest credentials file read.
const MAX_CREDENTIALS_BYTES: u64 = 4096;
/// Most introspection requests in flight at once: a flood of made-up tokens waits here
/// instead of reaching the authorization server all at once.
const MAX_IN_FLIGHT: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "cannot read the introspection credentials {path}: {source}. Point --oauth-introspection-credentials at a file holding CLIENT_ID:CLIENT_SECRET"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the introspection credentials {0} must hold one line CLIENT_ID:CLIENT_SECRET (the resource server's client at the authorization server)"
    )]
    Form(PathBuf),
}

/// The credentials file's text: at most [`MAX_CREDENTIALS_BYTES`] (one line is expected),
/// with a warning when every user of the machine may read it.
fn read_credentials(path: &Path) -> Result<String, CredentialsError> {
    let read_err = |source| CredentialsError::Read {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_err)?;
    let meta = file.metadata().map_err(read_err)?;
    crate::host::safe_fs::warn_if_readable_by_all(
        path,
        &meta,
        "the introspection credentials file",
    );
    let bytes =
        crate::host::safe_fs::read_bounded(file, MAX_CREDENTIALS_BYTES, 256).map_err(read_err)?;
    if bytes.len() as u64 > MAX_CREDENTIALS_BYTES {
        return Err(CredentialsError::Form(path.to_owned()));
    }
    String::from_utf8(bytes).map_err(|_| CredentialsError::Form(path.to_owned()))
}

/// What introspection said of a token: active with these claims, or not active.
type Answer = Result<Map<String, Value>, ()>;

/// Answers by token digest, each until a time, at most [`MAX_CACHED`].
struct Answers<V>(Mutex<HashMap<[u8; 32], (Instant, V)>>);

impl<V: Clone> Answers<V> {
    fn new() -> Self {
        Self(Mutex::new(HashMap::new()))
    }

    fn get(&self, key: &[u8; 32]) -> Option<V> {
        let map = self.0.lock().expect("the cache is never poisoned");
        let (until, value) = map.get(key)?;
        (Instant::now() < *until).then(|| value.clone())
    }

    fn keep(&self, key: [u8; 32], until: Instant, value: V) {
        let mut map = self.0.lock().expect("the cache is never poisoned");
        if map.len() >= MAX_CACHED {
            let now = Instant::now();
            map.retain(|_, (until, _)| now < *until);
        }
        if map.len() < MAX_CACHED {
            map.insert(key, (until, value));
        }
    }
}

/// The endpoint and the credentials the server introspects with.
pub struct Introspection {
    url: String,
    client_id: String,
    client_secret: String,
    /// Active tokens' claims, and the tokens found not active, apart: made-up tokens fill
    /// the second, never pushing out the first.
    active: Answers<Map<String, Value>>,
    inactive: Answers<()>,
    in_flight: tokio::sync::Semaphore,
}

impl Introspection {
    /// The endpoint `url`, with the credentials read from `credentials`.
    pub fn new(url: String, credentials: &Path) -> Result<Self, CredentialsError> {
        let text = read_credentials(credentials)?;
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'));
        let Some((id, secret)) = line.and_then(|l| l.split_once(':')) else {
            return Err(CredentialsError::Form(credentials.to_owned()));
        };
        if id.trim().is_empty() || secret.trim().is_empty() {
            return Err(CredentialsError::Form(credentials.to_owned()));
        }
        Ok(Self {
            url,
            client_id: id.trim().to_string(),
            client_secret: secret.trim().to_string(),
            active: Answers::new(),
            inactive: Answers::new(),
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
        })
    }

    /// The endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The claims of an active `token`, from the cache or the authorization server.
    pub async fn claims(
        &self,
        fetcher: &Fetcher,
        token: &str,
    ) -> Result<Map<String, Value>, Refusal> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(known) = self.cached(&key) {
            return known.map_err(|()| Refusal::Inactive);
        }
        let _turn = self.in_flight.acquire().await.expect("never closed");
        // Answered while this one waited for its turn.
        if let Some(known) = self.cached(&key) {
            return known.map_err(|()| Refusal::Inactive);
        }
        let answer: Value = fetcher
            .post_form(
                &self.url,
                &[("token", token), ("token_type_hint", "access_token")],
                (&self.client_id, &self.client_secret),
            )
            .await
            .map_err(|e| Refusal::Unavailable {
                message: format!(
                    "the authorization server's introspection endpoint {} cannot tell whether the token is active ({e}); try again shortly",
                    self.url
                ),
                retry_after: 5,
            })?;
        let outcome = match answer {
            Value::Object(claims) if claims.get("active") == Some(&Value::Bool(true)) => Ok(claims),
            Value::Object(_) => Err(()),
            _ => {
                return Err(Refusal::Unavailable {
                    message:
                        "the introspection endpoint answered something other than a JSON object"
                            .into(),
                    retry_after: 5,
                });
            }
        };
        self.keep(key, &outcome);
        outcome.map_err(|()| Refusal::Inactive)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Answer> {
        if let Some(claims) = self.active.get(key) {
            return Some(Ok(claims));
        }
        self.inactive.get(key).map(Err)
    }

    /// Keeps `outcome` for [`CACHE_TTL`], an active token's no longer than its `exp`.
    fn keep(&self, key: [u8; 32], outcome: &Answer) {
        let now = Instant::now();
        match outcome {
            Ok(claims) => {
                let left = (claims.get("exp").and_then(Value::as_f64))
                    .map_or(CACHE_TTL.as_secs_f64(), |exp| exp - super::now_secs());
                let ttl = Duration::from_secs_f64(left.clamp(0.0, CACHE_TTL.as_secs_f64()));
                self.active.keep(key, now + ttl, claims.clone());
            }
            Err(()) => self.inactive.keep(key, now + CACHE_TTL, ()),
        }
    }
}
