//! The engine's public value types: what a detection is, and what `sanitize` / `restore` return.
//!
//! Offsets are byte offsets into the UTF-8 input (what `&text[start..end]` takes). Every detector
//! matches ASCII only at both ends of a span, so a span always lies on `char` boundaries, whatever
//! the text around it.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The kinds of value the engine replaces. The uppercase name is the token's prefix
/// (`[EMAIL_ab12cd34]`), kept from the original project so that prompts and skills written
/// against it still read the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PiiKind {
    Email,
    Phone,
    Ssn,
    CreditCard,
    IpAddress,
    /// API keys, access tokens, private keys and passwords (`API_KEY`).
    ApiKey,
    Iban,
    /// The user an OAuth access token names (its subject): minted by the server for the audit
    /// trail, never detected in text.
    UserId,
}

impl PiiKind {
    /// Every kind, in token-name order (a new kind goes last: the vault file stores the
    /// position).
    pub const ALL: [PiiKind; 8] = [
        PiiKind::Email,
        PiiKind::Phone,
        PiiKind::Ssn,
        PiiKind::CreditCard,
        PiiKind::IpAddress,
        PiiKind::ApiKey,
        PiiKind::Iban,
        PiiKind::UserId,
    ];

    /// The token prefix: `EMAIL`, `PHONE`, `SSN`, `CREDIT_CARD`, `IP_ADDRESS`, `API_KEY`, `IBAN`,
    /// `USER_ID`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PiiKind::Email => "EMAIL",
            PiiKind::Phone => "PHONE",
            PiiKind::Ssn => "SSN",
            PiiKind::CreditCard => "CREDIT_CARD",
            PiiKind::IpAddress => "IP_ADDRESS",
            PiiKind::ApiKey => "API_KEY",
            PiiKind::Iban => "IBAN",
            PiiKind::UserId => "USER_ID",
        }
    }

    /// The inverse of [`PiiKind::as_str`].
    pub fn from_name(name: &str) -> Option<PiiKind> {
        PiiKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for PiiKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One value found in a text: `text[start..end]` (byte offsets) is a value of `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Detection {
    pub kind: PiiKind,
    pub start: usize,
    pub end: usize,
}

impl Detection {
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

/// What [`super::PiiEngine::sanitize`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Sanitized {
    /// The input with every detected value replaced by its token.
    pub text: String,
    /// Each token used in `text` → the value it stands for (one entry per distinct value).
    pub tokens: BTreeMap<String, String>,
    /// Occurrences replaced, per kind (a value seen twice counts twice).
    pub counts: BTreeMap<PiiKind, usize>,
}

impl Sanitized {
    /// Occurrences replaced, all kinds together.
    pub fn total(&self) -> usize {
        self.counts.values().sum()
    }
}

/// What [`super::PiiEngine::restore`] and [`super::PiiEngine::restore_with`] return.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Restored {
    /// The input with every resolvable token replaced by its value.
    pub text: String,
    /// Tokens replaced (occurrences).
    pub restored: usize,
    /// Token-shaped strings left unchanged: forged, foreign, evicted from the vault, or (for
    /// `restore_with`) missing from the caller's map or not matching its value.
    pub unknown: usize,
}
