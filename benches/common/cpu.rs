//! What one call costs the machine, in CPU time, split three ways: the sandbox containers
//! (the engine's cgroup parent, whose `cpuacct.usage` keeps the time of children already
//! removed), the engine's own processes (dockerd, containerd and what they start: shims, the
//! runtime, fuse-overlayfs) and the server process. On cgroup v1, where the engine's processes
//! sit in the root cgroup (a daemon started by hand), the meter moves them into a cgroup of
//! its own for the run, and back when it is dropped; an engine under systemd is read where it
//! is. Anything it cannot read is said, never guessed.

use std::path::{Path, PathBuf};

const CPUACCT: &str = "/sys/fs/cgroup/cpuacct";
/// The cgroup the meter makes for an engine found in the root cgroup.
const OWN: &str = "cem-bench-engine";
/// The engine's processes, by command name.
const ENGINE: [&str; 5] = [
    "dockerd",
    "containerd",
    "containerd-shim-runc-v2",
    "containerd-shim",
    "fuse-overlayfs",
];

/// CPU time consumed so far, in nanoseconds.
#[derive(Clone, Copy, Default, Debug)]
pub struct CpuSample {
    pub containers: f64,
    pub engine: f64,
    pub server: f64,
}

impl CpuSample {
    pub fn since(&self, before: &CpuSample) -> CpuSample {
        CpuSample {
            containers: self.containers - before.containers,
            engine: self.engine - before.engine,
            server: self.server - before.server,
        }
    }

    pub fn add(&mut self, other: &CpuSample) {
        self.containers += other.containers;
        self.engine += other.engine;
        self.server += other.server;
    }

    /// Milliseconds of CPU each, divided by `n`.
    pub fn per(&self, n: f64) -> [f64; 3] {
        let ms = |ns: f64| ns / 1e6 / n.max(1.0);
        [ms(self.containers), ms(self.engine), ms(self.server)]
    }
}

/// Where the three are read.
pub struct CpuMeter {
    containers: PathBuf,
    engine: Vec<PathBuf>,
    /// Processes this meter moved into [`OWN`], to move back.
    moved: bool,
}

impl CpuMeter {
    /// The meter, or why there is none on this machine.
    pub fn open() -> Result<Self, String> {
        let containers = Path::new(CPUACCT).join("docker/cpuacct.usage");
        if !containers.exists() {
            return Err(format!(
                "{} is not there (cgroup v1 with the cgroupfs driver is what this meter reads)",
                containers.display()
            ));
        }
        let pids = engine_pids();
        if pids.is_empty() {
            return Err("no dockerd or containerd process found".into());
        }
        let groups: Vec<String> = pids.iter().filter_map(|p| cpuacct_group(*p)).collect();
        let moved = groups.iter().any(|g| g == "/");
        let mut engine: Vec<PathBuf> = Vec::new();
        if moved {
            let own = Path::new(CPUACCT).join(OWN);
            std::fs::create_dir_all(&own).map_err(|e| format!("{}: {e}", own.display()))?;
            for pid in &pids {
                // A process that ended meanwhile is no matter.
                let _ = std::fs::write(own.join("cgroup.procs"), pid.to_string());
            }
            engine.push(own.join("cpuacct.usage"));
        }
        for group in groups.iter().filter(|g| *g != "/") {
            let path = Path::new(CPUACCT)
                .join(group.trim_start_matches('/'))
                .join("cpuacct.usage");
            if !engine.contains(&path) {
                engine.push(path);
            }
        }
        Ok(Self {
            containers,
            engine,
            moved,
        })
    }

    pub fn sample(&self, server_pid: u32) -> CpuSample {
        CpuSample {
            containers: read_ns(&self.containers),
            engine: self.engine.iter().map(|p| read_ns(p)).sum(),
            server: process_ns(server_pid),
        }
    }
}

impl Drop for CpuMeter {
    fn drop(&mut self) {
        if !self.moved {
            return;
        }
        let own = Path::new(CPUACCT).join(OWN);
        let procs = std::fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write(Path::new(CPUACCT).join("cgroup.procs"), pid);
        }
        let _ = std::fs::remove_dir(&own);
    }
}

fn read_ns(path: &Path) -> f64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{} cannot be read", path.display()))
}

/// A process's own CPU time and that of the children it waited for, in nanoseconds.
pub fn process_ns(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<f64> = (rest.split_whitespace())
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    // utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the command.
    let ticks: f64 = fields.get(11..15).map_or(0.0, |f| f.iter().sum());
    // /proc counts in USER_HZ, which Linux's ABI fixes at 100 a second.
    ticks / 100.0 * 1e9
}

fn engine_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            ENGINE.contains(&comm.trim())
        })
        .collect()
}

fn cpuacct_group(pid: u32) -> Option<String> {
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "cpuacct")
            .then(|| path.to_string())
    })
}
