//! What can go wrong talking to the engine, as messages that tell the user what to do (which
//! usually means running `code-execution-mcp doctor`). Transport failures are told apart from
//! the engine's own answers, and an engine lost mid-execution from one that was never reached.

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(
        "cannot reach the Docker engine ({0}): start it (e.g. `systemctl start docker` or `dockerd &`), set DOCKER_HOST if it listens elsewhere, and check with `code-execution-mcp doctor`. A running server needs no restart: retry once the engine answers"
    )]
    Unreachable(String),
    #[error(
        "the Docker engine went away or stopped answering during the execution ({0}): the execution's outcome is unknown, and files it was writing in /workspace may be incomplete. Retry once the engine answers again (start it with e.g. `systemctl start docker`; check it with `code-execution-mcp doctor`): the server reconnects by itself"
    )]
    Lost(String),
    #[error(
        "the sandbox image {0} is not on the engine: build it with `code-execution-mcp image build` (see `code-execution-mcp doctor`)"
    )]
    ImageMissing(String),
    #[error(
        "the Docker engine failed to {action}: {message}; check it with `code-execution-mcp doctor`"
    )]
    Api {
        action: &'static str,
        message: String,
    },
    #[error(
        "the Docker engine did not start a sandbox container within {0} seconds: it is overloaded or stuck. Retry in a moment, and check it with `code-execution-mcp doctor`"
    )]
    Slow(u64),
    #[error("the engine does not support {0}")]
    Unsupported(&'static str),
}

impl EngineError {
    pub fn api(action: &'static str, err: bollard::errors::Error) -> Self {
        use bollard::errors::Error as E;
        match err {
            E::DockerResponseServerError {
                status_code: 404,
                ref message,
            } if message.contains("No such image") => {
                EngineError::ImageMissing(message.trim_start_matches("No such image: ").into())
            }
            // Transport failures: no socket, connection refused or reset, no answer in time.
            E::HyperResponseError { .. }
            | E::HyperLegacyError { .. }
            | E::IOError { .. }
            | E::SocketNotFoundError(_)
            | E::RequestTimeoutError => {
                EngineError::Unreachable(format!("{action}: {}", chain(&err)))
            }
            other => EngineError::Api {
                action,
                message: other.to_string(),
            },
        }
    }

    /// An engine that stopped answering once the execution had begun: [`EngineError::Lost`].
    pub fn lost_if_unreachable(self) -> Self {
        match self {
            EngineError::Unreachable(why) => EngineError::Lost(why),
            other => other,
        }
    }
}

/// An error and its sources, joined: hyper's "client error (Connect)" alone does not say
/// that the socket is missing or refused the connection.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_failures_say_the_engine_cannot_be_reached() {
        use bollard::errors::Error as E;
        let missing = EngineError::api(
            "create a sandbox container",
            E::SocketNotFoundError("/run/nothing.sock".into()),
        );
        let text = missing.to_string();
        assert!(matches!(missing, EngineError::Unreachable(_)), "{text}");
        assert!(
            text.contains("cannot reach the Docker engine") && text.contains("/run/nothing.sock"),
            "{text}"
        );
        let refused = EngineError::api(
            "inspect a sandbox container",
            E::IOError {
                err: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            },
        );
        assert!(matches!(refused, EngineError::Unreachable(_)));
        let lost = refused.lost_if_unreachable();
        assert!(matches!(lost, EngineError::Lost(_)));
        assert!(
            lost.to_string()
                .contains("went away or stopped answering during the execution")
        );
        // An answer from the engine is not a transport failure.
        let conflict = EngineError::api(
            "remove a sandbox container",
            E::DockerResponseServerError {
                status_code: 500,
                message: "driver failed".into(),
            },
        );
        assert!(matches!(
            conflict.lost_if_unreachable(),
            EngineError::Api { .. }
        ));
    }
}
