//! The workspace tools through MCP: the round trip with the fields of the Python server this one
//! replaces, and the ownership of a root-owned workspace. The attacks on them (traversal names,
//! planted links, FIFOs, the quota) are catalogue cases in `tests/security/filesystem.rs`.

mod common;

use common::{TestApp, assert_ok, call_tool, mcp_client};
use serde_json::json;

#[tokio::test]
async fn write_read_list_delete_round_trip_with_the_original_fields() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;

    let (err, v) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": "in/data.json", "content": "[1, 2, 3]"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(
        v,
        json!({"success": true, "message": "Written 9 bytes to in/data.json"})
    );

    // The sandbox sees it and can write next to it.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "d = json.loads(read_file('in/data.json'))\nwrite_file('out/sum.txt', str(sum(d)))\nresult = sum(d)"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], 6);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["success"], true);

    let (err, v) = call_tool(
        &client,
        "read_workspace_file",
        json!({"filename": "out/sum.txt"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["content"], "6");
    assert_eq!(v["size"], 1);
    assert_eq!(v["filename"], "out/sum.txt");

    let (_, v) = call_tool(&client, "list_workspace_files", json!({})).await;
    assert_eq!(v["files"], json!(["in/data.json", "out/sum.txt"]));
    assert_eq!(v["count"], 2);
    let (_, v) = call_tool(&client, "list_workspace_files", json!({"subpath": "out"})).await;
    assert_eq!(v["files"], json!(["out/sum.txt"]));

    let (err, v) = call_tool(
        &client,
        "delete_workspace_file",
        json!({"filename": "in/data.json"}),
    )
    .await;
    assert!(!err, "{v}");
    let (err, v) = call_tool(
        &client,
        "read_workspace_file",
        json!({"filename": "in/data.json"}),
    )
    .await;
    assert!(err);
    assert_eq!(v["success"], false);
    assert!(v["error"].as_str().unwrap().contains("not found"), "{v}");

    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
#[ignore = "needs root: the workspace is root-owned and handed to the sandbox user"]
async fn a_root_owned_workspace_is_prepared_without_running_the_sandbox_as_root() {
    common::require_root("a root-owned workspace");
    let t = TestApp::start().await;
    let o = t
        .run("import os\nopen('/workspace/mine.txt', 'w').write('x')\nresult = [os.getuid(), os.stat('/workspace').st_uid]")
        .await;
    assert_ok(&o);
    assert_ne!(o.result[0], 0);
    assert_eq!(o.result[0], o.result[1]);
    t.finish().await;
}

/// Files below `dir` whose names start with the workspace's temp prefix.
fn temp_files(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else if e.file_name().to_string_lossy().starts_with(".cem-tmp-") {
                found.push(e.path().display().to_string());
            }
        }
    }
    found
}

/// Unmounts a loop-mounted workspace when dropped (after the server has let go of it), so the
/// temp directory around it can be removed, also when the test fails.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        for _ in 0..50 {
            if code_execution_mcp::workspace::quota::unmount(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("could not unmount {}", self.0.display());
    }
}

#[tokio::test]
#[ignore = "needs root: loop-mounts an ext4 image as the workspace quota"]
async fn a_full_workspace_refuses_tool_writes_clearly_and_keeps_existing_files_whole() {
    common::require_root("the loop-mounted quota");
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("workspace");
    let _unmount = Unmount(ws.clone());
    let t = TestApp::start_with(|c| {
        c.storage.workspace_quota_mb = 16;
        c.storage.workspace = Some(ws.clone());
    })
    .await;
    assert_eq!(t.app.quota().kind(), "loop_mount");
    let client = mcp_client(t.app.clone()).await;
    let write = |name: &str, content: String| {
        let client = client.clone();
        let args = json!({"filename": name, "content": content});
        async move { call_tool(&client, "write_workspace_file", args).await }
    };

    let original = "k".repeat(6 << 20);
    let (err, v) = write("keep.txt", original.clone()).await;
    assert!(!err, "{v}");
    let (err, v) = write("fill.txt", "f".repeat(6 << 20)).await;
    assert!(!err, "{v}");

    // Overwriting with a payload that does not fit: a clear error, the old file untouched
    // (the new content goes to a temp file that is never renamed over it).
    let (err, v) = write("keep.txt", "n".repeat(9 << 20)).await;
    assert!(err, "{v}");
    let message = v["error"].as_str().unwrap();
    assert!(
        message.contains("workspace is full (quota 16 MiB)") && message.contains("delete files"),
        "{message}"
    );
    assert!(
        std::fs::read(ws.join("keep.txt")).unwrap() == original.as_bytes(),
        "the file being overwritten changed"
    );
    // A new file that does not fit: the same error, and no file at all.
    let (err, v) = write("new.txt", "x".repeat(9 << 20)).await;
    assert!(err, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("workspace is full"),
        "{v}"
    );
    assert!(!ws.join("new.txt").exists());
    assert!(temp_files(&ws).is_empty(), "{:?}", temp_files(&ws));

    // Code that fills it and does not catch the error: the response says what ran out and
    // what to do.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "with open('/workspace/more.bin', 'wb') as f:\n    while True:\n        f.write(b'm' * (1 << 20))\n        f.flush()"}),
    )
    .await;
    assert!(err, "{v}");
    let message = v["error"].as_str().unwrap();
    assert!(
        message.contains("No space left on device")
            && message.contains("/workspace holds at most 16 MiB (the workspace quota)")
            && message.contains("delete_workspace_file"),
        "{message}"
    );
    assert_eq!(v["error_type"], "OSError");
    assert!(std::fs::read(ws.join("keep.txt")).unwrap() == original.as_bytes());

    // Deleting makes room again.
    for name in ["fill.txt", "more.bin"] {
        let (err, v) = call_tool(&client, "delete_workspace_file", json!({"filename": name})).await;
        assert!(!err, "{v}");
    }
    let (err, v) = write("keep.txt", "n".repeat(6 << 20)).await;
    assert!(!err, "{v}");

    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn a_soft_quota_refuses_tool_writes_and_executions_clearly() {
    // A workspace that already holds files is not mounted over: the quota is soft.
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("existing.txt"), "x".repeat(12 << 20)).unwrap();
    let t = TestApp::start_with(|c| {
        c.storage.workspace_quota_mb = 16;
        c.storage.workspace = Some(ws.clone());
    })
    .await;
    assert_eq!(t.app.quota().kind(), "soft");
    let client = mcp_client(t.app.clone()).await;
    let original = "k".repeat(3 << 20);
    let (err, v) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": "keep.txt", "content": original}),
    )
    .await;
    assert!(!err, "{v}");
    // Past the quota: refused before anything is written; the existing file is untouched.
    let (err, v) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": "keep.txt", "content": "n".repeat(4 << 20)}),
    )
    .await;
    assert!(err, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("workspace is full (quota 16 MiB)"),
        "{v}"
    );
    assert!(std::fs::read(ws.join("keep.txt")).unwrap() == original.as_bytes());
    assert!(temp_files(&ws).is_empty());
    // Code filled it past the quota (nothing stops it during an execution in soft mode): the
    // next execution is refused, saying why.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "open('/workspace/big.bin', 'wb').write(b'b' * (2 << 20))"}),
    )
    .await;
    assert!(!err, "{v}");
    let (err, v) = call_tool(&client, "execute_code", json!({"code": "result = 1"})).await;
    assert!(err, "{v}");
    assert!(
        v.to_string()
            .contains("workspace is full (quota 16 MiB): delete files"),
        "{v}"
    );
    client.cancel().await.unwrap();
    t.finish().await;
}

/// `resources/read` of a workspace file after the workspace's handle went stale (shared
/// storage after a failover, [`Workspace::inject_stale_handle`]) reopens it and answers the
/// file: the resource goes through the workspace's renewal, as the tools do.
///
/// [`Workspace::inject_stale_handle`]: code_execution_mcp::workspace::Workspace::inject_stale_handle
#[tokio::test]
async fn resources_read_renews_a_stale_workspace_handle() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;
    std::fs::write(t.workspace().join("note.txt"), "read after a failover").unwrap();
    t.app.with_workspace(|ws| ws.inject_stale_handle()).await;

    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "workspace:///note.txt",
        ))
        .await;
    let read =
        serde_json::to_value(read.expect("a stale handle is renewed, not an error")).unwrap();
    assert_eq!(
        read["contents"][0]["text"], "read after a failover",
        "{read}"
    );

    client.cancel().await.unwrap();
    t.finish().await;
}
