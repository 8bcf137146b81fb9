//! An `execute_code` request ([`ExecuteRequest`]) and the checks that turn it into limits: code
//! size and text checks, and timeout/memory requests clamped to the configured [`RequestBounds`].
//! Clamping is reported back, so a model that asked for 10 000 seconds learns it got 300.
//!
//! Pure logic, no I/O: unit-tested here, used before anything reaches the engine.

use std::sync::Arc;
use std::time::Duration;

use crate::config::LimitsConfig;
use crate::gateway::Confirm;
use crate::sandbox::OutputTap;

/// One `execute_code` request as the caller sent it, before any check.
#[derive(Default)]
pub struct ExecuteRequest {
    pub code: String,
    pub context_vars: Option<serde_json::Value>,
    pub timeout_seconds: Option<f64>,
    pub memory_mb: Option<f64>,
    /// Offered each output chunk as it arrives (for progress reports).
    pub tap: Option<Arc<dyn OutputTap>>,
    /// Asks the user before an upstream call whose policy is `confirm` (MCP elicitation);
    /// `None`: such calls are refused.
    pub confirm: Option<Arc<dyn Confirm>>,
    /// `"new"`, a session's handle or `HANDLE@N` (its revision N): the code starts with the
    /// session's variables, and leaves its own for the next call.
    pub session: Option<String>,
    /// Save the result into a new session made from `session`'s state (a branch).
    pub fork: bool,
    /// The MCP client's name, as it introduced itself (for the audit trail).
    pub client: Option<String>,
    /// The user whose OAuth access token the call came with (for the audit trail).
    pub oauth: Option<crate::oauth::Identity>,
    /// Requirements to make importable before the code runs (`crate::packages`).
    pub packages: Vec<String>,
}

impl std::fmt::Debug for ExecuteRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteRequest")
            .field("code_bytes", &self.code.len())
            .field("timeout_seconds", &self.timeout_seconds)
            .field("memory_mb", &self.memory_mb)
            .field("tap", &self.tap.is_some())
            .field("confirm", &self.confirm.is_some())
            .field("session", &self.session)
            .field("fork", &self.fork)
            .field("client", &self.client)
            .field("packages", &self.packages)
            .finish()
    }
}

impl ExecuteRequest {
    /// A request for `code` with every other argument left to the defaults.
    pub fn code(code: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            ..Self::default()
        }
    }
}

/// The configured bounds a request's timeout and memory are clamped to (from the
/// `--default-*` and `--max-*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestBounds {
    pub default_timeout_secs: u64,
    pub max_timeout_secs: u64,
    pub default_memory_mb: u64,
    pub max_memory_mb: u64,
}

pub use crate::config::MIN_MEMORY_MB;

impl RequestBounds {
    /// The bounds of the `--default-*` and `--max-*` flags.
    pub fn of(limits: &LimitsConfig) -> Self {
        Self {
            default_timeout_secs: limits.default_timeout_secs,
            max_timeout_secs: limits.max_timeout_secs,
            default_memory_mb: limits.default_memory_mb,
            max_memory_mb: limits.max_memory_mb,
        }
    }
}

/// Shortest timeout a caller can get.
pub const MIN_TIMEOUT_SECS: f64 = 1.0;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("`code` is empty: pass the Python source to run")]
    EmptyCode,
    #[error(
        "`code` is {size} bytes, over the {limit}-byte limit: write large data to the workspace with write_workspace_file and read it from the code"
    )]
    CodeTooLarge { size: usize, limit: usize },
    #[error(
        "`code` contains a NUL character at byte {0}: send plain Python source text without NUL characters"
    )]
    NulInCode(usize),
    #[error(
        "the job (code plus context_vars) is {size} bytes as sent to the sandbox, over the {limit}-byte limit: write large data to the workspace with write_workspace_file and read it from the code"
    )]
    JobTooLarge { size: usize, limit: usize },
    #[error("`{name}` must be a finite number, got {value}")]
    NotFinite { name: &'static str, value: f64 },
    #[error(
        "`context_vars` must be a JSON object of variable names to values, got {0}: pass e.g. {{\"data\": [1, 2, 3]}}"
    )]
    ContextNotObject(&'static str),
    #[error(
        "`context_vars` key {0:?} is not a Python identifier: use names made of letters, digits and underscores"
    )]
    ContextBadName(String),
}

/// Limits that apply to one execution after clamping.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecLimits {
    pub timeout: Duration,
    pub memory_bytes: i64,
    /// One note per argument that was changed to fit the bounds, e.g.
    /// "timeout_seconds 10000 clamped to the maximum 300".
    pub adjustments: Vec<String>,
}

/// Checks the code text: not empty, within the size limit, no NUL.
pub fn check_code(code: &str, max_bytes: usize) -> Result<(), InputError> {
    if code.trim().is_empty() {
        return Err(InputError::EmptyCode);
    }
    if code.len() > max_bytes {
        return Err(InputError::CodeTooLarge {
            size: code.len(),
            limit: max_bytes,
        });
    }
    if let Some(pos) = code.find('\0') {
        return Err(InputError::NulInCode(pos));
    }
    Ok(())
}

/// Checks `context_vars`: absent, null, or an object whose keys are Python identifiers.
pub fn check_context_vars(vars: Option<&serde_json::Value>) -> Result<(), InputError> {
    use serde_json::Value;
    match vars {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Object(map)) => {
            for key in map.keys() {
                if !is_identifier(key) {
                    return Err(InputError::ContextBadName(key.clone()));
                }
            }
            Ok(())
        }
        Some(Value::Array(_)) => Err(InputError::ContextNotObject("an array")),
        Some(Value::String(_)) => Err(InputError::ContextNotObject("a string")),
        Some(Value::Number(_)) => Err(InputError::ContextNotObject("a number")),
        Some(Value::Bool(_)) => Err(InputError::ContextNotObject("a boolean")),
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && s.len() <= 128
}

/// Checks that the job frame (code and context_vars as JSON) fits the channel's line limit.
pub fn check_job_size(code: &str, context_vars: &serde_json::Value) -> Result<(), InputError> {
    use crate::sandbox::run::channel::{HarnessLimits, MAX_FRAME_BYTES, ToHarness};
    let size = ToHarness::Job {
        code,
        context_vars,
        limits: HarnessLimits {
            max_output_bytes: 0,
            max_result_bytes: 0,
            max_images: 0,
        },
        edge_bytes: crate::sandbox::run::output::EDGE_BYTES,
        servers: None,
        packages: None,
        session: Some(crate::sandbox::run::channel::SessionLimits {
            max_bytes: u64::MAX,
        }),
        plan: None,
        egress: Some(crate::sandbox::run::channel::EgressJob { http: true }),
    }
    .to_line()
    .len();
    if size > MAX_FRAME_BYTES {
        return Err(InputError::JobTooLarge {
            size,
            limit: MAX_FRAME_BYTES,
        });
    }
    Ok(())
}

/// Clamps the requested timeout (seconds) and memory (MiB) to the configured bounds.
pub fn clamp(
    timeout_seconds: Option<f64>,
    memory_mb: Option<f64>,
    bounds: &RequestBounds,
) -> Result<ExecLimits, InputError> {
    let mut adjustments = Vec::new();

    let max_t = bounds.max_timeout_secs as f64;
    let timeout = match timeout_seconds {
        None => bounds.default_timeout_secs as f64,
        Some(t) if !t.is_finite() => {
            return Err(InputError::NotFinite {
                name: "timeout_seconds",
                value: t,
            });
        }
        Some(t) if t < MIN_TIMEOUT_SECS => {
            adjustments.push(format!(
                "timeout_seconds {t} raised to the minimum {MIN_TIMEOUT_SECS}"
            ));
            MIN_TIMEOUT_SECS
        }
        Some(t) if t > max_t => {
            adjustments.push(format!(
                "timeout_seconds {t} clamped to the maximum {max_t} (--max-timeout-secs)"
            ));
            max_t
        }
        Some(t) => t,
    };

    let max_m = bounds.max_memory_mb as f64;
    let min_m = MIN_MEMORY_MB as f64;
    let memory_mb = match memory_mb {
        None => bounds.default_memory_mb as f64,
        Some(m) if !m.is_finite() => {
            return Err(InputError::NotFinite {
                name: "memory_mb",
                value: m,
            });
        }
        Some(m) if m < min_m => {
            adjustments.push(format!("memory_mb {m} raised to the minimum {min_m}"));
            min_m
        }
        Some(m) if m > max_m => {
            adjustments.push(format!(
                "memory_mb {m} clamped to the maximum {max_m} (--max-memory-mb)"
            ));
            max_m
        }
        Some(m) => m,
    };

    Ok(ExecLimits {
        timeout: Duration::from_secs_f64(timeout),
        memory_bytes: (memory_mb * 1024.0 * 1024.0) as i64,
        adjustments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn code_checks() {
        assert_eq!(check_code("", 10), Err(InputError::EmptyCode));
        assert_eq!(check_code("  \n", 10), Err(InputError::EmptyCode));
        assert_eq!(
            check_code("print(1)", 4),
            Err(InputError::CodeTooLarge { size: 8, limit: 4 })
        );
        assert_eq!(check_code("a\0b", 10), Err(InputError::NulInCode(1)));
        assert!(check_code("print('é')", 100).is_ok());
    }

    #[test]
    fn context_vars_must_be_an_object_of_identifiers() {
        use serde_json::json;
        assert!(check_context_vars(None).is_ok());
        assert!(check_context_vars(Some(&json!(null))).is_ok());
        assert!(check_context_vars(Some(&json!({"data": [1], "_x9": 2}))).is_ok());
        assert!(matches!(
            check_context_vars(Some(&json!([1]))),
            Err(InputError::ContextNotObject(_))
        ));
        assert!(matches!(
            check_context_vars(Some(&json!({"a b": 1}))),
            Err(InputError::ContextBadName(_))
        ));
        assert!(matches!(
            check_context_vars(Some(&json!({"1a": 1}))),
            Err(InputError::ContextBadName(_))
        ));
    }

    #[test]
    fn jobs_must_fit_the_channel() {
        use serde_json::json;
        assert!(check_job_size("print(1)", &json!({"a": 1})).is_ok());
        let big = json!({"data": "x".repeat(9 * 1024 * 1024)});
        assert!(matches!(
            check_job_size("print(1)", &big),
            Err(InputError::JobTooLarge { .. })
        ));
        // Escaping counts: 2 MiB of control characters become 12 MiB of JSON.
        let code = "\u{1}".repeat(2 * 1024 * 1024);
        assert!(check_job_size(&code, &serde_json::Value::Null).is_err());
    }

    #[test]
    fn defaults_apply_without_adjustment() {
        let c = RequestBounds::of(&Config::defaults().limits);
        let l = clamp(None, None, &c).unwrap();
        assert_eq!(l.timeout, Duration::from_secs(30));
        assert_eq!(l.memory_bytes, 500 * 1024 * 1024);
        assert!(l.adjustments.is_empty());
    }

    #[test]
    fn out_of_range_requests_are_clamped_and_reported() {
        let c = RequestBounds::of(&Config::defaults().limits);
        let l = clamp(Some(-1.0), Some(0.0), &c).unwrap();
        assert_eq!(l.timeout, Duration::from_secs(1));
        assert_eq!(l.memory_bytes, 32 * 1024 * 1024);
        assert_eq!(l.adjustments.len(), 2);

        let l = clamp(Some(1e308), Some(1e308), &c).unwrap();
        assert_eq!(l.timeout, Duration::from_secs(300));
        assert_eq!(l.memory_bytes, 4096 * 1024 * 1024);
        assert!(l.adjustments[0].contains("--max-timeout-secs"));
        assert!(l.adjustments[1].contains("--max-memory-mb"));
    }

    #[test]
    fn non_finite_requests_are_refused() {
        let c = RequestBounds::of(&Config::defaults().limits);
        assert!(clamp(Some(f64::NAN), None, &c).is_err());
        assert!(clamp(None, Some(f64::INFINITY), &c).is_err());
    }
}
