//! One tenant's upload budget on this server: uploads in progress at once, bytes per sliding
//! hour, and the links whose upload is running (a second upload of one of them is refused,
//! not raced). Bytes count as they arrive, so an upload that fails half-way still spends what
//! it sent.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);
/// Arrivals within one second are kept as one entry of the window.
const BUCKET: Duration = Duration::from_secs(1);

/// Why an upload may not go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetRefusal {
    #[error(
        "an upload through this link is in progress already: wait for it to end (a failed one leaves the link usable)"
    )]
    InProgress,
    #[error(
        "{0} uploads are in progress for this workspace, the most at once: wait for one to end and try again"
    )]
    TooMany(usize),
    #[error(
        "this workspace received its hourly upload allowance ({} MiB): try again in {} minutes",
        .0 >> 20, .1.as_secs().div_ceil(60)
    )]
    Hourly(u64, Duration),
}

/// Uploads in progress and bytes received in the last hour.
#[derive(Debug)]
pub struct Budget {
    concurrent: usize,
    per_hour: u64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    running: HashSet<String>,
    window: VecDeque<(Instant, u64)>,
    total: u64,
}

impl State {
    fn expire(&mut self, now: Instant) {
        while let Some((at, bytes)) = self.window.front().copied() {
            if now.duration_since(at) < HOUR {
                break;
            }
            self.total -= bytes;
            self.window.pop_front();
        }
    }

    /// When enough of the window will have expired for one more byte.
    fn wait(&self, now: Instant) -> Duration {
        self.window.front().map_or(Duration::ZERO, |(at, _)| {
            HOUR.saturating_sub(now.duration_since(*at))
        })
    }
}

impl Budget {
    pub fn new(concurrent: usize, per_hour: u64) -> Arc<Self> {
        Arc::new(Self {
            concurrent,
            per_hour,
            state: Mutex::default(),
        })
    }

    /// Begins an upload through link `id`, when the budget allows.
    pub fn begin(self: &Arc<Self>, id: &str) -> Result<UploadPermit, BudgetRefusal> {
        let mut state = self.state.lock().expect("budget lock");
        let now = Instant::now();
        state.expire(now);
        if state.running.contains(id) {
            return Err(BudgetRefusal::InProgress);
        }
        if state.running.len() >= self.concurrent {
            return Err(BudgetRefusal::TooMany(self.concurrent));
        }
        if state.total >= self.per_hour {
            return Err(BudgetRefusal::Hourly(self.per_hour, state.wait(now)));
        }
        state.running.insert(id.to_string());
        Ok(UploadPermit {
            budget: self.clone(),
            id: id.to_string(),
        })
    }

    /// Uploads in progress now.
    pub fn running(&self) -> usize {
        self.state.lock().expect("budget lock").running.len()
    }
}

/// One upload in progress; dropping it ends it.
#[derive(Debug)]
pub struct UploadPermit {
    budget: Arc<Budget>,
    id: String,
}

impl UploadPermit {
    /// Counts `bytes` more received; refused once the hour's allowance is spent.
    pub fn count(&self, bytes: u64) -> Result<(), BudgetRefusal> {
        let budget = &self.budget;
        let mut state = budget.state.lock().expect("budget lock");
        let now = Instant::now();
        state.expire(now);
        match state.window.back_mut() {
            Some((at, n)) if now.duration_since(*at) < BUCKET => *n += bytes,
            _ => state.window.push_back((now, bytes)),
        }
        state.total += bytes;
        if state.total > budget.per_hour {
            return Err(BudgetRefusal::Hourly(budget.per_hour, state.wait(now)));
        }
        Ok(())
    }
}

impl Drop for UploadPermit {
    fn drop(&mut self) {
        let mut state = self.budget.state.lock().expect("budget lock");
        state.running.remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_upload_per_link_and_a_bounded_number_at_once() {
        let budget = Budget::new(2, 1 << 30);
        let a = budget.begin("a").unwrap();
        assert_eq!(budget.begin("a").unwrap_err(), BudgetRefusal::InProgress);
        let _b = budget.begin("b").unwrap();
        assert_eq!(budget.begin("c").unwrap_err(), BudgetRefusal::TooMany(2));
        drop(a);
        assert_eq!(budget.running(), 1);
        budget.begin("a").unwrap();
    }

    #[test]
    fn the_hourly_allowance_stops_an_upload_and_the_next() {
        let budget = Budget::new(4, 100);
        let a = budget.begin("a").unwrap();
        a.count(60).unwrap();
        let e = a.count(60).unwrap_err();
        assert!(matches!(e, BudgetRefusal::Hourly(100, wait) if wait > Duration::from_secs(3500)));
        assert!(e.to_string().contains("try again in 60 minutes"), "{e}");
        drop(a);
        assert!(matches!(
            budget.begin("b").unwrap_err(),
            BudgetRefusal::Hourly(..)
        ));
    }
}
