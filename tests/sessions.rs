//! Sessions against the real engine: `execute_code(session=…)` carries variables, functions,
//! classes and DataFrames from call to call while every call runs in a fresh container; what
//! cannot travel is listed; bounds, expiry, a restart, calls of one session at once, a snapshot
//! that breaks half-way and one that hostile code forged; the blob sweep after trims and
//! expiries, with every revision kept still running.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::app::{ExecuteError, Executed};
use code_execution_mcp::sandbox::Status;
use code_execution_mcp::sessions::view::SessionView;
use common::{TestApp, assert_ok};
use serde_json::json;

/// The servers of this file run under the runtime and read `/usr` from where CI's step asked
/// (`CEM_IMAGE_TREE=host` against Podman; unset: the engine's defaults), seen from inside and
/// from the engine.
#[tokio::test]
async fn the_servers_run_under_the_runtime_and_image_tree_asked_for() {
    common::placement::assert_runs_where_asked().await;
}

async fn call(t: &TestApp, session: &str, code: &str) -> Result<Executed, ExecuteError> {
    t.app
        .execute(
            ExecuteRequest {
                code: code.into(),
                session: Some(session.into()),
                ..Default::default()
            },
            Default::default(),
        )
        .await
}

async fn ok(t: &TestApp, session: &str, code: &str) -> Executed {
    let e = call(t, session, code)
        .await
        .unwrap_or_else(|e| panic!("execution could not run: {e}"));
    assert_ok(&e.outcome);
    e
}

/// The error a call of `session` gets.
async fn refused(t: &TestApp, session: &str) -> ExecuteError {
    match call(t, session, "pass").await {
        Ok(e) => panic!("session {session} was not refused: {:?}", e.outcome),
        Err(e) => e,
    }
}

/// Waits until the session's last snapshot has been saved (the turn ends in the background).
async fn settled(t: &TestApp, session: &str) {
    // The next call of the session waits for the previous one's snapshot: a call that does
    // nothing is the wait.
    ok(t, session, "pass").await;
}

/// Waits until `n` sessions have a container prepared (their last snapshot saved).
async fn prepared(t: &TestApp, n: usize) {
    for _ in 0..300 {
        if t.app.session_counts().prepared >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("no container was prepared: {:?}", t.app.session_counts());
}

#[tokio::test]
async fn variables_functions_classes_and_modules_carry_into_a_fresh_container() {
    let t = TestApp::start().await;
    let first = ok(
        &t,
        "new",
        r#"
import socket, os, collections, statistics
from dataclasses import dataclass
total = 41
names = ["ann", "bob"]
def bump(v, by=1):
    return v + by
def make_adder(n):
    return lambda v: v + n
add3 = make_adder(3)
@dataclass
class Point:
    x: int
    y: int = 0
    def norm2(self):
        return self.x * self.x + self.y * self.y
p = Point(3, 4)
counts = collections.Counter("aab")
handle = open("/etc/hostname")
gen = (i for i in range(3))
with open("/tmp/scratch", "w") as f:
    f.write("x")
# The container's own files are named by its id (gVisor's mount table names none).
def whoami():
    return [l for l in open("/proc/self/mountinfo") if "/etc/hostname" in l][0]
me = whoami()
result = "ok"
"#,
    )
    .await;
    let session = first.session.clone().expect("a handle");
    assert!(session.starts_with("ses_"), "{session}");
    let state = first.state.expect("a state report");
    assert!(state.saved, "{state:?}");
    for name in [
        "total", "names", "bump", "add3", "Point", "p", "counts", "os", "socket",
    ] {
        assert!(
            state.carried.contains(&name.to_string()),
            "{name}: {state:?}"
        );
    }
    let not: Vec<_> = state.not_carried.iter().map(|n| n.name.as_str()).collect();
    assert!(not.contains(&"handle") && not.contains(&"gen"), "{state:?}");
    // Helper modules the code imported again stay helpers, even one imported on first use.
    for helper in ["collections", "statistics"] {
        assert!(!state.carried.contains(&helper.to_string()), "{state:?}");
    }
    let reason = &state
        .not_carried
        .iter()
        .find(|n| n.name == "handle")
        .unwrap()
        .reason;
    assert!(reason.contains("open file"), "{reason}");

    let second = ok(
        &t,
        &session,
        r#"
total = bump(total)
result = {
    "total": total,
    "names": names,
    "adder": add3(1),
    "norm2": p.norm2(),
    "is_point": isinstance(p, Point),
    "counts": counts["a"],
    "median": statistics.median([5, 1, 3]),
    "os": os.sep,
    "scratch_gone": not os.path.exists("/tmp/scratch"),
    "other_container": whoami() != me,
    "handle": "handle" in globals(),
}
"#,
    )
    .await;
    assert_eq!(second.session.as_deref(), Some(session.as_str()));
    let r = &second.outcome.result;
    assert_eq!(r["total"], 42);
    assert_eq!(r["names"], json!(["ann", "bob"]));
    assert_eq!(r["adder"], 4);
    assert_eq!(r["norm2"], 25);
    assert_eq!(r["is_point"], true);
    assert_eq!(r["counts"], 2);
    assert_eq!(r["median"], 3);
    assert_eq!(r["os"], "/");
    assert_eq!(r["scratch_gone"], true, "/tmp is the container's own");
    let gvisor = t.app.shared().runtime_kind()
        == code_execution_mcp::sandbox::container::runtime::RuntimeKind::Gvisor;
    assert!(
        r["other_container"] == true || gvisor,
        "a new container: {r}"
    );
    assert_eq!(r["handle"], false, "what could not travel is gone");
    let third = ok(&t, &session, "result = total").await;
    assert_eq!(third.outcome.result, 42, "a call sees the one before it");
    t.finish().await;
}

#[tokio::test]
async fn a_dataframe_carries_when_the_image_has_pandas() {
    let t = TestApp::start().await;
    let probe = t
        .run("import importlib.util as u; result = u.find_spec('pandas') is not None")
        .await;
    if probe.result != true {
        common::skip(
            "a_dataframe_carries_when_the_image_has_pandas",
            "the minimal image has no pandas",
        );
        t.finish().await;
        return;
    }
    let first = ok(
        &t,
        "new",
        "import pandas as pd, numpy as np\ndf = pd.DataFrame({'a': np.arange(200_000), 'b': ['x', 'y'] * 100_000})",
    )
    .await;
    let session = first.session.unwrap();
    assert!(first.state.unwrap().bytes > 1_600_000);
    let second = ok(
        &t,
        &session,
        "result = [int(df['a'].sum()), int((df['b'] == 'y').sum()), pd.__name__, float(np.pi)]",
    )
    .await;
    assert_eq!(
        second.outcome.result,
        json!([19_999_900_000i64, 100_000, "pandas", std::f64::consts::PI])
    );
    // Past 4 MB the snapshot is mounted into the next container and mapped: its arrays can
    // still be changed in place, and the change is carried on.
    // (A call that finds the pool empty puts it under pressure: nothing is prepared then.)
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    common::wait_for_full_pool(&t.app, 1).await;
    ok(&t, &session, "big = np.zeros(2_000_000)").await;
    prepared(&t, 1).await;
    let e = ok(&t, &session, "big[0] = 5\nresult = float(big.sum())").await;
    assert_eq!(e.outcome.result, 5.0);
    let e = ok(&t, &session, "result = [float(big[0]), int(df['a'].sum())]").await;
    assert_eq!(e.outcome.result, json!([5.0, 19_999_900_000i64]));
    let stats = t.app.execution_stats();
    assert!(
        stats.executions_prepared >= 2,
        "{:?}",
        stats.executions_prepared
    );
    t.finish().await;
}

#[tokio::test]
async fn bad_handles_are_refused_with_the_session_named() {
    let t = TestApp::start().await;
    let unknown = format!("ses_{}", "ab".repeat(16));
    let err = refused(&t, &unknown).await;
    let text = err.to_string();
    assert!(
        text.contains(&unknown) && text.contains("session=\"new\""),
        "{text}"
    );
    let err = refused(&t, "../../etc").await;
    assert!(err.to_string().contains("not a session handle"), "{err}");
    t.finish().await;
}

#[tokio::test]
async fn over_its_bound_the_call_succeeds_and_the_state_stays() {
    let t = TestApp::start_with(|c| c.sessions.session_max_mb = 1).await;
    let first = ok(&t, "new", "keep = 'kept'").await;
    let session = first.session.unwrap();
    // One value over the bound by itself: left out, the rest carried.
    let e = ok(&t, &session, "huge = b'x' * 2_000_000\nsmall = 1").await;
    let state = e.state.unwrap();
    assert!(state.saved, "{state:?}");
    let huge = state
        .not_carried
        .iter()
        .find(|n| n.name == "huge")
        .expect("listed");
    assert!(huge.reason.contains("bound"), "{huge:?}");
    // Values under the bound each, over it together: nothing is updated, and it says why.
    let e = ok(
        &t,
        &session,
        "a = b'a' * 400_000\nb = b'b' * 400_000\nc = b'c' * 400_000\nkeep = 'changed'",
    )
    .await;
    let state = e.state.unwrap();
    assert!(!state.saved, "{state:?}");
    assert!(
        state
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("previous state"),
        "{state:?}"
    );
    let e = ok(&t, &session, "result = [keep, small, 'a' in globals()]").await;
    assert_eq!(e.outcome.result, json!(["kept", 1, false]));
    t.finish().await;
}

#[tokio::test]
async fn calls_of_one_session_at_once_run_one_after_the_other() {
    let t = TestApp::start_with(|c| c.pool.pool_size = 2).await;
    let session = ok(&t, "new", "n = 0").await.session.unwrap();
    let code = "import time\nbefore = n\ntime.sleep(0.3)\nn = before + 1\nresult = n";
    let (a, b) = tokio::join!(ok(&t, &session, code), ok(&t, &session, code));
    let mut seen = [
        a.outcome.result.as_i64().unwrap(),
        b.outcome.result.as_i64().unwrap(),
    ];
    seen.sort();
    assert_eq!(seen, [1, 2], "no update is lost");
    assert_eq!(ok(&t, &session, "result = n").await.outcome.result, 2);
    t.finish().await;
}

#[tokio::test]
async fn a_snapshot_broken_half_way_keeps_the_previous_state() {
    let t = TestApp::start().await;
    let session = ok(&t, "new", "x = 'before'").await.session.unwrap();
    // The code makes the harness die while it streams the snapshot (after `done`): after the
    // first blob, before the manifest.
    let e = ok(
        &t,
        &session,
        "import cem_state, os\nx = 'after'\ncem_state.describe = lambda v: os._exit(7)\nresult = 'sent'",
    )
    .await;
    assert_eq!(e.outcome.result, "sent", "the call itself succeeded");
    let e = ok(&t, &session, "result = x").await;
    assert_eq!(e.outcome.result, "before");
    t.finish().await;
}

#[tokio::test]
async fn a_forged_snapshot_harms_only_its_own_session() {
    let t = TestApp::start().await;
    let victim = ok(&t, "new", "secret = 'mine'").await.session.unwrap();
    let hostile = ok(&t, "new", "pass").await.session.unwrap();
    settled(&t, &victim).await;
    // A pickle that runs code when loaded runs it in that session's next sandbox only.
    let armed = r#"
class Armed:
    def __reduce__(self):
        return (exec, ("import builtins; builtins.PWNED = True",))
bomb = Armed()
"#;
    ok(&t, &hostile, armed).await;
    let marked = "import builtins\nresult = getattr(builtins, 'PWNED', False)";
    assert_eq!(ok(&t, &hostile, marked).await.outcome.result, true);
    assert_eq!(ok(&t, &victim, marked).await.outcome.result, false);
    let other = ok(&t, &victim, "result = secret").await;
    assert_eq!(other.outcome.result, "mine");
    assert_eq!(ok(&t, "new", marked).await.outcome.result, false);
    // A manifest naming a blob the container never had is refused: the state stays.
    let forged = r#"
import cem_helpers
chan, real = cem_helpers._chan, cem_helpers._chan.send
def forged(frame, final=False):
    if frame.get("type") == "state_end" and frame.get("manifest"):
        for v in frame["manifest"]["vars"]:
            v.pop("sent", None)
            v["blob"] = "a" * 64
    return real(frame, final)
chan.send = forged
x = 1
"#;
    let e = ok(&t, &hostile, forged).await;
    assert!(e.state.unwrap().saved, "the harness believed it");
    let e = ok(&t, &hostile, "result = 'x' in globals()").await;
    assert_eq!(e.outcome.result, false, "the forged state was refused");
    // A blob gone from the disk: the session's next call says its state cannot be read.
    let blobs = t.dir.path().join("data/sessions/.blobs");
    for blob in std::fs::read_dir(&blobs).unwrap() {
        std::fs::remove_file(blob.unwrap().path()).unwrap();
    }
    let broken = call(&t, &hostile, "result = 1").await.unwrap();
    assert_eq!(broken.outcome.status, Status::Error);
    let error = broken.outcome.error.clone().unwrap_or_default();
    assert!(
        error.contains("could not be read") && error.contains("session=\"new\""),
        "{error}"
    );
    t.finish().await;
}

#[tokio::test]
async fn sessions_survive_a_restart_and_expire_when_idle() {
    let t = TestApp::start_with(|c| c.sessions.session_idle_secs = 10).await;
    let session = ok(&t, "new", "kept = [1, 2]").await.session.unwrap();
    settled(&t, &session).await;
    let config = t.app.config().clone();
    t.app.shutdown().await;
    let restarted = code_execution_mcp::app::App::start(config).await.unwrap();
    let again = TestApp {
        app: std::sync::Arc::new(restarted),
        dir: t.dir,
    };
    // A call that finds the pool empty puts it under pressure, and nothing is prepared then.
    common::wait_for_full_pool(&again.app, 1).await;
    let e = ok(&again, &session, "result = kept").await;
    assert_eq!(e.outcome.result, json!([1, 2]));
    assert_eq!(again.app.session_counts().sessions, 1);
    // Idle past --session-idle-secs (its last use moved back): expired, and named so.
    let meta = again
        .dir
        .path()
        .join("data/sessions")
        .join(&session)
        .join("meta.json");
    prepared(&again, 1).await;
    std::fs::write(&meta, r#"{"created_unix":1,"used_unix":1,"bytes":1}"#).unwrap();
    let err = refused(&again, &session).await;
    assert!(
        err.to_string().contains("expired") && err.to_string().contains(&session),
        "{err}"
    );
    assert_eq!(
        again.app.session_counts().prepared,
        0,
        "its prepared container is gone"
    );
    again.finish().await;
}

async fn fork(t: &TestApp, session: &str, code: &str) -> Result<Executed, ExecuteError> {
    t.app
        .execute(
            ExecuteRequest {
                code: code.into(),
                session: Some(session.into()),
                fork: true,
                ..Default::default()
            },
            Default::default(),
        )
        .await
}

#[tokio::test]
async fn a_forks_first_call_takes_the_container_its_source_had_prepared() {
    let t = TestApp::start_with(|c| (c.pool.pool_size, c.pool.pool_max) = (2, 2)).await;
    common::wait_for_full_pool(&t.app, 2).await;
    let src = ok(&t, "new", "x = 41").await.session.unwrap();
    prepared(&t, 1).await;
    let before = t.app.execution_stats().executions_prepared;
    let f = fork(&t, &src, "result = x + 1").await.unwrap();
    assert_ok(&f.outcome);
    assert_eq!(f.outcome.result, 42);
    assert_eq!(
        t.app.execution_stats().executions_prepared,
        before + 1,
        "the fork's first call ran in the container prepared for its source"
    );
    assert_eq!(f.outcome.start, None, "{:?}", f.outcome.start);
    // Both are prepared again: the fork's next call, and its source's.
    prepared(&t, 2).await;
    let fork_handle = f.session.unwrap();
    for (session, x) in [(&src, 41), (&fork_handle, 41)] {
        let e = ok(&t, session, "result = x").await;
        assert_eq!(e.outcome.result, x);
    }
    assert_eq!(t.app.execution_stats().executions_prepared, before + 3);
    t.finish().await;
}

fn revision(e: &Executed) -> u64 {
    e.state
        .as_ref()
        .and_then(|s| s.revision)
        .expect("a revision")
}

#[tokio::test]
async fn a_mistake_is_undone_by_running_on_an_earlier_revision() {
    let t = TestApp::start().await;
    let first = ok(&t, "new", "amounts = list(range(2000))").await;
    let s = first.session.clone().unwrap();
    assert_eq!(revision(&first), 1);
    // The mistake: a filter the wrong way round, then the data thrown away.
    let wrong = ok(&t, &s, "amounts = [a for a in amounts if a > 1000]").await;
    assert_eq!(revision(&wrong), 2);
    assert_eq!(revision(&ok(&t, &s, "amounts = None").await), 3);
    let back = ok(&t, &format!("{s}@1"), "result = len(amounts)").await;
    assert_eq!(back.outcome.result, 2000);
    assert_eq!(
        revision(&back),
        4,
        "a rewind's result is the newest revision"
    );
    // The handle alone is the newest; revisions after the one rewound to stay reachable.
    assert_eq!(
        ok(&t, &s, "result = len(amounts)").await.outcome.result,
        2000
    );
    assert_eq!(
        ok(&t, &format!("{s}@3"), "result = amounts")
            .await
            .outcome
            .result,
        json!(null)
    );
    // A revision that is not there, or not a revision: the session named, and what to do.
    for (arg, says) in [
        (format!("{s}@99"), "has no revision 99"),
        (format!("{s}@0"), "does not name a revision"),
        (format!("{s}@x"), "does not name a revision"),
    ] {
        let err = refused(&t, &arg).await.to_string();
        assert!(err.contains(says) && err.contains(&s), "{arg}: {err}");
    }
    assert_eq!(
        ok(&t, &format!("{s}@4"), "result = len(amounts)")
            .await
            .outcome
            .result,
        2000
    );
    t.finish().await;
}

#[tokio::test]
async fn a_fork_branches_without_touching_its_source() {
    let t = TestApp::start_with(|c| c.sessions.session_max_count = 3).await;
    let src = ok(&t, "new", "base = [1, 2, 3]").await.session.unwrap();
    ok(&t, &src, "base.append(4)").await;
    let a = fork(&t, &src, "base.append('a')\nresult = base")
        .await
        .unwrap();
    assert_ok(&a.outcome);
    let branch = a.session.clone().unwrap();
    assert_ne!(branch, src);
    let state = a.state.clone().unwrap();
    assert_eq!(state.forked_from, Some(format!("{src}@2")));
    assert_eq!(state.revision, Some(2), "revision 1 is the source's state");
    let b = fork(&t, &format!("{src}@1"), "result = base")
        .await
        .unwrap();
    assert_eq!(b.outcome.result, json!([1, 2, 3]));
    assert_eq!(
        ok(&t, &src, "result = base").await.outcome.result,
        json!([1, 2, 3, 4])
    );
    assert_eq!(
        ok(&t, &branch, "result = base").await.outcome.result,
        json!([1, 2, 3, 4, "a"])
    );
    // Forks count against the tenant's bound; forking nothing, or "new", says what to do.
    let err = fork(&t, &src, "pass").await.unwrap_err().to_string();
    assert!(err.contains("already holds 3 sessions"), "{err}");
    let unknown = format!("ses_{}", "0".repeat(32));
    let err = fork(&t, &unknown, "pass").await.unwrap_err().to_string();
    assert!(
        err.contains(&unknown) && err.contains("session=\"new\""),
        "{err}"
    );
    let err = fork(&t, "new", "pass").await.unwrap_err().to_string();
    assert!(err.contains("fork=true needs a session"), "{err}");
    assert_eq!(
        ok(&t, &src, "result = base").await.outcome.result,
        json!([1, 2, 3, 4])
    );
    t.finish().await;
}

/// Waits until the session's newest revision is `n` (its snapshot committed), and returns
/// what it holds then.
async fn until_revision(t: &TestApp, session: &str, n: u64) -> SessionView {
    for _ in 0..600 {
        let view = t.app.session_view(session.to_string()).await.unwrap();
        if view.revision == n {
            return view;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{session} never reached revision {n}");
}

/// The tenant's state bytes received so far, as the metrics endpoint counts them.
async fn bytes_received(t: &TestApp) -> u64 {
    let text =
        code_execution_mcp::metrics::collect::render(t.app.shared(), std::slice::from_ref(&t.app))
            .await;
    let line = (text.lines())
        .find(|l| l.starts_with("cem_session_state_bytes_received_total{"))
        .unwrap_or_else(|| panic!("no state bytes counted: {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// What the server received for revision `n`, as the session's resource shows it.
fn received_for(view: &SessionView, n: u64) -> u64 {
    let rev = view.revisions.iter().find(|r| r.revision == n);
    rev.unwrap_or_else(|| panic!("no revision {n}: {view:?}"))
        .bytes_received
}

#[tokio::test]
async fn an_unchanged_variable_is_not_sent_again() {
    let t = TestApp::start().await;
    let s = ok(&t, "new", "import os\nbig = os.urandom(3_000_000)")
        .await
        .session
        .unwrap();
    let view = until_revision(&t, &s, 1).await;
    let first = bytes_received(&t).await;
    assert!(first >= 3_000_000, "{first}");
    assert_eq!(received_for(&view, 1), first);
    // A call that changes nothing: the server receives no byte of state.
    let e = ok(&t, &s, "print(len(big))").await;
    assert_eq!(e.outcome.stdout.as_str(), "3000000\n");
    let view = until_revision(&t, &s, 2).await;
    assert_eq!(received_for(&view, 2), 0, "{view:?}");
    assert_eq!(bytes_received(&t).await, first, "nothing re-sent");
    // A call that changes a small variable: that one alone arrives.
    ok(&t, &s, "small = 7").await;
    let view = until_revision(&t, &s, 3).await;
    let third = bytes_received(&t).await - first;
    assert!(third > 0 && third < 1000, "{third}");
    assert_eq!(received_for(&view, 3), third);
    assert_eq!(
        ok(&t, &s, "result = [len(big), small]")
            .await
            .outcome
            .result,
        json!([3_000_000, 7])
    );
    t.finish().await;
}

#[test]
fn the_python_sdk_reads_rewinds_and_forks_sessions_on_both_eras() {
    let run = common::run_python_client_with("sessions_client.py", &[]);
    for era in ["stdio legacy: sessions ok", "stdio auto: sessions ok"] {
        assert!(run.stdout.contains(era), "{}", run.stdout);
    }
}

#[tokio::test]
async fn a_call_that_does_not_finish_keeps_the_previous_state_and_says_why() {
    let t = TestApp::start().await;
    let s = ok(&t, "new", "x = 'kept'").await.session.unwrap();
    let run = |code: &str, timeout: Option<f64>, memory: Option<f64>| {
        let request = ExecuteRequest {
            code: code.into(),
            session: Some(s.clone()),
            timeout_seconds: timeout,
            memory_mb: memory,
            ..Default::default()
        };
        t.app.execute(request, Default::default())
    };
    let e = run("x = 'lost'\nwhile True: pass", Some(2.0), None)
        .await
        .unwrap();
    assert_eq!(e.outcome.status, Status::Timeout);
    let state = e.state.unwrap();
    assert!(!state.saved && state.reason.unwrap().contains("keeps the state"));
    let e = run("x = 'lost'\nb = bytearray(400 << 20)", None, Some(128.0))
        .await
        .unwrap();
    assert_ne!(e.outcome.status, Status::Ok);
    assert!(!e.state.unwrap().saved);
    // Cancelled by the client while it runs.
    let cancel = tokio_util::sync::CancellationToken::new();
    let request = ExecuteRequest {
        code: "import time\nx = 'lost'\ntime.sleep(60)".into(),
        session: Some(s.clone()),
        ..Default::default()
    };
    let (e, ()) = tokio::join!(t.app.execute(request, cancel.clone()), async {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        cancel.cancel();
    });
    let e = e.unwrap();
    assert_eq!(e.outcome.status, Status::Cancelled);
    assert!(!e.state.unwrap().saved);
    assert_eq!(ok(&t, &s, "result = x").await.outcome.result, "kept");
    t.finish().await;
}

#[tokio::test]
async fn a_context_var_wins_over_a_carried_one() {
    let t = TestApp::start().await;
    let s = ok(&t, "new", "y = 'carried'\nz = 'carried'")
        .await
        .session
        .unwrap();
    let request = ExecuteRequest {
        code: "result = [y, z]".into(),
        session: Some(s.clone()),
        context_vars: Some(json!({"y": "given"})),
        ..Default::default()
    };
    let e = t.app.execute(request, Default::default()).await.unwrap();
    assert_eq!(e.outcome.result, json!(["given", "carried"]));
    t.finish().await;
}

#[tokio::test]
async fn the_state_directory_is_read_only_and_holds_only_the_states_blobs() {
    let t = TestApp::start().await;
    let s = ok(
        &t,
        "new",
        "import os\na = os.urandom(5_000_000)\nb = [1, 2]",
    )
    .await
    .session
    .unwrap();
    let look = r#"
import errno, os
try:
    open('/mnt/state/x', 'w')
    write = "allowed"
except OSError as e:
    write = errno.errorcode.get(e.errno, str(e.errno))
result = {"files": sorted(os.listdir('/mnt/state')), "write": write}
"#;
    let e = ok(&t, &s, look).await;
    let files = e.outcome.result["files"].as_array().unwrap().clone();
    assert_eq!(files.len(), 2, "a's blob and b's: {files:?}");
    assert_ne!(e.outcome.result["write"], "allowed");
    // A call of no session has the directory, empty.
    let e = t.run(look).await;
    assert_eq!(e.result["files"], json!([]));
    assert_ne!(e.result["write"], "allowed");
    t.finish().await;
}

#[tokio::test]
async fn the_idle_sweep_removes_expired_sessions_and_they_stop_counting() {
    let t = TestApp::start_with(|c| c.sessions.session_max_count = 1).await;
    let s = ok(&t, "new", "v = 1").await.session.unwrap();
    // Its snapshot saved (its next container is prepared after): nothing writes its meta now.
    prepared(&t, 1).await;
    let dir = t.dir.path().join("data/sessions");
    let meta = dir.join(&s).join("meta.json");
    std::fs::write(
        &meta,
        r#"{"created_unix":1,"used_unix":1,"bytes":1,"revision":1}"#,
    )
    .unwrap();
    // No call names it: the sweep alone removes it, and its blobs once nothing names them.
    t.app.sweep_sessions().await;
    assert!(!dir.join(&s).exists());
    assert_eq!(t.app.session_counts().sessions, 0);
    ok(&t, "new", "pass").await;
    t.finish().await;
}

/// The blobs of this tenant's sessions on disk.
fn blobs_on_disk(t: &TestApp) -> BTreeSet<String> {
    let dir = t.dir.path().join("data/sessions/.blobs");
    (std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// The blobs each revision on disk names, by session and revision (read from the manifests).
fn named_by(t: &TestApp) -> BTreeMap<(String, u64), BTreeSet<String>> {
    let mut named = BTreeMap::new();
    let sessions = t.dir.path().join("data/sessions");
    for session in std::fs::read_dir(sessions).unwrap() {
        let session = session.unwrap();
        let handle = session.file_name().into_string().unwrap();
        if !handle.starts_with("ses_") {
            continue;
        }
        for file in std::fs::read_dir(session.path()).unwrap() {
            let file = file.unwrap().file_name().into_string().unwrap();
            let Some(n) = file
                .strip_prefix("rev-")
                .and_then(|f| f.strip_suffix(".json"))
            else {
                continue;
            };
            let path = session.path().join(&file);
            let Ok(text) = std::fs::read(&path) else {
                continue; // removed meanwhile by a trim
            };
            let manifest: serde_json::Value = serde_json::from_slice(&text).unwrap();
            let blobs = (manifest["vars"].as_array().unwrap().iter())
                .map(|v| v["blob"].as_str().unwrap().to_string())
                .collect();
            named.insert((handle.clone(), n.parse().unwrap()), blobs);
        }
    }
    named
}

fn all_named(t: &TestApp) -> BTreeSet<String> {
    named_by(t).into_values().flatten().collect()
}

/// Moves every blob's last write back past the sweep's grace (a constant of the server's:
/// the test moves time, not the grace).
fn age_blobs(t: &TestApp) {
    let then = std::time::SystemTime::now() - std::time::Duration::from_secs(600);
    for blob in std::fs::read_dir(t.dir.path().join("data/sessions/.blobs")).unwrap() {
        let file = std::fs::File::options()
            .append(true)
            .open(blob.unwrap().path())
            .unwrap();
        file.set_modified(then).unwrap();
    }
}

/// Waits until the session holds exactly revisions `held` and the blobs on disk are exactly
/// those the revisions of every session name: the sweep after the trim has run.
async fn swept(t: &TestApp, session: &str, held: &[u64]) {
    let mut last = None;
    for _ in 0..600 {
        let view = t.app.session_view(session.to_string()).await.unwrap();
        let numbers: Vec<u64> = view.revisions.iter().map(|r| r.revision).collect();
        let (disk, named) = (blobs_on_disk(t), all_named(t));
        if numbers == held && disk == named {
            return;
        }
        last = Some((numbers, disk, named));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (numbers, disk, named) = last.unwrap();
    panic!(
        "{session} holds {numbers:?} (expected {held:?}); on disk but named by none: {:?}; named but gone: {:?}",
        disk.difference(&named).collect::<Vec<_>>(),
        named.difference(&disk).collect::<Vec<_>>()
    );
}

/// Moves a session's last use back past `--session-idle-secs`.
fn make_idle(t: &TestApp, session: &str) {
    let meta = t
        .dir
        .path()
        .join("data/sessions")
        .join(session)
        .join("meta.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    value["used_unix"] = json!(1);
    std::fs::write(&meta, value.to_string()).unwrap();
}

/// Runs `read` on each revision the session holds, oldest first (a rewind's result becomes a
/// newer revision, so an older one is read before the bounds could take it), and checks
/// what it returns against `expected`.
async fn every_revision_runs(
    t: &TestApp,
    session: &str,
    read: &str,
    expected: &BTreeMap<u64, serde_json::Value>,
) {
    let view = t.app.session_view(session.to_string()).await.unwrap();
    let held: Vec<u64> = view.revisions.iter().map(|r| r.revision).collect();
    assert_eq!(held, expected.keys().copied().collect::<Vec<_>>());
    for n in held {
        let e = ok(t, &format!("{session}@{n}"), read).await;
        assert_eq!(e.outcome.result, expected[&n], "{session}@{n}");
    }
}

#[tokio::test]
async fn trims_sweep_exactly_the_unnamed_blobs_and_every_kept_revision_runs() {
    let t = TestApp::start_with(|c| {
        c.sessions.session_history = 3;
        c.sessions.session_max_mb = 1;
    })
    .await;
    let read = "result = [a, big[:8].hex()]";
    let mut seen = BTreeMap::new();
    let mut call = async |s: Option<&str>, n: u64, code: &str| {
        let e = ok(&t, s.unwrap_or("new"), &format!("{code}\n{read}")).await;
        assert_eq!(revision(&e), n);
        let s = e.session.unwrap();
        seen.insert(n, e.outcome.result);
        s
    };
    let s = call(None, 1, "import os\na = 'r1'\nbig = os.urandom(100)").await;
    call(Some(&s), 2, "a = 'r2'").await;
    call(Some(&s), 3, "a = 'r3'").await;
    until_revision(&t, &s, 3).await;
    // Past the grace, the history trim (of revision 1) takes what only it named (its `a` and
    // `result`), and nothing else.
    let first = named_by(&t)[&(s.clone(), 1)].clone();
    age_blobs(&t);
    let before = blobs_on_disk(&t);
    call(Some(&s), 4, "a = 'r4'").await;
    swept(&t, &s, &[2, 3, 4]).await;
    let gone: BTreeSet<_> = before.difference(&blobs_on_disk(&t)).cloned().collect();
    assert!(!gone.is_empty() && gone.is_subset(&first), "{gone:?}");
    // The byte bound (1 MiB of distinct bytes) trims within the history: 3 x 400 kB is over.
    call(Some(&s), 5, "big = os.urandom(400_000)").await;
    call(Some(&s), 6, "big = os.urandom(400_000)").await;
    swept(&t, &s, &[4, 5, 6]).await;
    let fifth = named_by(&t)[&(s.clone(), 5)].clone();
    age_blobs(&t);
    call(Some(&s), 7, "big = os.urandom(400_000)").await;
    swept(&t, &s, &[6, 7]).await;
    let disk = blobs_on_disk(&t);
    assert!(fifth.iter().any(|b| !disk.contains(b)), "5's `big` is gone");
    let kept: BTreeMap<u64, serde_json::Value> =
        [6, 7].into_iter().map(|n| (n, seen[&n].clone())).collect();
    every_revision_runs(&t, &s, read, &kept).await;
    t.finish().await;
}

#[tokio::test]
async fn expiries_keep_what_a_fork_shares_and_every_revision_of_the_fork_runs() {
    let t = TestApp::start_with(|c| c.sessions.session_max_count = 3).await;
    let src = ok(&t, "new", "a = 'a1'").await.session.unwrap();
    ok(&t, &src, "b = 'shared'").await;
    ok(&t, &src, "a = 'a3'").await;
    // The fork's first revision is the source's second; its own changes both variables, so
    // only that first revision (and the source) names `a1` and `shared`.
    let f = fork(&t, &format!("{src}@2"), "a = 'fork'\nb = 'own'")
        .await
        .unwrap();
    assert_ok(&f.outcome);
    let f = f.session.unwrap();
    let lone = ok(&t, "new", "z = 'lonely'").await.session.unwrap();
    until_revision(&t, &src, 3).await;
    until_revision(&t, &f, 2).await;
    until_revision(&t, &lone, 1).await;
    let named = named_by(&t);
    let shared = named[&(f.clone(), 1)].clone();
    assert_eq!(
        shared,
        named[&(src.clone(), 2)],
        "the fork shares its source's blobs"
    );
    let only_gone: BTreeSet<String> = (named.iter())
        .filter(|((h, _), _)| *h != f)
        .flat_map(|(_, b)| b.iter().cloned())
        .filter(|b| {
            !named
                .iter()
                .any(|((h, _), blobs)| *h == f && blobs.contains(b))
        })
        .collect();
    assert_eq!(only_gone.len(), 2, "a3 and lonely: {only_gone:?}");
    // The source and the lone session idle past the limit; the sweep expires them.
    age_blobs(&t);
    make_idle(&t, &src);
    make_idle(&t, &lone);
    t.app.sweep_sessions().await;
    assert_eq!(t.app.session_handles(), vec![f.clone()]);
    let disk = blobs_on_disk(&t);
    assert_eq!(
        disk,
        all_named(&t),
        "exactly the blobs the fork's revisions name"
    );
    assert!(shared.is_subset(&disk) && only_gone.is_disjoint(&disk));
    let expected = BTreeMap::from([(1, json!(["a1", "shared"])), (2, json!(["fork", "own"]))]);
    every_revision_runs(&t, &f, "result = [a, b]", &expected).await;
    t.finish().await;
}

#[tokio::test]
async fn a_server_stopped_while_a_large_state_is_prepared_leaves_no_container() {
    let t = TestApp::start().await;
    let s = ok(&t, "new", "import os\nbig = os.urandom(50_000_000)")
        .await
        .session
        .unwrap();
    ok(&t, &s, "big = big[::-1]").await;
    // The moment its snapshot is saved, its next container is being prepared: stop then.
    for _ in 0..2000 {
        if t.app.session_view(s.clone()).await.unwrap().revision == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(t.app.session_view(s.clone()).await.unwrap().revision, 2);
    t.finish().await;
}

#[tokio::test]
async fn listeners_hear_of_a_new_session_and_of_each_new_revision() {
    use code_execution_mcp::app::events::{Interest, Notice};
    let t = TestApp::start().await;
    let mut list = (t.app.events())
        .listen(Interest {
            resources_list: true,
            ..Default::default()
        })
        .unwrap();
    let s = ok(&t, "new", "v = 1").await.session.unwrap();
    assert_eq!(heard(&mut list).await, Notice::ResourcesListChanged);
    let uri = format!("session://{s}");
    let mut one = (t.app.events())
        .listen(Interest {
            uris: [uri.clone()].into(),
            ..Default::default()
        })
        .unwrap();
    ok(&t, &s, "v = 2").await;
    // Revision 1's notice may come first: it was saved after its call answered.
    let mut view = None;
    for _ in 0..2 {
        assert_eq!(heard(&mut one).await, Notice::ResourceUpdated(uri.clone()));
        view = Some(t.app.session_view(s.clone()).await.unwrap());
        if view.as_ref().is_some_and(|v| v.revision == 2) {
            break;
        }
    }
    let view = view.unwrap();
    assert_eq!(view.revision, 2, "{view:?}");
    assert_eq!(view.variables[0].preview, "2");
    t.finish().await;
}

/// The next notice a listener hears, within 30 s.
async fn heard(
    listener: &mut code_execution_mcp::app::events::Listener,
) -> code_execution_mcp::app::events::Notice {
    let next = tokio::time::timeout(std::time::Duration::from_secs(30), listener.next());
    next.await
        .expect("a notice within 30 s")
        .expect("the tenant is open")
}

#[tokio::test]
async fn the_preload_learns_dotted_names_and_what_a_sessions_state_needs() {
    let t = TestApp::start().await;
    let o = t
        .run("import matplotlib.pyplot as plt\nfrom os import path")
        .await;
    assert_ok(&o);
    for name in ["matplotlib.pyplot", "os", "os.path"] {
        assert!(
            o.imports.contains(&name.to_string()),
            "{name}: {:?}",
            o.imports
        );
    }
    let code = "import pandas\ndf = pandas.DataFrame({'a': [1]})";
    let s = ok(&t, "new", code).await.session.unwrap();
    // A call that imports nothing itself still needs pandas, for the state it loaded.
    let e = ok(&t, &s, "result = int(df.a.sum())").await;
    assert!(
        e.outcome.imports.contains(&"pandas".to_string()),
        "{:?}",
        e.outcome.imports
    );
    t.finish().await;
}
