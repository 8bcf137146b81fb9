//! The host the server runs on: the data directory's storage (local or shared across a
//! swarm), processes' start times and liveness (owner labels, temp files), the file
//! primitives that never follow a link ([`safe_fs`]), directory handles that survive shared
//! storage going stale under them ([`renewable_dir`]), and running storage work from async code.

pub(crate) mod process;
pub(crate) mod renewable_dir;
pub(crate) mod runtime_leftovers;
pub(crate) mod safe_fs;
pub mod storage;

/// Runs `f`, which may block on storage (the PII vault file's append and sync, a directory on a
/// shared volume), from an async context without stalling the runtime: on a multi-threaded
/// runtime the worker hands its other tasks to a new worker first. Why: a shared volume stalls
/// every read and write for seconds when one of its servers goes (GlusterFS's ping-timeout);
/// two workers blocked there would leave `/health` unanswered and the proxy would take a healthy
/// node out. On a current-thread runtime (tests) `f` simply runs.
pub(crate) fn blocking_here<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
