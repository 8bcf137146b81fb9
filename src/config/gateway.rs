//! The user's own MCP servers ("upstreams") that sandbox code calls, and how those calls
//! are bounded.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::ConfigError;
use super::range::Range;

const MAX_TOOL_CALLS: Range = Range::new("--max-tool-calls", 1, 1_000_000);
const TOOL_CALL_TIMEOUT_SECS: Range = Range::new("--tool-call-timeout-secs", 1, 86_400);
const MAX_TOOL_RESULT_MB: Range = Range::new("--max-tool-result-mb", 1, 6);
const MAX_CONCURRENT_TOOL_CALLS: Range = Range::new("--max-concurrent-tool-calls", 1, 64);
const UPSTREAM_CONNECT_TIMEOUT_SECS: Range = Range::new("--upstream-connect-timeout-secs", 1, 600);
const CONFIRM_WAIT_SECS: Range = Range::new("--confirm-wait-secs", 1, 86_400);
const PLAN_MAX_CALLS: Range = Range::new("--plan-max-calls", 1, 100_000);
const PLAN_MAX_BYTES: Range = Range::new("--plan-max-bytes", 1024, 16 * 1024 * 1024);

#[derive(Debug, Clone, Args)]
pub struct GatewayConfig {
    /// JSON file of upstream MCP servers that sandbox code may call as Python functions: the
    /// `mcpServers` object of a Claude Desktop or Claude Code config (`command`/`args`/`env`/
    /// `cwd`, or `url`/`headers`; `${VAR}` expanded), plus optional `policy` and `tenants`.
    #[arg(long, env = "CEM_UPSTREAMS")]
    pub upstreams: Option<PathBuf>,

    /// Upstream tool calls one execution may make.
    #[arg(long, env = "CEM_MAX_TOOL_CALLS", default_value_t = 5000, value_parser = MAX_TOOL_CALLS.parser::<u32>())]
    pub max_tool_calls: u32,

    /// Longest wait for one upstream tool call, in seconds.
    #[arg(long, env = "CEM_TOOL_CALL_TIMEOUT_SECS", default_value_t = 60, value_parser = TOOL_CALL_TIMEOUT_SECS.parser::<u64>())]
    pub tool_call_timeout_secs: u64,

    /// Largest upstream tool result passed to sandbox code, in MiB (at most 6: a reply
    /// travels to the sandbox as one 8 MiB channel frame).
    #[arg(long, env = "CEM_MAX_TOOL_RESULT_MB", default_value_t = 4, value_parser = MAX_TOOL_RESULT_MB.parser::<u64>())]
    pub max_tool_result_mb: u64,

    /// Upstream tool calls one execution may have in flight at once (from threads).
    #[arg(long, env = "CEM_MAX_CONCURRENT_TOOL_CALLS", default_value_t = 8, value_parser = MAX_CONCURRENT_TOOL_CALLS.parser::<usize>())]
    pub max_concurrent_tool_calls: usize,

    /// Longest wait for an upstream to answer `initialize` and list its tools, in seconds.
    #[arg(long, env = "CEM_UPSTREAM_CONNECT_TIMEOUT_SECS", default_value_t = 30, value_parser = UPSTREAM_CONNECT_TIMEOUT_SECS.parser::<u64>())]
    pub upstream_connect_timeout_secs: u64,

    /// Longest wait for the user's answer to a `confirm` policy's question, in seconds. On a
    /// 2026-07-28 connection the execution waits paused for the client's retry that carries
    /// the answer; without one by then it is cancelled and its container removed.
    #[arg(long, env = "CEM_CONFIRM_WAIT_SECS", default_value_t = 300, value_parser = CONFIRM_WAIT_SECS.parser::<u64>())]
    pub confirm_wait_secs: u64,

    /// Calls one plan may hold (calls to tools whose policy is `plan`, asked once when the
    /// code has finished). Past it the execution ends with an error and nothing is sent.
    #[arg(long, env = "CEM_PLAN_MAX_CALLS", default_value_t = 1000, value_parser = PLAN_MAX_CALLS.parser::<usize>())]
    pub plan_max_calls: usize,

    /// Bytes of arguments (compact JSON, all calls together) one plan may hold; the user's
    /// question shows them all. Past it the execution ends with an error and nothing is sent.
    #[arg(long, env = "CEM_PLAN_MAX_BYTES", default_value_t = 1024 * 1024, value_parser = PLAN_MAX_BYTES.parser::<usize>())]
    pub plan_max_bytes: usize,
}

impl GatewayConfig {
    /// The flags' ranges, for a configuration built in code.
    pub fn validate(&self) -> Result<(), ConfigError> {
        MAX_TOOL_CALLS.check(self.max_tool_calls)?;
        TOOL_CALL_TIMEOUT_SECS.check(self.tool_call_timeout_secs)?;
        MAX_TOOL_RESULT_MB.check(self.max_tool_result_mb)?;
        MAX_CONCURRENT_TOOL_CALLS.check(self.max_concurrent_tool_calls)?;
        UPSTREAM_CONNECT_TIMEOUT_SECS.check(self.upstream_connect_timeout_secs)?;
        CONFIRM_WAIT_SECS.check(self.confirm_wait_secs)?;
        PLAN_MAX_CALLS.check(self.plan_max_calls)?;
        PLAN_MAX_BYTES.check(self.plan_max_bytes)?;
        Ok(())
    }

    /// How long a question waits for the user's answer (`--confirm-wait-secs`).
    pub fn confirm_wait(&self) -> Duration {
        Duration::from_secs(self.confirm_wait_secs)
    }

    /// How each execution's upstream tool calls are bounded.
    pub fn call_limits(&self) -> crate::gateway::CallLimits {
        crate::gateway::CallLimits {
            max_calls: self.max_tool_calls,
            timeout: Duration::from_secs(self.tool_call_timeout_secs),
            max_result_bytes: (self.max_tool_result_mb * 1024 * 1024) as usize,
            max_concurrent: self.max_concurrent_tool_calls,
            plan: crate::gateway::plan::PlanBounds {
                max_calls: self.plan_max_calls,
                max_bytes: self.plan_max_bytes,
            },
        }
    }

    /// How upstream connections are bounded.
    pub fn upstream_limits(&self) -> crate::gateway::UpstreamLimits {
        crate::gateway::UpstreamLimits {
            connect_timeout: Duration::from_secs(self.upstream_connect_timeout_secs),
            // Results over the limit but under this get a clear error instead of a timeout.
            max_message_bytes: 64 * 1024 * 1024,
        }
    }
}
