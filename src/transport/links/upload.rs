//! Uploads: the page (GET, which spends nothing: chat unfurlers open links too), and the
//! body, as one `file` part of a `multipart/form-data` POST (the page, a form, `curl -F`) or
//! as the whole body of a PUT (`curl -T FILE URL/NAME`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::Response;
use futures::StreamExt;

use super::{answer, html_page, json, link_refusal};
use crate::app::App;
use crate::app::links::receive::{IDLE, Incoming, UploadError};
use crate::links::{BudgetRefusal, Link, page};
use crate::workspace::WorkspaceError;

/// Parts of a form read before the `file` one, at most.
const MAX_PARTS: usize = 8;
/// Bytes of a form before the file's part begins, at most (its boundary, headers and the
/// parts before it).
const PREAMBLE_BYTES: u64 = 64 << 10;

/// The upload page of `link`.
pub(super) fn page(link: &Link, head: bool) -> Response {
    let body = if head {
        String::new()
    } else {
        page::upload(link)
    };
    html_page(StatusCode::OK, body)
}

/// Receives the request's file through `link`.
pub(super) async fn receive(
    app: &Arc<App>,
    link: Link,
    name: Option<String>,
    client: String,
    request: Request,
    html: bool,
) -> Response {
    // Before a byte of the body is read.
    if let Err(e) = app.check_upload_link(&link) {
        app.link_refused(&link, &e, client).await;
        return link_refusal(&e, html);
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let multipart = content_type.starts_with("multipart/form-data");
    let result = if request.method() == axum::http::Method::PUT {
        if content_type.starts_with("multipart/") {
            return answer(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Wrong content type",
                "a PUT carries the file itself: send it with curl -T FILE URL, or POST it as multipart/form-data (curl -F file=@FILE URL)",
                html,
            );
        }
        let incoming = Incoming {
            link,
            name_hint: name,
            client,
        };
        let body = request.into_body().into_data_stream();
        app.receive(incoming, body).await
    } else if multipart {
        match form_upload(app, link, client, request).await {
            Ok(result) => result,
            Err(response) => return response,
        }
    } else {
        return answer(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Wrong content type",
            "a POST carries the file as multipart/form-data (a form's file field named file, or curl -F file=@FILE URL); or PUT the file itself",
            html,
        );
    };
    match result {
        Ok(received) if html => html_page(StatusCode::CREATED, page::result(&received)),
        Ok(received) => json(StatusCode::CREATED, &received),
        Err(e) => refusal(&e, html),
    }
}

/// The `file` part of a multipart form, received. The form is read through [`bounded`]: at
/// most [`PREAMBLE_BYTES`] before the file's part begins (the parser holds what precedes a
/// boundary in memory), nothing arriving for the idle timeout ends it.
async fn form_upload(
    app: &Arc<App>,
    link: Link,
    client: String,
    request: Request,
) -> Result<Result<crate::links::page::Received, UploadError>, Response> {
    let html = super::wants_html(request.headers());
    let bad = |why: String| answer(StatusCode::BAD_REQUEST, "Not a form upload", &why, html);
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(content_type)
        .map_err(|e| bad(format!("the form cannot be read: {e}")))?;
    let in_file = Arc::new(AtomicBool::new(false));
    let body = bounded(request.into_body().into_data_stream(), in_file.clone());
    let mut form = multer::Multipart::new(body, boundary);
    for _ in 0..MAX_PARTS {
        let field = match form.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(e) => return Err(bad(format!("the form cannot be read: {e}"))),
        };
        if field.name() != Some("file") {
            continue;
        }
        in_file.store(true, Ordering::Relaxed);
        let incoming = Incoming {
            name_hint: field.file_name().map(str::to_string),
            link,
            client,
        };
        let body = field.map(|chunk| chunk.map_err(|e| e.to_string()));
        return Ok(app.receive(incoming, Box::pin(body)).await);
    }
    Err(bad(
        "the form has no part named file: send the file as the form field file (curl -F file=@FILE URL)".into(),
    ))
}

/// A form's body that ends in an error once [`PREAMBLE_BYTES`] came before the file's part
/// (`in_file` says when it began), or when nothing arrives for the idle timeout.
fn bounded(
    body: axum::body::BodyDataStream,
    in_file: Arc<AtomicBool>,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send {
    futures::stream::unfold((body, 0u64), move |(mut body, seen)| {
        let in_file = in_file.clone();
        async move {
            let item = match tokio::time::timeout(IDLE, body.next()).await {
                Err(_) => Err(std::io::Error::other("the upload stalled")),
                Ok(None) => return None,
                Ok(Some(Err(e))) => Err(std::io::Error::other(e)),
                Ok(Some(Ok(chunk))) => Ok(chunk),
            };
            let seen = seen + item.as_ref().map_or(0, |c| c.len() as u64);
            let item = match item {
                Ok(_) if seen > PREAMBLE_BYTES && !in_file.load(Ordering::Relaxed) => Err(
                    std::io::Error::other("more than 64 KiB came before the file's part"),
                ),
                item => item,
            };
            Some((item, (body, seen)))
        }
    })
}

/// The answer to an upload that did not land.
fn refusal(e: &UploadError, html: bool) -> Response {
    let message = e.to_string();
    let (status, title) = match e {
        UploadError::Link(link) => return link_refusal(link, html),
        UploadError::Busy(BudgetRefusal::InProgress) => {
            (StatusCode::CONFLICT, "Upload in progress")
        }
        UploadError::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "Too many uploads"),
        UploadError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "File too large"),
        UploadError::NoName | UploadError::BadName(_) => (StatusCode::BAD_REQUEST, "Bad file name"),
        UploadError::Workspace(
            WorkspaceError::Exists { .. } | WorkspaceError::IsDirectory { .. },
        ) => (StatusCode::CONFLICT, "Name taken"),
        UploadError::Workspace(WorkspaceError::Full { .. }) => {
            (StatusCode::INSUFFICIENT_STORAGE, "Workspace full")
        }
        UploadError::Workspace(_) => (StatusCode::INTERNAL_SERVER_ERROR, "Upload failed"),
        UploadError::Idle | UploadError::Deadline => (StatusCode::REQUEST_TIMEOUT, "Too slow"),
        UploadError::Body(_) => (StatusCode::BAD_REQUEST, "Upload cut short"),
    };
    let mut response = answer(status, title, &message, html);
    let retry = match e {
        UploadError::Busy(BudgetRefusal::Hourly(_, wait)) => Some(wait.as_secs().max(1)),
        UploadError::Busy(BudgetRefusal::TooMany(_)) => Some(5),
        _ => None,
    };
    if let Some(Ok(v)) = retry.map(|secs| secs.to_string().parse()) {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}
