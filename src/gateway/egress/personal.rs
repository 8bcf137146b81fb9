//! Personal data through guarded egress, under the flow rules (`gateway::flow`). What a host
//! answers enters the sandbox tokenized, with the origin `http:KEY`, when some rule withholds
//! that entry's values; the tokens in what the code sends (the path, the decoded query, header
//! values, a text body) are restored only as the entry's own rule allows, else kept as tokens
//! or the request refused (`otherwise`).
//!
//! Why whole bodies: a value split by a chunk boundary escapes a detector, so a response that
//! must enter tokenized is held (up to `--egress-max-scanned-mb`) and scanned whole, and one the
//! server cannot read as text (binary, compressed although identity was asked for, over the
//! bound) is refused with a status saying why, never passed in clear. A request body is
//! restored when it is text within the bound; any other is sent as it is, its tokens left as
//! tokens: a token is never a value, so that is the safe side of every rule.

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde_json::Value;

use super::rules::{EgressEntry, EgressRules, Refused};
use crate::audit::AuditTokens;
use crate::gateway::flow::{FlowRule, FlowRules, Otherwise};
use crate::gateway::restoring::Tally;
use crate::pii::{Origin, PiiEngine};

/// What a path segment keeps unencoded when a restored value is put into it: RFC 3986's
/// `pchar` (unreserved, sub-delims, `:` and `@`), so that the rest of the segment keeps its
/// form (`/v1/users/NAME:send`).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@');

/// One tenant's personal-data side of egress: its PII engine, and which entries' responses
/// enter the sandbox tokenized.
pub struct EgressPii {
    pub(super) engine: Arc<PiiEngine>,
    tokenized: BTreeSet<String>,
}

impl std::fmt::Debug for EgressPii {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressPii")
            .field("tokenized", &self.tokenized)
            .finish_non_exhaustive()
    }
}

impl EgressPii {
    /// For `rules` (the tenant's entries) under `flow` (every rule of the upstreams file).
    pub fn new(engine: Arc<PiiEngine>, rules: &EgressRules, flow: &FlowRules) -> Self {
        let tokenized = (rules.entries().iter())
            .filter(|e| flow.tokenizes_results_of(&e.origin()))
            .map(|e| e.key.clone())
            .collect();
        Self { engine, tokenized }
    }

    /// Whether responses under `entry` enter the sandbox tokenized.
    pub(super) fn tokenizes(&self, entry: &EgressEntry) -> bool {
        self.tokenized.contains(&entry.key)
    }
}

/// The tokens of one request, restored part by part as its entry's rule allows.
pub(super) struct Restoring<'a> {
    engine: &'a PiiEngine,
    rule: &'a FlowRule,
    tally: Tally,
}

impl<'a> Restoring<'a> {
    pub(super) fn new(engine: &'a PiiEngine, rule: &'a FlowRule) -> Self {
        Self {
            engine,
            rule,
            tally: Tally::default(),
        }
    }

    /// `text` with its allowed tokens restored; `None` when nothing in it changed.
    fn text(&mut self, text: &str) -> Option<String> {
        if !text.contains('[') {
            return None;
        }
        let rule = self.rule;
        let checked = self.engine.restore_where(text, |o| rule.allows(o));
        self.tally.add(&checked);
        (checked.text != text).then_some(checked.text)
    }

    /// `raw` percent-decoded (`+` as a space in a form), its tokens restored; `None` when
    /// nothing changed.
    fn decoded(&mut self, raw: &str, form: bool) -> Option<String> {
        if !(raw.contains('[') || raw.contains("%5B") || raw.contains("%5b")) {
            return None;
        }
        let raw = if form {
            raw.replace('+', " ")
        } else {
            raw.to_owned()
        };
        let text = percent_decode_str(&raw).decode_utf8().ok()?;
        self.text(&text)
    }

    /// The path and query with their tokens restored, each segment and each query pair
    /// decoded first (a client sends `[` as `%5B`); `None` when nothing changed. A part
    /// without a token is kept byte for byte.
    pub(super) fn path_and_query(&mut self, path_and_query: &str) -> Option<String> {
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let mut changed = false;
        let segments: Vec<String> = (path.split('/'))
            .map(|segment| match self.decoded(segment, false) {
                Some(restored) => {
                    changed = true;
                    utf8_percent_encode(&restored, SEGMENT).to_string()
                }
                None => segment.to_owned(),
            })
            .collect();
        let mut out = segments.join("/");
        if let Some(query) = query {
            let pairs: Vec<String> = (query.split('&'))
                .map(|pair| self.form_pair(pair, &mut changed))
                .collect();
            out.push('?');
            out.push_str(&pairs.join("&"));
        }
        changed.then_some(out)
    }

    /// One `key=value` of a query or a form with its tokens restored (re-encoded only where
    /// something changed).
    fn form_pair(&mut self, pair: &str, changed: &mut bool) -> String {
        let (key, value) = match pair.split_once('=') {
            Some((key, value)) => (key, Some(value)),
            None => (pair, None),
        };
        let mut part = |raw: &str| match self.decoded(raw, true) {
            Some(restored) => {
                *changed = true;
                form_urlencoded::byte_serialize(restored.as_bytes()).collect::<String>()
            }
            None => raw.to_owned(),
        };
        match value {
            Some(value) => format!("{}={}", part(key), part(value)),
            None => part(key),
        }
    }

    /// Header values with their tokens restored.
    pub(super) fn headers(&mut self, headers: &mut HeaderMap) {
        for value in headers.values_mut() {
            let Ok(text) = value.to_str() else { continue };
            if let Some(restored) = self.text(text)
                && let Ok(restored) = HeaderValue::from_bytes(restored.as_bytes())
            {
                *value = restored;
            }
        }
    }

    /// A text body with its tokens restored: in a JSON body inside its strings (a value is
    /// escaped as JSON escapes it), in a form pair by pair, in any other text where they
    /// stand. `None` when the body is not UTF-8 or nothing changed.
    pub(super) fn body(&mut self, content_type: Option<&str>, body: &[u8]) -> Option<Bytes> {
        let text = std::str::from_utf8(body).ok()?;
        let restored = match BodyKind::of(content_type) {
            BodyKind::Json => self.json_strings(text),
            BodyKind::Form => {
                let mut changed = false;
                let pairs: Vec<String> = (text.split('&'))
                    .map(|pair| self.form_pair(pair, &mut changed))
                    .collect();
                changed.then(|| pairs.join("&"))
            }
            BodyKind::Text => self.text(text),
        };
        restored.map(Bytes::from)
    }

    /// JSON text with the tokens in its string literals restored, each changed literal
    /// written anew by serde; numbers, spacing and everything else kept as they were.
    fn json_strings(&mut self, text: &str) -> Option<String> {
        let mut out = String::with_capacity(text.len());
        let (mut from, mut changed) = (0, false);
        for (start, end) in json_string_literals(text) {
            let literal = &text[start..end];
            if !literal.contains('[') {
                continue;
            }
            let Ok(decoded) = serde_json::from_str::<String>(literal) else {
                continue;
            };
            if let Some(restored) = self.text(&decoded) {
                out.push_str(&text[from..start]);
                out.push_str(&Value::String(restored).to_string());
                from = end;
                changed = true;
            }
        }
        out.push_str(&text[from..]);
        changed.then_some(out)
    }

    /// What became of the request's tokens, and why it must not be sent when the entry's rule
    /// says `otherwise: refuse` and a token was not restored.
    pub(super) fn finish(self, entry: &EgressEntry) -> (AuditTokens, Option<Refused>) {
        let tokens = self.tally.counts();
        let kept: u64 = (tokens.withheld.iter().chain(&tokens.unknown))
            .map(|c| c.count)
            .sum();
        if self.rule.otherwise != Otherwise::Refuse || kept == 0 {
            return (tokens, None);
        }
        let what: Vec<String> = (tokens.withheld.iter())
            .map(|c| format!("{} from {}", c.kind, c.origin))
            .chain(
                (tokens.unknown.iter())
                    .map(|c| format!("{} that this server never issued", c.kind)),
            )
            .collect();
        let refused = Refused {
            rule: "pii",
            key: Some(entry.key.clone()),
            message: format!(
                "egress: the request was not sent: it holds {kept} personal-data token{} that entry {:?} may not receive ({}), by {}. Send it only data the rule allows, or an administrator changes the entry's \"pii\" rule in the upstreams file",
                if kept == 1 { "" } else { "s" },
                entry.key,
                what.join("; "),
                self.rule.describe()
            ),
        };
        (tokens, Some(refused))
    }
}

/// The byte ranges of the string literals (quotes included) of JSON text, found by their
/// quotes and escapes alone: enough for text serde reads as JSON, and harmless on any other
/// (a range that is no literal fails to decode and is left).
fn json_string_literals(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(open) = memchr::memchr(b'"', &bytes[i..]).map(|at| i + at) {
        let mut j = open + 1;
        while j < bytes.len() && bytes[j] != b'"' {
            j += if bytes[j] == b'\\' { 2 } else { 1 };
        }
        if j >= bytes.len() {
            break;
        }
        found.push((open, j + 1));
        i = j + 1;
    }
    found
}

/// How a body is read for personal data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    Json,
    Form,
    Text,
}

impl BodyKind {
    fn of(content_type: Option<&str>) -> Self {
        let essence = (content_type.unwrap_or("").split(';').next().unwrap_or(""))
            .trim()
            .to_ascii_lowercase();
        if essence == "application/json" || essence.ends_with("+json") {
            BodyKind::Json
        } else if essence == "application/x-www-form-urlencoded" {
            BodyKind::Form
        } else {
            BodyKind::Text
        }
    }
}

/// Whether a request body of `content_type` may be text with tokens in it: anything but
/// media, archives, octet streams and multipart uploads (whose parts are sent as they are).
pub(super) fn may_be_text(content_type: Option<&str>) -> bool {
    let essence = (content_type.unwrap_or("").split(';').next().unwrap_or(""))
        .trim()
        .to_ascii_lowercase();
    let binary = ["image/", "audio/", "video/", "font/", "multipart/"];
    let octets = [
        "application/octet-stream",
        "application/zip",
        "application/gzip",
        "application/pdf",
    ];
    !(binary.iter().any(|b| essence.starts_with(b)) || octets.contains(&essence.as_str()))
}

/// A response body as it enters the sandbox under an entry whose values are tokenized, or why
/// it cannot enter (it is not text).
pub(super) fn tokenize_response(
    engine: &PiiEngine,
    origin: &Origin,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Bytes, String> {
    if body.is_empty() {
        return Ok(Bytes::new());
    }
    if let Some(charset) = charset_of(content_type)
        && !["utf-8", "utf8", "us-ascii", "ascii"].contains(&charset.as_str())
    {
        return Err(format!(
            "its charset ({charset}) is not UTF-8, and only UTF-8 text is checked for personal data"
        ));
    }
    if memchr::memchr(0, body).is_some() {
        return Err(
            "it holds NUL bytes (UTF-16 text, or binary), which the detectors cannot read".into(),
        );
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Err(format!(
            "its body ({}) is not UTF-8 text, and binary bodies cannot be checked for personal data",
            content_type.unwrap_or("no content type")
        ));
    };
    let tokenized = match BodyKind::of(content_type) {
        BodyKind::Json => match serde_json::from_str::<Value>(text) {
            // Parsed, every number as it was written: the value goes through the JSON policy
            // (strings, keys, integers that are personal data as a whole).
            Ok(v) if !holds_rounded_number(&v) => engine.sanitize_json(&v, origin).to_string(),
            // Valid, but serde would round a number: the strings alone, digits untouched.
            Ok(_) => json_strings_tokenized(engine, origin, text),
            // Not JSON (or nested past serde's limit): the strings decoded (`\u0040`), then
            // the whole as text.
            Err(_) => {
                let strings = json_strings_tokenized(engine, origin, text);
                engine.sanitize_from(&strings, origin).text
            }
        },
        BodyKind::Form => engine.together(origin, |batch| {
            let pairs: Vec<(String, String)> = form_urlencoded::parse(text.as_bytes())
                .map(|(k, v)| (batch.text(&k), batch.text(&v)))
                .collect();
            form_urlencoded::Serializer::new(String::new())
                .extend_pairs(pairs)
                .finish()
        }),
        BodyKind::Text => engine.sanitize_from(text, origin).text,
    };
    Ok(Bytes::from(tokenized))
}

/// JSON text with the values in its string literals tokenized, each literal decoded first (a
/// value may be written with escapes) and written anew only where it changed.
fn json_strings_tokenized(engine: &PiiEngine, origin: &Origin, text: &str) -> String {
    engine.together(origin, |batch| {
        let mut out = String::with_capacity(text.len());
        let mut from = 0;
        for (start, end) in json_string_literals(text) {
            let Ok(decoded) = serde_json::from_str::<String>(&text[start..end]) else {
                continue;
            };
            let tokenized = batch.text(&decoded);
            if tokenized != decoded {
                out.push_str(&text[from..start]);
                out.push_str(&Value::String(tokenized).to_string());
                from = end;
            }
        }
        out.push_str(&text[from..]);
        out
    })
}

/// The charset a content type names, lowercase.
fn charset_of(content_type: Option<&str>) -> Option<String> {
    (content_type?.split(';').skip(1))
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("charset"))
        .map(|(_, v)| v.trim().trim_matches('"').to_ascii_lowercase())
}

/// Whether `v` holds an integer too large for 64 bits, which serde read as a float and would
/// write back rounded: such a body is tokenized as text instead, its digits untouched.
fn holds_rounded_number(v: &Value) -> bool {
    match v {
        Value::Number(n) => n
            .as_f64()
            .is_some_and(|f| n.is_f64() && f.fract() == 0.0 && f.abs() >= 9.007_199_254_740_992e15),
        Value::Array(items) => items.iter().any(holds_rounded_number),
        Value::Object(map) => map.values().any(holds_rounded_number),
        _ => false,
    }
}

#[cfg(test)]
#[path = "personal_tests.rs"]
mod tests;
