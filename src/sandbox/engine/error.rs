//! What can go wrong talking to the engine, in words that fit any engine behind the seam, as
//! messages that tell the user what to do (which usually means running `code-execution-mcp
//! doctor`). Transport failures are told apart from the engine's own answers, and an engine
//! lost mid-execution from one that was never reached. How a backend's own errors map onto
//! these is the backend's business (`docker/error.rs`).

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The engine does not answer: why, and what to do about it where the backend knows (which
    /// engine to start, which socket to point at).
    #[error(
        "cannot reach the container engine ({0}); check with `code-execution-mcp doctor`. A running server needs no restart: retry once the engine answers"
    )]
    Unreachable(String),
    #[error(
        "the container engine went away or stopped answering during the execution ({0}): the execution's outcome is unknown, and files it was writing in /workspace may be incomplete. Retry once the engine answers again (check it with `code-execution-mcp doctor`): the server reconnects by itself"
    )]
    Lost(String),
    #[error(
        "the sandbox image {0} is not on the engine: build it with `code-execution-mcp image build` (see `code-execution-mcp doctor`)"
    )]
    ImageMissing(String),
    #[error(
        "the container engine failed to {action}: {message}; check it with `code-execution-mcp doctor`"
    )]
    Api {
        action: &'static str,
        message: String,
    },
    #[error(
        "the container engine did not start a sandbox container within {0} seconds: it is overloaded or stuck. Retry in a moment, and check it with `code-execution-mcp doctor`"
    )]
    Slow(u64),
    #[error("the engine does not support {0}")]
    Unsupported(&'static str),
}

impl EngineError {
    /// An engine that stopped answering once the execution had begun: [`EngineError::Lost`].
    pub fn lost_if_unreachable(self) -> Self {
        match self {
            EngineError::Unreachable(why) => EngineError::Lost(why),
            other => other,
        }
    }
}
