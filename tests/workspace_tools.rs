//! The workspace tools through MCP, with attacks planted by sandbox code in the bind mount:
//! symlinks to host files, traversal names, FIFOs; plus ownership and the disk quota.

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
async fn traversal_names_are_refused_before_any_disk_access() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;
    let long = "a".repeat(4096);
    let token = format!("cem-escape-{}", std::process::id());
    let up = format!("../../{token}");
    let around = format!("a/../../{token}");
    let absolute = format!("/tmp/{token}");
    for name in [
        up.as_str(),
        around.as_str(),
        absolute.as_str(),
        "/etc/passwd",
        "x\0y",
        long.as_str(),
        "",
    ] {
        for tool in [
            "read_workspace_file",
            "write_workspace_file",
            "delete_workspace_file",
        ] {
            let (err, v) =
                call_tool(&client, tool, json!({"filename": name, "content": "x"})).await;
            assert!(err, "{tool}({name:?}) was accepted: {v}");
            assert_eq!(v["success"], false);
        }
    }
    let (err, _) = call_tool(&client, "list_workspace_files", json!({"subpath": "../"})).await;
    assert!(err);
    // Nothing was created where those names would lead.
    let ws = t.workspace();
    let parent = ws.parent().unwrap();
    for dir in [
        parent,
        parent.parent().unwrap(),
        std::path::Path::new("/tmp"),
    ] {
        let target = dir.join(&token);
        assert!(!target.exists(), "{} was created", target.display());
    }
    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn links_and_special_files_planted_by_sandbox_code_are_never_followed() {
    let t = TestApp::start().await;
    // A host file outside the workspace that the attack aims at.
    let secret = t.dir.path().join("host-secret.txt");
    std::fs::write(&secret, "do not leak").unwrap();
    let client = mcp_client(t.app.clone()).await;
    let code = format!(
        r#"
import os
os.symlink("{secret}", "/workspace/evil")
os.symlink("/etc/passwd", "/workspace/passwd")
os.symlink("{dir}", "/workspace/outdir")
os.mkfifo("/workspace/fifo")
os.makedirs("/workspace/sub", exist_ok=True)
os.symlink("/etc", "/workspace/sub/etc")
result = sorted(os.listdir("/workspace"))
"#,
        secret = secret.display(),
        dir = t.dir.path().display()
    );
    let (err, v) = call_tool(&client, "execute_code", json!({ "code": code })).await;
    assert!(!err, "{v}");

    for name in [
        "evil",
        "passwd",
        "outdir/host-secret.txt",
        "sub/etc/passwd",
        "fifo",
    ] {
        let (err, v) = call_tool(&client, "read_workspace_file", json!({ "filename": name })).await;
        assert!(err, "read of {name} succeeded: {v}");
        assert!(
            !v.to_string().contains("do not leak") && !v.to_string().contains("root:"),
            "{v}"
        );
    }
    for name in ["outdir/host-secret.txt", "sub/etc/evil"] {
        let (err, v) = call_tool(
            &client,
            "write_workspace_file",
            json!({ "filename": name, "content": "pwned" }),
        )
        .await;
        assert!(err, "write through {name} succeeded: {v}");
    }
    // Writing to the link's own name replaces the link; the target is untouched.
    let (err, v) = call_tool(
        &client,
        "write_workspace_file",
        json!({ "filename": "evil", "content": "replaced" }),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "do not leak");
    assert!(!t.workspace().join("evil").is_symlink());

    // Deleting a link removes the link, not its target.
    let (err, v) = call_tool(
        &client,
        "delete_workspace_file",
        json!({ "filename": "passwd" }),
    )
    .await;
    assert!(!err, "{v}");
    assert!(std::path::Path::new("/etc/passwd").exists());

    // Listing shows regular files only and does not descend into linked directories.
    let (_, v) = call_tool(&client, "list_workspace_files", json!({})).await;
    assert_eq!(v["files"], json!(["evil"]), "{v}");

    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn a_root_owned_workspace_is_prepared_without_running_the_sandbox_as_root() {
    if !common::root_or_skip("a root-owned workspace") {
        return;
    }
    let t = TestApp::start().await;
    let o = t
        .run("import os\nopen('/workspace/mine.txt', 'w').write('x')\nresult = [os.getuid(), os.stat('/workspace').st_uid]")
        .await;
    assert_ok(&o);
    assert_ne!(o.result[0], 0);
    assert_eq!(o.result[0], o.result[1]);
    t.finish().await;
}

#[tokio::test]
async fn code_writing_past_the_quota_gets_enospc() {
    if !common::root_or_skip("the loop-mounted quota") {
        return;
    }
    let t = TestApp::start_with(|c| c.workspace_quota_mb = 16).await;
    let ws = t.workspace();
    let o = t
        .run(
            r#"
import errno
try:
    with open("/workspace/big.bin", "wb") as f:
        for _ in range(64):
            f.write(b"\1" * (1 << 20))
            f.flush()
    result = "wrote 64 MiB"
except OSError as e:
    result = errno.errorcode[e.errno]
"#,
        )
        .await;
    assert_ok(&o);
    assert_eq!(o.result, "ENOSPC");
    let size = std::fs::metadata(ws.join("big.bin")).unwrap().len();
    assert!(size <= 16 << 20, "{size}");
    let stats = t.app.quota.kind();
    assert_eq!(stats, "loop_mount");
    t.finish().await;
    code_execution_mcp::workspace::quota::unmount(&ws).unwrap();
}
