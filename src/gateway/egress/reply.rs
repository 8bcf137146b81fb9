//! What the proxy answers the sandbox with: its own answers (a refusal's 403, a 502), and a
//! host's headers passed on without those of one connection, a secret a host echoes in one
//! replaced whole.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;

use super::streaming::Scrubber;

/// What the proxy answers the sandbox with.
pub(super) type ProxyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// Headers that belong to one connection, never forwarded; `host` is the tunnel's own.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// The proxy's own answer: `message` as text, the refusing rule in `x-egress-refused`.
pub(super) fn answer(
    status: StatusCode,
    rule: Option<&str>,
    message: String,
) -> Response<ProxyBody> {
    let body = http_body_util::Full::new(Bytes::from(message + "\n"))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Some(rule) = rule.and_then(|r| HeaderValue::from_str(r).ok()) {
        headers.insert("x-egress-refused", rule);
    }
    response
}

/// A host may echo a secret in a header too (a Location, a debug header): such a value is
/// replaced whole.
pub(super) fn scrub_headers(headers: &mut HeaderMap, scrubber: &Scrubber) {
    for value in headers.values_mut() {
        if scrubber.holds(value.as_bytes()) {
            *value = HeaderValue::from_static(crate::gateway::redact::REDACTED);
        }
    }
}

/// `headers` without those of one connection (and those `connection` names).
pub(super) fn forwarded(mut headers: HeaderMap) -> HeaderMap {
    let named: Vec<String> = (headers.get_all(header::CONNECTION).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|n| n.trim().to_ascii_lowercase()))
        .collect();
    for name in HOP_BY_HOP
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str))
    {
        headers.remove(name);
    }
    headers
}
