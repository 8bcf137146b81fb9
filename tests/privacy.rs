//! Privacy by type, from the outside: every tool the server lists is called with personal data
//! in its arguments, in the workspace and in a skill, and no answer (structured content, text,
//! errors, attachments) carries a value in clear, except `restore_pii`, whose answer is the
//! values asked for. A tool the server lists that this walk does not call fails the test, so a
//! new tool comes with its case.

// A client reads rmcp's answer types (clippy.toml bans them in the server, which makes its
// answers in src/privacy/ only); nothing here answers a model.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

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
    // With links (a stdio server's, on --links-listen), so the link tools answer in full.
    let t = TestApp::start_with(|c| {
        c.oauth.public_url = Some("http://127.0.0.1:9".into());
        c.links.links_listen = Some("127.0.0.1:9".parse().unwrap());
    })
    .await;
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
        (
            "request_upload",
            json!({"filename": format!("{OTHER_EMAIL}/in.csv")}),
        ),
        ("request_download", json!({"path": file})),
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

/// No 4 bytes in a row of `value` in `text`.
fn assert_no_part_of(value: &str, text: &str, what: &str) {
    for i in 0..=value.len() - 4 {
        let part = &value[i..i + 4];
        assert!(!text.contains(part), "{what} shows {part:?}: {text}");
    }
}

const GLUED: &str = "margarethe.vonstrelitz@example-mail.org";

/// An email glued to the text before it has a "local part" far past an address's 64
/// characters; its value is its domain and the last 64 characters before its `@`, and that is
/// tokenized wherever the execution shows it: printed, returned, in a file's name, raised,
/// in the traceback.
#[tokio::test]
async fn an_email_glued_to_text_is_tokenized_in_every_part_of_an_outcome() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;
    let glued = format!("g = ['id=' + 'q' * 80 + {GLUED:?} + ' end', 'x' * 60 + {GLUED:?}]\n");
    let code = format!(
        "{glued}for line in g: print(line)\nopen('/workspace/' + g[1] + '.txt', 'w').write('x')\nresult = g"
    );
    let (err, v) = common::call_tool(&client, "execute_code", json!({ "code": code })).await;
    assert!(!err, "{v}");
    let answer = v.to_string();
    assert_no_part_of(GLUED, &answer, "the answer");
    for (shown, glue) in [
        (&v["output"][0], "id="),
        (&v["output"][1], ""),
        (&v["result"][0], "id="),
        (&v["result"][1], ""),
        (&v["files"][0]["path"], ""),
    ] {
        let shown = shown.as_str().unwrap_or_else(|| panic!("{v}"));
        assert!(
            shown.starts_with(glue) && shown.contains("[EMAIL_"),
            "{shown} in {v}"
        );
    }
    let code = format!("{glued}raise ValueError(g[0] + ' and ' + g[1])");
    let (err, v) = common::call_tool(&client, "execute_code", json!({ "code": code })).await;
    assert!(err, "{v}");
    assert_no_part_of(GLUED, &v.to_string(), "the error");
    for field in ["error", "traceback"] {
        let text = v[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} in {v}"));
        assert_eq!(text.matches("[EMAIL_").count(), 2, "{field}: {text}");
    }
    client.cancel().await.unwrap();
    t.finish().await;
}

/// 128 KiB of letters before an email, and the output limit cuts inside it, or right after it
/// (at a space: no run of letters to withhold there): the model sees its token, never a part
/// of it.
#[tokio::test]
async fn a_value_glued_to_a_long_run_is_its_token_wherever_the_output_limit_cuts() {
    const LIMIT: usize = 128 * 1024;
    let t = TestApp::start_with(|c| c.limits.max_output_bytes = LIMIT).await;
    let client = mcp_client(t.app.clone()).await;
    // The cut falls exactly after the email, then after its first 10 characters.
    for before_cut in [GLUED.len(), 10] {
        let code = format!("print('x' * {} + {GLUED:?} + ' end')", LIMIT - before_cut);
        let answer = common::execute_code(&client, &code).await;
        let structured = answer
            .structured_content
            .clone()
            .expect("structured content");
        assert_eq!(structured["output_truncated"], true, "{structured}");
        let output = structured["output"][0].as_str().expect("one printed line");
        let tail = &output[output.len().saturating_sub(80)..];
        assert_no_part_of(GLUED, &serde_json::to_string(&answer).unwrap(), tail);
        assert!(
            output.ends_with(']') && tail.contains("[EMAIL_"),
            "cut {before_cut} bytes into the email: {tail}"
        );
    }
    client.cancel().await.unwrap();
    t.finish().await;
}
