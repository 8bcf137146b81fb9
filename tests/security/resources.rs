//! Catalogue cases 18-27, resources: fork and thread bombs, a memory bomb, code that runs past
//! its deadline or ignores SIGTERM, a double-forked daemon, output floods, open files and a huge
//! result. One file per family of the catalogue, so a case is found by its number (the map is in
//! `main.rs`).

use std::time::Duration;

use code_execution_mcp::sandbox::Status;
use serde_json::json;

use crate::common::{self, TestApp, assert_ok, call_tool, mcp_client};
use crate::harness::{CGROUP, MEMORY, gvisor, verdict, watched, watched_with};

/// 18. "Fork bomb → stops at the pids limit; next execution healthy."
#[tokio::test]
async fn case_18_a_fork_bomb_stops_at_the_pids_limit() {
    watched_with(
        |c| c.sandbox.pids_limit = 32,
        async |t, _| {
            let code = format!("{CGROUP}{}", include_str!("probes/case_18_fork_bomb.py"));
            let o = t.run_with(&code, None, Some(30.0), None).await;
            assert_ok(&o);
            let v = &o.result;
            if gvisor(t) {
                // gVisor's kernel has no cgroup files inside; its RLIMIT_NPROC, the sandbox's
                // own, is the limit (the engine's pids cgroup is a backstop behind it).
                assert_eq!(v["pids_max"], json!(null), "{v}");
            } else {
                assert_eq!(v["pids_max"], "32", "{v}");
            }
            assert_eq!(v["errno"], "EAGAIN", "{v}");
            assert!(v["children"].as_u64().unwrap() < 32, "{v}");
        },
    )
    .await;
}

/// 19. "Thread bomb → same."
#[tokio::test]
async fn case_19_a_thread_bomb_stops_at_the_pids_limit() {
    watched_with(
        |c| c.sandbox.pids_limit = 32,
        async |t, _| {
            let v = verdict(t, include_str!("probes/case_19_thread_bomb.py"), json!({})).await;
            assert_eq!(v["error"], "can't start new thread", "{v}");
            assert!(v["threads"].as_u64().unwrap() < 32, "{v}");
        },
    )
    .await;
}

/// 20. "Memory bomb → OOM kill reported as "memory limit exceeded" (inspect OOMKilled); server
///     healthy."
///
/// On an engine that does not report OOM kills (Podman before 5.0) the kill still happens, and
/// the error names the memory limit as the likely cause.
#[tokio::test]
async fn case_20_a_memory_bomb_is_killed_and_reported_as_the_memory_limit() {
    watched(async |t, _| {
        let o = t
            .run_with(
                "b = bytearray(512 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1",
                None,
                None,
                Some(64.0),
            )
            .await;
        let status = common::assert_memory_killed(&t.app, &o, 64);
        // Through MCP the status is machine-readable.
        let client = mcp_client(t.app.clone()).await;
        let (err, v) = call_tool(
            &client,
            "execute_code",
            json!({"code": "x = []\nwhile True: x.append(bytearray(1 << 20))", "memory_mb": 48}),
        )
        .await;
        assert!(err);
        assert_eq!(v["status"], status, "{v}");
        client.cancel().await.unwrap();
        // The server is healthy afterwards.
        assert_eq!(t.run("result = 1").await.result, 1);
    })
    .await;
}

/// After a deadline kill: the execution's container is gone (no pool, so the instance has
/// no other container).
async fn assert_killed_and_removed(t: &TestApp) {
    common::assert_no_containers(&t.app.sandbox().instance().id).await;
}

/// 21. "`while True: pass` → killed at the deadline."
#[tokio::test]
async fn case_21_a_busy_loop_is_killed_at_the_deadline() {
    watched_with(
        |c| c.pool.pool_size = 0,
        async |t, _| {
            let o = t
                .run_with("print('looping')\nwhile True: pass", None, Some(2.0), None)
                .await;
            assert_eq!(o.status, Status::Timeout, "{:?}", o.error);
            assert!(
                o.error
                    .as_deref()
                    .unwrap()
                    .contains("timed out after 2 seconds"),
                "{:?}",
                o.error
            );
            assert_eq!(o.stdout.as_str(), "looping\n");
            // Killed at the deadline, not left running: generous bounds, not a timing measurement.
            assert!(o.elapsed >= Duration::from_secs(2), "{:?}", o.elapsed);
            assert!(o.elapsed < Duration::from_secs(32), "{:?}", o.elapsed);
            assert_killed_and_removed(t).await;
        },
    )
    .await;
}

/// 22. "SIGTERM ignored + sleep → SIGKILL at the deadline."
#[tokio::test]
async fn case_22_code_ignoring_sigterm_is_sigkilled_at_the_deadline() {
    watched_with(
        |c| c.pool.pool_size = 0,
        async |t, _| {
            let o = t
                .run_with(
                    include_str!("probes/case_22_ignore_sigterm.py"),
                    None,
                    Some(2.0),
                    None,
                )
                .await;
            assert_eq!(o.status, Status::Timeout, "{:?}", o.error);
            assert_eq!(o.stdout.as_str(), "started\n");
            assert!(o.elapsed < Duration::from_secs(32), "{:?}", o.elapsed);
            assert_killed_and_removed(t).await;
        },
    )
    .await;
}

/// 23. "Double-forked daemon → gone with the container."
#[tokio::test]
async fn case_23_a_double_forked_daemon_is_gone_with_the_container() {
    watched_with(
        |c| c.pool.pool_size = 0,
        async |t, _| {
            let v = verdict(t, include_str!("probes/case_23_daemon.py"), json!({})).await;
            assert!(v["daemon"].as_u64().unwrap() > 1, "{v}");
            assert_ne!(v["ppid_of_daemon"], 0, "{v}");
            // The execution has answered; its container goes, and the daemon with it.
            assert_killed_and_removed(t).await;
            let beat = || std::fs::read_to_string(t.workspace().join("heartbeat")).unwrap();
            let first = beat();
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert_eq!(beat(), first, "the daemon is still writing");
        },
    )
    .await;
}

/// Growth of the server's peak memory a flood may cause (generous: the caps are far smaller).
const RSS_GROWTH_LIMIT_KIB: u64 = 200 * 1024;

/// Python: `channel_fds()`: the descriptors that may be the harness's frame channel.
const CHANNEL_FDS: &str = include_str!("probes/channel_fds.py");

/// 24. "1 GB to stdout → capped, marked truncated, container killed if it keeps going; the
///     server's memory stays bounded."
#[tokio::test]
async fn case_24_a_gigabyte_to_stdout_is_capped_and_the_server_stays_small() {
    let _one_at_a_time = MEMORY.lock().await;
    watched(async |t, _| {
        let limit = t.app.config().limits.max_output_bytes;
        common::host_watch::reset_peak_rss();
        let base = common::host_watch::proc_status_kib("VmHWM");

        // 1 GiB through stdout, then the code ends: capped and marked, the result intact.
        let o = t
            .run_with(
                &format!(
                    "{CHANNEL_FDS}{}",
                    "write_all(2, b'e' * 300_000)\nchunk = b'x' * (1 << 20)\nfor _ in range(1024): write_all(1, chunk)\nresult = 'done'"
                ),
                None,
                Some(120.0),
                None,
            )
            .await;
        assert_ok(&o);
        assert_eq!(o.result, "done");
        assert!(o.stdout.truncated());
        assert!(o.stdout.as_str().len() <= limit);
        assert!(
            o.stdout.dropped_bytes() >= (1 << 30) - limit as u64,
            "{}",
            o.stdout.dropped_bytes()
        );
        assert!(o.stderr.truncated() && o.stderr.as_str().len() <= limit);

        // Output that never stops: killed at the deadline, what was kept still capped.
        let o = t
            .run_with(
                &format!(
                    "{CHANNEL_FDS}{}",
                    "chunk = b'y' * (1 << 20)\nwhile True: write_all(1, chunk)"
                ),
                None,
                Some(3.0),
                None,
            )
            .await;
        assert_eq!(o.status, Status::Timeout, "{:?}", o.error);
        assert!(o.stdout.truncated() && o.stdout.as_str().len() <= limit);

        // A flood written around the harness, straight at the channel: the server's own cap kills it.
        let o = t
            .run_with(
                &format!(
                    "{CHANNEL_FDS}{}",
                    include_str!("probes/case_24_flood_channel.py")
                ),
                None,
                Some(60.0),
                None,
            )
            .await;
        assert_eq!(o.status, Status::OutputLimit, "{:?}", o.error);
        assert!(o.stdout.as_str().len() <= limit);

        let peak = common::host_watch::proc_status_kib("VmHWM");
        assert!(
            peak.saturating_sub(base) < RSS_GROWTH_LIMIT_KIB,
            "peak RSS grew from {base} KiB to {peak} KiB"
        );
    })
    .await;
}

/// 25. "One 100 MB line, binary or invalid UTF-8 output → bounded, decoded lossily."
#[tokio::test]
async fn case_25_a_100_mb_line_and_binary_output_are_bounded_and_decoded_lossily() {
    let _one_at_a_time = MEMORY.lock().await;
    watched(async |t, _| {
        let limit = t.app.config().limits.max_output_bytes;
        common::host_watch::reset_peak_rss();
        let base = common::host_watch::proc_status_kib("VmHWM");

        let o = t
            .run_with(
                &format!(
                    "{CHANNEL_FDS}{}",
                    r#"
write_all(1, b"bin\xff\xfe\x00\x80 \xc3\x28 end\n")
write_all(2, b"err\xff\n")
write_all(1, b"L" * (100 * 1024 * 1024))
result = "done"
"#
                ),
                None,
                Some(120.0),
                None,
            )
            .await;
        assert_ok(&o);
        assert_eq!(o.result, "done");
        let out = o.stdout.as_str();
        assert!(
            out.starts_with("bin\u{fffd}\u{fffd}\0\u{fffd} \u{fffd}( end\nLLLL"),
            "{:?}",
            &out[..40.min(out.len())]
        );
        assert!(out.len() <= limit && o.stdout.truncated());
        assert_eq!(o.stderr.as_str(), "err\u{fffd}\n");

        // One 100 MB line written straight at the channel: the server stops reading it and kills.
        let o = t
            .run_with(
                &format!(
                    "{CHANNEL_FDS}{}",
                    include_str!("probes/case_25_long_line_channel.py")
                ),
                None,
                Some(90.0),
                None,
            )
            .await;
        assert_eq!(o.status, Status::OutputLimit, "{:?}", o.error);
        assert!(o.stdout.as_str().len() <= limit);

        let peak = common::host_watch::proc_status_kib("VmHWM");
        assert!(
            peak.saturating_sub(base) < RSS_GROWTH_LIMIT_KIB,
            "peak RSS grew from {base} KiB to {peak} KiB"
        );
    })
    .await;
}

/// 26. "Open files until EMFILE → nofile limit." (The probe also reads the nproc limit.)
#[tokio::test]
async fn case_26_opening_files_stops_at_the_nofile_limit() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_26_nofile.py"), json!({})).await;
        let limit = code_execution_mcp::sandbox::container::spec::NOFILE_LIMIT;
        assert_eq!(v["soft"], limit, "{v}");
        assert_eq!(v["hard"], limit, "{v}");
        assert_eq!(v["errno"], "EMFILE", "{v}");
        assert!(v["opened"].as_i64().unwrap() < limit, "{v}");
        assert_eq!(v["raise"], "ValueError", "{v}");
        // The same process limit on every engine (Podman would otherwise pick its own); under
        // gVisor, whose kernel is the sandbox's own, it is the sandbox's process limit.
        let nproc = if gvisor(t) {
            t.app.config().sandbox.pids_limit
        } else {
            code_execution_mcp::sandbox::container::spec::nproc_limit()
        };
        assert_eq!(v["nproc"], json!([nproc, nproc]), "{v}");
    })
    .await;
}

/// 27. "A huge `result` value → capped."
///
/// Both a real result and one in a `done` frame forged by sandbox code straight on the channel.
#[tokio::test]
async fn case_27_a_huge_result_is_capped_and_marked() {
    watched_with(
        |c| c.limits.max_result_bytes = 1000,
        async |t, _| {
            for code in [
                "result = 'x' * (50 * 1024 * 1024)",
                "result = ['x' * 100] * 100_000",
                "result = set(range(1_000_000))",
            ] {
                let o = t.run(code).await;
                assert_ok(&o);
                assert!(o.result_truncated, "{code}");
                assert!(
                    o.result.as_str().unwrap().len() <= 1000,
                    "{code}: not bounded"
                );
            }
            // A done frame written by sandbox code itself: bounded like a real one.
            let o = t
                .run(&format!(
                    "{CHANNEL_FDS}{}",
                    include_str!("probes/case_27_forged_done.py")
                ))
                .await;
            assert!(o.result_truncated, "{:?}", o.status);
            assert!(
                o.result.as_str().unwrap().len() <= 1000,
                "result not bounded"
            );
            assert!(o.error.as_deref().unwrap_or("").len() <= 64 * 1024 + 512);
            assert!(o.traceback.as_deref().unwrap_or("").len() <= 64 * 1024);
        },
    )
    .await;
}
