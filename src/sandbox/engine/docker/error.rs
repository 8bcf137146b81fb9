//! bollard's errors as the seam's [`EngineError`]: transport failures (the engine cannot be
//! reached, with what to do about a Docker or Podman engine that does not answer) told apart
//! from the engine's own answers.

use crate::sandbox::engine::error::EngineError;

impl EngineError {
    pub(crate) fn api(action: &'static str, err: bollard::errors::Error) -> Self {
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
                EngineError::unreachable(format!("{action}: {}", chain(&err)))
            }
            other => EngineError::Api {
                action,
                message: other.to_string(),
            },
        }
    }

    /// The engine cannot be reached: `why`, with what to do about it.
    pub(crate) fn unreachable(why: String) -> Self {
        EngineError::Unreachable(format!("{why}: {}", start_hint()))
    }
}

/// What to do about an engine that does not answer: start it, or point DOCKER_HOST at it. A
/// rootless engine listens on a socket of the user's (`$XDG_RUNTIME_DIR/docker.sock`, or
/// Podman's `$XDG_RUNTIME_DIR/podman/podman.sock`) that no client uses by default: where one
/// exists, the hint names it.
pub fn start_hint() -> String {
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").map(std::path::PathBuf::from);
    let docker_host = std::env::var("DOCKER_HOST").ok();
    hint_for(runtime_dir.as_deref(), docker_host.as_deref(), |p| {
        p.exists()
    })
}

/// [`start_hint`] for a given `$XDG_RUNTIME_DIR`, `DOCKER_HOST` and test of a path's existence.
fn hint_for(
    runtime_dir: Option<&std::path::Path>,
    docker_host: Option<&str>,
    exists: impl Fn(&std::path::Path) -> bool,
) -> String {
    let rootful = "start the Docker engine (e.g. `systemctl start docker`, or `dockerd &` as root), or set DOCKER_HOST if it listens elsewhere";
    let Some(dir) = runtime_dir.filter(|d| d.is_absolute()) else {
        return rootful.into();
    };
    let sockets = [
        (
            dir.join("docker.sock"),
            "$XDG_RUNTIME_DIR/docker.sock",
            "rootless Docker (`systemctl --user start docker`, or `dockerd-rootless.sh`)",
        ),
        (
            dir.join("podman/podman.sock"),
            "$XDG_RUNTIME_DIR/podman/podman.sock",
            "rootless Podman (`systemctl --user start podman.socket`)",
        ),
    ];
    for (socket, named, engine) in sockets {
        let url = format!("unix://{}", socket.display());
        if docker_host == Some(url.as_str()) {
            return format!(
                "DOCKER_HOST names the socket of {engine}, which does not answer: start it, or unset DOCKER_HOST for the rootful engine"
            );
        }
        if exists(&socket) {
            return format!(
                "{rootful}: {engine} has a socket here, so to use it set `DOCKER_HOST=unix://{named}` ({url})"
            );
        }
    }
    rootful.into()
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
    fn the_start_hint_names_a_rootless_socket_where_there_is_one() {
        use std::path::Path;
        let dir = Some(Path::new("/run/user/1000"));
        let plain = hint_for(dir, None, |_| false);
        assert!(plain.contains("systemctl start docker"), "{plain}");
        assert!(!plain.contains("XDG_RUNTIME_DIR"), "{plain}");
        assert_eq!(hint_for(None, None, |_| true), plain);
        assert_eq!(hint_for(Some(Path::new("run")), None, |_| true), plain);
        let docker = hint_for(dir, None, |p| p == Path::new("/run/user/1000/docker.sock"));
        assert!(
            docker.contains("`DOCKER_HOST=unix://$XDG_RUNTIME_DIR/docker.sock`")
                && docker.contains("(unix:///run/user/1000/docker.sock)")
                && docker.contains("rootless Docker"),
            "{docker}"
        );
        let podman = hint_for(dir, None, |p| p.ends_with("podman/podman.sock"));
        assert!(
            podman.contains("DOCKER_HOST=unix://$XDG_RUNTIME_DIR/podman/podman.sock"),
            "{podman}"
        );
        // DOCKER_HOST already names the rootless socket: the engine behind it is not running.
        let down = hint_for(dir, Some("unix:///run/user/1000/docker.sock"), |_| true);
        assert!(
            down.contains("does not answer") && down.contains("systemctl --user start docker"),
            "{down}"
        );
    }

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
            text.contains("cannot reach the container engine")
                && text.contains("/run/nothing.sock"),
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
