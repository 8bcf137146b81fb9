//! Requests to authorization servers: metadata and keys (GET) and introspection (POST), each
//! bounded in time ([`FETCH_WAIT`]) and size ([`MAX_BODY_BYTES`]), never following a redirect,
//! over TLS checked against the system's roots.

use std::time::Duration;

use futures::StreamExt;
use serde::de::DeserializeOwned;

/// Longest a request to an authorization server may take, connection included.
pub const FETCH_WAIT: Duration = Duration::from_secs(5);
/// Largest answer read (a JWKS of a few dozen keys is a few KiB).
pub const MAX_BODY_BYTES: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("no answer within {} s", FETCH_WAIT.as_secs())]
    Timeout,
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("HTTP {0}")]
    Status(u16),
    #[error("the answer is over {} KiB", MAX_BODY_BYTES / 1024)]
    TooLarge,
    #[error("the answer is not the JSON expected: {0}")]
    NotJson(String),
}

/// What sends the requests (one client, its connections reused).
#[derive(Clone)]
pub struct Fetcher {
    client: reqwest::Client,
}

impl Fetcher {
    pub fn new() -> Result<Self, String> {
        crate::install_tls_provider();
        let tls = rustls::ClientConfig::builder()
            .with_root_certificates(crate::system_roots())
            .with_no_client_auth();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .tls_backend_preconfigured(tls)
            .timeout(FETCH_WAIT)
            .connect_timeout(FETCH_WAIT)
            .build()
            .map_err(|e| format!("cannot make the OAuth HTTP client: {e}"))?;
        Ok(Self { client })
    }

    /// GETs `url` as JSON of type `T`.
    pub async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<T, FetchError> {
        let request = self.client.get(url).header("accept", "application/json");
        self.json(request).await
    }

    /// POSTs `form` to `url` with HTTP Basic credentials, answered as JSON of type `T`.
    pub async fn post_form<T: DeserializeOwned>(
        &self,
        url: &str,
        form: &[(&str, &str)],
        (user, password): (&str, &str),
    ) -> Result<T, FetchError> {
        let body: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let request = (self.client.post(url))
            .basic_auth(encode_credential(user), Some(encode_credential(password)))
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(body);
        self.json(request).await
    }

    async fn json<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, FetchError> {
        let exchange = async {
            let response = request.send().await.map_err(|e| {
                if e.is_timeout() {
                    FetchError::Timeout
                } else {
                    FetchError::Connect(root_cause(&e))
                }
            })?;
            if !response.status().is_success() {
                return Err(FetchError::Status(response.status().as_u16()));
            }
            let mut body = Vec::new();
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|_| FetchError::Timeout)?;
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(FetchError::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            serde_json::from_slice(&body).map_err(|e| FetchError::NotJson(e.to_string()))
        };
        tokio::time::timeout(FETCH_WAIT, exchange)
            .await
            .map_err(|_| FetchError::Timeout)?
    }
}

/// RFC 6749 section 2.3.1: client credentials in Basic authentication are form-encoded first.
fn encode_credential(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// The innermost cause of a request's failure (reqwest's own text says only "error sending
/// request").
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}
