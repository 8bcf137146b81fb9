//! The pace the pool is asked at and how long its containers take to get ready, as observed,
//! so the pool can tell ahead of time whether it keeps up.
//!
//! Why observed rather than configured: the same server meets a quiet laptop, a CI agent whose
//! other core is taken, and a burst of fifty calls. A container that imports pandas before its
//! job is ready in about a second on a quiet 2-core machine and in several with a core taken; a
//! preload started when the calls come faster than that is ready too late for the call it was
//! meant for, and its CPU slows the starts that call does wait for. Growing the pool only once
//! it is empty likewise comes one container too late for every call of a burst.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Asks remembered: the longest window asked about, and a bound on the memory.
const ASK_WINDOW: Duration = Duration::from_secs(30);
const MAX_ASKS: usize = 512;

/// Ready times assumed before any was observed: a plain container, and one that imports
/// modules ahead (numpy and pandas on the reference machine).
const PLAIN_GUESS: Duration = Duration::from_millis(400);
const PRELOADED_GUESS: Duration = Duration::from_millis(1500);

/// Weight of the newest observation in the running mean.
const NEWEST_WEIGHT: f64 = 0.25;

#[derive(Debug)]
pub struct Pace {
    asks: Mutex<VecDeque<Instant>>,
    /// Running means, in seconds, of a start until ready: plain, and with a preload.
    plain: Mutex<Option<f64>>,
    preloaded: Mutex<Option<f64>>,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            asks: Mutex::new(VecDeque::with_capacity(64)),
            plain: Mutex::new(None),
            preloaded: Mutex::new(None),
        }
    }
}

impl Pace {
    /// Notes an execution asking the pool for a container.
    pub fn asked(&self) {
        let now = Instant::now();
        let mut asks = self.asks.lock().expect("pace lock");
        while asks.len() >= MAX_ASKS
            || asks
                .front()
                .is_some_and(|t| now.duration_since(*t) > ASK_WINDOW)
        {
            asks.pop_front();
        }
        asks.push_back(now);
    }

    /// How many executions asked within the last `window` (at most [`ASK_WINDOW`]).
    pub fn asks_within(&self, window: Duration) -> usize {
        let now = Instant::now();
        let asks = self.asks.lock().expect("pace lock");
        (asks.iter().rev())
            .take_while(|t| now.duration_since(**t) <= window)
            .count()
    }

    /// Notes a pooled start that took `took` from its create to its ready frame.
    pub fn started(&self, preloaded: bool, took: Duration) {
        let mut mean = self.mean(preloaded).lock().expect("pace lock");
        let took = took.as_secs_f64();
        *mean = Some(match *mean {
            Some(m) => m + NEWEST_WEIGHT * (took - m),
            None => took,
        });
    }

    /// How long a pooled start takes until ready, as observed lately (a guess before any).
    pub fn ready_time(&self, preloaded: bool) -> Duration {
        let guess = if preloaded {
            PRELOADED_GUESS
        } else {
            PLAIN_GUESS
        };
        (self.mean(preloaded).lock().expect("pace lock"))
            .map_or(guess, Duration::from_secs_f64)
            .min(ASK_WINDOW)
    }

    /// Whether a container started now would be ready before it is needed: the `ahead`
    /// containers ready or on their way serve the next asks, it serves the one after, and the
    /// asks of the last interval as long as its start say how soon that comes.
    pub fn keeps_up(&self, preloaded: bool, ahead: usize) -> bool {
        self.asks_within(self.ready_time(preloaded)) <= ahead + 1
    }

    /// Asks per second over the last 10 seconds.
    pub fn asks_per_second(&self) -> f64 {
        const OVER: Duration = Duration::from_secs(10);
        self.asks_within(OVER) as f64 / OVER.as_secs_f64()
    }

    fn mean(&self, preloaded: bool) -> &Mutex<Option<f64>> {
        if preloaded {
            &self.preloaded
        } else {
            &self.plain
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn asks_are_counted_within_a_window() {
        let pace = Pace::default();
        for _ in 0..3 {
            pace.asked();
            tokio::time::advance(Duration::from_millis(500)).await;
        }
        assert_eq!(pace.asks_within(Duration::from_millis(1000)), 2);
        assert_eq!(pace.asks_within(Duration::from_secs(2)), 3);
        tokio::time::advance(ASK_WINDOW).await;
        assert_eq!(pace.asks_within(ASK_WINDOW), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn ready_times_start_from_a_guess_and_follow_what_is_observed() {
        let pace = Pace::default();
        assert_eq!(pace.ready_time(true), PRELOADED_GUESS);
        pace.started(true, Duration::from_secs(4));
        assert_eq!(pace.ready_time(true), Duration::from_secs(4));
        pace.started(true, Duration::ZERO);
        assert_eq!(pace.ready_time(true), Duration::from_secs(3));
        assert_eq!(pace.ready_time(false), PLAIN_GUESS, "kept apart");
    }

    #[tokio::test(start_paused = true)]
    async fn a_preload_keeps_up_only_when_what_is_ahead_outlasts_it() {
        let pace = Pace::default();
        pace.started(true, Duration::from_secs(2));
        // Four asks in the last two seconds.
        for _ in 0..4 {
            pace.asked();
            tokio::time::advance(Duration::from_millis(400)).await;
        }
        assert!(pace.keeps_up(true, 3));
        assert!(!pace.keeps_up(true, 2));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(pace.keeps_up(true, 0), "the burst is over");
    }

    #[tokio::test]
    async fn the_memory_is_bounded() {
        let pace = Pace::default();
        for _ in 0..MAX_ASKS * 2 {
            pace.asked();
        }
        assert_eq!(pace.asks.lock().unwrap().len(), MAX_ASKS);
    }
}
