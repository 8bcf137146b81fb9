//! What the server learns from the engine's event stream. Docker 20.10 handles a container's
//! exit and the kernel's OOM notice separately; when the exit is handled first the engine
//! records `OOMKilled: false` for good, though the `oom` event still arrives (measured: up to
//! ~600 ms after `die`, for about 1 memory kill in 40 under load; more than 1 s once, on 2 cores
//! kept 100% busy by the soak test). [`OomEvents`] keeps the names
//! of this server's containers that had one, so an execution that ended with SIGKILL's exit
//! code can wait briefly for it before it calls the end a crash instead of a memory kill.
//!
//! The stream also tells when the engine went away: it breaks when the engine stops or
//! restarts (the engine closes its API before it stops the containers). [`EngineBreaks`] counts
//! those breaks, so an execution whose container was stopped from outside can tell an engine
//! shutdown from code that ended itself.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Names remembered (the oldest are forgotten first).
const REMEMBERED: usize = 256;
/// How often [`OomEvents::wait_for`] looks again.
const POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Default)]
pub struct OomEvents {
    seen: Mutex<VecDeque<String>>,
}

impl OomEvents {
    pub fn record(&self, container: &str) {
        let mut seen = self.seen.lock().expect("oom events lock");
        if seen.len() == REMEMBERED {
            seen.pop_front();
        }
        seen.push_back(container.to_string());
    }

    pub fn seen(&self, container: &str) -> bool {
        self.seen
            .lock()
            .expect("oom events lock")
            .iter()
            .any(|c| c == container)
    }

    /// Whether an `oom` event for `container` has arrived or arrives within `limit`.
    pub async fn wait_for(&self, container: &str, limit: Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        loop {
            if self.seen(container) {
                return true;
            }
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// How many times the engine's event stream broke or could not be opened.
#[derive(Debug, Default)]
pub struct EngineBreaks {
    count: AtomicU64,
}

impl EngineBreaks {
    pub fn record(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Whether the count differs from `seen`, now or within `limit`.
    pub async fn changed_since(&self, seen: u64, limit: Duration) -> bool {
        let until = tokio::time::Instant::now() + limit;
        loop {
            if self.count() != seen {
                return true;
            }
            if tokio::time::Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_break_is_seen_if_it_comes_within_the_limit() {
        let breaks = std::sync::Arc::new(EngineBreaks::default());
        let seen = breaks.count();
        assert!(!breaks.changed_since(seen, Duration::from_secs(1)).await);
        let later = breaks.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            later.record();
        });
        assert!(breaks.changed_since(seen, Duration::from_secs(1)).await);
        assert!(!breaks.changed_since(breaks.count(), Duration::ZERO).await);
    }

    #[test]
    fn remembers_a_bounded_number_of_names() {
        let events = OomEvents::default();
        for i in 0..REMEMBERED + 1 {
            events.record(&format!("c{i}"));
        }
        assert!(!events.seen("c0"), "the oldest is forgotten");
        assert!(events.seen("c1") && events.seen(&format!("c{REMEMBERED}")));
    }

    #[tokio::test(start_paused = true)]
    async fn waits_for_a_late_event_up_to_its_limit() {
        let events = std::sync::Arc::new(OomEvents::default());
        let late = events.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            late.record("c");
        });
        assert!(events.wait_for("c", Duration::from_secs(1)).await);
        assert!(!events.wait_for("other", Duration::from_secs(1)).await);
    }
}
