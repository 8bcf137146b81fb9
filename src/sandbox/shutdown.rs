//! Shutdown: no new executions, what runs killed, and this instance's containers removed
//! within a bounded time (what an unanswering engine leaves, the next start's reaper removes).

use super::Sandbox;
use super::cleanup;
use super::container::spec::LABEL_INSTANCE;

/// Longest shutdown waits for running executions to stop and for this instance's containers to
/// be removed. An engine that does not answer within it leaves them to the next start.
const SHUTDOWN_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);
/// Longest the final sweep by label at shutdown may take.
const SWEEP_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Sandbox {
    /// Stops accepting work, kills what runs, and waits until every container this instance
    /// created is removed (then removes any stragglers by label). Bounded: an engine that does
    /// not answer within `SHUTDOWN_LIMIT` (and `SWEEP_LIMIT`) leaves what remains to the
    /// next start's reaper.
    pub async fn shutdown(&self) {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_LIMIT;
        self.shutdown.cancel();
        // Running executions see the cancellation, kill their containers and drop their guards;
        // holding every slot (and closing the semaphore) keeps new ones from starting.
        let all = tokio::time::timeout_at(
            deadline,
            self.slots
                .acquire_many(self.settings.max_concurrency as u32),
        )
        .await;
        self.slots.close();
        drop(all);
        self.pool.drain();
        self.cleanup.tracker.close();
        let removed = async {
            self.cleanup.tracker.wait().await;
            self.settings.removals.flush(deadline).await
        };
        if !tokio::time::timeout_at(deadline, removed)
            .await
            .unwrap_or(false)
        {
            tracing::warn!(
                "the Docker engine did not finish removing this server's containers within {} seconds; the next start removes what is left",
                SHUTDOWN_LIMIT.as_secs()
            );
        }
        let label = format!("{LABEL_INSTANCE}={}", self.instance.id);
        match tokio::time::timeout(
            SWEEP_LIMIT,
            cleanup::reaper::remove_labelled(self.backend.as_ref(), &[label]),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!("could not remove this instance's containers at shutdown: {e}")
            }
            Err(_) => tracing::warn!(
                "the Docker engine did not list this instance's containers within {} seconds at shutdown; the next start removes them",
                SWEEP_LIMIT.as_secs()
            ),
        }
    }
}
