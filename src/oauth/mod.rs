//! OAuth 2.1 on the HTTP endpoint, as the MCP authorization spec asks of a resource server:
//! the protected-resource metadata clients discover ([`resource`], RFC 9728), and access tokens
//! checked fully before a request reaches a tenant: JWTs by their signature with the issuer's
//! published keys ([`jws`], [`keys`]), opaque ones at the issuer's introspection endpoint
//! ([`introspection`]), then their claims ([`claims`]): audience, times, scopes, and the
//! tenant claim mapped to a tenant (`crate::tenancy::claim_map`).
//!
//! Every refusal says why ([`Refusal`], the answer's `error_description`) without echoing the
//! token; a provider that cannot be reached makes its tokens answer 503 with `Retry-After`
//! once the keys fetched before are past their maximum age, and `/health` warns of it
//! ([`Verifier::warnings`]) without failing, so that a proxy's health checks do not take every
//! node down with the provider.

pub mod claims;
mod fetch;
pub mod introspection;
pub mod jws;
mod keys;
pub mod resource;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::tenancy::claim_map::ClaimMap;
pub use resource::Resource;

/// What `--public-url` and the `--oauth-*` flags ask for.
pub struct OAuthSettings {
    pub resource: Resource,
    /// Issuers whose tokens are accepted, as configured.
    pub issuers: Vec<String>,
    pub tenant_claim: String,
    pub tenants: ClaimMap,
    /// Scopes every token must hold.
    pub scopes: Vec<String>,
    /// The RFC 7662 endpoint and the file of its client credentials.
    pub introspection: Option<(String, PathBuf)>,
    /// Longest keys are used after they were fetched.
    pub jwks_max_age: Duration,
}

/// Why a token was refused: the text is the answer's `error_description`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{0}")]
    Malformed(String),
    #[error(
        "the token's algorithm {0:?} is not accepted: only asymmetric signatures ({accepted}) are",
        accepted = jws::ACCEPTED
    )]
    Algorithm(String),
    #[error(
        "the token's issuer is not one this server accepts: sign in with the identity provider this server names in its metadata"
    )]
    Issuer,
    #[error("the token's key (kid) is not among the keys its issuer publishes")]
    UnknownKey,
    #[error("the token's signature does not verify with its issuer's key")]
    Signature,
    #[error(
        "the token is meant for another service: its aud does not name {0}; get a token for this server (resource parameter {0})"
    )]
    Audience(String),
    #[error("the token expired: get a new one from the authorization server")]
    Expired,
    #[error(
        "the token is not valid yet (nbf): check the clocks of this server and the authorization server"
    )]
    NotYetValid,
    #[error("the token's claims are malformed: {0}")]
    Claim(&'static str),
    #[error("the token lacks the scope {}: sign in again asking for it", .0.join(" "))]
    Scope(Vec<String>),
    #[error(
        "the token carries no {0} claim, which names the tenant: ask the server's administrator (--oauth-tenant-claim) or the identity provider's to add it"
    )]
    NoTenantClaim(String),
    #[error("the token's {0} claim is not a string or a list of strings")]
    TenantClaimType(String),
    #[error(
        "the token's {0} claim names no tenant of this server: ask the administrator to map yours (--oauth-tenants)"
    )]
    UnknownTenant(String),
    #[error("the token's {0} claim names more than one tenant ({names}): an identity belongs to one tenant", names = .1.join(" and "))]
    SeveralTenants(String, Vec<String>),
    #[error(
        "the token is not active: the authorization server says it is revoked, expired or unknown"
    )]
    Inactive,
    #[error(
        "the token is not a JWT, and this server has no introspection endpoint (--oauth-introspection) to ask about it"
    )]
    Opaque,
    /// The authorization server cannot be reached: 503, try again after `retry_after` s.
    #[error("{message}")]
    Unavailable { message: String, retry_after: u64 },
}

/// Who a checked token's holder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub tenant: String,
    /// The issuer (`iss`), or the introspection endpoint for an opaque token that names none.
    pub issuer: String,
    pub subject: String,
    pub client_id: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("--oauth-issuer: {0}")]
    Issuer(String),
    #[error("{0}")]
    Client(String),
    #[error(transparent)]
    Credentials(#[from] introspection::CredentialsError),
}

/// Checks access tokens for this resource.
pub struct Verifier {
    settings: OAuthSettings,
    fetcher: fetch::Fetcher,
    issuers: keys::Issuers,
    introspection: Option<introspection::Introspection>,
}

impl Verifier {
    /// A verifier for `settings`; nothing is fetched until the first token or
    /// [`Verifier::prefetch`].
    pub fn new(settings: OAuthSettings) -> Result<Self, OAuthError> {
        for issuer in &settings.issuers {
            resource::normalize(issuer, "")
                .map_err(|e| OAuthError::Issuer(e.trim().to_string()))?;
        }
        let fetcher = fetch::Fetcher::new().map_err(OAuthError::Client)?;
        let issuers = keys::Issuers::new(&settings.issuers, fetcher.clone(), settings.jwks_max_age);
        let introspection = match &settings.introspection {
            Some((url, credentials)) => {
                Some(introspection::Introspection::new(url.clone(), credentials)?)
            }
            None => None,
        };
        Ok(Self {
            settings,
            fetcher,
            issuers,
            introspection,
        })
    }

    pub fn resource(&self) -> &Resource {
        &self.settings.resource
    }

    pub fn scopes(&self) -> &[String] {
        &self.settings.scopes
    }

    /// The tenants the claim may name.
    pub fn tenants(&self) -> Vec<&str> {
        self.settings.tenants.tenants()
    }

    /// The RFC 9728 metadata document.
    pub fn metadata(&self) -> Value {
        self.settings
            .resource
            .metadata(&self.settings.issuers, &self.settings.scopes)
    }

    /// Who `token` (the bearer value) belongs to, or why it is refused.
    pub async fn verify(&self, token: &str) -> Result<Identity, Refusal> {
        if token.len() > jws::MAX_TOKEN_BYTES {
            return Err(Refusal::Malformed(format!(
                "the access token is over {} KiB",
                jws::MAX_TOKEN_BYTES / 1024
            )));
        }
        let (claims, issuer) = if jws::looks_like_jwt(token) {
            self.signed_claims(token).await?
        } else {
            self.introspected_claims(token).await?
        };
        let holder = claims::check(
            &claims,
            &claims::Expect {
                resource: &self.settings.resource,
                scopes: &self.settings.scopes,
                tenant_claim: &self.settings.tenant_claim,
                tenants: &self.settings.tenants,
                now: now_secs(),
            },
        )?;
        Ok(Identity {
            tenant: holder.tenant,
            issuer,
            subject: holder.subject,
            client_id: holder.client_id,
        })
    }

    /// Fetches the issuers' keys in the background (a server that has started calls this).
    pub fn prefetch(&self) {
        self.issuers.prefetch();
    }

    /// A JWT's claims and its issuer, once its signature is checked with the issuer's key.
    async fn signed_claims(&self, token: &str) -> Result<(Map<String, Value>, String), Refusal> {
        let jws = jws::parse(token)?;
        let issuer = match jws.claims.get("iss") {
            Some(Value::String(iss)) => self.issuers.named(iss).ok_or(Refusal::Issuer)?,
            Some(_) => return Err(Refusal::Claim("iss is not a string")),
            None => return Err(Refusal::Claim("the token has no iss (issuer) claim")),
        };
        self.issuers.verify(issuer, &jws).await?;
        Ok((jws.claims, issuer.id.clone()))
    }

    /// An opaque token's claims as its authorization server tells them, and its issuer (the
    /// introspection endpoint when the answer names none).
    async fn introspected_claims(
        &self,
        token: &str,
    ) -> Result<(Map<String, Value>, String), Refusal> {
        let Some(introspection) = &self.introspection else {
            return Err(Refusal::Opaque);
        };
        let claims = introspection.claims(&self.fetcher, token).await?;
        let issuer = match claims.get("iss") {
            None => introspection.url().to_string(),
            Some(Value::String(iss)) => self.issuers.named(iss).ok_or(Refusal::Issuer)?.id.clone(),
            Some(_) => return Err(Refusal::Claim("iss is not a string")),
        };
        Ok((claims, issuer))
    }

    /// What `/health` warns of: authorization servers whose keys cannot be fetched.
    pub fn warnings(&self) -> Vec<String> {
        self.issuers.warnings()
    }
}

/// Seconds since the epoch.
fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
