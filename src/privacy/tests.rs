use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::pii::PiiEngine;

fn privacy(tokenize: bool) -> Privacy {
    Privacy::new(Arc::new(PiiEngine::new([7; 32], 100)), tokenize)
}

#[test]
fn every_string_of_a_response_is_tokenized_at_any_depth() {
    let p = privacy(true);
    let shown = p.json(json!({
        "path": "ann@example.com.csv",
        "nested": [{"note": "call +1 (415) 555-0134"}, "bob@example.com"],
        "size": 4111111111111111u64,
        "ok": true,
    }));
    let text = shown.value().to_string();
    assert!(
        !text.contains("@example.com") && !text.contains("555-0134"),
        "{text}"
    );
    assert_eq!(text.matches("[EMAIL_").count(), 2, "{text}");
    // Numbers and keys are the response's own: the schema holds.
    assert_eq!(shown.value()["size"], json!(4111111111111111u64));
    assert_eq!(shown.value()["ok"], json!(true));
}

#[test]
fn a_tokenized_text_passes_again_unchanged() {
    let p = privacy(true);
    let once = p.text("mail ann@example.com or 4111 1111 1111 1111".into());
    assert_eq!(p.text(once.to_string()), once);
}

#[test]
fn the_servers_own_strings_pass_unchanged() {
    let p = privacy(true);
    for own in [
        "sha256:095cf5fc1d9d0a6a7bb0f3f5f5d3a9a0c7f1e2d3c4b5a69788796a5b4c3d2e1f",
        "code-execution-mcp-sandbox:data-a704664222b99649",
        "20.10.24",
        "1.41",
        "workspace:///reports/q3.csv",
        "ZeroDivisionError",
    ] {
        assert_eq!(p.text(own.into()), own);
    }
}

#[test]
fn binary_fields_are_kept_and_the_rest_tokenized() {
    let p = privacy(true);
    // Base64 of bytes that happen to spell an email once decoded is still base64 here.
    let shown = p.json_keeping(
        json!({"filename": "ann@example.com.bin", "content": "YW5uQGV4YW1wbGUuY29t"}),
        &["content"],
    );
    assert_eq!(shown.value()["content"], json!("YW5uQGV4YW1wbGUuY29t"));
    assert!(
        shown.value()["filename"]
            .as_str()
            .unwrap()
            .starts_with("[EMAIL_")
    );
}

#[test]
fn with_tokenizing_off_everything_passes_and_revealed_always_does() {
    let p = privacy(false);
    let value = json!({"to": "ann@example.com"});
    assert_eq!(p.json(value.clone()).value(), &value);
    assert_eq!(privacy(true).revealed(value.clone()).value(), &value);
    assert_eq!(p.text("ann@example.com".into()), "ann@example.com");
}

#[test]
fn errors_and_attachments_are_tokenized_and_pictures_are_not() {
    let p = privacy(true);
    let error = p.error("cannot read ann@example.com.csv: not found");
    let failure = p.failure("cannot read bob@example.com.csv");
    for reply in [&error, &failure] {
        let text = serde_json::to_string(reply.result()).unwrap();
        assert!(!text.contains("@example.com"), "{text}");
        assert_eq!(reply.result().is_error, Some(true));
    }
    let png = vec![0x89, b'P', b'N', b'G', b'4', b'1', b'1', b'1'];
    let reply = p.structured(
        &json!({"files": ["cy@example.com.csv"]}),
        false,
        vec![
            Attachment::Png(png.clone()),
            Attachment::Link(Link {
                uri: "workspace:///dee@example.com.csv".into(),
                name: "dee@example.com.csv".into(),
                mime_type: "text/csv".into(),
                size: 3,
                description: Some("for eve@example.com".into()),
            }),
        ],
    );
    let text = serde_json::to_string(reply.result()).unwrap();
    assert!(!text.contains("@example.com"), "{text}");
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&png);
    assert!(
        text.contains(&encoded),
        "the picture's bytes are as they were: {text}"
    );
    assert_eq!(reply.result().is_error, Some(false));
}

#[test]
fn a_cut_text_is_tokenized_with_what_follows_the_cut() {
    let p = privacy(true);
    let shown = p.text_cut("mail margarethe.vonstrelitz@example.org now".into(), 12);
    assert!(
        shown.starts_with("mail [EMAIL_") && shown.ends_with('…'),
        "{shown}"
    );
    assert_eq!(p.text_cut("short".into(), 12), "short");
}

/// The roads other than an execution's outcome (progress lines, task statuses, errors,
/// resources: [`Privacy::text`] and [`Privacy::text_cut`]) see an email glued to other text
/// as the outcome does: its token, whatever the length before it, cut or not.
#[test]
fn an_email_glued_to_text_is_tokenized_on_every_road() {
    let p = privacy(true);
    let email = "margarethe.vonstrelitz@example-mail.org";
    let lines = [
        format!("id={}{email} end", "q".repeat(80)),
        format!("{}{email}", "x".repeat(60)),
        format!("{}{email} end", "x".repeat(150)),
    ];
    for line in lines {
        let shown = [
            p.text(line.clone()),
            p.text_cut(line.clone(), 200), // as a progress line is cut
            p.text_cut(line.clone(), line.len() - 4),
        ];
        for shown in shown {
            assert!(
                shown.contains("[EMAIL_") && !shown.contains("margarethe"),
                "{shown}"
            );
        }
    }
}

#[test]
fn keys_have_the_engines_one_policy() {
    let p = privacy(true);
    let engine = PiiEngine::new([7; 32], 100);
    // A map keyed by personal data, at the top and deeper down; field names stay.
    let value = json!({
        "ann@example.com": "visits",
        "by_user": {"bob@example.com": "3 visits", "path": "a.csv"},
    });
    let shown = p.json(value.clone()).value().clone();
    let text = shown.to_string();
    assert!(!text.contains("@example.com"), "{text}");
    assert_eq!(
        shown,
        engine.sanitize_json(&value, &crate::pii::Origin::Sandbox),
        "a response and sanitize_json show keys (and strings) alike"
    );
    let by_user = shown["by_user"].as_object().unwrap();
    assert!(by_user.contains_key("path"), "{text}");
    assert!(by_user.keys().any(|k| k.starts_with("[EMAIL_")), "{text}");
    // Two keys that become one token stay apart, on both paths.
    let token = engine.sanitize("cy@example.com").text;
    let colliding = json!({"cy@example.com": 1, token.clone(): 2});
    let shown = p.json(colliding.clone()).value().clone();
    assert_eq!(shown.as_object().unwrap().len(), 2, "{shown}");
    assert_eq!(
        shown,
        engine.sanitize_json(&colliding, &crate::pii::Origin::Sandbox)
    );
}

#[test]
fn the_roads_carry_shown_texts() {
    use rmcp::model::ErrorCode;
    let p = privacy(true);
    let error = p.refusal(ErrorCode::INVALID_PARAMS, "no file ann@example.com.csv");
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(error.message.starts_with("no file [EMAIL_"), "{error:?}");
    let uri = p
        .text("bob@example.com.csv".into())
        .framed(|path| format!("workspace:///{path}"));
    assert!(uri.starts_with("workspace:///[EMAIL_"), "{uri}");
    let resource = resource(uri.clone(), p.text("bob@example.com.csv".into()));
    assert!(
        !serde_json::to_string(&resource)
            .unwrap()
            .contains("@example")
    );
    assert_eq!(resource_updated(uri.clone()).uri, uri.as_str());
    assert_eq!(Shown::fixed("running").as_str(), "running");
}
