//! The audit trail with the real engine and the real binary: after the original README
//! examples (driven by the official MCP Python SDK, code included in the records), one record
//! per execution and none of the personal data those examples print; `code-execution-mcp
//! audit` reads them back; a read-only or full audit directory is reported (the log,
//! `get_execution_stats`, `/health`, the metrics) and executions go on, or stop with
//! `--audit-required` until the trail can be written again, and the recovery is logged once.
//! An email in a file name or the client's name is a token in the trail; refused executions
//! are recorded `refused`; each tenant's records go to its own files; a file a failed write
//! left ending in a cut line is logged at start and the next record starts a line of its own.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::audit::AuditRecord;

/// The values the original examples put into code and output, which the trail must never hold.
const CANARIES: [&str; 6] = [
    "ann.lee@example.com",
    "bob@example.org",
    "4111 1111 1111 1111",
    "5500 0000 0000 0004",
    "john@example.com",
    "555-123-4567",
];

fn records_in(dir: &Path) -> Vec<AuditRecord> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // An empty line: a record a full disk cut short was followed by a fresh line.
        for line in text.lines().filter(|l| !l.is_empty()) {
            records.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: {e}: {line}", path.display())),
            );
        }
    }
    records
}

#[test]
fn the_original_examples_leave_one_record_per_execution_and_no_personal_data() {
    let run = common::run_python_client_with(
        "original_examples.py",
        &[("CEM_AUDIT_CODE", "true"), ("RUST_LOG", "warn")],
    );
    // Each leg's server says how many executions it ran.
    let executions: usize = (run.stdout.lines())
        .filter_map(|l| l.split_once("original examples ok (")?.1.split_once(' '))
        .map(|(n, _)| n.parse::<usize>().unwrap())
        .sum();
    assert!(executions >= 4 * 7, "executions counted: {}", run.stdout);
    let trail = run.data.join("audit/_default");
    let raw: String = std::fs::read_dir(&trail)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    for canary in CANARIES {
        assert!(!raw.contains(canary), "{canary} is in the audit trail");
    }
    let records = records_in(&trail);
    assert_eq!(records.len(), executions, "one record per execution");
    let mut ids: Vec<&str> = records.iter().map(|r| r.execution_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), records.len(), "execution ids are unique");
    for r in &records {
        assert_eq!(r.tenant, None);
        assert_eq!(r.code_sha256.len(), 64);
        assert!(r.code.is_some(), "--audit-code keeps the code: {r:?}");
        assert!(r.duration_ms > 0.0);
        assert!(
            r.client.as_deref().is_some_and(|c| !c.is_empty()),
            "the client's name: {r:?}"
        );
    }
    let count = |status: &str| records.iter().filter(|r| r.status == status).count();
    assert_eq!(count("error"), 4, "1/0 on each leg");
    assert_eq!(count("timeout"), 4, "the endless loop on each leg");
    assert!(
        (records.iter()).any(|r| r.error_type.as_deref() == Some("ZeroDivisionError")),
        "the error's type is kept"
    );
    // The code that held emails and cards is there, tokenized.
    let tokenized = (records.iter())
        .filter_map(|r| r.code.as_deref())
        .find(|c| c.contains("contacting"))
        .expect("the privacy example's record");
    assert!(
        tokenized.contains("[EMAIL_") && tokenized.contains("[CREDIT_CARD_"),
        "{tokenized}"
    );
    assert!(
        (records.iter()).any(|r| r.files_changed == ["report.txt"]),
        "the workspace example's changed file"
    );

    // The command reads the same records back, oldest first, and filters them.
    let audit = |args: &[&str]| {
        let out = Command::new(common::BIN)
            .arg("audit")
            .arg("--data-dir")
            .arg(&run.data)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let all = audit(&[]);
    let read: Vec<AuditRecord> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(read.len(), records.len());
    assert!(
        read.windows(2).all(|w| w[0].time <= w[1].time),
        "oldest first"
    );
    assert_eq!(
        audit(&["--tenant", "_default", "--since", "1h"])
            .lines()
            .count(),
        records.len()
    );
    assert_eq!(audit(&["--since", "2999-01-01"]), "");
    let one = audit(&["--execution", &records[3].execution_id]);
    assert_eq!(one.lines().count(), 1);
    assert!(one.contains(&records[3].code_sha256));
    let refused = Command::new(common::BIN)
        .args(["audit", "--since", "yesterday", "--data-dir"])
        .arg(&run.data)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("span back from now"));
}

/// A tmpfs mounted over a directory for the test's length, unmounted when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(at: &Path, options: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs at {}", at.display());
        Self(at.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The audit directory of a server without tenants, its trail not yet written.
fn tenant_dir(data: &Path) -> PathBuf {
    data.join("audit/_default")
}

#[tokio::test]
#[ignore = "needs root: mounts a read-only tmpfs over the audit directory"]
async fn a_read_only_audit_directory_is_reported_and_executions_go_on() {
    common::require_root("a read-only audit directory");
    let dir = tempfile::tempdir().unwrap();
    let _ro = Mounted::tmpfs(&tenant_dir(&dir.path().join("data")), "ro,size=1m");
    let server = common::LoggedServer::start_with_env(
        dir.path(),
        &["--pool-size", "0"],
        &[("CEM_DATA_DIR", dir.path().join("data").as_os_str())],
    )
    .await;
    for _ in 0..2 {
        let r = common::execute_code(server.client.peer(), "result = 6 * 7").await;
        let body = r.structured_content.clone().unwrap();
        assert_eq!(body["result"], 42, "executions go on: {body}");
    }
    let (_, stats) = common::call_tool(
        server.client.peer(),
        "get_execution_stats",
        serde_json::json!({}),
    )
    .await;
    let audit = &stats["audit"];
    assert_eq!(audit["ok"], false, "{stats}");
    assert_eq!(audit["write_failures"], 2, "{stats}");
    assert!(
        audit["error"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{stats}"
    );
    let log = server.finish().await;
    let reports = log.matches("cannot write the audit trail").count();
    assert_eq!(
        reports, 1,
        "the failure is logged once, not per execution: {log}"
    );
    assert!(log.contains("go on unrecorded"), "{log}");
}

#[tokio::test]
#[ignore = "needs root: mounts a full tmpfs over the audit directory"]
async fn a_full_audit_disk_stops_executions_with_audit_required_until_space_returns() {
    common::require_root("a full audit disk");
    let t = common::TestApp::start_with(|c| {
        c.operations.audit_required = true;
        c.pool.pool_size = 0;
        c.pool.pool_max = 0;
    })
    .await;
    let trail = tenant_dir(&t.dir.path().join("data"));
    // Larger than the 1 MiB the trail wants free before it tries again, and full.
    let disk = Mounted::tmpfs(&trail, "size=2m");
    let filler = trail.join("filler");
    let _ = std::fs::write(&filler, vec![0u8; 2 << 20]);
    let run = |code: &'static str| {
        let app = t.app.clone();
        async move {
            app.execute(ExecuteRequest::code(code), Default::default())
                .await
        }
    };
    // While healthy, executions run; the failed write turns the trail unhealthy.
    let mut ran = 0;
    while t.app.audit().unwrap().is_ok() {
        assert!(run("result = 1").await.is_ok());
        ran += 1;
        assert!(ran < 50, "the full disk never failed a write");
    }
    code_execution_mcp::install_tls_provider();
    let http = common::HttpServer::start(t.app.clone()).await;
    let health = reqwest::get(format!("http://{}/health", http.addr))
        .await
        .unwrap();
    assert_eq!(health.status(), 503, "required and failing: unavailable");
    let body = health.text().await.unwrap();
    assert!(
        body.contains("audit trail") && body.contains("--audit-required"),
        "{body}"
    );
    let refused = run("open('/workspace/ran', 'w')").await.unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("audit trail") && message.contains("no code ran"),
        "{message}"
    );
    assert!(
        !t.workspace().join("ran").exists(),
        "the refused code did not run"
    );
    let metrics =
        code_execution_mcp::metrics::collect::render(t.app.shared(), std::slice::from_ref(&t.app))
            .await;
    assert!(metrics.contains("cem_audit_ok{tenant=\"\"} 0"), "{metrics}");
    // Space returns: the next execution runs and is recorded.
    std::fs::remove_file(&filler).unwrap();
    let ok = run("result = 2")
        .await
        .expect("runs once the trail can be written");
    assert_eq!(ok.outcome.result, 2);
    assert!(t.app.audit().unwrap().is_ok());
    let records = records_in(&trail);
    assert_eq!(records.last().unwrap().execution_id, ok.id);
    http.stop().await;
    drop(disk);
    t.app.shutdown_all().await;
}

/// The records `code-execution-mcp audit ARGS` reads back from `data`, and its stderr.
fn audit_command(data: &Path, args: &[&str]) -> (Vec<AuditRecord>, String) {
    let out = Command::new(common::BIN)
        .arg("audit")
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let records = (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (records, String::from_utf8(out.stderr).unwrap())
}

/// A server without a pool (these tests count records, not pooled starts).
fn no_pool(c: &mut code_execution_mcp::config::Config) {
    c.pool.pool_size = 0;
    c.pool.pool_max = 0;
}

#[tokio::test]
async fn an_email_in_a_file_name_and_in_the_client_name_is_a_token_in_the_trail() {
    use rmcp::ServiceExt;
    use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
    let t = common::TestApp::start_with(no_pool).await;
    // An MCP client that introduces itself with an email in its name.
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = code_execution_mcp::mcp::CodeExecutionServer::new(t.app.clone());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let info = Implementation::new("agent of ann.lee@example.com", "1.0");
    let client = ClientConfig::new(ClientCapabilities::default(), info)
        .serve(client_io)
        .await
        .expect("client connects");
    let r = common::execute_code(
        client.peer(),
        "open('/workspace/to bob@example.org.txt', 'w').write('x')\nresult = 1",
    )
    .await;
    assert_eq!(r.is_error, Some(false), "{r:?}");

    let trail = tenant_dir(&t.dir.path().join("data"));
    let raw: String = std::fs::read_dir(&trail)
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    for value in ["ann.lee@example.com", "bob@example.org"] {
        assert!(!raw.contains(value), "{value} is in the trail: {raw}");
    }
    let records = records_in(&trail);
    assert_eq!(records.len(), 1, "{raw}");
    let name = records[0].client.as_deref().expect("the client's name");
    assert!(name.starts_with("agent of [EMAIL_"), "{name}");
    let file = match records[0].files_changed.as_slice() {
        [file] => file,
        other => panic!("one file changed: {other:?}"),
    };
    assert!(file.starts_with("to [EMAIL_"), "{file}");
    // They are the tenant's tokens: its restore_pii gives the values back.
    let (_, v) = common::call_tool(
        client.peer(),
        "restore_pii",
        serde_json::json!({ "text": format!("{name} | {file}") }),
    )
    .await;
    let restored = v["restored_text"].as_str().unwrap_or_default();
    assert!(
        restored.starts_with("agent of ann.lee@example.com | to bob@example.org"),
        "{v}"
    );
    client.cancel().await.unwrap();
    t.finish().await;
}

#[tokio::test]
async fn executions_refused_before_they_run_are_recorded_as_refused() {
    let t = common::TestApp::start_with(no_pool).await;
    let refused = [
        ExecuteRequest::code("   "),
        ExecuteRequest::code("print(1)\0"),
        ExecuteRequest {
            code: "result = 1".into(),
            context_vars: Some(serde_json::json!([1, 2])),
            ..Default::default()
        },
    ];
    let mut sent = Vec::new();
    for request in refused {
        sent.push(request.code.clone());
        let error = t.app.execute(request, Default::default()).await;
        assert!(error.is_err(), "{:?}", error.map(|e| e.outcome));
    }
    let ok = t
        .app
        .execute(ExecuteRequest::code("result = 2"), Default::default())
        .await
        .expect("a valid request runs");
    sent.push("result = 2".into());

    let records = records_in(&tenant_dir(&t.dir.path().join("data")));
    let statuses: Vec<&str> = records.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(statuses, ["refused", "refused", "refused", "ok"]);
    for (record, code) in records.iter().zip(&sent) {
        assert_eq!(
            record.code_sha256,
            code_execution_mcp::audit::record::code_digest(code)
        );
    }
    for r in &records[..3] {
        assert_eq!((r.error_type.as_deref(), r.calls.len()), (None, 0), "{r:?}");
        assert!(r.files_changed.is_empty(), "{r:?}");
    }
    assert_eq!(records[3].execution_id, ok.id);
    let mut ids: Vec<&str> = records.iter().map(|r| r.execution_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 4, "one id per call: {ids:?}");
    t.finish().await;
}

#[tokio::test]
async fn each_tenant_has_its_own_files_holding_only_its_own_records() {
    use code_execution_mcp::config::{Secret, Transport};
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    const ALICE: &str = "alice-0123456789abcdef0123456789abcdef";
    const BOB: &str = "bob-fedcba9876543210fedcba9876543210";
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut c = common::config_in(dir.path());
    no_pool(&mut c);
    c.storage.workspace = None;
    c.storage.skills_dir = None;
    c.transport.transport = Transport::Http;
    c.tenants.tokens = Some(Secret(format!("alice:{ALICE},bob:{BOB}")));
    let access = code_execution_mcp::transport::http_access(c)
        .await
        .expect("the server starts");
    let http = common::HttpServer::serve(access).await;
    code_execution_mcp::install_tls_provider();
    let client = |token: &str| {
        let config =
            StreamableHttpClientTransportConfig::with_uri(http.url.clone()).auth_header(token);
        ().serve(StreamableHttpClientTransport::from_config(config))
    };
    let alice = client(ALICE).await.expect("alice connects");
    let bob = client(BOB).await.expect("bob connects");
    let code = |tenant: &str| format!("result = '{tenant}'");
    for (peer, tenant, times) in [(alice.peer(), "alice", 2), (bob.peer(), "bob", 1)] {
        for _ in 0..times {
            let r = common::execute_code(peer, &code(tenant)).await;
            assert_eq!(r.is_error, Some(false), "{r:?}");
        }
    }
    alice.cancel().await.unwrap();
    bob.cancel().await.unwrap();
    http.stop().await;
    common::assert_no_containers_under(dir.path()).await;

    let mut tenants: Vec<String> = std::fs::read_dir(data.join("audit"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    tenants.sort();
    assert_eq!(tenants, ["alice", "bob"]);
    for (tenant, count, other) in [("alice", 2, "bob"), ("bob", 1, "alice")] {
        let trail = data.join("audit").join(tenant);
        let mode = std::fs::metadata(&trail).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o700
        );
        let records = records_in(&trail);
        assert_eq!(records.len(), count, "{tenant}: {records:?}");
        let digest = code_execution_mcp::audit::record::code_digest(&code(tenant));
        for r in &records {
            assert_eq!(r.tenant.as_deref(), Some(tenant), "{r:?}");
            assert_eq!(r.code_sha256, digest, "{tenant} holds {other}'s record");
        }
        let (read, _) = audit_command(&data, &["--tenant", tenant]);
        assert_eq!(read, records, "the command reads {tenant}'s own");
    }
}

/// The `audit` part of `get_execution_stats`.
async fn audit_stats(peer: &rmcp::service::Peer<rmcp::RoleClient>) -> serde_json::Value {
    let (_, stats) = common::call_tool(peer, "get_execution_stats", serde_json::json!({})).await;
    stats["audit"].clone()
}

#[tokio::test]
async fn a_trail_that_fails_then_writes_again_logs_the_recovery_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A file where the trail's directory belongs: every write fails until it goes.
    std::fs::create_dir_all(data.join("audit")).unwrap();
    let blocker = tenant_dir(&data);
    std::fs::write(&blocker, b"").unwrap();
    let server = common::LoggedServer::start(dir.path(), &["--pool-size", "0"]).await;
    for _ in 0..2 {
        let r = common::execute_code(server.client.peer(), "result = 6 * 7").await;
        assert_eq!(r.is_error, Some(false), "executions go on: {r:?}");
    }
    assert_eq!(audit_stats(server.client.peer()).await["ok"], false);
    std::fs::remove_file(&blocker).unwrap();
    for _ in 0..2 {
        let r = common::execute_code(server.client.peer(), "result = 6 * 7").await;
        assert_eq!(r.is_error, Some(false), "{r:?}");
    }
    let audit = audit_stats(server.client.peer()).await;
    assert_eq!(
        (
            &audit["ok"],
            &audit["write_failures"],
            &audit["records_written"]
        ),
        (&true.into(), &2.into(), &2.into()),
        "{audit}"
    );
    let log = server.finish().await;
    assert_eq!(
        log.matches("cannot write the audit trail").count(),
        1,
        "{log}"
    );
    let recovered = log
        .lines()
        .filter(|l| l.contains("audit trail: writing again to"))
        .collect::<Vec<_>>();
    assert_eq!(recovered.len(), 1, "the recovery is logged once: {log}");
    assert!(recovered[0].contains("(it failed: "), "{}", recovered[0]);
    // The file is usable: the records after the recovery, read back whole.
    let (read, stderr) = audit_command(&data, &[]);
    assert_eq!(read.len(), 2, "{stderr}");
    assert_eq!(records_in(&blocker), read);
}

#[tokio::test]
async fn a_file_ending_in_a_cut_line_at_start_is_logged_and_never_continued() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let trail = tenant_dir(&data);
    std::fs::create_dir_all(&trail).unwrap();
    // What an earlier run left: a whole record, then one a full disk cut short.
    let earlier = AuditRecord {
        time: code_execution_mcp::audit::record::now(),
        tenant: None,
        node: "n1".into(),
        execution_id: "exe_0123456789abcdef".into(),
        client: None,
        oauth_subject: None,
        oauth_client_id: None,
        session: None,
        code_sha256: code_execution_mcp::audit::record::code_digest("print(1)"),
        code: None,
        status: "ok".into(),
        error_type: None,
        duration_ms: 1.0,
        calls: vec![],
        files_changed: vec![],
        files_truncated: false,
        packages: None,
        plan: None,
        http: Vec::new(),
        http_more: 0,
    };
    let file = trail.join("n1.jsonl");
    let whole = serde_json::to_string(&earlier).unwrap();
    std::fs::write(&file, format!("{whole}\n{}", &whole[..40])).unwrap();
    let server =
        common::LoggedServer::start(dir.path(), &["--pool-size", "0", "--node-name", "n1"]).await;
    let r = common::execute_code(server.client.peer(), "result = 1").await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let log = server.finish().await;
    let cut = format!("audit trail: {} ends in a line cut short", file.display());
    assert_eq!(log.matches(&cut).count(), 1, "{log}");
    // Only the cut line is lost: the earlier record and the new one read back.
    let (read, stderr) = audit_command(&data, &[]);
    let ids: Vec<&str> = read.iter().map(|r| r.execution_id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?} {stderr}");
    assert_eq!(ids[0], earlier.execution_id);
    let skipped = format!("skipped {} line 2", file.display());
    assert!(stderr.contains(&skipped), "{stderr}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
}
