//! The stdio transport ([`serve_stdio`]): newline-delimited JSON-RPC on stdin/stdout, with an answer for every
//! line a client sends. rmcp's own stdio transport drops a line it cannot parse without a word,
//! so a client that sent a truncated or oversized request would wait forever; here each line is
//! read with a hard size bound (the rest of an oversized line is skipped) and classified by
//! [`crate::transport::jsonrpc_input`], which answers what is malformed.
//!
//! Every JSON-RPC error rmcp sends through this transport passes through the PII engine on its
//! way out ([`crate::privacy::Privacy::screen_error`]): rmcp answers some requests in its own
//! words before a handler sees them, and serde's words quote the value they could not read.
//! What the privacy layer made already passes unchanged. The transport's own answers to
//! malformed lines carry a [`crate::privacy::Shown`] from the start. The engine is the started
//! server's, or the start's own before ([`Front::privacy`]).
//!
//! rmcp polls [`Transport::receive`] inside a `select!` and drops it whenever something else is
//! ready, so receiving is cancel-safe: a partly read line and an error answer not yet queued
//! live in the transport, not in the future. One writer task owns stdout, so messages never
//! interleave and a dropped future never leaves half a message behind.

use std::future::Future;
use std::sync::Arc;

use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, ServerInitializeError, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use crate::app::{StartState, Starting};
use crate::mcp::Front;
use crate::privacy::Privacy;
use crate::transport::ServeError;
use crate::transport::jsonrpc_input::{MAX_MESSAGE_BYTES, Parsed, classify, too_large};

/// Serves MCP on stdin/stdout until the client closes stdin or `shutdown` resolves, from the
/// moment the server begins to start: the handshake is answered at once, and requests that
/// need the started server wait for it ([`Front`]). A start that fails is the session's
/// error once the client leaves (a client that closes stdin at once still learns why, from
/// the exit status and stderr); one still running then is waited for, so that its image build
/// or tree copy is not lost halfway. A signal asks a running start to stop
/// ([`Starting::cancel`]) instead.
pub async fn serve_stdio(
    starting: Starting,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let metrics = tokio::spawn(metrics_once_started(starting.clone()));
    let links = tokio::spawn(links_once_started(starting.clone()));
    let mut session = Box::pin(async {
        let front = Front::new(starting.clone());
        let door = front.clone();
        let running = match front.serve(stdio(Arc::new(move || door.privacy()))).await {
            Ok(running) => running,
            // The client left before it chose a lifecycle (a 2026-07-28 client that only
            // probed `server/discover`, or one that gave up): nothing failed.
            Err(ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
            Err(e) => return Err(ServeError::Stdio(e.to_string())),
        };
        running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| ServeError::Stdio(e.to_string()))
    });
    let (result, signalled) = tokio::select! {
        r = &mut session => (r, false),
        _ = shutdown => (Ok(()), true),
    };
    // Dropping the session's future ends the service on a signal as it ends on stdin's end.
    drop(session);
    metrics.abort();
    links.abort();
    let app = match starting.now() {
        StartState::Ready(app) => app,
        // A signal stops the start where that leaves no container behind.
        StartState::Working(_) if signalled => match starting.cancel().await {
            StartState::Ready(app) => app,
            _ => return result,
        },
        _ => starting.finished().await.map_err(ServeError::Started)?,
    };
    // The pool's containers go either way, not at the next start's reap.
    app.shutdown_all().await;
    result
}

/// The metrics endpoint of `--metrics-listen`, once the server has started, for as long as
/// this task runs.
async fn metrics_once_started(starting: Starting) {
    let Ok(app) = starting.finished().await else {
        return;
    };
    let one = app.clone();
    match super::metrics_endpoint(app.shared(), Arc::new(move || vec![one.clone()])).await {
        Ok(metrics) => {
            std::future::pending::<()>().await;
            drop(metrics);
        }
        Err(e) => tracing::error!("{e}: the server goes on without its metrics endpoint"),
    }
}

/// The link routes on `--links-listen`, once the server has started, for as long as this task
/// runs.
async fn links_once_started(starting: Starting) {
    let Ok(app) = starting.finished().await else {
        return;
    };
    let Some(addr) = app.config().links.links_listen else {
        return;
    };
    let (shared, one) = (app.shared().clone(), app.clone());
    let host = crate::transport::links::LinkHost {
        shared: Box::new(move || StartState::Ready(shared.clone())),
        app: Box::new(move |tenant| {
            let app = match tenant {
                None => crate::transport::links::LinkApp::Ready(one.clone()),
                Some(_) => crate::transport::links::LinkApp::Unknown,
            };
            Box::pin(async move { app })
        }),
        authenticator: None,
    };
    let served =
        crate::transport::links::serve_links(addr, Arc::new(host), std::future::pending()).await;
    if let Err(e) = served {
        tracing::error!("{e}: the server goes on without its upload and download links");
    }
}

/// Messages waiting for the writer task; senders wait when it is full.
const OUTPUT_QUEUE: usize = 64;

/// One line read from the client, or why there is none.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A complete line, without its `\n` (or `\r\n`).
    Text(Vec<u8>),
    /// A line longer than the bound; its bytes were skipped up to the next newline.
    TooLong,
    /// End of input.
    End,
}

/// Reads newline-delimited lines, never holding more than `limit` bytes of one. The line being
/// read is kept here, so a dropped [`LineReader::next`] loses nothing.
struct LineReader<R> {
    input: BufReader<R>,
    limit: usize,
    line: Vec<u8>,
    too_long: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(input: R, limit: usize) -> Self {
        Self {
            input: BufReader::new(input),
            limit,
            line: Vec::new(),
            too_long: false,
        }
    }

    /// The next line. Cancel-safe: the only await is `fill_buf`, and what it buffered is
    /// consumed only together with the update of the partial line.
    async fn next(&mut self) -> std::io::Result<Line> {
        loop {
            let buf = self.input.fill_buf().await?;
            if buf.is_empty() {
                // A last line without a newline still counts.
                let line = std::mem::take(&mut self.line);
                return Ok(
                    match (std::mem::take(&mut self.too_long), line.is_empty()) {
                        (true, _) => Line::TooLong,
                        (false, true) => Line::End,
                        (false, false) => Line::Text(line),
                    },
                );
            }
            let (chunk, end) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if !self.too_long && self.line.len() + chunk.len() > self.limit {
                self.too_long = true;
                self.line = Vec::new();
            }
            if !self.too_long {
                self.line.extend_from_slice(chunk);
            }
            let consumed = end.unwrap_or(buf.len());
            self.input.consume(consumed);
            if end.is_some() {
                if std::mem::take(&mut self.too_long) {
                    return Ok(Line::TooLong);
                }
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Line::Text(line));
            }
        }
    }
}

/// What the writer task is asked to do.
enum Out {
    Message(Vec<u8>),
    /// Answer once everything queued before has been written and flushed.
    Flush(oneshot::Sender<()>),
}

/// Owns the output: writes each message whole, then flushes. Ends when every sender is gone
/// or a write fails.
async fn write_out<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Out>, mut output: W) {
    while let Some(out) = rx.recv().await {
        match out {
            Out::Message(bytes) => {
                let written = async {
                    output.write_all(&bytes).await?;
                    output.flush().await
                };
                if let Err(e) = written.await {
                    tracing::warn!("writing to stdout failed, ending the session: {e}");
                    return;
                }
            }
            Out::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

fn encode(message: &TxJsonRpcMessage<RoleServer>) -> Vec<u8> {
    // Serialising rmcp's own message types cannot fail (string keys, no custom serialisers
    // that error); an empty object keeps the stream well-formed if it ever did.
    let mut bytes = serde_json::to_vec(message).unwrap_or_else(|_| b"{}".to_vec());
    bytes.push(b'\n');
    bytes
}

/// Newline-delimited JSON-RPC over any reader and writer (stdin and stdout in the binary).
pub struct StdioTransport<R> {
    lines: LineReader<R>,
    out: mpsc::Sender<Out>,
    /// An error answer read but not yet queued (receive was dropped while the queue was full).
    pending: Option<Vec<u8>>,
    /// What reads every error this transport sends.
    door: Door,
}

/// The privacy layer to read an error with now (the server's may not exist yet).
pub type Door = Arc<dyn Fn() -> Privacy + Send + Sync>;

impl<R: AsyncRead + Unpin> StdioTransport<R> {
    /// Starts the writer task on the current Tokio runtime.
    pub fn new<W: AsyncWrite + Unpin + Send + 'static>(
        input: R,
        output: W,
        limit: usize,
        door: Door,
    ) -> Self {
        let (out, rx) = mpsc::channel(OUTPUT_QUEUE);
        tokio::spawn(write_out(rx, output));
        Self {
            lines: LineReader::new(input, limit),
            out,
            pending: None,
            door,
        }
    }
}

/// The process's stdin and stdout, with [`MAX_MESSAGE_BYTES`].
pub fn stdio(door: Door) -> StdioTransport<tokio::io::Stdin> {
    StdioTransport::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        MAX_MESSAGE_BYTES,
        door,
    )
}

fn closed() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdout is closed")
}

impl<R> Transport<RoleServer> for StdioTransport<R>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        mut item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Error(answer) = &mut item {
            answer.error = (self.door)().screen_error(std::mem::take(&mut answer.error));
        }
        let out = self.out.clone();
        let bytes = encode(&item);
        async move { out.send(Out::Message(bytes)).await.map_err(|_| closed()) }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.pending.is_some() {
                // `reserve` is cancel-safe, and the answer leaves `pending` only with a permit.
                let Ok(permit) = self.out.reserve().await else {
                    return None;
                };
                permit.send(Out::Message(self.pending.take().unwrap_or_default()));
            }
            let answer = match self.lines.next().await {
                Ok(Line::End) => return None,
                Err(e) => {
                    tracing::warn!("reading stdin failed, ending the session: {e}");
                    return None;
                }
                Ok(Line::TooLong) => too_large(self.lines.limit),
                Ok(Line::Text(line)) => match classify(&line, &(self.door)()) {
                    Parsed::Message(message) => return Some(*message),
                    Parsed::Skip => continue,
                    Parsed::Answer(answer) => *answer,
                },
            };
            self.pending = Some(encode(&JsonRpcMessage::Error(answer)));
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let (done, flushed) = oneshot::channel();
        self.out
            .send(Out::Flush(done))
            .await
            .map_err(|_| closed())?;
        flushed.await.map_err(|_| closed())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncReadExt;

    use super::*;

    async fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut reader = LineReader::new(input, limit);
        let mut out = Vec::new();
        loop {
            let line = reader.next().await.unwrap();
            let end = line == Line::End;
            out.push(line);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn lines_are_split_bounded_and_resume_after_an_oversized_one() {
        let got = lines(b"ab\r\n0123456789\ncd\nlast", 5).await;
        assert_eq!(
            got,
            vec![
                Line::Text(b"ab".to_vec()),
                Line::TooLong,
                Line::Text(b"cd".to_vec()),
                Line::Text(b"last".to_vec()),
                Line::End
            ]
        );
        assert_eq!(
            lines(b"0123456789", 5).await,
            vec![Line::TooLong, Line::End]
        );
        assert_eq!(lines(b"12345\n", 5).await[0], Line::Text(b"12345".to_vec()));
    }

    #[tokio::test]
    async fn a_dropped_read_loses_no_part_of_the_line() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut reader = LineReader::new(server, 1024);
        client.write_all(b"{\"half\":").await.unwrap();
        // The read is abandoned mid-line, as rmcp's select! does when another branch wins.
        let abandoned = tokio::time::timeout(Duration::from_millis(50), reader.next()).await;
        assert!(abandoned.is_err());
        client.write_all(b"1}\n").await.unwrap();
        assert_eq!(
            reader.next().await.unwrap(),
            Line::Text(b"{\"half\":1}".to_vec())
        );
    }

    #[tokio::test]
    async fn bad_lines_are_answered_in_order_with_the_responses() {
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, mut client_out) = tokio::io::duplex(1 << 16);
        let pii = crate::pii::PiiEngine::new([7; 32], 100);
        let privacy = Privacy::new(std::sync::Arc::new(pii), true);
        let door: Door = Arc::new(move || privacy.clone());
        let mut transport = StdioTransport::new(server_in, server_out, 1024, door);
        client
            .write_all(b"nope\n\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let message = transport.receive().await.expect("the ping");
        assert!(matches!(message, JsonRpcMessage::Request(_)));
        let response: TxJsonRpcMessage<RoleServer> =
            serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {}}))
                .unwrap();
        transport.send(response).await.unwrap();
        transport.close().await.unwrap();
        drop(client);
        assert!(transport.receive().await.is_none(), "end of input");
        drop(transport);
        let mut text = String::new();
        client_out.read_to_string(&mut text).await.unwrap();
        let got: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(got.len(), 2, "{text}");
        assert_eq!(got[0]["error"]["code"], -32700);
        assert_eq!(got[1]["id"], 1);
    }
}
