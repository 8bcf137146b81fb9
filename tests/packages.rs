//! Packages on demand against the real engine and real PyPI (CI reaches it): a pure wheel, a
//! compiled extension, a package with dependencies the image lacks and scikit-learn fitting a
//! model, each importable from a sandbox that still has no network; the installed files
//! read-only; sessions that keep their own versions; the cache reused after a restart with
//! the index unreachable; one install for concurrent requests; a wheelhouse without network;
//! and every bad input refused with its cause, the code not run, nothing left in the cache.

mod common;

use std::path::{Path, PathBuf};

use code_execution_mcp::app::execution::packages::PackagesReport;
use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::app::{ExecuteError, Executed};
use code_execution_mcp::config::Config;
use common::{TestApp, assert_ok};
use serde_json::json;

/// The servers of this file run under the runtime and read `/usr` from where CI's step asked.
#[tokio::test]
async fn the_servers_run_under_the_runtime_and_image_tree_asked_for() {
    common::placement::assert_runs_where_asked().await;
}

async fn call(
    t: &TestApp,
    packages: &[&str],
    session: Option<&str>,
    code: &str,
) -> Result<Executed, ExecuteError> {
    t.app
        .execute(
            ExecuteRequest {
                code: code.into(),
                packages: packages.iter().map(|p| p.to_string()).collect(),
                session: session.map(str::to_string),
                timeout_seconds: Some(120.0),
                memory_mb: Some(1024.0),
                ..Default::default()
            },
            Default::default(),
        )
        .await
}

async fn ok(t: &TestApp, packages: &[&str], code: &str) -> Executed {
    let e = call(t, packages, None, code)
        .await
        .unwrap_or_else(|e| panic!("the call with {packages:?} failed: {e}"));
    assert_ok(&e.outcome);
    e
}

fn report(e: &Executed) -> &PackagesReport {
    e.packages
        .as_ref()
        .expect("the result says which packages the code ran with")
}

fn installed(e: &Executed, name: &str) -> String {
    let r = report(e);
    (r.installed.iter())
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .unwrap_or_else(|| panic!("{name} is not among {:?}", r.installed))
        .version
        .clone()
}

/// The error a call gets, after checking that its code did not run (it would have made a file).
async fn refused(t: &TestApp, packages: &[&str]) -> String {
    let code = "open('/workspace/ran', 'w').write('x')";
    match call(t, packages, None, code).await {
        Ok(e) => panic!("{packages:?} was not refused: {:?}", e.outcome),
        Err(e) => {
            assert!(matches!(e, ExecuteError::Packages { .. }), "{e}");
            assert!(
                !t.workspace().join("ran").exists(),
                "the code ran despite {e}"
            );
            e.to_string()
        }
    }
}

fn cache(t: &TestApp) -> PathBuf {
    t.app.config().storage.data_dir().join("packages")
}

/// Nothing half-installed: no staging directory left, and only the sets listed in meta/.
fn assert_cache_clean(t: &TestApp) {
    let dir = cache(t);
    let staging: Vec<_> = std::fs::read_dir(dir.join("staging")).unwrap().collect();
    assert!(staging.is_empty(), "installs left {staging:?}");
    let sets = std::fs::read_dir(dir.join("sets")).unwrap().count();
    let metas = std::fs::read_dir(dir.join("meta")).unwrap().count();
    assert_eq!(sets, metas, "every set in the cache has its record");
}

/// The `packages` of every audit record the server without tenants wrote.
fn audited(t: &TestApp) -> Vec<serde_json::Value> {
    let dir = t.app.config().storage.data_dir().join("audit/_default");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            if !record["packages"].is_null() {
                found.push(record["packages"].clone());
            }
        }
    }
    found
}

#[tokio::test]
async fn a_pure_wheel_installs_once_into_an_offline_read_only_sandbox() {
    let t = TestApp::start().await;
    let code = r#"
import os, humanize
with open('/proc/net/dev') as f:
    interfaces = sorted(line.split(':')[0].strip() for line in f.readlines()[2:])
set_dir = os.path.dirname(os.path.dirname(humanize.__file__))
try:
    open(humanize.__file__, 'a').write('# changed')
    written = True
except OSError:
    written = False
try:
    os.listdir('/mnt/packages')
    listed = True
except PermissionError:
    listed = False
result = {'words': humanize.intword(12_000_000), 'interfaces': interfaces,
          'written': written, 'listed': listed, 'under': set_dir.startswith('/mnt/packages/')}
"#;
    let first = ok(&t, &["humanize"], code).await;
    assert_eq!(first.outcome.result["words"], json!("12.0 million"));
    assert_eq!(
        first.outcome.result["interfaces"],
        json!(["lo"]),
        "the sandbox stays offline"
    );
    assert_eq!(
        first.outcome.result["written"],
        json!(false),
        "installed files are read-only"
    );
    assert_eq!(
        first.outcome.result["listed"],
        json!(false),
        "other sets are not listable"
    );
    assert_eq!(first.outcome.result["under"], json!(true));
    let r = report(&first);
    assert!(!r.from_cache);
    assert_eq!(r.requested, ["humanize"]);
    installed(&first, "humanize");
    let again = ok(
        &t,
        &["humanize"],
        "import humanize; result = humanize.__version__",
    )
    .await;
    assert!(report(&again).from_cache, "the second call reuses the set");
    assert_eq!(again.outcome.result, json!(installed(&first, "humanize")));
    // Without `packages` nothing changes: no report, and the package is not importable.
    let plain = t
        .run("import importlib.util; result = importlib.util.find_spec('humanize') is None")
        .await;
    assert_eq!(plain.result, json!(true));
    let stats = t.app.stats_report().await.unwrap().packages.unwrap();
    assert_eq!(stats.installs.get("ok"), Some(&1), "{stats:?}");
    assert_eq!(stats.cache_hits, 1);
    assert_eq!(stats.cache_sets, 1);
    assert!(stats.cache_bytes > 10_000);
    assert_cache_clean(&t);
    // The audit trail: what was asked, the outcome, each wheel with its sha256.
    let records = audited(&t);
    let outcomes: Vec<&str> = records
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["installed", "cached"], "{records:?}");
    assert_eq!(records[0]["requested"], json!(["humanize"]));
    let wheel = &records[0]["resolved"][0];
    assert_eq!(wheel["name"], json!("humanize"));
    assert_eq!(wheel["sha256"].as_str().unwrap().len(), 64, "{wheel}");
    t.finish().await;
}

#[tokio::test]
async fn a_compiled_extension_and_a_package_with_its_own_dependencies_import() {
    let t = TestApp::start().await;
    let e = ok(
        &t,
        &["orjson==3.*", "rich"],
        r#"
import orjson, rich.console, io
buffer = io.StringIO()
rich.console.Console(file=buffer, force_terminal=False).print("[bold]hello[/bold]")
result = {'json': orjson.dumps({'a': 1}).decode(), 'rich': buffer.getvalue().strip(),
          'compiled': orjson.__file__.endswith('.so') or any(
              n.endswith('.so') for n in __import__('os').listdir(__import__('os').path.dirname(orjson.__file__)))}
"#,
    )
    .await;
    assert_eq!(e.outcome.result["json"], json!(r#"{"a":1}"#));
    assert_eq!(e.outcome.result["rich"], json!("hello"));
    assert_eq!(e.outcome.result["compiled"], json!(true));
    assert!(installed(&e, "orjson").starts_with("3."));
    // rich brings markdown-it-py and its mdurl (and pygments, unless the image has it).
    installed(&e, "markdown-it-py");
    installed(&e, "mdurl");
    assert!(
        report(&e).installed.len() >= 4,
        "{:?}",
        report(&e).installed
    );
    t.finish().await;
}

#[tokio::test]
async fn scikit_learn_fits_a_model() {
    let t = TestApp::start().await;
    let e = ok(
        &t,
        &["scikit-learn>=1.5"],
        r#"
import numpy as np
from sklearn.linear_model import LinearRegression
x = np.arange(20, dtype=float).reshape(-1, 1)
model = LinearRegression().fit(x, 3 * x.ravel() + 2)
result = [round(float(model.coef_[0]), 6), round(float(model.intercept_), 6)]
"#,
    )
    .await;
    assert_eq!(e.outcome.result, json!([3.0, 2.0]));
    installed(&e, "scikit-learn");
    t.finish().await;
}

#[tokio::test]
async fn sessions_keep_their_own_versions_of_one_package() {
    let t = TestApp::start().await;
    let mut handles = Vec::new();
    for version in ["4.9.0", "4.12.3"] {
        let pin = format!("humanize=={version}");
        let e = call(
            &t,
            &[&pin],
            Some("new"),
            "import humanize; v = humanize.__version__; result = v",
        )
        .await
        .unwrap();
        assert_ok(&e.outcome);
        assert_eq!(e.outcome.result, json!(version));
        handles.push((e.session.unwrap(), version));
    }
    // Later calls name no packages: each session imports its own version.
    for (handle, version) in &handles {
        let e = call(
            &t,
            &[],
            Some(handle),
            "import humanize; result = [humanize.__version__, v]",
        )
        .await
        .unwrap();
        assert_ok(&e.outcome);
        assert_eq!(
            e.outcome.result,
            json!([version, version]),
            "session {handle}"
        );
        assert_eq!(report(&e).requested, [format!("humanize=={version}")]);
    }
    // A package the index does not have: refused, and the session goes on as it was.
    let (handle, version) = &handles[0];
    let err = call(
        &t,
        &["no-such-package-cem-zz"],
        Some(handle),
        "v = 'changed'",
    )
    .await
    .err()
    .unwrap();
    assert!(matches!(err, ExecuteError::Packages { .. }), "{err}");
    let e = call(
        &t,
        &[],
        Some(handle),
        "import humanize; result = [humanize.__version__, v]",
    )
    .await
    .unwrap();
    assert_eq!(e.outcome.result, json!([version, version]));
    t.finish().await;
}

#[tokio::test]
async fn concurrent_requests_for_one_set_install_it_once() {
    let t = TestApp::start_with(|c| c.pool.pool_size = 0).await;
    let code = "import humanize; result = humanize.naturalsize(3000)";
    let (a, b, c) = tokio::join!(
        ok(&t, &["humanize==4.11.0"], code),
        ok(&t, &["humanize==4.11.0"], code),
        ok(&t, &["humanize==4.11.0"], code)
    );
    for e in [&a, &b, &c] {
        assert_eq!(e.outcome.result, json!("3.0 kB"));
    }
    let stats = t.app.stats_report().await.unwrap().packages.unwrap();
    assert_eq!(
        stats.installs.get("ok"),
        Some(&1),
        "one install for three calls: {stats:?}"
    );
    assert_eq!(stats.cache_sets, 1);
    t.finish().await;
}

/// A CA bundle that trusts nothing the index presents (one public root of the system's bundle,
/// the first: not the index's, nor a TLS-inspecting proxy's, which would be added last), so the
/// index cannot be reached.
fn untrusted_ca(dir: &Path) -> PathBuf {
    let path = dir.join("untrusted.pem");
    let all = std::fs::read_to_string("/etc/ssl/certs/ca-certificates.crt").unwrap();
    let first = all
        .split_inclusive("-----END CERTIFICATE-----\n")
        .next()
        .unwrap();
    std::fs::write(&path, first).unwrap();
    path
}

#[tokio::test]
async fn a_restart_reuses_the_cache_with_the_index_unreachable() {
    let t = TestApp::start().await;
    let first = ok(
        &t,
        &["humanize==4.10.0"],
        "import humanize; result = humanize.__version__",
    )
    .await;
    assert!(!report(&first).from_cache);
    let mut config: Config = t.app.config().clone();
    t.app.shutdown().await;
    config.packages.packages_ca_file = Some(untrusted_ca(t.dir.path()));
    let restarted = code_execution_mcp::app::App::start(config).await.unwrap();
    let again = TestApp {
        app: std::sync::Arc::new(restarted),
        dir: t.dir,
    };
    let e = ok(
        &again,
        &["humanize==4.10.0"],
        "import humanize; result = humanize.__version__",
    )
    .await;
    assert_eq!(e.outcome.result, json!("4.10.0"));
    assert!(report(&e).from_cache);
    // Something new needs the index, which does not answer.
    let why = refused(&again, &["humanize==4.9.0"]).await;
    assert!(why.contains("did not answer"), "{why}");
    assert_cache_clean(&again);
    again.finish().await;
}

#[tokio::test]
async fn a_wheelhouse_installs_with_no_network() {
    let wheels = tempfile::tempdir().unwrap();
    let python = common::upstreams::main_python();
    let out = std::process::Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
        ])
        .args(["--python-version", "3.13", "-d"])
        .arg(wheels.path())
        .arg("humanize==4.12.3")
        .output()
        .expect("pip download");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = wheels.path().to_path_buf();
    let t = TestApp::start_with(|c| c.packages.packages_wheelhouse = Some(dir)).await;
    let e = ok(
        &t,
        &["humanize"],
        "import humanize; result = humanize.__version__",
    )
    .await;
    assert_eq!(e.outcome.result, json!("4.12.3"));
    // Only what the wheelhouse holds.
    let why = refused(&t, &["orjson"]).await;
    assert!(why.contains("orjson"), "{why}");
    t.finish().await;
}

#[tokio::test]
async fn bad_requests_are_refused_with_their_cause_and_nothing_is_kept() {
    let policy = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(policy.path(), r#"{"deny": ["requests"]}"#).unwrap();
    let path = policy.path().to_path_buf();
    let t = TestApp::start_with(|c| {
        c.packages.packages_policy = Some(path);
        c.packages.packages_max_mb = 1;
        c.packages.packages_cache_mb = 64;
    })
    .await;
    let why = refused(&t, &["no-such-package-cem-zz"]).await;
    assert!(
        why.contains("no-such-package-cem-zz") && why.contains("index"),
        "{why}"
    );
    let why = refused(&t, &["humanize==0.0.1"]).await;
    assert!(
        why.contains("humanize==0.0.1") && why.contains("4.12.3"),
        "the index's versions: {why}"
    );
    let why = refused(&t, &["docopt"]).await;
    assert!(
        why.contains("docopt") && why.contains("image build --requirements"),
        "{why}"
    );
    let why = refused(&t, &["pkg @ https://example.com/pkg.whl"]).await;
    assert!(why.contains("URL"), "{why}");
    let why = refused(&t, &["humanize>=>1"]).await;
    assert!(why.contains("not a requirement"), "{why}");
    let why = refused(&t, &["requests"]).await;
    assert!(why.contains("denied") && why.contains("requests"), "{why}");
    // pygments alone is over 1 MB installed.
    let why = refused(&t, &["pygments"]).await;
    assert!(why.contains("--packages-max-mb"), "{why}");
    assert_cache_clean(&t);
    assert_eq!(
        std::fs::read_dir(cache(&t).join("sets")).unwrap().count(),
        0
    );
    let outcomes: Vec<String> = (audited(&t).iter())
        .map(|r| r["outcome"].as_str().unwrap().to_string())
        .collect();
    assert!(outcomes.contains(&"failed".to_string()), "{outcomes:?}");
    assert!(outcomes.contains(&"refused".to_string()), "{outcomes:?}");
    t.finish().await;

    let t = TestApp::start_with(|c| {
        c.packages.packages_index = Some("http://127.0.0.1:9/simple".into())
    })
    .await;
    let why = refused(&t, &["humanize"]).await;
    assert!(why.contains("did not answer"), "{why}");
    t.finish().await;

    let t =
        TestApp::start_with(|c| c.packages.mode = code_execution_mcp::config::PackagesMode::Off)
            .await;
    let why = refused(&t, &["humanize"]).await;
    assert!(why.contains("--packages off"), "{why}");
    t.finish().await;
}

#[test]
fn the_python_sdk_installs_packages_on_both_eras() {
    let run = common::run_python_client_with("packages_client.py", &[]);
    for era in ["stdio legacy: packages ok", "stdio auto: packages ok"] {
        assert!(run.stdout.contains(era), "{}", run.stdout);
    }
}

#[tokio::test]
async fn a_version_the_call_asks_for_wins_over_the_images_even_when_the_pool_preloads_it() {
    // The data image has tabulate 0.9.0, which the pool imports ahead.
    let t = TestApp::start_with(|c| c.sandbox.preload = Some(vec!["tabulate".into()])).await;
    common::wait_for_full_pool(&t.app, 1).await;
    let code = "import tabulate; result = tabulate.__version__";
    assert_eq!(t.run(code).await.result, json!("0.9.0"));
    common::wait_for_full_pool(&t.app, 1).await;
    let e = ok(&t, &["tabulate==0.8.10"], code).await;
    assert_eq!(e.outcome.result, json!("0.8.10"));
    // The first call took the pooled container; this one, a container of its own.
    assert_eq!(t.app.stats().snapshot().executions_pooled, 1);
    t.finish().await;
}

/// A PEP 503 index (`tests/python/hash_index.py`) served by Python's http.server on the host's
/// loopback, which the installer (no network of its own) reaches through the server's egress
/// proxy; and a second server beside it, off the index's port, that one project links to. Each
/// logs the requests it got. Both stop when this is dropped.
struct HashIndex {
    dir: tempfile::TempDir,
    index: Served,
    elsewhere: Served,
}

/// One http.server serving a directory on 127.0.0.1, its requests logged to a file.
struct Served {
    child: std::process::Child,
    port: u16,
    log: PathBuf,
}

impl Served {
    fn start(root: &Path, name: &str) -> Self {
        let log = root.join(format!("{name}.log"));
        let port_file = root.join(format!("{name}.port"));
        let program = "import functools, http.server, os, sys\n\
            d, log, pf = sys.argv[1:4]\n\
            class H(http.server.SimpleHTTPRequestHandler):\n\
            \x20   def log_message(self, f, *a):\n\
            \x20       open(log, 'a').write((f % a) + '\\n')\n\
            s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(H, directory=d))\n\
            open(pf + '.tmp', 'w').write(str(s.server_address[1])); os.rename(pf + '.tmp', pf)\n\
            s.serve_forever()\n";
        let mut child = std::process::Command::new(common::upstreams::main_python())
            .args(["-c", program])
            .arg(root.join(name))
            .args([&log, &port_file])
            .spawn()
            .expect("python serves the index");
        for _ in 0..100 {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                let port = port.trim().parse().unwrap();
                return Self { child, port, log };
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the test's http.server did not start");
    }

    /// The requests it got: http.server's log lines.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl HashIndex {
    /// Writes the index and serves it (and the second server).
    fn serve() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        let elsewhere = Served::start(dir.path(), "elsewhere");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/hash_index.py");
        let out = std::process::Command::new(common::upstreams::main_python())
            .arg(script)
            .arg(dir.path().join("index"))
            .arg(format!("http://127.0.0.1:{}", elsewhere.port))
            .output()
            .expect("run hash_index.py");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let index = Served::start(dir.path(), "index");
        Self {
            dir,
            index,
            elsewhere,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/simple/", self.index.port)
    }

    /// What the index served: http.server's request log.
    fn log(&self) -> String {
        self.index.log()
    }

    fn wheel_sha256(&self, project: &str) -> String {
        use sha2::Digest;
        let file = format!("index/files/{project}-1.0-py3-none-any.whl");
        hex::encode(sha2::Sha256::digest(
            std::fs::read(self.dir.path().join(file)).unwrap(),
        ))
    }
}

/// Every file under `dir`, however deep.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            found.extend(files_under(&path));
        }
        found.push(path);
    }
    found
}

#[tokio::test]
async fn wheels_are_pinned_by_the_hash_their_index_published() {
    let index = HashIndex::serve();
    let url = index.url();
    let t = TestApp::start_with(|c| c.packages.packages_index = Some(url)).await;
    // The control: a wheel whose link carries its own sha256 installs, pinned by it, and its
    // code runs (it leaves /workspace/imported-cemhashok).
    let good = ok(
        &t,
        &["cemhashok"],
        "import cemhashok; result = cemhashok.__version__",
    )
    .await;
    assert_eq!(good.outcome.result, json!("1.0"));
    assert!(t.workspace().join("imported-cemhashok").exists());
    let pinned = &audited(&t)[0]["resolved"][0];
    assert_eq!(
        pinned["sha256"],
        json!(index.wheel_sha256("cemhashok")),
        "{pinned}"
    );

    // A served file that is not the one whose hash the link published: without a metadata
    // file (pip downloads it to read its metadata), and with PEP 658 metadata (pip resolves from
    // that and checks the wheel when it fetches it afterwards, naming no file).
    for project in ["cemhashswapped", "cemhashtampered"] {
        let code = format!("open('/workspace/ran', 'w').write('x'); import {project}");
        let why = refused_running(&t, project, &code).await;
        assert!(
            why.contains(project)
                && why.contains("other bytes than the sha256 it published")
                && why.contains("nothing was installed")
                && why.contains(&format!("served {}", index.wheel_sha256(project))),
            "{why}"
        );
    }
    // A link with no hash: pip would pin the hash of whatever it downloaded.
    let why = refused_running(&t, "cemhashless", "import cemhashless").await;
    assert!(
        why.contains("published no sha256 for cemhashless-1.0-py3-none-any.whl")
            && why.contains("#sha256="),
        "{why}"
    );

    // A link off the index's port: the installer has no network, and the server's proxy lets
    // it reach the index alone, so nothing reached the other server.
    let why = refused_running(&t, "cemhashelsewhere", "import cemhashelsewhere").await;
    assert!(
        why.contains("cemhashelsewhere") && why.contains("403"),
        "{why}"
    );
    assert_eq!(
        index.elsewhere.log(),
        "",
        "the installer reached past its index"
    );

    // The index served every one of them: the refusals are of its bytes, not of its absence.
    let served = index.log();
    for project in ["cemhashswapped", "cemhashtampered", "cemhashless"] {
        let file = format!("GET /files/{project}-1.0-py3-none-any.whl ");
        assert!(
            served.contains(&file),
            "{project} was never fetched: {served}"
        );
    }
    // Nothing of theirs in the cache: only the control's set, no staging left.
    assert_cache_clean(&t);
    assert_eq!(
        std::fs::read_dir(cache(&t).join("sets")).unwrap().count(),
        1
    );
    let kept: Vec<PathBuf> = files_under(&cache(&t))
        .into_iter()
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            [
                "cemhashswapped",
                "cemhashtampered",
                "cemhashless",
                "cemhashelsewhere",
            ]
            .iter()
            .any(|project| name.starts_with(project))
        })
        .collect();
    assert!(kept.is_empty(), "refused wheels were kept: {kept:?}");
    let outcomes: Vec<String> = (audited(&t).iter())
        .map(|r| r["outcome"].as_str().unwrap().to_string())
        .collect();
    // The last is a failure to fetch (the proxy refused it), not a refusal of bytes.
    assert_eq!(
        outcomes,
        ["installed", "refused", "refused", "refused", "failed"]
    );
    t.finish().await;
}

/// The error a call for `project` gets with `code`, after checking that neither the code nor
/// the package's own (which writes /workspace/imported-PROJECT on import) ran.
async fn refused_running(t: &TestApp, project: &str, code: &str) -> String {
    match call(t, &[project], None, code).await {
        Ok(e) => panic!("{project} was not refused: {:?}", e.outcome),
        Err(e) => {
            assert!(matches!(e, ExecuteError::Packages { .. }), "{e}");
            for left in ["ran".to_string(), format!("imported-{project}")] {
                assert!(!t.workspace().join(&left).exists(), "{left} despite {e}");
            }
            e.to_string()
        }
    }
}
