//! The `code-execution-mcp` binary: command-line parsing and the process edge (logging to
//! stderr, signals, exit codes). Everything else is the library.

#![forbid(unsafe_code)]
#![deny(clippy::too_many_lines)]

use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use code_execution_mcp::app::App;
use code_execution_mcp::cli::{self, doctor};
use code_execution_mcp::config::ImageProfile;
use code_execution_mcp::config::{Config, Transport};
use code_execution_mcp::logging::{self, LogFormat};
use code_execution_mcp::sandbox::image;
use code_execution_mcp::transport as serve;

#[derive(Parser)]
#[command(
    name = "code-execution-mcp",
    version,
    about = "MCP server that runs agent-written Python in a fresh, locked-down Docker container per execution"
)]
struct Cli {
    /// How log lines on stderr are written: `human`, or `json` (one object per line with
    /// `time`, `level`, `target`, `message`, and `tenant`, `execution_id`, `request_id` when
    /// known; other fields under `fields`). `RUST_LOG` filters either.
    #[arg(long, env = "CEM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP (stdio by default; `--transport http` for streamable HTTP at /mcp).
    Serve(Box<Config>),
    /// Manage the sandbox image.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Ask a running HTTP server's /health endpoint (for container health checks): exits 0
    /// when it answers 200.
    Health {
        /// The server's --listen address (an unspecified address such as 0.0.0.0 is asked on
        /// loopback).
        #[arg(long, env = "CEM_LISTEN", default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
    },
    /// Check the engine, the image and the limits; print each problem with its fix.
    Doctor {
        #[command(flatten)]
        config: Box<Config>,
    },
    /// Print the audit trail (DATA_DIR/audit) as JSON lines, oldest first: one record per
    /// execute_code call, with digests and tokens, never personal data's values.
    Audit(cli::audit::Audit),
}

#[derive(Subcommand)]
enum ImageCommand {
    /// Build the sandbox image of a profile from the embedded images/python (pinned base, or
    /// the offline base when no registry is reachable); with --requirements, an image with your
    /// own packages on top of it. Prints the tag to run (`serve --image TAG`).
    Build(cli::image::Build),
    /// Print the tag the server uses by default for a profile.
    Tag {
        #[arg(long, env = "CEM_IMAGE_PROFILE", value_enum, default_value_t = ImageProfile::Data)]
        profile: ImageProfile,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = logging::init(cli.log_format) {
        eprintln!("code-execution-mcp: cannot start logging: {e}");
        return ExitCode::FAILURE;
    }
    let format = cli.log_format;
    let runtime = tokio::runtime::Runtime::new().expect("starting the async runtime");
    let code = match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            match format {
                LogFormat::Human => eprintln!("code-execution-mcp: {e:#}"),
                // A log pipeline reads why the server stopped as one of its lines.
                LogFormat::Json => tracing::error!("{e:#}"),
            }
            ExitCode::FAILURE
        }
    };
    // A blocking read of stdin may still be pending: do not wait for it.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(config) => {
            let config = *config;
            let transport = config.transport.transport;
            let listen = config.transport.listen;
            match transport {
                Transport::Stdio => {
                    let starting = App::begin(config).context("cannot start")?;
                    serve::serve_stdio(starting, serve::shutdown_signal()).await?
                }
                Transport::Http => {
                    let access = serve::http_access(config).await?;
                    serve::serve_http(access, listen, serve::shutdown_signal(), None).await?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Image {
            command: ImageCommand::Tag { profile },
        } => {
            println!("{}", image::default_tag(profile));
            Ok(ExitCode::SUCCESS)
        }
        Command::Image {
            command: ImageCommand::Build(build),
        } => {
            let tag = cli::image::build(build).await?;
            println!("{tag}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Health { listen } => {
            let status = serve::probe_health(listen).await?;
            println!("{status}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit(audit) => {
            cli::audit::run(audit)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor { config } => {
            let checks = doctor::run(&config).await;
            let mut failed = false;
            for check in &checks {
                let mark = if check.ok { "ok  " } else { "FAIL" };
                println!("{mark} {:<14} {}", check.name, check.detail);
                if let Some(fix) = &check.fix {
                    println!("     {:<14} fix: {fix}", "");
                    failed = true;
                }
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
