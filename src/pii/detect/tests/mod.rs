//! Tests of the detectors: per kind, the values found and the hard negatives (one file per
//! family of detectors), then the overlap priority, the span invariants and the validators'
//! arithmetic. Apart from the detectors so those read on their own.

mod contact;
mod finance;
mod network;
mod overlaps;
mod secret;
mod wrapped;

use std::sync::OnceLock;

use super::*;
use PiiKind::*;

fn detectors() -> &'static Detectors {
    static D: OnceLock<Detectors> = OnceLock::new();
    D.get_or_init(Detectors::new)
}

fn found(text: &str) -> Vec<(PiiKind, &str)> {
    detectors()
        .detect(text)
        .into_iter()
        .map(|d| (d.kind, &text[d.start..d.end]))
        .collect()
}

/// Each text holds exactly one value: `value`, of `kind`.
fn assert_single(table: &[(&str, PiiKind, &str)]) {
    for &(text, kind, value) in table {
        assert_eq!(found(text), vec![(kind, value)], "in {text:?}");
    }
}

fn assert_none(table: &[&str]) {
    for text in table {
        assert_eq!(found(text), vec![], "in {text:?}");
    }
}
