//! Privacy by default: with `--pii-output tokenize`, everything `execute_code` returns to the
//! model (printed lines, stderr, the result, error text and traceback) passes through the PII
//! engine, so values become tokens like `[EMAIL_ab12cd34]`. Workspace files and the code keep
//! the real values; `restore_pii` (or `detokenize_pii` in the sandbox) turns tokens back into
//! values where a tool call needs them.

use crate::pii::PiiEngine;
use crate::sandbox::Outcome;

/// Tokenizes every model-visible part of an execution's outcome in place.
pub fn redact_outcome(pii: &PiiEngine, outcome: &mut Outcome) {
    let text = |s: &str| pii.sanitize(s).text;
    outcome.stdout.map_text(text);
    outcome.stderr.map_text(text);
    outcome.result = pii.sanitize_json(&outcome.result);
    for field in [&mut outcome.error, &mut outcome.traceback] {
        if let Some(s) = field.as_mut() {
            *s = text(s);
        }
    }
}
