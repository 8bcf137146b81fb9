//! The values one flag may take, stated once: as a clap value parser, which refuses another
//! value while parsing and names the flag, and as a check for a `Config` built in code (tests,
//! benches, embedders), which [`super::Config::validate`] runs.

use clap::builder::RangedU64ValueParser;

use super::ConfigError;

pub(super) struct Range {
    flag: &'static str,
    min: u64,
    max: u64,
}

impl Range {
    pub(super) const fn new(flag: &'static str, min: u64, max: u64) -> Self {
        Self { flag, min, max }
    }

    /// At least `min`, with no upper bound.
    pub(super) const fn at_least(flag: &'static str, min: u64) -> Self {
        Self::new(flag, min, u64::MAX)
    }

    /// The clap value parser of the flag.
    pub(super) fn parser<T>(&self) -> RangedU64ValueParser<T>
    where
        T: TryFrom<u64> + Clone + Send + Sync + 'static,
        <T as TryFrom<u64>>::Error: std::error::Error + Send + Sync + 'static,
    {
        RangedU64ValueParser::new().range(self.min..=self.max)
    }

    /// Whether `value` is one the flag may take.
    pub(super) fn check(&self, value: impl TryInto<u64>) -> Result<(), ConfigError> {
        let value = value.try_into().unwrap_or(u64::MAX);
        if (self.min..=self.max).contains(&value) {
            return Ok(());
        }
        Err(ConfigError::OutOfRange {
            flag: self.flag,
            value,
            allowed: if self.max == u64::MAX {
                format!("at least {}", self.min)
            } else {
                format!("between {} and {}", self.min, self.max)
            },
        })
    }
}
