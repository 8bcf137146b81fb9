//! One request from the sandbox, decided and sent on: its entry found for the tunnel's host,
//! the port, method, path and policy checked, the execution's bounds counted, the user asked
//! where the entry says `confirm`; then the entry's headers added and the request sent by the
//! server's own client (`connect.rs`). Whatever is refused is answered here, by the proxy,
//! with a 403 the code can read: it never reaches the host.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::TryStreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::{Frame, Incoming};
use tokio::sync::OnceCell;

use super::connect::Failure;
use super::grant::Grant;
use super::host::Host;
use super::record::{HttpDecision, HttpRecord};
use super::rules::{EgressEntry, Refused};
use super::streaming::{Recording, Scrubber, request_body, response_body};
use crate::gateway::confirm::{Answer, Prompt};
use crate::gateway::policy::Decision;

/// What the proxy answers the sandbox with.
pub(super) type ProxyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// Most bytes of a `confirm` request's body held to show the user before it is sent.
const MAX_CONFIRM_BODY: usize = 1024 * 1024;
/// Characters of that body the question shows.
const MAX_SHOWN_BODY: usize = 400;

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

/// Where the requests of one connection from the sandbox go: a `CONNECT` tunnel's host, or a
/// plain `http://` request's. Its client is made at the first request that is allowed, for the
/// addresses checked then, and serves the tunnel's later requests.
pub(super) struct Target {
    pub host: Host,
    pub port: u16,
    pub tls: bool,
    client: OnceCell<reqwest::Client>,
}

impl Target {
    pub(super) fn new(host: Host, port: u16, tls: bool) -> Self {
        Self {
            host,
            port,
            tls,
            client: OnceCell::new(),
        }
    }

    fn url(&self, path_and_query: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let host = match &self.host {
            Host::Ip(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
            other => other.to_string(),
        };
        format!("{scheme}://{host}:{}{path_and_query}", self.port)
    }

    async fn client(
        &self,
        grant: &Grant,
        entry: &EgressEntry,
    ) -> Result<&reqwest::Client, Failure> {
        self.client
            .get_or_try_init(|| async {
                let connector = &grant.connector;
                if connector.proxied() {
                    return connector.client(&self.host, &[]);
                }
                let addrs =
                    (connector.addresses(&self.host, self.port, entry.private, &entry.key)).await?;
                connector.client(&self.host, &addrs)
            })
            .await
    }
}

/// Answers one request of the sandbox's: the host's response, or the proxy's refusal.
pub(super) async fn forward(
    grant: Arc<Grant>,
    target: Arc<Target>,
    request: Request<Incoming>,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let record = new_record(&request, &target.host.to_string());
    let mut recording = Recording::new(grant.clone(), record, started);
    match send(&grant, &target, request, &mut recording).await {
        Ok((response, scrubber)) => respond(response, scrubber, recording),
        Err(failure) => {
            let record = recording.record_mut();
            let (status, message) = match failure {
                Failure::Refused(refused) => {
                    record.rule = Some(refused.rule.into());
                    (StatusCode::FORBIDDEN, refused.message)
                }
                Failure::Unreachable(message) => {
                    record.decision = HttpDecision::Failed.as_str().into();
                    record.error = Some(crate::text::cut(&message, 500).to_string());
                    let timeout = message.contains("timed out");
                    let status = if timeout {
                        StatusCode::GATEWAY_TIMEOUT
                    } else {
                        StatusCode::BAD_GATEWAY
                    };
                    (status, message)
                }
            };
            record.status = status.as_u16();
            answer(status, record.rule.as_deref(), message)
        }
    }
}

/// A request refused before it has a target (a host that is no host, a connection over the
/// execution's bound): recorded, and answered with the proxy's 403.
pub(super) fn refuse<B>(
    grant: &Arc<Grant>,
    request: &Request<B>,
    refused: Refused,
) -> Response<ProxyBody> {
    let host = request.uri().authority().map_or("?", |a| a.host());
    let record = new_record(request, host);
    let mut recording = Recording::new(grant.clone(), record, Instant::now());
    let record = recording.record_mut();
    record.rule = Some(refused.rule.into());
    record.status = StatusCode::FORBIDDEN.as_u16();
    answer(StatusCode::FORBIDDEN, Some(refused.rule), refused.message)
}

/// A request's record before anything is decided.
fn new_record<B>(request: &Request<B>, host: &str) -> HttpRecord {
    HttpRecord {
        method: request.method().to_string(),
        entry: None,
        host: crate::text::cut(host, 256).to_string(),
        path: crate::text::cut(request.uri().path(), 2048).to_string(),
        status: 0,
        bytes_out: 0,
        bytes_in: 0,
        duration_ms: 0.0,
        decision: HttpDecision::Refused.as_str().into(),
        rule: None,
        headers_added: Vec::new(),
        error: None,
    }
}

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

/// Checks the request, asks where the entry says so, and sends it: the host's response, and
/// the scrubber its body goes through.
async fn send(
    grant: &Arc<Grant>,
    target: &Target,
    request: Request<Incoming>,
    recording: &mut Recording,
) -> Result<(reqwest::Response, Option<Scrubber>), Failure> {
    let (parts, body) = request.into_parts();
    super::address::check_host(&target.host)?;
    let entry = grant.rules.entry_or_refuse(&target.host)?;
    recording.record_mut().entry = Some(entry.key.clone());
    entry.check_port(target.port, target.tls)?;
    let decision = entry.decide(&parts.method, parts.uri.path())?;
    grant.count_request()?;
    let declared = content_length(&parts.headers);
    if declared.is_some_and(|n| n > grant.out_left()) {
        return Err(over_out(grant).into());
    }
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = target.url(path_and_query);
    let body = if decision == Decision::Confirm {
        let held = hold_body(body, grant).await?;
        ask(grant, &parts.method, &url, entry, &held).await?;
        recording
            .bytes_out
            .fetch_add(held.len() as u64, std::sync::atomic::Ordering::Relaxed);
        reqwest::Body::from(held)
    } else if declared == Some(0) || (declared.is_none() && hyper::body::Body::is_end_stream(&body))
    {
        reqwest::Body::from(Bytes::new())
    } else {
        request_body(body, grant.clone(), recording.bytes_out.clone())
    };
    let mut headers = forwarded(parts.headers);
    for (name, value) in &entry.headers {
        headers.insert(name.clone(), value.clone());
        recording.record_mut().headers_added.push(name.to_string());
    }
    let scrubber = if entry.headers.is_empty() {
        None
    } else {
        // The host is asked not to compress, so that what it echoes can be found, and for the
        // whole body: a range could cut an echoed secret into pieces no scrubber recognises.
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        headers.remove(header::RANGE);
        headers.remove(header::IF_RANGE);
        Scrubber::new(secrets_of(entry))
    };
    let client = target.client(grant, entry).await?;
    let sent = client
        .request(parts.method, url)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let response = sent.map_err(|e| unreachable(&target.host, e))?;
    let record = recording.record_mut();
    record.status = response.status().as_u16();
    record.decision = HttpDecision::Sent.as_str().into();
    Ok((response, scrubber))
}

/// The host's response, its body streamed through the bounds and the scrubber.
fn respond(
    response: reqwest::Response,
    scrubber: Option<Scrubber>,
    recording: Recording,
) -> Response<ProxyBody> {
    let status = response.status();
    let mut headers = forwarded(response.headers().clone());
    if let Some(scrubber) = &scrubber {
        // A replaced secret changes the length: the body goes chunked.
        headers.remove(header::CONTENT_LENGTH);
        // A host may echo the secret in a header too (a Location, a debug header).
        for value in headers.values_mut() {
            if scrubber.holds(value.as_bytes()) {
                *value = HeaderValue::from_static(crate::gateway::redact::REDACTED);
            }
        }
    }
    let body = response_body(response.bytes_stream(), scrubber, recording).map_ok(Frame::data);
    let mut out = Response::new(http_body_util::StreamBody::new(body).boxed_unsync());
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// `headers` without those of one connection (and those `connection` names).
fn forwarded(mut headers: HeaderMap) -> HeaderMap {
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

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Each header value of the entry in every form a host may echo it in.
fn secrets_of(entry: &EgressEntry) -> Vec<String> {
    let mut found = Vec::new();
    for (_, value) in &entry.headers {
        if let Ok(v) = value.to_str() {
            found.push(v.to_string());
            if let Some((_, token)) = v.split_once(' ') {
                found.push(token.to_string());
            }
        }
    }
    crate::gateway::redact::secret_forms(found)
}

/// The body of a request the user is asked about, held whole (bounded) so what is shown is
/// what is sent.
async fn hold_body(body: Incoming, grant: &Grant) -> Result<Bytes, Failure> {
    let limited = http_body_util::Limited::new(body, MAX_CONFIRM_BODY);
    let bytes = limited.collect().await.map_err(|_| Refused {
        rule: "bounds",
        key: None,
        message: format!(
            "egress: a request that needs the user's confirmation may carry at most {} KiB, so that the user sees what is sent",
            MAX_CONFIRM_BODY / 1024
        ),
    })?;
    let bytes = bytes.to_bytes();
    if !grant.take_out(bytes.len() as u64) {
        return Err(over_out(grant).into());
    }
    Ok(bytes)
}

/// Asks the user about a request of a `confirm` entry.
async fn ask(
    grant: &Grant,
    method: &Method,
    url: &str,
    entry: &EgressEntry,
    body: &Bytes,
) -> Result<(), Failure> {
    let refused = |message: String| Refused {
        rule: "policy",
        key: Some(entry.key.clone()),
        message,
    };
    let Some(confirm) = &grant.confirm else {
        return Err(refused(format!(
            "egress: {method} to {} needs the user's confirmation (entry \"{}\", policy confirm), and this client cannot ask (it does not support MCP elicitation); an administrator can set the policy to allow in the upstreams file",
            entry.key, entry.key
        )).into());
    };
    let shown = if body.is_empty() {
        String::new()
    } else {
        let text = String::from_utf8_lossy(body);
        format!(" with the body {}", crate::text::cut(&text, MAX_SHOWN_BODY))
    };
    let message = format!(
        "Code running in the sandbox wants to send {method} {url}{shown} (egress entry \"{}\"). Allow this request?",
        entry.key
    );
    match confirm.ask(Prompt::new(message)).await {
        Ok(Answer::Accept) => Ok(()),
        Ok(Answer::Decline) => Err(refused(format!("egress: the user declined {method} {url}")).into()),
        Ok(Answer::Cancel) => Err(refused(format!(
            "egress: {method} {url} needs the user's confirmation, and the user dismissed the question"
        )).into()),
        Err(e) => Err(refused(format!(
            "egress: {method} {url} needs the user's confirmation, and asking failed: {e}"
        )).into()),
    }
}

fn over_out(grant: &Grant) -> Refused {
    Refused {
        rule: "bounds",
        key: None,
        message: format!(
            "egress: this request would pass the {} MiB this execution may send (--egress-max-bytes-out-mb)",
            grant.limits().max_bytes_out / (1024 * 1024)
        ),
    }
}

/// A request that could not be completed, in words without its URL (its query may hold what
/// the code sent).
fn unreachable(host: &Host, e: reqwest::Error) -> Failure {
    use std::error::Error;
    let e = e.without_url();
    let mut cause = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        cause = format!("{cause}: {s}");
        source = s.source();
    }
    let what = if e.is_timeout() {
        "timed out"
    } else {
        "failed"
    };
    Failure::Unreachable(format!("egress: the request to {host} {what}: {cause}"))
}
