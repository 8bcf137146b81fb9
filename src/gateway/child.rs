//! A stdio upstream's process: killed with its group when it is done with, and its stderr read
//! a bounded line at a time.

use tokio::io::AsyncBufReadExt;

/// A stdio upstream's process, killed with its whole process group when the connection that
/// owns it ends (a wrapper such as `uvx` or `npx` would otherwise leave the real server
/// running), and when the process itself exits: a child it left behind may hold its stdout
/// open, and the connection would then never see its end (the upstream never restarted, its
/// calls waiting out their timeout).
pub(super) struct ChildGuard {
    group: Option<u32>,
    /// Waits for the process and kills its group when it exits; owns the `Child`, which is
    /// killed when the task is aborted.
    watcher: tokio::task::JoinHandle<()>,
}

impl ChildGuard {
    pub(super) fn watch(mut child: tokio::process::Child, group: Option<u32>) -> Self {
        let watcher = tokio::spawn(async move {
            let _ = child.wait().await;
            if let Some(pid) = group {
                kill_group(pid);
            }
        });
        Self { group, watcher }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.group {
            kill_group(pid);
        }
        // Dropping the task drops the `Child`, which kills it (`kill_on_drop`).
        self.watcher.abort();
    }
}

fn kill_group(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Reads up to a newline, keeping at most `max` bytes of the line (the rest is skipped), so a
/// stderr without newlines cannot grow a buffer without bound. Returns the bytes consumed.
pub(super) async fn read_bounded_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = max.saturating_sub(line.len());
        line.extend_from_slice(&buf[..take.min(room)]);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}
