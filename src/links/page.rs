//! The pages a person sees: the upload page (a labelled picker, a drop zone, a progress bar
//! announced to screen readers, the limits and then the result), the result page of a form
//! posted without JavaScript, and the error page. Templates are built into the binary; every
//! value put into one is HTML-escaped here.

use super::Link;

const UPLOAD: &str = include_str!("page/upload.html");
const RESULT: &str = include_str!("page/result.html");
const ERROR: &str = include_str!("page/error.html");

/// The upload page's script, served at `links/assets/upload.js`.
pub const SCRIPT: &str = include_str!("page/upload.js");
/// The pages' stylesheet, served at `links/assets/upload.css`.
pub const STYLE: &str = include_str!("page/upload.css");

/// The content security policy of the pages: their own script and stylesheet, nothing else,
/// posting only to themselves, never framed.
pub const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// What an upload committed, as pages and JSON answers show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Received {
    pub name: String,
    pub size: u64,
    pub sha256: String,
    pub uri: String,
    pub overwritten: bool,
}

/// The upload page of `link` (an upload link).
pub fn upload(link: &Link) -> String {
    fill(
        UPLOAD,
        &[
            ("MAX", &crate::links::human_bytes(link.max_bytes)),
            ("MAX_BYTES", &link.max_bytes.to_string()),
            ("FILENAME", link.path.as_deref().unwrap_or("")),
            ("EXPIRES", &link.expires_at()),
            ("OVERWRITE", if link.overwrite { "true" } else { "false" }),
        ],
    )
}

/// The page of a committed upload (a form posted without JavaScript).
pub fn result(received: &Received) -> String {
    fill(
        RESULT,
        &[
            ("NAME", &received.name),
            ("SIZE", &crate::links::human_bytes(received.size)),
            ("SHA256", &received.sha256),
            ("URI", &received.uri),
        ],
    )
}

/// A page saying what went wrong (`title`) and what to do (`message`).
pub fn error(title: &str, message: &str) -> String {
    fill(ERROR, &[("TITLE", title), ("MESSAGE", message)])
}

/// `template` with each `{{NAME}}` replaced by its value, escaped, in one pass: a value that
/// holds `{{…}}` (a file's name may) is shown as it is, never filled in turn. A placeholder
/// without a value stays as written.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut page = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        page.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let value = after.find("}}").and_then(|close| {
            let found = values.iter().find(|(name, _)| *name == &after[..close])?;
            Some((close, found.1))
        });
        match value {
            Some((close, value)) => {
                page.push_str(&escape(value));
                rest = &after[close + 2..];
            }
            None => {
                page.push_str("{{");
                rest = after;
            }
        }
    }
    page.push_str(rest);
    page
}

/// `text` safe in HTML text and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::links::Kind;

    #[test]
    fn values_are_escaped_and_every_placeholder_filled() {
        let mut link = Link::new(Kind::Upload, None, Duration::from_secs(60));
        link.path = Some("<script>\"x\".csv".into());
        link.max_bytes = 50 << 20;
        let page = upload(&link);
        assert!(!page.contains("{{"), "a placeholder is left");
        assert!(!page.contains("<script>\"x\""));
        assert!(page.contains("&lt;script&gt;&quot;x&quot;.csv"));
        assert!(page.contains("50 MiB"));
        assert!(!error("a", "<b>").contains("<b>"));
        // A name that looks like a placeholder is shown as given.
        link.path = Some("{{EXPIRES}}.csv".into());
        assert!(upload(&link).contains("data-filename=\"{{EXPIRES}}.csv\""));
    }
}
