//! Writes approved as one plan (policy `plan`), through the official MCP Python SDK against the
//! real binary over stdio and HTTP with two tenants, on both protocol eras
//! (`tests/python/plan_rounds.py`), with `mcp-server-sqlite` from PyPI and the rmcp fixture as
//! upstreams: 40 planned updates asked once and applied exactly on accept; nothing sent on
//! decline, cancel, expiry, a forged, altered, replayed or other tenant's request state, or a
//! plan past its bounds (read from the database and the fixture's record file, never from the
//! server's words); stop on error; personal data restored for the user and the upstream only;
//! the outcomes in a session's next call and the plan in the audit trail.
//!
//! Plans under flow rules, in process with the fixture as a CRM and two recording upstreams:
//! a plan holding one call that a `refuse` rule blocks is not asked (the test's asker counts
//! no question) and sends nothing, not even its other calls; under `keep` it is asked once and
//! the ruled upstream's record holds the token while the other receives the value.

use std::sync::Arc;

use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::gateway::plan::{PlanReport, PlanStatus};
use code_execution_mcp::gateway::{Answer, AskError, Confirm, Prompt};
use code_execution_mcp::sandbox::Status;
use serde_json::{Value, json};

use super::python_client;
use crate::common::upstreams;

#[test]
fn plans_are_asked_once_and_applied_exactly_as_approved() {
    let sqlite = upstreams::sqlite_python();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crm.db");
    let record = dir.path().join("fixture-rows.jsonl");
    let mut fixture = upstreams::fixture_entry(&[]);
    fixture["env"] = json!({"FIXTURE_RECORD": record});
    fixture["policy"] = json!({"default": "plan"});
    let file = upstreams::upstreams_file(
        dir.path(),
        json!({
            "sqlite": {"command": sqlite.with_file_name("mcp-server-sqlite"),
                       "args": ["--db-path", db],
                       "policy": {"tools": {"write_query": "plan"}}},
            "fixture": fixture,
        }),
    );
    let data = dir.path().join("data");
    python_client("plan_rounds.py", &[&data, &file, &db, &record]);
}

/// Answers every question with accept, counting them: the test's stand-in for a client that
/// answers elicitation.
#[derive(Default)]
struct Asked(std::sync::Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Confirm for Asked {
    async fn ask(&self, prompt: Prompt) -> Result<Answer, AskError> {
        self.0.lock().unwrap().push(prompt.message);
        Ok(Answer::Accept)
    }
}

/// Reads a CRM's person, then plans four calls: two to `tracker` (the second carrying the
/// person's email token) and two to `notes` (no rule: it receives values restored).
const MIXED_PLAN: &str = r#"
from servers.crm import rows
from servers.tracker import echo as track
from servers.notes import echo as note
email = rows(count=1)["rows"][0]["email"]
track(value="opened")
note(value="first")
track(value={"email": email})
note(value={"email": email})
result = email
"#;

/// Runs [`MIXED_PLAN`] on a server whose `tracker` (policy `plan`) has the rule
/// `restore_from ["user"], otherwise OTHERWISE`: the plan's report, the questions asked, the
/// token the code held, and what `tracker` and `notes` recorded receiving.
async fn mixed_plan_under(
    otherwise: &str,
) -> (PlanReport, Vec<String>, String, Vec<Value>, Vec<Value>) {
    let logs = tempfile::tempdir().unwrap();
    let log = |name: &str| logs.path().join(format!("{name}.jsonl"));
    let recording = |name: &str| {
        let mut entry = upstreams::fixture_entry(&["--calls-log", log(name).to_str().unwrap()]);
        entry["policy"] = json!({"default": "plan"});
        entry
    };
    let mut tracker = recording("tracker");
    tracker["pii"] = json!({"restore_from": ["user"], "otherwise": otherwise});
    let servers = json!({
        "crm": upstreams::fixture_entry(&[]),
        "tracker": tracker,
        "notes": recording("notes"),
    });
    let t = super::app_with(servers, |_| {}).await;
    let asked = Arc::new(Asked::default());
    let ran = t
        .app
        .execute(
            ExecuteRequest {
                code: MIXED_PLAN.into(),
                timeout_seconds: Some(120.0),
                confirm: Some(asked.clone()),
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("execution could not run: {e}"));
    let o = &ran.outcome;
    assert_eq!(o.status, Status::Ok, "{:?} {:?}", o.error, o.traceback);
    let token = o.result.as_str().expect("the email token").to_owned();
    assert!(token.starts_with("[EMAIL_"), "the code held {token:?}");
    let report = ran.plan.expect("a plan report");
    let received = |name: &str| -> Vec<Value> {
        match std::fs::read_to_string(log(name)) {
            Ok(text) => text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("read {name}'s calls log: {e}"),
        }
    };
    let questions = asked.0.lock().unwrap().clone();
    (
        report,
        questions,
        token,
        received("tracker"),
        received("notes"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_holding_a_call_a_refuse_rule_blocks_is_neither_asked_nor_sent() {
    let (report, asked, _token, tracker, notes) = mixed_plan_under("refuse").await;
    // The upstreams' own records: no call arrived, not even those the rule allows.
    assert_eq!(tracker, Vec::<Value>::new(), "tracker received calls");
    assert_eq!(notes, Vec::<Value>::new(), "notes received calls");
    assert_eq!(asked, Vec::<String>::new(), "the user was asked");
    assert_eq!(
        (report.status, report.calls, report.ok, report.not_sent),
        (PlanStatus::NotAsked, 4, 0, 4),
        "{report:?}"
    );
    let m = &report.message;
    assert!(
        m.contains("None of the plan's 4 calls was sent")
            && m.contains("call 3 (`tracker/echo`)")
            && m.contains("EMAIL from crm/rows")
            && m.contains("restore_from [\"user\"]")
            && !m.contains("@example.com"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plan_under_a_keep_rule_sends_the_rules_tokens_and_restores_the_rest() {
    let (report, asked, token, tracker, notes) = mixed_plan_under("keep").await;
    assert_eq!(
        (report.status, report.ok, report.failed),
        (PlanStatus::Applied, 4, 0),
        "{report:?}"
    );
    // Asked once, and shown what each upstream receives: the token for the tracker.
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(&token)
            && asked[0].contains("Sent as tokens, not values: EMAIL from crm/rows"),
        "{}",
        asked[0]
    );
    let values = |calls: &[Value]| -> Vec<Value> {
        calls
            .iter()
            .map(|c| {
                assert_eq!(c["tool"], "echo", "{c}");
                c["arguments"]["value"].clone()
            })
            .collect()
    };
    assert_eq!(values(&tracker), [json!("opened"), json!({"email": token})]);
    assert!(
        !json!(tracker).to_string().contains("@example.com"),
        "{tracker:?}"
    );
    assert_eq!(
        values(&notes),
        [json!("first"), json!({"email": "person0@example.com"})]
    );
}
