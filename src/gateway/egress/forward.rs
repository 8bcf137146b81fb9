//! One request from the sandbox, decided and sent on: its entry found for the tunnel's host,
//! the port, method, path and policy checked, the execution's bounds counted, the user asked
//! where the entry says `confirm`; then the entry's headers added and the request sent by the
//! server's own client (`connect.rs`). Whatever is refused is answered here, by the proxy,
//! with a 403 the code can read: it never reaches the host.

use std::sync::Arc;
use std::time::Instant;

use futures::TryStreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use tokio::sync::OnceCell;

use super::connect::Failure;
use super::grant::Grant;
use super::host::Host;
use super::outgoing::{Outgoing, content_length, outgoing, over_out};
use super::personal::Restoring;
use super::record::{HttpDecision, HttpRecord};
use super::reply::{ProxyBody, answer, forwarded, scrub_headers};
use super::rules::{EgressEntry, Refused};
use super::streaming::{Recording, Scrubber, response_body};
use crate::gateway::confirm::{Answer, Prompt};
use crate::gateway::policy::Decision;
use crate::gateway::restoring::note;
use crate::pii::Origin;

/// Characters of that body the question shows.
const MAX_SHOWN_BODY: usize = 400;

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
        Ok((
            response,
            Inbound {
                scrubber,
                tokenized: None,
            },
        )) => respond(response, scrubber, recording),
        Ok((
            response,
            Inbound {
                scrubber,
                tokenized: Some(origin),
            },
        )) => super::tokenized::respond(response, scrubber, recording, &origin).await,
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
        tokens: Default::default(),
        tokenized: false,
    }
}

/// What the host's response goes through on its way to the sandbox: the scrubber of the
/// entry's secrets, and the origin its personal data enters tokenized with.
pub(super) struct Inbound {
    scrubber: Option<Scrubber>,
    tokenized: Option<Origin>,
}

/// Checks the request, restores its tokens as the entry allows, asks where the entry says so,
/// and sends it: the host's response, and what its body goes through.
async fn send(
    grant: &Arc<Grant>,
    target: &Target,
    request: Request<Incoming>,
    recording: &mut Recording,
) -> Result<(reqwest::Response, Inbound), Failure> {
    let (mut parts, body) = request.into_parts();
    let (entry, decision) = admit(grant, target, &parts, recording)?;
    // What the code wrote, tokens and all: what the user is shown.
    let written = (parts.uri.path_and_query())
        .map_or("/", |p| p.as_str())
        .to_owned();
    let confirm = decision == Decision::Confirm;
    let ready = prepare(grant, entry, &mut parts, body, confirm, recording).await?;
    // The addresses are checked before the user is asked: a request that would be refused
    // is never put to the user.
    let client = target.client(grant, entry).await?;
    if confirm {
        let question = Question {
            method: &parts.method,
            url: target.url(&written),
            body: ready.body.written(),
            note: note(&recording.record_mut().tokens),
        };
        ask(grant, entry, question).await?;
    }
    let mut headers = forwarded(parts.headers);
    if ready.body.held_len() > 0 {
        // A restored body has its own length; the client writes it.
        headers.remove(header::CONTENT_LENGTH);
    }
    for (name, value) in &entry.headers {
        headers.insert(name.clone(), value.clone());
        recording.record_mut().headers_added.push(name.to_string());
    }
    let inbound = inbound(grant, entry, &mut headers);
    let sent = client
        .request(parts.method, target.url(&ready.path_and_query))
        .headers(headers)
        .body(ready.body.into_body())
        .send()
        .await;
    let response = sent.map_err(|e| unreachable(&target.host, e))?;
    let record = recording.record_mut();
    record.status = response.status().as_u16();
    record.decision = HttpDecision::Sent.as_str().into();
    Ok((response, inbound))
}

/// The entry the request falls under and its policy's decision, once the host, port, method,
/// path and the execution's bounds let it through.
fn admit<'g>(
    grant: &'g Grant,
    target: &Target,
    parts: &http::request::Parts,
    recording: &mut Recording,
) -> Result<(&'g EgressEntry, Decision), Failure> {
    super::address::check_host(&target.host)?;
    let entry = grant.rules.entry_or_refuse(&target.host)?;
    recording.record_mut().entry = Some(entry.key.clone());
    entry.check_port(target.port, target.tls)?;
    let decision = entry.decide(&parts.method, parts.uri.path())?;
    grant.count_request()?;
    if content_length(&parts.headers).is_some_and(|n| n > grant.out_left()) {
        return Err(over_out(grant).into());
    }
    Ok((entry, decision))
}

/// A request ready to go: its path and query and its body with their tokens restored.
struct Ready {
    path_and_query: String,
    body: Outgoing,
}

/// Restores the request's tokens where the entry's rule allows (its headers in place) and
/// holds its body where it must be; refused when the rule refuses a token it withholds. What
/// became of the tokens goes into the record.
async fn prepare(
    grant: &Arc<Grant>,
    entry: &EgressEntry,
    parts: &mut http::request::Parts,
    body: Incoming,
    confirm: bool,
    recording: &mut Recording,
) -> Result<Ready, Failure> {
    let written = (parts.uri.path_and_query()).map_or("/", |p| p.as_str());
    let mut path_and_query = written.to_owned();
    let pii = grant.pii.as_deref();
    let mut restoring = pii.map(|p| Restoring::new(&p.engine, &entry.pii));
    if let Some(restoring) = &mut restoring {
        path_and_query = restoring.path_and_query(written).unwrap_or(path_and_query);
        restoring.headers(&mut parts.headers);
    }
    let counted = recording.bytes_out.clone();
    let restoring_body = restoring.as_mut();
    let body = outgoing(
        grant,
        &parts.headers,
        body,
        counted,
        confirm,
        restoring_body,
    )
    .await?;
    recording
        .bytes_out
        .fetch_add(body.held_len(), std::sync::atomic::Ordering::Relaxed);
    if let Some(restoring) = restoring {
        let (tokens, refused) = restoring.finish(entry);
        recording.record_mut().tokens = tokens;
        if let Some(refused) = refused {
            return Err(refused.into());
        }
    }
    Ok(Ready {
        path_and_query,
        body,
    })
}

/// What the response will go through, and the request headers that asks of the host.
fn inbound(grant: &Grant, entry: &EgressEntry, headers: &mut HeaderMap) -> Inbound {
    let tokenized = (grant.pii.as_ref())
        .filter(|p| p.tokenizes(entry))
        .map(|_| Origin::http(&entry.key));
    let scrubber = Scrubber::new(secrets_of(entry));
    if scrubber.is_some() || tokenized.is_some() {
        // The host is asked not to compress, so that what it echoes and the personal data it
        // sends can be found, and for the whole body: a range could cut an echoed secret or a
        // value into pieces no scrubber or detector recognises.
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        headers.remove(header::RANGE);
        headers.remove(header::IF_RANGE);
    }
    if tokenized.is_some() {
        // UTF-8 is what the detectors read; a body in another charset would be refused.
        headers.remove(header::ACCEPT_CHARSET);
    }
    Inbound {
        scrubber,
        tokenized,
    }
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
        scrub_headers(&mut headers, scrubber);
    }
    let body = response_body(response.bytes_stream(), scrubber, recording).map_ok(Frame::data);
    let mut out = Response::new(http_body_util::StreamBody::new(body).boxed_unsync());
    *out.status_mut() = status;
    *out.headers_mut() = headers;
    out
}

/// Each secret header value of the entry (expanded from a variable, or a credential by its
/// name) in every form a host may echo it in.
fn secrets_of(entry: &EgressEntry) -> Vec<String> {
    let mut found = Vec::new();
    for (_, value) in entry.headers.iter().filter(|(_, v)| v.is_sensitive()) {
        if let Ok(v) = value.to_str() {
            found.push(v.to_string());
            if let Some((_, token)) = v.split_once(' ') {
                found.push(token.to_string());
            }
        }
    }
    crate::gateway::redact::secret_forms(found)
}

/// What the user is asked about a request: as the code wrote it, tokens and all, and what
/// became of its tokens.
struct Question<'a> {
    method: &'a Method,
    url: String,
    body: &'a [u8],
    note: String,
}

/// Asks the user about a request of a `confirm` entry.
async fn ask(grant: &Grant, entry: &EgressEntry, q: Question<'_>) -> Result<(), Failure> {
    let refused = |message: String| Refused {
        rule: "policy",
        key: Some(entry.key.clone()),
        message,
    };
    let (method, url) = (q.method, &q.url);
    let Some(confirm) = &grant.confirm else {
        return Err(refused(format!(
            "egress: {method} to {} needs the user's confirmation (entry \"{}\", policy confirm), and this client cannot ask (it does not support MCP elicitation); an administrator can set the policy to allow in the upstreams file",
            entry.key, entry.key
        )).into());
    };
    let shown = if q.body.is_empty() {
        String::new()
    } else {
        let text = String::from_utf8_lossy(q.body);
        format!(" with the body {}", crate::text::cut(&text, MAX_SHOWN_BODY))
    };
    let message = format!(
        "Code running in the sandbox wants to send {method} {url}{shown} (egress entry \"{}\").{} Allow this request?",
        entry.key, q.note
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
