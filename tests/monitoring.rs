//! Monitoring with Prometheus: the configuration and alert rules of `images/prometheus/` pass
//! `promtool check`, and `promtool test rules` with `tests/monitoring/alerts.test.yml` shows each
//! alert firing on the series that should raise it and none on a healthy server. A real
//! Prometheus (Debian's `prometheus`, in a temp directory of its own) scrapes the real server's
//! `--metrics-listen` endpoint while it runs executions, counts them through PromQL and evaluates
//! the rules on its real series; the families it scraped are the ones docs/operations.md
//! documents (types and labels too) and include every one the rules and their unit tests name;
//! `promtool check metrics` accepts what the server serves. The compose stack's Prometheus
//! (`images/prometheus/compose.yaml`) is tested with the stack, in tests/compose.rs.

mod common;
#[path = "monitoring/families.rs"]
mod families;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const RULES: &str = "images/prometheus/rules/code-execution-mcp.yml";
const ALERT_TESTS: &str = "tests/monitoring/alerts.test.yml";
const OPERATIONS: &str = "docs/operations.md";
/// The scrape job's name the rules expect.
const JOB: &str = "code-execution-mcp";

#[test]
fn promtool_accepts_the_configuration_and_each_alert_fires_as_its_unit_test_says() {
    if !runs("promtool") {
        return common::skip(
            "promtool_accepts_the_configuration_and_each_alert_fires_as_its_unit_test_says",
            "promtool is missing (Debian: `apt-get install prometheus`)",
        );
    }
    // `check config` checks the rule files the configuration names, too.
    promtool(&["check", "config", "images/prometheus/prometheus.yml"]);
    promtool(&["check", "rules", RULES]);
    promtool(&["test", "rules", ALERT_TESTS]);

    // promtool passes an alert that no test looks at: every alert of the rules has a test case
    // in which it fires.
    let rules = read(RULES);
    let tests = read(ALERT_TESTS);
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(alerts.len() >= 6, "alerts found in {RULES}: {alerts:?}");
    // promtool looks at alerts only at the times a case names: the healthy hour also looks at
    // ALERTS, which holds what every evaluation raised.
    let every_evaluation = "- expr: count_over_time(ALERTS{alertstate=\"firing\"}[1h])";
    assert!(
        tests.contains(every_evaluation),
        "{ALERT_TESTS} does not check that a healthy server fires nothing all hour"
    );
    for alert in alerts {
        let fires = format!("alertname: {alert}\n        exp_alerts:\n          - exp_labels:");
        assert!(
            tests.contains(&fires),
            "{ALERT_TESTS} has no case in which {alert} fires"
        );
        let silent = format!("alertname: {alert}, exp_alerts: []");
        assert!(
            tests.contains(&silent),
            "{ALERT_TESTS} does not check that {alert} stays silent on a healthy server"
        );
    }
}

/// The monitoring is a compose file of its own because `docker stack deploy` refuses compose
/// files with `profiles`: compose.yaml and swarm.yaml must still load as a stack.
#[test]
fn compose_yaml_still_loads_as_a_swarm_stack() {
    let loads = Command::new("docker")
        .args(["stack", "config", "--help"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !loads {
        return common::skip(
            "compose_yaml_still_loads_as_a_swarm_stack",
            "the docker CLI has no `stack config` (Docker CLI 20.10 or later)",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    for file in ["tokens", "pii-key"] {
        std::fs::write(dir.path().join(file), "").unwrap();
    }
    let out = Command::new("docker")
        .args(["stack", "config", "-c", "compose.yaml", "-c", "swarm.yaml"])
        .current_dir(MANIFEST_DIR)
        .env("CEM_TOKENS_FILE", dir.path().join("tokens"))
        .env("CEM_PII_KEY_FILE", dir.path().join("pii-key"))
        .output()
        .expect("run docker stack config");
    assert!(
        out.status.success(),
        "compose.yaml + swarm.yaml no longer load as a stack: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn prometheus_scrapes_the_server_and_counts_its_executions() {
    if !runs("prometheus") || !runs("promtool") {
        return common::skip(
            "prometheus_scrapes_the_server_and_counts_its_executions",
            "prometheus or promtool is missing (Debian: `apt-get install prometheus`)",
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let metrics = format!("127.0.0.1:{}", free_loopback_port());
    let (mut child, client) = common::spawn_server_with(
        dir.path(),
        &[],
        &["--metrics-listen", &metrics, "--pool-size", "1"],
    )
    .await;
    let prometheus = Prometheus::start(&metrics);
    prometheus.wait_ready().await;

    // Four executions that end ok and one whose code raises.
    const OK: u64 = 4;
    for i in 0..OK {
        let (err, v) = common::call_tool(
            &client,
            "execute_code",
            json!({"code": format!("print({i})")}),
        )
        .await;
        assert!(!err, "{v}");
    }
    let (err, v) = common::call_tool(
        &client,
        "execute_code",
        json!({"code": "raise ValueError('bad')"}),
    )
    .await;
    assert!(err && v["status"] == "error", "{v}");

    // Counted by the server, scraped every second, summed by PromQL.
    let total = prometheus
        .until("sum(cem_executions_total)", |r| {
            r.len() == 1 && value(&r[0]) == (OK + 1) as f64
        })
        .await;
    assert_eq!(value(&total[0]), (OK + 1) as f64);
    let by_status = prometheus
        .query("sum by (status) (cem_executions_total)")
        .await;
    let count = |status: &str| {
        by_status
            .iter()
            .find(|s| s["metric"]["status"] == status)
            .map_or(0.0, value)
    };
    assert_eq!(count("ok"), OK as f64, "{by_status:?}");
    assert_eq!(count("error"), 1.0, "{by_status:?}");
    let up = prometheus.query(&format!("up{{job=\"{JOB}\"}}")).await;
    assert!(up.len() == 1 && value(&up[0]) == 1.0, "{up:?}");
    let engine = prometheus.query("cem_engine_up").await;
    assert!(engine.len() == 1 && value(&engine[0]) == 1.0, "{engine:?}");

    // The rules evaluate on the real series without error, and once its pool has refilled a
    // healthy server has no alert firing or even pending (every rule but one waits a minute or
    // more before firing, longer than this test runs).
    common::assert_rules_healthy(&prometheus.api("rules", "").await);
    prometheus
        .until("cem_pool_ready", |r| r.len() == 1 && value(&r[0]) == 1.0)
        .await;
    prometheus.wait_for_evaluation().await;
    let alerts = prometheus.query("ALERTS").await;
    assert!(alerts.is_empty(), "alerts on a healthy server: {alerts:?}");

    // Every family the server exports is documented with its type and labels, and every one
    // the docs and the rules name is exported.
    let kinds = families::exported(&prometheus.api("metadata", "").await);
    let series = prometheus
        .api(
            "series",
            &format!("match[]={}", encode(&format!("{{job=\"{JOB}\"}}"))),
        )
        .await;
    let (operations, rules, tests) = (read(OPERATIONS), read(RULES), read(ALERT_TESTS));
    let named = [
        (OPERATIONS, operations.as_str()),
        (RULES, rules.as_str()),
        (ALERT_TESTS, tests.as_str()),
    ];
    let wrong = families::mismatches(&kinds, &series, &families::documented(&operations), &named);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // What the server serves passes promtool's checks of the exposition format and its naming.
    code_execution_mcp::install_tls_provider();
    let text = reqwest::get(format!("http://{metrics}/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .unwrap();
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    {
        use std::io::Write;
        check
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    drop(prometheus);
    client.cancel().await.expect("the client closes");
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server exits when its client leaves")
        .unwrap();
    assert!(status.success(), "the server exited with {status}");
    common::assert_no_containers_under(dir.path()).await;
}

/// Debian's `prometheus` with a configuration, a TSDB and a log in a temp directory of its own,
/// on a free loopback port, scraping `target` every second under the job name the rules expect
/// and evaluating them every second. Killed, and its directory removed, when dropped (a failed
/// assertion included).
struct Prometheus {
    child: std::process::Child,
    url: String,
    dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let rules = Path::new(MANIFEST_DIR).join("images/prometheus/rules/*.yml");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {rules:?}\n\
             scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: [{target:?}]\n",
            rules = rules.display().to_string(),
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let listen = format!("127.0.0.1:{}", free_loopback_port());
        let child = Command::new("prometheus")
            .arg(flag("config.file", &dir.path().join("prometheus.yml")))
            .arg(flag("storage.tsdb.path", &dir.path().join("data")))
            .arg(format!("--web.listen-address={listen}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Self {
            child,
            url: format!("http://{listen}"),
            dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    async fn wait_ready(&self) {
        code_execution_mcp::install_tls_provider();
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(r) = reqwest::get(format!("{}/-/ready", self.url)).await
                && r.status() == 200
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("prometheus was not ready in 60 s:\n{}", self.log());
    }

    /// `data` of a GET of `/api/v1/{path}?{query}`.
    async fn api(&self, path: &str, query: &str) -> Value {
        let answer = reqwest::get(format!("{}/api/v1/{path}?{query}", self.url))
            .await
            .unwrap_or_else(|e| panic!("prometheus API {path}: {e}\n{}", self.log()));
        let body: Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
        assert_eq!(body["status"], "success", "{path}?{query}: {body}");
        body["data"].clone()
    }

    /// The instant vector `promql` evaluates to now.
    async fn query(&self, promql: &str) -> Vec<Value> {
        let query = format!("query={}", encode(promql));
        let data = self.api("query", &query).await;
        assert_eq!(data["resultType"], "vector", "{promql}: {data}");
        data["result"].as_array().unwrap().clone()
    }

    /// Waits for the rules to be evaluated once more (bounded: 60 s), so that what ALERTS holds
    /// next is their verdict on the series scraped until this call.
    async fn wait_for_evaluation(&self) {
        let since = chrono::Utc::now();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let rules = self.api("rules", "").await;
            let evaluated = (rules["groups"].as_array().unwrap().iter()).all(|g| {
                (g["lastEvaluation"].as_str())
                    .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                    .is_some_and(|t| t > since)
            });
            if evaluated {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the rules were not evaluated in 60 s: {rules}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Queries `promql` until `done` holds (bounded: 60 s, sixty scrapes).
    async fn until(&self, promql: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let result = self.query(promql).await;
            if done(&result) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "{promql} is still {result:?} after 60 s; targets: {}\n{}",
                self.api("targets", "").await,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The number in an instant vector's sample.
fn value(sample: &Value) -> f64 {
    sample["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("not a sample: {sample}"))
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn flag(name: &str, path: &Path) -> String {
    format!("--{name}={}", path.display())
}

/// A loopback port nothing listens on now.
fn free_loopback_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// Whether `program --version` runs.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs promtool in the repository root, failing with its output.
fn promtool(args: &[&str]) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(MANIFEST_DIR)
        .output()
        .expect("run promtool");
    assert!(
        out.status.success(),
        "promtool {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read(path: &str) -> String {
    std::fs::read_to_string(PathBuf::from(MANIFEST_DIR).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}
