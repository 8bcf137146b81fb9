//! `GET /health` as a proxy (HAProxy, the swarm's checks) sees it: 200 while the engine answers,
//! 503 saying why while it does not (a proxy in front of the engine's socket stops forwarding),
//! and 200 again once it answers, from the same server process. And `--shared-data` on a data
//! directory of this machine's own disk refuses to start (a node whose shared mount did not
//! come up must not serve).

use std::time::Duration;

use crate::common::private_engine::EngineProxy;
use crate::common::{serve_command, stop_with_sigterm};

/// `GET /health` on `port`: the status code and the body.
async fn health(port: u16) -> (u16, String) {
    let r = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{port}/health"))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("/health answers");
    (r.status().as_u16(), r.text().await.unwrap_or_default())
}

/// The status of the first `/health` a starting server on `port` answers once it has started:
/// it listens from the start, answering 503 `starting` until then (`None`: not started within
/// 60 s).
async fn first_health(port: u16) -> Option<u16> {
    for _ in 0..600 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/health")).await {
            let status = r.status().as_u16();
            let body = r.text().await.unwrap_or_default();
            if !(status == 503 && body.contains(r#""status":"starting""#)) {
                return Some(status);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// `serve` over HTTP on `port`, without a pool, plus `args`.
fn http_server(dir: &std::path::Path, port: u16, args: &[&str]) -> tokio::process::Command {
    let listen = format!("127.0.0.1:{port}");
    let mut all = vec![
        "--transport",
        "http",
        "--listen",
        &listen,
        "--pool-size",
        "0",
    ];
    all.extend_from_slice(args);
    serve_command(dir, &all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_503_while_the_engine_does_not_answer() {
    code_execution_mcp::install_tls_provider(); // reqwest's client needs one
    let proxy = EngineProxy::start();
    let host = proxy.host();
    let dir = tempfile::tempdir().unwrap();
    let port = crate::common::free_port();
    let mut child = http_server(dir.path(), port, &[])
        .env("DOCKER_HOST", &host)
        .spawn()
        .expect("spawn the server binary");
    let up = first_health(port).await;
    assert_eq!(up, Some(200), "the server serves /health once started");

    proxy.stall();
    let (status, body) = health(port).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("the Docker engine does not answer"), "{body}");

    proxy.resume();
    let (status, body) = health(port).await;
    assert_eq!(status, 200, "the same process is healthy again: {body}");

    stop_with_sigterm(&mut child).await;
}

#[tokio::test]
async fn serve_with_shared_data_on_local_storage_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap(); // there, but on this machine's own disk
    let out = serve_command(
        dir.path(),
        &[
            "--shared-data",
            "--data-dir",
            data.to_str().unwrap(),
            "--pool-size",
            "0",
        ],
    )
    .stderr(std::process::Stdio::piped())
    .output()
    .await
    .expect("run the server binary");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "it started on local storage: {stderr}"
    );
    assert!(
        stderr.contains("is on local storage") && stderr.contains("--shared-data"),
        "{stderr}"
    );
}

/// A FUSE mount (bindfs) of a directory: a filesystem the server takes for shared storage,
/// whose daemon the test can stop (reads hang) and kill (reads fail). Unmounted when dropped.
struct FuseMount {
    mount: std::path::PathBuf,
    daemon: rustix::process::Pid,
}

impl FuseMount {
    fn new(source: &std::path::Path, mount: &std::path::Path) -> Self {
        std::fs::create_dir_all(source).unwrap();
        std::fs::create_dir_all(mount).unwrap();
        let status = std::process::Command::new("bindfs")
            .arg(source)
            .arg(mount)
            .status()
            .expect("run bindfs");
        assert!(status.success(), "bindfs {source:?} {mount:?}: {status}");
        let out = std::process::Command::new("pgrep")
            .args(["-n", "-f"])
            .arg(format!("bindfs {} {}", source.display(), mount.display()))
            .output()
            .expect("pgrep");
        let pid: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        Self {
            mount: mount.to_path_buf(),
            daemon: rustix::process::Pid::from_raw(pid).unwrap(),
        }
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let _ = rustix::process::kill_process(self.daemon, signal);
    }
}

impl Drop for FuseMount {
    fn drop(&mut self) {
        self.signal(rustix::process::Signal::CONT);
        self.signal(rustix::process::Signal::KILL);
        let _ = std::process::Command::new("fusermount")
            .args(["-u", "-z"])
            .arg(&self.mount)
            .status();
    }
}

/// Waits up to `limit` for `/health` to answer `status`; the last answer.
async fn health_becomes(port: u16, status: u16, limit: Duration) -> (u16, String) {
    let started = std::time::Instant::now();
    loop {
        let answer = health(port).await;
        if answer.0 == status || started.elapsed() > limit {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root: mounts a FUSE filesystem (bindfs) as the shared data volume"]
async fn health_answers_503_while_the_shared_data_volume_hangs_or_fails() {
    crate::common::require_root("a FUSE mount");
    code_execution_mcp::install_tls_provider(); // reqwest's client needs one
    if std::process::Command::new("bindfs")
        .arg("--version")
        .output()
        .is_err()
    {
        return crate::common::skip(
            "health_answers_503_while_the_shared_data_volume_hangs_or_fails",
            "bindfs is missing (apt-get install bindfs)",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let volume = FuseMount::new(&dir.path().join("brick"), &dir.path().join("volume"));
    let port = crate::common::free_port();
    let data = volume.mount.join("data");
    std::fs::create_dir(&data).unwrap();
    let mut child = http_server(
        dir.path(),
        port,
        &["--shared-data", "--data-dir", data.to_str().unwrap()],
    )
    .spawn()
    .expect("spawn the server binary");
    let up = first_health(port).await;
    assert_eq!(up, Some(200), "the server serves from the FUSE volume");

    // The volume hangs (its daemon stopped): /health still answers at once, 503 once a read
    // has hung past the stall limit.
    volume.signal(rustix::process::Signal::STOP);
    let limit = code_execution_mcp::host::storage::STALL_LIMIT + Duration::from_secs(30);
    let (status, body) = health_becomes(port, 503, limit).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("has not answered for"), "{body}");
    volume.signal(rustix::process::Signal::CONT);
    let (status, body) = health_becomes(port, 200, Duration::from_secs(30)).await;
    assert_eq!(status, 200, "the volume answers again: {body}");

    // The volume fails (its daemon gone): 503 saying the reads fail.
    volume.signal(rustix::process::Signal::KILL);
    let (status, body) = health_becomes(port, 503, Duration::from_secs(30)).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("cannot be read"), "{body}");

    let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
}
