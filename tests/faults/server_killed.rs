//! Catalogue case 49: the server SIGKILLed mid-execution and mid-write. The next start on the
//! same directories removes the killed server's containers and temp files, and every file
//! written through the tool is absent or complete.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{self, try_call_tool};
use crate::server::{Server, wait_for_file};

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
