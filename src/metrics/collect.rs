//! The metrics of a server, read at scrape time from what it already keeps: each tenant's
//! execution statistics (counts, phase histograms, pool), upstream call statistics, PII
//! counts, sessions and audit trail, and the shared state (engine, removal backlog, upstream
//! connections). Nothing is recorded twice, so the metrics and `get_execution_stats` cannot
//! disagree, and a scrape costs the same after a thousand executions as after one.
//!
//! Label values are bounded: `tenant` is a configured tenant that has called (empty on a
//! server without tenants), `status`, `phase`, `outcome`, `decision` and `kind` are fixed
//! sets, `server` is an upstream of the upstreams file, and `tool` is a tool its upstream
//! lists, at most `gateway::call_stats::MAX_TOOL_SERIES` per tenant (then `(other)`).

use std::sync::Arc;
use std::time::Duration;

use super::exposition::{Exposition, Kind};
use crate::app::{App, Shared};
use crate::gateway::UpstreamStatus;
use crate::gateway::call_stats::CallCounts;
use crate::sandbox::stats::Phase;

/// How long a scrape waits for the engine's ping.
const PING_LIMIT: Duration = Duration::from_secs(2);

/// The exposition of `shared` and its open tenants `apps`.
pub async fn render(shared: &Shared, apps: &[Arc<App>]) -> String {
    let engine_up = shared.engine_answers(PING_LIMIT).await;
    let mut apps: Vec<&Arc<App>> = apps.iter().collect();
    apps.sort_by(|a, b| a.tenant().cmp(&b.tenant()));
    let tenants: Vec<(&str, &App)> = apps
        .iter()
        .map(|a| (a.tenant().unwrap_or(""), a.as_ref()))
        .collect();
    let mut e = Exposition::default();
    server_wide(&mut e, shared, engine_up);
    executions(&mut e, &tenants);
    containers(&mut e, &tenants);
    upstreams(&mut e, shared, &tenants);
    tenant_state(&mut e, &tenants);
    egress(&mut e, &tenants);
    links(&mut e, &tenants);
    e.finish()
}

fn server_wide(e: &mut Exposition, shared: &Shared, engine_up: bool) {
    e.family(
        "cem_build_info",
        Kind::Gauge,
        "The server's version (value 1).",
    );
    e.sample(
        "cem_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    e.family(
        "cem_engine_up",
        Kind::Gauge,
        "1 when the container engine answered a ping at this scrape, else 0.",
    );
    e.sample("cem_engine_up", &[], f64::from(u8::from(engine_up)));
    e.family(
        "cem_removal_backlog",
        Kind::Gauge,
        "Used containers waiting for an idle engine to be removed (server-wide).",
    );
    e.sample("cem_removal_backlog", &[], shared.removal_backlog() as f64);
    if let Some(stats) = shared.package_stats() {
        packages(e, &stats);
    }
}

/// The package cache (server-wide; absent with `--packages off`).
fn packages(e: &mut Exposition, stats: &crate::packages::PackageStats) {
    e.family(
        "cem_package_installs_total",
        Kind::Counter,
        "Package sets installed, by outcome (ok, failed, refused, unreachable, timed_out).",
    );
    for (outcome, n) in &stats.installs {
        e.sample(
            "cem_package_installs_total",
            &[("outcome", outcome)],
            *n as f64,
        );
    }
    for (name, kind, help, value) in [
        (
            "cem_package_cache_hits_total",
            Kind::Counter,
            "Executions whose packages were already installed.",
            stats.cache_hits,
        ),
        (
            "cem_package_cache_sets",
            Kind::Gauge,
            "Installed package sets in the cache.",
            stats.cache_sets,
        ),
        (
            "cem_package_cache_bytes",
            Kind::Gauge,
            "Bytes the package cache holds.",
            stats.cache_bytes,
        ),
        (
            "cem_package_cache_evictions_total",
            Kind::Counter,
            "Package sets removed to keep the cache within --packages-cache-mb.",
            stats.cache_evictions,
        ),
    ] {
        e.family(name, kind, help);
        e.sample(name, &[], value as f64);
    }
}

fn executions(e: &mut Exposition, tenants: &[(&str, &App)]) {
    e.family(
        "cem_executions_total",
        Kind::Counter,
        "execute_code runs by how they ended.",
    );
    for (tenant, app) in tenants {
        for (status, n) in app.stats().by_status() {
            e.sample(
                "cem_executions_total",
                &[("tenant", tenant), ("status", status.as_str())],
                n as f64,
            );
        }
    }
    e.family(
        "cem_engine_failures_total",
        Kind::Counter,
        "Executions that failed because the container engine did.",
    );
    for (tenant, app) in tenants {
        let n = app.stats().engine_failures();
        e.sample("cem_engine_failures_total", &[("tenant", tenant)], n as f64);
    }
    for (name, phase, help) in [
        (
            "cem_execution_duration_seconds",
            Phase::Call,
            "Whole execute_code calls in the server: checks, the run, redaction.",
        ),
        (
            "cem_run_duration_seconds",
            Phase::Run,
            "Sandbox runs: waiting for a slot, then the container's run.",
        ),
    ] {
        e.family(name, Kind::Histogram, help);
        for (tenant, app) in tenants {
            e.histogram(name, &[("tenant", tenant)], &app.stats().histogram(phase));
        }
    }
    e.family(
        "cem_phase_duration_seconds",
        Kind::Histogram,
        "Each phase of a sandbox container's life (create, attach, start, ready, pool_wait, state_sent, job_written, first_frame, done, kill_wait, remove).",
    );
    for (tenant, app) in tenants {
        // The call and the run have families of their own.
        for phase in (Phase::ALL.into_iter()).filter(|p| !matches!(p, Phase::Run | Phase::Call)) {
            e.histogram(
                "cem_phase_duration_seconds",
                &[("tenant", tenant), ("phase", phase.as_str())],
                &app.stats().histogram(phase),
            );
        }
    }
}

fn containers(e: &mut Exposition, tenants: &[(&str, &App)]) {
    let stats: Vec<_> = tenants
        .iter()
        .map(|(t, app)| (*t, app.execution_stats()))
        .collect();
    type Read = fn(&crate::sandbox::stats::StatsSnapshot) -> f64;
    let gauges: [(&str, &str, Read); 4] = [
        (
            "cem_pool_ready",
            "Pre-started containers waiting for an execution.",
            |s| s.pool.ready as f64,
        ),
        (
            "cem_pool_starting",
            "Containers being started for the pool.",
            |s| s.pool.starting as f64,
        ),
        (
            "cem_pool_target",
            "How many containers the pool aims to hold now.",
            |s| s.pool.target as f64,
        ),
        (
            "cem_containers_alive",
            "Sandbox containers running an execution now.",
            |s| s.containers_running as f64,
        ),
    ];
    for (name, help, read) in gauges {
        e.family(name, Kind::Gauge, help);
        for (tenant, s) in &stats {
            e.sample(name, &[("tenant", tenant)], read(s));
        }
    }
    // How the pool kept up.
    let counters: [(&str, &str, Read); 3] = [
        (
            "cem_pool_empty_takes_total",
            "Executions that found no pooled container ready in time and started their own.",
            |s| s.pool.keeping_up.cold_starts as f64,
        ),
        (
            "cem_pool_waits_total",
            "Executions that waited for a pooled container on its way.",
            |s| s.pool.keeping_up.waits as f64,
        ),
        (
            "cem_pool_preload_skipped_total",
            "Pooled containers started without the tenant's usual imports because the calls came faster than such a container gets ready.",
            |s| s.pool.keeping_up.preload_skipped as f64,
        ),
    ];
    for (name, help, read) in counters {
        e.family(name, Kind::Counter, help);
        for (tenant, s) in &stats {
            e.sample(name, &[("tenant", tenant)], read(s));
        }
    }
}

fn upstreams(e: &mut Exposition, shared: &Shared, tenants: &[(&str, &App)]) {
    e.family(
        "cem_upstream_up",
        Kind::Gauge,
        "1 while the upstream MCP server is connected, else 0.",
    );
    for upstream in shared.gateway().into_iter().flat_map(|g| g.upstreams()) {
        let up = upstream.status() == UpstreamStatus::Ready;
        e.sample(
            "cem_upstream_up",
            &[("server", upstream.name())],
            f64::from(u8::from(up)),
        );
    }
    let views: Vec<_> = (tenants.iter())
        .filter_map(|(t, app)| Some((*t, app.gateway()?)))
        .collect();
    e.family(
        "cem_upstream_calls_total",
        Kind::Counter,
        "Upstream tool calls from sandbox code by server, tool and outcome (ok, error, denied, declined, timeout, refused).",
    );
    let counts: Vec<_> = (views.iter())
        .map(|(t, v)| (*t, v.stats.counts()))
        .collect();
    for (tenant, c) in &counts {
        for ((server, tool, outcome), n) in &c.by_tool {
            e.sample(
                "cem_upstream_calls_total",
                &[
                    ("tenant", tenant),
                    ("server", server),
                    ("tool", tool),
                    ("outcome", outcome.as_str()),
                ],
                *n as f64,
            );
        }
    }
    e.family(
        "cem_upstream_call_duration_seconds",
        Kind::Histogram,
        "Upstream tool calls from sandbox code, policy and confirmation included.",
    );
    for (tenant, view) in &views {
        for (server, h) in view.stats.histograms() {
            e.histogram(
                "cem_upstream_call_duration_seconds",
                &[("tenant", tenant), ("server", &server)],
                &h,
            );
        }
    }
    decisions_and_plans(e, &counts);
}

/// Policy decisions on upstream calls, plans by status and withheld tokens, per tenant.
fn decisions_and_plans(e: &mut Exposition, counts: &[(&str, CallCounts)]) {
    e.family(
        "cem_policy_decisions_total",
        Kind::Counter,
        "Policy decisions on upstream calls (allow, deny, confirm_accepted, confirm_declined, confirm_failed, plan_approved).",
    );
    for (tenant, c) in counts {
        for ((server, decision), n) in &c.decisions {
            e.sample(
                "cem_policy_decisions_total",
                &[
                    ("tenant", tenant),
                    ("server", server),
                    ("decision", decision.as_str()),
                ],
                *n as f64,
            );
        }
    }
    e.family(
        "cem_plans_total",
        Kind::Counter,
        "Plans of calls to `plan` tools by status (applied, stopped, applied_with_errors, declined, cancelled, expired, not_asked, refused).",
    );
    for (tenant, c) in counts {
        for (status, n) in &c.plans {
            e.sample(
                "cem_plans_total",
                &[("tenant", tenant), ("status", status.as_str())],
                *n as f64,
            );
        }
    }
    e.family(
        "cem_pii_withheld_total",
        Kind::Counter,
        "Personal-data tokens in upstream calls' arguments not restored (the upstream's pii rule withheld them, or the vault never issued them), by upstream and kind.",
    );
    for (tenant, c) in counts {
        for ((server, kind), n) in &c.withheld {
            let kind = kind.to_ascii_lowercase();
            e.sample(
                "cem_pii_withheld_total",
                &[("tenant", tenant), ("server", server), ("kind", &kind)],
                *n as f64,
            );
        }
    }
}

fn tenant_state(e: &mut Exposition, tenants: &[(&str, &App)]) {
    e.family(
        "cem_pii_detections_total",
        Kind::Counter,
        "Personal data values replaced by tokens, by kind (a value shown twice counts twice).",
    );
    for (tenant, app) in tenants {
        for (kind, n) in app.pii_tokenized() {
            let kind = kind.as_str().to_ascii_lowercase();
            e.sample(
                "cem_pii_detections_total",
                &[("tenant", tenant), ("kind", &kind)],
                n as f64,
            );
        }
    }
    type Read = fn(&App) -> f64;
    let gauges: [(&str, &str, Read); 3] = [
        (
            "cem_mcp_sessions",
            "MCP sessions open (a 2026-07-28 request without a session counts while it runs).",
            |a| a.mcp_sessions() as f64,
        ),
        (
            "cem_execution_sessions",
            "execute_code sessions holding state between calls.",
            |a| a.session_counts().sessions as f64,
        ),
        (
            "cem_executions_paused",
            "Executions paused on a question to a 2026-07-28 client.",
            |a| a.paused().len() as f64,
        ),
    ];
    for (name, help, read) in gauges {
        e.family(name, Kind::Gauge, help);
        for (tenant, app) in tenants {
            e.sample(name, &[("tenant", tenant)], read(app));
        }
    }
    session_state(e, tenants);
    e.family(
        "cem_audit_ok",
        Kind::Gauge,
        "1 while the audit trail's writes succeed, 0 while they fail (absent with --audit false).",
    );
    for (tenant, app) in tenants {
        if let Some(log) = app.audit() {
            e.sample(
                "cem_audit_ok",
                &[("tenant", tenant)],
                f64::from(u8::from(log.is_ok())),
            );
        }
    }
    e.family(
        "cem_audit_write_failures_total",
        Kind::Counter,
        "Audit records that could not be written.",
    );
    for (tenant, app) in tenants {
        if let Some(log) = app.audit() {
            let n = log.health().write_failures;
            e.sample(
                "cem_audit_write_failures_total",
                &[("tenant", tenant)],
                n as f64,
            );
        }
    }
}

/// What sessions' state cost to receive, per tenant.
fn session_state(e: &mut Exposition, tenants: &[(&str, &App)]) {
    e.family(
        "cem_session_state_bytes_received_total",
        Kind::Counter,
        "Bytes of execute_code sessions' state received from containers: the variables a call changed (one that changed none adds nothing).",
    );
    for (tenant, app) in tenants {
        let n = app.stats().state_bytes_received();
        e.sample(
            "cem_session_state_bytes_received_total",
            &[("tenant", tenant)],
            n as f64,
        );
    }
}

/// Requests and bytes through each tenant's egress proxy, by entry (`none`: no entry matched).
fn egress(e: &mut Exposition, tenants: &[(&str, &App)]) {
    e.family(
        "cem_egress_requests_total",
        Kind::Counter,
        "HTTP requests sandbox code made through the server, by egress entry and decision (sent, refused, failed).",
    );
    for (tenant, app) in tenants {
        for (entry, decision, n) in app.egress_stats().map(|s| s.requests()).unwrap_or_default() {
            let labels = [
                ("tenant", *tenant),
                ("entry", &entry),
                ("decision", decision.as_str()),
            ];
            e.sample("cem_egress_requests_total", &labels, n as f64);
        }
    }
    e.family(
        "cem_egress_bytes_total",
        Kind::Counter,
        "Bytes of HTTP bodies through the server's egress proxy, by egress entry and direction (in: from hosts, out: to them).",
    );
    for (tenant, app) in tenants {
        for (entry, direction, n) in app.egress_stats().map(|s| s.bytes()).unwrap_or_default() {
            let labels = [
                ("tenant", *tenant),
                ("entry", &entry),
                ("direction", direction),
            ];
            e.sample("cem_egress_bytes_total", &labels, n as f64);
        }
    }
}

/// Upload and download links: made, used (by outcome), bytes moved.
fn links(e: &mut Exposition, tenants: &[(&str, &App)]) {
    e.family(
        "cem_links_issued_total",
        Kind::Counter,
        "Upload and download links made (request_upload, request_download), by kind.",
    );
    for (tenant, app) in tenants {
        for (kind, n) in app.links().stats.issued_counts() {
            let labels = [("tenant", *tenant), ("kind", kind.as_str())];
            e.sample("cem_links_issued_total", &labels, n as f64);
        }
    }
    e.family(
        "cem_link_transfers_total",
        Kind::Counter,
        "Uses of upload and download links, by kind and outcome (ok, bad_link, too_large, busy, bad_request, conflict, failed).",
    );
    for (tenant, app) in tenants {
        for (kind, outcome, n) in app.links().stats.transfers() {
            let labels = [
                ("tenant", *tenant),
                ("kind", kind.as_str()),
                ("outcome", outcome.as_str()),
            ];
            e.sample("cem_link_transfers_total", &labels, n as f64);
        }
    }
    e.family(
        "cem_link_bytes_total",
        Kind::Counter,
        "Bytes received through upload links and sent through download links, by kind.",
    );
    for (tenant, app) in tenants {
        for (kind, n) in app.links().stats.bytes() {
            let labels = [("tenant", *tenant), ("kind", kind.as_str())];
            e.sample("cem_link_bytes_total", &labels, n as f64);
        }
    }
}
