//! Bodies on their way through the proxy, streamed (a 1 GiB download is never in memory) and
//! counted against the execution's bounds as they go; a response of an entry with secret
//! headers also has those secrets replaced, across chunk boundaries.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use aho_corasick::{AhoCorasick, MatchKind};
use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::grant::Grant;
use super::record::HttpRecord;
use crate::gateway::redact::REDACTED;

/// Replaces known secrets in a byte stream. A tail that could be the start of a secret waits
/// for the next chunk, so a secret split across chunks is found whole.
pub(super) struct Scrubber {
    matcher: AhoCorasick,
    /// Bytes kept back: the longest secret's length less one.
    keep: usize,
    carry: Vec<u8>,
}

impl Scrubber {
    /// A scrubber of `secrets`; `None` when there are none.
    pub(super) fn new(secrets: Vec<String>) -> Option<Self> {
        let keep = secrets.iter().map(String::len).max()?.saturating_sub(1);
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&secrets)
            // A few dozen short patterns: far below any automaton size limit.
            .expect("an automaton of an entry's secrets");
        Some(Self {
            matcher,
            keep,
            carry: Vec::new(),
        })
    }

    /// Whether `bytes` hold a secret whole.
    pub(super) fn holds(&self, bytes: &[u8]) -> bool {
        self.matcher.is_match(bytes)
    }

    /// What of `chunk` (after what was kept back) is final now, secrets replaced.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Bytes {
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        let limit = buf.len().saturating_sub(self.keep);
        let mut out = Vec::with_capacity(buf.len());
        let mut pos = 0;
        for m in self.matcher.find_iter(&buf) {
            // A match starting this late may be the start of a longer one: wait.
            if m.start() >= limit {
                break;
            }
            out.extend_from_slice(&buf[pos..m.start()]);
            out.extend_from_slice(REDACTED.as_bytes());
            pos = m.end();
        }
        let end = pos.max(limit);
        out.extend_from_slice(&buf[pos..end]);
        self.carry = buf.split_off(end);
        Bytes::from(out)
    }

    /// The rest, once the stream has ended.
    pub(super) fn finish(&mut self) -> Bytes {
        let buf = std::mem::take(&mut self.carry);
        let mut out = Vec::with_capacity(buf.len());
        self.matcher
            .replace_all_with_bytes(&buf, &mut out, |_, _, out| {
                out.extend_from_slice(REDACTED.as_bytes());
                true
            });
        Bytes::from(out)
    }
}

/// A request's record, written to its grant when the response has been carried to the end (or
/// abandoned): its bytes and duration are known only then.
pub(super) struct Recording {
    grant: Arc<Grant>,
    record: Option<HttpRecord>,
    started: Instant,
    /// Bytes of the request body sent so far (the request's body stream counts them).
    pub(super) bytes_out: Arc<AtomicU64>,
}

impl Recording {
    pub(super) fn new(grant: Arc<Grant>, record: HttpRecord, started: Instant) -> Self {
        Self {
            grant,
            record: Some(record),
            started,
            bytes_out: Arc::default(),
        }
    }

    pub(super) fn grant(&self) -> &Arc<Grant> {
        &self.grant
    }

    pub(super) fn record_mut(&mut self) -> &mut HttpRecord {
        self.record.as_mut().expect("present until dropped")
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(mut record) = self.record.take() {
            record.duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
            record.bytes_out = self.bytes_out.load(Ordering::Relaxed);
            self.grant.record(record);
        }
    }
}

fn too_much(what: String) -> std::io::Error {
    std::io::Error::other(what)
}

/// A host's response body on its way to the sandbox: counted against the response's cap and
/// the execution's bytes in, secrets scrubbed; it ends with an error (the sandbox sees the
/// connection cut) when a bound is passed. The record is written when it ends or is dropped.
pub(super) fn response_body(
    body: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
    scrubber: Option<Scrubber>,
    recording: Recording,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let state = (Box::pin(body), scrubber, recording, false);
    futures::stream::unfold(
        state,
        |(mut body, mut scrubber, mut rec, done)| async move {
            if done {
                return None;
            }
            let item = match body.next().await {
                Some(Ok(chunk)) => {
                    let n = chunk.len() as u64;
                    rec.record_mut().bytes_in += n;
                    let cap = rec.grant.limits().max_response_bytes;
                    if rec.record_mut().bytes_in > cap {
                        rec.record_mut().rule = Some("bounds".into());
                        let e = format!(
                            "egress: the response is over {cap} bytes (--egress-max-response-mb)"
                        );
                        return Some((Err(too_much(e)), (body, scrubber, rec, true)));
                    }
                    if !rec.grant.take_in(n) {
                        rec.record_mut().rule = Some("bounds".into());
                        let e = "egress: this execution has received its bytes (--egress-max-bytes-in-mb)";
                        return Some((Err(too_much(e.into())), (body, scrubber, rec, true)));
                    }
                    Ok(match &mut scrubber {
                        Some(s) => s.push(&chunk),
                        None => chunk,
                    })
                }
                None => match &mut scrubber {
                    Some(s) => return Some((Ok(s.finish()), (body, None, rec, true))),
                    None => return None,
                },
                Some(Err(e)) => {
                    let e = std::io::Error::other(format!(
                        "egress: the host's response broke off: {e}"
                    ));
                    return Some((Err(e), (body, scrubber, rec, true)));
                }
            };
            Some((item, (body, scrubber, rec, false)))
        },
    )
}

/// The sandbox's request body on its way to the host, counted against the execution's bytes
/// out (into `sent`).
pub(super) fn request_body(
    body: hyper::body::Incoming,
    grant: Arc<Grant>,
    sent: Arc<AtomicU64>,
) -> reqwest::Body {
    let stream = http_body_util::BodyDataStream::new(body).map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        let n = chunk.len() as u64;
        sent.fetch_add(n, Ordering::Relaxed);
        if grant.take_out(n) {
            Ok(chunk)
        } else {
            Err(too_much(
                "egress: this execution has sent its bytes (--egress-max-bytes-out-mb)".into(),
            ))
        }
    });
    reqwest::Body::wrap_stream(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrub(secrets: &[&str], chunks: &[&str]) -> String {
        let mut s = Scrubber::new(secrets.iter().map(|s| s.to_string()).collect()).unwrap();
        let mut out = Vec::new();
        for c in chunks {
            out.extend_from_slice(&s.push(c.as_bytes()));
        }
        out.extend_from_slice(&s.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_secret_split_across_chunks_is_replaced_whole() {
        let secret = "sk-live-0123456789";
        let text = format!("before {secret} middle {secret} after");
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(
                scrub(&[secret], &[a, b]),
                "before [redacted] middle [redacted] after",
                "cut at {cut}"
            );
        }
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let one_by_one: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(
            scrub(&[secret], &one_by_one),
            "before [redacted] middle [redacted] after"
        );
    }

    #[test]
    fn the_longest_secret_wins_and_other_text_passes_unchanged() {
        assert_eq!(
            scrub(&["abcd", "abcdefgh"], &["xx abcdef", "gh yy abcd"]),
            "xx [redacted] yy [redacted]"
        );
        assert_eq!(
            scrub(&["secret"], &["no", "thing", " here"]),
            "nothing here"
        );
    }
}
