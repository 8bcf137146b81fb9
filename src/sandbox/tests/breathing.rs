//! The pool that breathes and the removal backlog, one test per path: growth under a burst
//! within the budget, the fall back when idle (to nothing for a tenant), the budget shared by
//! two pools; removals deferred while the engine is busy, the backlog's bound, a container that
//! still runs after `done`, and shutdown flushing the backlog.

use serde_json::json;

use crate::sandbox::PoolBudget;
use crate::sandbox::pool::account::PoolPace;
use crate::sandbox::tests::fake::{Step, ok};
use crate::sandbox::tests::*;

/// A rig with a pool of `base` within a budget of `max`, idle after `idle_secs`.
async fn breathing(base: usize, max: usize, idle_secs: u64, idle_floor: usize) -> Rig {
    let mut s = settings(base, 4);
    s.pool_budget = PoolBudget::new(max);
    s.pool_idle = Duration::from_secs(idle_secs);
    s.pool_idle_floor = idle_floor;
    let rig = Rig::new(vec![ok(json!(1))], s);
    rig.sandbox.refill();
    rig.sandbox.watch_engine();
    rig.engine.until_live(base).await;
    settle().await;
    rig
}

#[tokio::test(start_paused = true)]
async fn the_pool_grows_under_a_burst_within_its_budget_and_falls_back_when_idle() {
    let rig = breathing(1, 3, 60, 1).await;
    for _ in 0..6 {
        assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    }
    settle().await;
    let grown = rig.sandbox.pool_snapshot();
    assert_eq!((grown.target, grown.share, grown.base), (3, 3, 1));
    assert_eq!(grown.ready, 3, "refilled to the grown target");
    assert_eq!(grown.server_held, 3);
    assert!(grown.started_total >= 6, "{grown:?}");
    assert!(grown.refill_per_second > 0.0);
    tokio::time::sleep(Duration::from_secs(61)).await;
    settle().await;
    let idle = rig.sandbox.pool_snapshot();
    assert_eq!((idle.target, idle.ready, idle.server_held), (1, 1, 1));
    assert_eq!(
        rig.engine.live().len(),
        1,
        "the extra containers were removed"
    );
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_tenant_gives_its_containers_back_and_gets_them_again_on_use() {
    let rig = breathing(2, 8, 30, 0).await;
    tokio::time::sleep(Duration::from_secs(31)).await;
    settle().await;
    let idle = rig.sandbox.pool_snapshot();
    assert_eq!((idle.target, idle.ready, idle.server_held), (0, 0, 0));
    assert!(rig.engine.live().is_empty());
    // Its next execution runs cold and brings the pool back to its base.
    assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    assert_eq!(rig.stats.snapshot().executions_pooled, 0);
    settle().await;
    let back = rig.sandbox.pool_snapshot();
    assert_eq!((back.target, back.ready), (2, 2));
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn pools_share_the_servers_budget() {
    let budget = PoolBudget::new(3);
    let rigs: Vec<Rig> = (0..2)
        .map(|_| {
            let mut s = settings(2, 4);
            s.pool_budget = budget.clone();
            Rig::new(vec![ok(json!(1))], s)
        })
        .collect();
    for rig in &rigs {
        rig.sandbox.refill();
    }
    settle().await;
    let ready: Vec<usize> = rigs.iter().map(|r| r.sandbox.pool_ready()).collect();
    assert_eq!(
        ready,
        [2, 1],
        "the second pool got what the budget had left"
    );
    assert_eq!(budget.held(), 3);
    // A share never falls below the base; growth is bounded by the budget either way.
    assert_eq!(rigs[0].sandbox.pool_snapshot().share, 2);
    for rig in rigs {
        rig.finish().await;
    }
    assert_eq!(budget.held(), 0, "shutdown gave everything back");
}

#[tokio::test(start_paused = true)]
async fn used_containers_wait_for_an_idle_engine_to_be_removed() {
    let rig = Rig::with_backlog(vec![ok(json!(1))], settings(0, 2), 8);
    let removals = rig.sandbox.settings().removals.clone();
    let busy = removals.busy();
    assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    settle().await;
    assert_eq!(removals.backlog(), 1, "stopped, waiting in the backlog");
    assert_eq!(rig.engine.live().len(), 1);
    assert_eq!(rig.stats.snapshot().phases["remove"].count, 0);
    drop(busy);
    settle().await;
    assert_eq!(removals.backlog(), 0);
    assert!(rig.engine.live().is_empty());
    assert_eq!(rig.stats.snapshot().phases["remove"].count, 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn past_its_bound_the_backlog_is_removed_while_the_engine_is_busy() {
    let rig = Rig::with_backlog(vec![ok(json!(1))], settings(0, 2), 2);
    let removals = rig.sandbox.settings().removals.clone();
    let _busy = removals.busy();
    for _ in 0..5 {
        assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
        settle().await;
    }
    assert_eq!(removals.backlog(), 2, "held at its bound");
    assert_eq!(rig.engine.live().len(), 2);
    // Shutdown removes the backlog even while something keeps the engine busy.
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_container_still_running_after_done_is_removed_at_once() {
    let rig = Rig::with_backlog(vec![ok(json!(1)), Step::Hang], settings(0, 2), 8);
    let removals = rig.sandbox.settings().removals.clone();
    let _busy = removals.busy();
    assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(removals.backlog(), 0, "never deferred");
    assert!(rig.engine.live().is_empty(), "removed after the grace");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn phases_of_a_cold_execution_are_timed() {
    let rig = Rig::cold(vec![ok(json!(1))]);
    assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    settle().await;
    let phases = rig.stats.snapshot().phases;
    for name in [
        "create",
        "attach",
        "start",
        "job_written",
        "first_frame",
        "done",
        "run",
        "remove",
    ] {
        assert_eq!(phases[name].count, 1, "{name}: {phases:?}");
    }
    assert_eq!(
        phases["pool_wait"].count, 0,
        "a cold sandbox never asks the pool"
    );
    assert_eq!(phases["kill_wait"].count, 0, "it ended with done");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn replacements_skip_the_preload_while_executions_outpace_the_pool() {
    let mut s = settings(1, 4);
    s.preload = crate::sandbox::pool::preload::Preload::Fixed(vec!["pandas".into()]);
    let rig = Rig::new(vec![ok(json!(1))], s);
    rig.sandbox.refill();
    rig.engine.until_live(1).await;
    settle().await;
    // Two at once: the second finds the pool empty.
    let (a, b) = (
        rig.spawn_run(job(10), CancellationToken::new()),
        rig.spawn_run(job(10), CancellationToken::new()),
    );
    assert_eq!(a.await.unwrap().unwrap().status, Status::Ok);
    assert_eq!(b.await.unwrap().unwrap().status, Status::Ok);
    settle().await;
    let preloads = rig.engine.preloads();
    assert_eq!(preloads[0], ["pandas"], "a pool at rest preloads");
    assert!(
        preloads[1..].iter().all(Vec::is_empty),
        "replacements under pressure skip it: {preloads:?}"
    );
    let behind = rig.sandbox.pool_snapshot().keeping_up;
    assert!(behind.preload_skipped >= 1, "{behind:?}");
    assert_eq!(behind.waits + behind.cold_starts, 1, "{behind:?}");
    assert_ne!(behind.pace, PoolPace::KeepingUp);
    tokio::time::sleep(crate::sandbox::pool::PRESSURE_WINDOW).await;
    let before = preloads.len();
    assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    settle().await;
    let preloads = rig.engine.preloads();
    assert!(preloads.len() > before);
    assert_eq!(
        preloads[before..],
        [vec!["pandas".to_string()]],
        "the pressure has passed"
    );
    assert_eq!(
        rig.sandbox.pool_snapshot().keeping_up.pace,
        PoolPace::KeepingUp
    );
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_learned_preload_follows_what_the_code_imports() {
    let imports_pandas = Step::Done(json!({
        "type": "done", "success": true, "result": 1, "imports": ["pandas", "numpy"]
    }));
    let mut s = settings(1, 2);
    s.preload = crate::sandbox::pool::preload::Preload::Learned;
    let rig = Rig::new(vec![imports_pandas], s);
    rig.sandbox.refill();
    rig.engine.until_live(1).await;
    settle().await;
    assert_eq!(
        rig.engine.preloads(),
        [Vec::<String>::new()],
        "nothing learned yet"
    );
    let data = Job {
        code: "import pandas as pd\nprint(pd.__version__)".into(),
        ..job(10)
    };
    let run = rig.sandbox.run(data.clone(), CancellationToken::new());
    assert_eq!(run.await.unwrap().status, Status::Ok);
    settle().await;
    let preloads = rig.engine.preloads();
    assert_eq!(
        preloads.last().unwrap(),
        &["pandas".to_string(), "numpy".to_string()],
        "{preloads:?}"
    );
    // A call whose code imports none of them is replaced by a plain container.
    let before = preloads.len();
    assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    settle().await;
    let preloads = rig.engine.preloads();
    assert_eq!(preloads[before..], [Vec::<String>::new()], "{preloads:?}");
    rig.finish().await;
}

#[tokio::test]
async fn an_idle_engine_removes_one_at_a_time_and_catches_up_four() {
    let engine = Arc::new(FakeEngine::new(Vec::new()));
    let removals = crate::sandbox::Removals::new(Arc::new(engine), 3);
    let queued = |n: usize| {
        for i in 0..n {
            removals.defer(format!("c{i}"), Arc::new(Stats::new()));
        }
    };
    // No await below: the worker, on this thread, never runs.
    let busy = removals.busy();
    queued(3);
    assert!(removals.next_pick(0).is_none(), "busy, within the bound");
    drop(busy);
    assert!(removals.next_pick(0).is_some(), "idle: one");
    assert!(removals.next_pick(1).is_none(), "one already under way");
    queued(6);
    let started = (0..4).filter(|n| removals.next_pick(*n).is_some());
    assert_eq!(started.count(), 4, "past the bound: four at once");
    assert!(removals.next_pick(4).is_none());
}
