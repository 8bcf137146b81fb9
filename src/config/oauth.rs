//! OAuth 2.1 on the HTTP endpoint: the address clients use, the authorization servers whose
//! tokens are accepted, and how a token's claim names a tenant.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::ConfigError;
use super::range::Range;
use crate::oauth::{OAuthSettings, Resource};
use crate::tenancy::claim_map::ClaimMap;

const JWKS_MAX_AGE: Range = Range::new("--oauth-jwks-max-age-secs", 1, 7 * 24 * 3600);

#[derive(Debug, Clone, Args)]
pub struct OAuthConfig {
    /// The address clients use to reach this server (HTTPS unless loopback), such as
    /// https://mcp.example.com: the OAuth protected resource is PUBLIC_URL/mcp, and its host is
    /// added to the allowed Host headers.
    #[arg(long, env = "CEM_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// An authorization server whose access tokens are accepted, as its metadata names it
    /// (repeat the flag, or comma-separate, for several). Its RFC 8414 or OpenID metadata
    /// names the keys tokens are checked with. HTTPS unless loopback.
    #[arg(long = "oauth-issuer", env = "CEM_OAUTH_ISSUER", value_delimiter = ',')]
    pub oauth_issuers: Vec<String>,

    /// File mapping the tenant claim's values to tenants, one `TENANT = VALUE[, VALUE…]` per
    /// line (needed with --oauth-issuer).
    #[arg(long, env = "CEM_OAUTH_TENANTS")]
    pub oauth_tenants: Option<PathBuf>,

    /// The claim that names a token's tenant: a claim name, or a JSON pointer such as
    /// /realm_access/roles for a nested one. A list-valued claim names the tenant whose value it
    /// holds.
    #[arg(long, env = "CEM_OAUTH_TENANT_CLAIM", default_value = "tenant")]
    pub oauth_tenant_claim: String,

    /// Scopes every access token must hold, comma-separated (default: none).
    #[arg(long, env = "CEM_OAUTH_SCOPES", value_delimiter = ',')]
    pub oauth_scopes: Vec<String>,

    /// RFC 7662 introspection endpoint, for opaque access tokens (whose revocation it shows
    /// within 30 s; a JWT is checked locally and holds until it expires). Needs
    /// --oauth-introspection-credentials and --oauth-issuer.
    #[arg(long, env = "CEM_OAUTH_INTROSPECTION")]
    pub oauth_introspection: Option<String>,

    /// File holding this server's client credentials at the authorization server, one line
    /// CLIENT_ID:CLIENT_SECRET, for introspection.
    #[arg(long, env = "CEM_OAUTH_INTROSPECTION_CREDENTIALS")]
    pub oauth_introspection_credentials: Option<PathBuf>,

    /// Longest an issuer's keys are used after they were fetched: they are refreshed after a
    /// quarter of it, and while the issuer cannot be reached they keep working until then.
    #[arg(long, env = "CEM_OAUTH_JWKS_MAX_AGE_SECS", default_value_t = 3600, value_parser = JWKS_MAX_AGE.parser::<u64>())]
    pub oauth_jwks_max_age_secs: u64,
}

impl OAuthConfig {
    /// Whether OAuth authenticates HTTP clients.
    pub fn enabled(&self) -> bool {
        !self.oauth_issuers.is_empty() || self.oauth_introspection.is_some()
    }

    /// `--public-url`, when set to something (compose passes an empty one for "none").
    pub fn public_url(&self) -> Option<&str> {
        self.public_url.as_deref().filter(|u| !u.trim().is_empty())
    }

    /// The flags' forms and the flags each needs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(url) = self.public_url() {
            Resource::new(url).map_err(|problem| ConfigError::Invalid {
                flag: "--public-url",
                problem: problem.trim_start_matches("--public-url ").to_string(),
            })?;
        }
        if !self.enabled() {
            return Ok(());
        }
        let needs = |flag: &'static str, missing: bool| {
            if missing {
                Err(ConfigError::Conflict(format!(
                    "OAuth (--oauth-issuer or --oauth-introspection) needs {flag}"
                )))
            } else {
                Ok(())
            }
        };
        needs(
            "--public-url: the address clients use, which tokens must name as their audience",
            self.public_url().is_none(),
        )?;
        needs(
            "--oauth-tenants: the file mapping the tenant claim's values to tenants",
            self.oauth_tenants.is_none(),
        )?;
        needs(
            "--oauth-issuer with --oauth-introspection: the authorization server clients sign in with, which introspected tokens must name if they name an issuer",
            self.oauth_issuers.is_empty(),
        )?;
        needs(
            "--oauth-introspection-credentials with --oauth-introspection",
            self.oauth_introspection.is_some() && self.oauth_introspection_credentials.is_none(),
        )?;
        for issuer in &self.oauth_issuers {
            crate::oauth::resource::normalize(issuer, "").map_err(|problem| {
                ConfigError::Invalid {
                    flag: "--oauth-issuer",
                    problem: problem.trim().to_string(),
                }
            })?;
        }
        if let Some(url) = &self.oauth_introspection {
            crate::oauth::resource::fetchable(url, "").map_err(|problem| ConfigError::Invalid {
                flag: "--oauth-introspection",
                problem: problem.trim().to_string(),
            })?;
        }
        let claim = self.oauth_tenant_claim.trim();
        if claim.is_empty() || claim == "/" || claim.chars().any(char::is_whitespace) {
            return Err(ConfigError::Invalid {
                flag: "--oauth-tenant-claim",
                problem: format!(
                    "{claim:?} is not a claim name or a JSON pointer such as /realm_access/roles"
                ),
            });
        }
        if let Some(bad) = self
            .scopes()
            .find(|s| s.is_empty() || s.contains([' ', '"', '\\']))
        {
            return Err(ConfigError::Invalid {
                flag: "--oauth-scopes",
                problem: format!(
                    "{bad:?} is not a scope: comma-separate scopes of visible characters"
                ),
            });
        }
        Ok(())
    }

    fn scopes(&self) -> impl Iterator<Item = &str> {
        self.oauth_scopes
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
    }

    /// The resource of `--public-url`, when set (checked by [`OAuthConfig::validate`]).
    pub fn resource(&self) -> Option<Resource> {
        self.public_url().and_then(|u| Resource::new(u).ok())
    }

    /// OAuth's settings when it is enabled, reading the tenants file.
    pub fn settings(
        &self,
    ) -> Result<Option<OAuthSettings>, crate::tenancy::claim_map::ClaimMapError> {
        if !self.enabled() {
            return Ok(None);
        }
        let (Some(resource), Some(tenants)) = (self.resource(), &self.oauth_tenants) else {
            return Ok(None);
        };
        Ok(Some(OAuthSettings {
            resource,
            issuers: self
                .oauth_issuers
                .iter()
                .map(|i| i.trim().to_string())
                .collect(),
            tenant_claim: self.oauth_tenant_claim.trim().to_string(),
            tenants: ClaimMap::load(tenants)?,
            scopes: self.scopes().map(str::to_string).collect(),
            introspection: (self.oauth_introspection.clone())
                .zip(self.oauth_introspection_credentials.clone()),
            jwks_max_age: Duration::from_secs(self.oauth_jwks_max_age_secs),
        }))
    }
}
