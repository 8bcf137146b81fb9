//! Admission: an execution takes one of its tenant's slots (waiting in a bounded queue when
//! none is free), then one of the server's; every wait before its container starts gives way
//! to shutdown and to the caller's cancellation.

use std::sync::atomic::Ordering;

use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;

use super::{Outcome, Sandbox, SandboxError, Status};

/// The slots an admitted execution holds until it has answered: its tenant's, then one of the
/// server's (released in that order).
pub(super) struct Admitted {
    _tenant: OwnedSemaphorePermit,
    _server: OwnedSemaphorePermit,
}

/// How a wait for something before the start ended (see [`Sandbox::unless_stopped`]).
pub(super) enum Waited<T> {
    Done(T),
    Cancelled,
    ShuttingDown,
}

impl Sandbox {
    /// Takes an execution's slots: `Ok(None)` when the caller cancelled while it waited.
    pub(super) async fn admit(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<Admitted>, SandboxError> {
        if self.shutdown.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }
        let tenant = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => match self.queue_for_slot(cancel).await? {
                Some(p) => p,
                None => return Ok(None),
            },
        };
        // Then one of the server's slots, shared by every tenant. Those waiting here hold one
        // of their tenant's slots, so at most the sum of the tenants' limits wait.
        let server_slots = self.settings.server_slots.clone();
        let server = match self
            .unless_stopped(cancel, server_slots.acquire_owned())
            .await
        {
            Waited::Done(Ok(p)) => p,
            Waited::Done(Err(_)) | Waited::ShuttingDown => return Err(SandboxError::ShuttingDown),
            Waited::Cancelled => return Ok(None),
        };
        // Shutdown may have begun while this call waited: it must not start a container then.
        if self.shutdown.is_cancelled() {
            return Err(SandboxError::ShuttingDown);
        }
        Ok(Some(Admitted {
            _tenant: tenant,
            _server: server,
        }))
    }

    /// Waits in the tenant's queue for one of its slots (`Busy` when the queue is full):
    /// `Ok(None)` when the caller cancelled first.
    async fn queue_for_slot(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<OwnedSemaphorePermit>, SandboxError> {
        let queued = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _leave = scopeguard(|| {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        });
        if queued >= self.settings.max_queue {
            return Err(SandboxError::Busy {
                running: self.settings.max_concurrency,
                queued,
            });
        }
        match self
            .unless_stopped(cancel, self.slots.clone().acquire_owned())
            .await
        {
            Waited::Done(Ok(p)) => Ok(Some(p)),
            Waited::Done(Err(_)) | Waited::ShuttingDown => Err(SandboxError::ShuttingDown),
            Waited::Cancelled => Ok(None),
        }
    }

    /// Waits for `wait` unless shutdown begins or the caller cancels first (checked in that
    /// order): the one way every wait before the start (a slot, the server's slot, a pooled
    /// container) gives way.
    pub(super) async fn unless_stopped<T>(
        &self,
        cancel: &CancellationToken,
        wait: impl Future<Output = T>,
    ) -> Waited<T> {
        tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => Waited::ShuttingDown,
            _ = cancel.cancelled() => Waited::Cancelled,
            done = wait => Waited::Done(done),
        }
    }

    /// The outcome of a call cancelled before its container started, counted in the stats.
    pub(super) fn cancelled_before_start(&self) -> Outcome {
        self.stats
            .record(Status::Cancelled, std::time::Duration::ZERO);
        Outcome::without_output(
            Status::Cancelled,
            "Execution cancelled before it started",
            std::time::Duration::ZERO,
        )
    }
}

/// A token cancelled when either the caller's token or the server's shutdown token is.
pub(super) struct LinkedCancel {
    token: CancellationToken,
    _task: tokio::task::JoinHandle<()>,
}

impl LinkedCancel {
    pub(super) fn new(a: &CancellationToken, b: &CancellationToken) -> Self {
        let token = CancellationToken::new();
        let (a, b, t) = (a.clone(), b.clone(), token.clone());
        let task = tokio::spawn(async move {
            tokio::select! {
                _ = a.cancelled() => {}
                _ = b.cancelled() => {}
                _ = t.cancelled() => return,
            }
            t.cancel();
        });
        Self { token, _task: task }
    }

    pub(super) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

impl Drop for LinkedCancel {
    fn drop(&mut self) {
        self._task.abort();
    }
}

/// Runs a closure when dropped.
fn scopeguard<F: FnOnce()>(f: F) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f()
            }
        }
    }
    Guard(Some(f))
}
