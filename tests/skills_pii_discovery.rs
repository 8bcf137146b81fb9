//! Discovery, skills and PII end to end through MCP, and from sandbox code over the channel,
//! against the real engine.

mod common;

use code_execution_mcp::config::Ranker;
use common::{TestApp, assert_ok, call_tool, mcp_client};
use serde_json::json;

#[tokio::test]
async fn discovery_tools_search_define_and_list() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;

    let (err, v) = call_tool(&client, "list_tool_categories", json!({})).await;
    assert!(!err, "{v}");
    assert_eq!(v["total_tools"], 5558);
    assert_eq!(v["categories"].as_object().unwrap().len(), 29);
    assert!(v["categories"]["finance"]["tool_count"].as_u64().unwrap() > 100);

    // A paraphrase, not the tool's own words.
    let (err, v) = call_tool(
        &client,
        "search_tools",
        json!({"query": "what is the current price of a share of a company on the stock market", "limit": 5}),
    )
    .await;
    assert!(!err, "{v}");
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 5);
    assert!(
        tools
            .iter()
            .any(|t| t["name"].as_str().unwrap().contains("stock")
                || t["description"]
                    .as_str()
                    .unwrap()
                    .to_lowercase()
                    .contains("stock")),
        "{v}"
    );
    assert!(tools[0]["score"].as_f64().unwrap() >= tools[4]["score"].as_f64().unwrap());
    assert!(
        tools[0].get("input_schema").is_none(),
        "summary level has no schema"
    );
    assert!(tools[0]["mcp_server"].is_string() && tools[0]["category"].is_string());

    let (_, v) = call_tool(
        &client,
        "search_tools",
        json!({"query": "stock price", "category": "finance", "detail_level": "full", "limit": 3}),
    )
    .await;
    let first = &v["tools"][0];
    assert_eq!(first["category"], "finance");
    assert!(first.get("input_schema").is_some(), "{v}");
    let (_, v) = call_tool(
        &client,
        "search_tools",
        json!({"query": "stock price", "detail_level": "name", "limit": 3}),
    )
    .await;
    assert!(v["tools"][0].get("description").is_none(), "{v}");

    let (err, v) = call_tool(
        &client,
        "get_tool_definition",
        json!({"tool_name": "yahoo-finance/get_current_stock_price"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["mcp_server"], "yahoo-finance");
    assert_eq!(v["input_schema"]["required"], json!(["symbol"]));

    let (err, v) = call_tool(
        &client,
        "get_tool_definition",
        json!({"tool_name": "yahoo-finance/get_current_stok_price"}),
    )
    .await;
    assert!(err);
    assert!(
        v.to_string().contains("get_current_stock_price"),
        "closest names: {v}"
    );

    let (err, v) = call_tool(
        &client,
        "search_tools",
        json!({"query": "x", "category": "nope"}),
    )
    .await;
    assert!(err);
    assert!(
        v.to_string().contains("finance"),
        "lists the categories: {v}"
    );

    for query in ["", &"long ".repeat(20_000), "天气 预报", "\u{0}\u{7}"] {
        let (err, v) = call_tool(&client, "search_tools", json!({ "query": query })).await;
        assert!(!err && v["tools"].is_array(), "{query:.20}: {v}");
    }
    let (_, v) = call_tool(&client, "search_tools", json!({"query": ""})).await;
    assert!(
        !v["suggestions"].as_array().unwrap().is_empty(),
        "an empty query gets a hint: {v}"
    );
    client.cancel().await.unwrap();
    t.finish().await;
}

/// The sentence model beside BM25F by default, and what `get_execution_stats` says of it; a
/// server started with `--discovery lexical` says so and no longer finds by meaning.
#[tokio::test]
async fn discovery_ranks_by_meaning_and_says_which_ranker() {
    let query = json!({"query": "who has been editing this file lately", "limit": 5});
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    for (ranker, finds) in [(Ranker::Semantic, true), (Ranker::Lexical, false)] {
        let t = TestApp::start_with(|c| c.discovery.discovery = ranker).await;
        let client = mcp_client(t.app.clone()).await;
        let (err, v) = call_tool(&client, "search_tools", query.clone()).await;
        assert!(!err, "{v}");
        assert_eq!(
            ids(&v).contains(&"fastfs/fastfs_blame".to_owned()),
            finds,
            "{ranker:?}: {v}"
        );
        let (_, stats) = call_tool(&client, "get_execution_stats", json!({})).await;
        let ranking = &stats["tool_registry"]["ranking"];
        match ranker {
            Ranker::Semantic => {
                assert_eq!(ranking["ranker"], "semantic", "{ranking}");
                assert_eq!(ranking["model"], "sentence-transformers/all-MiniLM-L6-v2");
                assert_eq!(ranking["vectors_shipped"], 5558, "{ranking}");
            }
            Ranker::Lexical => assert_eq!(ranking, &json!({"ranker": "lexical"})),
        }
        client.cancel().await.unwrap();
        t.finish().await;
    }
}

#[tokio::test]
async fn skills_through_tools_and_from_sandbox_code() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;

    // The shipped skill, the Python server's example: exec(load_skill(...)) and an import.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": r#"
vulns = [{"id": 1, "severity": "low"}, {"id": 2, "severity": "high"}, {"id": 3, "severity": "critical"}]
skill = load_skill("filter_high_risk")
exec(skill)
a = filter_high_risk(vulns)
from skills import filter_high_risk as imported
result = [x["id"] for x in a] == [x["id"] for x in imported(vulns)] and [x["id"] for x in a]
"#}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], json!([2, 3]));

    // Saved from sandbox code, listed, importable in the next execution.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "result = save_skill('double_all', 'def double_all(xs):\\n    return [2 * x for x in xs]\\n', 'Doubles numbers')"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], "Skill 'double_all' saved successfully");
    let (_, v) = call_tool(&client, "list_skills", json!({})).await;
    let names: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"double_all") && names.contains(&"filter_high_risk"),
        "{v}"
    );
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "from skills import double_all\nresult = [double_all([1, 2]), [s['name'] for s in list_skills()]]"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"][0], json!([2, 4]));
    assert!(
        v["result"][1]
            .as_array()
            .unwrap()
            .contains(&json!("double_all")),
        "{v}"
    );

    // A skill imported as a module first is still importable as its function.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "import skills.top_n\nfrom skills import top_n\nresult = [callable(top_n), type(skills.top_n).__name__]"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], json!([true, "function"]));

    let (err, v) = call_tool(&client, "load_skill", json!({"name": "double_all"})).await;
    assert!(!err, "{v}");
    assert!(v["code"].as_str().unwrap().contains("def double_all"));
    assert_eq!(v["metadata"]["description"], "Doubles numbers");
    let (err, _) = call_tool(&client, "delete_skill", json!({"name": "double_all"})).await;
    assert!(!err);
    let (err, v) = call_tool(&client, "load_skill", json!({"name": "double_all"})).await;
    assert!(err, "{v}");
    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn pii_never_reaches_the_model_but_stays_in_files_and_restores() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;
    let code = r#"
rows = [{"name": "Ann", "email": "ann.lee@example.com", "card": "4111 1111 1111 1111"},
        {"name": "Bob", "email": "bob@example.org", "card": "5500-0000-0000-0004"}]
write_file("customers.json", json.dumps(rows))
print("first:", rows[0]["email"])
result = {"emails": [r["email"] for r in rows], "cards": [r["card"] for r in rows]}
"#;
    let (err, v) = call_tool(&client, "execute_code", json!({ "code": code })).await;
    assert!(!err, "{v}");
    let text = v.to_string();
    for value in [
        "ann.lee@example.com",
        "bob@example.org",
        "4111 1111 1111 1111",
        "5500-0000-0000-0004",
    ] {
        assert!(!text.contains(value), "{value} reached the model: {text}");
    }
    assert!(
        v["output"][0]
            .as_str()
            .unwrap()
            .starts_with("first: [EMAIL_"),
        "{v}"
    );
    let token = v["result"]["cards"][0].as_str().unwrap().to_string();
    assert!(token.starts_with("[CREDIT_CARD_"), "{v}");
    // The workspace keeps the real values.
    let file = std::fs::read_to_string(t.workspace().join("customers.json")).unwrap();
    assert!(file.contains("ann.lee@example.com"));

    let (_, v) = call_tool(
        &client,
        "restore_pii",
        json!({ "text": format!("pay with {token}") }),
    )
    .await;
    assert_eq!(v["restored_text"], "pay with 4111 1111 1111 1111");
    assert_eq!(v["restored"], 1);

    let (_, v) = call_tool(
        &client,
        "sanitize_pii",
        json!({"text": "Contact john@example.com at 555-123-4567"}),
    )
    .await;
    assert_eq!(v["pii_found"], 2);
    assert_eq!(v["pii_types"], json!(["EMAIL", "PHONE"]));
    assert!(!v["sanitized_text"].as_str().unwrap().contains("john@"));

    // In the sandbox: tokenize_pii / detokenize_pii over the channel.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "s, tokens = tokenize_pii('mail x@example.com now')\nback = detokenize_pii(s, tokens)\nresult = [s.startswith('mail [EMAIL_'), back == 'mail x@example.com now', len(tokens)]"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], json!([true, true, 1]));
    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn every_path_to_the_model_is_tokenized_and_tokens_work_as_tool_arguments() {
    let t = TestApp::start().await;
    let client = mcp_client(t.app.clone()).await;
    let code = r#"
import sys
write_file("ann@example.com/notes.txt", "call 415-555-0132")
print("to stderr: bob@example.com", file=sys.stderr)
raise type("cy@example.com", (Exception,), {})("failed for dee@example.com")
"#;
    let (err, v) = call_tool(&client, "execute_code", json!({ "code": code })).await;
    assert!(err);
    let text = v.to_string();
    for value in [
        "ann@example.com",
        "bob@example.com",
        "cy@example.com",
        "dee@example.com",
    ] {
        assert!(!text.contains(value), "{value} reached the model: {text}");
    }
    assert!(
        v["error_type"].as_str().unwrap().starts_with("[EMAIL_"),
        "{v}"
    );

    // The listing shows a token; the token works as the file name; the content is tokenized.
    let (_, v) = call_tool(&client, "list_workspace_files", json!({})).await;
    let listed = v["files"][0].as_str().unwrap().to_string();
    assert!(
        listed.starts_with("[EMAIL_") && listed.ends_with(".txt"),
        "{v}"
    );
    let (err, v) = call_tool(
        &client,
        "read_workspace_file",
        json!({ "filename": listed }),
    )
    .await;
    assert!(!err, "{v}");
    assert!(
        v["content"].as_str().unwrap().starts_with("call [PHONE_"),
        "{v}"
    );
    // A write with tokens stores the real values.
    let phone_token = v["content"].as_str().unwrap()[5..].to_string();
    let (err, _) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": "out.txt", "content": format!("dial {phone_token}")}),
    )
    .await;
    assert!(!err);
    assert_eq!(
        std::fs::read_to_string(t.workspace().join("out.txt")).unwrap(),
        "dial 415-555-0132"
    );

    // Probing the vault with a mass of guessed tokens is refused.
    let guesses: String = (0..1001).map(|i| format!("[EMAIL_{i:08x}] ")).collect();
    let (err, v) = call_tool(&client, "restore_pii", json!({ "text": guesses })).await;
    assert!(err && v.as_str().unwrap().contains("at most"), "{v}");
    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn pii_output_off_returns_values_as_printed() {
    let t = TestApp::start_with(|c| c.pii.pii_output = code_execution_mcp::config::PiiOutput::Off)
        .await;
    let o = t.run("print('ann@example.com')").await;
    assert_ok(&o);
    let client = mcp_client(t.app.clone()).await;
    let (_, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "print('ann@example.com')"}),
    )
    .await;
    assert_eq!(v["output"], json!(["ann@example.com"]));
    client.cancel().await.unwrap();
    t.finish().await;
}

/// With `--pii-key-file`, a token one server process minted restores in a server started afresh
/// on the same data directory (as when a tenant moves to another node); without the key file, a
/// fresh server does not know it.
#[tokio::test]
async fn pii_tokens_outlive_the_server_with_a_key_file() {
    use common::spawn_server_with;

    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("pii.key");
    std::fs::write(&key, format!("  {}\n", "5a".repeat(32))).unwrap();
    let data = dir.path().join("data");
    let (data, key) = (data.to_str().unwrap(), key.to_str().unwrap());
    let with_key = [
        "--pool-size",
        "0",
        "--data-dir",
        data,
        "--pii-key-file",
        key,
    ];
    let stop = |mut child: tokio::process::Child, client: rmcp::service::RunningService<_, ()>| async move {
        drop(client);
        common::assert_exits_when_stdin_closed(&mut child).await;
    };

    let (child, client) = spawn_server_with(dir.path(), &[], &with_key).await;
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "print('write to ann@example.com')"}),
    )
    .await;
    assert!(!err, "{v}");
    let line = v["output"][0].as_str().unwrap().to_string();
    let token = line.strip_prefix("write to ").unwrap().to_string();
    assert!(token.starts_with("[EMAIL_") && token.ends_with(']'), "{v}");
    let (err, v) = call_tool(
        &client,
        "sanitize_pii",
        json!({"text": "call +1 415 555 0134"}),
    )
    .await;
    assert!(!err, "{v}");
    let phone = v["sanitized_text"].as_str().unwrap().replace("call ", "");
    stop(child, client).await;

    let (child, client) = spawn_server_with(dir.path(), &[], &with_key).await;
    let (err, v) = call_tool(
        &client,
        "restore_pii",
        json!({"text": format!("send to {token}, or {phone}")}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(
        v["restored_text"],
        "send to ann@example.com, or +1 415 555 0134"
    );
    assert_eq!(
        (v["restored"].clone(), v["unknown"].clone()),
        (json!(2), json!(0))
    );
    let (_, v) = call_tool(&client, "get_execution_stats", json!({})).await;
    assert_eq!(v["pii_vault"]["persisting"], true, "{v}");
    assert_eq!(v["pii_vault"]["write_failures"], 0, "{v}");
    assert_eq!(v["pii_vault"]["tokens"], 2, "{v}");
    stop(child, client).await;

    let without = ["--pool-size", "0", "--data-dir", data];
    let (child, client) = spawn_server_with(dir.path(), &[], &without).await;
    let (err, v) = call_tool(&client, "restore_pii", json!({"text": token})).await;
    assert!(!err, "{v}");
    assert_eq!(
        (v["restored"].clone(), v["unknown"].clone()),
        (json!(0), json!(1)),
        "{v}"
    );
    let (_, v) = call_tool(&client, "get_execution_stats", json!({})).await;
    assert!(v.get("pii_vault").is_none(), "{v}");
    stop(child, client).await;
}

/// `text` without the tokens in it.
fn without_tokens(text: &str) -> String {
    regex::Regex::new(r"\[[A-Z_]+_[0-9a-f]{8,}\]")
        .unwrap()
        .replace_all(text, "")
        .into_owned()
}

/// The 5-character pieces of `value` found in `shown` (tokens removed first).
fn pieces_of(value: &str, shown: &str) -> Vec<String> {
    let shown = without_tokens(shown);
    let chars: Vec<char> = value.chars().collect();
    chars
        .windows(5)
        .map(|w| w.iter().collect::<String>())
        .filter(|piece| shown.contains(piece.as_str()))
        .collect()
}

#[tokio::test]
async fn a_value_cut_by_a_limit_never_leaves_a_piece_behind() {
    const LIMIT: usize = 256;
    let t = TestApp::start_with(|c| {
        c.limits.max_output_bytes = LIMIT;
        c.limits.max_result_bytes = LIMIT;
        c.pool.pool_size = 2;
    })
    .await;
    // Each value cut at every offset (0: just before it, its length: just after) by the output
    // limit (stdout and stderr), the result limit and the error limit (64 KiB, error and
    // traceback); the value comes in through context_vars so the code's own text holds none.
    let values = [
        "margarethe.vonstrelitz@example-mail.org",
        "+1 (415) 555-0134",
        "4111 1111 1111 1111",
    ];
    for value in values {
        for off in 0..=value.len() {
            let context = json!({"v": value, "n": LIMIT - 1 - off, "r": LIMIT - 2 - off,
                                 "e": 65536 - 1 - off});
            let o = t
                .run_with(
                    "import sys\nsys.stdout.write('x' * n + ' ' + v)\n\
                     sys.stderr.write('x' * n + ' ' + v)\nresult = 'y' * r + ' ' + v",
                    Some(context.clone()),
                    None,
                    None,
                )
                .await;
            assert_ok(&o);
            let result = o.result.as_str().expect("a cut result is a string");
            for (place, shown) in [
                ("stdout", o.stdout.as_str()),
                ("stderr", o.stderr.as_str()),
                ("result", result),
            ] {
                let left = pieces_of(value, shown);
                assert!(
                    left.is_empty(),
                    "{place}, {value} cut at {off}: {left:?} in …{}",
                    &shown[shown.len().saturating_sub(60)..]
                );
                assert!(without_tokens(shown).len() <= LIMIT, "{place}: {shown}");
            }
            assert!(o.result_truncated && (o.stdout.truncated() || off == value.len()));
            let o = t
                .run_with(
                    "raise ValueError('x' * e + ' ' + v)",
                    Some(context),
                    None,
                    None,
                )
                .await;
            assert_eq!(o.error_type.as_deref(), Some("ValueError"), "{:?}", o.error);
            for (place, shown) in [("error", &o.error), ("traceback", &o.traceback)] {
                let shown = shown.as_deref().unwrap_or_default();
                let left = pieces_of(value, shown);
                assert!(left.is_empty(), "{place}, {value} cut at {off}: {left:?}");
            }
        }
    }
    t.finish().await;
}

#[tokio::test]
async fn values_wrapped_over_lines_come_back_as_tokens() {
    let t = TestApp::start().await;
    let o = t
        .run(
            "print('card on file: 4111 1111')\nprint('1111 1111, exp 12/29')\n\
             print('IBAN DE89 3704 0044')\nprint('     0532 0130 00 (salary)')\n\
             print('card')\nprint('4000 0566')\nprint('5566')\nprint('5556 ok')\n\
             print('call +1 (415)')\nprint('555-0134 tonight')\n\
             print('IBAN GB33 BUKB')\nprint('2020 1555')\nprint('5555 55 received')",
        )
        .await;
    assert_ok(&o);
    let shown = o.stdout.as_str();
    for piece in [
        "4111",
        "1111 1111",
        "3704",
        "0532",
        "0566",
        "5556",
        "(415)",
        "555-0134",
        "BUKB",
        "1555",
    ] {
        assert!(!shown.contains(piece), "{piece} in {shown}");
    }
    for kind in ["CREDIT_CARD", "IBAN", "PHONE"] {
        assert!(shown.contains(&format!("[{kind}_")), "{kind} in {shown}");
    }
    assert!(
        shown.contains(", exp 12/29") && shown.contains("(salary)"),
        "{shown}"
    );

    // Ordinary multi-line output without personal data comes back as printed.
    let table = "  id   qty  price\n   0  4532   1234\n   1  5678   9012\n   2  3456   7890\n\
                 build 2024 1105\n2231 ok\nversion 1.2.3 1234\n5678 released\n";
    let o = t
        .run_with(
            "import sys\nsys.stdout.write(table)",
            Some(json!({"table": table})),
            None,
            None,
        )
        .await;
    assert_ok(&o);
    assert_eq!(o.stdout.as_str(), table);
    t.finish().await;
}
