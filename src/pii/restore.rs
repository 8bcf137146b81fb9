//! Tokens back into values: from the vault ([`PiiEngine::restore`], [`PiiEngine::restore_where`])
//! or from a map the sandbox code holds ([`PiiEngine::restore_with`]). The restore rules are in
//! the module docs of `pii`; [`PiiEngine::restore_where`] adds the value's origins, so a flow
//! rule decides per token whether it is restored.

use std::collections::BTreeMap;

use super::PiiEngine;
use super::origin::Origin;
use super::token::TokenId;
use super::types::{PiiKind, Restored};

/// One token of a text restored with [`PiiEngine::restore_where`]: its kind and where its value
/// entered (empty: unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUse {
    pub kind: PiiKind,
    pub origins: Vec<Origin>,
}

/// What [`PiiEngine::restore_where`] made of a text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// The text, with the allowed tokens replaced by their values and every other token kept.
    pub text: String,
    /// The tokens replaced, in order.
    pub restored: Vec<TokenUse>,
    /// Tokens of the vault whose origins `allow` refused, kept as tokens.
    pub withheld: Vec<TokenUse>,
    /// Well-formed tokens the vault does not hold (forged, another server's, forgotten): kept.
    pub unknown: Vec<PiiKind>,
}

impl PiiEngine {
    /// Replaces every token of this engine's vault in `text` by its value. Anything else that
    /// looks like a token (forged, another server's, evicted) is left as is and counted as
    /// `unknown`. With a vault file, tokens the vault does not know are looked for first in what
    /// was appended to the file since it was last read (another server of the same tenant may
    /// have minted them).
    pub fn restore(&self, text: &str) -> Restored {
        let checked = self.restore_where(text, |_| true);
        Restored {
            text: checked.text,
            restored: checked.restored.len(),
            unknown: checked.unknown.len(),
        }
    }

    /// Replaces the tokens of `tokens` found in `text` by their values, but only those pairs this
    /// engine would mint itself (HMAC recomputed): see the module docs for why. Tokens missing
    /// from the map or not verifying are left as they are and counted as `unknown`. The vault is
    /// not consulted, so this works for pairs the vault has already forgotten.
    pub fn restore_with(&self, text: &str, tokens: &BTreeMap<String, String>) -> Restored {
        if !text.contains('[') {
            return Restored {
                text: text.to_owned(),
                ..Restored::default()
            };
        }
        self.substitute(text, |token| {
            let value = tokens.get(token)?;
            self.verifies(token, value).then(|| value.clone())
        })
    }

    /// Whether this engine mints exactly `token` for `value` (up to the collision extension).
    fn verifies(&self, token: &str, value: &str) -> bool {
        let Some(id) = TokenId::parse(token) else {
            return false;
        };
        id.matches(id.kind(), &self.keyed.mac(id.kind(), value))
    }

    fn substitute(&self, text: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> Restored {
        let mut out = String::with_capacity(text.len());
        let (mut restored, mut unknown, mut last) = (0, 0, 0);
        for m in self.token_re.find_iter(text) {
            match lookup(m.as_str()) {
                Some(value) => {
                    out.push_str(&text[last..m.start()]);
                    out.push_str(&value);
                    last = m.end();
                    restored += 1;
                }
                None => unknown += 1,
            }
        }
        out.push_str(&text[last..]);
        Restored {
            text: out,
            restored,
            unknown,
        }
    }

    /// Replaces the tokens of this engine's vault whose origins `allow` accepts by their
    /// values; keeps the others, and says which were restored, withheld and unknown. Like
    /// [`PiiEngine::restore`], tokens the vault does not know are looked for in the vault file
    /// first.
    pub fn restore_where(&self, text: &str, allow: impl Fn(&[Origin]) -> bool) -> Checked {
        if !text.contains('[') {
            return Checked {
                text: text.to_owned(),
                ..Checked::default()
            };
        }
        let checked = self.checked_from_vault(text, &allow);
        if !checked.unknown.is_empty()
            && let Some(store) = &self.store
            && store.refresh(&self.vault, &self.keyed) > 0
        {
            return self.checked_from_vault(text, &allow);
        }
        checked
    }

    fn checked_from_vault(&self, text: &str, allow: &impl Fn(&[Origin]) -> bool) -> Checked {
        let vault = self.vault();
        let mut checked = Checked::default();
        let restored = self.substitute(text, |token| {
            // Shaped like a token but not one this server could mint (a hex part of another
            // length): unknown like a forged one, never let through uncounted.
            let Some(id) = TokenId::parse(token) else {
                let kind = token[1..]
                    .rsplit_once('_')
                    .and_then(|(k, _)| PiiKind::from_name(k));
                checked.unknown.extend(kind);
                return None;
            };
            let use_of = |origins: &[Origin]| TokenUse {
                kind: id.kind(),
                origins: origins.to_vec(),
            };
            match vault.get_with_origins(&id) {
                None => {
                    checked.unknown.push(id.kind());
                    None
                }
                Some((_, origins)) if !allow(origins) => {
                    checked.withheld.push(use_of(origins));
                    None
                }
                Some((value, origins)) => {
                    checked.restored.push(use_of(origins));
                    Some(value.to_owned())
                }
            }
        });
        checked.text = restored.text;
        checked
    }
}
