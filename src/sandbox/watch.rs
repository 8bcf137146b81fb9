//! The server's watch on the engine: its event stream (OOM notices of this instance's
//! containers, and image events that move the pool to a rebuilt image), reopened whenever it
//! breaks, and the retries that refill the pool after failed starts.

use std::sync::Arc;

use futures::StreamExt;
use tracing::Instrument;

use crate::sandbox::engine::backend::{EngineEvent, EventFilter};
use crate::sandbox::{Sandbox, pool};

impl Sandbox {
    /// Follows the engine's events for as long as the server runs (a broken stream is
    /// reopened, and counted in `EngineBreaks`): `oom` events of this instance's
    /// containers (see `events.rs`), and image events, so that when the sandbox image's tag
    /// moves to another image the pool is rebuilt from the new one (cold starts use the tag, so
    /// they follow by themselves, except beside a host tree of the image, which pins them to its
    /// image id until the tag moves). Also retries failed pool starts (see `keep_pool_filled`).
    pub fn watch_engine(self: &Arc<Self>) {
        let sandbox = self.clone();
        let watch = async move {
            let shutdown = sandbox.shutdown.clone();
            tokio::select! {
                _ = shutdown.cancelled() => {}
                _ = sandbox.follow_oom_events() => {}
                _ = sandbox.follow_image_events() => {}
                _ = sandbox.keep_pool_filled() => {}
                _ = sandbox.shrink_pool_when_idle() => {}
            }
        };
        self.cleanup
            .tracker
            .spawn(watch.instrument(self.settings.span.clone()));
    }

    /// Lets the pool breathe out: once no execution has asked for a container for
    /// `--pool-idle-secs`, its target falls back to its idle floor and what is above goes.
    async fn shrink_pool_when_idle(&self) {
        let idle = self.settings.pool_idle;
        if self.settings.pool_size == 0 || idle.is_zero() {
            return std::future::pending().await;
        }
        loop {
            let at = self.pool.idle_deadline(idle);
            tokio::time::sleep_until(at).await;
            let dropped = self.pool.shrink_if_idle(idle);
            if dropped > 0 {
                tracing::debug!(
                    dropped,
                    "the pool was idle: it gave back its extra containers"
                );
            }
            if self.pool.idle_deadline(idle) <= tokio::time::Instant::now() {
                // Still idle after shrinking: wait for the next use.
                tokio::time::sleep(idle.min(std::time::Duration::from_secs(1))).await;
            }
        }
    }

    /// After a failed pool start (the engine is down, restarting or stuck), tries again after
    /// a delay that doubles with each further failure, up to [`pool::MAX_RETRY_DELAY`]: the
    /// pool fills up again once the engine is back, before any execution asks for it.
    async fn keep_pool_filled(&self) {
        if self.settings.pool_size == 0 {
            return std::future::pending().await;
        }
        loop {
            let failures = self.pool.next_failure().await;
            tokio::time::sleep(pool::retry_delay(failures)).await;
            self.refill();
        }
    }

    async fn follow_oom_events(&self) {
        let filter = EventFilter::Oom {
            instance: self.instance.id.clone(),
        };
        self.follow_events(&filter, |event| {
            if let EngineEvent::Oom { container } = event {
                self.oom.record(&container);
            }
            std::future::ready(())
        })
        .await
    }

    async fn follow_image_events(&self) {
        // Without a pool, cold starts use the tag, unless a host tree pins them to its image:
        // that image may be deleted once the tag has moved, and they must follow the tag then.
        if self.settings.pool_size == 0 && self.settings.image_tree.is_none() {
            return std::future::pending().await;
        }
        // Checked once at start as well: the tag may have moved while the server started.
        self.check_image().await;
        self.follow_events(&EventFilter::Images, |_| self.check_image())
            .await
    }

    /// Calls `on_event` for every event matching `filter`, reconnecting (after a second)
    /// whenever the stream breaks or ends.
    async fn follow_events<F: Future<Output = ()>>(
        &self,
        filter: &EventFilter,
        mut on_event: impl FnMut(EngineEvent) -> F,
    ) {
        loop {
            let mut events = self.backend.events(filter);
            while let Some(Ok(event)) = events.next().await {
                on_event(event).await;
            }
            self.breaks.record();
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }

    /// Retargets the pool when the image tag now names another image.
    async fn check_image(&self) {
        match self.backend.image_id(&self.settings.image).await {
            Ok(Some(id)) if self.pool.retarget(&id) => {
                tracing::info!(image = %self.settings.image, id = %id, "the sandbox image changed: the pool is rebuilt from it");
                if self.settings.image_tree.is_some() {
                    tracing::info!(
                        "the host copy of the sandbox image's /usr belongs to the previous image: containers read the new one from the engine's storage until the next start extracts its copy"
                    );
                }
                self.refill();
            }
            Ok(_) => {}
            Err(e) => tracing::debug!("could not check the sandbox image: {e}"),
        }
    }
}
