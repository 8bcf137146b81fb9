//! The execution state machine, one test per path: start → frames → outcome.

use std::sync::atomic::Ordering;

use serde_json::json;

use crate::sandbox::engine::backend::EngineEvent;
use crate::sandbox::engine::error::EngineError;
use crate::sandbox::tests::fake::{Step, ok, printed};
use crate::sandbox::tests::*;

#[tokio::test(start_paused = true)]
async fn done_with_success_is_ok_with_output_and_result() {
    let rig = Rig::cold(vec![printed("hello\n"), ok(json!({"n": 1}))]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
    assert_eq!(outcome.result, json!({"n": 1}));
    assert_eq!(outcome.stdout.as_str(), "hello\n");
    assert!(outcome.error.is_none());
    assert_eq!(rig.engine.jobs().len(), 1, "one job, one container");
    assert!(
        rig.engine.jobs()[0].contains("\"code\":\"print(1)\""),
        "the job line carries the code: {:?}",
        rig.engine.jobs()
    );
    assert!(
        rig.engine.killed().is_empty(),
        "a finished run needs no kill"
    );
    assert_eq!(status_count(&rig.stats, Status::Ok), 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn done_with_an_exception_is_error_with_its_type_and_traceback() {
    let done = json!({"type": "done", "success": false, "error": "boom",
        "error_type": "ValueError", "traceback": "Traceback ..."});
    let rig = Rig::cold(vec![Step::Done(done)]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Error);
    assert_eq!(error_text(&outcome), "boom");
    assert_eq!(outcome.error_type.as_deref(), Some("ValueError"));
    assert_eq!(outcome.traceback.as_deref(), Some("Traceback ..."));
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn done_with_memory_error_is_memory_limit() {
    let done = json!({"type": "done", "success": false, "error": "out of memory",
        "error_type": "MemoryError"});
    let rig = Rig::cold(vec![Step::Done(done)]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::MemoryLimit);
    assert!(
        error_text(&outcome).contains("memory limit is 256 MB"),
        "{outcome:?}"
    );
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn done_with_an_oversized_result_is_cut_and_marked() {
    let rig = Rig::cold(vec![ok(json!("x".repeat(5000)))]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert!(outcome.result_truncated);
    assert!(outcome.result.as_str().unwrap().len() <= 1024);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_cut_keeps_what_followed_it_for_the_rewrite_only() {
    // The JSON text is a quote and 1020 x's, then the email: the 1024-byte cut splits it.
    let value = format!("{}ann@example.com and more", "x".repeat(1020));
    let rig = Rig::cold(vec![ok(json!(value))]);
    let outcome = rig.run(10).await.unwrap();
    let shown = outcome.result.as_str().unwrap();
    assert_eq!(shown.len(), 1024);
    assert!(shown.ends_with("xann"), "{shown}");
    assert_eq!(outcome.edges.result, "@example.com and more\"");
    assert!(outcome.edges.error.is_empty() && outcome.edges.traceback.is_empty());
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn deadline_kills_the_container_and_reports_timeout() {
    let rig = Rig::cold(vec![printed("working\n"), Step::Hang]);
    let started = tokio::time::Instant::now();
    let outcome = rig.run(3).await.unwrap();
    assert_eq!(outcome.status, Status::Timeout, "{outcome:?}");
    assert!(error_text(&outcome).contains("timed out after 3 seconds: the container was killed"));
    assert_eq!(
        outcome.stdout.as_str(),
        "working\n",
        "output so far is kept"
    );
    assert_eq!(started.elapsed().as_secs(), 3);
    assert_eq!(rig.engine.killed().len(), 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn deadline_after_an_oom_kill_is_memory_limit() {
    // The kernel killed the code first (the engine records it), while the run was overdue.
    let rig = Rig::cold(vec![Step::Hang]);
    let engine = rig.engine.clone();
    let run = rig.spawn_run(job(2), CancellationToken::new());
    engine.until_live(1).await;
    // Record the OOM kill as the engine would: the kill below keeps the first exit state.
    let name = engine.created()[0].clone();
    engine_stop_oom(&engine, &name);
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.status, Status::MemoryLimit, "{outcome:?}");
    assert!(error_text(&outcome).contains("Memory limit exceeded"));
    rig.finish().await;
}

/// Records an OOM exit for `name` without ending its output (the engine's view of a container
/// whose code the kernel killed while a child process kept the stream open).
fn engine_stop_oom(engine: &FakeEngine, name: &str) {
    engine.record_exit(
        name,
        crate::sandbox::engine::backend::ExitState {
            oom_killed: true,
            exit_code: Some(137),
        },
    );
}

#[tokio::test(start_paused = true)]
async fn deadline_whose_kill_the_engine_never_answers_says_so() {
    let rig = Rig::cold(vec![Step::Hang]);
    rig.engine.stall_kill.store(true, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let outcome = rig.run(2).await.unwrap();
    assert_eq!(outcome.status, Status::Timeout);
    assert!(
        error_text(&outcome).contains("did not confirm killing its container"),
        "{outcome:?}"
    );
    // The deadline, then at most the kill limit: the response is not held longer.
    assert_eq!(started.elapsed().as_secs(), 2 + 10);
    rig.engine.stall_kill.store(false, Ordering::SeqCst);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn cancellation_while_running_kills_and_reports_cancelled() {
    let rig = Rig::cold(vec![Step::Hang]);
    let cancel = CancellationToken::new();
    let run = rig.spawn_run(job(60), cancel.clone());
    rig.engine.until_live(1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    cancel.cancel();
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.status, Status::Cancelled);
    assert_eq!(
        error_text(&outcome),
        "Execution cancelled: the container was killed"
    );
    assert_eq!(rig.engine.killed().len(), 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn cancellation_while_the_container_starts_reports_cancelled() {
    let rig = Rig::cold(vec![ok(json!(null))]);
    rig.engine.stall_create.store(true, Ordering::SeqCst);
    let cancel = CancellationToken::new();
    let run = rig.spawn_run(job(60), cancel.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    let outcome = run.await.unwrap().unwrap();
    assert_eq!(outcome.status, Status::Cancelled);
    assert_eq!(
        error_text(&outcome),
        "Execution cancelled while its container was starting"
    );
    rig.engine.stall_create.store(false, Ordering::SeqCst);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_start_past_the_start_limit_is_a_slow_engine_error() {
    let mut settings = settings(0, 1);
    settings.start_limit = Duration::from_secs(5);
    let rig = Rig::new(vec![ok(json!(null))], settings);
    rig.engine.stall_create.store(true, Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let error = rig.run(60).await.unwrap_err();
    assert!(
        matches!(error, SandboxError::Engine(EngineError::Slow(5))),
        "{error}"
    );
    assert_eq!(started.elapsed().as_secs(), 5);
    assert_eq!(rig.stats.snapshot().engine_failures, 1);
    rig.engine.stall_create.store(false, Ordering::SeqCst);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_failed_create_is_an_engine_error_and_nothing_is_left() {
    let rig = Rig::cold(vec![ok(json!(null))]);
    rig.engine.fail_creates.store(1, Ordering::SeqCst);
    let error = rig.run(10).await.unwrap_err();
    assert!(
        matches!(error, SandboxError::Engine(EngineError::Unreachable(_))),
        "{error}"
    );
    // The next call works: the engine is back.
    assert_eq!(rig.run(10).await.unwrap().status, Status::Ok);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn end_of_output_after_sigkill_with_a_late_oom_event_is_memory_limit() {
    // The engine recorded no OOM kill, but its `oom` event arrives just after the exit.
    let rig = Rig::cold(vec![
        Step::Sleep(Duration::from_millis(50)),
        Step::Exit {
            code: 137,
            oom_killed: false,
        },
    ]);
    rig.sandbox.watch_engine();
    let engine = rig.engine.clone();
    tokio::spawn(async move {
        engine.until_live(1).await;
        let container = engine.created()[0].clone();
        tokio::time::sleep(Duration::from_millis(300)).await;
        engine.emit(EngineEvent::Oom { container });
    });
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::MemoryLimit, "{outcome:?}");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn end_of_output_with_the_oom_flag_is_memory_limit() {
    let rig = Rig::cold(vec![Step::Exit {
        code: 137,
        oom_killed: true,
    }]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::MemoryLimit);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_sigkill_without_an_oom_notice_is_named_a_likely_memory_kill_that_the_engine_did_not_report()
 {
    let rig = Rig::cold(vec![
        printed("partial\n"),
        Step::Exit {
            code: 137,
            oom_killed: false,
        },
    ]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Error);
    assert!(
        error_text(&outcome).contains("most likely at its memory limit")
            && error_text(&outcome).contains("the engine reported no OOM kill for it"),
        "{outcome:?}"
    );
    assert_eq!(outcome.stdout.as_str(), "partial\n");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_sigkill_on_an_engine_without_oom_reports_is_named_a_likely_memory_kill_at_once() {
    let script = vec![Step::Exit {
        code: 137,
        oom_killed: false,
    }];
    let rig = Rig::new(
        script,
        SandboxSettings {
            oom_reported: false,
            ..settings(0, 2)
        },
    );
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Error);
    let error = error_text(&outcome);
    assert!(
        error.contains("most likely at its memory limit of"),
        "{error}"
    );
    assert!(error.contains("does not report OOM kills"), "{error}");
    // No wait for an `oom` event that this engine never sends.
    assert!(outcome.elapsed < Duration::from_secs(1), "{outcome:?}");
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn end_of_output_with_an_unterminated_line_keeps_it_as_output() {
    let rig = Rig::cold(vec![
        Step::Stdout(b"no newline".to_vec()),
        Step::Exit {
            code: 1,
            oom_killed: false,
        },
    ]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Error);
    assert_eq!(outcome.stdout.as_str(), "no newline");
    assert!(error_text(&outcome).contains("exited (code 1)"));
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn end_of_output_as_the_engine_stops_is_the_engine_lost() {
    // Stopped with SIGTERM's exit code while the event stream breaks: the engine shut down.
    let rig = Rig::cold(vec![
        Step::Sleep(Duration::from_millis(100)),
        Step::Exit {
            code: 143,
            oom_killed: false,
        },
    ]);
    rig.sandbox.watch_engine();
    let engine = rig.engine.clone();
    tokio::spawn(async move {
        engine.until_live(1).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        engine.break_events();
    });
    let error = rig.run(10).await.unwrap_err();
    assert!(
        matches!(error, SandboxError::Engine(EngineError::Lost(_))),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("exit code 143 as the engine shut down")
    );
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_failing_output_stream_is_the_engine_lost() {
    let rig = Rig::cold(vec![printed("a\n"), Step::StreamError]);
    let error = rig.run(10).await.unwrap_err();
    assert!(
        matches!(error, SandboxError::Engine(EngineError::Lost(_))),
        "{error}"
    );
    assert_eq!(rig.stats.snapshot().engine_failures, 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn output_past_the_hard_cap_is_killed_as_output_limit() {
    // With 1 KiB limits the hard cap is 8 * 3 KiB + 16 MiB: write 17 MiB of raw stderr.
    let chunk = vec![b'x'; 1 << 20];
    let mut script: Vec<Step> = (0..17).map(|_| Step::Stderr(chunk.clone())).collect();
    script.push(Step::Hang);
    let rig = Rig::cold(script);
    let outcome = rig.run(60).await.unwrap();
    assert_eq!(outcome.status, Status::OutputLimit, "{:?}", outcome.error);
    assert!(error_text(&outcome).contains("wrote more than"));
    assert_eq!(
        outcome.stderr.as_str().len(),
        1024,
        "what is kept stays bounded"
    );
    assert_eq!(rig.engine.killed().len(), 1);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn a_line_past_the_frame_limit_is_killed_as_output_limit() {
    // Frame limit with 1 KiB limits: 2 KiB + 128 KiB + 1 MiB. One line of 2 MiB, no newline.
    let rig = Rig::cold(vec![Step::Stdout(vec![b'y'; 2 << 20]), Step::Hang]);
    let outcome = rig.run(60).await.unwrap();
    assert_eq!(outcome.status, Status::OutputLimit);
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn lines_that_are_not_frames_are_kept_as_output() {
    let rig = Rig::cold(vec![
        Step::Stdout(b"raw line\n{\"type\":\"nonsense\"}\n".to_vec()),
        ok(json!(1)),
    ]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(
        outcome.stdout.as_str(),
        "raw line\n{\"type\":\"nonsense\"}\n"
    );
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn call_frames_are_answered_on_the_channel() {
    let rig = Rig::cold(vec![
        Step::Call("ping"),
        Step::Call("nope"),
        ok(json!(null)),
    ]);
    let outcome = rig.run(10).await.unwrap();
    assert_eq!(outcome.status, Status::Ok);
    let replies = rig.engine.replies();
    assert_eq!(replies.len(), 2, "{replies:?}");
    let pong: serde_json::Value = serde_json::from_str(&replies[0]).unwrap();
    assert_eq!(pong["result"]["pong"], true);
    assert_eq!(pong["result"]["echo"], json!({"x": 1}));
    let refused: serde_json::Value = serde_json::from_str(&replies[1]).unwrap();
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("`nope` is not available")
    );
    rig.finish().await;
}

#[tokio::test(start_paused = true)]
async fn output_is_offered_to_the_tap_as_it_arrives() {
    #[derive(Debug, Default)]
    struct Seen(std::sync::Mutex<Vec<String>>);
    impl crate::sandbox::OutputTap for Seen {
        fn offer(&self, data: &str) {
            self.0.lock().unwrap().push(data.to_string());
        }
    }
    let rig = Rig::cold(vec![printed("one\n"), printed("two\n"), ok(json!(null))]);
    let seen = Arc::new(Seen::default());
    let mut job = job(10);
    job.tap = Some(seen.clone());
    let outcome = rig
        .sandbox
        .run(job, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.status, Status::Ok);
    assert_eq!(*seen.0.lock().unwrap(), ["one\n", "two\n"]);
    rig.finish().await;
}
