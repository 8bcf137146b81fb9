//! The workspace tools through MCP: the round trip with the original's fields, and the
//! ownership of a root-owned workspace. The attacks on them (traversal names, planted links,
//! FIFOs, the quota) are catalogue cases in `tests/security_cases.rs`.

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
