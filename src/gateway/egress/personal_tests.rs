use super::*;
use crate::gateway::flow::rule;
use crate::pii::PiiKind;

fn engine() -> PiiEngine {
    PiiEngine::new([7; 32], 100)
}

fn entry(from: &[&str], otherwise: Otherwise) -> EgressEntry {
    let mut entry = EgressEntry::new("api.example.org");
    entry.pii = rule(from, otherwise);
    entry
}

#[test]
fn tokens_in_the_path_and_query_are_restored_as_the_rule_allows_and_the_rest_is_kept() {
    let pii = engine();
    let user = pii.sanitize_from("bo@example.com", &Origin::User).text;
    let crm = (pii.sanitize_from("ann@example.com", &Origin::upstream("crm", "rows"))).text;
    let encoded = |t: &str| t.replace('[', "%5B").replace(']', "%5D");
    let path = format!(
        "/people/{}/x%2Fy?q={}&c={crm}&plain=a+b%20c&flag",
        encoded(&user),
        encoded(&user)
    );
    let entry = entry(&["user"], Otherwise::Keep);
    let mut restoring = Restoring::new(&pii, &entry.pii);
    let out = restoring.path_and_query(&path).expect("changed");
    assert_eq!(
        out,
        format!("/people/bo@example.com/x%2Fy?q=bo%40example.com&c={crm}&plain=a+b%20c&flag")
    );
    let (tokens, refused) = restoring.finish(&entry);
    assert!(refused.is_none(), "kept, not refused");
    assert_eq!(
        (tokens.restored[0].kind.as_str(), tokens.restored[0].count),
        ("EMAIL", 2)
    );
    assert_eq!(tokens.withheld[0].origin, "crm/rows");

    let mut untouched = Restoring::new(&pii, &entry.pii);
    assert_eq!(untouched.path_and_query("/a/%5Bnot-a-token%5D?x=1"), None);
    let mut verb = Restoring::new(&pii, &entry.pii);
    let custom = format!("/v1/{}:send", encoded(&user));
    assert_eq!(
        verb.path_and_query(&custom).unwrap(),
        "/v1/bo@example.com:send"
    );
}

#[test]
fn a_refusing_rule_refuses_a_request_with_a_token_it_withholds_and_names_no_value() {
    let pii = engine();
    let crm = (pii.sanitize_from("ann@example.com", &Origin::upstream("crm", "rows"))).text;
    let entry = entry(&["user"], Otherwise::Refuse);
    let mut restoring = Restoring::new(&pii, &entry.pii);
    let mut headers = HeaderMap::new();
    headers.insert("x-customer", HeaderValue::from_str(&crm).unwrap());
    restoring.headers(&mut headers);
    assert_eq!(headers["x-customer"], crm.as_str(), "kept");
    let (tokens, refused) = restoring.finish(&entry);
    let refused = refused.expect("refused");
    assert_eq!(tokens.withheld.len(), 1);
    assert_eq!(refused.rule, "pii");
    assert!(
        refused.message.contains("EMAIL from crm/rows") && refused.message.contains("\"pii\""),
        "{}",
        refused.message
    );
    assert!(!refused.message.contains("ann@example.com"));

    let user = pii.sanitize_from("bo@example.com", &Origin::User).text;
    let mut restoring = Restoring::new(&pii, &entry.pii);
    headers.insert("x-customer", HeaderValue::from_str(&user).unwrap());
    restoring.headers(&mut headers);
    assert_eq!(headers["x-customer"], "bo@example.com");
    assert!(restoring.finish(&entry).1.is_none());
}

#[test]
fn a_json_body_gets_its_values_escaped_and_keeps_its_numbers_and_spacing() {
    let pii = engine();
    let secret = pii.tokenize_value(PiiKind::ApiKey, "pa\"ss\\wo\nrd");
    let body = format!(
        "{{\"key\":  \"{secret}\", \"big\": 123456789012345678901234567890, \"{secret}\": [1.50]}}"
    );
    let rule = FlowRule::default();
    let mut restoring = Restoring::new(&pii, &rule);
    let out = restoring
        .body(Some("application/json; charset=utf-8"), body.as_bytes())
        .expect("changed");
    let out = std::str::from_utf8(&out).unwrap();
    assert!(
        out.contains("\"big\": 123456789012345678901234567890, "),
        "{out}"
    );
    assert!(out.contains("[1.50]"), "{out}");
    let v: Value = serde_json::from_str(out).expect("still JSON");
    assert_eq!(v["key"], "pa\"ss\\wo\nrd");

    let mut text = Restoring::new(&pii, &rule);
    let plain = text.body(Some("text/plain"), format!("key={secret}").as_bytes());
    assert_eq!(plain.unwrap(), "key=pa\"ss\\wo\nrd".as_bytes());
    assert_eq!(text.body(None, &[0xff, 0xfe, b'[']), None, "not text");
}

#[test]
fn a_form_body_is_restored_pair_by_pair_and_encoded() {
    let pii = engine();
    let user = pii.sanitize_from("bo@example.com", &Origin::User).text;
    let rule = FlowRule::default();
    let mut restoring = Restoring::new(&pii, &rule);
    let body = format!(
        "to={}&subject=hi+there",
        user.replace('[', "%5B").replace(']', "%5D")
    );
    let out = restoring
        .body(Some("application/x-www-form-urlencoded"), body.as_bytes())
        .unwrap();
    assert_eq!(out, "to=bo%40example.com&subject=hi+there".as_bytes());
}

#[test]
fn responses_enter_tokenized_as_json_form_or_text_and_binary_is_refused() {
    let pii = engine();
    let origin = Origin::http("api.example.org");
    let json = br#"{"people": [{"email": "ann@example.com", "id": 123456789012345678}]}"#;
    let out = tokenize_response(&pii, &origin, Some("application/json"), json).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let token = v["people"][0]["email"].as_str().unwrap();
    assert!(token.starts_with("[EMAIL_"), "{v}");
    assert_eq!(v["people"][0]["id"], 123456789012345678u64);
    let restored = pii.restore_where(token, |o| o == [origin.clone()]);
    assert_eq!(restored.text, "ann@example.com", "kept with its origin");

    let huge = br#"{"n": 123456789012345678901234567890, "e": "ann@example.com"}"#;
    let out = tokenize_response(&pii, &origin, Some("application/json"), huge).unwrap();
    let out = std::str::from_utf8(&out).unwrap();
    assert!(
        out.contains("123456789012345678901234567890") && !out.contains('@'),
        "{out}"
    );

    let form = b"email=ann%40example.com&n=1";
    let out = tokenize_response(
        &pii,
        &origin,
        Some("application/x-www-form-urlencoded"),
        form,
    );
    let out = String::from_utf8(out.unwrap().to_vec()).unwrap();
    assert!(
        out.starts_with("email=%5BEMAIL_") && out.ends_with("&n=1"),
        "{out}"
    );

    let csv = b"name,email\nann,ann@example.com\n";
    let out = tokenize_response(&pii, &origin, Some("text/csv"), csv).unwrap();
    assert!(!String::from_utf8_lossy(&out).contains('@'));

    let escaped = br#"{"n": 1e400, "e": "ann\u0040example.com", "nested": [[["x"]]]"#;
    let out = tokenize_response(&pii, &origin, Some("application/json"), escaped).unwrap();
    assert!(
        !String::from_utf8_lossy(&out).contains("example.com"),
        "not JSON, strings decoded"
    );

    let utf16 = "ann@example.com"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect::<Vec<u8>>();
    let why = tokenize_response(&pii, &origin, Some("text/plain"), &utf16).unwrap_err();
    assert!(why.contains("NUL"), "{why}");
    let why = tokenize_response(
        &pii,
        &origin,
        Some("text/plain; charset=\"UTF-16LE\""),
        b"ok",
    )
    .unwrap_err();
    assert!(why.contains("utf-16le"), "{why}");
    assert!(tokenize_response(&pii, &origin, Some("text/plain; charset=UTF-8"), b"ok").is_ok());

    let why = tokenize_response(&pii, &origin, Some("image/png"), &[0x89, b'P', 0xff]).unwrap_err();
    assert!(why.contains("image/png") && why.contains("binary"), "{why}");
    assert_eq!(
        tokenize_response(&pii, &origin, None, b"").unwrap(),
        Bytes::new()
    );
}

#[test]
fn an_entry_enters_tokenized_when_some_rule_withholds_its_values() {
    let mut open = EgressEntry::new("open.example.org");
    open.pii = rule(&["*"], Otherwise::Keep);
    let mut strict = EgressEntry::new("api.example.org");
    strict.pii = rule(&["user", "http:open.example.org"], Otherwise::Refuse);
    let rules = EgressRules::new(vec![open.clone(), strict.clone()]).unwrap();
    let flow = FlowRules::new([open.pii.clone(), strict.pii.clone()]);
    let pii = EgressPii::new(Arc::new(engine()), &rules, &flow);
    assert!(!pii.tokenizes(&open), "every rule names it");
    assert!(
        pii.tokenizes(&strict),
        "the strict entry's rule withholds its own values"
    );
}
