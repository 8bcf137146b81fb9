//! Privacy by default: with `--pii-output tokenize`, what the tools show the model passes
//! through the PII engine, so values become tokens like `[EMAIL_ab12cd34]`: everything
//! `execute_code` returns (printed lines, stderr, the result, error type and text, traceback),
//! and the contents and names the workspace and skill tools read back. Workspace files and code
//! keep the real values; `restore_pii` (or `detokenize_pii` in the sandbox) turns tokens back
//! into values where a tool call needs them.
//!
//! This stops accidental exposure, not a determined program: code the model writes can reshape
//! a restored value (spell it out, reverse it) before printing it.

use std::sync::LazyLock;

use regex::Regex;

use crate::pii::PiiEngine;
use crate::sandbox::Outcome;

/// Token-shaped strings one restore may carry. Tokens have 32 bits: without a bound, one call
/// stuffed with guesses could probe the vault wholesale.
pub const MAX_TOKENS_PER_RESTORE: usize = 1000;

static TOKEN_SHAPE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[[A-Z_]+_[0-9a-f]{8,}\]").expect("valid regex"));

/// Tokenizes every model-visible part of an execution's outcome in place, as one call of the
/// engine (with a vault file, one write for the whole outcome).
pub fn redact_outcome(pii: &PiiEngine, outcome: &mut Outcome) {
    pii.together(|batch| {
        outcome.stdout.map_text(|s| batch.text(s));
        outcome.stderr.map_text(|s| batch.text(s));
        outcome.result = batch.json(&outcome.result);
        for field in [
            &mut outcome.error,
            &mut outcome.error_type,
            &mut outcome.traceback,
        ] {
            if let Some(s) = field.as_mut() {
                *s = batch.text(s);
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
}
