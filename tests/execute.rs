//! `execute_code` behaviour through the library, against the real engine: the globals and fields
//! of the Python server this one replaces, exceptions, the channel to the server, cancellation,
//! the pool and the runtime flag. Bad input, clamped limits, busy and frame-shaped output are
//! catalogue cases in `tests/security/server_input.rs`.

mod common;

use std::time::Duration;

use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::sandbox::{Engine, Status};
use common::docker::{docker, docker_with_input};
use common::{TestApp, assert_ok, stdout, wait_for_full_pool};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn result_output_and_the_original_helpers() {
    let t = TestApp::start().await;
    let o = t
        .run_with(
            r#"
rows = [{"id": i, "status": "active" if i % 3 else "idle", "score": i * 1.5} for i in range(30)]
write_file("data/rows.json", json.dumps(rows))
data = json.loads(read_file("data/rows.json"))
active = filter_by_field(data, "status", "active")
print("active", len(active))
print(format_output({"a": 1}, max_chars=3))
result = {
    "summary": summarize_list(active, limit=2),
    "stats": aggregate_stats(data, ["score"]),
    "auto_stats": aggregate_stats([{"n": 2, "s": "x"}, {"n": 4, "s": "y"}]),
    "files": list_files(),
    "workspace": workspace,
    "modules": [m.__name__ for m in (json, re, math, statistics, collections)],
    "median": statistics.median([3, 1, 2]),
    "statistics_dir": "mean" in dir(statistics),
    "dates": [datetime.__name__, date.__name__, timedelta(days=1).days],
    "extra": extra * 2,
    "not_json": {1, 2} and date(2024, 1, 2),
}
print(delete_file("data/rows.json"))
"#,
            Some(json!({"extra": 21})),
            None,
            None,
        )
        .await;
    assert_ok(&o);
    let r = &o.result;
    assert_eq!(r["summary"]["count"], 20);
    assert_eq!(r["summary"]["sample"].as_array().unwrap().len(), 2);
    assert_eq!(r["stats"]["count"], 30);
    assert_eq!(r["stats"]["score_sum"], 652.5);
    assert_eq!(r["stats"]["score_max"], 43.5);
    assert_eq!(r["auto_stats"]["n_avg"], 3.0);
    assert!(r["auto_stats"].get("s_sum").is_none());
    assert_eq!(r["files"], json!(["data/rows.json"]));
    assert_eq!(r["workspace"], "/workspace");
    assert_eq!(
        r["modules"],
        json!(["json", "re", "math", "statistics", "collections"])
    );
    assert_eq!(
        (&r["median"], &r["statistics_dir"]),
        (&json!(2), &json!(true))
    );
    assert_eq!(r["dates"], json!(["datetime", "date", 1]));
    assert_eq!(r["extra"], 42);
    assert_eq!(r["not_json"], "2024-01-02");
    assert_eq!(
        o.stdout.lines(),
        vec!["active 20", "{", " ", "Deleted data/rows.json"]
    );
    assert!(!t.workspace().join("data/rows.json").exists());
    t.finish().await;
}

/// Every execution's container pays the harness's start-up, beside the executions running then:
/// modules few jobs use wait for their first use. (The harness's own imports still load.)
#[tokio::test]
async fn the_harness_starts_without_the_modules_few_jobs_use() {
    let t = TestApp::start().await;
    let o = t
        .run(
            r#"
import sys
later = ["statistics", "dataclasses", "shutil", "urllib.parse", "bz2", "lzma", "hashlib"]
result = {"loaded": [m for m in later if m in sys.modules], "harness": "json" in sys.modules}
"#,
        )
        .await;
    assert_ok(&o);
    assert_eq!(o.result, json!({"loaded": [], "harness": true}));
    t.finish().await;
}

#[tokio::test]
async fn workspace_helpers_refuse_paths_outside_the_workspace() {
    let t = TestApp::start().await;
    let o = t
        .run(
            r#"
out = {}
for name, fn in [("read", lambda: read_file("../etc/passwd")), ("write", lambda: write_file("/etc/x", "y")), ("list", lambda: list_files("..")), ("delete", lambda: delete_file("../../x"))]:
    try:
        fn()
        out[name] = "allowed"
    except PermissionError as e:
        out[name] = str(e)
try:
    read_file("missing.txt")
except FileNotFoundError as e:
    out["missing"] = str(e)
result = out
"#,
        )
        .await;
    assert_ok(&o);
    for name in ["read", "write", "list", "delete"] {
        assert_eq!(
            o.result[name], "Access denied: path outside workspace",
            "{name}"
        );
    }
    assert_eq!(o.result["missing"], "File not found: missing.txt");
    t.finish().await;
}

#[tokio::test]
async fn full_python_not_a_builtins_list() {
    let t = TestApp::start().await;
    // The Python server's builtins list refused these; here the container is the boundary.
    let o = t
        .run(
            r#"
import os, subprocess, sys, threading
r = subprocess.run(["echo", "from a subprocess"], capture_output=True, text=True)
os.system("echo direct to fd 1")
print("printed")
t = threading.Thread(target=lambda: print("from a thread"))
t.start(); t.join()
result = {"sub": r.stdout.strip(), "version": sys.version_info[:2], "subclasses": len(object.__subclasses__()) > 0}
"#,
        )
        .await;
    assert_ok(&o);
    assert_eq!(o.result["sub"], "from a subprocess");
    assert_eq!(o.result["version"], json!([3, 13]));
    let out = stdout(&o);
    assert!(
        out.contains("direct to fd 1") && out.contains("printed") && out.contains("from a thread"),
        "{out}"
    );
    t.finish().await;
}

#[tokio::test]
async fn exceptions_give_error_type_and_a_user_traceback() {
    let t = TestApp::start().await;
    let o = t
        .run("print('before')\ndef f():\n    return 1 / 0\nf()")
        .await;
    assert_eq!(o.status, Status::Error);
    assert!(!o.success());
    assert_eq!(o.error.as_deref(), Some("division by zero"));
    assert_eq!(o.error_type.as_deref(), Some("ZeroDivisionError"));
    let tb = o.traceback.as_deref().unwrap();
    assert!(tb.contains("<sandbox>") && tb.contains("line 3"), "{tb}");
    assert!(!tb.contains("harness"), "harness frames leak: {tb}");
    assert_eq!(stdout(&o), "before\n");

    let o = t.run("def broken(:\n  pass").await;
    assert_eq!(o.status, Status::Error);
    assert_eq!(o.error_type.as_deref(), Some("SyntaxError"));

    let o = t.run("import sys\nprint('bye')\nsys.exit(0)").await;
    assert_ok(&o);
    let o = t.run("import sys\nsys.exit(3)").await;
    assert_eq!(o.status, Status::Error);
    t.finish().await;
}

#[tokio::test]
async fn the_channel_reaches_the_server_and_unknown_calls_fail_clearly() {
    let t = TestApp::start().await;
    let o = t
        .run(
            r#"
pong = _server_call("ping", x=[1, 2])
errors = []
for call in (lambda: _server_call("rm_rf", path="/"), lambda: load_skill("no_such_skill"), lambda: save_skill(1, 2)):
    try:
        call()
        errors.append(None)
    except RuntimeError as e:
        errors.append(str(e))
result = {"pong": pong, "errors": errors}
"#,
        )
        .await;
    assert_ok(&o);
    assert_eq!(
        o.result["pong"],
        json!({"pong": true, "echo": {"x": [1, 2]}})
    );
    let errors = o.result["errors"].as_array().unwrap();
    assert!(
        errors[0].as_str().unwrap().contains("not available"),
        "{}",
        o.result
    );
    assert!(
        errors[1].as_str().unwrap().contains("Skill not found"),
        "{}",
        o.result
    );
    assert!(
        errors[2].as_str().unwrap().contains("expected name"),
        "{}",
        o.result
    );
    t.finish().await;
}

#[tokio::test]
async fn cancellation_kills_the_container() {
    // No pool: then the only container of this instance is the execution's own.
    let t = TestApp::start_with(|c| c.pool.pool_size = 0).await;
    let cancel = CancellationToken::new();
    let app = t.app.clone();
    let token = cancel.clone();
    let run = tokio::spawn(async move {
        app.execute(
            ExecuteRequest::code("import time\nprint('sleeping')\ntime.sleep(60)"),
            token,
        )
        .await
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    cancel.cancel();
    let o = tokio::time::timeout(Duration::from_secs(15), run)
        .await
        .expect("cancellation returns promptly")
        .unwrap()
        .unwrap()
        .outcome;
    assert_eq!(o.status, Status::Cancelled);
    common::assert_no_containers(&t.app.sandbox().instance().id).await;
    t.finish().await;
}

/// Sandbox code that tells containers apart on every engine, cgroup version and runtime (under
/// cgroup v2 with a private cgroup namespace `/proc/self/cgroup` reads `0::/` in every
/// container): whether `/tmp` (a tmpfs that lives as long as its container) already holds the
/// mark an earlier execution in the same container would have left, and the start time of the
/// container's PID 1.
const CONTAINER_IDENTITY: &str = "import os\nreused = os.path.exists('/tmp/mark')\nopen('/tmp/mark', 'w').write('x')\nresult = [reused, open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19]]";

fn app_runs_gvisor(t: &TestApp) -> bool {
    t.app.shared().runtime_kind()
        == code_execution_mcp::sandbox::container::runtime::RuntimeKind::Gvisor
}

#[tokio::test]
async fn each_execution_gets_a_fresh_container() {
    let t = TestApp::start().await;
    let a = t.run(CONTAINER_IDENTITY).await;
    let b = t.run(CONTAINER_IDENTITY).await;
    assert_ok(&a);
    assert_ok(&b);
    assert_eq!(a.result[0], false, "{:?}", a.result);
    assert_eq!(
        b.result[0], false,
        "the second execution found the first one's /tmp"
    );
    // gVisor's kernel starts every sandbox's clock anew: PID 1 starts at the same tick in
    // every container, and only the /tmp mark tells them apart.
    if !app_runs_gvisor(&t) {
        assert_ne!(
            a.result[1], b.result[1],
            "the same PID 1 means the same container"
        );
    }
    t.finish().await;
}

/// The servers of this file run under the runtime and read `/usr` from where CI's step asked
/// (`CEM_RUNTIME`, `CEM_IMAGE_TREE`; unset: the engine's defaults), seen from inside and from
/// the engine. The test below names its runtime itself; every other test takes the variable.
#[tokio::test]
async fn the_servers_run_under_the_runtime_and_image_tree_asked_for() {
    common::placement::assert_runs_where_asked().await;
}

#[tokio::test]
async fn a_named_runtime_runs_the_sandbox() {
    // Docker registers runc also as io.containerd.runc.v2 (unless daemon.json lists runtimes
    // of its own); a container the flag did not reach would show the engine's default
    // ("runc"). Podman names its runtimes plainly and records none for its default.
    // CEM_RUNTIME=runsc runs the suite on gVisor.
    let engine = Engine::connect().await.unwrap();
    let podman = engine.info().await.unwrap().kind == "Podman";
    let runtime = match std::env::var("CEM_RUNTIME") {
        Ok(named) => named,
        Err(_) if podman => "runc".into(),
        Err(_) => {
            let registered = engine.runtimes().await.unwrap();
            let mut other: Vec<&String> = registered.keys().filter(|n| *n != "runc").collect();
            other.sort_by_key(|n| (n.as_str() != "io.containerd.runc.v2", n.as_str()));
            other
                .first()
                .map(|n| n.to_string())
                .expect("the engine registers a runtime besides its default runc")
        }
    };
    let t = TestApp::start_with(|c| c.sandbox.runtime = Some(runtime.clone())).await;
    let inspected = common::inspect_pooled(&t.app).await;
    let recorded = if podman {
        // Podman's compatible inspect says "oci" for every runtime; its own CLI names it.
        let id = inspected.id.unwrap();
        let out = std::process::Command::new("podman")
            .args(["inspect", "--format", "{{.OCIRuntime}}", &id])
            .output()
            .expect("the podman CLI beside the Podman engine");
        Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        inspected.host_config.and_then(|h| h.runtime)
    };
    assert_eq!(recorded.as_deref(), Some(runtime.as_str()));
    let o = t.run("print('hi')").await;
    assert_ok(&o);
    assert_eq!(o.stdout.lines(), ["hi"]);
    t.finish().await;
}

#[tokio::test]
async fn pooled_containers_are_single_use_and_refilled() {
    let t = TestApp::start_with(|c| c.pool.pool_size = 2).await;
    let app = &t.app;
    // The pool fills in the background.
    wait_for_full_pool(app, 2).await;
    for _ in 0..4 {
        let o = t.run(CONTAINER_IDENTITY).await;
        assert_ok(&o);
        assert_eq!(o.result[0], false, "a container ran two executions");
    }
    // A non-default memory limit: a pooled container, set to that limit before the job.
    wait_for_full_pool(app, 2).await;
    let pooled_before = app.stats().snapshot().executions_pooled;
    // The limit in force: the cgroup's, or under gVisor (no cgroup files inside) the memory its
    // kernel shows.
    let limit = "import os\nv1 = '/sys/fs/cgroup/memory/memory.limit_in_bytes'\nv2 = '/sys/fs/cgroup/memory.max'\nresult = int(open(v1).read()) if os.path.exists(v1) else int(open(v2).read()) if os.path.exists(v2) else int(open('/proc/meminfo').readline().split()[1]) * 1024";
    let o = t.run_with(limit, None, None, Some(128.0)).await;
    assert_ok(&o);
    assert_eq!(
        o.result,
        serde_json::json!(128 << 20),
        "the requested limit holds"
    );
    // Podman 4's compatible API cannot update a container's limit, nor can gVisor's runsc
    // (such a call runs cold); later Podman can.
    let pooled = app.stats().snapshot().executions_pooled - pooled_before;
    let podman = app.engine_info().kind == "Podman";
    let gvisor = app.shared().runtime_kind()
        == code_execution_mcp::sandbox::container::runtime::RuntimeKind::Gvisor;
    if gvisor {
        assert_eq!(pooled, 0, "runsc cannot update a limit: the call ran cold");
    } else {
        assert!(pooled == 1 || (podman && pooled == 0), "pooled {pooled}");
    }
    let o = t.run(limit).await;
    assert_eq!(
        o.result,
        serde_json::json!(500 << 20),
        "the default limit holds"
    );
    wait_for_full_pool(app, 2).await;
    t.finish().await;
}

#[tokio::test]
async fn the_pool_follows_its_image_tag_to_a_rebuilt_image() {
    let tag = format!("cem-test-retag:{}", std::process::id());
    docker(&[
        "tag",
        &code_execution_mcp::sandbox::image::default_tag(
            code_execution_mcp::sandbox::image::ImageProfile::Data,
        ),
        &tag,
    ]);
    let t = TestApp::start_with(|c| {
        c.sandbox.image = Some(tag.clone());
        c.pool.pool_size = 1;
    })
    .await;
    let app = &t.app;
    wait_for_full_pool(app, 1).await;
    let old_id = app.sandbox().pool_image();
    let mark = "import os\nresult = os.environ.get('POOL_IMAGE_MARK')";
    assert_eq!(t.run(mark).await.result, serde_json::Value::Null);

    // Rebuild under the same tag: the waiting containers are replaced from the new image.
    wait_for_full_pool(app, 1).await;
    let dockerfile = format!("FROM {old_id}\nENV POOL_IMAGE_MARK=rebuilt\n");
    docker_with_input(&["build", "-q", "-t", &tag, "-"], &dockerfile);
    let new_id = docker(&["image", "inspect", "--format", "{{.Id}}", &tag]);
    assert_ne!(new_id, old_id);
    for _ in 0..200 {
        if app.sandbox().pool_image() == new_id && app.sandbox().pool_ready() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        app.sandbox().pool_image(),
        new_id,
        "the pool saw the new image"
    );
    wait_for_full_pool(app, 1).await;
    let pooled = app.stats().snapshot().executions_pooled;
    let o = t.run(mark).await;
    assert_eq!(
        o.result, "rebuilt",
        "the pooled container runs the new image"
    );
    assert_eq!(app.stats().snapshot().executions_pooled, pooled + 1);
    t.finish().await;
    docker(&["rmi", "-f", &tag]);
}

/// Output printed just before the code returns reaches the server even when the harness's
/// reader threads are starved for longer than it waits for quiet pipes (seen under load: a
/// `print(1)` answered with no output). The real harness in the real image, its readers held
/// back for a second by `tests/python/harness_starved_reader.py`.
#[test]
fn output_survives_reader_threads_starved_past_the_quiet_wait() {
    let image = code_execution_mcp::config::Config::defaults()
        .sandbox
        .image_tag();
    let script = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/harness_starved_reader.py"
    ))
    .unwrap();
    // Bounded: a harness that never finishes fails the test instead of hanging the suite.
    let mut child = std::process::Command::new("timeout")
        .args(["120", "docker", "run", "--rm", "-i", "--network", "none"])
        .args(["--entrypoint", "python3"])
        .args([&image, "-I", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("docker run");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&script).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<serde_json::Value> = serde_json::from_str(text.trim()).unwrap();
    let printed: String = frames
        .iter()
        .filter(|f| f["stream"] == "stdout")
        .filter_map(|f| f["data"].as_str())
        .collect();
    assert_eq!(printed, "printed by the code\n", "frames: {frames:?}");
}

#[tokio::test]
async fn the_pool_preloads_what_recent_code_imported() {
    use code_execution_mcp::sandbox::Backend;
    let t = TestApp::start_with(|c| c.sandbox.preload = Some(vec!["auto".into()])).await;
    wait_for_full_pool(&t.app, 1).await;
    assert_ok(&t.run("import csv, decimal\nresult = 1").await);
    // The replacement started after that execution imports what its code imported.
    let engine = Engine::connect().await.expect("engine");
    let label = format!(
        "{}={}",
        code_execution_mcp::sandbox::container::spec::LABEL_INSTANCE,
        t.app.sandbox().instance().id
    );
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen.clear();
        for c in engine
            .list_labelled(std::slice::from_ref(&label))
            .await
            .unwrap()
        {
            if let Ok(i) = engine.client().inspect_container(&c.id, None).await {
                seen.extend(i.config.and_then(|c| c.env).unwrap_or_default());
            }
        }
        if seen.iter().any(|e| e == "CEM_PRELOAD=csv,decimal") {
            t.finish().await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("no pooled container preloads csv,decimal: {seen:?}");
}

#[tokio::test]
async fn a_call_takes_the_pooled_container_that_imported_what_its_code_imports() {
    let t = TestApp::start_with(|c| {
        c.sandbox.preload = Some(vec!["auto".into()]);
        (c.pool.pool_size, c.pool.pool_max) = (2, 2);
    })
    .await;
    let settled = async || {
        for _ in 0..200 {
            let pool = t.app.sandbox().pool_snapshot();
            if pool.ready == 2 && pool.starting == 0 {
                return pool;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the pool did not settle");
    };
    settled().await;
    assert_ok(&t.run("import colorsys\nresult = 1").await);
    // Three calls that import nothing: one in four imported colorsys, so one of the two
    // pooled containers keeps it, and those calls take the plain one.
    for _ in 0..3 {
        assert_eq!(settled().await.preloaded_ready, 1);
        assert_ok(&t.run("result = 1").await);
    }
    let pool = settled().await;
    assert_eq!(pool.preloaded_ready, 1, "{pool:?}");
    let out = t
        .run("import sys\nresult = 'colorsys' in sys.modules\nimport colorsys")
        .await;
    assert_ok(&out);
    assert_eq!(
        out.result,
        serde_json::json!(true),
        "it ran in the plain one"
    );
    t.finish().await;
}

#[tokio::test]
async fn a_call_says_so_when_its_container_was_not_ready_at_once() {
    // No pool: the call starts a container of its own, and its response says so.
    let t = TestApp::start_with(|c| (c.pool.pool_size, c.pool.pool_max) = (0, 0)).await;
    let client = common::mcp_client(t.app.clone()).await;
    let (err, v) = common::call_tool(&client, "execute_code", json!({"code": "result = 1"})).await;
    assert!(!err, "{v}");
    assert_eq!(v["start"]["pooled"], false, "{v}");
    assert_eq!(v["start"]["reason"], "pool_off", "{v}");
    let waited = v["start"]["waited_ms"].as_u64().expect("waited_ms");
    assert!(waited > 0, "a container's start takes time: {v}");
    client.cancel().await.unwrap();
    t.finish().await;
    // A full pool: the call takes a ready container, and the response has no `start`.
    let t = TestApp::start_with(|c| (c.pool.pool_size, c.pool.pool_max) = (1, 1)).await;
    let client = common::mcp_client(t.app.clone()).await;
    wait_for_full_pool(&t.app, 1).await;
    let (err, v) = common::call_tool(&client, "execute_code", json!({"code": "result = 1"})).await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], 1);
    assert!(v.get("start").is_none(), "{v}");
    client.cancel().await.unwrap();
    t.finish().await;
}
