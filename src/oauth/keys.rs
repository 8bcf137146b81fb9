//! The authorization servers' signing keys: each issuer's metadata (RFC 8414, else OpenID
//! discovery) names its `jwks_uri`, whose keys are kept for at most the maximum age after they
//! were fetched. They are fetched at the first token, refreshed in the background a quarter of
//! the maximum age later, and fetched again at once for a key id they do not hold, at most once
//! per [`REFETCH_GAP`] per issuer (a flood of made-up key ids costs the provider nothing). While
//! the provider cannot be reached, keys fetched before keep working up to their maximum age;
//! then the issuer's tokens are answered 503 (`Refusal::Unavailable`) until it answers again.
//! Every fetch is bounded: time, bytes, number of keys.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use super::Refusal;
use super::fetch::Fetcher;
use super::jws::{Jwk, Jws};
use super::resource::fetchable;

/// Least time between two fetches of one issuer's keys for key ids they do not hold.
pub const REFETCH_GAP: Duration = Duration::from_secs(10);
/// Most keys a JWKS may list.
pub const MAX_KEYS: usize = 32;

/// One accepted issuer and what is known of its keys.
pub struct Issuer {
    /// As configured (`--oauth-issuer`): what a token's `iss` must equal.
    pub id: String,
    state: Mutex<KeyState>,
    /// Held while a fetch runs, so that requests arriving meanwhile do not fetch again.
    fetching: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Default)]
struct KeyState {
    keys: Option<Keys>,
    /// When the last fetch began, and why it failed if it did.
    last_attempt: Option<Instant>,
    last_error: Option<String>,
}

struct Keys {
    /// Shared with the requests checking against them (a key set is read at every token).
    set: Arc<[Jwk]>,
    fetched: Instant,
}

/// The accepted issuers, their keys and what fetches them.
pub struct Issuers {
    list: Vec<Arc<Issuer>>,
    fetcher: Fetcher,
    max_age: Duration,
}

impl Issuers {
    pub fn new(ids: &[String], fetcher: Fetcher, max_age: Duration) -> Self {
        let list = (ids.iter())
            .map(|id| {
                Arc::new(Issuer {
                    id: id.clone(),
                    state: Mutex::new(KeyState::default()),
                    fetching: Arc::new(tokio::sync::Mutex::new(())),
                })
            })
            .collect();
        Self {
            list,
            fetcher,
            max_age,
        }
    }

    /// Fetches every issuer's keys in the background, so that the first token does not wait
    /// for them and `/health` tells early of a provider that cannot be reached.
    pub fn prefetch(&self) {
        for issuer in &self.list {
            self.refresh_in_background(issuer);
        }
    }

    /// The issuer a token's `iss` names, if it is accepted.
    pub fn named(&self, iss: &str) -> Option<&Arc<Issuer>> {
        self.list.iter().find(|i| i.id == iss)
    }

    /// Checks `jws`'s signature with `issuer`'s key (the one its `kid` names, or its only key
    /// fitting the algorithm).
    pub async fn verify(&self, issuer: &Arc<Issuer>, jws: &Jws<'_>) -> Result<(), Refusal> {
        if let Some((found, stale)) = self.usable(issuer) {
            if stale {
                self.refresh_in_background(issuer);
            }
            if let Some(key) = pick(&found, jws)? {
                return signature(jws, &key);
            }
            // A key id these keys do not hold: the issuer may have rotated its keys.
            if !self.may_refetch(issuer) {
                return Err(Refusal::UnknownKey);
            }
        }
        let keys = self.fetch_now(issuer).await?;
        match pick(&keys, jws)? {
            Some(key) => signature(jws, &key),
            None => Err(Refusal::UnknownKey),
        }
    }

    /// Keys younger than the maximum age, and whether they are due for a refresh.
    fn usable(&self, issuer: &Issuer) -> Option<(Arc<[Jwk]>, bool)> {
        let state = issuer.state.lock().expect("key state is never poisoned");
        let keys = state.keys.as_ref()?;
        let age = keys.fetched.elapsed();
        (age < self.max_age).then(|| (keys.set.clone(), age >= self.max_age / 4))
    }

    fn may_refetch(&self, issuer: &Issuer) -> bool {
        let state = issuer.state.lock().expect("key state is never poisoned");
        state
            .last_attempt
            .is_none_or(|t| t.elapsed() >= REFETCH_GAP)
    }

    fn refresh_in_background(&self, issuer: &Arc<Issuer>) {
        let Ok(guard) = issuer.fetching.clone().try_lock_owned() else {
            return;
        };
        if !self.may_refetch(issuer) {
            return;
        }
        let (issuer, fetcher) = (issuer.clone(), self.fetcher.clone());
        tokio::spawn(async move {
            let _guard = guard;
            let _ = fetch_into(&issuer, &fetcher).await;
        });
    }

    /// Fetches the keys now (or waits for the fetch running), unless one failed within
    /// [`REFETCH_GAP`]: then the issuer is unavailable until the gap has passed.
    async fn fetch_now(&self, issuer: &Arc<Issuer>) -> Result<Arc<[Jwk]>, Refusal> {
        let began = Instant::now();
        let _guard = issuer.fetching.lock().await;
        {
            let state = issuer.state.lock().expect("key state is never poisoned");
            // Another request fetched while this one waited.
            if let Some(keys) = &state.keys
                && keys.fetched >= began
            {
                return Ok(keys.set.clone());
            }
            let since = state.last_attempt.map(|at| at.elapsed());
            if let (Some(error), Some(since)) = (&state.last_error, since)
                && since < REFETCH_GAP
            {
                return Err(unavailable(
                    &issuer.id,
                    error,
                    REFETCH_GAP.saturating_sub(since),
                ));
            }
        }
        fetch_into(issuer, &self.fetcher)
            .await
            .map_err(|e| unavailable(&issuer.id, &e, REFETCH_GAP))
    }

    /// What `/health` warns of: issuers whose last fetch failed, and whether their tokens are
    /// still checked with keys fetched before.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for issuer in &self.list {
            let state = issuer.state.lock().expect("key state is never poisoned");
            let Some(error) = &state.last_error else {
                continue;
            };
            let usable = (state.keys.as_ref())
                .map(|k| k.fetched.elapsed())
                .filter(|age| *age < self.max_age);
            warnings.push(match usable {
                Some(age) => format!(
                    "OAuth: the keys of {} cannot be fetched ({error}); its tokens are checked with keys fetched {} s ago, usable for {} s more",
                    issuer.id,
                    age.as_secs(),
                    (self.max_age - age).as_secs()
                ),
                None => format!(
                    "OAuth: the keys of {} cannot be fetched ({error}); its tokens are answered 503 until it answers",
                    issuer.id
                ),
            });
        }
        warnings
    }
}

fn unavailable(issuer: &str, error: &str, retry: Duration) -> Refusal {
    Refusal::Unavailable {
        message: format!(
            "the authorization server {issuer} cannot be reached to check the token's signature ({error}); try again shortly"
        ),
        retry_after: retry.as_secs().max(1),
    }
}

/// The key `jws` names: by `kid`, else the only key fitting its algorithm. `None` when these
/// keys hold none (a refetch may).
fn pick(keys: &[Jwk], jws: &Jws<'_>) -> Result<Option<Jwk>, Refusal> {
    let fitting = keys.iter().filter(|k| k.fits(jws.alg));
    match &jws.kid {
        Some(kid) => Ok(fitting
            .into_iter()
            .find(|k| k.kid.as_deref() == Some(kid))
            .cloned()),
        None => {
            let all: Vec<&Jwk> = fitting.collect();
            match all.as_slice() {
                [key] => Ok(Some((*key).clone())),
                [] => Ok(None),
                _ => Err(Refusal::Malformed(
                    "the token names no key (kid) and its issuer publishes several".into(),
                )),
            }
        }
    }
}

fn signature(jws: &Jws<'_>, key: &Jwk) -> Result<(), Refusal> {
    if jws.verifies_with(key) {
        Ok(())
    } else {
        Err(Refusal::Signature)
    }
}

/// Fetches `issuer`'s metadata and keys, and keeps them (or the failure) in its state.
async fn fetch_into(issuer: &Issuer, fetcher: &Fetcher) -> Result<Arc<[Jwk]>, String> {
    issuer
        .state
        .lock()
        .expect("key state is never poisoned")
        .last_attempt = Some(Instant::now());
    let fetched = fetch_keys(&issuer.id, fetcher).await;
    let mut state = issuer.state.lock().expect("key state is never poisoned");
    match fetched {
        Ok(set) => {
            let set: Arc<[Jwk]> = set.into();
            state.keys = Some(Keys {
                set: set.clone(),
                fetched: Instant::now(),
            });
            state.last_error = None;
            Ok(set)
        }
        Err(e) => {
            tracing::warn!("OAuth: cannot fetch the keys of {}: {e}", issuer.id);
            state.last_error = Some(e.clone());
            Err(e)
        }
    }
}

#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    jwks_uri: String,
}

#[derive(Deserialize)]
struct KeySet {
    keys: Vec<Value>,
}

/// The issuer's metadata (RFC 8414's well-known path, then OpenID's), then its JWKS.
async fn fetch_keys(issuer: &str, fetcher: &Fetcher) -> Result<Vec<Jwk>, String> {
    let metadata = metadata(issuer, fetcher).await?;
    let jwks_uri = fetchable(&metadata.jwks_uri, "its jwks_uri")?;
    let set: KeySet = fetcher
        .get_json(&jwks_uri)
        .await
        .map_err(|e| format!("its JWKS: {e}"))?;
    if set.keys.len() > MAX_KEYS {
        return Err(format!(
            "its JWKS lists {} keys, more than {MAX_KEYS}",
            set.keys.len()
        ));
    }
    // Keys of kinds this server does not use (encryption keys, unknown types) are left out.
    Ok(set
        .keys
        .into_iter()
        .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
        .collect())
}

async fn metadata(issuer: &str, fetcher: &Fetcher) -> Result<Metadata, String> {
    let mut failures = Vec::new();
    for url in metadata_urls(issuer) {
        match fetcher.get_json::<Metadata>(&url).await {
            Ok(m) if m.issuer == issuer => return Ok(m),
            Ok(m) => {
                return Err(format!(
                    "its metadata at {url} names the issuer {:?}, not {issuer}: set --oauth-issuer to exactly the issuer the provider names",
                    super::jws::printable(&m.issuer)
                ));
            }
            // Not there (a 404, or another answer: some providers read the well-known path
            // as a tenant's name): the next place.
            Err(e) => failures.push(format!("{url}: {e}")),
        }
    }
    Err(format!("no metadata found ({})", failures.join("; ")))
}

/// RFC 8414 inserts the well-known path before the issuer's path; OpenID appends it.
fn metadata_urls(issuer: &str) -> [String; 2] {
    let (origin, path) = match issuer.find("://").map(|i| i + 3) {
        Some(start) => match issuer[start..].find('/') {
            Some(slash) => issuer.split_at(start + slash),
            None => (issuer, ""),
        },
        None => (issuer, ""),
    };
    let path = path.trim_end_matches('/');
    [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_both_standards_put_it() {
        assert_eq!(
            metadata_urls("https://idp.example.com/realms/team"),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server/realms/team",
                "https://idp.example.com/realms/team/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("https://tenant.auth0.com/"),
            [
                "https://tenant.auth0.com/.well-known/oauth-authorization-server",
                "https://tenant.auth0.com/.well-known/openid-configuration",
            ]
        );
    }
}
