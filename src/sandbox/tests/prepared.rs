//! A session's next container, prepared ahead: used by the next call, removed when its owner
//! cancels it (the session expired or ended) or the pool comes under pressure.

use std::sync::Arc;

use crate::sandbox::run::carry::{Carry, Restore, SnapshotStore, SnapshotWriter, StateVar};
use crate::sandbox::tests::fake::ok;
use crate::sandbox::tests::*;
use serde_json::json;

/// A session store of one blob in a temp file.
struct Memory {
    dir: tempfile::TempDir,
}

impl SnapshotStore for Memory {
    fn restore(&self) -> std::io::Result<Option<Restore>> {
        let blob = "a".repeat(64);
        let file = self.dir.path().join(&blob);
        std::fs::write(&file, b"snapshot")?;
        Ok(Some(Restore {
            modules: Default::default(),
            vars: vec![StateVar {
                name: "x".into(),
                blob: blob.clone(),
                sizes: vec![8],
            }],
            files: [(blob, file)].into(),
        }))
    }

    fn next(&self) -> std::io::Result<Box<dyn SnapshotWriter>> {
        Err(std::io::Error::other("not in these tests"))
    }
}

fn store() -> Arc<Memory> {
    Arc::new(Memory {
        dir: tempfile::tempdir().unwrap(),
    })
}

fn session_job(store: Arc<Memory>, prepared: Option<crate::sandbox::Prepared>) -> Job {
    Job {
        carry: Some(Carry {
            store,
            max_bytes: 1 << 20,
            prepared,
        }),
        egress: None,
        ..job(10)
    }
}

#[tokio::test(start_paused = true)]
async fn the_next_call_runs_in_the_prepared_container() {
    let rig = Rig::pooled(vec![ok(json!(1))], 1).await;
    let store = store();
    let prepared = rig
        .sandbox
        .prepare(store.clone(), None)
        .expect("no pressure");
    settle().await;
    assert!(prepared.is_ready());
    assert_eq!(rig.engine.states().len(), 1, "the state went in ahead");
    let created = rig.engine.created().len();
    let outcome = rig
        .sandbox
        .run(session_job(store, Some(prepared)), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(
        rig.engine.created().len(),
        created,
        "no container started for it"
    );
    assert_eq!(rig.engine.states().len(), 1, "the state was not sent again");
    assert_eq!(rig.stats.snapshot().executions_prepared, 1);
    settle().await;
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_prepared_container_the_state_goes_in_before_the_job() {
    let rig = Rig::pooled(vec![ok(json!(1))], 1).await;
    let outcome = rig
        .sandbox
        .run(session_job(store(), None), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(rig.engine.states().len(), 1);
    assert!(rig.engine.jobs()[0].contains("\"session\":{\"max_bytes\":1048576}"));
    settle().await;
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_preparation_removes_its_container() {
    let rig = Rig::pooled(vec![ok(json!(1))], 1).await;
    let prepared = rig.sandbox.prepare(store(), None).expect("no pressure");
    settle().await;
    assert!(prepared.is_ready());
    let live = rig.engine.live().len();
    // The session expired (or ended): its owner cancels the preparation.
    prepared.cancel();
    settle().await;
    assert!(!prepared.is_ready());
    assert_eq!(rig.engine.live().len(), live - 1, "{:?}", rig.engine.live());
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn pressure_on_the_pool_removes_prepared_containers() {
    let rig = Rig::pooled(vec![ok(json!(1))], 1).await;
    let prepared = rig.sandbox.prepare(store(), None).expect("no pressure");
    settle().await;
    assert!(prepared.is_ready());
    // The preparation took the pooled container; its replacement is on its way. Two calls at
    // once: one finds the pool empty.
    rig.engine
        .stall_create
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let a = rig.spawn_run(job(10), CancellationToken::new());
    let b = rig.spawn_run(job(10), CancellationToken::new());
    settle().await;
    assert!(!prepared.is_ready(), "it gave way");
    assert!(
        rig.sandbox.prepare(store(), None).is_none(),
        "nothing is prepared under pressure"
    );
    rig.engine
        .stall_create
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let _ = a.await;
    let _ = b.await;
    settle().await;
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn an_unclaimed_preparation_ends_after_the_pool_idle_time() {
    let mut s = settings(1, 2);
    s.pool_idle = Duration::from_secs(120);
    let rig = Rig::new(vec![ok(json!(1))], s);
    rig.sandbox.refill();
    rig.engine.until_live(1).await;
    settle().await;
    let prepared = rig.sandbox.prepare(store(), None).expect("no pressure");
    settle().await;
    assert!(prepared.is_ready());
    tokio::time::sleep(rig.sandbox.settings().pool_idle + Duration::from_secs(1)).await;
    settle().await;
    assert!(!prepared.is_ready(), "it gave its container back");
    rig.finish().await;
}
