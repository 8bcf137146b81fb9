//! Privacy by type, from the outside: every tool the server lists is called with personal data
//! in its arguments, in the workspace and in a skill, and no answer (structured content, text,
//! errors, attachments) carries a value in clear, except `restore_pii`, whose answer is the
//! values asked for. A tool the server lists that this walk does not call fails the test, so a
//! new tool comes with its case.

mod common;

use std::collections::BTreeSet;

use base64::Engine as _;
use common::{TestApp, mcp_client};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

const EMAIL: &str = "ann.lee@example.com";
const PHONE: &str = "+1 (415) 555-0134";
const OTHER_EMAIL: &str = "bob.ray@example.com";

async fn call(client: &rmcp::Peer<rmcp::RoleClient>, name: &str, args: Value) -> CallToolResult {
    let params = CallToolRequestParams::new(name.to_string())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    client.call_tool(params).await.expect("tools/call answered")
}

#[tokio::test]
async fn no_tool_answers_with_personal_data_in_clear() {
    let t = TestApp::start().await;
    std::fs::create_dir_all(t.workspace().join(EMAIL)).unwrap();
    std::fs::write(
        t.workspace().join(EMAIL).join("notes.txt"),
        format!("call {EMAIL} at {PHONE}\n"),
    )
    .unwrap();
    let client = mcp_client(t.app.clone()).await;
    let listed: BTreeSet<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();

    let file = format!("{EMAIL}/notes.txt");
    let cases: Vec<(&str, Value)> = vec![
        (
            "execute_code",
            json!({"code": format!("print({EMAIL:?}); result = {{'to': {PHONE:?}}}")}),
        ),
        (
            "execute_code",
            json!({"code": format!("open('/workspace/{OTHER_EMAIL}.txt', 'w').write('x')\nraise ValueError({EMAIL:?})")}),
        ),
        (
            "search_tools",
            json!({"query": format!("send mail to {EMAIL}")}),
        ),
        ("get_tool_definition", json!({"tool_name": EMAIL})),
        ("list_tool_categories", json!({})),
        (
            "save_skill",
            json!({"name": "greet", "code": format!("TO = {EMAIL:?}"), "description": format!("mails {EMAIL}")}),
        ),
        ("load_skill", json!({"name": "greet"})),
        ("list_skills", json!({})),
        ("delete_skill", json!({"name": "greet"})),
        ("sanitize_pii", json!({"text": format!("write to {EMAIL}")})),
        (
            "write_workspace_file",
            json!({"filename": format!("{OTHER_EMAIL}/out.txt"), "content": PHONE}),
        ),
        ("read_workspace_file", json!({"filename": file})),
        (
            "read_workspace_file",
            json!({"filename": format!("{OTHER_EMAIL}/missing.txt")}),
        ),
        ("list_workspace_files", json!({})),
        (
            "delete_workspace_file",
            json!({"filename": format!("{OTHER_EMAIL}/out.txt")}),
        ),
        ("get_execution_stats", json!({})),
    ];
    let mut called = BTreeSet::new();
    for (name, args) in cases {
        let answer = serde_json::to_string(&call(&client, name, args.clone()).await).unwrap();
        for value in [EMAIL, OTHER_EMAIL, PHONE, "555-0134"] {
            assert!(
                !answer.contains(value),
                "{name} {args} answered {value} in clear: {answer}"
            );
        }
        called.insert(name.to_string());
    }

    // A file that is not text comes back as its base64, untouched, even where that base64
    // looks like a secret (an AWS access key id here).
    let looks_like_a_key = "AKIAIOSFODNN7EXAMPLE";
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(looks_like_a_key)
        .unwrap();
    assert!(
        std::str::from_utf8(&bytes).is_err(),
        "the file must not be text"
    );
    std::fs::write(t.workspace().join("blob.bin"), &bytes).unwrap();
    let (err, read) = common::call_tool(
        &client,
        "read_workspace_file",
        json!({"filename": "blob.bin"}),
    )
    .await;
    assert!(!err, "{read}");
    assert_eq!(read["encoding"], "base64");
    assert_eq!(read["content"], looks_like_a_key, "{read}");
    let (_, sanitized) =
        common::call_tool(&client, "sanitize_pii", json!({"text": looks_like_a_key})).await;
    assert_ne!(
        sanitized["sanitized_text"], looks_like_a_key,
        "as text it is a secret, so keeping it above is the exception working"
    );

    // restore_pii is the one exception: it gives the model back the values it asks for.
    let (_, sanitized) = common::call_tool(&client, "sanitize_pii", json!({"text": EMAIL})).await;
    let token = sanitized["sanitized_text"].as_str().unwrap().to_string();
    let restored = call(&client, "restore_pii", json!({"text": token})).await;
    assert_eq!(restored.structured_content.unwrap()["restored_text"], EMAIL);
    called.insert("restore_pii".into());

    let unwalked: Vec<&String> = listed.difference(&called).collect();
    assert!(
        unwalked.is_empty(),
        "tools this walk does not call (add a case): {unwalked:?}"
    );
    client.cancel().await.unwrap();
    t.finish().await;
}

/// A value glued to a long run of letters is no value for the detectors (its local part would
/// be 128 KiB long), so where the output limit cuts inside it, the run's last bytes before the
/// cut are withheld: none of the value's first characters reach the model.
#[tokio::test]
async fn a_cut_inside_a_run_shows_no_part_of_a_value_glued_to_it() {
    const LIMIT: usize = 128 * 1024;
    const VALUE: &str = "margarethe.vonstrelitz@example-mail.org";
    let t = TestApp::start_with(|c| c.limits.max_output_bytes = LIMIT).await;
    let client = mcp_client(t.app.clone()).await;
    // The cut falls after the value's first 10 characters.
    let code = format!("print('x' * {} + {VALUE:?})", LIMIT - 10);
    let answer = common::execute_code(&client, &code).await;
    let structured = answer
        .structured_content
        .clone()
        .expect("structured content");
    assert_eq!(structured["output_truncated"], true, "{structured}");
    let output = structured["output"][0].as_str().expect("one printed line");
    let tail = &output[output.len().saturating_sub(80)..];
    let answer = serde_json::to_string(&answer).unwrap();
    for len in 3..=VALUE.len() {
        assert!(
            !answer.contains(&VALUE[..len]),
            "the value's first {len} characters shown: {tail}"
        );
    }
    assert!(
        output.ends_with("[withheld up to the cut]"),
        "a marker says where: {tail}"
    );
    client.cancel().await.unwrap();
    t.finish().await;
}
