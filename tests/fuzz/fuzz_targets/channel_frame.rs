//! The container → server channel: `LineSplitter` over arbitrary bytes cut into arbitrary
//! chunks must give exactly the lines of a reference splitter, bounded by its limit, and
//! `parse_frame` must take any line without panicking and accept only frames of a known type.
//! The server → harness direction: a `reply` frame built from arbitrary text is one line that
//! reads back the same.
//!
//! Input: byte 0 is the splitter's limit, byte 1 (mod 16) the number of chunk sizes that
//! follow (used in turn; 0 pushes an empty chunk), the rest is the stream.
#![no_main]

use code_execution_mcp::sandbox::run::channel::{
    FromHarness, Line, LineSplitter, ToHarness, parse_frame,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

struct Input<'a> {
    /// The splitter's limit: small, so that oversized lines are common.
    limit: u8,
    /// Chunk sizes, used in turn (0 pushes an empty chunk).
    cuts: &'a [u8],
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn parse(bytes: &'a [u8]) -> Option<Self> {
        let (&limit, rest) = bytes.split_first()?;
        let (&n, rest) = rest.split_first()?;
        let n = usize::from(n % 16).min(rest.len());
        let (cuts, data) = rest.split_at(n);
        Some(Input { limit, cuts, data })
    }
}

/// What the splitter must produce: lines split at `\n`; a line longer than `limit` becomes
/// `Oversized` with its first `limit` bytes; the unterminated tail is returned by `finish`
/// unless it is empty or oversized (then it was already reported).
fn reference(data: &[u8], limit: usize) -> (Vec<Line>, Option<Vec<u8>>) {
    let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let tail = parts.pop().expect("split yields at least one part");
    let mut lines: Vec<Line> = parts
        .into_iter()
        .map(|p| {
            if p.len() > limit {
                Line::Oversized(p[..limit].to_vec())
            } else {
                Line::Complete(p.to_vec())
            }
        })
        .collect();
    let rest = if tail.len() > limit {
        lines.push(Line::Oversized(tail[..limit].to_vec()));
        None
    } else {
        (!tail.is_empty()).then(|| tail.to_vec())
    };
    (lines, rest)
}

fuzz_target!(|bytes: &[u8]| {
    let Some(input) = Input::parse(bytes) else {
        return;
    };
    let limit = usize::from(input.limit);
    let data = input.data;

    // One push.
    let mut whole = LineSplitter::new(limit);
    let lines = whole.push(data);
    let rest = whole.finish();
    let (want_lines, want_rest) = reference(data, limit);
    assert_eq!(lines, want_lines);
    assert_eq!(rest, want_rest);

    // The same bytes in chunks.
    let mut chunked = LineSplitter::new(limit);
    let mut got = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < data.len() {
        let n = input
            .cuts
            .get(i % input.cuts.len().max(1))
            .map_or(data.len(), |&c| usize::from(c));
        let end = (at + n).min(data.len());
        got.extend(chunked.push(&data[at..end]));
        at = end;
        i += 1;
        if i > 100_000 {
            break; // all-zero cuts: empty pushes only; the rest in one go below
        }
    }
    got.extend(chunked.push(&data[at..]));
    assert_eq!(got, lines, "chunking changed the lines");
    assert_eq!(chunked.finish(), rest);

    for line in &lines {
        let (Line::Complete(l) | Line::Oversized(l)) = line;
        assert!(l.len() <= limit);
        assert!(!l.contains(&b'\n'));
        check_frame(l);
    }
    check_frame(data);

    // Server → harness: whatever the text, one line ending in `\n`, and it reads back.
    let text = String::from_utf8_lossy(data).into_owned();
    let result = serde_json::from_slice::<Value>(data).ok();
    let line = ToHarness::Reply {
        id: u64::from(input.limit),
        result: result.clone(),
        error: Some(text.clone()),
    }
    .to_line();
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    assert_eq!(line.last(), Some(&b'\n'));
    let mut s = LineSplitter::new(line.len());
    assert_eq!(
        s.push(&line),
        vec![Line::Complete(line[..line.len() - 1].to_vec())]
    );
    let v: Value = serde_json::from_slice(&line).expect("a reply frame is JSON");
    assert_eq!(v["type"], "reply");
    assert_eq!(v["error"].as_str(), Some(text.as_str()));
    if let Some(r) = result {
        // Exact, floats included: the crate builds serde_json with `float_roundtrip`.
        assert_eq!(v["result"], r);
    }
});

/// `parse_frame` never panics, and accepts only JSON objects with a string `type` (which one
/// is not checked here: with a repeated key serde takes the first `type` as the tag, `Value`
/// keeps the last) and, for a call, the `id` and `method` it reports.
fn check_frame(line: &[u8]) {
    let Some(frame) = parse_frame(line) else {
        return;
    };
    let v: Value = serde_json::from_slice(line).expect("a frame is JSON");
    assert!(v.get("type").is_some_and(Value::is_string), "{v}");
    if let FromHarness::Call { id, method, .. } = frame {
        assert_eq!(v["id"].as_u64(), Some(id));
        assert_eq!(v["method"].as_str(), Some(method.as_str()));
    }
}
