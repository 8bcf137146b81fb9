//! A request body on its way from the sandbox to a host: streamed as the code sends it, or
//! held whole (bounded) where the user is asked about it, so that what is shown is what is
//! sent, or where its personal-data tokens are restored (`personal.rs`).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use bytes::Bytes;
use http::{HeaderMap, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::connect::Failure;
use super::grant::Grant;
use super::personal::{self, Restoring};
use super::rules::Refused;
use super::streaming::request_body;

/// Most bytes of a `confirm` request's body held to show the user before it is sent.
const MAX_CONFIRM_BODY: usize = 1024 * 1024;

/// A request body on its way out: held whole where the user is asked about it or its tokens
/// are restored, else streamed as the code sends it.
pub(super) enum Outgoing {
    Empty,
    /// As the code sent it (shown to the user), and as it goes out.
    Held {
        written: Bytes,
        sent: Bytes,
    },
    Streamed(reqwest::Body),
}

impl Outgoing {
    /// The held body as the code wrote it (empty when it was not held).
    pub(super) fn written(&self) -> &[u8] {
        match self {
            Outgoing::Held { written, .. } => written,
            _ => &[],
        }
    }

    pub(super) fn held_len(&self) -> u64 {
        match self {
            Outgoing::Held { sent, .. } => sent.len() as u64,
            _ => 0,
        }
    }

    pub(super) fn into_body(self) -> reqwest::Body {
        match self {
            Outgoing::Empty => reqwest::Body::from(Bytes::new()),
            Outgoing::Held { sent, .. } => reqwest::Body::from(sent),
            Outgoing::Streamed(body) => body,
        }
    }
}

/// The request's body as it goes out. A body is held for the user's question (at most
/// [`MAX_CONFIRM_BODY`]) and for its tokens where it may be text of a declared length within
/// `--egress-max-scanned-mb`; any other is streamed, its tokens left as tokens.
pub(super) async fn outgoing(
    grant: &Arc<Grant>,
    headers: &HeaderMap,
    body: Incoming,
    counted: Arc<AtomicU64>,
    confirm: bool,
    restoring: Option<&mut Restoring<'_>>,
) -> Result<Outgoing, Failure> {
    let declared = content_length(headers);
    if declared == Some(0) || (declared.is_none() && hyper::body::Body::is_end_stream(&body)) {
        return Ok(Outgoing::Empty);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let scanned = restoring.is_some()
        && personal::may_be_text(content_type)
        && declared.is_some_and(|n| n <= grant.limits().max_scanned_bytes);
    if !confirm && !scanned {
        return Ok(Outgoing::Streamed(request_body(
            body,
            grant.clone(),
            counted,
        )));
    }
    let limit = if confirm {
        MAX_CONFIRM_BODY
    } else {
        grant.limits().max_scanned_bytes as usize
    };
    let written = hold_body(body, grant, limit).await?;
    let sent = match restoring {
        Some(restoring) if personal::may_be_text(content_type) => restoring
            .body(content_type, &written)
            .unwrap_or(written.clone()),
        _ => written.clone(),
    };
    // What restoring added goes out too.
    let grown = sent.len().saturating_sub(written.len()) as u64;
    if grown > 0 && !grant.take_out(grown) {
        return Err(over_out(grant).into());
    }
    Ok(Outgoing::Held { written, sent })
}

/// A request body held whole, at most `limit` bytes: for the user's question (so that what is
/// shown is what is sent) or for its tokens.
async fn hold_body(body: Incoming, grant: &Grant, limit: usize) -> Result<Bytes, Failure> {
    let limited = http_body_util::Limited::new(body, limit);
    let bytes = limited.collect().await.map_err(|_| Refused {
        rule: "bounds",
        key: None,
        message: format!(
            "egress: a request body held for the user's confirmation or for its personal-data tokens may carry at most {} KiB, and this one carried more than its Content-Length said or than the user can be shown",
            limit / 1024
        ),
    })?;
    let bytes = bytes.to_bytes();
    if !grant.take_out(bytes.len() as u64) {
        return Err(over_out(grant).into());
    }
    Ok(bytes)
}

/// The length a request or response declares, if it declares one.
pub(super) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// Why a request would pass the execution's outgoing bytes.
pub(super) fn over_out(grant: &Grant) -> Refused {
    Refused {
        rule: "bounds",
        key: None,
        message: format!(
            "egress: this request would pass the {} MiB this execution may send (--egress-max-bytes-out-mb)",
            grant.limits().max_bytes_out / (1024 * 1024)
        ),
    }
}
