//! A container made ready ahead of a session's next call: started (or taken from the pool),
//! sent the session's snapshot, and left with the state loaded, waiting for its job. The next
//! call of the session then pays neither a start nor a load: its code runs at once, in a fresh
//! container all the same.
//!
//! A preparation ends, and its container is removed, when its owner cancels it (the session
//! expired or was replaced), when the pool comes under pressure (other executions need the
//! engine more than this one bet on the future), when it stays unclaimed for `--pool-idle-secs`
//! (as pooled containers give their memory back), or at shutdown. A call that arrives while the
//! preparation is still under way waits for it, up to its start deadline, rather than start a
//! second container beside it.

use std::sync::Arc;

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::sandbox::run::Started;

/// A session's next container, being prepared or ready. Cloning shares it.
#[derive(Clone)]
pub struct Prepared {
    /// Locked while the preparation runs; then holds the container until a call takes it.
    pub(crate) slot: Arc<Mutex<Option<Started>>>,
    pub(crate) ends: CancellationToken,
    /// The installed package set the container was started with.
    pub package_set: Option<String>,
}

impl Prepared {
    pub(crate) fn new(
        package_set: Option<String>,
    ) -> (Self, tokio::sync::OwnedMutexGuard<Option<Started>>) {
        let slot = Arc::new(Mutex::new(None));
        let guard = slot
            .clone()
            .try_lock_owned()
            .expect("a new mutex is unlocked");
        let prepared = Self {
            slot,
            ends: CancellationToken::new(),
            package_set,
        };
        (prepared, guard)
    }

    /// Ends the preparation; its container is removed.
    pub fn cancel(&self) {
        self.ends.cancel();
    }

    /// Whether it has ended (cancelled, under pressure, shut down, or taken).
    pub fn is_cancelled(&self) -> bool {
        self.ends.is_cancelled()
    }

    /// Whether a container is ready in it now (not while it is being prepared).
    pub fn is_ready(&self) -> bool {
        self.slot.try_lock().is_ok_and(|slot| slot.is_some())
    }

    /// The prepared container, waiting for a preparation under way until `deadline`; `None`
    /// when there is none (it failed, ended, or did not finish in time).
    pub(crate) async fn take(&self, deadline: tokio::time::Instant) -> Option<Started> {
        if self.ends.is_cancelled() {
            return None;
        }
        let mut slot = tokio::time::timeout_at(deadline, self.slot.lock())
            .await
            .ok()?;
        let mut started = slot.take()?;
        drop(slot);
        self.ends.cancel();
        started.is_waiting().then_some(started)
    }
}
