//! A response whose personal data enters the sandbox tokenized (`personal.rs`): held whole
//! within `--egress-max-scanned-mb`, its entry's secrets scrubbed, its values replaced by
//! tokens of origin `http:KEY`, and answered with its new length. One that cannot be read as
//! text (binary, compressed although identity was asked for, over the bound) is answered by
//! the proxy with a 502 saying why: its body never reaches the sandbox.

use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;

use super::grant::Grant;
use super::record::HttpDecision;
use super::reply::{ProxyBody, answer, forwarded, scrub_headers};
use super::streaming::{Recording, Scrubber};
use crate::pii::Origin;

/// Headers whose values carry no personal data (types, lengths, dates, caching): passed on as
/// they are. Every other header value of a tokenized response is tokenized too (a `Location`,
/// a `Link`, a `Content-Disposition` may name a person).
const PLAIN_HEADERS: [&str; 12] = [
    "content-type",
    "content-length",
    "content-language",
    "date",
    "etag",
    "last-modified",
    "expires",
    "cache-control",
    "age",
    "vary",
    "accept-ranges",
    "x-egress-refused",
];

/// Why a response cannot enter: the rule the record names, and the reason.
struct Unchecked {
    rule: &'static str,
    why: String,
}

impl Unchecked {
    fn pii(why: impl Into<String>) -> Self {
        Self {
            rule: "pii",
            why: why.into(),
        }
    }
}

/// The host's response, its personal data as tokens of `origin`; or the proxy's 502.
pub(super) async fn respond(
    response: reqwest::Response,
    scrubber: Option<Scrubber>,
    mut recording: Recording,
    origin: &Origin,
) -> Response<ProxyBody> {
    let grant = recording.grant().clone();
    let status = response.status();
    let mut headers = forwarded(response.headers().clone());
    let content_type = (headers.get(header::CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(scrubber) = &scrubber {
        scrub_headers(&mut headers, scrubber);
    }
    let body = match held(response, scrubber, &mut recording, &grant).await {
        Ok(body) => tokenize(&grant, origin, content_type, body).await,
        Err(unchecked) => Err(unchecked),
    };
    let body = match body {
        Ok(body) => body,
        Err(unchecked) => return refuse(&mut recording, origin, unchecked),
    };
    tokenize_headers(&grant, origin, &mut headers);
    recording.record_mut().tokenized = true;
    if !body.is_empty() {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    let full = http_body_util::Full::new(body).map_err(|never| match never {});
    let mut out = Response::new(full.boxed_unsync());
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    // The record is written when the recording is dropped, here: the body is whole.
    drop(recording);
    out
}

/// The values of every header but [`PLAIN_HEADERS`] with their personal data as tokens.
fn tokenize_headers(grant: &Grant, origin: &Origin, headers: &mut HeaderMap) {
    let Some(pii) = &grant.pii else { return };
    for (name, value) in headers.iter_mut() {
        if PLAIN_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let text = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let tokenized = pii.engine.sanitize_from(&text, origin).text;
        if tokenized != text {
            *value = HeaderValue::from_str(&tokenized)
                .unwrap_or_else(|_| HeaderValue::from_static("[personal data withheld]"));
        }
    }
}

/// The response's body whole, counted against the bounds, the entry's secrets scrubbed; or
/// why it cannot be checked.
async fn held(
    response: reqwest::Response,
    mut scrubber: Option<Scrubber>,
    recording: &mut Recording,
    grant: &Grant,
) -> Result<Vec<u8>, Unchecked> {
    let limits = grant.limits();
    let cap = limits.max_scanned_bytes.min(limits.max_response_bytes);
    let over = || {
        Unchecked::pii(format!(
            "it is over the {} MiB a response is read whole for personal data (--egress-max-scanned-mb)",
            cap >> 20
        ))
    };
    let encodings = encodings(response.headers());
    if response.content_length().is_some_and(|n| n > cap) {
        return Err(over());
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| Unchecked::pii(format!("the host's response broke off: {e}")))?;
        let n = chunk.len() as u64;
        recording.record_mut().bytes_in += n;
        if !grant.take_in(n) {
            return Err(Unchecked {
                rule: "bounds",
                why: "this execution has received its bytes (--egress-max-bytes-in-mb)".into(),
            });
        }
        if (body.len() as u64) + n > cap {
            return Err(over());
        }
        match &mut scrubber {
            Some(s) => body.extend_from_slice(&s.push(&chunk)),
            None => body.extend_from_slice(&chunk),
        }
    }
    if let Some(s) = &mut scrubber {
        body.extend_from_slice(&s.finish());
    }
    if !body.is_empty() && !encodings.is_empty() {
        return Err(Unchecked::pii(format!(
            "the host sent it compressed ({}) although asked for identity, and a compressed body cannot be checked for personal data",
            encodings.join(", ")
        )));
    }
    Ok(body)
}

/// Every encoding the host names, in every `Content-Encoding` header, but `identity`: a body
/// it compressed although asked not to.
fn encodings(headers: &HeaderMap) -> Vec<String> {
    let mut found = Vec::new();
    for value in headers.get_all(header::CONTENT_ENCODING) {
        let text = String::from_utf8_lossy(value.as_bytes());
        found.extend(
            (text.split(','))
                .map(|e| e.trim().to_ascii_lowercase())
                .filter(|e| !e.is_empty() && e != "identity"),
        );
    }
    found
}

/// `body` with its personal data as tokens of `origin`, off the async threads.
async fn tokenize(
    grant: &Grant,
    origin: &Origin,
    content_type: Option<String>,
    body: Vec<u8>,
) -> Result<bytes::Bytes, Unchecked> {
    let Some(pii) = grant.pii.clone() else {
        return Ok(body.into());
    };
    let origin = origin.clone();
    tokio::task::spawn_blocking(move || {
        super::personal::tokenize_response(&pii.engine, &origin, content_type.as_deref(), &body)
    })
    .await
    .map_err(|e| Unchecked::pii(format!("checking it for personal data failed: {e}")))?
    .map_err(Unchecked::pii)
}

/// The proxy's 502 for a response that cannot enter tokenized, recorded.
fn refuse(recording: &mut Recording, origin: &Origin, unchecked: Unchecked) -> Response<ProxyBody> {
    let Unchecked { rule, why } = unchecked;
    let record = recording.record_mut();
    record.decision = HttpDecision::Refused.as_str().into();
    record.rule = Some(rule.into());
    record.status = StatusCode::BAD_GATEWAY.as_u16();
    let message = format!(
        "egress: the response of {} was not passed to the sandbox: {why}. A flow rule withholds the values of {} from some upstream or host, so its responses enter as personal-data tokens, and this one could not be checked: ask for text (JSON, CSV, plain), without compression, or in smaller parts",
        record.host,
        origin.source()
    );
    answer(StatusCode::BAD_GATEWAY, Some(rule), message)
}
