//! The upstreams file: what it accepts, what it refuses and how it says so.

use super::*;

fn env(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cret".into()),
        "HOME" => Some("/home/u".into()),
        _ => None,
    }
}

#[test]
fn reads_a_claude_desktop_config() {
    let text = r#"{
      "globalShortcut": "Ctrl+Space",
      "mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=${TZ:-UTC}"]},
        "crm": {"type": "http", "url": "https://crm.example/mcp?key=${TOKEN}",
                "headers": {"Authorization": "Bearer ${TOKEN}"}, "tenants": ["sales"]},
        "git": {"command": "python", "args": ["-m", "mcp_server_git"], "cwd": "${HOME}/repo",
                "env": {"GIT_TOKEN": "${TOKEN}"}, "policy": "confirm"},
        "old": {"command": "x", "disabled": true}
      }
    }"#;
    let servers = parse(text, &env).unwrap();
    let names: Vec<_> = servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["crm", "git", "time"]);
    assert_eq!(
        servers[2].transport,
        UpstreamTransport::Stdio {
            command: "uvx".into(),
            args: vec!["mcp-server-time".into(), "--local-timezone=UTC".into()],
            env: BTreeMap::new(),
            cwd: None
        }
    );
    let UpstreamTransport::Http { url, headers } = &servers[0].transport else {
        panic!("crm is HTTP")
    };
    assert_eq!(url, "https://crm.example/mcp?key=s3cret");
    assert_eq!(headers["Authorization"], "Bearer s3cret");
    assert_eq!(servers[0].describe(), "https://crm.example/mcp");
    assert_eq!(
        shown_url("https://me:pw@crm.example:8443/a/mcp?key=1#x"),
        "https://crm.example:8443/a/mcp"
    );
    assert_eq!(
        servers[0]
            .redactor()
            .text("error sending request for url (https://crm.example/mcp?key=s3cret)"),
        "error sending request for url (https://crm.example/mcp)"
    );
    assert_eq!(
        servers[0].tenants.as_deref(),
        Some(&["sales".to_string()][..])
    );
    let UpstreamTransport::Stdio { env, cwd, .. } = &servers[1].transport else {
        panic!("git is stdio")
    };
    assert_eq!(env["GIT_TOKEN"], "s3cret");
    assert_eq!(cwd.as_deref(), Some(Path::new("/home/u/repo")));
    assert_eq!(servers[1].policy.default, Some(Decision::Confirm));
}

#[test]
fn scrub_removes_every_secret_of_the_entry_however_it_is_quoted() {
    let text = r#"{"mcpServers": {
        "web": {"url": "https://me:pa55word@crm.example?key=s3cret-key&x=1",
                "headers": {"Authorization": "Bearer tok/en+1"}},
        "cli": {"command": "x", "env": {"API_KEY": "abcd-1234", "DEBUG": "1"}}
    }}"#;
    let servers = parse(text, &env).unwrap();
    let (cli, web) = (&servers[0], &servers[1]);
    for quoted in [
        // reqwest quotes a normalised URL: a path added, characters encoded.
        "error sending request for url (https://me:pa55word@crm.example/?key=s3cret-key&x=1)",
        "401 for token tok%2Fen%2B1 and tok/en+1; Authorization: Bearer tok/en+1",
    ] {
        let shown = web.redactor().text(quoted);
        for secret in ["pa55word", "s3cret-key", "tok/en+1", "tok%2Fen%2B1"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("[redacted]"), "{shown}");
    }
    assert_eq!(
        cli.redactor()
            .text("auth failed with key abcd-1234 (DEBUG=1)"),
        "auth failed with key [redacted] (DEBUG=1)",
        "short values such as 1 stay: they hide nothing"
    );
}

#[test]
fn secrets_are_found_json_escaped_and_where_things_are_is_no_secret() {
    let text = r#"{"mcpServers": {"cli": {"command": "x", "env": {
        "API_KEY": "k\\ey\"9f", "TZ": "Europe/Berlin", "HOME": "/home/alice",
        "LC_ALL": "de_DE.UTF-8", "DB_URL": "postgres://u:pw@db/app"}}}}"#;
    let cli = &parse(text, &env).unwrap()[0];
    let r = cli.redactor();
    assert_eq!(
        r.text(r#"{"error": "bad key k\\ey\"9f"} raw k\ey"9f, lower %2fapp"#),
        r#"{"error": "bad key [redacted]"} raw [redacted], lower %2fapp"#
    );
    assert_eq!(
        r.text("postgres://u:pw@db/app is down; postgres%3A%2F%2Fu%3Apw%40db%2Fapp"),
        "[redacted] is down; [redacted]"
    );
    let ordinary = "12:00 in Europe/Berlin, saved to /home/alice/x.csv (de_DE.UTF-8)";
    assert_eq!(r.text(ordinary), ordinary);
}

#[test]
fn an_unset_variable_is_an_error_that_names_it() {
    let e = parse(r#"{"mcpServers": {"a": {"command": "${NOPE}"}}}"#, &env)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("upstream `a`") && e.contains("NOPE is not set"),
        "{e}"
    );
    let e = parse(r#"{"mcpServers": {"a": {"command": "x${TOKEN"}}}"#, &env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unclosed"), "{e}");
    assert_eq!(
        expand_vars("$HOME ${HOME}$", &env).unwrap(),
        "$HOME /home/u$"
    );
}

#[test]
fn unknown_keys_are_errors_naming_the_key_and_its_line() {
    let entry = "{\"mcpServers\": {\n  \"a\": {\"command\": \"x\",\n    \"privacy\": {}}}}";
    let e = parse(entry, &env).unwrap_err().to_string();
    assert!(
        e.contains("unknown field `privacy`") && e.contains("line 3"),
        "{e}"
    );
    assert!(e.contains("`command`") && e.contains("`policy`"), "{e}");
    let top = "{\"mcpServers\": {},\n \"servers\": {}}";
    let e = parse(top, &env).unwrap_err().to_string();
    assert!(
        e.contains("unknown field `servers`") && e.contains("line 2"),
        "{e}"
    );
}

#[test]
fn other_clients_keys_are_accepted_and_named() {
    let text = r#"{"globalShortcut": "Ctrl+Space", "mcpServers": {"a": {"command": "x",
        "description": "d", "timeout": 60, "alwaysAllow": ["t"], "autoApprove": [],
        "envFile": ".env"}}}"#;
    assert_eq!(parse(text, &env).unwrap().len(), 1);
    let File { mcp_servers, .. } = serde_json::from_str(text).unwrap();
    assert_eq!(mcp_servers.unwrap()["a"].client_keys(), CLIENT_KEYS[..5]);
}

#[test]
fn bad_entries_say_what_to_write() {
    for (text, expected) in [
        (
            r#"{"mcpServers": {"a/b": {"command": "x"}}}"#,
            "server name",
        ),
        (r#"{"mcpServers": {"a": {}}}"#, "neither"),
        (
            r#"{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}"#,
            "both",
        ),
        (
            r#"{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}"#,
            "SSE",
        ),
        (
            r#"{"mcpServers": {"a": {"url": "file:///etc"}}}"#,
            "http://",
        ),
        (
            r#"{"mcpServers": {"a": {"command": "x", "policy": "maybe"}}}"#,
            "did not match any variant",
        ),
        (
            r#"{"mcpServers": {"a": {"type": "http", "command": "x"}}}"#,
            "does not match",
        ),
        ("[1]", "expected a map"),
        ("{\"mcpServers\": {", "not valid JSON"),
    ] {
        let e = parse(text, &env).unwrap_err().to_string();
        assert!(e.contains(expected), "{text}: {e}");
    }
    assert!(parse("{}", &env).unwrap().is_empty());
}

#[test]
fn upstream_tenants_follow_the_tenant_name_rule() {
    let file = |tenants: &str| {
        parse(
            &format!(r#"{{"mcpServers": {{"a": {{"command": "x", "tenants": {tenants}}}}}}}"#),
            &|_| None,
        )
    };
    assert!(file(r#"["sales", "ops-2"]"#).is_ok());
    let e = file(r#"["../x"]"#).unwrap_err().to_string();
    assert!(
        e.contains("upstream `a`") && e.contains("not a tenant name"),
        "{e}"
    );
}

#[test]
fn flow_rules_are_read_per_entry_with_the_files_default() {
    use crate::gateway::flow::{Otherwise, RuleSource};
    let text = r#"{
  "pii": {"restore_from": ["user"], "otherwise": "refuse"},
  "mcpServers": {
    "crm": {"command": "crm", "pii": {"restore_from": ["*"]}},
    "mail": {"command": "mail", "pii": {"restore_from": ["crm", "user", "unknown"]}},
    "search": {"command": "search"}
  }
}"#;
    let all = parse(text, &env).unwrap();
    let rule = |name: &str| all.iter().find(|u| u.name == name).unwrap().pii.clone();
    assert_eq!(rule("crm").restore_from, ["*"]);
    assert_eq!(rule("crm").otherwise, Otherwise::Keep, "keep unless told");
    assert_eq!(rule("mail").restore_from, ["crm", "user", "unknown"]);
    assert_eq!(rule("search").source, RuleSource::FileDefault);
    assert_eq!(rule("search").otherwise, Otherwise::Refuse);
    let none = parse(r#"{"mcpServers": {"a": {"command": "a"}}}"#, &env).unwrap();
    assert_eq!(none[0].pii.source, RuleSource::BuiltIn);
    assert_eq!(none[0].pii.restore_from, ["*"]);
}

#[test]
fn a_flow_rule_naming_an_unknown_server_origin_or_action_stops_the_start_at_its_line() {
    let with = |rule: &str| {
        format!(
            "{{\"mcpServers\": {{\n  \"crm\": {{\"command\": \"x\"}},\n  \"search\": {{\"command\": \"y\",\n    \"pii\": {rule}}}}}}}"
        )
    };
    for (rule, words) in [
        (r#"{"restore_from": ["crn"]}"#, "\"crn\" (line 4)"),
        (r#"{"restore_from": ["users"]}"#, "\"users\" (line 4)"),
        (
            r#"{"restore_from": ["user"], "otherwise": "drop"}"#,
            "unknown variant `drop`",
        ),
        (
            r#"{"restore_from": ["user"], "else": "keep"}"#,
            "unknown field `else`",
        ),
        (r#"{"otherwise": "keep"}"#, "missing field `restore_from`"),
    ] {
        let e = parse(&with(rule), &env).unwrap_err().to_string();
        assert!(e.contains(words) && e.contains("line 4"), "{rule}: {e}");
    }
    let e = parse(
        "{\"pii\": {\"restore_from\": [\"nobody\"]},\n \"mcpServers\": {\"a\": {\"command\": \"x\"}}}",
        &env,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("default rule") && e.contains("\"nobody\" (line 1)"),
        "{e}"
    );
}

#[test]
fn rules_need_tokens_and_say_which_entries_set_them() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ruled = write(
        "ruled.json",
        r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "pii": {"restore_from": ["user"]}}}}"#,
    );
    let e = read_for(&ruled, false).unwrap_err().to_string();
    assert!(
        e.contains(&ruled.display().to_string())
            && e.contains("(for `b`)")
            && e.contains("--pii-output tokenize"),
        "{e}"
    );
    assert_eq!(read_for(&ruled, true).unwrap().len(), 2);
    let by_default = write(
        "default.json",
        r#"{"pii": {"restore_from": ["user"]}, "mcpServers": {"a": {"command": "x"}, "b": {"command": "x"}}}"#,
    );
    let e = read_for(&by_default, false).unwrap_err().to_string();
    assert!(e.contains("(for `a`, `b`)"), "{e}");
    let plain = write("plain.json", r#"{"mcpServers": {"a": {"command": "x"}}}"#);
    assert_eq!(read_for(&plain, false).unwrap().len(), 1);
}

#[test]
fn an_entrys_problem_names_the_file_it_is_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("upstreams.json");
    std::fs::write(
        &path,
        "{\"mcpServers\": {\"a\": {\"command\": \"x\",\n \"pii\": {\"restore_from\": [\"usr\"]}}}}",
    )
    .unwrap();
    let e = read(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "the upstreams file {}: upstream `a`: ",
            path.display()
        )) && e.contains("\"usr\" (line 2)"),
        "{e}"
    );
}
