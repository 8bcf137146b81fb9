//! Monitoring with Prometheus: the configuration and alert rules of `images/prometheus/` pass
//! `promtool check`, and `promtool test rules` with `tests/monitoring/alerts.test.yml` shows each
//! alert firing on the series that should raise it and none on a healthy server. The compose
//! stack's Prometheus (`images/prometheus/compose.yaml`) is tested with the stack, in
//! tests/compose.rs.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
const RULES: &str = "images/prometheus/rules/code-execution-mcp.yml";
const ALERT_TESTS: &str = "tests/monitoring/alerts.test.yml";

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
