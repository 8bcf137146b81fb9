//! Upload and download links against the real engine, over HTTP with tenants and without:
//! a file sent with `curl` lands whole, once, in its tenant's workspace (read back from disk,
//! by its hash, and by pandas in a sandbox); a link edited toward another tenant, sent with
//! another tenant's token, used again, expired, or sent a body past its limit, a bad name, a
//! wrong content type, a second upload at once or a stalled one writes nothing; a download
//! answers HEAD and ranges and is spent by its first whole GET, with the headers that keep a
//! browser from running it; a link passed to an upstream tool never reaches the upstream (its
//! own record); a 200 MB upload grows the server's memory by less than 32 MB. After each test
//! no sandbox container of its server is left.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use code_execution_mcp::config::{Config, Secret, Transport};
use common::{HttpServer, call_tool};
use futures::StreamExt;
use rmcp::RoleClient;
use rmcp::service::{Peer, RunningService};
use serde_json::{Value, json};
use sha2::Digest;
use tokio::process::Command;

const ALICE: &str = "alice-0123456789abcdef0123456789abcdef";
const BOB: &str = "bob-fedcba9876543210fedcba9876543210";

/// An HTTP server whose `--public-url` is its own loopback address.
struct LinkServer {
    http: HttpServer,
    dir: tempfile::TempDir,
    tenants: bool,
}

impl LinkServer {
    async fn start(tenants: bool, adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = common::free_port();
        let mut c = common::config_in(dir.path());
        c.transport.transport = Transport::Http;
        c.storage.data_dir = Some(dir.path().join("data"));
        c.oauth.public_url = Some(format!("http://127.0.0.1:{port}"));
        if tenants {
            c.storage.workspace = None;
            c.storage.skills_dir = None;
            c.tenants.tokens = Some(Secret(format!("alice:{ALICE},bob:{BOB}")));
        }
        adjust(&mut c);
        let access = code_execution_mcp::transport::http_access(c)
            .await
            .expect("the server starts (is the image built?)");
        let listen = format!("127.0.0.1:{port}").parse().unwrap();
        let http = HttpServer::serve_on(access, listen).await;
        Self { http, dir, tenants }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn workspace(&self, tenant: &str) -> PathBuf {
        if self.tenants {
            self.data().join("tenants").join(tenant).join("workspace")
        } else {
            self.dir.path().join("workspace")
        }
    }

    fn audit_dir(&self, tenant: &str) -> PathBuf {
        let name = if self.tenants { tenant } else { "_default" };
        self.data().join("audit").join(name)
    }

    async fn client(&self, token: Option<&str>) -> RunningService<RoleClient, ()> {
        common::http_client(&self.http.url, token).await
    }

    async fn finish<const N: usize>(self, clients: [RunningService<RoleClient, ()>; N]) {
        for client in clients {
            client.cancel().await.unwrap();
        }
        self.http.stop().await;
        common::assert_no_containers_under(self.dir.path()).await;
    }
}

/// A tool call that must succeed; its structured content.
async fn call_ok(client: &Peer<RoleClient>, tool: &'static str, args: Value) -> Value {
    let (err, v) = call_tool(client, tool, args).await;
    assert!(!err, "{tool} failed: {v}");
    v
}

/// `curl ARGS URL`: the status and the body.
async fn curl(args: &[&str], url: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .await
        .expect("curl runs (Debian's curl package)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

/// `curl -I`-like: the status and the lower-cased headers of a request with `args`.
async fn curl_headers(args: &[&str], url: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-D", "-"])
        .args(args)
        .arg(url)
        .output()
        .await
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).to_lowercase();
    let status = text
        .lines()
        .rev()
        .find(|l| l.starts_with("http/"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The files under `dir`, relative, sorted (none when it does not exist).
fn tree(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// The audit trail's transfer records under `dir`.
fn transfers(dir: &Path) -> Vec<Value> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        found.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| v.get("kind").is_some()),
        );
    }
    found
}

/// `url` with its token's tenant changed to `tenant`, the signature kept.
fn edited_toward(url: &str, tenant: &str) -> String {
    let (base, token) = url.rsplit_once('/').unwrap();
    let (payload, tag) = token.split_once('.').unwrap();
    let mut link: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    link["t"] = json!(tenant);
    let forged = URL_SAFE_NO_PAD.encode(link.to_string());
    format!("{base}/{forged}.{tag}")
}

#[tokio::test]
async fn a_file_sent_by_link_lands_once_in_its_own_tenants_workspace_only() {
    let server = LinkServer::start(true, |_| {}).await;
    let (alice, bob) = (
        server.client(Some(ALICE)).await,
        server.client(Some(BOB)).await,
    );
    let link = call_ok(
        &alice,
        "request_upload",
        json!({"filename": "in/sales.csv"}),
    )
    .await;
    let url = link["url"].as_str().unwrap().to_string();
    assert_eq!(link["uri"], "workspace:///in/sales.csv");
    assert!(url.starts_with(&format!(
        "http://127.0.0.1:{}/links/",
        server.http.addr.port()
    )));

    // Opening the page spends nothing, and the page can do nothing but its own script.
    for _ in 0..2 {
        let (status, headers) = curl_headers(&["-H", "Accept: text/html"], &url).await;
        assert_eq!(status, 200, "{headers}");
        for h in [
            "content-security-policy: default-src 'none'; script-src 'self'",
            "x-content-type-options: nosniff",
            "referrer-policy: no-referrer",
            "cache-control: no-store",
        ] {
            assert!(headers.contains(h), "{h} missing from:\n{headers}");
        }
    }
    let (_, page) = curl(&["-H", "Accept: text/html"], &url).await;
    assert!(
        page.contains("in/sales.csv") && page.contains("<label"),
        "{page}"
    );

    let src = server.dir.path().join("sales.csv");
    let rows: String = (0..5000)
        .map(|i| format!("{i},north,{}\n", i * 3))
        .collect();
    let content = format!("id,region,amount\n{rows}-1,contact carol.doe@example.com,0\n");
    std::fs::write(&src, &content).unwrap();
    let src_arg = src.to_str().unwrap();

    // Toward Bob, or with Bob's token: refused, nothing written anywhere.
    let (status, body) = curl(&["-T", src_arg], &edited_toward(&url, "bob")).await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = curl(
        &["-T", src_arg, "-H", &format!("Authorization: Bearer {BOB}")],
        &url,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("another workspace"), "{body}");
    assert_eq!(tree(&server.workspace("alice")), Vec::<String>::new());
    assert_eq!(tree(&server.workspace("bob")), Vec::<String>::new());

    // Alice's own token, or none: it lands.
    let (status, body) = curl(
        &[
            "-T",
            src_arg,
            "-H",
            &format!("Authorization: Bearer {ALICE}"),
        ],
        &url,
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let landed: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(landed["sha256"], sha256_hex(content.as_bytes()));
    assert_eq!(landed["size"], content.len());
    let on_disk = server.workspace("alice").join("in/sales.csv");
    assert_eq!(std::fs::read_to_string(&on_disk).unwrap(), content);
    let root_owner = std::fs::metadata(server.workspace("alice")).unwrap().uid();
    assert_eq!(
        std::fs::metadata(&on_disk).unwrap().uid(),
        root_owner,
        "owned like the workspace"
    );
    assert_eq!(tree(&server.workspace("bob")), Vec::<String>::new());

    // Used once: a second upload writes nothing.
    std::fs::write(&src, "id\n1\n").unwrap();
    for _ in 0..3 {
        let (status, body) = curl(&["-T", src_arg], &url).await;
        assert_eq!(status, 410, "{body}");
    }
    assert_eq!(std::fs::read_to_string(&on_disk).unwrap(), content);

    // The model sees it listed with its size and hash; code reads it with pandas.
    let listing = call_ok(&alice, "list_workspace_files", json!({})).await;
    assert_eq!(listing["files"], json!(["in/sales.csv"]));
    assert_eq!(listing["sizes"], json!([content.len()]));
    assert_eq!(
        listing["sha256"][0]["sha256"],
        sha256_hex(content.as_bytes())
    );
    let code =
        "import pandas as pd\nresult = int(pd.read_csv('/workspace/in/sales.csv')['amount'].sum())";
    let ran = call_ok(&alice, "execute_code", json!({"code": code})).await;
    assert_eq!(ran["result"], (0..5000).map(|i| i * 3).sum::<i64>());
    // The file stays as given; the model's view of it is tokenized like any workspace file's.
    assert!(
        std::fs::read_to_string(&on_disk)
            .unwrap()
            .contains("carol.doe@example.com")
    );
    let read = call_ok(
        &alice,
        "read_workspace_file",
        json!({"filename": "in/sales.csv"}),
    )
    .await;
    let seen = read["content"].as_str().unwrap();
    let tail = &seen[seen.len().saturating_sub(80)..];
    assert!(
        !seen.contains("carol.doe@example.com") && seen.contains("[EMAIL_"),
        "{tail}"
    );
    let bob_sees = call_ok(&bob, "list_workspace_files", json!({})).await;
    assert_eq!(bob_sees["files"], json!([]));

    // The trail: the upload under Alice, with the link's id and the hash; nothing under Bob.
    let records = transfers(&server.audit_dir("alice"));
    let ok: Vec<&Value> = records.iter().filter(|r| r["status"] == "ok").collect();
    assert_eq!(ok.len(), 1, "{records:?}");
    assert_eq!(ok[0]["kind"], "upload");
    assert_eq!(ok[0]["link_id"], link["link_id"]);
    assert_eq!(ok[0]["sha256"], sha256_hex(content.as_bytes()));
    // The refusals of a spent link: the first recorded, the rest counted only.
    let used = records.iter().filter(|r| r["status"] == "used").count();
    assert_eq!(used, 1, "{records:?}");
    assert!(transfers(&server.audit_dir("bob")).is_empty());
    server.finish([alice, bob]).await;
}

/// A body that sends `first` bytes, then waits until `release` resolves (or forever).
fn held_body(first: usize, release: tokio::sync::oneshot::Receiver<()>) -> reqwest::Body {
    let chunks = futures::stream::once(async move {
        Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'x'; first]))
    })
    .chain(futures::stream::once(async move {
        let _ = release.await;
        Err(std::io::Error::other("the client went away"))
    }));
    reqwest::Body::wrap_stream(chunks)
}

#[tokio::test]
async fn uploads_that_break_a_rule_are_refused_and_write_nothing() {
    let server = LinkServer::start(false, |_| {}).await;
    let client = server.client(None).await;
    let ws = server.workspace("");
    let outside = server.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("out")).unwrap();
    let src = server.dir.path().join("two-mib.bin");
    std::fs::write(&src, vec![7u8; 2 << 20]).unwrap();
    let (src_arg, small) = (src.to_str().unwrap(), server.dir.path().join("small.csv"));
    std::fs::write(&small, "a,b\n1,2\n").unwrap();
    let small_arg = small.to_str().unwrap();
    let upload = |args: Value| {
        let client = &client;
        async move {
            call_ok(client, "request_upload", args).await["url"]
                .as_str()
                .unwrap()
                .to_string()
        }
    };

    // A client that stalls is cut off (checked at the end: it waits out the idle timeout).
    let stalled = upload(json!({"filename": "stalled.bin"})).await;
    let (_keep, never) = tokio::sync::oneshot::channel::<()>();
    let stalling = tokio::spawn(async move {
        reqwest::Client::new()
            .put(&stalled)
            .body(held_body(1024, never))
            .send()
            .await
    });

    // Past the link's limit: 413, and the link still works for a file within it.
    let url = upload(json!({"filename": "limited.bin", "max_mb": 1})).await;
    assert_eq!(curl(&["-T", src_arg], &url).await.0, 413);
    assert_eq!(curl(&["-T", small_arg], &url).await.0, 201);

    // Names: none, with directories, NUL, too long, through a link out of the workspace.
    let url = upload(json!({})).await;
    for (path, status) in [
        ("", 400),
        ("/..%2F..%2Fetc%2Fpasswd", 400),
        ("/a%00b", 400),
        (&format!("/{}", "n".repeat(256)), 400),
    ] {
        let (got, body) = curl(&["-T", small_arg], &format!("{url}{path}")).await;
        assert_eq!(got, status, "{path}: {body}");
    }
    let through = upload(json!({"filename": "out/x.csv"})).await;
    let (got, body) = curl(&["-T", small_arg], &through).await;
    assert_eq!(got, 400, "{body}");
    for bad in ["../x.csv", "/etc/x.csv", "a\u{0}b"] {
        let (err, v) = call_tool(&client, "request_upload", json!({"filename": bad})).await;
        assert!(err, "{bad:?} was accepted: {v}");
    }

    // Wrong content types: a form that is not multipart, a PUT of a multipart envelope.
    let (got, _) = curl(
        &["-H", "Content-Type: text/plain", "--data-binary", "x"],
        &url,
    )
    .await;
    assert_eq!(got, 415);
    let (got, _) = curl(&["-X", "PUT", "-F", &format!("file=@{small_arg}")], &url).await;
    assert_eq!(got, 415);
    // A form whose file part never begins: cut off after 64 KiB, not held in memory.
    let no_boundary = ["-H", "Content-Type: multipart/form-data; boundary=XYZ"];
    let data = format!("@{src_arg}");
    let (got, body) = curl(
        &[no_boundary[0], no_boundary[1], "--data-binary", &data],
        &url,
    )
    .await;
    assert_eq!(got, 400, "{body}");

    // A second upload while one is in progress: 409; the first cancelled leaves nothing and
    // the link usable.
    let url = upload(json!({"filename": "once.csv"})).await;
    let (release, held) = tokio::sync::oneshot::channel();
    let first_url = url.clone();
    let first = tokio::spawn(async move {
        reqwest::Client::new()
            .put(&first_url)
            .body(held_body(64 << 10, held))
            .send()
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (got, body) = curl(&["-T", small_arg], &url).await;
    assert_eq!(got, 409, "{body}");
    release.send(()).unwrap();
    let _ = first.await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!ws.join("once.csv").exists());
    assert_eq!(curl(&["-T", small_arg], &url).await.0, 201);

    // An existing name is kept unless the link says overwrite.
    std::fs::write(ws.join("keep.csv"), "mine").unwrap();
    let (err, _) = call_tool(&client, "request_upload", json!({"filename": "keep.csv"})).await;
    assert!(err, "a link over an existing file without overwrite");
    let url = upload(json!({"filename": "later.csv"})).await;
    std::fs::write(ws.join("later.csv"), "mine").unwrap();
    assert_eq!(curl(&["-T", small_arg], &url).await.0, 409);
    assert_eq!(
        std::fs::read_to_string(ws.join("later.csv")).unwrap(),
        "mine"
    );
    let url = upload(json!({"filename": "keep.csv", "overwrite": true})).await;
    let (got, body) = curl(&["-T", small_arg], &url).await;
    assert_eq!(got, 201, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["overwritten"],
        true
    );

    // An expired link, signed with the server's own key: refused.
    let key = std::fs::read(server.data().join("links/key")).unwrap();
    let key = code_execution_mcp::links::LinkKey::from_bytes(&key).unwrap();
    let mut old = code_execution_mcp::links::Link::new(
        code_execution_mcp::links::Kind::Upload,
        None,
        Duration::from_secs(60),
    );
    old.max_bytes = 1 << 20;
    old.expires = 1;
    let expired = format!(
        "http://127.0.0.1:{}/links/{}",
        server.http.addr.port(),
        code_execution_mcp::links::token::seal(&old, &key)
    );
    assert_eq!(curl(&["-H", "Accept: text/html"], &expired).await.0, 410);
    assert_eq!(
        curl(&["-T", small_arg], &format!("{expired}/x.csv"))
            .await
            .0,
        410
    );

    let stalled = stalling
        .await
        .unwrap()
        .expect("the server answers a stalled upload");
    assert_eq!(stalled.status().as_u16(), 408);
    let mut landed = tree(&ws);
    landed.retain(|f| !f.starts_with("out"));
    assert_eq!(landed, ["keep.csv", "later.csv", "limited.bin", "once.csv"]);
    assert_eq!(tree(&outside), Vec::<String>::new());
    server.finish([client]).await;
}

#[tokio::test]
async fn a_download_answers_head_and_ranges_and_is_spent_by_its_first_whole_get() {
    let server = LinkServer::start(false, |_| {}).await;
    let client = server.client(None).await;
    let code = "import os\nos.makedirs('/workspace/out', exist_ok=True)\n\
        open('/workspace/out/report.csv', 'wb').write(bytes(range(256)) * 400)\n\
        open('/workspace/out/chart.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(64))\n\
        open('/workspace/out/page.svg', 'w').write('<svg onload=\"alert(1)\"/>')\nresult = 1";
    call_ok(&client, "execute_code", json!({"code": code})).await;
    let expected: Vec<u8> = (0..400).flat_map(|_| 0..=255u8).collect();
    let link = call_ok(
        &client,
        "request_download",
        json!({"path": "out/report.csv"}),
    )
    .await;
    let url = link["url"].as_str().unwrap().to_string();
    assert_eq!(link["max_bytes"], expected.len());

    let (status, headers) = curl_headers(&["-I"], &url).await;
    assert_eq!(status, 200, "{headers}");
    for h in [
        "content-disposition: attachment; filename*=utf-8''report%2ecsv",
        "content-security-policy: sandbox",
        "x-content-type-options: nosniff",
        "referrer-policy: no-referrer",
        "cache-control: no-store",
        "accept-ranges: bytes",
        &format!("content-length: {}", expected.len()),
    ] {
        assert!(headers.contains(h), "{h} missing from:\n{headers}");
    }
    let part = reqwest::Client::new()
        .get(&url)
        .header("Range", "bytes=10-19")
        .send()
        .await
        .unwrap();
    assert_eq!(part.status().as_u16(), 206);
    assert_eq!(part.bytes().await.unwrap().as_ref(), &expected[10..20]);
    let whole = reqwest::get(&url).await.unwrap();
    assert_eq!(whole.status().as_u16(), 200);
    assert_eq!(whole.bytes().await.unwrap().as_ref(), &expected[..]);
    // Spent once the whole file went out (the marker is written as the last byte leaves).
    let mut again = 0;
    for _ in 0..50 {
        again = reqwest::get(&url).await.unwrap().status().as_u16();
        if again == 410 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(again, 410, "the link is spent by its first whole download");

    // A download to the file's end is one at a time; cut short, it leaves the link usable;
    // a range to the end (a resumed download) spends it like a whole one.
    // (A file the socket's buffers cannot take whole while its reader waits.)
    let big: Vec<u8> = (0..64u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(server.workspace("").join("out/big.bin"), &big).unwrap();
    let link = call_ok(&client, "request_download", json!({"path": "out/big.bin"})).await;
    let url = link["url"].as_str().unwrap().to_string();
    let held = reqwest::get(&url).await.unwrap();
    assert_eq!(held.status().as_u16(), 200);
    assert_eq!(reqwest::get(&url).await.unwrap().status().as_u16(), 409);
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let tail = reqwest::Client::new()
        .get(&url)
        .header("Range", "bytes=100-")
        .send()
        .await
        .unwrap();
    assert_eq!(tail.status().as_u16(), 206, "the link was left usable");
    assert_eq!(tail.bytes().await.unwrap().as_ref(), &big[100..]);
    let mut after_tail = 0;
    for _ in 0..50 {
        after_tail = reqwest::get(&url).await.unwrap().status().as_u16();
        if after_tail == 410 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(after_tail, 410, "a range to the end spends the link");

    // Pictures are shown, anything else (SVG too) saved.
    for (path, disposition) in [("out/chart.png", "inline"), ("out/page.svg", "attachment")] {
        let link = call_ok(&client, "request_download", json!({"path": path})).await;
        let (_, headers) = curl_headers(&["-I"], link["url"].as_str().unwrap()).await;
        assert!(
            headers.contains(&format!("content-disposition: {disposition}")),
            "{headers}"
        );
    }
    for bad in ["missing.csv", "../etc/passwd", "out"] {
        let (err, v) = call_tool(&client, "request_download", json!({"path": bad})).await;
        assert!(err, "{bad:?} was accepted: {v}");
    }
    // An upload verb on a download link.
    let link = call_ok(
        &client,
        "request_download",
        json!({"path": "out/chart.png"}),
    )
    .await;
    let (got, _) = curl(&["-T", "/etc/hostname"], link["url"].as_str().unwrap()).await;
    assert_eq!(got, 405);

    let records = transfers(&server.audit_dir(""));
    let whole = records
        .iter()
        .find(|r| r["kind"] == "download" && r["status"] == "ok")
        .unwrap_or_else(|| panic!("no whole download recorded: {records:?}"));
    assert_eq!(whole["sha256"], sha256_hex(&expected));
    assert!(
        records.iter().any(|r| r["status"] == "partial"),
        "{records:?}"
    );
    server.finish([client]).await;
}

#[tokio::test]
async fn a_link_passed_to_an_upstream_tool_never_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let upstreams = common::upstreams::upstreams_file(
        dir.path(),
        json!({"fx": common::upstreams::fixture_entry(&["--calls-log", log.to_str().unwrap()])}),
    );
    let t = common::TestApp::start_with(move |c| {
        c.gateway.upstreams = Some(upstreams);
        // A stdio server's links (this test makes them, and serves none).
        c.oauth.public_url = Some("http://127.0.0.1:9".into());
        c.links.links_listen = Some("127.0.0.1:9".parse().unwrap());
    })
    .await;
    let client = common::mcp_client(t.app.clone()).await;
    call_ok(
        &client,
        "write_workspace_file",
        json!({"filename": "r.txt", "content": "x"}),
    )
    .await;
    let link = call_ok(&client, "request_download", json!({"path": "r.txt"})).await;
    let url = link["url"].as_str().unwrap();
    let code = format!(
        "from servers.fx import echo\n\
         try:\n    echo(value={{'note': 'see {url} now'}})\n    sent = 'sent'\n\
         except Exception as e:\n    sent = str(e)\n\
         echo(value='plain')\nresult = sent"
    );
    let ran = call_ok(&client, "execute_code", json!({"code": code})).await;
    let said = ran["result"].as_str().unwrap_or_default();
    assert!(said.contains("upload or download link"), "{ran}");
    // The upstream's own record: the plain call arrived, the one with the link did not.
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(calls.contains("plain"), "{calls}");
    assert!(
        !calls.contains("/links/"),
        "the link reached the upstream: {calls}"
    );
    client.cancel().await.unwrap();
    t.finish().await;
}

/// A line of `/proc/PID/status` in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[tokio::test]
async fn a_200_mb_upload_grows_the_servers_memory_by_less_than_32_mb() {
    code_execution_mcp::install_tls_provider();
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let base = format!("http://127.0.0.1:{port}");
    let listen = format!("127.0.0.1:{port}");
    let mut child = common::serve_command(
        dir.path(),
        &[
            "--transport",
            "http",
            "--listen",
            &listen,
            "--public-url",
            &base,
        ],
    )
    .spawn()
    .unwrap();
    let pid = child.id().unwrap();
    let health = format!("{base}/health");
    let mut healthy = false;
    for _ in 0..600 {
        if reqwest::get(&health).await.is_ok_and(|r| r.status() == 200) {
            healthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(healthy, "the server became healthy");
    let client = common::http_client(&format!("{base}/mcp"), None).await;
    let link = call_ok(&client, "request_upload", json!({"filename": "big.bin"})).await;
    let src = dir.path().join("big.bin");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&src).unwrap();
        let block: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
        for _ in 0..200 {
            f.write_all(&block).unwrap();
        }
    }
    // The peak from now on: clear_refs 5 resets VmHWM to the present size.
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
    let before = status_kib(pid, "VmRSS:");
    let (status, body) = curl(
        &["-T", src.to_str().unwrap()],
        link["url"].as_str().unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let peak = status_kib(pid, "VmHWM:");
    let grew_mib = peak.saturating_sub(before) as f64 / 1024.0;
    eprintln!(
        "200 MiB upload: server RSS {before} KiB before, peak {peak} KiB ({grew_mib:.1} MiB more)"
    );
    assert!(
        grew_mib < 32.0,
        "the server's memory grew by {grew_mib:.1} MiB"
    );
    assert_eq!(
        std::fs::metadata(dir.path().join("workspace/big.bin"))
            .unwrap()
            .len(),
        200 << 20
    );
    client.cancel().await.unwrap();
    common::stop_with_sigterm(&mut child).await;
    common::assert_no_containers_under(dir.path()).await;
}

/// The official Python SDK on both eras, over stdio with `--links-listen` and over HTTP with
/// tenants: uploads by PUT and by form, notifications, listings with hashes, pandas reading
/// the file, downloads with ranges, another tenant's token and an edited link refused, the
/// audit trail (tests/python/upload_links.py).
#[test]
fn the_python_sdk_uploads_and_downloads_by_link_on_both_eras() {
    common::run_python_client("upload_links.py");
}

/// A person's browser (Debian's chromium, driven by Selenium): a throttled upload through the
/// picker with the progress bar seen moving, a 50 MB CSV dropped on the page and read by
/// pandas, the spent link's page (tests/python/upload_page.py).
#[test]
fn a_person_uploads_through_the_page_in_a_real_browser() {
    common::run_python_client("upload_page.py");
}
