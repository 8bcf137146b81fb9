//! What a tool result becomes for sandbox code: `structuredContent` when the upstream gives
//! it; else the text, parsed as JSON when it is JSON; images, audio and resources as tagged
//! objects the harness turns into `ToolContent` values (with `.save(path)`); several contents
//! as a list. An `isError` result is an error carrying the upstream's text.

use serde_json::{Value, json};

/// The key that marks a content object for the harness.
pub const CONTENT_TAG: &str = "__cem_content__";

/// The value for sandbox code, or the upstream's error message.
pub fn for_sandbox(result: &Value) -> Result<Value, String> {
    let contents: Vec<&Value> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text: Vec<&str> = contents
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect();
        return Err(if text.is_empty() {
            "the tool reported an error without a message".into()
        } else {
            text.join("\n")
        });
    }
    if let Some(structured) = result.get("structuredContent") {
        return Ok(structured.clone());
    }
    let mut values: Vec<Value> = contents.iter().map(|c| content(c)).collect();
    Ok(match values.len() {
        0 => Value::Null,
        1 => values.pop().expect("one value"),
        _ => Value::Array(values),
    })
}

fn content(c: &Value) -> Value {
    let s = |k: &str| c.get(k).and_then(Value::as_str);
    match s("type") {
        Some("text") => {
            let text = s("text").unwrap_or_default();
            match serde_json::from_str::<Value>(text) {
                Ok(v) if looks_like_json(text) => v,
                _ => Value::String(text.to_string()),
            }
        }
        Some(kind @ ("image" | "audio")) => json!({
            CONTENT_TAG: kind,
            "mime_type": s("mimeType"),
            "data": s("data"),
        }),
        Some("resource") => {
            let r = c.get("resource").cloned().unwrap_or(Value::Null);
            let rs = |k: &str| r.get(k).and_then(Value::as_str);
            json!({
                CONTENT_TAG: "resource",
                "uri": rs("uri"),
                "mime_type": rs("mimeType"),
                "text": rs("text"),
                "data": rs("blob"),
            })
        }
        Some("resource_link") => json!({
            CONTENT_TAG: "resource_link",
            "uri": s("uri"),
            "name": s("name"),
            "mime_type": s("mimeType"),
        }),
        _ => c.clone(),
    }
}

/// Only objects and arrays count as JSON text: a tool that answers `42` or `"ok"` or `true`
/// meant text as often as not, and code can still `json.loads` it.
fn looks_like_json(text: &str) -> bool {
    matches!(text.trim_start().as_bytes().first(), Some(b'{' | b'['))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_then_json_text_then_text() {
        let r = json!({"content": [{"type": "text", "text": "{\"a\":1}"}], "structuredContent": {"b": 2}});
        assert_eq!(for_sandbox(&r).unwrap(), json!({"b": 2}));
        let r = json!({"content": [{"type": "text", "text": "{\"a\": [1, 2]}"}]});
        assert_eq!(for_sandbox(&r).unwrap(), json!({"a": [1, 2]}));
        let r = json!({"content": [{"type": "text", "text": "[{'a': 1}]"}]});
        assert_eq!(for_sandbox(&r).unwrap(), json!("[{'a': 1}]"));
        let r = json!({"content": [{"type": "text", "text": "42"}]});
        assert_eq!(for_sandbox(&r).unwrap(), json!("42"));
        assert_eq!(for_sandbox(&json!({"content": []})).unwrap(), Value::Null);
    }

    #[test]
    fn errors_carry_the_upstreams_text() {
        let r = json!({"isError": true, "content": [{"type": "text", "text": "no such row"}]});
        assert_eq!(for_sandbox(&r).unwrap_err(), "no such row");
        assert!(
            for_sandbox(&json!({"isError": true}))
                .unwrap_err()
                .contains("without a message")
        );
    }

    #[test]
    fn images_and_resources_are_tagged() {
        let r = json!({"content": [
            {"type": "image", "data": "iVBO", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "x://n", "text": "a note", "mimeType": "text/plain"}}
        ]});
        let v = for_sandbox(&r).unwrap();
        assert_eq!(v[0][CONTENT_TAG], "image");
        assert_eq!(v[0]["data"], "iVBO");
        assert_eq!(v[1][CONTENT_TAG], "resource");
        assert_eq!(v[1]["text"], "a note");
    }
}
