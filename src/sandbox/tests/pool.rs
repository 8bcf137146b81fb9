//! The pool, admission and shutdown, one test per path: refill, retry, retarget, memory
//! updates, stale containers, the queue, cancellation while queued, drain.

use std::sync::atomic::Ordering;

use serde_json::json;

use tokio_util::sync::CancellationToken;

use crate::sandbox::StartReason;
use crate::sandbox::engine::backend::EngineEvent;
use crate::sandbox::pool::{Pool, Wanted, Wants};
use crate::sandbox::tests::fake::{Step, ok};
use crate::sandbox::tests::*;

#[tokio::test(start_paused = true)]
async fn the_pool_fills_and_a_pooled_run_takes_one_then_refills() {
    let rig = Rig::pooled(vec![ok(json!(1))], 2).await;
    assert_eq!(rig.sandbox.pool_ready(), 2);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(outcome.start, None, "a container at hand is not mentioned");
    assert_eq!(rig.stats.snapshot().executions_pooled, 1);
    settle().await;
    assert_eq!(rig.sandbox.pool_ready(), 2, "the taken one was replaced");
    assert_eq!(rig.engine.created().len(), 3, "two pooled, one replacement");
    assert_eq!(rig.engine.live().len(), 2, "the used one was removed");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn an_empty_pool_waits_for_a_replacement_on_its_way_instead_of_a_cold_start() {
    let rig = Rig::new(vec![ok(json!(1))], settings(1, 2));
    rig.sandbox.refill();
    // The replacement is on its way (not ready): the run takes it rather than start its own.
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(rig.stats.snapshot().executions_pooled, 1);
    let start = outcome.start.expect("a call that waited says so");
    assert_eq!((start.pooled, start.reason), (true, StartReason::PoolEmpty));
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_replacement_the_engine_is_stuck_on_costs_half_the_start_limit_then_runs_cold() {
    let rig = Rig::new(vec![ok(json!(1))], settings(1, 2));
    rig.engine.stall_create.store(true, Ordering::SeqCst);
    rig.sandbox.refill();
    settle().await;
    // The replacement's create never answers; the engine starts the next container.
    rig.engine.stall_create.store(false, Ordering::SeqCst);
    let asked = tokio::time::Instant::now();
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok, "{}", error_text(&outcome));
    assert_eq!(rig.stats.snapshot().executions_pooled, 0, "it ran cold");
    let waited = asked.elapsed();
    assert!(
        (Duration::from_secs(15)..Duration::from_secs(16)).contains(&waited),
        "answered after {waited:?}: half the 30 s start limit waiting, then a cold start"
    );
    let start = outcome.start.expect("a cold call says so");
    assert_eq!(
        (start.pooled, start.reason),
        (false, StartReason::PoolEmpty)
    );
    assert!(start.waited_ms >= 15_000, "{start:?}");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_set_replacing_the_images_modules_skips_a_pool_that_preloads() {
    let replacing = || Job {
        packages: Some("0123456789abcdef0123456789abcdef".into()),
        replaces_image: true,
        ..job(10)
    };
    // A pool that imports numpy ahead: the image's numpy would win over the set's.
    let mut preloading = settings(1, 2);
    preloading.preload = crate::sandbox::pool::preload::Preload::Fixed(vec!["numpy".into()]);
    let rig = Rig::new(vec![ok(json!(1)), ok(json!(1))], preloading);
    rig.sandbox.refill();
    rig.engine.until_live(1).await;
    settle().await;
    let outcome = rig
        .sandbox
        .run(replacing(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(rig.stats.snapshot().executions_pooled, 0, "it ran cold");
    let start = outcome.start.expect("a cold call says so");
    assert_eq!((start.pooled, start.reason), (false, StartReason::Packages));
    // A set that replaces nothing takes the pooled container.
    let outcome = rig
        .sandbox
        .run(
            Job {
                replaces_image: false,
                ..replacing()
            },
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(rig.stats.snapshot().executions_pooled, 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_server_without_a_pool_says_each_call_started_its_own() {
    let rig = Rig::new(vec![ok(json!(1))], settings(0, 2));
    let outcome = rig.run(10).await.unwrap();
    let start = outcome.start.expect("a cold call says so");
    assert_eq!((start.pooled, start.reason), (false, StartReason::PoolOff));
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_container_without_the_modules_the_pool_imports_ahead_is_told_apart() {
    let mut preloading = settings(1, 2);
    preloading.preload =
        crate::sandbox::pool::preload::Preload::Fixed(vec!["pandas".into(), "numpy".into()]);
    let rig = Rig::new(Vec::new(), preloading);
    let imports = |names: &[&str]| Wants::Imports(names.iter().map(|n| n.to_string()).collect());
    let missing = |wants: &Wants, had: &[&str]| {
        let had: Vec<String> = had.iter().map(|n| n.to_string()).collect();
        rig.sandbox.preload_missing(wants, &had)
    };
    assert!(
        missing(&imports(&["pandas"]), &[]),
        "pandas is imported ahead elsewhere"
    );
    assert!(
        !missing(&imports(&["pandas"]), &["pandas.core"]),
        "it was here"
    );
    assert!(missing(&imports(&["numpy", "json"]), &["pandas"]));
    assert!(
        !missing(&imports(&["json"]), &[]),
        "json is no module imported ahead"
    );
    assert!(!missing(&Wants::Plain, &[]));
    rig.finish().await;
}

/// A container started by the rig's engine, as a pooled start makes it.
async fn started(rig: &Rig, name: &str) -> crate::sandbox::run::Started {
    let sandbox = &rig.sandbox;
    crate::sandbox::run::start(
        &sandbox.backend,
        &sandbox.spec(256 * MB, name),
        name,
        &sandbox.cleanup,
    )
    .await
    .unwrap()
}

/// An execution waiting for a pooled container, in a task: the name of the one it got.
type Waiter = tokio::task::JoinHandle<Option<String>>;

/// Two replacements on their way, and two executions waiting for them, the first first.
async fn two_waiters(rig: &Rig) -> (Arc<Pool>, Waiter, Waiter) {
    let pool = rig.sandbox.pool.clone();
    assert_eq!(pool.reserve(&Wanted::default()).len(), 2);
    let wait = || {
        let pool = pool.clone();
        tokio::spawn(async move {
            let taken = pool
                .take_or_wait(Duration::from_secs(30), &Wants::Imports(Vec::new()))
                .await;
            taken.map(|h| {
                assert!(h.waited, "a container that landed is told apart");
                h.waiting.started.name().to_string()
            })
        })
    };
    let first = wait();
    tokio::task::yield_now().await;
    let second = wait();
    tokio::task::yield_now().await;
    (pool, first, second)
}

#[tokio::test(start_paused = true)]
async fn waiters_are_served_in_the_order_they_came() {
    let rig = Rig::new(Vec::new(), settings(2, 2));
    let (pool, first, second) = two_waiters(&rig).await;
    assert!(
        pool.take_or_wait(Duration::from_secs(30), &Wants::Imports(Vec::new()))
            .await
            .is_none(),
        "a third finds both replacements spoken for and starts its own"
    );
    pool.put(
        started(&rig, "landed-1").await,
        &pool.image(),
        Vec::new(),
        Duration::ZERO,
    );
    assert_eq!(first.await.unwrap().as_deref(), Some("landed-1"));
    tokio::task::yield_now().await;
    assert!(!second.is_finished(), "the second waits for the next one");
    pool.put(
        started(&rig, "landed-2").await,
        &pool.image(),
        Vec::new(),
        Duration::ZERO,
    );
    assert_eq!(second.await.unwrap().as_deref(), Some("landed-2"));
    assert_eq!(pool.ready(), 0, "both were handed over, none kept");
    assert_eq!(rig.sandbox.settings.pool_budget.held(), 0);
    rig.finish().await;
}

/// The first calls on a fresh pool wait for its first containers: counted, but the pool is
/// filling, not behind the calls, and its replacements still import the usual modules. A wait
/// once a container has landed is the pool falling behind: preloads stop for a while.
#[tokio::test(start_paused = true)]
async fn a_wait_while_the_pool_fills_does_not_hold_back_preloads() {
    let rig = Rig::new(Vec::new(), settings(2, 2));
    let (pool, first, second) = two_waiters(&rig).await;
    for (name, waiter) in [("landed-1", first), ("landed-2", second)] {
        pool.put(
            started(&rig, name).await,
            &pool.image(),
            Vec::new(),
            Duration::ZERO,
        );
        assert_eq!(waiter.await.unwrap().as_deref(), Some(name));
    }
    let keeping_up = pool.snapshot().keeping_up;
    assert_eq!(keeping_up.waits, 2);
    assert_eq!(
        keeping_up.pace,
        crate::sandbox::pool::account::PoolPace::KeepingUp
    );
    // Past the ask pace's window: only being behind could hold a preload back now.
    tokio::time::advance(Duration::from_secs(2)).await;
    let pandas = Wanted {
        modules: vec!["pandas".into()],
        keep: usize::MAX,
    };
    let preloads = pool.reserve(&pandas);
    assert_eq!(preloads, [["pandas"], ["pandas"]]);
    let waiter = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let wants = Wants::Imports(vec!["pandas".into()]);
            pool.take_or_wait(Duration::from_secs(30), &wants)
                .await
                .is_some()
        })
    };
    tokio::task::yield_now().await;
    let preload = vec!["pandas".to_string()];
    pool.put(
        started(&rig, "landed-3").await,
        &pool.image(),
        preload,
        Duration::ZERO,
    );
    assert!(waiter.await.unwrap());
    pool.failed(&["pandas".to_string()]);
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(pool.snapshot().keeping_up.waits, 3);
    let plain = pool.reserve(&pandas);
    assert!(
        !plain.is_empty() && plain.iter().all(Vec::is_empty),
        "{plain:?}"
    );
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_replacement_sends_the_newest_waiter_cold() {
    let rig = Rig::new(Vec::new(), settings(2, 2));
    let (pool, first, second) = two_waiters(&rig).await;
    // One replacement fails: one of the two waiters has nothing to wait for, the newest.
    pool.failed(&[]);
    assert_eq!(second.await.unwrap(), None, "the newest goes cold");
    assert!(!first.is_finished(), "the oldest keeps its place");
    pool.put(
        started(&rig, "landed").await,
        &pool.image(),
        Vec::new(),
        Duration::ZERO,
    );
    assert_eq!(first.await.unwrap().as_deref(), Some("landed"));
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn failed_pool_starts_are_retried_with_backoff_until_the_pool_fills() {
    let rig = Rig::new(vec![ok(json!(1))], settings(1, 2));
    rig.engine.fail_creates.store(3, Ordering::SeqCst);
    rig.sandbox.watch_engine();
    rig.sandbox.refill();
    let started = tokio::time::Instant::now();
    rig.engine.until_live(1).await;
    // Three failures: retried after 1 s, 2 s and 4 s.
    let waited = started.elapsed().as_secs_f64();
    assert!((7.0..8.0).contains(&waited), "filled after {waited} s");
    settle().await;
    assert_eq!(rig.sandbox.pool_ready(), 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_pooled_container_that_ended_while_waiting_is_discarded() {
    let rig = Rig::pooled(vec![ok(json!(1))], 1).await;
    let stale = rig.engine.created()[0].clone();
    crate::sandbox::Backend::kill(&rig.engine, &stale)
        .await
        .unwrap();
    settle().await;
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(rig.stats.snapshot().executions_pooled, 0, "it ran cold");
    assert_eq!(rig.engine.jobs().len(), 1, "the stale one got no job");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn another_memory_limit_updates_a_pooled_container() {
    let rig = Rig::pooled(vec![ok(json!(1))], 1).await;
    let mut job = job(10);
    job.memory_bytes = 512 * MB;
    let outcome = rig
        .sandbox
        .run(job, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(rig.engine.updates.load(Ordering::SeqCst), 1);
    assert_eq!(rig.stats.snapshot().executions_pooled, 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_refused_memory_update_runs_cold() {
    let rig = Rig::pooled(vec![ok(json!(1))], 1).await;
    rig.engine.fail_updates.store(true, Ordering::SeqCst);
    let mut job = job(10);
    job.memory_bytes = 512 * MB;
    let outcome = rig
        .sandbox
        .run(job, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, Status::Ok);
    settle().await;
    assert_eq!(rig.engine.jobs().len(), 1);
    assert_eq!(rig.engine.created().len(), 3, "pooled, cold, replacement");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn without_an_update_endpoint_other_limits_run_cold_and_leave_the_pool_alone() {
    let rig = Rig::pooled(vec![ok(json!(1)), ok(json!(2))], 1).await;
    rig.engine.no_update_endpoint.store(true, Ordering::SeqCst);
    for _ in 0..2 {
        let mut job = job(10);
        job.memory_bytes = 512 * MB;
        let outcome = (rig.sandbox.run(job, CancellationToken::new()).await).unwrap();
        assert_eq!(outcome.status, Status::Ok);
        settle().await;
    }
    assert_eq!(rig.engine.updates.load(Ordering::SeqCst), 1, "asked once");
    assert_eq!(
        rig.engine.created().len(),
        4,
        "pooled, cold, replacement, cold: the second run took nothing from the pool"
    );
    assert_eq!(rig.sandbox.pool_ready(), 1);
    assert_eq!(rig.stats.snapshot().executions_pooled, 0);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_moved_image_tag_rebuilds_the_pool_from_the_new_image() {
    let rig = Rig::new(vec![ok(json!(1))], settings(1, 2));
    rig.sandbox.refill();
    rig.sandbox.watch_engine();
    rig.engine.until_live(1).await;
    settle().await;
    let old = rig.engine.created()[0].clone();
    rig.engine.set_image("sha256:two");
    rig.engine.emit(EngineEvent::Image);
    settle().await;
    assert_eq!(rig.sandbox.pool_image(), "sha256:two");
    assert!(!rig.engine.live().contains(&old), "the old one was removed");
    assert_eq!(rig.sandbox.pool_ready(), 1, "refilled from the new image");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_is_busy() {
    let mut settings = settings(0, 1);
    settings.max_queue = 0;
    let rig = Rig::new(vec![Step::Hang], settings);
    let running = rig.spawn_run(job(60), CancellationToken::new());
    rig.engine.until_live(1).await;
    let error = rig.run(60).await.unwrap_err();
    assert!(
        matches!(
            error,
            SandboxError::Busy {
                running: 1,
                queued: 0
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("--max-concurrency"));
    rig.sandbox.shutdown().await;
    assert_eq!(running.await.unwrap().unwrap().status, Status::Cancelled);
    assert!(rig.engine.live().is_empty());
}

#[tokio::test(start_paused = true)]
async fn cancellation_while_queued_is_cancelled_before_start() {
    let rig = Rig::new(vec![Step::Hang], settings(0, 1));
    let running = rig.spawn_run(job(60), CancellationToken::new());
    rig.engine.until_live(1).await;
    let cancel = CancellationToken::new();
    let queued = rig.spawn_run(job(60), cancel.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    let outcome = queued.await.unwrap().unwrap();
    assert_eq!(outcome.status, Status::Cancelled);
    assert_eq!(
        error_text(&outcome),
        "Execution cancelled before it started"
    );
    assert_eq!(
        rig.engine.created().len(),
        1,
        "the queued call made no container"
    );
    assert_eq!(status_count(&rig.stats, Status::Cancelled), 1);
    rig.sandbox.shutdown().await;
    assert_eq!(running.await.unwrap().unwrap().status, Status::Cancelled);
    assert!(rig.engine.live().is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutdown_cancels_runs_drains_the_pool_and_refuses_new_runs() {
    let rig = Rig::pooled(vec![Step::Hang], 2).await;
    let running = rig.spawn_run(job(60), CancellationToken::new());
    tokio::time::sleep(Duration::from_secs(1)).await;
    rig.sandbox.shutdown().await;
    assert_eq!(running.await.unwrap().unwrap().status, Status::Cancelled);
    assert!(
        rig.engine.live().is_empty(),
        "pooled and running containers are removed: {:?}",
        rig.engine.live()
    );
    assert!(matches!(
        rig.run(10).await.unwrap_err(),
        SandboxError::ShuttingDown
    ));
}

#[tokio::test(start_paused = true)]
async fn shutdown_sweeps_containers_of_this_instance_that_no_guard_holds() {
    use crate::sandbox::Backend;
    use crate::sandbox::container::spec::{ContainerOptions, LABEL_INSTANCE, SandboxSpec};
    let rig = Rig::cold(vec![ok(json!(1))]);
    // A container of this instance the engine has but no execution tracks.
    let spec = SandboxSpec {
        image: "sandbox:test".into(),
        memory_bytes: 256 * MB,
        container: ContainerOptions {
            pids_limit: 64,
            tmpfs_bytes: 1,
            runtime: None,
            runtime_kind: Default::default(),
        },
        workspace: "/nonexistent".into(),
        skills: None,
        servers: None,
        packages: None,
        uid: 1,
        gid: 1,
        labels: [(
            LABEL_INSTANCE.to_string(),
            rig.sandbox.instance().id.clone(),
        )]
        .into(),
        preload: Vec::new(),
        package_set: None,
        state: None,
        egress: None,
        seccomp: Default::default(),
        image_tree: None,
    };
    rig.engine.create("stray", &spec).await.unwrap();
    rig.finish().await;
}

/// The names of what `take` gave.
fn named(taken: Option<crate::sandbox::run::Started>) -> Option<String> {
    taken.map(|s| s.name().to_string())
}

#[tokio::test(start_paused = true)]
async fn an_execution_takes_the_container_that_fits_the_imports_its_code_names() {
    let rig = Rig::new(Vec::new(), settings(3, 2));
    let pool = rig.sandbox.pool.clone();
    let usual = Wanted {
        modules: vec!["pandas".into()],
        keep: 1,
    };
    let plans = pool.reserve(&usual);
    let pandas = vec!["pandas".to_string()];
    assert_eq!(plans, [pandas.clone(), vec![], vec![]], "one carries them");
    for (i, preload) in plans.into_iter().enumerate() {
        let c = started(&rig, &format!("c{i}")).await;
        pool.put(c, &pool.image(), preload, Duration::ZERO);
    }
    assert_eq!(pool.snapshot().preloaded_ready, 1);
    let numpy = Wants::Imports(vec!["numpy".into()]);
    assert_eq!(
        named(pool.take(&numpy)).unwrap(),
        "c2",
        "the newest plain one"
    );
    let data = Wants::Imports(vec!["sys".into(), "pandas".into()]);
    assert_eq!(named(pool.take(&data)).unwrap(), "c0");
    assert_eq!(named(pool.take(&Wants::Plain)).unwrap(), "c1");
    // Every container imported ahead (`--preload`): a plain one is never among them.
    let every = Wanted {
        modules: pandas.clone(),
        keep: usize::MAX,
    };
    let plans = pool.reserve(&every);
    assert!(
        plans.len() == 3 && plans.iter().all(|p| *p == pandas),
        "{plans:?}"
    );
    for (i, preload) in plans.into_iter().enumerate() {
        let c = started(&rig, &format!("d{i}")).await;
        pool.put(c, &pool.image(), preload, Duration::ZERO);
    }
    assert!(pool.take(&Wants::Plain).is_none());
    let nothing = Wants::Imports(Vec::new());
    assert!(pool.take(&nothing).is_some(), "better than a cold start");
    assert_eq!(pool.drain(), 2);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn the_pool_grows_before_it_is_empty_when_the_calls_outpace_its_starts() {
    let mut s = settings(4, 4);
    s.pool_budget = crate::sandbox::PoolBudget::new(8);
    let rig = Rig::new(Vec::new(), s);
    let pool = rig.sandbox.pool.clone();
    for (i, preload) in pool.reserve(&Wanted::default()).into_iter().enumerate() {
        let c = started(&rig, &format!("c{i}")).await;
        // A start takes a second on this machine.
        pool.put(c, &pool.image(), preload, Duration::from_secs(1));
    }
    let limit = Duration::from_secs(30);
    let nothing = Wants::Imports(Vec::new());
    let mut targets = Vec::new();
    for _ in 0..3 {
        assert!(pool.take_or_wait(limit, &nothing).await.is_some());
        targets.push(pool.target());
    }
    // Three calls within a start's time leave one ready: the fourth would empty it.
    assert_eq!(targets, [4, 4, 5]);
    assert_eq!(pool.snapshot().keeping_up.cold_starts, 0);
    assert_eq!(pool.drain(), 1);
    rig.finish().await;
}
