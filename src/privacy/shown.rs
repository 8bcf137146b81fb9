//! [`Shown`]: a text on its way to the model by a road other than a tool's response (an
//! error, a resource, a progress report, a task's status, a notification). Only
//! [`super::Privacy`] makes one from data, so a function that takes a `Shown` takes a text the
//! PII engine has read.

use std::fmt;

/// A text the privacy layer let through: tokenized (with `--pii-output tokenize`), or the
/// server's own fixed words. Its field is private to [`super`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shown(String);

impl Shown {
    pub(super) fn new(text: String) -> Self {
        Self(text)
    }

    /// The server's own words, fixed when it was built ("running", "run the code again"): a
    /// `&'static str` holds no data a call brought.
    pub fn fixed(text: &'static str) -> Self {
        Self(text.to_string())
    }

    /// This text inside the server's own wording: `frame` gets the shown text and returns it
    /// with what the server says around it (fixed words, a count, a URI's scheme), and adds
    /// no data of its own.
    pub fn framed(self, frame: impl FnOnce(&str) -> String) -> Self {
        Self(frame(&self.0))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, for a field of a response (which goes through the engine again, unchanged).
    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::ops::Deref for Shown {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for Shown {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Shown {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}
