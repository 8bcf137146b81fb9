//! Faults around the server, each against the real engine: the Docker daemon stopped or
//! restarted under a running server (a private daemon, see `common::private_engine`), the server
//! SIGKILLed mid-execution and mid-write, a slow or stalled engine (a proxy in front of the
//! socket), and a skills directory or tool registry the server cannot read. (A full workspace is
//! tested in tests/workspace_tools.rs.) Every test asserts the safe outcome (a clear error, no
//! hang, no panic, no partial file) and leaves no container behind.

mod common;

use code_execution_mcp::sandbox::Backend;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::private_engine::{EngineProxy, PrivateEngine};
use common::{call_tool, root_or_skip, serve_command, try_call_tool};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use tokio::process::Child;

/// A server binary over stdio whose stderr is kept (and echoed) for assertions.
struct Server {
    child: Child,
    client: RunningService<RoleClient, ()>,
    stderr: Arc<Mutex<String>>,
    tee: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn spawn(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Self {
        use rmcp::ServiceExt;
        let mut child = serve_command(dir, args)
            .envs(env.iter().copied())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the server binary");
        let (stderr, tee) = tee_stderr(&mut child);
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let client = ().serve((stdout, stdin)).await.expect("MCP handshake");
        Self {
            child,
            client,
            stderr,
            tee,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Runs `code`; returns (is_error, response, how long the call took). Panics if the call
    /// does not answer within `limit`.
    async fn exec(&self, code: &str, timeout: f64, limit: Duration) -> (bool, Value, Duration) {
        let started = Instant::now();
        let call = call_tool(
            &self.client,
            "execute_code",
            json!({"code": code, "timeout_seconds": timeout}),
        );
        let (err, v) = tokio::time::timeout(limit, call)
            .await
            .unwrap_or_else(|_| panic!("execute_code did not answer within {limit:?}"));
        (err, v, started.elapsed())
    }

    /// Closes the session and waits for the process to exit (panics after `limit`).
    async fn close(self, limit: Duration) -> String {
        let Self {
            mut child,
            client,
            stderr,
            tee,
        } = self;
        let _ = client.cancel().await;
        let status = tokio::time::timeout(limit, child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!("the server did not exit within {limit:?} of its stdin closing")
            })
            .unwrap();
        // Everything it wrote, up to the end of its stderr.
        let _ = tokio::time::timeout(Duration::from_secs(10), tee).await;
        let stderr = stderr.lock().unwrap().clone();
        assert!(status.success(), "server exit: {status}\n{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        stderr
    }
}

/// Copies the child's stderr to the test's, keeping it; the task ends with the stderr.
fn tee_stderr(child: &mut Child) -> (Arc<Mutex<String>>, tokio::task::JoinHandle<()>) {
    use tokio::io::AsyncBufReadExt;
    let kept = Arc::new(Mutex::new(String::new()));
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let sink = kept.clone();
    let task = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("  server: {line}");
            let mut s = sink.lock().unwrap();
            s.push_str(&line);
            s.push('\n');
        }
    });
    (kept, task)
}

/// The text of an execute_code error: the `error` field, or the plain text of a failure.
fn error_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v["error"].as_str().unwrap_or_default().to_string(),
    }
}

async fn wait_for_file(path: &Path, limit: Duration) {
    let until = Instant::now() + limit;
    while !path.exists() {
        assert!(Instant::now() < until, "{} did not appear", path.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the stats tool until the pool holds `n` ready containers.
async fn wait_for_pool(server: &Server, n: u64, limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        let (_, v) = call_tool(&server.client, "get_execution_stats", json!({})).await;
        if v["executions"]["pool_ready"] == json!(n) {
            return;
        }
        assert!(
            Instant::now() < until,
            "the pool did not refill to {n} within {limit:?}: {}",
            v["executions"]
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Starts `code` (which must create `/workspace/<marker>` first) in the background and waits
/// until it runs; the handle gives the call's result and how long it took.
async fn start_long(
    server: &Server,
    ws: &Path,
    marker: &str,
) -> tokio::task::JoinHandle<(Result<(bool, Value), rmcp::service::ServiceError>, Duration)> {
    let code = format!("import time\nopen('/workspace/{marker}', 'w').close()\ntime.sleep(60)");
    let client = server.client.clone();
    let call = tokio::spawn(async move {
        let t = Instant::now();
        let r = try_call_tool(
            &client,
            "execute_code",
            json!({"code": code, "timeout_seconds": 120}),
        )
        .await;
        (r, t.elapsed())
    });
    wait_for_file(&ws.join(marker), Duration::from_secs(60)).await;
    call
}

/// The stats tool's execution counters.
async fn executions(server: &Server) -> Value {
    call_tool(&server.client, "get_execution_stats", json!({}))
        .await
        .1["executions"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_stopped_or_restarted_under_a_running_server() {
    if !root_or_skip("a private Docker engine") {
        return;
    }
    let started = Instant::now();
    // The main engine's bridge: the private engine must leave it alone.
    let bridge = Path::new("/sys/class/net/docker0");
    let had_bridge = bridge.exists();
    let mut engine = PrivateEngine::start().await;
    let image = code_execution_mcp::sandbox::image::default_tag();
    let main = code_execution_mcp::sandbox::Engine::connect()
        .await
        .unwrap();
    code_execution_mcp::sandbox::image::ensure(&main, &image, None)
        .await
        .expect("the sandbox image on the main engine");
    engine.load_image(&image);
    eprintln!(
        "private engine ({}) up with the image in {:?}",
        engine.driver(),
        started.elapsed()
    );

    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    let host = engine.host();
    let server = Server::spawn(
        dir.path(),
        &[("DOCKER_HOST", host.as_str())],
        &["--pool-size", "1"],
    )
    .await;
    let (err, v, _) = server
        .exec("result = 1", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");

    // The engine stops under a running execution: the call answers at once, saying so.
    let running = start_long(&server, &ws, "started-1").await;
    engine.stop();
    let (r, took) = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the running execution answers once the engine is gone")
        .unwrap();
    let (err, v) = r.expect("a tool result, not a protocol error");
    eprintln!("running when the engine stopped: {took:?} {v}");
    assert!(err, "{v}");
    let text = error_text(&v);
    assert!(
        text.contains("the Docker engine went away") && text.contains("Retry once the engine"),
        "{v}"
    );

    // While it is down: a clear error, at once.
    let (err, v, took) = server
        .exec("result = 2", 10.0, Duration::from_secs(20))
        .await;
    eprintln!("while down: {took:?} {v}");
    assert!(err, "{v}");
    let text = error_text(&v);
    assert!(
        text.contains("cannot reach the Docker engine") && text.contains("needs no restart"),
        "{v}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");

    // Back: the pool refills by itself, and the same server process serves from it.
    engine.restart().await;
    wait_for_pool(&server, 1, Duration::from_secs(60)).await;
    let pooled = executions(&server).await["executions_pooled"]
        .as_u64()
        .unwrap();
    let (err, v, took) = server
        .exec("result = 3", 10.0, Duration::from_secs(60))
        .await;
    eprintln!("after the restart: {took:?}");
    assert!(!err, "{v}");
    assert_eq!(v["result"], 3);
    let now_pooled = executions(&server).await["executions_pooled"]
        .as_u64()
        .unwrap();
    assert_eq!(
        now_pooled,
        pooled + 1,
        "the execution ran in a pooled container"
    );

    // A restart (stop, start at once) under a running execution: an error saying so, then
    // service as before.
    let running = start_long(&server, &ws, "started-2").await;
    engine.stop();
    engine.restart().await;
    let (r, took) = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .expect("the running execution answers after an engine restart")
        .unwrap();
    let (err, v) = r.expect("a tool result, not a protocol error");
    eprintln!("running across a restart: {took:?} {v}");
    assert!(err, "{v}");
    assert!(
        error_text(&v).contains("the Docker engine went away"),
        "{v}"
    );
    let (err, v, _) = server
        .exec("result = 4", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], 4);

    drop(server.close(Duration::from_secs(60)).await);

    // Restarted behind a socket that holds connections while the daemon is down (as systemd's
    // docker.socket does): the engine answers again at once, reporting the container stopped
    // by SIGTERM, and the broken event stream tells the server that the engine did it.
    let proxy = EngineProxy::to(engine.socket());
    let proxied = proxy.host();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    let server = Server::spawn(
        dir.path(),
        &[("DOCKER_HOST", proxied.as_str())],
        &["--pool-size", "0"],
    )
    .await;
    let running = start_long(&server, &ws, "started-3").await;
    engine.stop();
    engine.restart().await;
    let (r, took) = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("the running execution answers after an engine restart behind a held socket")
        .unwrap();
    let (err, v) = r.expect("a tool result, not a protocol error");
    eprintln!("running across a restart behind a held socket: {took:?} {v}");
    assert!(err, "{v}");
    assert!(
        error_text(&v).contains("the Docker engine went away"),
        "{v}"
    );
    let (err, v, _) = server
        .exec("result = 5", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");

    // Shutdown removes every container of the servers from the engine.
    drop(server.close(Duration::from_secs(60)).await);
    drop(proxy);
    let left = engine.containers().await;
    assert!(
        left.is_empty(),
        "containers left on the private engine: {left:?}"
    );
    let root = engine.root().to_path_buf();
    drop(engine);
    assert_eq!(
        bridge.exists(),
        had_bridge,
        "the main engine's docker0 bridge was changed"
    );
    assert!(
        common::private_engine::mounts_below(&root).is_empty() && !root.exists(),
        "the private engine left {} behind",
        root.display()
    );
    eprintln!("engine fault test took {:?}", started.elapsed());
}

/// Temp files of write_workspace_file anywhere below `dir` (links not followed).
fn temp_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                stack.push(e.path());
            } else if e.file_name().to_string_lossy().starts_with(".cem-tmp-") {
                found.push(e.path());
            }
        }
    }
    found
}

const WRITERS: usize = 3;
const WRITE_SIZE: usize = 8 << 20;

/// What writer `i` writes through write_workspace_file, again and again.
fn payload(i: usize) -> String {
    char::from(b'a' + i as u8).to_string().repeat(WRITE_SIZE)
}

/// Starts a server on `dir`, has sandbox code write a file and [`WRITERS`] clients write large
/// files through the tool back to back, and SIGKILLs the server as soon as one of those writes
/// has its temp file on disk (so the kill lands between creating and renaming it). Returns the
/// server's pid, its containers before the kill and the temp files found after it.
async fn kill_mid_write(dir: &Path) -> (u32, Vec<String>, Vec<std::path::PathBuf>) {
    let ws = dir.join("workspace");
    let _ = std::fs::remove_file(ws.join("code-started"));
    let mut server = Server::spawn(dir, &[], &["--pool-size", "1"]).await;
    let pid = server.pid();

    let code = "import time\nf = open('/workspace/by-code.bin', 'wb')\nopen('/workspace/code-started', 'w').close()\nwhile True:\n    f.write(b'x' * 65536)\n    f.flush()\n    time.sleep(0.01)";
    let client = server.client.clone();
    let execution = tokio::spawn(async move {
        try_call_tool(
            &client,
            "execute_code",
            json!({"code": code, "timeout_seconds": 120}),
        )
        .await
    });
    wait_for_file(&ws.join("code-started"), Duration::from_secs(60)).await;
    // Its containers (the running execution's, the pooled one) will outlive it.
    let containers = common::containers_of(pid).await;
    assert!(!containers.is_empty(), "the server has no container");

    let mut writers = Vec::new();
    for i in 0..WRITERS {
        let client = server.client.clone();
        let args = json!({"filename": format!("tool/w{i}.txt"), "content": payload(i)});
        writers.push(tokio::spawn(async move {
            while let Ok((false, _)) =
                try_call_tool(&client, "write_workspace_file", args.clone()).await
            {}
        }));
    }
    let tool_dir = ws.join("tool");
    let killer = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            let mid_write = std::fs::read_dir(&tool_dir).is_ok_and(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(".cem-tmp-"))
            });
            if mid_write {
                break;
            }
        }
        common::private_engine::signal(pid as i32, libc::SIGKILL);
    });
    tokio::task::spawn_blocking(move || killer.join().unwrap())
        .await
        .unwrap();
    server.child.wait().await.unwrap();
    let temps = temp_files(&ws);
    for w in writers {
        w.await.unwrap();
    }
    assert!(
        execution.await.unwrap().is_err(),
        "the session died with the server"
    );
    (pid, containers, temps)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_execution_and_mid_write_leaves_nothing_after_its_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    // The kill must land while a temp file exists; it nearly always does at the first try.
    let mut killed = Vec::new();
    let mut left_temps = false;
    for attempt in 1..=3 {
        let (pid, containers, temps) = kill_mid_write(dir.path()).await;
        eprintln!(
            "attempt {attempt}: SIGKILL with {} containers of the server running, temp files left: {temps:?}",
            containers.len()
        );
        killed.push(pid);
        if !temps.is_empty() {
            left_temps = true;
            break;
        }
    }
    assert!(left_temps, "three kills never landed mid-write");

    // The next start on the same directories removes the killed servers' containers (another
    // server's start could get there first: what matters is that none is left) and temp files.
    let server = Server::spawn(dir.path(), &[], &["--pool-size", "1"]).await;
    for &pid in &killed {
        let left = common::containers_of(pid).await;
        assert!(
            left.is_empty(),
            "containers of killed server {pid} after the restart: {left:?}"
        );
    }
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let temps = temp_files(&ws);
        if temps.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "temp files survived the restart: {temps:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Each file written through the tool is absent or complete, never a torn prefix.
    for i in 0..WRITERS {
        let path = ws.join(format!("tool/w{i}.txt"));
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Ok(bytes) => assert!(
                bytes == payload(i).as_bytes(),
                "{} is torn: {} bytes",
                path.display(),
                bytes.len()
            ),
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
    // The restarted server works on that workspace (the code's own file is whatever it had
    // written when its container was killed).
    let (err, v, _) = server
        .exec(
            "import os\nresult = os.path.getsize('/workspace/by-code.bin') > 0",
            30.0,
            Duration::from_secs(60),
        )
        .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], true);
    let second = server.pid();
    server.close(Duration::from_secs(60)).await;
    assert!(common::containers_of(second).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_stalled_engine_never_holds_a_call_or_the_shutdown() {
    let proxy = EngineProxy::start();
    let host = proxy.host();
    let dir = tempfile::tempdir().unwrap();
    let server = Server::spawn(
        dir.path(),
        &[("DOCKER_HOST", host.as_str())],
        &["--pool-size", "1", "--start-timeout-secs", "5"],
    )
    .await;
    let pid = server.pid();
    let (err, v, _) = server
        .exec("result = 0", 10.0, Duration::from_secs(60))
        .await;
    assert!(!err, "{v}");

    // Slow: every chunk to and from the engine waits 200 ms. Deadlines still hold.
    proxy.set_delay(Duration::from_millis(200));
    let (err, v, took) = server
        .exec("import time\ntime.sleep(60)", 3.0, Duration::from_secs(60))
        .await;
    eprintln!("slow engine, 3 s timeout: {took:?}");
    assert!(err, "{v}");
    assert_eq!(v["status"], "timeout", "{v}");
    assert!(
        error_text(&v).contains("timed out after 3 seconds: the container was killed"),
        "{v}"
    );
    assert!(took < Duration::from_secs(3 + 20), "{took:?}");
    let (err, v, took) = server
        .exec("result = 1", 20.0, Duration::from_secs(60))
        .await;
    eprintln!("slow engine, a short execution: {took:?}");
    assert!(!err, "{v}");
    assert_eq!(v["result"], 1);

    // Stalled: nothing reaches the engine any more. One call takes the pooled container and
    // runs out of time (its kill unconfirmed); one finds the pool empty and gives up at the
    // start limit. Neither hangs.
    proxy.set_delay(Duration::ZERO);
    wait_for_pool(&server, 1, Duration::from_secs(30)).await;
    proxy.stall();
    let calls: Vec<_> = (0..2)
        .map(|i| {
            let client = server.client.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                let args = json!({"code": format!("result = {i}"), "timeout_seconds": 2});
                let r = tokio::time::timeout(
                    Duration::from_secs(60),
                    call_tool(&client, "execute_code", args),
                )
                .await
                .expect("a call to a stalled engine answers within a minute");
                (r, t.elapsed())
            })
        })
        .collect();
    let mut texts = Vec::new();
    for call in calls {
        let ((err, v), took) = call.await.unwrap();
        eprintln!("stalled engine: {took:?} {v}");
        assert!(err, "{v}");
        assert!(took < Duration::from_secs(2 + 30), "{took:?}");
        texts.push(error_text(&v));
    }
    texts.sort();
    assert!(
        texts[0]
            .contains("timed out after 2 seconds, and the Docker engine did not confirm killing"),
        "{texts:?}"
    );
    assert!(
        texts[1].contains("the Docker engine did not start a sandbox container within 5 seconds"),
        "{texts:?}"
    );

    // Shutdown with the engine still stalled: bounded, leaving the containers to the reaper.
    let started = Instant::now();
    let stderr = server.close(Duration::from_secs(60)).await;
    eprintln!("shutdown with a stalled engine: {:?}", started.elapsed());
    assert!(stderr.contains("the next start removes"), "{stderr}");

    // Nothing it held reaches the engine once the proxy is gone; remove what it left.
    drop(proxy);
    let engine = code_execution_mcp::sandbox::Engine::connect()
        .await
        .unwrap();
    for id in common::containers_owned_by(&engine, pid).await.unwrap() {
        engine.remove(&id).await.unwrap();
    }
    assert!(common::containers_of(pid).await.is_empty());
}

/// Runs `serve` with `args` expecting it to refuse to start; returns its stderr.
async fn refused_start(dir: &Path, args: &[&str]) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        serve_command(dir, &[&["--pool-size", "0"], args].concat())
            .stderr(std::process::Stdio::piped())
            .output(),
    )
    .await
    .expect("the server gives up within a minute")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {}",
        path.display()
    );
}

/// A registry file with one tool.
fn registry_file(server: &str, tool: &str) -> String {
    json!({"categories": {"testing": {"description": "Tools of the fault tests", "tools": {
        format!("{server}/{tool}"): {
            "description": "Counts the rings of a tree in a photograph",
            "functions": [tool], "use_cases": ["dendrochronology"],
            "input_schema": {"type": "object", "properties": {}}
        }
    }}}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_skills_directory_or_registry_path_stops_the_start_saying_which_and_what_to_do()
{
    // The skills path (`<dir>/skills` for serve_command) is a regular file, or a dangling link.
    let as_file = tempfile::tempdir().unwrap();
    std::fs::write(as_file.path().join("skills"), "not a directory").unwrap();
    let as_link = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        as_link.path().join("nowhere"),
        as_link.path().join("skills"),
    )
    .unwrap();
    for (dir, why) in [
        (&as_file, "Not a directory"),
        (&as_link, "No such file or directory"),
    ] {
        let stderr = refused_start(dir.path(), &[]).await;
        let path = dir.path().join("skills");
        assert!(
            stderr.contains(&format!("skills directory {}", path.display()))
                && stderr.contains(why)
                && stderr.contains("Point --skills-dir"),
            "{stderr}"
        );
    }
    // The registry path is a regular file.
    let fresh = tempfile::tempdir().unwrap();
    let registry = fresh.path().join("registry");
    std::fs::write(&registry, "{}").unwrap();
    let stderr = refused_start(
        fresh.path(),
        &["--registry-dir", &registry.display().to_string()],
    )
    .await;
    assert!(
        stderr.contains(&format!("tool registry {}", registry.display()))
            && stderr.contains("not a directory")
            && stderr.contains("Point --registry-dir"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_skills_and_registry_files_give_errors_per_call_and_the_rest_serves() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    std::fs::create_dir(&skills).unwrap();
    std::fs::write(
        skills.join("good_skill.py"),
        "def good_skill():\n    return 1\n",
    )
    .unwrap();
    std::fs::create_dir(skills.join("dir_skill.py")).unwrap();
    mkfifo(&skills.join("fifo_skill.py"));
    std::fs::write(
        skills.join("latin1_skill.py"),
        b"def latin1_skill():\n    return '\xe9'\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone.py"), skills.join("dangling_skill.py"))
        .unwrap();

    let registry = dir.path().join("registry");
    std::fs::create_dir(&registry).unwrap();
    let good = registry_file("faults", "count_tree_rings");
    std::fs::write(registry.join("good.json"), &good).unwrap();
    std::fs::write(registry.join("bad.json"), "{not json").unwrap();
    std::fs::write(registry.join("truncated.json"), &good[..good.len() / 2]).unwrap();
    std::fs::write(
        registry.join("latin1.json"),
        b"{\"categories\": {\"caf\xe9\": {}}}",
    )
    .unwrap();
    mkfifo(&registry.join("fifo.json"));
    std::fs::create_dir(registry.join("dir.json")).unwrap();
    std::fs::write(
        registry.join("dir.json/inner.json"),
        registry_file("faults", "inner_tool"),
    )
    .unwrap();

    let server = Server::spawn(
        dir.path(),
        &[],
        &[
            "--pool-size",
            "0",
            "--registry-dir",
            &registry.display().to_string(),
        ],
    )
    .await;
    let stderr = server.stderr();
    for (file, why) in [
        ("bad.json", "not valid JSON"),
        ("truncated.json", "not valid JSON"),
        ("latin1.json", "cannot read file"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&registry.join(file).display().to_string()))
            .unwrap_or_else(|| panic!("nothing logged about {file}:\n{stderr}"));
        assert!(line.contains(why), "{line}");
    }

    // The readable files serve (a folder named *.json is a folder of registry files).
    for (query, id) in [
        ("count tree rings", "faults/count_tree_rings"),
        ("inner tool", "faults/inner_tool"),
    ] {
        let (err, v) = call_tool(
            &server.client,
            "search_tools",
            json!({"query": query, "detail_level": "name"}),
        )
        .await;
        assert!(!err, "{v}");
        assert_eq!(v["tools"][0]["id"], id, "{v}");
    }

    // Each broken skill is an error naming it and what is wrong; the rest list and load.
    for (name, why) in [
        ("dir_skill", "is a directory, not a regular file"),
        ("fifo_skill", "not a regular file"),
        ("latin1_skill", "not valid UTF-8"),
        ("dangling_skill", "is a symbolic link"),
    ] {
        let (err, v) = call_tool(&server.client, "load_skill", json!({ "name": name })).await;
        assert!(err, "{name}: {v}");
        let text = v.to_string();
        assert!(
            text.contains(&format!("{name}.py")) && text.contains(why),
            "{name}: {text}"
        );
    }
    let (err, v) = call_tool(&server.client, "load_skill", json!({"name": "good_skill"})).await;
    assert!(!err, "{v}");
    let (err, v) = call_tool(&server.client, "list_skills", json!({})).await;
    assert!(!err, "{v}");
    let listed: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(listed.contains(&"good_skill"), "{listed:?}");
    assert!(
        !listed
            .iter()
            .any(|n| n.ends_with("_skill") && *n != "good_skill"),
        "{listed:?}"
    );

    // The registry path turns into a file while the server runs: searches keep the last
    // catalog that loaded, and the server says why it did not reload.
    std::fs::rename(&registry, dir.path().join("registry.old")).unwrap();
    std::fs::write(&registry, "not a directory").unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (err, v) = call_tool(
        &server.client,
        "search_tools",
        json!({"query": "count tree rings", "detail_level": "name"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["tools"][0]["id"], "faults/count_tree_rings", "{v}");

    let stderr = server.close(Duration::from_secs(60)).await;
    assert!(!stderr.contains("panicked"), "{stderr}");
}
