//! The channel between the server and the harness in the container: JSON frames, one per
//! line, over the container's stdin (server → harness) and stdout (harness → server).
//!
//! Every frame, its fields, order and bounds: docs/frame-protocol.md, checked by a test here.
//!
//! Everything that arrives from the container is untrusted. A line that is not a frame we
//! know is carried as output, never an error; a line longer than [`MAX_FRAME_BYTES`] is cut
//! off and reported, so a container cannot make the server buffer without bound.

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest line (frame) the server accepts from the container.
pub const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// Limits the harness applies on its side (the server enforces its own as well).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HarnessLimits {
    pub max_output_bytes: usize,
    pub max_result_bytes: usize,
    /// Images returned per execution (`show_image`, matplotlib figures); more are dropped.
    pub max_images: usize,
}

/// What the harness needs to know of a session.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SessionLimits {
    /// The largest snapshot the server keeps (`--session-max-mb`).
    pub max_bytes: u64,
}

/// The tools whose calls sandbox code plans instead of making (policy `plan`), and the plan's
/// bounds, which the harness checks as each call is planned (the server checks them again).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlanSpec {
    /// `[server, tool]` pairs.
    pub tools: Vec<[String; 2]>,
    pub max_calls: usize,
    pub max_bytes: usize,
}

/// Most `plan` tools a job frame names: past them, a call to one is refused by the server with
/// a message that says so (only the harness's fast path is bounded, never the policy).
pub const MAX_PLAN_TOOLS: usize = 4096;

/// Frames the server sends to the harness.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ToHarness<'a> {
    Job {
        code: &'a str,
        context_vars: &'a Value,
        limits: HarnessLimits,
        /// Bytes past each limit the harness sends as well (stdout, stderr, the result, error
        /// and traceback): [`crate::sandbox::run::output::EDGE_BYTES`], for a rewrite that must see
        /// a value the cut splits whole. They are never shown.
        edge_bytes: usize,
        /// The tools package version to import `servers` from (absent: no upstreams).
        #[serde(skip_serializing_if = "Option::is_none")]
        servers: Option<&'a str>,
        /// The installed package set to put on `sys.path` (absent: none).
        #[serde(skip_serializing_if = "Option::is_none")]
        packages: Option<&'a str>,
        /// Present for a session's job: the harness snapshots the globals after `done`.
        #[serde(skip_serializing_if = "Option::is_none")]
        session: Option<SessionLimits>,
        /// Present when some tools' policy is `plan`.
        #[serde(skip_serializing_if = "Option::is_none")]
        plan: Option<&'a PlanSpec>,
        /// Present when the execution may reach hosts through the proxy socket.
        #[serde(skip_serializing_if = "Option::is_none")]
        egress: Option<EgressJob>,
    },
    /// A session's snapshot to load before the job: its blobs are files in `dir` (the
    /// container's state directory), or, with `dir` null, their bytes follow as `state` frames.
    Restore {
        modules: &'a std::collections::BTreeMap<String, String>,
        vars: &'a [StateVar],
        dir: Option<&'a str>,
    },
    /// A piece of the blobs of a `restore` frame without a directory (base64).
    State { data: String },
    /// The end of those blobs: how many bytes they had.
    #[serde(rename = "state_end")]
    StateEnd { bytes: u64 },
    Reply {
        id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl ToHarness<'_> {
    /// The frame as one `\n`-terminated line.
    pub fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).expect("frames always serialize");
        line.push(b'\n');
        line
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamName {
    Stdout,
    Stderr,
}

/// Frames the harness sends to the server.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum FromHarness {
    Output {
        stream: StreamName,
        #[serde(default)]
        data: String,
        #[serde(default)]
        truncated: bool,
        #[serde(default)]
        dropped_bytes: u64,
    },
    Call {
        id: u64,
        method: String,
        #[serde(default)]
        params: Value,
    },
    /// An image for the caller: base64 of its encoded bytes, or `dropped` past the limit.
    Image {
        #[serde(default)]
        source: String,
        #[serde(default)]
        data: Option<String>,
        #[serde(default)]
        dropped: bool,
    },
    /// A workspace file to return as a resource link.
    Link {
        path: String,
        #[serde(default)]
        description: Option<String>,
    },
    Done(DoneFrame),
    /// A call to a `plan` tool, recorded for the plan the user approves after the code.
    Plan {
        server: String,
        tool: String,
        #[serde(default)]
        arguments: Value,
    },
    /// Whether the plan stops at its first failed call when it applies (the default).
    #[serde(rename = "plan_options")]
    PlanOptions {
        stop_on_error: bool,
    },
    /// The harness found the plan past its bounds: nothing of it may be sent.
    #[serde(rename = "plan_refused")]
    PlanRefused {
        reason: String,
    },
    /// The interpreter and its preload are ready for a job (sent before the first frame in).
    Ready,
    /// A session's state has been loaded.
    Loaded,
    /// A blob of a session's new snapshot, after `done`: `bytes` raw bytes follow the line.
    Blob {
        bytes: u64,
    },
    /// The end of the new snapshot: the blob bytes sent (negative: no snapshot follows), and
    /// the manifest naming its modules and variables.
    #[serde(rename = "state_end")]
    StateEnd {
        bytes: i64,
        #[serde(default)]
        manifest: Option<Value>,
    },
}

/// One variable of a snapshot to restore: its name, its blob (sha256, 64 hex digits) and the
/// sizes of the pieces (its pickle, then its out-of-band buffers) the blob holds end to end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateVar {
    pub name: String,
    pub blob: String,
    pub sizes: Vec<u64>,
}

/// What the harness reports of a session's state after the code ran.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
pub struct StateReport {
    /// The names carried to the session's next call.
    #[serde(default)]
    pub carried: Vec<String>,
    /// The names that could not be carried (or restored), each with the reason.
    #[serde(default)]
    pub not_carried: Vec<NotCarried>,
    /// The snapshot's size in bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Whether the new snapshot replaces the previous one.
    #[serde(default)]
    pub saved: bool,
    /// Why it does not, when it does not.
    #[serde(default)]
    pub reason: Option<String>,
    /// The revision the saved state is (`session="HANDLE@N"` returns to it). Set by the
    /// server, never by the harness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u64>,
    /// The session and revision a fork was made from (`HANDLE@N`). Set by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked_from: Option<String>,
}

/// What the harness is told of an execution's egress: the proxy socket is in
/// `/mnt/egress`, and whether plain `http://` goes through it as well.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EgressJob {
    pub http: bool,
}

/// A name a session could not carry, and why.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
pub struct NotCarried {
    pub name: String,
    pub reason: String,
}

/// The harness's report when the code has finished.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct DoneFrame {
    pub success: bool,
    #[serde(default)]
    pub result: Value,
    #[serde(default)]
    pub result_truncated: bool,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub error_type: Option<String>,
    #[serde(default)]
    pub traceback: Option<String>,
    /// Top-level modules the code imported (for the pool's preload).
    #[serde(default)]
    pub imports: Vec<String>,
    /// A session's state after the code ran.
    #[serde(default)]
    pub state: Option<StateReport>,
}

/// Parses one line; `None` means "not a frame": the caller treats the line as output.
pub fn parse_frame(line: &[u8]) -> Option<FromHarness> {
    serde_json::from_slice(line).ok()
}

/// What [`LineSplitter::push`] yields.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A complete line without its `\n`.
    Complete(Vec<u8>),
    /// A line grew past the limit: its first `limit` bytes; the rest up to the next `\n` is
    /// dropped.
    Oversized(Vec<u8>),
}

/// Splits a byte stream into lines, holding at most `limit` bytes of an unfinished line.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    limit: usize,
    discarding: bool,
}

impl LineSplitter {
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            limit,
            discarding: false,
        }
    }

    /// Feeds a chunk and returns the lines it completed.
    pub fn push(&mut self, mut chunk: &[u8]) -> Vec<Line> {
        let mut lines = Vec::new();
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, ends_line) = match newline {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &[][..], false),
            };
            if !self.discarding {
                let room = self.limit - self.buf.len();
                if part.len() > room {
                    self.buf.extend_from_slice(&part[..room]);
                    lines.push(Line::Oversized(std::mem::take(&mut self.buf)));
                    self.discarding = true;
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            if ends_line {
                if self.discarding {
                    self.discarding = false;
                } else {
                    lines.push(Line::Complete(std::mem::take(&mut self.buf)));
                }
            }
            chunk = rest;
        }
        lines
    }

    /// Like [`LineSplitter::push`], but stops after a line `last` accepts: the bytes of the
    /// chunk after it come back as they are (a session's snapshot, which holds raw bytes,
    /// follows `done`).
    pub fn push_until(
        &mut self,
        chunk: &[u8],
        last: impl Fn(&[u8]) -> bool,
    ) -> (Vec<Line>, Option<Vec<u8>>) {
        let mut lines = Vec::new();
        let mut at = 0;
        while let Some(i) = chunk[at..].iter().position(|&b| b == b'\n') {
            let end = at + i + 1;
            let found = self.push(&chunk[at..end]);
            at = end;
            let stop = matches!(found.last(), Some(Line::Complete(line)) if last(line));
            lines.extend(found);
            if stop {
                return (lines, Some(chunk[at..].to_vec()));
            }
        }
        lines.extend(self.push(&chunk[at..]));
        (lines, None)
    }

    /// The unfinished last line at end of stream, if any.
    pub fn finish(&mut self) -> Option<Vec<u8>> {
        let rest = std::mem::take(&mut self.buf);
        (!rest.is_empty() && !self.discarding).then_some(rest)
    }
}

/// Serves the `call` frames sandbox code sends (`save_skill`, `tokenize_pii`, …). Each method
/// must validate its parameters exactly as the matching MCP tool does: the channel gives the
/// code nothing it could not get through a tool.
pub trait CallHandler: Send + Sync {
    fn call<'a>(&'a self, method: &'a str, params: Value) -> BoxFuture<'a, Result<Value, String>>;

    /// The tools the job plans calls to, for its job frame (`None`: none).
    fn plan_spec(&self) -> Option<&PlanSpec> {
        None
    }

    /// A `plan`, `plan_options` or `plan_refused` frame (one-way: no reply). Without
    /// upstreams there is no plan, and it is dropped.
    fn plan_frame(&self, _frame: FromHarness) {}
}

/// The calls every server answers: `ping`, which echoes its parameters (a liveness check of
/// the channel itself).
#[derive(Debug, Default, Clone, Copy)]
pub struct BuiltinCalls;

impl CallHandler for BuiltinCalls {
    fn call<'a>(&'a self, method: &'a str, params: Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            match method {
                "ping" => Ok(serde_json::json!({"pong": true, "echo": params})),
                other => Err(format!(
                    "`{}` is not available from sandbox code on this server version",
                    other.escape_debug()
                )),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splitter_reassembles_lines_across_chunks() {
        let mut s = LineSplitter::new(100);
        assert!(s.push(b"ab").is_empty());
        assert_eq!(
            s.push(b"c\nde\n\nf"),
            vec![
                Line::Complete(b"abc".to_vec()),
                Line::Complete(b"de".to_vec()),
                Line::Complete(Vec::new()),
            ]
        );
        assert_eq!(s.finish(), Some(b"f".to_vec()));
    }

    #[test]
    fn splitter_bounds_a_line_and_resumes_after_it() {
        let mut s = LineSplitter::new(4);
        let mut lines = s.push(b"0123456789");
        lines.extend(s.push(&[b'x'; 10_000]));
        lines.extend(s.push(b"tail\nok\n"));
        assert_eq!(
            lines,
            vec![
                Line::Oversized(b"0123".to_vec()),
                Line::Complete(b"ok".to_vec()),
            ]
        );
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn frames_parse_and_junk_is_not_a_frame() {
        assert_eq!(
            parse_frame(br#"{"type":"output","stream":"stderr","data":"x"}"#),
            Some(FromHarness::Output {
                stream: StreamName::Stderr,
                data: "x".into(),
                truncated: false,
                dropped_bytes: 0
            })
        );
        assert_eq!(
            parse_frame(br#"{"type":"call","id":3,"method":"ping"}"#),
            Some(FromHarness::Call {
                id: 3,
                method: "ping".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            parse_frame(br#"{"type":"image","source":"figure 1","data":"iVBO"}"#),
            Some(FromHarness::Image {
                source: "figure 1".into(),
                data: Some("iVBO".into()),
                dropped: false
            })
        );
        assert_eq!(
            parse_frame(br#"{"type":"link","path":"out/a.csv"}"#),
            Some(FromHarness::Link {
                path: "out/a.csv".into(),
                description: None
            })
        );
        let done = parse_frame(br#"{"type":"done","success":true,"result":[1]}"#).unwrap();
        assert!(matches!(
            done,
            FromHarness::Done(DoneFrame { success: true, .. })
        ));
        for junk in [
            &b"hello"[..],
            b"{\"type\":\"job\"}",
            b"{\"type\":\"call\",\"id\":-1,\"method\":\"x\"}",
            b"\xff\xfe",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}",
        ] {
            assert_eq!(parse_frame(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn job_and_reply_frames_are_single_lines() {
        let ctx = json!({"a": "line\nbreak"});
        let job = ToHarness::Job {
            code: "print('x')\nresult = 1",
            context_vars: &ctx,
            limits: HarnessLimits {
                max_output_bytes: 10,
                max_result_bytes: 20,
                max_images: 0,
            },
            edge_bytes: 4096,
            servers: None,
            packages: None,
            session: None,
            plan: None,
            egress: None,
        }
        .to_line();
        assert_eq!(job.iter().filter(|&&b| b == b'\n').count(), 1);
        let v: Value = serde_json::from_slice(&job).unwrap();
        assert_eq!(v["type"], "job");
        assert_eq!(v["limits"]["max_result_bytes"], 20);

        let reply = ToHarness::Reply {
            id: 7,
            result: None,
            error: Some("no".into()),
        }
        .to_line();
        let v: Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!(v, json!({"type": "reply", "id": 7, "error": "no"}));
    }

    #[test]
    fn floats_cross_the_channel_exactly() {
        // Without serde_json's `float_roundtrip`, this one came back one ulp off.
        let x = 1.1111111111111111e143_f64;
        let reply = ToHarness::Reply {
            id: 1,
            result: Some(json!(x)),
            error: None,
        }
        .to_line();
        let v: Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!(v["result"].as_f64().unwrap().to_bits(), x.to_bits());
    }

    #[tokio::test]
    async fn builtin_calls_answer_ping_and_refuse_the_rest() {
        let calls = BuiltinCalls;
        assert_eq!(
            calls.call("ping", json!({"x": 1})).await.unwrap(),
            json!({"pong": true, "echo": {"x": 1}})
        );
        let err = calls.call("rm -rf", Value::Null).await.unwrap_err();
        assert!(err.contains("not available"));
    }
}

#[cfg(test)]
#[path = "channel_protocol_tests.rs"]
mod protocol_doc;
