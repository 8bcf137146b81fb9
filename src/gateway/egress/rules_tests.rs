//! The rules: which entry a host falls under, and what that entry lets through.

use super::*;

fn host(s: &str) -> Host {
    Host::parse(s).unwrap()
}

fn rules(keys: &[&str]) -> EgressRules {
    EgressRules::new(keys.iter().map(|k| EgressEntry::new(*k)).collect()).unwrap()
}

fn key_for<'a>(rules: &'a EgressRules, h: &str) -> Option<&'a str> {
    rules.entry_for(&host(h)).map(|e| e.key.as_str())
}

#[test]
fn the_most_specific_key_wins() {
    let r = rules(&[
        "*",
        "*.example.org",
        "*.api.example.org",
        "v2.api.example.org",
        "10.0.0.5",
        "[2001:db8::1]",
    ]);
    assert_eq!(
        key_for(&r, "v2.api.example.org"),
        Some("v2.api.example.org")
    );
    assert_eq!(
        key_for(&r, "V2.API.example.org."),
        Some("v2.api.example.org")
    );
    assert_eq!(key_for(&r, "v3.api.example.org"), Some("*.api.example.org"));
    assert_eq!(
        key_for(&r, "a.b.api.example.org"),
        Some("*.api.example.org")
    );
    assert_eq!(key_for(&r, "api.example.org"), Some("*.example.org"));
    assert_eq!(
        key_for(&r, "example.org"),
        Some("*"),
        "*.domain is not the domain"
    );
    assert_eq!(key_for(&r, "badexample.org"), Some("*"), "a label boundary");
    assert_eq!(key_for(&r, "10.0.0.5"), Some("10.0.0.5"));
    assert_eq!(key_for(&r, "167772165"), Some("10.0.0.5"), "numeric form");
    assert_eq!(key_for(&r, "::ffff:10.0.0.5"), Some("10.0.0.5"), "mapped");
    assert_eq!(key_for(&r, "2001:DB8:0::1"), Some("[2001:db8::1]"));
    assert_eq!(key_for(&r, "10.0.0.6"), Some("*"));

    let no_star = rules(&["*.example.org", "api.github.com"]);
    assert_eq!(key_for(&no_star, "example.org"), None);
    assert_eq!(key_for(&no_star, "github.com"), None);
    assert_eq!(
        key_for(&no_star, "10.0.0.5"),
        None,
        "a wildcard holds names only"
    );
    let e = no_star.entry_or_refuse(&host("example.net")).unwrap_err();
    assert_eq!(e.rule, "host");
    assert_eq!(
        e.message,
        "egress: no entry for example.net: add \"example.net\" (or \"*\") to \"egress\" in the upstreams file"
    );
    assert!(EgressRules::default().is_empty() && !no_star.is_empty());
    assert_eq!(no_star.entries().len(), 2);
}

#[test]
fn keys_that_name_no_host_or_the_same_host_twice_are_refused() {
    for (key, words) in [
        ("", "it is empty"),
        ("*.*.example.org", "after \"*.\""),
        ("a.*.example.org", "\"*\" stands only alone"),
        ("*example.org", "\"*\" stands only alone"),
        ("**", "\"*\" stands only alone"),
        ("*.10.0.0.1", "not an address"),
        ("api.github.com:443", "a port is not part of a host"),
        ("https://api.github.com", "not an IPv6 address"),
        ("api.github.com/", "a host name is labels"),
        ("1.2.3.4.5", "not an IPv4 address"),
    ] {
        let e = EgressRules::new(vec![EgressEntry::new(key)]).unwrap_err();
        assert_eq!(e.key, key);
        assert!(e.problem.contains(words), "{key}: {}", e.problem);
    }
    for (a, b) in [
        ("api.example.org", "API.example.org."),
        ("127.0.0.1", "2130706433"),
        ("::1", "[::1]"),
        ("*.example.org", "*.EXAMPLE.org"),
    ] {
        let e = EgressRules::new(vec![EgressEntry::new(a), EgressEntry::new(b)]).unwrap_err();
        assert_eq!(e.key, b);
        assert!(
            e.problem.contains(&format!("same hosts as entry {a:?}")),
            "{}",
            e.problem
        );
    }
}

#[test]
fn an_entrys_invariants_hold_however_it_was_made() {
    let secret = |key: &str| {
        let mut e = EgressEntry::new(key);
        e.headers = vec![(
            HeaderName::from_static("authorization"),
            HeaderValue::from_static("Bearer s3cret"),
        )];
        e
    };
    let problem = |e: EgressEntry| EgressRules::new(vec![e]).unwrap_err().problem;
    assert!(EgressRules::new(vec![secret("api.github.com")]).is_ok());
    assert!(problem(secret("*")).contains("refused on \"*\" and \"*.domain\""));
    assert!(problem(secret("*.github.com")).contains("refused on \"*\" and \"*.domain\""));
    let mut plain = secret("api.github.com");
    plain.http = true;
    assert!(problem(plain).contains("\"http\": true do not go together"));
    let mut host_header = EgressEntry::new("a.org");
    host_header.headers = vec![(
        HeaderName::from_static("host"),
        HeaderValue::from_static("b.org"),
    )];
    assert!(problem(host_header).contains("the header \"host\" is one the server sets"));
    let mut open = EgressEntry::new("*");
    open.private = true;
    assert!(problem(open).contains("refused on \"*\""));
    let mut corp = EgressEntry::new("*.corp.internal");
    corp.private = true;
    assert!(
        EgressRules::new(vec![corp]).is_ok(),
        "a private domain is fine"
    );
    for (adjust, words) in [
        (
            (|e: &mut EgressEntry| e.ports = vec![]) as fn(&mut EgressEntry),
            "\"ports\" must list",
        ),
        (|e| e.ports = vec![443, 0], "\"ports\" must list"),
        (|e| e.methods = vec![], "\"methods\" lists no method"),
        (|e| e.paths = vec![], "\"paths\" lists no pattern"),
        (
            |e| e.paths = vec!["exports/*".into()],
            "must start with '/'",
        ),
        (|e| e.paths = vec!["/a b".into()], "visible ASCII"),
        (
            |e| e.policy.methods = vec![(Method::POST, Decision::Confirm)],
            "\"policy\" names POST, which \"methods\" does not list",
        ),
        (
            |e| e.policy.default = Decision::Plan,
            "\"plan\" is not offered",
        ),
    ] {
        let mut e = EgressEntry::new("a.org");
        adjust(&mut e);
        assert!(problem(e).contains(words), "{words}");
    }
}

#[test]
fn tenants_see_their_entries_and_the_unrestricted_ones() {
    let mut sales = EgressEntry::new("crm.internal");
    sales.tenants = Some(vec!["sales".into()]);
    let r = EgressRules::new(vec![EgressEntry::new("*"), sales]).unwrap();
    let keys =
        |r: &EgressRules| -> Vec<String> { r.entries().iter().map(|e| e.key.clone()).collect() };
    assert_eq!(keys(&r.for_tenant(Some("sales"))), ["*", "crm.internal"]);
    assert_eq!(keys(&r.for_tenant(Some("ops"))), ["*"]);
    assert_eq!(
        keys(&r.for_tenant(None)),
        ["*", "crm.internal"],
        "single tenant"
    );
    let ops = r.for_tenant(Some("ops"));
    assert_eq!(key_for(&ops, "crm.internal"), Some("*"), "patterns follow");
    assert_eq!(
        key_for(&r.for_tenant(Some("sales")), "crm.internal"),
        Some("crm.internal")
    );
}

#[test]
fn ports_and_the_scheme() {
    let e = EgressEntry::new("api.github.com");
    assert_eq!(e.origin(), "http:api.github.com");
    assert!(e.check_port(443, true).is_ok());
    let port = e.check_port(8443, true).unwrap_err();
    assert_eq!(
        (port.rule, port.key.as_deref()),
        ("port", Some("api.github.com"))
    );
    assert_eq!(
        port.message,
        "egress: port 8443 is not allowed by entry \"api.github.com\" (it allows 443): add it to \"ports\" in the upstreams file's egress entry"
    );
    let scheme = e.check_port(443, false).unwrap_err();
    assert_eq!(scheme.rule, "scheme");
    assert!(
        scheme.message.contains("set \"http\": true"),
        "{}",
        scheme.message
    );
    let mut plain = EgressEntry::new("10.0.0.5");
    (plain.http, plain.ports) = (true, vec![80, 8080]);
    assert!(plain.check_port(80, false).is_ok());
    assert!(plain.check_port(8080, true).is_ok(), "TLS is always fine");
    assert_eq!(plain.check_port(443, false).unwrap_err().rule, "port");
}

#[test]
fn methods_then_paths_then_the_policy() {
    let e = EgressEntry::new("api.github.com");
    assert_eq!(
        e.decide(&Method::GET, "/repos/x/y").unwrap(),
        Decision::Allow
    );
    assert_eq!(e.decide(&Method::HEAD, "/").unwrap(), Decision::Allow);
    let post = e.decide(&Method::POST, "/repos").unwrap_err();
    assert_eq!(post.rule, "method");
    assert_eq!(
        post.message,
        "egress: POST is not allowed by entry \"api.github.com\" (it allows GET, HEAD): add it to \"methods\" in the upstreams file's egress entry"
    );
    let mut crm = EgressEntry::new("crm.internal");
    crm.methods = vec![Method::GET, Method::POST, Method::DELETE];
    crm.paths = vec!["/api/*".into(), "/health".into()];
    crm.policy = MethodPolicy {
        default: Decision::Allow,
        methods: vec![
            (Method::POST, Decision::Confirm),
            (Method::DELETE, Decision::Deny),
        ],
    };
    EgressRules::new(vec![crm.clone()]).unwrap();
    assert_eq!(
        crm.decide(&Method::GET, "/api/a/b?x=1").unwrap(),
        Decision::Allow
    );
    assert_eq!(
        crm.decide(&Method::GET, "/health").unwrap(),
        Decision::Allow
    );
    assert_eq!(
        crm.decide(&Method::POST, "/api/leads").unwrap(),
        Decision::Confirm
    );
    let denied = crm.decide(&Method::DELETE, "/api/leads/1").unwrap_err();
    assert_eq!(denied.rule, "policy");
    assert!(
        denied
            .message
            .contains("denied by the policy of entry \"crm.internal\"")
    );
    for path in ["/healthz", "/ap", "/API/x", "/healthx"] {
        let e = crm.decide(&Method::GET, path).unwrap_err();
        assert_eq!(e.rule, "path", "{path}");
        assert!(
            e.message.contains("(it allows \"/api/*\", \"/health\")")
                && e.message.contains("add a pattern for it to \"paths\""),
            "{}",
            e.message
        );
    }
    let mut deny_all = EgressEntry::new("a.org");
    deny_all.policy.default = Decision::Deny;
    assert_eq!(
        deny_all.decide(&Method::GET, "/").unwrap_err().rule,
        "policy"
    );
}

#[test]
fn paths_that_climb_are_refused_however_encoded() {
    let mut e = EgressEntry::new("data.example.org");
    e.paths = vec!["/exports/*".into()];
    for ok in [
        "/exports/a.csv",
        "/exports/dir/b.csv?x=../y",
        "/exports/.well-known",
        "/exports/...",
        "/exports/a..b",
        "/exports/group%2Fproject",
        "/exports/%2e%2e.csv",
        "/exports/a%20b",
    ] {
        assert!(e.decide(&Method::GET, ok).is_ok(), "{ok}");
    }
    for bad in [
        "/exports/../admin",
        "/exports/./a",
        "/exports/%2e%2e/admin",
        "/exports/%2E%2e/admin",
        "/exports/.%2e/admin",
        "/exports/..%2fadmin",
        "/exports/..%2Fadmin",
        "/exports/a%2f..%2f..%2fadmin",
        "/exports/..%5cadmin",
        "/exports/..\\admin",
        "/exports/..;/admin",
        "/exports/%252e%252e/admin",
        "/exports/%25252e%25252e/admin",
        "/exports/..",
        "/exports/a#frag",
        "/exports/a b",
        "/exports/\u{e9}",
        "exports/a",
        "*",
        "",
    ] {
        let r = e.decide(&Method::GET, bad).unwrap_err();
        assert_eq!(r.rule, "path", "{bad}");
    }
    let r = e.decide(&Method::GET, "/exports/%2e%2e/admin").unwrap_err();
    assert!(r.message.contains("'..' segment"), "{}", r.message);
}

#[test]
fn debug_never_shows_a_header_value() {
    let mut e = EgressEntry::new("api.github.com");
    let mut value = HeaderValue::from_static("Bearer ghp_s3cret");
    value.set_sensitive(true);
    e.headers = vec![(HeaderName::from_static("authorization"), value)];
    let rules = EgressRules::new(vec![e.clone()]).unwrap();
    for shown in [format!("{e:?}"), format!("{rules:?}"), format!("{e:#?}")] {
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("authorization"), "{shown}");
    }
}
