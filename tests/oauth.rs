//! OAuth 2.1 on the HTTP endpoint, against a real authorization server: Authlib's, run on
//! loopback by `tests/python/oauth_provider.py` (dynamic registration, PKCE, RFC 9068 JWT access
//! tokens with the resource indicator as `aud`, introspection), and the real engine.
//!
//! The official MCP Python SDK's OAuth client (`tests/python/oauth_client.py`) knows only the
//! server's URL: it meets the 401, discovers the metadata, registers, signs in over HTTP with
//! PKCE and runs code on both protocol eras as its tenant. Forged and misdirected tokens (made
//! by the test: `alg: none`, HS256 keyed with the provider's public key, a key id the provider
//! does not publish, a signature of another key, another service's audience, expired, a missing
//! scope, no tenant) are refused, and none of them runs code: the file their code would write
//! is absent and the audit trail holds no record of them. A session belongs to the user who
//! began it. A provider that is down, slow or answers garbage never crashes the server:
//! cached keys keep working up to their maximum age, then 503 with Retry-After while `/health`
//! stays 200 and names the problem.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use code_execution_mcp::config::{Config, Secret, Transport};
use common::HttpServer;
use serde_json::{Value, json};

const STATIC_TOKEN: &str = "ci-0123456789abcdef0123456789abcdef";

/// The Authlib provider, killed when dropped.
struct Provider {
    child: Child,
    url: String,
    credentials: PathBuf,
    _dir: tempfile::TempDir,
}

impl Provider {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (url_file, credentials) = (dir.path().join("url"), dir.path().join("introspection"));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/oauth_provider.py");
        let mut child = Command::new(common::upstreams::sdk_python())
            .arg(script)
            .arg(&url_file)
            .arg("--introspection-credentials")
            .arg(&credentials)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("run the test provider");
        let began = Instant::now();
        while !url_file.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the test provider exited: {status} (are authlib and flask installed? see tests/upstream-pins.txt)"
                );
            }
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "the test provider did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let url = std::fs::read_to_string(&url_file)
            .unwrap()
            .trim()
            .to_string();
        Self {
            child,
            url,
            credentials,
            _dir: dir,
        }
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let response = reqwest::Client::new()
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        serde_json::from_str(&response.text().await.unwrap()).unwrap()
    }

    /// A token the provider makes: `body` as /test/mint takes it.
    async fn mint(&self, body: Value) -> String {
        self.post("/test/mint", body).await["token"]
            .as_str()
            .unwrap()
            .to_string()
    }

    async fn jwks_mode(&self, mode: Value) {
        self.post("/test/jwks-mode", mode).await;
    }

    async fn stats(&self) -> Value {
        let text = reqwest::get(format!("{}/test/stats", self.url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server with OAuth (and one static token, tenant `ci`), its data in a temporary directory.
struct Server {
    http: HttpServer,
    dir: tempfile::TempDir,
    base: String,
}

impl Server {
    async fn start(provider: &Provider, adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = common::free_port();
        let base = format!("http://127.0.0.1:{port}");
        let tenants = dir.path().join("oauth-tenants");
        std::fs::write(&tenants, "team-a = team-a\nteam-b = team-b, ops\n").unwrap();
        let mut c = common::config_in(dir.path());
        c.storage.workspace = None;
        c.storage.skills_dir = None;
        c.storage.data_dir = Some(dir.path().join("data"));
        c.transport.transport = Transport::Http;
        c.tenants.tokens = Some(Secret(format!("ci:{STATIC_TOKEN}")));
        c.oauth.public_url = Some(base.clone());
        c.oauth.oauth_issuers = vec![provider.url.clone()];
        c.oauth.oauth_tenants = Some(tenants);
        c.oauth.oauth_scopes = vec!["mcp:run".into()];
        c.operations.audit = true;
        adjust(&mut c);
        let access = code_execution_mcp::transport::http_access(c)
            .await
            .expect("the server starts (is the image built?)");
        let http = HttpServer::serve_on(access, format!("127.0.0.1:{port}").parse().unwrap()).await;
        Self { http, dir, base }
    }

    fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn workspace(&self, tenant: &str) -> PathBuf {
        self.dir
            .path()
            .join("data/tenants")
            .join(tenant)
            .join("workspace")
    }

    /// Every audit record of every tenant.
    fn audit(&self) -> Vec<Value> {
        let mut records = Vec::new();
        let root = self.dir.path().join("data/audit");
        for tenant in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(tenant.path()).unwrap().flatten() {
                let text = std::fs::read_to_string(file.path()).unwrap();
                records.extend(
                    text.lines()
                        .map(|l| serde_json::from_str::<Value>(l).unwrap()),
                );
            }
        }
        records
    }

    /// Files named `forged-*` in any tenant's workspace.
    fn forged_files(&self) -> Vec<PathBuf> {
        let root = self.dir.path().join("data/tenants");
        let mut found = Vec::new();
        for tenant in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(tenant.path().join("workspace"))
                .into_iter()
                .flatten()
                .flatten()
            {
                if file.file_name().to_string_lossy().starts_with("forged-") {
                    found.push(file.path());
                }
            }
        }
        found
    }

    async fn finish(self) {
        self.http.stop().await;
        common::assert_no_containers_under(self.dir.path()).await;
    }
}

/// An HTTP answer: status, headers, body.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: String,
}

impl Answer {
    fn challenge(&self) -> String {
        self.headers
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
}

/// POSTs a JSON-RPC message to `/mcp` with `token` as the bearer (if any) in `session`.
async fn post(url: &str, token: Option<&str>, session: Option<&str>, message: Value) -> Answer {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(message.to_string());
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    Answer {
        status,
        headers,
        body: response.text().await.unwrap(),
    }
}

/// A legacy session begun with `token`: its id.
async fn initialize(url: &str, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "1"}}});
    let answer = post(url, Some(token), None, init).await;
    assert_eq!(answer.status, 200, "initialize: {}", answer.body);
    let session = answer.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = post(url, Some(token), Some(&session), initialized).await;
    assert!(
        answer.status < 300,
        "initialized: {} {}",
        answer.status,
        answer.body
    );
    session
}

/// `execute_code` writing `/workspace/NAME` in `session`.
async fn write_by_code(url: &str, token: &str, session: &str, name: &str) -> Answer {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "execute_code",
        "arguments": {"code": format!("open('/workspace/{name}', 'w').write('ran')\nresult = 42")}}});
    post(url, Some(token), Some(session), call).await
}

fn claims(server: &Server, provider: &Provider, extra: Value) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut c = json!({
        "iss": provider.url, "sub": "user-alice", "aud": server.resource(), "iat": now,
        "nbf": now, "exp": now + 600, "client_id": "oauth-test", "scope": "mcp:run",
        "tenant": "team-a", "jti": format!("j-{}", rand_suffix()),
    });
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[tokio::test]
async fn a_client_that_knows_only_the_url_signs_in_and_runs_code_as_its_tenant() {
    let provider = Provider::start();
    let server = Server::start(&provider, |_| {}).await;
    let (url, python) = (server.http.url.clone(), common::upstreams::sdk_python());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/oauth_client.py");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(["-W", "ignore::DeprecationWarning"])
            .arg(script)
            .args([url.as_str(), "alice", "pw-alice"])
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    assert!(
        out.status.success(),
        "the OAuth client failed: {}",
        out.status
    );
    let flow: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(flow["unauthorized_first"], true, "{flow}");
    assert_eq!(flow["metadata_fetched"], true, "{flow}");
    assert_eq!(flow["registered"], true, "{flow}");
    assert_eq!(flow["pkce"], true, "{flow}");
    assert_eq!(flow["resource"], server.resource(), "{flow}");
    assert_eq!(flow["token_audience"], server.resource(), "{flow}");
    assert_eq!(flow["eras"], json!(["legacy", "auto"]), "{flow}");

    // It ran as team-a: its files are in team-a's workspace, and nowhere else.
    let files: Vec<String> = std::fs::read_dir(server.workspace("team-a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!files.is_empty(), "team-a's workspace is empty");
    assert!(!server.workspace("team-b").exists());
    // The audit trail names the user by a token and the client by its id.
    let records = server.audit();
    assert!(!records.is_empty(), "no audit record");
    for record in &records {
        assert_eq!(record["tenant"], "team-a", "{record}");
        let subject = record["oauth_subject"].as_str().unwrap_or_default();
        assert!(subject.starts_with("[USER_ID_"), "{record}");
        assert!(!record.to_string().contains("user-alice"), "{record}");
        assert!(record["oauth_client_id"].is_string(), "{record}");
    }
    server.finish().await;
}

/// What a request without a token is told: where the metadata is, which scope to ask for.
#[tokio::test]
async fn the_metadata_and_the_challenge_send_a_client_to_the_provider() {
    let provider = Provider::start();
    let server = Server::start(&provider, |_| {}).await;
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", server.base))
            .header("origin", "https://claude.ai")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["access-control-allow-origin"], "*");
        assert!(
            response.headers()["access-control-expose-headers"]
                .to_str()
                .unwrap()
                .contains("WWW-Authenticate")
        );
        let metadata: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(metadata["resource"], server.resource());
        assert_eq!(metadata["authorization_servers"], json!([provider.url]));
        assert_eq!(metadata["scopes_supported"], json!(["mcp:run"]));
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    let answer = post(&server.http.url, None, None, init).await;
    assert_eq!(answer.status, 401);
    assert_eq!(
        answer.challenge(),
        format!(
            r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp", scope="mcp:run""#,
            server.base
        )
    );
    // The static token of the tokens file still works beside OAuth.
    initialize(&server.http.url, STATIC_TOKEN).await;
    server.finish().await;
}

#[tokio::test]
async fn forged_and_misdirected_tokens_are_refused_and_run_no_code() {
    let provider = Provider::start();
    // A key the provider signed with and no longer publishes, before the server reads the keys.
    let dropped = provider.post("/test/rotate", json!({})).await["kid"]
        .as_str()
        .unwrap()
        .to_string();
    provider
        .post("/test/rotate", json!({"drop_old": true}))
        .await;
    let server = Server::start(&provider, |_| {}).await;
    let url = server.http.url.clone();
    let valid = provider
        .mint(json!({"claims": claims(&server, &provider, json!({}))}))
        .await;
    // A session begun with a valid token, which forged ones try to ride.
    let session = initialize(&url, &valid).await;
    let c = |extra: Value| claims(&server, &provider, extra);
    let signed_by_dropped_key = provider
        .mint(json!({"claims": c(json!({})), "kid": dropped}))
        .await;
    let current = provider.mint(json!({"claims": c(json!({}))})).await;
    // The current key's header and claims with the dropped key's signature.
    let (current_input, dropped_sig) = (
        current.rsplit_once('.').unwrap().0,
        signed_by_dropped_key.rsplit_once('.').unwrap().1,
    );
    let cases = [
        (
            provider
                .mint(json!({"claims": c(json!({})), "alg": "none"}))
                .await,
            401,
            "algorithm 'none'",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({})), "alg": "HS256-with-public-key"}))
                .await,
            401,
            "algorithm 'HS256'",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({})), "kid": "no-such-key"}))
                .await,
            401,
            "kid",
        ),
        (signed_by_dropped_key.clone(), 401, "kid"),
        (
            format!("{current_input}.{dropped_sig}"),
            401,
            "signature does not verify",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({"aud": "https://other.example.com/mcp"}))}))
                .await,
            401,
            "meant for another service",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({"exp": 1_000_000_000, "nbf": null, "iat": null}))}))
                .await,
            401,
            "expired",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({"exp": "99999999999"}))}))
                .await,
            401,
            "exp is not a number",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({"scope": "mcp:read"}))}))
                .await,
            403,
            "lacks the scope mcp:run",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({"tenant": null}))}))
                .await,
            401,
            "no tenant claim",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({"tenant": "no-such-team"}))}))
                .await,
            401,
            "names no tenant",
        ),
        (
            provider
                .mint(json!({"claims": c(json!({"iss": "http://127.0.0.1:1"}))}))
                .await,
            401,
            "issuer is not one",
        ),
        ("not-a-token".to_string(), 401, "not a JWT"),
        ("a.b.c".to_string(), 401, "base64url"),
        ("e".repeat(20_000), 401, "over 16 KiB"),
    ];
    for (n, (token, status, why)) in cases.iter().enumerate() {
        let answer = write_by_code(&url, token, &session, &format!("forged-{n}")).await;
        assert_eq!(answer.status, *status, "case {n} ({why}): {}", answer.body);
        let challenge = answer.challenge();
        assert!(challenge.contains(why), "case {n}: {challenge}");
        let expected_error = if *status == 403 {
            "insufficient_scope"
        } else {
            "invalid_token"
        };
        assert!(
            challenge.contains(&format!(r#"error="{expected_error}""#)),
            "case {n}: {challenge}"
        );
        assert!(
            !challenge.contains(token.as_str()) && !answer.body.contains(token.as_str()),
            "case {n} echoes the token"
        );
    }
    // The valid token in the same session does run code: the refusals above are what kept
    // their files away.
    let answer = write_by_code(&url, &valid, &session, "valid-call").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("42"), "{}", answer.body);
    assert!(server.workspace("team-a").join("valid-call").exists());
    assert_eq!(server.forged_files(), Vec::<PathBuf>::new());
    assert_eq!(
        server.audit().len(),
        1,
        "only the valid call is in the audit trail"
    );
    server.finish().await;
}

#[tokio::test]
async fn a_session_belongs_to_the_user_who_began_it() {
    let provider = Provider::start();
    let server = Server::start(&provider, |_| {}).await;
    let url = server.http.url.clone();
    let alice = provider
        .mint(json!({"claims": claims(&server, &provider, json!({}))}))
        .await;
    let amy = provider
        .mint(json!({"claims": claims(&server, &provider, json!({"sub": "user-amy"}))}))
        .await;
    let session = initialize(&url, &alice).await;
    let answer = write_by_code(&url, &amy, &session, "forged-amy").await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    let answer = write_by_code(&url, STATIC_TOKEN, &session, "forged-static").await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    // A new token of Alice's (a refresh) continues it.
    let refreshed = provider
        .mint(json!({"claims": claims(&server, &provider, json!({}))}))
        .await;
    let answer = write_by_code(&url, &refreshed, &session, "alice.txt").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(server.forged_files(), Vec::<PathBuf>::new());
    server.finish().await;
}

#[tokio::test]
async fn a_list_valued_or_nested_claim_names_the_tenant() {
    let provider = Provider::start();
    let server = Server::start(&provider, |c| {
        c.oauth.oauth_tenant_claim = "/realm_access/roles".into();
    })
    .await;
    let url = server.http.url.clone();
    let bob = provider
        .mint(json!({"claims": claims(&server, &provider, json!({"tenant": null, "realm_access": {"roles": ["staff", "ops"]}}))}))
        .await;
    let session = initialize(&url, &bob).await;
    let answer = write_by_code(&url, &bob, &session, "bob.txt").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(server.workspace("team-b").join("bob.txt").exists());
    server.finish().await;
}

#[tokio::test]
async fn opaque_tokens_are_introspected_and_inactive_ones_refused() {
    let provider = Provider::start();
    let credentials = provider.credentials.clone();
    let introspect = format!("{}/introspect", provider.url);
    let server = Server::start(&provider, move |c| {
        c.oauth.oauth_introspection = Some(introspect);
        c.oauth.oauth_introspection_credentials = Some(credentials);
    })
    .await;
    let url = server.http.url.clone();
    let opaque = provider
        .mint(json!({"claims": claims(&server, &provider, json!({})), "opaque": true}))
        .await;
    assert!(!opaque.contains('.'), "an opaque token");
    let session = initialize(&url, &opaque).await;
    let before = provider.stats().await["introspection_requests"]
        .as_u64()
        .unwrap();
    let answer = write_by_code(&url, &opaque, &session, "opaque.txt").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let after = provider.stats().await["introspection_requests"]
        .as_u64()
        .unwrap();
    assert_eq!(after, before, "the answer was cached");
    let unknown = "opaque0123456789abcdef0123456789";
    let answer = write_by_code(&url, unknown, &session, "forged-unknown").await;
    assert_eq!(answer.status, 401);
    assert!(
        answer.challenge().contains("not active"),
        "{}",
        answer.challenge()
    );
    let misdirected = provider
        .mint(json!({"claims": claims(&server, &provider, json!({"aud": "https://other.example.com/mcp"})), "opaque": true}))
        .await;
    let answer = write_by_code(&url, &misdirected, &session, "forged-aud").await;
    assert_eq!(answer.status, 401);
    assert!(answer.challenge().contains("meant for another service"));
    assert_eq!(server.forged_files(), Vec::<PathBuf>::new());
    server.finish().await;
}

/// Keys kept for their maximum age while the provider is down, then 503 with Retry-After and a
/// warning on a `/health` that stays 200; back when the provider is.
#[tokio::test]
async fn a_provider_that_is_down_slow_or_garbled_never_takes_the_server_down() {
    let provider = Provider::start();
    // Keys fetched at the first request are ten seconds old at most when the provider goes
    // down (a tenant's first opening takes a few on a busy machine).
    let server = Server::start(&provider, |c| c.oauth.oauth_jwks_max_age_secs = 10).await;
    let url = server.http.url.clone();
    let token = provider
        .mint(json!({"claims": claims(&server, &provider, json!({}))}))
        .await;
    let session = initialize(&url, &token).await;

    provider
        .jwks_mode(json!({"mode": "down", "metadata": "down"}))
        .await;
    let answer = write_by_code(&url, &token, &session, "cached.txt").await;
    assert_eq!(
        answer.status, 200,
        "cached keys still work: {}",
        answer.body
    );
    tokio::time::sleep(Duration::from_secs(11)).await;
    let answer = write_by_code(&url, &token, &session, "forged-down").await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert!(answer.headers.contains_key("retry-after"));
    let health = health(&server).await;
    assert_eq!(health.0, 200, "{}", health.1);
    assert!(
        health.1.contains("OAuth") && health.1.contains(&provider.url),
        "{}",
        health.1
    );

    // Slow, garbage, huge: each answered 503 within the fetch bound, never a crash.
    for mode in ["slow", "garbage", "huge"] {
        provider
            .jwks_mode(json!({"mode": mode, "metadata": "normal"}))
            .await;
        tokio::time::sleep(Duration::from_secs(10)).await;
        let began = Instant::now();
        let answer = write_by_code(&url, &token, &session, "forged-mode").await;
        assert_eq!(answer.status, 503, "{mode}: {}", answer.body);
        assert!(
            began.elapsed() < Duration::from_secs(15),
            "{mode}: {:?}",
            began.elapsed()
        );
    }

    // Back: the token works again, and a flood of unknown key ids costs the provider little.
    provider
        .jwks_mode(json!({"mode": "normal", "metadata": "normal"}))
        .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let answer = write_by_code(&url, &token, &session, "back.txt").await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let before = provider.stats().await["jwks_requests"].as_u64().unwrap();
    let flood = Instant::now();
    for n in 0..50 {
        let made_up = provider
            .mint(json!({"claims": claims(&server, &provider, json!({})), "kid": format!("made-up-{n}")}))
            .await;
        assert_eq!(
            write_by_code(&url, &made_up, &session, "forged-kid")
                .await
                .status,
            401
        );
    }
    let after = provider.stats().await["jwks_requests"].as_u64().unwrap();
    // At most one fetch for an unknown kid and one refresh every 10 s (REFETCH_GAP), however
    // many made-up ids came meanwhile (50 in a few seconds here).
    let allowed = 2 * (flood.elapsed().as_secs() / 10 + 1);
    assert!(
        after - before <= allowed,
        "{} JWKS fetches for 50 made-up key ids in {:?}",
        after - before,
        flood.elapsed()
    );
    assert_eq!(server.forged_files(), Vec::<PathBuf>::new());
    server.finish().await;
}

async fn health(server: &Server) -> (u16, String) {
    let response = reqwest::get(format!("{}/health", server.base))
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn bad_oauth_configuration_is_refused_at_start_saying_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let tenants = dir.path().join("tenants");
    std::fs::write(&tenants, "team-a = eng\nteam-b = ops, eng\n").unwrap();
    let mut c = common::config_in(dir.path());
    c.storage.workspace = None;
    c.storage.skills_dir = None;
    c.storage.data_dir = Some(dir.path().join("data"));
    c.transport.transport = Transport::Http;
    c.oauth.public_url = Some("https://mcp.example.com".into());
    c.oauth.oauth_issuers = vec!["https://idp.example.com".into()];
    c.oauth.oauth_tenants = Some(tenants.clone());
    let err = code_execution_mcp::transport::http_access(c.clone())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("line 2") && err.contains("team-a and team-b"),
        "{err}"
    );
    c.oauth.public_url = None;
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("--public-url"), "{err}");
    c.oauth.public_url = Some("http://mcp.example.com".into());
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("https"), "{err}");
    c.oauth.public_url = Some("https://mcp.example.com".into());
    c.oauth.oauth_issuers = vec!["http://idp.example.com".into()];
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("https"), "{err}");
}

/// The access token ends at the server: neither an upstream MCP server over HTTP nor an API
/// reached through guarded egress receives it (their own records say so).
#[tokio::test(flavor = "multi_thread")]
async fn the_access_token_goes_no_further_than_the_server() {
    let provider = Provider::start();
    let dir = tempfile::tempdir().unwrap();
    let ca = common::recording::test_ca(dir.path());
    let api = common::recording::Api::start(&ca, dir.path(), "api");
    let upstream = common::upstreams::http_fixture().await;
    let upstreams = dir.path().join("upstreams.json");
    let file = json!({
        "mcpServers": {"web": {"type": "http", "url": upstream.url}},
        "egress": {"127.0.0.1": {"ports": [api.port], "private": true}},
    });
    std::fs::write(&upstreams, file.to_string()).unwrap();
    let (ca_file, sockets) = (ca.ca.clone(), dir.path().join("sockets"));
    let server = Server::start(&provider, move |c| {
        c.gateway.upstreams = Some(upstreams);
        c.egress.egress_ca_file = Some(ca_file);
        c.egress.egress_socket_dir = Some(sockets);
    })
    .await;
    let url = server.http.url.clone();
    let token = provider
        .mint(json!({"claims": claims(&server, &provider, json!({}))}))
        .await;
    let session = initialize(&url, &token).await;
    let code = format!(
        "import urllib.request\n\
         from servers.web import header_names\n\
         names = header_names()['names']\n\
         urllib.request.urlopen('https://127.0.0.1:{}/echo', timeout=20).read()\n\
         result = names",
        api.port
    );
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "execute_code", "arguments": {"code": code}}});
    let answer = post(&url, Some(&token), Some(&session), call).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.body.contains("content-type"),
        "the upstream's header names: {}",
        answer.body
    );
    assert!(
        !answer.body.contains("authorization"),
        "the upstream got an Authorization header: {}",
        answer.body
    );
    let requests = api.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let recorded = serde_json::to_string(&requests).unwrap();
    assert!(
        !recorded.to_lowercase().contains("authorization"),
        "{recorded}"
    );
    let payload = token.split('.').nth(1).unwrap();
    assert!(
        !recorded.contains(payload),
        "the API received the token: {recorded}"
    );
    server.finish().await;
}
