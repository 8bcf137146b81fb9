//! An execution's way out, handed to its container with the job: the proxy socket in the
//! container's egress directory (`container::egress_dir`), bound just before the job line is
//! written and removed when the execution ends. Whoever connects to it is served by the
//! job's [`EgressHandler`], under that execution's rules alone; the sandbox knows nothing of
//! what the handler allows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

use crate::sandbox::container::egress_dir::SOCKET;

/// Serves the connections an execution's code opens to its proxy socket.
pub trait EgressHandler: Send + Sync {
    /// Serves one connection until it closes.
    fn serve(self: Arc<Self>, stream: UnixStream) -> BoxFuture<'static, ()>;
    /// Whether plain `http://` goes through the proxy too (the harness then sets
    /// `HTTP_PROXY` as well as `HTTPS_PROXY`).
    fn plain_http(&self) -> bool;
}

/// The socket of one execution, listening; dropped, it stops accepting, ends every connection
/// it was serving and removes the socket file.
pub(crate) struct Listening {
    task: JoinHandle<()>,
    path: PathBuf,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the proxy socket in `dir` (the container's egress directory on the host) and serves
/// it with `handler`. The socket is open to every user: the directory is what limits who
/// reaches it (the container, and the tenant's group on the host).
pub(crate) fn listen(dir: &Path, handler: Arc<dyn EgressHandler>) -> std::io::Result<Listening> {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::io::AsRawFd;
    let path = dir.join(SOCKET);
    // A socket's path is bound by 108 bytes; the directory's, under a long --egress-socket-dir,
    // may not be. Bound through the open directory, the path is always short.
    let opened = std::fs::File::open(dir)?;
    let short = format!("/proc/self/fd/{}/{SOCKET}", opened.as_raw_fd());
    let listener = std::os::unix::net::UnixListener::bind(short)?;
    drop(opened);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        connections.spawn(handler.clone().serve(stream));
                    }
                    Err(e) => {
                        tracing::debug!("the egress socket stopped accepting: {e}");
                        break;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        // Dropping the set aborts the connections still served.
    });
    Ok(Listening { task, path })
}
