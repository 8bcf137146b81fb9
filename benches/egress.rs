//! What guarded egress costs: `cargo bench --bench egress` (needs nginx: Debian's `nginx`).
//!
//! nginx serves HTTPS on loopback with a certificate of a CA this bench makes; an in-process
//! server (data image, pool of 1) lists it as an `egress` entry and trusts that CA. One Python
//! client runs twice per row, interleaved: on the host straight to nginx, and in the sandbox
//! through the server's proxy (the container's forwarder, the Unix socket, the proxy's TLS on
//! both sides):
//!
//! 1. a small GET (64 bytes) on one kept-alive connection, BENCH_REQUESTS times (200): p50 and
//!    p90 per request, against the target p50 ≤ 2 × direct + 3 ms;
//! 2. a download of BENCH_DOWNLOAD_MB (512) read in 1 MiB chunks: MB/s, against the target of
//!    half the direct rate;
//!
//! each quiet, then with one core held by a busy loop this bench starts and stops. The
//! sandbox side is one execution per row: no container starts beside it.
//!
//! Warm-up: the server starts, its pool fills, and one small GET through the proxy runs before
//! any row. Figures on a shared machine are noisy: compare the ratios of one run.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use serde_json::{Value, json};

use code_execution_mcp::app::App;
use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::sandbox::stats::percentile;
use common::busy::BusyCore;
use common::config::defaults_in;
use common::in_process::wait_for_pool;
use common::knobs::env_usize;

/// The client, the same on both sides: `HTTPS_PROXY` (the sandbox's) decides whether it
/// tunnels through the server. Its result is the small GETs' times and the download's rate.
const CLIENT: &str = r#"
import http.client, os, ssl, time, urllib.parse

def connection():
    context = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE") or CA)
    proxy = os.environ.get("HTTPS_PROXY")
    if not proxy:
        return http.client.HTTPSConnection("127.0.0.1", PORT, context=context, timeout=120)
    p = urllib.parse.urlsplit(proxy)
    c = http.client.HTTPSConnection(p.hostname, p.port, context=context, timeout=120)
    c.set_tunnel("127.0.0.1", PORT)
    return c

c = connection()
small = []
for _ in range(REQUESTS):
    t = time.perf_counter()
    c.request("GET", "/small")
    c.getresponse().read()
    small.append((time.perf_counter() - t) * 1000)
c.close()
c = connection()
t = time.perf_counter()
c.request("GET", "/big")
r = c.getresponse()
n = 0
while True:
    chunk = r.read(1 << 20)
    if not chunk:
        break
    n += len(chunk)
seconds = time.perf_counter() - t
result = {"small_ms": small, "bytes": n, "mb_s": n / seconds / 1e6}
"#;

/// nginx on a free loopback port, serving `/small` and `/big` over TLS, stopped when dropped.
struct Nginx {
    child: Child,
    port: u16,
}

impl Nginx {
    fn start(dir: &Path, cert: &Path, key: &Path, big_mb: usize) -> Nginx {
        let root = dir.join("www");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("small"), [b'x'; 64]).unwrap();
        // A sparse file: nginx reads zeros at memory speed, so the disk is out of the figure.
        let big = std::fs::File::create(root.join("big")).unwrap();
        big.set_len((big_mb as u64) << 20).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let conf = dir.join("nginx.conf");
        std::fs::write(
            &conf,
            format!(
                "daemon off; master_process off; worker_processes 1; pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{}}
http {{
  access_log off; client_body_temp_path {dir}; proxy_temp_path {dir};
  fastcgi_temp_path {dir}; uwsgi_temp_path {dir}; scgi_temp_path {dir};
  keepalive_requests 100000;
  server {{
    listen 127.0.0.1:{port} ssl; ssl_certificate {cert}; ssl_certificate_key {key};
    root {root}; default_type application/octet-stream;
  }}
}}",
                dir = dir.display(),
                cert = cert.display(),
                key = key.display(),
                root = root.display()
            ),
        )
        .unwrap();
        let child = Command::new("nginx")
            .args(["-c".as_ref(), conf.as_os_str()])
            .spawn()
            .expect("nginx runs (Debian's package `nginx`)");
        // Dropped (killed and waited for) on every path from here.
        let nginx = Nginx { child, port };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return nginx;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nginx did not listen: {}", dir.join("error.log").display());
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA and a certificate it signed for 127.0.0.1: (CA, certificate, key) files in `dir`.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // A name of its own: with rcgen's default name on both, OpenSSL (the direct client) takes
    // the server's certificate for a self-signed one.
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "code-execution-mcp egress bench CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = (CertificateParams::new(vec!["127.0.0.1".into()]).unwrap())
        .signed_by(&key, &issuer)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// The client's result on the host (python3, straight to nginx).
fn direct(code: &str) -> Value {
    let script = format!("{code}\nimport json, sys\njson.dump(result, sys.stdout)");
    let out = Command::new("python3")
        .args(["-c", &script])
        .env_remove("HTTPS_PROXY")
        .env_remove("SSL_CERT_FILE")
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The client's result in the sandbox, through the server.
async fn through_server(app: &App, code: &str) -> Value {
    let ran = app
        .execute(
            ExecuteRequest {
                code: code.into(),
                timeout_seconds: Some(300.0),
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .expect("the execution runs");
    assert!(ran.outcome.success(), "{:?}", ran.outcome.error);
    ran.outcome.result
}

/// p50 and p90 of the small GETs of `result`.
fn small(result: &Value) -> (f64, f64) {
    let mut ms: Vec<f64> = (result["small_ms"].as_array().unwrap().iter())
        .filter_map(Value::as_f64)
        .collect();
    ms.sort_by(f64::total_cmp);
    let p = |q| percentile(&ms, q).unwrap_or(f64::NAN);
    (p(0.5), p(0.9))
}

/// One row pair: the same client direct and through the server, printed with the targets.
async fn row(app: &App, code: &str, label: &str) {
    let host = direct(code);
    let sandbox = through_server(app, code).await;
    let ((h50, h90), (s50, s90)) = (small(&host), small(&sandbox));
    let target = 2.0 * h50 + 3.0;
    println!(
        "{label:<6} small GET   direct p50 {h50:>6.2} ms p90 {h90:>6.2}   through the server p50 {s50:>6.2} ms p90 {s90:>6.2}   ratio {:>5.2}   target p50 <= {target:.2} ms: {}",
        s50 / h50,
        if s50 <= target { "met" } else { "MISSED" }
    );
    let (hr, sr) = (
        host["mb_s"].as_f64().unwrap(),
        sandbox["mb_s"].as_f64().unwrap(),
    );
    assert_eq!(host["bytes"], sandbox["bytes"], "both read the whole file");
    println!(
        "{label:<6} download    direct {hr:>7.0} MB/s   through the server {sr:>7.0} MB/s   ratio {:>5.2}   target >= 0.50: {}",
        sr / hr,
        if sr >= 0.5 * hr { "met" } else { "MISSED" }
    );
}

fn main() {
    let requests = env_usize("BENCH_REQUESTS", 200);
    let big_mb = env_usize("BENCH_DOWNLOAD_MB", 512);
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(dir.path());
    let nginx = Nginx::start(dir.path(), &cert, &key, big_mb);
    let upstreams = dir.path().join("upstreams.json");
    let entry = json!({"127.0.0.1": {"ports": [nginx.port], "private": true}});
    std::fs::write(&upstreams, json!({"egress": entry}).to_string()).unwrap();
    let code = CLIENT
        .replace("PORT", &nginx.port.to_string())
        .replace("REQUESTS", &requests.to_string())
        .replace("CA", &format!("{:?}", ca.display().to_string()));
    common::block_on(async {
        let mut config = defaults_in(dir.path());
        config.pool.pool_size = 1;
        config.pool.pool_max = 1;
        config.gateway.upstreams = Some(upstreams);
        config.egress.egress_ca_file = Some(ca.clone());
        config.egress.egress_socket_dir = Some(dir.path().join("sockets"));
        let app = App::start(config).await.expect("the server starts");
        wait_for_pool(&app, 1).await;
        let warm = code.replace(&format!("range({requests})"), "range(1)");
        through_server(&app, &warm.replace("\"/big\"", "\"/small\"")).await;
        println!("egress: {requests} small GETs, {big_mb} MiB download, nginx on 127.0.0.1");
        row(&app, &code, "quiet").await;
        let core = BusyCore::start();
        row(&app, &code, "busy").await;
        drop(core);
        app.shutdown().await;
    });
    drop(nginx);
}
