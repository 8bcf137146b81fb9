//! How clients reach the server: stdio or streamable HTTP, and what HTTP accepts.

use std::net::SocketAddr;

use clap::{Args, ValueEnum};

use super::ConfigError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// MCP over the process's stdin/stdout (what Claude Desktop and Claude Code launch).
    Stdio,
    /// MCP streamable HTTP, served at /mcp.
    Http,
}

#[derive(Debug, Clone, Args)]
pub struct TransportConfig {
    /// Transport to serve MCP on.
    #[arg(long, env = "CEM_TRANSPORT", value_enum, default_value_t = Transport::Stdio)]
    pub transport: Transport,

    /// Address for `--transport http` (streamable HTTP at /mcp).
    #[arg(long, env = "CEM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Host names (or host:port) HTTP requests may carry in their Host header, comma-separated,
    /// or `*` for any. The default accepts loopback names only, against DNS rebinding; a
    /// deployment names the hosts its clients use.
    #[arg(
        long,
        env = "CEM_ALLOWED_HOSTS",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,::1"
    )]
    pub allowed_hosts: Vec<String>,

    /// Browser origins (scheme://host:port, `:*` for any port) allowed to call the HTTP
    /// endpoint, comma-separated. Default: none, so requests carrying an Origin header (made by
    /// a web page) are refused; MCP clients that are not browsers send none.
    #[arg(long, env = "CEM_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
}

impl TransportConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(bad) = self
            .allowed_hosts
            .iter()
            .map(|h| h.trim())
            .find(|h| *h != "*" && (h.is_empty() || h.contains(['*', '/', ' '])))
        {
            return Err(ConfigError::Invalid {
                flag: "--allowed-hosts",
                problem: format!(
                    "{bad:?} is not a host name or host:port (use `*` alone to allow any Host)"
                ),
            });
        }
        Ok(())
    }
}
