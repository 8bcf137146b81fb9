//! The `egress` object: what it accepts, its defaults, what it refuses and how it says so.

use http::Method;

use crate::gateway::egress::rules::{EgressEntry, Host};
use crate::gateway::flow::{Otherwise, RuleSource};
use crate::gateway::policy::Decision;
use crate::gateway::upstreams_file::{UpstreamsFile, parse_file, read_file, read_file_for};

fn env(name: &str) -> Option<String> {
    match name {
        "GITHUB_TOKEN" => Some("ghp_s3cret".into()),
        "BROKEN" => Some("a\r\nX-Injected: 1".into()),
        _ => None,
    }
}

fn file(text: &str) -> UpstreamsFile {
    parse_file(text, &env).unwrap()
}

fn error(text: &str) -> String {
    parse_file(text, &env).unwrap_err().to_string()
}

fn entry<'a>(f: &'a UpstreamsFile, key: &str) -> &'a EgressEntry {
    (f.egress.entries().iter())
        .find(|e| e.key == key)
        .unwrap_or_else(|| panic!("no entry {key}"))
}

#[test]
fn a_header_is_a_secret_when_a_variable_fills_it_or_its_name_says_credentials() {
    let f = file(
        r#"{"egress": {"api.github.com": {"headers": {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "X-Team": "${GITHUB_TOKEN}",
    "Private-Token": "written-in-the-file",
    "Authorization": "Basic written-too"
}}}}"#,
    );
    let sensitive: Vec<(&str, bool)> = (entry(&f, "api.github.com").headers.iter())
        .map(|(n, v)| (n.as_str(), v.is_sensitive()))
        .collect();
    assert_eq!(
        sensitive,
        [
            ("accept", false),
            ("authorization", true),
            ("private-token", true),
            ("x-github-api-version", false),
            ("x-team", true)
        ]
    );
}

#[test]
fn reads_the_issues_example_with_every_key() {
    let f = file(
        r#"{
  "mcpServers": {"crm": {"command": "crm"}},
  "egress": {
    "api.github.com": {"methods": ["GET"], "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}},
    "data.example.org": {"paths": ["/exports/*"], "ports": [443, 8443]},
    "crm.internal": {"methods": ["GET", "POST"], "private": true, "tenants": ["sales"],
                     "policy": {"default": "allow", "methods": {"POST": "confirm"}},
                     "pii": {"restore_from": ["user", "crm"], "otherwise": "refuse"}},
    "plain.example.org": {"http": true, "ports": [80]},
    "*": {}
  }
}"#,
    );
    assert_eq!(f.servers.len(), 1);
    let gh = entry(&f, "api.github.com");
    assert_eq!(gh.methods, [Method::GET]);
    assert_eq!(gh.headers.len(), 1);
    assert_eq!(gh.headers[0].0, "authorization");
    assert_eq!(gh.headers[0].1, "Bearer ghp_s3cret");
    assert!(gh.headers[0].1.is_sensitive());
    assert_eq!(entry(&f, "data.example.org").paths, ["/exports/*"]);
    assert_eq!(entry(&f, "data.example.org").ports, [443, 8443]);
    let crm = entry(&f, "crm.internal");
    assert!(crm.private);
    assert_eq!(crm.tenants.as_deref(), Some(&["sales".to_string()][..]));
    assert_eq!(crm.policy.decide(&Method::POST), Decision::Confirm);
    assert_eq!(crm.policy.decide(&Method::GET), Decision::Allow);
    assert_eq!(crm.pii.restore_from, ["user", "crm"]);
    assert_eq!(crm.pii.otherwise, Otherwise::Refuse);
    assert!(entry(&f, "plain.example.org").http);
    let host = |s: &str| Host::parse(s).unwrap();
    let key = |s: &str| f.egress.entry_for(&host(s)).map(|e| e.key.clone());
    assert_eq!(key("API.github.com").as_deref(), Some("api.github.com"));
    assert_eq!(key("example.net").as_deref(), Some("*"));
    assert!(
        !format!("{f:?}").contains("ghp_s3cret"),
        "Debug of the file"
    );
}

#[test]
fn an_empty_entry_takes_every_default() {
    let f = file(r#"{"egress": {"api.example.org": {}}}"#);
    assert!(f.servers.is_empty(), "a file with only egress is valid");
    let e = entry(&f, "api.example.org");
    let d = EgressEntry::new("api.example.org");
    assert_eq!(e.ports, [443]);
    assert!(!e.http && !e.private);
    assert_eq!(e.methods, [Method::GET, Method::HEAD]);
    assert_eq!(e.paths, ["*"]);
    assert!(e.headers.is_empty() && e.tenants.is_none());
    assert_eq!(e.policy, d.policy);
    assert_eq!(e.pii, d.pii);
    assert_eq!(e.pii.source, RuleSource::BuiltIn);
    assert!(file("{}").egress.is_empty());
    assert!(file(r#"{"egress": {}}"#).egress.is_empty());
    let one = file(r#"{"egress": {"a.org": {"policy": "confirm"}}}"#);
    assert_eq!(entry(&one, "a.org").policy.default, Decision::Confirm);
}

#[test]
fn unknown_keys_stop_the_start_naming_the_key_the_accepted_ones_and_the_line() {
    let e =
        error("{\"egress\": {\n  \"a.org\": {\"methods\": [\"GET\"],\n    \"method\": \"POST\"}}}");
    assert!(
        e.contains("unknown field `method`") && e.contains("line 3"),
        "{e}"
    );
    for accepted in [
        "ports", "http", "methods", "paths", "headers", "private", "tenants", "policy", "pii",
    ] {
        assert!(e.contains(&format!("`{accepted}`")), "{accepted}: {e}");
    }
    let e = error("{\"egress\": {\"a.org\": {}},\n \"egres\": {}}");
    assert!(
        e.contains("unknown field `egres`") && e.contains("line 2"),
        "{e}"
    );
    assert!(e.contains("docs/egress.md"), "{e}");
    let e = error("{\"egress\": {\n \"a.org\": {\"ports\": [65536]}}}");
    assert!(e.contains("65536") && e.contains("line 2"), "{e}");
    let e = error(
        "{\"egress\": {\n \"a.org\": {\"pii\": {\"restore_from\": [\"user\"], \"else\": 1}}}}",
    );
    assert!(
        e.contains("unknown field `else`") && e.contains("line 2"),
        "{e}"
    );
}

#[test]
fn every_refusal_of_an_entry_names_it_its_line_and_what_to_write() {
    let with =
        |value: &str| format!("{{\"egress\": {{\n  \"a.org\": {{}},\n  \"KEY\": {value}}}}}");
    for (key, value, words) in [
        (
            "*.a.org",
            r#"{"headers": {"X-Key": "k"}}"#,
            "refused on \"*\" and \"*.domain\"",
        ),
        (
            "*",
            r#"{"headers": {"X-Key": "k"}}"#,
            "refused on \"*\" and \"*.domain\"",
        ),
        (
            "b.org",
            r#"{"http": true, "headers": {"X-Key": "k"}}"#,
            "do not go together",
        ),
        ("*", r#"{"private": true}"#, "refused on \"*\""),
        ("b.org", r#"{"ports": [0]}"#, "\"ports\" must list"),
        ("b.org", r#"{"ports": []}"#, "\"ports\" must list"),
        ("b.org", r#"{"methods": []}"#, "lists no method"),
        (
            "b.org",
            r#"{"methods": ["get"]}"#,
            "as HTTP sends it: \"GET\"",
        ),
        ("b.org", r#"{"methods": ["G T"]}"#, "not an HTTP method"),
        ("b.org", r#"{"methods": ["CONNECT"]}"#, "CONNECT is refused"),
        ("b.org", r#"{"methods": ["TRACE"]}"#, "TRACE is refused"),
        ("b.org", r#"{"paths": []}"#, "lists no pattern"),
        (
            "b.org",
            r#"{"paths": ["exports/*"]}"#,
            "must start with '/'",
        ),
        (
            "b.org",
            r#"{"policy": "plan"}"#,
            "\"plan\" is not offered for HTTP",
        ),
        (
            "b.org",
            r#"{"policy": {"methods": {"GET": "plan"}}}"#,
            "\"plan\" is not offered",
        ),
        (
            "b.org",
            r#"{"policy": {"default": "plan"}}"#,
            "\"plan\" is not offered",
        ),
        (
            "b.org",
            r#"{"policy": "maybe"}"#,
            "use \"allow\", \"confirm\" or \"deny\"",
        ),
        (
            "b.org",
            r#"{"policy": {"tools": {"x": "deny"}}}"#,
            "write \"methods\", not \"tools\"",
        ),
        (
            "b.org",
            r#"{"policy": {"default": "allow", "hosts": {}}}"#,
            "unknown key \"hosts\"",
        ),
        ("b.org", r#"{"policy": 1}"#, "\"policy\" is \"allow\""),
        (
            "b.org",
            r#"{"policy": {"methods": {"POST": "confirm"}}}"#,
            "names POST, which \"methods\" does not list",
        ),
        ("b.org", r#"{"tenants": ["../x"]}"#, "not a tenant name"),
        (
            "b.org",
            r#"{"headers": {"X Key": "k"}}"#,
            "not a header name",
        ),
        (
            "b.org",
            r#"{"headers": {"X-Key": "a", "x-key": "b"}}"#,
            "given twice",
        ),
        (
            "b.org",
            r#"{"headers": {"Host": "c.org"}}"#,
            "one the server sets itself",
        ),
        (
            "b.org",
            r#"{"headers": {"X-Key": "${NOPE}"}}"#,
            "NOPE is not set",
        ),
        (
            "b.org",
            r#"{"pii": {"restore_from": ["http:c.org"]}}"#,
            "\"http:c.org\"",
        ),
        ("b.org:443", "{}", "a port is not part of a host"),
        ("*.*.org", "{}", "after \"*.\""),
        ("a.org.", "{}", "same hosts as entry \"a.org\""),
    ] {
        let e = error(&with(value).replace("KEY", key));
        assert!(
            e.contains(&format!("egress entry {key:?} (line 3): ")) && e.contains(words),
            "{key} {value}: {e}"
        );
    }
}

#[test]
fn a_header_value_never_shows_in_an_error() {
    let e = error(r#"{"egress": {"b.org": {"headers": {"Authorization": "Bearer ${BROKEN}"}}}}"#);
    assert!(e.contains("line break") && !e.contains("X-Injected"), "{e}");
    let e = error(r#"{"egress": {"*": {"headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}"#);
    assert!(!e.contains("ghp_s3cret"), "{e}");
}

#[test]
fn flow_rules_name_entries_as_http_key_both_ways() {
    let text = r#"{
  "pii": {"restore_from": ["user"]},
  "mcpServers": {
    "crm": {"command": "crm", "pii": {"restore_from": ["http:api.github.com", "http:*"]}},
    "mail": {"command": "mail"}
  },
  "egress": {
    "api.github.com": {"pii": {"restore_from": ["crm", "http:*", "user"], "otherwise": "refuse"}},
    "*": {},
    "plain.org": {"pii": {"restore_from": ["*"]}}
  }
}"#;
    let f = file(text);
    let crm = f.servers.iter().find(|s| s.name == "crm").unwrap();
    assert_eq!(crm.pii.restore_from, ["http:api.github.com", "http:*"]);
    assert_eq!(
        entry(&f, "api.github.com").pii.restore_from,
        ["crm", "http:*", "user"]
    );
    let any = entry(&f, "*");
    assert_eq!(any.origin(), "http:*");
    assert_eq!(
        any.pii.source,
        RuleSource::FileDefault,
        "the file's default applies"
    );
    assert_eq!(any.pii.restore_from, ["user"]);
    assert_eq!(entry(&f, "plain.org").pii.source, RuleSource::Entry);

    let unknown = "{\"mcpServers\": {\"crm\": {\"command\": \"x\",\n \"pii\": {\"restore_from\": [\"http:api.github.com\"]}}},\n \"egress\": {\"api.github.co\": {}}}";
    let e = error(unknown);
    assert!(
        e.contains("\"http:api.github.com\" (line 2)") && e.contains("http:api.github.co)"),
        "{e}"
    );
    let e = error("{\"pii\": {\"restore_from\": [\"http:x.org\"]}}");
    assert!(
        e.contains("default rule") && e.contains("\"http:x.org\""),
        "{e}"
    );
    let e = error("{\"egress\": {\"a.org\": {\"pii\": {\"restore_from\": [\"a.org\"]}}}}");
    assert!(
        e.contains("\"a.org\"") && e.contains("http:KEY"),
        "a bare key is not an origin: {e}"
    );
}

#[test]
fn rules_on_entries_need_tokens_and_an_entrys_problem_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("upstreams.json");
    std::fs::write(
        &path,
        r#"{"egress": {"a.org": {"pii": {"restore_from": ["user"]}}, "b.org": {}}}"#,
    )
    .unwrap();
    let e = read_file_for(&path, false).unwrap_err().to_string();
    assert!(
        e.contains("(for `http:a.org`)") && e.contains("--pii-output tokenize"),
        "{e}"
    );
    assert_eq!(
        read_file_for(&path, true).unwrap().egress.entries().len(),
        2
    );
    assert!(
        crate::gateway::upstreams_file::read_for(&path, true)
            .unwrap()
            .is_empty()
    );
    std::fs::write(
        &path,
        "{\"egress\": {\n \"a.org\": {\"policy\": \"plan\"}}}",
    )
    .unwrap();
    let e = read_file(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "the upstreams file {}: egress entry \"a.org\" (line 2): ",
            path.display()
        )),
        "{e}"
    );
}

#[test]
fn too_many_entries_are_refused() {
    let keys: Vec<String> = (0..=super::MAX_EGRESS_ENTRIES)
        .map(|i| format!("\"h{i}.example.org\": {{}}"))
        .collect();
    let e = error(&format!("{{\"egress\": {{{}}}}}", keys.join(",")));
    assert!(
        e.contains("1025 egress entries") && e.contains("*.domain"),
        "{e}"
    );
}

#[test]
fn the_line_of_a_key_is_found_inside_egress_only() {
    let text = "{\"mcpServers\": {\"a.org\": {\"command\": \"x\"}},\n\"egress\": {\"b.org\": {},\n  \"a.org\": {}}}";
    assert_eq!(super::line_of_key(text, "a.org"), Some(3));
    assert_eq!(super::line_of_key(text, "b.org"), Some(2));
    assert_eq!(super::line_of_key(text, "c.org"), None);
}
