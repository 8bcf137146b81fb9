//! The benches' knobs: whole numbers from environment variables, with a default.

/// The whole number in the environment variable `name`, or `default` when it is unset. A value
/// that is not a whole number stops the bench, naming the variable: a typo must not measure
/// something else than was asked.
pub fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a whole number")),
        Err(_) => default,
    }
}
