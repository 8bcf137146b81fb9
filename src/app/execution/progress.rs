//! Progress of long executions. A client that sends a progress token with `execute_code` gets,
//! every [`INTERVAL`] while the call runs, the time elapsed and the latest line the code printed,
//! so an agent (or its user) can tell a slow computation from a hung one. A client without a
//! token gets nothing extra and pays nothing: no tap is installed.
//!
//! The execution loop offers each output chunk to a [`LatestLine`] (the sandbox's
//! [`OutputTap`], a `watch` channel: it keeps only the newest line, bounded, so a chatty
//! program costs no memory). [`with_progress`] drives
//! the execution future and reports on a timer in the same task, so no report can follow the
//! response, and a slow client only delays reports, never the execution's deadline (the deadline
//! is enforced by timers inside the execution, and each report gets a short send budget).
//!
//! A report's message goes to the model: it is a [`Shown`], the line through the privacy
//! layer inside the report's own words ([`Shown::framed`]), and only
//! `crate::privacy::progress_note` puts it in a notification.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::privacy::Shown;
use crate::sandbox::OutputTap;
use crate::sandbox::run::output::EDGE_BYTES;

/// Time between two progress reports (the first comes after one interval: quick executions
/// send none).
pub const INTERVAL: Duration = Duration::from_secs(1);
/// Longest latest-output line carried in a report, in characters.
pub const MAX_LINE_CHARS: usize = 200;
/// How long one report may take to hand to the transport before it is given up.
const SEND_BUDGET: Duration = Duration::from_millis(250);

/// One progress report: `elapsed` grows with every report, as MCP requires of `progress`.
/// Its message is a [`Shown`] on the way to the model (a `String` where nothing is shown).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress<M = Shown> {
    pub elapsed: Duration,
    pub message: M,
}

/// The text of a report: the latest line as [`with_progress`]'s `redact` made it, which the
/// report's words then frame.
pub trait ReportText {
    /// The text inside the words `frame` puts around it.
    fn framed(self, frame: impl FnOnce(&str) -> String) -> Self;
}

impl ReportText for Shown {
    fn framed(self, frame: impl FnOnce(&str) -> String) -> Self {
        Shown::framed(self, frame)
    }
}

impl ReportText for String {
    fn framed(self, frame: impl FnOnce(&str) -> String) -> Self {
        frame(&self)
    }
}

/// Where the execution loop leaves the newest line of output: the sandbox's [`OutputTap`].
///
/// Output arrives in chunks cut anywhere, so a line is taken only once it is complete (ended by
/// `\n`, or by `\r` as progress bars end theirs): a chunk ending in `card 4111 11` must not
/// show those digits. A line is kept up to [`MAX_LINE_CHARS`] plus [`EDGE_BYTES`] characters;
/// the report cuts it to [`MAX_LINE_CHARS`] after the PII engine has seen the rest.
#[derive(Debug, Clone)]
pub struct LatestLine {
    latest: watch::Sender<String>,
    /// The start of the line still being printed (bounded).
    partial: Arc<Mutex<String>>,
}

/// Characters of a line kept: what a report shows, and what follows for the PII engine.
const KEPT_CHARS: usize = MAX_LINE_CHARS + EDGE_BYTES;

impl LatestLine {
    pub fn new() -> (Self, watch::Receiver<String>) {
        let (tx, rx) = watch::channel(String::new());
        let tap = Self {
            latest: tx,
            partial: Arc::default(),
        };
        (tap, rx)
    }
}

/// The first [`KEPT_CHARS`] characters of `s`.
fn kept(s: &str) -> &str {
    crate::text::prefix_chars(s, KEPT_CHARS)
}

impl OutputTap for LatestLine {
    /// Keeps the last complete non-blank line printed so far, if there is one. Only that line
    /// is copied: a chunk of thousands of short lines costs one scan, not one string each.
    fn offer(&self, data: &str) {
        let mut partial = self.partial.lock().unwrap_or_else(|p| p.into_inner());
        let Some(end) = data.rfind(['\n', '\r']) else {
            // No line ends here: the line being printed grows (bounded).
            if partial.chars().count() < KEPT_CHARS {
                let joined = format!("{partial}{data}");
                *partial = kept(&joined).to_string();
            }
            return;
        };
        let (complete, rest) = (&data[..end], &data[end + 1..]);
        // The first line of the chunk continues what the previous chunk left unfinished.
        let first_len = complete.find(['\n', '\r']).unwrap_or(complete.len());
        let line = complete[first_len..]
            .rsplit(['\n', '\r'])
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(|l| kept(l).to_string())
            .or_else(|| {
                let first = format!("{partial}{}", kept(&complete[..first_len]));
                let first = kept(&first).trim();
                (!first.is_empty()).then(|| first.to_string())
            });
        *partial = kept(rest).to_string();
        drop(partial);
        if let Some(line) = line {
            self.latest.send_if_modified(|kept| {
                if *kept == line {
                    return false;
                }
                *kept = line;
                true
            });
        }
    }
}

/// The message of a report after `elapsed`, with the newest output line if there is one.
pub fn message(elapsed: Duration, latest: &str) -> String {
    let secs = elapsed.as_secs();
    if latest.is_empty() {
        format!("running for {secs} s, no output yet")
    } else {
        format!("running for {secs} s; latest output: {latest}")
    }
}

/// Runs `execution` to completion, calling `report` every [`INTERVAL`] meanwhile with the
/// elapsed time and the newest output line passed through `redact`, which cuts it to
/// [`MAX_LINE_CHARS`] and tokenizes it (`Privacy::text_cut`: the text goes to the
/// model). Returns the execution's own result; reports stop before it is returned.
pub async fn with_progress<T, M: ReportText, R: Future<Output = ()>>(
    execution: impl Future<Output = T>,
    latest: watch::Receiver<String>,
    redact: impl Fn(String) -> M,
    mut report: impl FnMut(Progress<M>) -> R,
) -> T {
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(started + INTERVAL, INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tokio::pin!(execution);
    loop {
        tokio::select! {
            biased;
            done = &mut execution => return done,
            _ = ticks.tick() => {
                let elapsed = started.elapsed();
                let line = redact(latest.borrow().clone());
                let message = line.framed(|line| message(elapsed, line));
                let progress = Progress { elapsed, message };
                // The execution is not polled while this runs: bound it.
                let _ = tokio::time::timeout(SEND_BUDGET, report(progress)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tap_keeps_the_last_complete_non_blank_line_bounded() {
        let (tap, rx) = LatestLine::new();
        tap.offer("first\nsecond\n\n  \n");
        assert_eq!(*rx.borrow(), "second");
        tap.offer("\n");
        assert_eq!(*rx.borrow(), "second", "blank output keeps the last line");
        tap.offer(&"é".repeat(KEPT_CHARS + 50));
        assert_eq!(
            *rx.borrow(),
            "second",
            "a line is taken once it is complete"
        );
        tap.offer("é\n");
        assert_eq!(rx.borrow().chars().count(), KEPT_CHARS);
        tap.offer("card on file: 4111 11");
        assert!(rx.borrow().starts_with('é'), "no half of a line is shown");
        tap.offer("11 1111 1111\r");
        assert_eq!(*rx.borrow(), "card on file: 4111 1111 1111 1111");
        tap.offer("50%\r60%\r70");
        assert_eq!(*rx.borrow(), "60%", "a progress bar's updates end with \\r");
    }

    #[test]
    fn messages_say_whether_there_was_output() {
        assert_eq!(
            message(Duration::from_millis(2500), ""),
            "running for 2 s, no output yet"
        );
        assert_eq!(
            message(Duration::from_secs(3), "step 4"),
            "running for 3 s; latest output: step 4"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn reports_come_every_interval_with_redacted_output_and_stop_at_the_end() {
        let (tap, rx) = LatestLine::new();
        let mut reports = Vec::new();
        let execution = async {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            tap.offer("card 4111 1111 1111 1111\n");
            tokio::time::sleep(Duration::from_millis(1700)).await;
            42
        };
        let out = with_progress(
            execution,
            rx,
            |s| s.replace("4111 1111 1111 1111", "[CARD]"),
            |p| {
                reports.push(p);
                std::future::ready(())
            },
        )
        .await;
        assert_eq!(out, 42);
        let messages: Vec<&str> = reports.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            messages,
            [
                "running for 1 s, no output yet",
                "running for 2 s; latest output: card [CARD]",
                "running for 3 s; latest output: card [CARD]",
            ]
        );
        assert!(reports.windows(2).all(|w| w[0].elapsed < w[1].elapsed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_quick_execution_sends_no_report() {
        let (_tap, rx) = LatestLine::new();
        let mut count = 0;
        let out = with_progress(
            async { 7 },
            rx,
            |s| s,
            |_| {
                count += 1;
                std::future::ready(())
            },
        )
        .await;
        assert_eq!((out, count), (7, 0));
    }
}
