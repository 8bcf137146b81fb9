//! A core held busy while a bench measures, so its rows show what a user meets on a machine
//! doing other work too.

use std::process::{Child, Command};

/// A CPU-bound process holding one core until dropped.
pub struct BusyCore(Child);

impl BusyCore {
    pub fn start() -> BusyCore {
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("start the busy loop");
        BusyCore(child)
    }
}

impl Drop for BusyCore {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
