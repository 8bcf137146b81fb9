//! HTTP with bearer tokens, against the real engine: each token's tenant has its own workspace
//! (on the host and at `/workspace` in its sandboxes), skills, PII vault and stats, and sees
//! nothing of another's; requests without a valid token get 401 before a tenant is opened or a
//! body is read, while `/health` needs none; the Host and Origin allowlists and the body bound
//! still apply to authenticated requests, and a session id is only served to its own tenant; a
//! tenant at its `--tenant-max-concurrency` is refused "busy" while another's code runs; as
//! root, each tenant's sandboxes run as a uid of its own, and its files stay closed to another
//! tenant's code even through a mount shared by mistake. After each test no sandbox container
//! of its server is left.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use code_execution_mcp::config::{Config, Secret, Transport};
use common::{HttpServer, call_tool};
use rmcp::RoleClient;
use rmcp::service::{Peer, RunningService};
use serde_json::{Value, json};

const ALICE: &str = "alice-0123456789abcdef0123456789abcdef";
const BOB: &str = "bob-fedcba9876543210fedcba9876543210";

#[tokio::test]
async fn tenants_see_only_their_own_workspace_skills_pii_and_stats() {
    let server = TenantServer::start(|_| {}).await;
    let alice = server.client(ALICE).await;
    let bob = server.client(BOB).await;

    // Alice leaves a file, a file written by code, a skill and a PII token.
    write_file(&alice, "notes/secret.txt", "alice only").await;
    let v = call_ok(
        &alice,
        "execute_code",
        json!({"code": "open('/workspace/from_code.txt', 'w').write('by code')\nresult = 1"}),
    )
    .await;
    assert_eq!(v["result"], 1);
    let v = call_ok(
        &alice,
        "execute_code",
        json!({"code": "result = open('/workspace/notes/secret.txt').read()"}),
    )
    .await;
    assert_eq!(v["result"], "alice only");
    call_ok(
        &alice,
        "save_skill",
        json!({"name": "alice_private", "code": "def run():\n    return 'a'\n", "description": "alice's own"}),
    )
    .await;
    assert!(
        skill_names(&alice)
            .await
            .contains(&"alice_private".to_string())
    );
    let v = call_ok(
        &alice,
        "sanitize_pii",
        json!({"text": "mail ann@example.com"}),
    )
    .await;
    assert_eq!(v["pii_types"], json!(["EMAIL"]), "{v}");
    let token = pii_token(v["sanitized_text"].as_str().unwrap());

    // Bob's tools see none of it.
    let v = call_ok(&bob, "list_workspace_files", json!({})).await;
    assert_eq!(v["files"], json!([]), "{v}");
    let error = call_err(
        &bob,
        "read_workspace_file",
        json!({"filename": "notes/secret.txt"}),
    )
    .await;
    assert!(
        error.contains("file not found: 'notes/secret.txt'"),
        "{error}"
    );
    let error = call_err(
        &bob,
        "read_workspace_file",
        json!({"filename": "../../alice/workspace/notes/secret.txt"}),
    )
    .await;
    assert!(error.contains("leaves the workspace"), "{error}");
    // Nor do Bob's resource reads and listings, by URI or by traversal.
    let listed = bob.list_resources(None).await.unwrap();
    assert!(listed.resources.is_empty(), "{:?}", listed.resources);
    let alice_listed = alice.list_resources(None).await.unwrap();
    let alice_uris: Vec<&str> = alice_listed
        .resources
        .iter()
        .map(|r| r.uri.as_str())
        .collect();
    assert!(
        alice_uris.contains(&"workspace:///notes/secret.txt"),
        "{alice_uris:?}"
    );
    for uri in [
        "workspace:///notes/secret.txt",
        "workspace:///../../alice/workspace/notes/secret.txt",
        "workspace:///%2E%2E/%2E%2E/alice/workspace/notes/secret.txt",
    ] {
        let read = bob
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
            .await;
        assert!(read.is_err(), "{uri}: {read:?}");
    }
    assert!(
        !skill_names(&bob)
            .await
            .contains(&"alice_private".to_string())
    );
    let error = call_err(&bob, "load_skill", json!({"name": "alice_private"})).await;
    assert!(error.contains("alice_private"), "{error}");
    let v = call_ok(&bob, "restore_pii", json!({ "text": token })).await;
    assert_eq!(v["restored_text"], token, "{v}");
    assert_eq!(
        (v["restored"].as_u64(), v["unknown"].as_u64()),
        (Some(0), Some(1))
    );
    let v = call_ok(&alice, "restore_pii", json!({ "text": token })).await;
    assert_eq!(v["restored_text"], "ann@example.com", "{v}");

    // Nor does Bob's sandbox: its mounts are Bob's directories only.
    let v = call_ok(&bob, "execute_code", json!({"code": LOOK_AROUND})).await;
    assert_eq!(
        v["result"],
        json!({"workspace": [], "skill_files": false, "mentions_alice": false, "mounts_bob": true}),
        "{v}"
    );

    // Each tenant's stats count its own executions: Alice's two, Bob's one.
    assert_eq!(executions(&alice).await, 2);
    assert_eq!(executions(&bob).await, 1);

    // On the host, Alice's files are in her directory and Bob's holds none.
    let (alice_dir, bob_dir) = (server.tenant_dir("alice"), server.tenant_dir("bob"));
    let read = |path: &str| std::fs::read_to_string(alice_dir.join(path)).unwrap();
    assert_eq!(read("workspace/notes/secret.txt"), "alice only");
    assert_eq!(read("workspace/from_code.txt"), "by code");
    assert!(alice_dir.join("skills/alice_private.py").is_file());
    assert_eq!(entries(&bob_dir.join("workspace")), Vec::<String>::new());
    assert!(!bob_dir.join("skills/alice_private.py").exists());
    // Other users of the host cannot enter the tenants' directories.
    for dir in [server.data().join("tenants"), alice_dir, bob_dir] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }

    server.finish([alice, bob]).await;
}

/// What Bob's code sees: `/workspace`'s entries, whether Alice's skill file is at `/skills`,
/// and whether its mount table names Alice or Bob's tenant directory.
const LOOK_AROUND: &str = r#"
import os
mounts = open('/proc/self/mountinfo').read()
result = {
    "workspace": sorted(os.listdir('/workspace')),
    "skill_files": os.path.exists('/skills/alice_private.py'),
    "mentions_alice": 'alice' in mounts,
    "mounts_bob": '/tenants/bob/workspace' in mounts,
}
"#;

/// As root, each tenant's sandboxes run as the uid its name gives within `--tenant-uid-range`
/// (distinct, shown by `get_execution_stats`); its workspace is that uid's alone (0700) and its
/// skills its group's (0750). Defence in depth: Bob's workspace and skills bind-mounted into
/// Alice's workspace (a mount shared by mistake) give Alice's code EACCES, while Bob's code
/// reads the same file.
#[tokio::test]
#[ignore = "needs root: tenants' own uids and a bind mount between their workspaces"]
async fn a_tenants_files_stay_closed_to_another_tenants_sandbox_even_through_a_shared_mount() {
    use std::os::unix::fs::MetadataExt;
    assert!(
        rustix::process::geteuid().is_root(),
        "tenants' own uids need a server running as root: run with `-- --include-ignored` as root"
    );
    // No pool: every container is created after the mount below is made.
    let server = TenantServer::start(|c| {
        c.pool.pool_size = 0;
        c.pool.pool_max = 0;
    })
    .await;
    let range = code_execution_mcp::tenancy::uid::DEFAULT_RANGE;
    let (alice_uid, bob_uid) = (range.uid_of("alice"), range.uid_of("bob"));
    assert_ne!(alice_uid, bob_uid);
    let alice = server.client(ALICE).await;
    let bob = server.client(BOB).await;

    write_file(&bob, "secret.txt", "bob only").await;
    let v = call_ok(&bob, "execute_code", json!({"code": WHO_AND_READ})).await;
    assert_eq!(
        v["result"],
        json!({"uid": bob_uid, "gid": bob_uid, "read": "bob only"}),
        "{v}"
    );
    let v = call_ok(&alice, "get_execution_stats", json!({})).await;
    assert_eq!(
        v["sandbox_user"],
        json!({"uid": alice_uid, "gid": alice_uid, "source": "tenant"}),
        "{v}"
    );

    // On the host: each workspace its uid's alone, each skills directory its group's.
    for (tenant, uid) in [("alice", alice_uid), ("bob", bob_uid)] {
        let dir = server.tenant_dir(tenant);
        let m = std::fs::metadata(dir.join("workspace")).unwrap();
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (uid, uid, 0o700),
            "{tenant}"
        );
        let m = std::fs::metadata(dir.join("skills")).unwrap();
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (0, uid, 0o750),
            "{tenant}"
        );
    }
    let m = std::fs::metadata(server.workspace("bob").join("secret.txt")).unwrap();
    assert_eq!((m.uid(), m.gid()), (bob_uid, bob_uid));

    // A mistake: Bob's directories bound into Alice's workspace.
    let mounts = BindMounts::new(&[
        (
            server.workspace("bob"),
            server.workspace("alice").join("peek"),
        ),
        (
            server.tenant_dir("bob").join("skills"),
            server.workspace("alice").join("peek_skills"),
        ),
    ]);
    let v = call_ok(&alice, "execute_code", json!({"code": PEEK})).await;
    assert_eq!(
        v["result"],
        json!({
            "uid": alice_uid,
            "list": "EACCES",
            "read": "EACCES",
            "skills": "EACCES",
        }),
        "{v}"
    );
    let v = call_ok(&bob, "execute_code", json!({"code": WHO_AND_READ})).await;
    assert_eq!(v["result"]["read"], "bob only", "{v}");
    drop(mounts);

    server.finish([alice, bob]).await;
}

/// As root, a tenant's session state is its own: its blobs are root's and its group's only
/// (0640, in a directory only root enters), a large state loads in a sandbox running as the
/// tenant's uid through the container's own read-only state directory, which holds the blobs
/// of that state alone, and another tenant cannot name the session.
#[tokio::test]
#[ignore = "needs root: tenants' own uids"]
async fn a_tenants_session_state_is_its_own_and_loads_as_its_uid() {
    use std::os::unix::fs::MetadataExt;
    assert!(
        rustix::process::geteuid().is_root(),
        "tenants' own uids need a server running as root: run with `-- --include-ignored` as root"
    );
    let server = TenantServer::start(|_| {}).await;
    let alice_uid = code_execution_mcp::tenancy::uid::DEFAULT_RANGE.uid_of("alice");
    let alice = server.client(ALICE).await;
    let bob = server.client(BOB).await;
    let code = "import os\nbig = os.urandom(6_000_000)\nn = 1";
    let v = call_ok(
        &alice,
        "execute_code",
        json!({"code": code, "session": "new"}),
    )
    .await;
    let handle = v["session"].as_str().unwrap().to_string();
    let v = call_ok(
        &alice,
        "execute_code",
        json!({"code": STATE_SEEN, "session": handle}),
    )
    .await;
    let seen = &v["result"];
    assert_eq!(seen["uid"], alice_uid, "{v}");
    assert_eq!(seen["big"], 6_000_000, "{v}");
    assert_ne!(
        seen["write"], "allowed",
        "the state directory is read-only: {v}"
    );
    let files = seen["files"].as_array().unwrap();
    assert!(
        files.len() == 2 && files.iter().all(|f| f.as_str().unwrap().len() == 64),
        "the blobs of big and n alone: {v}"
    );
    let sessions = server.tenant_dir("alice").join("sessions");
    for dir in [sessions.clone(), sessions.join(".blobs")] {
        let m = std::fs::metadata(&dir).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700, "{}", dir.display());
    }
    for blob in std::fs::read_dir(sessions.join(".blobs")).unwrap() {
        let m = blob.unwrap().metadata().unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (0, alice_uid, 0o640));
    }
    let err = call_err(
        &bob,
        "execute_code",
        json!({"code": "pass", "session": handle}),
    )
    .await;
    assert!(err.contains(&handle) && err.contains("no session"), "{err}");
    server.finish([alice, bob]).await;
}

/// What a session's call sees of its state: its uid, the state, the state directory's files,
/// and whether it can write there.
const STATE_SEEN: &str = r#"
import errno, os
try:
    open('/mnt/state/x', 'w')
    write = "allowed"
except OSError as e:
    write = errno.errorcode.get(e.errno, str(e.errno))
result = {"uid": os.getuid(), "big": len(big), "files": sorted(os.listdir('/mnt/state')),
          "write": write}
"#;

/// Who the code runs as, and what it reads from `/workspace/secret.txt`.
const WHO_AND_READ: &str = r#"
import os
result = {"uid": os.getuid(), "gid": os.getgid(), "read": open('/workspace/secret.txt').read()}
"#;

/// Alice's code reaching for Bob's directories, mounted (by mistake) in her workspace.
const PEEK: &str = r#"
import errno, os
def attempt(f):
    try:
        f()
        return "allowed"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
result = {
    "uid": os.getuid(),
    "list": attempt(lambda: os.listdir('/workspace/peek')),
    "read": attempt(lambda: open('/workspace/peek/secret.txt').read()),
    "skills": attempt(lambda: os.listdir('/workspace/peek_skills')),
}
"#;

/// Bind mounts made by the test (`mount --bind SOURCE TARGET`, the target created), undone
/// when dropped.
struct BindMounts(Vec<PathBuf>);

impl BindMounts {
    fn new(pairs: &[(PathBuf, PathBuf)]) -> Self {
        let mut made = Self(vec![]);
        for (source, target) in pairs {
            std::fs::create_dir(target).unwrap();
            let status = std::process::Command::new("mount")
                .arg("--bind")
                .arg(source)
                .arg(target)
                .status()
                .expect("mount runs");
            assert!(status.success(), "mount --bind {source:?} {target:?}");
            made.0.push(target.clone());
        }
        made
    }
}

impl Drop for BindMounts {
    fn drop(&mut self) {
        for target in self.0.iter().rev() {
            let _ = std::process::Command::new("umount").arg(target).status();
        }
    }
}

#[tokio::test]
async fn http_answers_401_for_missing_or_wrong_tokens_and_health_needs_none() {
    let server = TenantServer::start(|_| {}).await;
    code_execution_mcp::install_tls_provider();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let url = server.http.url.as_str();

    let missing = post(&http, url, None, &[], initialize()).await;
    assert_eq!(missing.status(), 401);
    assert!(
        challenge(&missing).starts_with(r#"Bearer realm="code-execution-mcp""#),
        "{}",
        challenge(&missing)
    );
    assert!(!challenge(&missing).contains("invalid_token"));
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{body}"
    );

    let wrong_token = "mallory-0123456789abcdef0123456789abcdef";
    let wrong = post(&http, url, Some(wrong_token), &[], initialize()).await;
    assert_eq!(wrong.status(), 401);
    assert_eq!(
        challenge(&wrong),
        r#"Bearer realm="code-execution-mcp", error="invalid_token""#
    );
    let body = wrong.text().await.unwrap();
    assert!(
        body.contains("not valid") && !body.contains(wrong_token),
        "{body}"
    );

    // Without a token, even a body over the bound gets 401: authentication comes before reading.
    let huge = || vec![b' '; 70 << 20];
    let unread = post(&http, url, None, &[], huge()).await;
    assert_eq!(unread.status(), 401);

    // Only failed attempts so far: no tenant was opened.
    let tenants = server.data().join("tenants");
    assert!(!tenants.exists(), "{} exists", tenants.display());

    let health = http
        .get(url.replace("/mcp", "/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(
        health.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );

    // A valid token does not lift the Host and Origin allowlists or the body bound.
    let evil_host = post(
        &http,
        url,
        Some(ALICE),
        &[("host", "evil.example")],
        initialize(),
    )
    .await;
    assert_eq!(evil_host.status(), 403);
    let evil_origin = [("origin", "https://evil.example")];
    let from_page = post(&http, url, Some(ALICE), &evil_origin, initialize()).await;
    assert_eq!(from_page.status(), 403);
    let too_large = post(&http, url, Some(ALICE), &[], huge()).await;
    assert_eq!(too_large.status(), 413);

    // Alice's session answers Alice, and is unknown with Bob's token.
    let init = post(&http, url, Some(ALICE), &[], initialize()).await;
    assert_eq!(init.status(), 200);
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let session = [("mcp-session-id", session.as_str())];
    let _ = init.text().await;
    let ready = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let ready = post(&http, url, Some(ALICE), &session, ready.into()).await;
    assert_eq!(ready.status(), 202);
    let ping = || {
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            .to_string()
            .into_bytes()
    };
    let own = post(&http, url, Some(ALICE), &session, ping()).await;
    assert_eq!(own.status(), 200);
    assert!(own.text().await.unwrap().contains(r#""result":{}"#));
    let crossed = post(&http, url, Some(BOB), &session, ping()).await;
    assert_eq!(crossed.status(), 404);
    assert_eq!(
        crossed.text().await.unwrap(),
        "Not Found: Session not found"
    );

    server.finish([]).await;
}

#[tokio::test]
async fn a_tenant_at_its_limit_does_not_block_another() {
    let server = TenantServer::start(|c| {
        c.pool.max_concurrency = 2;
        c.tenants.tenant_max_concurrency = Some(1);
        c.pool.max_queue = 0;
        c.pool.pool_size = 0;
    })
    .await;
    let alice = server.client(ALICE).await;
    let bob = server.client(BOB).await;

    // Alice's first execution holds her one slot until the test releases it.
    let peer = alice.peer().clone();
    let first = tokio::spawn(async move {
        call_tool(
            &peer,
            "execute_code",
            json!({"code": HOLD, "timeout_seconds": 120}),
        )
        .await
    });
    let started = server.workspace("alice").join("started");
    wait_until("Alice's first execution runs", || started.exists()).await;

    let error = call_err(&alice, "execute_code", json!({"code": "result = 2"})).await;
    assert!(
        error.contains("busy") && error.contains("--tenant-max-concurrency"),
        "{error}"
    );
    let v = call_ok(&bob, "execute_code", json!({"code": "result = 'bob ran'"})).await;
    assert_eq!(v["result"], "bob ran");
    // The stats report the tenant's own limit, the one the busy error names.
    let stats = call_ok(&alice, "get_execution_stats", json!({})).await;
    assert_eq!(stats["limits"]["max_concurrency"], 1, "{stats}");
    assert!(!first.is_finished(), "Alice's first execution ended early");

    write_file(&alice, "release", "").await;
    let (is_error, v) = first.await.unwrap();
    assert!(!is_error, "{v}");
    assert_eq!(v["result"], "released", "{v}");

    server.finish([alice, bob]).await;
}

#[tokio::test]
async fn a_session_belongs_to_its_tenant() {
    let server = TenantServer::start(|_| {}).await;
    let alice = server.client(ALICE).await;
    let bob = server.client(BOB).await;
    let v = call_ok(
        &alice,
        "execute_code",
        json!({"code": "secret = 'alice only'", "session": "new"}),
    )
    .await;
    let handle = v["session"].as_str().expect("a handle").to_string();
    assert!(
        handle.starts_with("ses_"),
        "the handle is not tokenized: {v}"
    );
    assert_eq!(v["state"]["carried"], json!(["secret"]), "{v}");
    // Bob holds Alice's handle: refused, naming the session, never a silent new one.
    let error = call_err(
        &bob,
        "execute_code",
        json!({"code": "result = secret", "session": handle}),
    )
    .await;
    assert!(
        error.contains(&handle) && error.contains("session=\"new\""),
        "{error}"
    );
    assert!(!error.contains("alice only"), "{error}");
    let v = call_ok(
        &alice,
        "execute_code",
        json!({"code": "result = secret", "session": handle}),
    )
    .await;
    assert_eq!(v["result"], "alice only");
    let stats = call_ok(&alice, "get_execution_stats", json!({})).await;
    assert_eq!(stats["sessions"]["sessions"], 1, "{stats}");
    let stats = call_ok(&bob, "get_execution_stats", json!({})).await;
    assert_eq!(stats["sessions"]["sessions"], 0, "{stats}");
    assert!(
        server
            .tenant_dir("alice")
            .join("sessions")
            .join(&handle)
            .is_dir(),
        "kept under Alice's own directory"
    );
    server.finish([alice, bob]).await;
}

/// Signals that it runs, then waits (up to 100 s) for the file `release`.
#[tokio::test]
async fn with_tokens_the_server_listens_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let access = code_execution_mcp::transport::http_access(tenant_config(dir.path()))
        .await
        .expect("the server starts");
    let server = HttpServer::serve_on(access, "0.0.0.0:0".parse().unwrap()).await;
    assert!(server.addr.ip().is_unspecified(), "{}", server.addr);
    code_execution_mcp::install_tls_provider();
    let health = reqwest::Client::new()
        .get(server.url.replace("/mcp", "/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    server.stop().await;
    common::assert_no_containers_under(dir.path()).await;
}

const HOLD: &str = r#"
import os, time
open('/workspace/started', 'w').close()
deadline = time.time() + 100
while not os.path.exists('/workspace/release') and time.time() < deadline:
    time.sleep(0.05)
result = 'released' if os.path.exists('/workspace/release') else 'timed out'
"#;

/// With `--pii-key-file`, each tenant's tokens come from its own derived secret and its vault is
/// kept in its own directory, where another server holding the key restores them.
#[tokio::test]
async fn with_a_key_file_each_tenant_has_its_own_tokens_and_vault_file() {
    let key_dir = tempfile::tempdir().unwrap();
    let key_file = key_dir.path().join("pii.key");
    std::fs::write(&key_file, "c3".repeat(32)).unwrap();
    let server = TenantServer::start(|c| {
        c.pii.pii_key_file = Some(key_file.clone());
        c.pool.pool_size = 0;
        c.pool.pool_max = 0;
    })
    .await;
    let alice = server.client(ALICE).await;
    let bob = server.client(BOB).await;
    let text = json!({"text": "ann@example.com"});
    let alices = call_ok(&alice, "sanitize_pii", text.clone()).await["sanitized_text"].clone();
    let bobs = call_ok(&bob, "sanitize_pii", text).await["sanitized_text"].clone();
    assert_ne!(alices, bobs, "tenants get different tokens");
    let v = call_ok(&bob, "restore_pii", json!({ "text": alices })).await;
    assert_eq!(v["unknown"], 1, "{v}");

    for tenant in ["alice", "bob"] {
        let vault = server.tenant_dir(tenant).join("pii/vault");
        let mode = std::fs::metadata(&vault).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", vault.display());
    }
    // Another server with the key, on the same storage (in-process here): Alice's token.
    let key = code_execution_mcp::pii::PiiKey::from_file(&key_file).unwrap();
    let elsewhere = code_execution_mcp::pii::PiiEngine::with_key(
        &key,
        code_execution_mcp::pii::Scope::Tenant("alice"),
        100,
        &server.tenant_dir("alice").join("pii/vault"),
    )
    .unwrap();
    assert_eq!(
        elsewhere.restore(alices.as_str().unwrap()).text,
        "ann@example.com"
    );
    assert_eq!(
        elsewhere.sanitize("ann@example.com").text,
        alices.as_str().unwrap()
    );
    server.finish([alice, bob]).await;
}

/// An HTTP server with tokens for Alice and Bob, its data in a temp dir.
struct TenantServer {
    http: HttpServer,
    dir: tempfile::TempDir,
}

impl TenantServer {
    async fn start(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut c = tenant_config(dir.path());
        adjust(&mut c);
        let access = code_execution_mcp::transport::http_access(c)
            .await
            .expect("the server starts (is the image built?)");
        let http = HttpServer::serve(access).await;
        Self { http, dir }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn tenant_dir(&self, tenant: &str) -> PathBuf {
        self.data().join("tenants").join(tenant)
    }

    fn workspace(&self, tenant: &str) -> PathBuf {
        self.tenant_dir(tenant).join("workspace")
    }

    /// An MCP client sending `token`.
    async fn client(&self, token: &str) -> RunningService<RoleClient, ()> {
        common::http_client(&self.http.url, Some(token)).await
    }

    /// Closes the clients, stops the server and checks that it left no container.
    async fn finish<const N: usize>(self, clients: [RunningService<RoleClient, ()>; N]) {
        for client in clients {
            client.cancel().await.unwrap();
        }
        self.http.stop().await;
        common::assert_no_containers_under(self.dir.path()).await;
    }
}

/// HTTP with Alice's and Bob's tokens, data under `dir/data`.
fn tenant_config(dir: &Path) -> Config {
    let mut c = common::config_in(dir);
    c.storage.workspace = None;
    c.storage.skills_dir = None;
    c.storage.data_dir = Some(dir.join("data"));
    c.transport.transport = Transport::Http;
    c.tenants.tokens = Some(Secret(format!("alice:{ALICE},bob:{BOB}")));
    c
}

/// A tool call that must succeed; returns its structured content.
async fn call_ok(client: &Peer<RoleClient>, tool: &'static str, args: Value) -> Value {
    let (is_error, v) = call_tool(client, tool, args).await;
    assert!(!is_error, "{tool} failed: {v}");
    v
}

/// A tool call that must fail; returns its error text.
async fn call_err(client: &Peer<RoleClient>, tool: &'static str, args: Value) -> String {
    let (is_error, v) = call_tool(client, tool, args).await;
    assert!(is_error, "{tool} succeeded: {v}");
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

async fn write_file(client: &Peer<RoleClient>, filename: &str, content: &str) {
    let args = json!({"filename": filename, "content": content});
    call_ok(client, "write_workspace_file", args).await;
}

async fn skill_names(client: &Peer<RoleClient>) -> Vec<String> {
    let v = call_ok(client, "list_skills", json!({})).await;
    let skills = v["skills"].as_array().unwrap();
    skills
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect()
}

async fn executions(client: &Peer<RoleClient>) -> u64 {
    let v = call_ok(client, "get_execution_stats", json!({})).await;
    v["executions"]["executions_total"].as_u64().unwrap()
}

/// The one token in sanitized text, e.g. `[EMAIL_ab12cd34]`.
fn pii_token(text: &str) -> String {
    let start = text
        .find('[')
        .unwrap_or_else(|| panic!("no token in {text}"));
    let end = start + text[start..].find(']').unwrap();
    text[start..=end].to_owned()
}

/// The names in a directory, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn wait_until(what: &str, check: impl Fn() -> bool) {
    for _ in 0..600 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: not within 60 s");
}

fn initialize() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "tenants-test", "version": "0"}}})
    .to_string()
    .into_bytes()
}

/// POSTs a JSON body to `/mcp` with an optional bearer token and extra headers.
async fn post(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> reqwest::Response {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(body).send().await.expect("the server answers")
}

/// The `WWW-Authenticate` header of a response.
fn challenge(response: &reqwest::Response) -> String {
    let value = &response.headers()["www-authenticate"];
    value.to_str().unwrap().to_owned()
}
