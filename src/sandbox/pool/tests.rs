//! The pool's own logic, without an engine.
use super::*;

#[test]
fn reserve_counts_what_is_missing_once() {
    let pool = Pool::new(3, 3, PoolBudget::new(3), 100, "sha256:a".into());
    assert_eq!(pool.reserve(&Wanted::default()).len(), 3);
    assert_eq!(
        pool.reserve(&Wanted::default()).len(),
        0,
        "pending replacements count"
    );
    pool.failed(&[]);
    assert_eq!(pool.reserve(&Wanted::default()).len(), 1);
    assert!(pool.take(&Wants::Imports(Vec::new())).is_none());
}

#[tokio::test(start_paused = true)]
async fn a_preload_counts_only_the_containers_ready_as_lasting() {
    let pandas = Wanted {
        modules: vec!["pandas".into()],
        keep: usize::MAX,
    };
    let pool = Pool::new(4, 8, PoolBudget::new(8), 100, "sha256:a".into());
    // At rest, nothing asked lately: every replacement preloads.
    assert!(pool.reserve(&pandas).iter().all(|p| p == &["pandas"]));
    // Three calls within a preloaded start's time, the pool grown to 8: the 4 on their way
    // would have covered them, but they are starting too, on the same CPU.
    for _ in 0..3 {
        pool.pace.asked();
    }
    pool.target.store(8, Ordering::SeqCst);
    let more = pool.reserve(&pandas);
    assert_eq!(more.len(), 4);
    assert!(more.iter().all(Vec::is_empty), "{more:?}");
    assert_eq!(pool.account.snapshot().preload_skipped, 4);
}

#[tokio::test(start_paused = true)]
async fn no_preload_while_executions_wait_or_start_cold() {
    let pandas = Wanted {
        modules: vec!["pandas".into()],
        keep: usize::MAX,
    };
    for behind in [Degrade::Waited, Degrade::ColdStart] {
        let pool = Pool::new(2, 2, PoolBudget::new(2), 100, "sha256:a".into());
        pool.account.note(behind);
        let skipped = pool.reserve(&pandas);
        assert!(skipped.iter().all(Vec::is_empty), "{behind:?}: {skipped:?}");
        pool.failed(&[]);
        pool.failed(&[]);
        tokio::time::advance(Duration::from_secs(11)).await;
        let later = pool.reserve(&pandas);
        assert!(
            later.iter().all(|p| p == &["pandas"]),
            "{behind:?}: {later:?}"
        );
    }
}

#[test]
fn an_empty_pool_is_a_cold_path() {
    let pool = Pool::new(0, 0, PoolBudget::new(0), 100, "sha256:a".into());
    assert_eq!(pool.reserve(&Wanted::default()).len(), 0);
    assert!(pool.take(&Wants::Imports(Vec::new())).is_none());
    assert_eq!(pool.drain(), 0);
}

#[tokio::test(start_paused = true)]
async fn waits_only_for_replacements_no_one_else_waits_for() {
    let pool = std::sync::Arc::new(Pool::new(2, 2, PoolBudget::new(2), 100, "sha256:a".into()));
    let limit = Duration::from_secs(30);
    assert!(
        pool.take_or_wait(limit, &Wants::Imports(Vec::new()))
            .await
            .is_none(),
        "nothing on its way"
    );
    assert_eq!(pool.reserve(&Wanted::default()).len(), 2);
    // Two waiters for two pending replacements; a third goes cold at once.
    let (a, b) = (pool.clone(), pool.clone());
    let wa = tokio::spawn(async move {
        a.take_or_wait(limit, &Wants::Imports(Vec::new()))
            .await
            .is_none()
    });
    let wb = tokio::spawn(async move {
        b.take_or_wait(limit, &Wants::Imports(Vec::new()))
            .await
            .is_none()
    });
    tokio::task::yield_now().await;
    assert!(!wa.is_finished() && !wb.is_finished(), "both wait");
    assert!(
        pool.take_or_wait(limit, &Wants::Imports(Vec::new()))
            .await
            .is_none()
    );
    // Both replacements fail: the waiters give up and go cold.
    pool.failed(&[]);
    pool.failed(&[]);
    assert!(wa.await.unwrap() && wb.await.unwrap());
    assert_eq!(pool.slots().waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_wait_is_bounded() {
    let pool = Pool::new(1, 1, PoolBudget::new(1), 100, "sha256:a".into());
    assert_eq!(pool.reserve(&Wanted::default()).len(), 1);
    let started = tokio::time::Instant::now();
    assert!(
        pool.take_or_wait(Duration::from_secs(5), &Wants::Imports(Vec::new()))
            .await
            .is_none()
    );
    assert_eq!(started.elapsed(), Duration::from_secs(5));
}

#[test]
fn retries_back_off_to_a_bound() {
    let delays: Vec<u64> = (1..=7).map(|n| retry_delay(n).as_secs()).collect();
    assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30]);
    assert_eq!(retry_delay(0), Duration::from_secs(1));
    assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
}

#[tokio::test(start_paused = true)]
async fn failures_are_signalled_and_counted() {
    let pool = Pool::new(2, 2, PoolBudget::new(2), 100, "sha256:a".into());
    assert_eq!(pool.reserve(&Wanted::default()).len(), 2);
    pool.failed(&[]);
    pool.failed(&[]);
    // Both failures are signalled by one stored permit; the count says how many.
    assert_eq!(pool.next_failure().await, 2);
    let waited = tokio::time::timeout(Duration::from_secs(5), pool.next_failure()).await;
    assert!(waited.is_err(), "no further failure to report");
    assert_eq!(pool.reserve(&Wanted::default()).len(), 2);
    pool.failed(&[]);
    assert_eq!(pool.next_failure().await, 3);
}

#[test]
fn retargeting_changes_the_image_once() {
    let pool = Pool::new(1, 1, PoolBudget::new(1), 100, "sha256:a".into());
    assert!(!pool.retarget("sha256:a"));
    assert!(pool.retarget("sha256:b"));
    assert_eq!(pool.image(), "sha256:b");
    assert!(!pool.retarget("sha256:b"));
}
