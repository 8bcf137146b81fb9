//! The frame loop's pieces: the state it accumulates, why it stops, and its bounds.

use super::outcome::MAX_ERROR_BYTES;
use crate::sandbox::channel::{HarnessLimits, LineSplitter, StreamName};
use crate::sandbox::output::BoundedText;

/// Bytes the server reads from one container before it kills it as a flood. The harness
/// stops forwarding at the output limits, so only code that bypasses it gets here.
pub(super) fn hard_cap(limits: HarnessLimits) -> u64 {
    let kept = 2 * limits.max_output_bytes + limits.max_result_bytes;
    8 * kept as u64 + 16 * 1024 * 1024
}

/// Longest frame accepted: a done frame carries the result (as JSON text inside JSON, which
/// escaping can double when it is cut), the error and the traceback.
pub(super) fn frame_limit(limits: HarnessLimits) -> usize {
    2 * limits.max_result_bytes + 2 * MAX_ERROR_BYTES + (1 << 20)
}

/// The state the frame loop accumulates.
pub(super) struct Collector {
    pub(super) stdout: BoundedText,
    pub(super) stderr: BoundedText,
    pub(super) splitter: LineSplitter,
    pub(super) received: u64,
    pub(super) done: Option<crate::sandbox::channel::DoneFrame>,
}

impl Collector {
    pub(super) fn output(&mut self, stream: StreamName, data: &str, truncated: bool, dropped: u64) {
        let text = match stream {
            StreamName::Stdout => &mut self.stdout,
            StreamName::Stderr => &mut self.stderr,
        };
        text.push(data);
        if truncated {
            text.note_dropped(dropped);
        }
    }
}

/// Why the frame loop stopped.
pub(super) enum Stop {
    Done,
    Eof,
    Deadline,
    Cancelled,
    Flood,
}
