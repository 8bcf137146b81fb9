//! Tokenizing an execution's outcome, cut texts with the bytes past their cut, and the bound
//! on how many tokens one restore may carry.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::pii::PiiEngine;
use crate::sandbox::Outcome;

/// Token-shaped strings one restore may carry. Tokens have 32 bits: without a bound, one call
/// stuffed with guesses could probe the vault wholesale.
pub const MAX_TOKENS_PER_RESTORE: usize = 1000;

static TOKEN_SHAPE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[[A-Z_]+_[0-9a-f]{8,}\]").expect("valid regex"));

/// Tokenizes every model-visible part of an execution's outcome in place, as one call of the
/// engine (with a vault file, one write for the whole outcome). A text that was cut (output
/// past `max_output_bytes`, a result past `max_result_bytes`, a long error or traceback) is
/// tokenized together with the bytes that followed its cut, so a value the cut splits becomes
/// its token whole instead of leaving its first part in clear.
pub fn redact_outcome(pii: &PiiEngine, outcome: &mut Outcome) {
    let edges = std::mem::take(&mut outcome.edges);
    pii.together(&crate::pii::Origin::Sandbox, |batch| {
        outcome
            .stdout
            .map_text(|s, edge| batch.text_with_edge(s, edge));
        outcome
            .stderr
            .map_text(|s, edge| batch.text_with_edge(s, edge));
        outcome.result = match &outcome.result {
            Value::String(s) if !edges.result.is_empty() => {
                Value::String(batch.text_with_edge(s, &edges.result))
            }
            other => batch.json(other),
        };
        for (field, edge) in [
            (&mut outcome.error, edges.error.as_str()),
            (&mut outcome.error_type, ""),
            (&mut outcome.traceback, edges.traceback.as_str()),
        ] {
            if let Some(s) = field.as_mut() {
                *s = batch.text_with_edge(s, edge);
            }
        }
    });
}

/// Refuses a restore request carrying more token-shaped strings than one call may resolve.
pub fn check_restore_budget(text: &str) -> Result<(), String> {
    let count = TOKEN_SHAPE
        .find_iter(text)
        .take(MAX_TOKENS_PER_RESTORE + 1)
        .count();
    if count > MAX_TOKENS_PER_RESTORE {
        return Err(format!(
            "the text holds more than {MAX_TOKENS_PER_RESTORE} tokens: restore at most {MAX_TOKENS_PER_RESTORE} per call"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restore_budget_counts_token_shapes() {
        assert!(check_restore_budget("pay [CREDIT_CARD_0123abcd] now").is_ok());
        let many = "[EMAIL_deadbeef] ".repeat(MAX_TOKENS_PER_RESTORE + 1);
        assert!(check_restore_budget(&many).unwrap_err().contains("at most"));
        let enough = "[EMAIL_deadbeef] ".repeat(MAX_TOKENS_PER_RESTORE);
        assert!(check_restore_budget(&enough).is_ok());
    }

    #[test]
    fn every_model_visible_field_is_tokenized() {
        use crate::sandbox::BoundedText;
        use crate::sandbox::Status;
        let pii = PiiEngine::new([7; 32], 100);
        let mut stdout = BoundedText::new(1000);
        stdout.push("mail ann@example.com\n");
        let mut stderr = BoundedText::new(1000);
        stderr.push("warn bob@example.com\n");
        let mut o = Outcome {
            status: Status::Error,
            result: serde_json::json!({"to": "cy@example.com"}),
            result_truncated: false,
            stdout,
            stderr,
            error: Some("bad dee@example.com".into()),
            error_type: Some("eve@example.com".into()),
            traceback: Some("raise X('fay@example.com')".into()),
            elapsed: std::time::Duration::ZERO,
            returned: Default::default(),
            edges: Default::default(),
            imports: Vec::new(),
            state: None,
            ready_after: std::time::Duration::ZERO,
            start: None,
        };
        redact_outcome(&pii, &mut o);
        let all = format!(
            "{} {} {} {:?} {:?} {:?}",
            o.stdout.as_str(),
            o.stderr.as_str(),
            o.result,
            o.error,
            o.error_type,
            o.traceback
        );
        assert!(!all.contains("@example.com"), "{all}");
        assert_eq!(all.matches("[EMAIL_").count(), 6, "{all}");
    }

    #[test]
    fn a_value_a_cut_splits_becomes_its_token_whole() {
        use crate::sandbox::{BoundedText, Edges, Status};
        let pii = PiiEngine::new([7; 32], 100);
        let mut stdout = BoundedText::new(12);
        stdout.push("mail margarethe.vonstrelitz@example.org, more");
        let mut o = Outcome::without_output(Status::Error, "bad margar", Default::default());
        o.stdout = stdout;
        o.result = serde_json::json!("\"to card 4111 11");
        o.traceback = Some("ValueError: margar".into());
        o.edges = Edges {
            result: "11 1111 1111\"]".into(),
            error: "ethe.vonstrelitz@example.org".into(),
            traceback: "ethe.vonstrelitz@example.org'\n".into(),
        };
        redact_outcome(&pii, &mut o);
        let stdout = o.stdout.as_str();
        assert!(
            stdout.starts_with("mail [EMAIL_") && stdout.ends_with(']'),
            "{stdout}"
        );
        let result = o.result.as_str().unwrap();
        assert!(result.starts_with("\"to card [CREDIT_CARD_"), "{result}");
        for text in [o.error.unwrap(), o.traceback.unwrap()] {
            assert!(
                text.contains("[EMAIL_") && !text.contains("margar"),
                "{text}"
            );
        }
    }
}
