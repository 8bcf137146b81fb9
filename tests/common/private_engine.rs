//! Docker engines of a test's own, for the fault tests (tests/faults/):
//!
//! * [`PrivateEngine`]: a second `dockerd` on a socket in a temp directory, with its own data
//!   root, exec root (so its own managed containerd), no bridge and no iptables rules, in a
//!   network namespace of its own, that a test may stop and restart at will. The machine's main
//!   engine is never touched: other tests run on it. (The network namespace matters: a daemon
//!   started with `--bridge=none` deletes the `docker0` interface it finds, which in the host's
//!   namespace is the main engine's bridge.) Dropping it stops the daemon, unmounts what it
//!   mounted and removes the directory.
//! * [`EngineProxy`]: a unix-socket proxy in front of the main engine that can delay every
//!   forwarded chunk or stall altogether, to stand in for a slow or stuck engine.
//!
//! A server is pointed at either with `DOCKER_HOST=unix://…` (the engine connects with bollard's
//! local defaults, which honour it).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::ListContainersOptionsBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// Storage drivers tried in order: the main engine here runs fuse-overlayfs; vfs works anywhere
/// (slower: it copies the image for every container).
const DRIVERS: [&str; 2] = ["fuse-overlayfs", "vfs"];
/// Longest wait for the daemon to answer after it was started.
const READY_LIMIT: Duration = Duration::from_secs(60);
/// Longest wait for the daemon to exit after SIGTERM (it first stops its containers, 10 s each
/// at most, in parallel) before it is killed.
const STOP_LIMIT: Duration = Duration::from_secs(45);

/// A `dockerd` of the test's own. See the module docs.
pub struct PrivateEngine {
    dir: PathBuf,
    driver: &'static str,
    /// Extra daemon arguments (a runtime, say).
    extra: Vec<String>,
    child: Option<Child>,
    started: u32,
}

impl PrivateEngine {
    /// Starts the daemon, trying each storage driver; panics with the daemon's log when none
    /// works.
    pub async fn start() -> Self {
        Self::start_with(&DRIVERS, &[]).await
    }

    /// Starts the daemon with the first of `drivers` that works and `extra` arguments (e.g.
    /// `--add-runtime=crun=/usr/bin/crun`); panics with the daemon's log when none works.
    pub async fn start_with(drivers: &[&'static str], extra: &[String]) -> Self {
        // Short: unix socket paths are limited to 108 bytes, containerd's included.
        let dir = std::env::temp_dir().join(format!(
            "cem-engine-{}-{}",
            std::process::id(),
            uuid_fragment()
        ));
        std::fs::create_dir_all(&dir).expect("create the private engine's directory");
        // An empty configuration: the machine's /etc/docker/daemon.json sets the data root and
        // storage driver too, and dockerd refuses a directive given both ways.
        std::fs::write(dir.join("daemon.json"), "{}").unwrap();
        let mut engine = Self {
            dir,
            driver: drivers[0],
            extra: extra.to_vec(),
            child: None,
            started: 0,
        };
        let mut logs = String::new();
        for &driver in drivers {
            engine.driver = driver;
            if engine.spawn_and_wait().await {
                eprintln!(
                    "private engine: dockerd ({driver}) at {}",
                    engine.socket().display()
                );
                return engine;
            }
            logs.push_str(&format!(
                "--- dockerd with {driver} ---\n{}\n",
                engine.log_tail(40)
            ));
            engine.stop();
            engine.unmount_all();
            let _ = std::fs::remove_dir_all(engine.dir.join("data"));
        }
        panic!("the private Docker engine did not start with any storage driver:\n{logs}");
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("docker.sock")
    }

    /// The value for `DOCKER_HOST`.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    pub fn driver(&self) -> &'static str {
        self.driver
    }

    /// The directory holding the socket, data and exec roots, and the log.
    pub fn root(&self) -> &Path {
        &self.dir
    }

    /// A client of this engine (API version negotiated).
    pub async fn client(&self) -> Docker {
        let docker = Docker::connect_with_unix(&self.host(), 30, bollard::API_DEFAULT_VERSION)
            .expect("client for the private engine");
        docker
            .negotiate_version()
            .await
            .expect("the private engine answers")
    }

    /// Whether the daemon answers a ping now.
    pub async fn answers(&self) -> bool {
        let Ok(docker) = Docker::connect_with_unix(&self.host(), 5, bollard::API_DEFAULT_VERSION)
        else {
            return false;
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(5), docker.ping()).await,
            Ok(Ok(_))
        )
    }

    /// Copies `image` from the main engine (`docker save | docker -H … load`).
    pub fn load_image(&self, image: &str) {
        let mut save = Command::new("docker")
            .args(["save", image])
            .stdout(Stdio::piped())
            .spawn()
            .expect("run docker save");
        let status = Command::new("docker")
            .args(["-H", &self.host(), "load", "-q"])
            .stdin(save.stdout.take().unwrap())
            .stdout(Stdio::null())
            .status()
            .expect("run docker load");
        assert!(save.wait().unwrap().success(), "docker save {image} failed");
        assert!(
            status.success(),
            "docker load of {image} into the private engine failed"
        );
    }

    /// Stops the daemon gracefully (SIGTERM, waiting for it to exit; killed after
    /// [`STOP_LIMIT`]). Its managed containerd goes with it.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal(child.id() as i32, libc::SIGTERM);
        let until = Instant::now() + STOP_LIMIT;
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if Instant::now() > until {
                eprintln!(
                    "private engine: dockerd did not exit within {STOP_LIMIT:?}; killing it\n{}",
                    self.log_tail(20)
                );
                let _ = child.kill();
                let _ = child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill_containerd();
    }

    /// Starts the daemon again with the same arguments, waiting until it answers.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the engine first");
        assert!(
            self.spawn_and_wait().await,
            "the private engine did not start again:\n{}",
            self.log_tail(40)
        );
    }

    /// Every container the engine holds (running or not), as (id, name, state).
    pub async fn containers(&self) -> Vec<(String, String, String)> {
        let opts = ListContainersOptionsBuilder::default().all(true).build();
        self.client()
            .await
            .list_containers(Some(opts))
            .await
            .expect("list the private engine's containers")
            .into_iter()
            .map(|c| {
                (
                    c.id.unwrap_or_default(),
                    c.names.unwrap_or_default().join(","),
                    c.state.map(|s| s.to_string()).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The last `n` lines of the daemon's log.
    pub fn log_tail(&self, n: usize) -> String {
        let Ok(file) = std::fs::File::open(self.dir.join("dockerd.log")) else {
            return "(no log)".into();
        };
        let lines: Vec<String> = std::io::BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    fn args(&self) -> Vec<String> {
        let d = self.dir.display();
        vec![
            format!("--config-file={d}/daemon.json"),
            format!("--host=unix://{d}/docker.sock"),
            format!("--data-root={d}/data"),
            format!("--exec-root={d}/exec"),
            format!("--pidfile={d}/dockerd.pid"),
            format!("--storage-driver={}", self.driver),
            "--bridge=none".into(),
            "--iptables=false".into(),
            "--ip6tables=false".into(),
            "--ip-masq=false".into(),
        ]
        .into_iter()
        .chain(self.extra.iter().cloned())
        .collect()
    }

    async fn spawn_and_wait(&mut self) -> bool {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("dockerd.log"))
            .unwrap();
        self.started += 1;
        writeln!(log, "=== start {} ({}) ===", self.started, self.driver).unwrap();
        // In a network namespace of its own: see the module docs. Sockets are paths, so they
        // work across namespaces; mounts are shared, so the workspace bind mounts work.
        let mut command = Command::new("unshare");
        if self.extra.iter().any(|a| a.contains("crun")) && hybrid_cgroups() {
            // crun refuses a hybrid cgroup layout (v1 controllers beside a cgroup2 mount that
            // has controllers of its own): such a daemon gets a mount namespace of its own
            // without the cgroup2 mount, which crun then sees as plain cgroup v1. The
            // directories it bind-mounts already exist, so they are the same there.
            command.args(["--net", "--mount", "--propagation", "private", "--"]);
            command.args([
                "sh",
                "-c",
                r#"umount /sys/fs/cgroup/unified && exec dockerd "$@""#,
            ]);
            command.arg("dockerd");
        } else {
            command.args(["--net", "--", "dockerd"]);
        }
        let child = command
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("run unshare --net dockerd (are util-linux and docker.io installed?)");
        self.child = Some(child);
        let until = Instant::now() + READY_LIMIT;
        while Instant::now() < until {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                eprintln!("private engine: dockerd ({}) exited: {status}", self.driver);
                return false;
            }
            if self.answers().await {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// The managed containerd normally exits with its daemon; one that did not is killed.
    fn kill_containerd(&self) {
        let pidfile = self.dir.join("exec/containerd/containerd.pid");
        let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        else {
            return;
        };
        let until = Instant::now() + Duration::from_secs(10);
        while is_containerd(pid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        if is_containerd(pid) {
            signal(pid, libc::SIGKILL);
        }
    }

    /// Unmounts everything mounted below the directory (overlay and fuse mounts of containers,
    /// network namespaces), deepest first.
    fn unmount_all(&self) {
        for _ in 0..3 {
            let mounts = mounts_below(&self.dir);
            if mounts.is_empty() {
                return;
            }
            for m in mounts.iter().rev() {
                use std::os::unix::ffi::OsStrExt;
                let Ok(c) = std::ffi::CString::new(m.as_os_str().as_bytes()) else {
                    continue;
                };
                // SAFETY: a valid NUL-terminated path; umount2 has no other preconditions.
                unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            }
        }
    }
}

impl Drop for PrivateEngine {
    fn drop(&mut self) {
        self.stop();
        self.unmount_all();
        let left = mounts_below(&self.dir);
        if left.is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!(
                "private engine: mounts left below {}: {left:?}",
                self.dir.display()
            );
        }
    }
}

/// Whether the host mixes cgroup v1 hierarchies with a cgroup2 mount that has controllers.
fn hybrid_cgroups() -> bool {
    std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers")
        .is_ok_and(|c| !c.trim().is_empty())
}

/// Whether `pid` is a running containerd (not a reused pid).
fn is_containerd(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "containerd")
}

/// Sends `sig` to process `pid` (a process of this test's own).
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, sig) };
}

/// Mount points at or below `dir`, in mount order (from /proc/self/mountinfo).
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mountinfo)
        .filter(|p| p.starts_with(dir))
        .collect()
}

/// Mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> PathBuf {
    let mut out = Vec::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

fn uuid_fragment() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// A proxy in front of an engine's socket. Every chunk forwarded (either way) waits
/// [`EngineProxy::set_delay`] first; [`EngineProxy::stall`] stops forwarding altogether (new
/// connections are accepted, nothing passes) until [`EngineProxy::resume`]. A connection made
/// while the engine is down waits for it (up to a minute), as with systemd's `docker.socket`,
/// which holds the socket while the daemon restarts. Dropping it closes every connection
/// without forwarding what it holds.
pub struct EngineProxy {
    dir: tempfile::TempDir,
    delay_ms: Arc<AtomicU64>,
    stalled: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl EngineProxy {
    /// Listens on a socket in a temp directory, forwarding to the engine the test process
    /// itself uses (DOCKER_HOST or /var/run/docker.sock).
    pub fn start() -> Self {
        let upstream = std::env::var("DOCKER_HOST")
            .ok()
            .and_then(|h| h.strip_prefix("unix://").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("/var/run/docker.sock"));
        Self::to(upstream)
    }

    /// Listens on a socket in a temp directory, forwarding to the engine at `upstream`.
    pub fn to(upstream: PathBuf) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cem-proxy")
            .tempdir()
            .unwrap();
        let listener = UnixListener::bind(dir.path().join("docker.sock")).unwrap();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let (stalled, stall_rx) = watch::channel(false);
        let delay = delay_ms.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, delay, stall) = (upstream.clone(), delay.clone(), stall_rx.clone());
                connections.spawn(async move {
                    let Some(engine) = connect_waiting(&upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (er, ew) = engine.into_split();
                    tokio::join!(
                        pump(cr, ew, delay.clone(), stall.clone()),
                        pump(er, cw, delay, stall)
                    );
                });
            }
        });
        Self {
            dir,
            delay_ms,
            stalled,
            task,
        }
    }

    /// The value for `DOCKER_HOST`.
    pub fn host(&self) -> String {
        format!("unix://{}", self.dir.path().join("docker.sock").display())
    }

    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    pub fn resume(&self) {
        self.stalled.send_replace(false);
    }
}

impl Drop for EngineProxy {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every pump.
        self.task.abort();
    }
}

/// Connects to `path`, retrying for up to a minute while nothing listens there.
async fn connect_waiting(path: &Path) -> Option<UnixStream> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match UnixStream::connect(path).await {
            Ok(s) => return Some(s),
            Err(_) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(_) => return None,
        }
    }
}

/// Copies one direction of a connection, chunk by chunk, honouring the delay and the stall.
async fn pump(
    mut from: tokio::net::unix::OwnedReadHalf,
    mut to: tokio::net::unix::OwnedWriteHalf,
    delay_ms: Arc<AtomicU64>,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        let delay = delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}
