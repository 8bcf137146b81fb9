//! Downloads: the file streamed from disk (never whole in memory), `HEAD` for its size, one
//! byte range per request (`Range: bytes=A-B`, `A-`, `-N`; several ranges get the whole
//! file). The link is spent by the first GET that sent the whole file to its end; a range, a
//! `HEAD` or a download cut short leave it usable.

use std::io::SeekFrom;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio_util::io::ReaderStream;

use super::{Guard, answer, guard, link_refusal};
use crate::app::App;
use crate::app::links::send::{DownloadError, Sending as Held};
use crate::links::Link;

/// Image types shown in the browser rather than saved (never SVG: it runs script).
const INLINE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Sends the file of `link`.
pub(super) async fn send(app: Arc<App>, link: Link, client: String, request: Request) -> Response {
    let html = super::wants_html(request.headers());
    let outgoing = match app.open_download(&link).await {
        Ok(outgoing) => outgoing,
        Err(DownloadError::Link(e)) => {
            app.link_refused(&link, &e, client).await;
            return link_refusal(&e, html);
        }
        Err(DownloadError::Workspace(e)) => {
            return answer(
                StatusCode::NOT_FOUND,
                "File not available",
                &e.to_string(),
                html,
            );
        }
    };
    let size = outgoing.size;
    let range = match range_of(&request, size, html) {
        Ok(range) => range,
        Err(refused) => return *refused,
    };
    let mut response = headers_for(&outgoing.path, size, range);
    if request.method() == Method::HEAD {
        return response;
    }
    // To the file's end (the whole file, or a resumed download): it spends the link, so one
    // at a time.
    let to_the_end = range.is_none_or(|(_, last)| last + 1 >= size);
    let sending = match to_the_end.then(|| hold(&app, &link, html)).transpose() {
        Ok(sending) => sending,
        Err(refused) => return *refused,
    };
    let mut file = tokio::fs::File::from_std(outgoing.file);
    let (start, len) = range.map_or((0, size), |(a, b)| (a, b - a + 1));
    if start > 0 && file.seek(SeekFrom::Start(start)).await.is_err() {
        return answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Read failed",
            "the file could not be read: try again",
            html,
        );
    }
    let ended: OnEnd = Box::new(move |sent, whole, complete| {
        let path = outgoing.path;
        let end = crate::app::links::send::Ended {
            sent,
            whole,
            complete,
            to_the_end,
            client,
        };
        tokio::spawn(async move {
            app.download_ended(&link, &path, end).await;
            // Held until the link is spent (or the download cut short).
            drop(sending);
        });
    });
    let mut body = Sending {
        inner: ReaderStream::new(file.take(len)),
        sent: 0,
        expected: len,
        hasher: range.is_none().then(sha2::Sha256::new),
        on_end: Some(ended),
    };
    if len == 0 {
        // Nothing to send: the server may never poll the body.
        body.ended(true);
    }
    *response.body_mut() = Body::from_stream(body);
    response
}

/// The range the request asks for (`None`: the whole file), or the answer to one past the
/// end.
fn range_of(request: &Request, size: u64, html: bool) -> Result<Option<(u64, u64)>, Box<Response>> {
    let Some(value) = request.headers().get(header::RANGE) else {
        return Ok(None);
    };
    match parse_range(value.to_str().unwrap_or(""), size) {
        Range::Whole => Ok(None),
        Range::Part(start, end) => Ok(Some((start, end))),
        Range::Unsatisfiable => {
            let mut r = answer(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "Range not satisfiable",
                &format!("the file has {size} bytes"),
                html,
            );
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            Err(Box::new(r))
        }
    }
}

/// The hold on `link` of a download to the file's end, or the answer while another one runs
/// (or once one spent it).
fn hold(app: &App, link: &Link, html: bool) -> Result<Held, Box<Response>> {
    match app.begin_sending(link) {
        Ok(Some(held)) => Ok(held),
        Ok(None) => {
            let why = "a download through this link is in progress: wait for it to end (one that stops short leaves the link usable)";
            Err(Box::new(answer(
                StatusCode::CONFLICT,
                "Download in progress",
                why,
                html,
            )))
        }
        Err(e) => Err(Box::new(link_refusal(&e, html))),
    }
}

/// The headers of a download of `path`.
fn headers_for(path: &str, size: u64, range: Option<(u64, u64)>) -> Response {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    let inline = INLINE_TYPES.contains(&mime.essence_str());
    let base = path.rsplit('/').next().unwrap_or(path);
    let encoded = percent_encoding::utf8_percent_encode(base, percent_encoding::NON_ALPHANUMERIC);
    let disposition = format!(
        "{}; filename*=UTF-8''{encoded}",
        if inline { "inline" } else { "attachment" }
    );
    let status = if range.is_some() {
        StatusCode::PARTIAL_CONTENT
    } else {
        StatusCode::OK
    };
    let length = range.map_or(size, |(a, b)| b - a + 1);
    let mut response = (status, Body::empty()).into_response();
    let headers = response.headers_mut();
    guard(headers, Guard::File);
    let mut set = |name, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    };
    set(header::CONTENT_TYPE, mime.essence_str().to_string());
    set(header::CONTENT_DISPOSITION, disposition);
    set(header::CONTENT_LENGTH, length.to_string());
    set(header::ACCEPT_RANGES, "bytes".into());
    if let Some((a, b)) = range {
        set(header::CONTENT_RANGE, format!("bytes {a}-{b}/{size}"));
    }
    response
}

/// What a `Range` header asks of a file of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
enum Range {
    Whole,
    /// First and last byte, inclusive.
    Part(u64, u64),
    Unsatisfiable,
}

fn parse_range(value: &str, size: u64) -> Range {
    let Some(spec) = value.trim().strip_prefix("bytes=") else {
        return Range::Whole;
    };
    if spec.contains(',') {
        return Range::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Range::Whole;
    };
    let (a, b) = (a.trim(), b.trim());
    let parsed = match (a.parse::<u64>().ok(), b.parse::<u64>().ok()) {
        (Some(a), Some(b)) if a <= b => Some((a, b.min(size.saturating_sub(1)))),
        (Some(a), None) if b.is_empty() => Some((a, size.saturating_sub(1))),
        (None, Some(n)) if a.is_empty() && n > 0 => {
            Some((size.saturating_sub(n), size.saturating_sub(1)))
        }
        _ => return Range::Whole,
    };
    match parsed {
        Some((a, b)) if a < size && a <= b => Range::Part(a, b),
        _ => Range::Unsatisfiable,
    }
}

/// Bytes sent, the whole file's hash (when the whole file went out), whether what was asked
/// for went out.
type OnEnd = Box<dyn FnOnce(u64, Option<String>, bool) + Send>;

/// The file's bytes as a body, counted and (for the whole file) hashed; `on_end` hears how
/// it ended: with the hash when the whole file went out (its last chunk handed to the
/// server), without for a range or a download cut short.
struct Sending<S> {
    inner: S,
    sent: u64,
    expected: u64,
    hasher: Option<sha2::Sha256>,
    on_end: Option<OnEnd>,
}

impl<S> Stream for Sending<S>
where
    S: Stream<Item = std::io::Result<Bytes>> + Unpin,
{
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let next = Pin::new(&mut this.inner).poll_next(cx);
        match &next {
            Poll::Ready(Some(Ok(chunk))) => {
                this.sent += chunk.len() as u64;
                if let Some(h) = &mut this.hasher {
                    h.update(chunk);
                }
                // The server stops polling once the last byte of the length is out: the end
                // is the last chunk, not the stream's end.
                if this.sent >= this.expected {
                    this.ended(true);
                }
            }
            Poll::Ready(None) => this.ended(this.sent >= this.expected),
            _ => {}
        }
        next
    }
}

impl<S> Sending<S> {
    /// Tells `on_end` (once) how the download ended.
    fn ended(&mut self, complete: bool) {
        if let Some(end) = self.on_end.take() {
            let hash = self.hasher.take().map(|h| hex::encode(h.finalize()));
            end(self.sent, complete.then_some(hash).flatten(), complete);
        }
    }
}

impl<S> Drop for Sending<S> {
    fn drop(&mut self) {
        self.ended(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_read_as_servers_read_them() {
        assert_eq!(parse_range("bytes=0-9", 100), Range::Part(0, 9));
        assert_eq!(parse_range("bytes=90-", 100), Range::Part(90, 99));
        assert_eq!(parse_range("bytes=-10", 100), Range::Part(90, 99));
        assert_eq!(parse_range("bytes=50-500", 100), Range::Part(50, 99));
        assert_eq!(parse_range("bytes=100-", 100), Range::Unsatisfiable);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), Range::Whole);
        assert_eq!(parse_range("items=0-1", 100), Range::Whole);
        assert_eq!(parse_range("bytes=9-1", 100), Range::Whole);
    }
}
