//! Who an HTTP request comes from: its bearer token is one of the tokens file's (the tenant it
//! names), or an OAuth access token the verifier accepts (the tenant its claim names, and the
//! user it was issued to). Both may be configured at once; a tenant named by both is one
//! tenant. Tenants stay a closed set known at start.

use std::sync::Arc;

use crate::oauth::{Identity, Refusal, Verifier};
use crate::tenancy::tokens::{AuthFailure, TokenTable, bearer};

/// The ways a server's HTTP clients authenticate.
pub struct Authenticator {
    pub tokens: Option<TokenTable>,
    pub oauth: Option<Arc<Verifier>>,
}

/// An authenticated request's caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub tenant: String,
    /// The OAuth identity, for a request with an access token (none with a static token).
    pub identity: Option<Identity>,
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No bearer token, or a static one that is wrong (without OAuth).
    Token(AuthFailure),
    /// An access token refused.
    OAuth(Refusal),
}

impl Authenticator {
    /// The caller an `Authorization` header value names.
    pub async fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Caller, Denied> {
        let token = bearer(authorization).map_err(Denied::Token)?;
        if let Some(tenant) = self.tokens.as_ref().and_then(|t| t.tenant_of(token)) {
            return Ok(Caller {
                tenant: tenant.to_string(),
                identity: None,
            });
        }
        let Some(oauth) = &self.oauth else {
            return Err(Denied::Token(AuthFailure::Invalid));
        };
        let identity = oauth.verify(token).await.map_err(Denied::OAuth)?;
        Ok(Caller {
            tenant: identity.tenant.clone(),
            identity: Some(identity),
        })
    }

    /// Every tenant, each once, sorted: the tokens file's and the OAuth map's.
    pub fn tenants(&self) -> Vec<String> {
        let mut all: Vec<String> = (self.tokens.iter())
            .flat_map(|t| t.tenants())
            .chain(self.oauth.iter().flat_map(|o| o.tenants()))
            .map(str::to_string)
            .collect();
        all.sort();
        all.dedup();
        all
    }
}
