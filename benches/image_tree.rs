//! What serving the sandbox image's /usr from the host (`--image-tree host`) buys on this
//! engine: `cargo bench --bench image_tree`.
//!
//! One process, the real engine, in-process servers on the data image (cold: `--pool-size 0`,
//! no preloading; data in temporary directories). Rows, each `BENCH_N` samples (default 9),
//! p50 and p90 printed with the ratio to the engine-storage row of the same measure:
//!
//! 1. the copy itself: the first start with `--image-tree host` into an empty directory
//!    (extraction included) and a second start that reuses it;
//! 2. `import numpy, pandas`, timed inside the sandbox, with `--image-tree engine` (the
//!    engine's storage) and `--image-tree host`; and the same import from the host copy run on
//!    the host, outside any container (the copy's own dynamic loader and libraries), the floor
//!    the sandbox can approach;
//! 3. `import matplotlib.pyplot`, in the sandbox both ways (Debian's matplotlib finds its data
//!    at an absolute /usr path, so it does not run from the copy outside a container);
//! 4. the python3 start-up inside the sandbox: one execution times 10
//!    `subprocess.run([sys.executable, "-I", "-c", "pass"])`, per start;
//! 5. `execute_code("print(1)")` cold, end to end (container created, started, job run,
//!    answered).
//!
//! The engine and host rows alternate sample by sample, so drift on a shared machine hits both.
//! Figures are noisy: compare the ratios within one run.

mod common;

use std::path::Path;
use std::time::Instant;

use code_execution_mcp::app::App;
use code_execution_mcp::config::{Config, ImageProfile, ImageTreeMode};
use code_execution_mcp::sandbox::stats::percentile;
use common::config::defaults_in;
use common::in_process::timed_execution;
use common::knobs::env_usize;

fn config(dir: &Path, mode: ImageTreeMode, trees: &Path) -> Config {
    let mut c = defaults_in(dir);
    c.pool.pool_size = 0;
    c.pool.pool_max = 0;
    c.sandbox.image_profile = ImageProfile::Data;
    c.sandbox.preload = Some(vec!["none".into()]);
    c.sandbox.image_tree = mode;
    c.sandbox.image_tree_dir = Some(trees.to_path_buf());
    c
}

/// Runs `code`; returns (the float it printed last, the call's wall time in ms).
async fn run(app: &App, code: &str) -> (f64, f64) {
    let (ran, wall) = timed_execution(app, code).await;
    let printed = (ran.outcome.stdout.as_str().lines().last())
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(f64::NAN);
    (printed, wall)
}

fn timed(statement: &str) -> String {
    format!(
        "import time\nt = time.perf_counter()\n{statement}\nprint((time.perf_counter() - t) * 1000)"
    )
}

/// The same statement run by the host copy's python on the host, outside any container.
fn on_host(tree: &Path, statement: &str) -> f64 {
    let usr = tree.join("usr");
    let lib = usr.join("lib/x86_64-linux-gnu");
    let libs = [lib.clone(), lib.join("blas"), lib.join("lapack")]
        .map(|p| p.display().to_string())
        .join(":");
    let code = format!(
        "import time\nt = time.perf_counter()\n{statement}\nprint((time.perf_counter() - t) * 1000)"
    );
    let out = std::process::Command::new(usr.join("lib64/ld-linux-x86-64.so.2"))
        .arg("--library-path")
        .arg(libs)
        .arg(usr.join("bin/python3"))
        .args(["-s", "-c", &code])
        .env_clear()
        .env("PYTHONHOME", &usr)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("MPLBACKEND", "Agg")
        .env("MPLCONFIGDIR", "/tmp")
        .output()
        .expect("run the copy's python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(f64::NAN)
}

fn row(label: &str, mut ms: Vec<f64>, baseline: Option<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    let p50 = percentile(&ms, 0.5).unwrap_or(f64::NAN);
    let p90 = percentile(&ms, 0.9).unwrap_or(f64::NAN);
    let ratio = baseline.map_or("1.00x".to_string(), |b| format!("{:.2}x", p50 / b));
    println!("| {label} | {p50:.1} | {p90:.1} | {ratio} |");
    p50
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_N", 9);
    let dir = tempfile::tempdir().expect("temp dir");
    let trees = dir.path().join("image-trees");
    let engine_app = App::start(config(
        &dir.path().join("engine"),
        ImageTreeMode::Engine,
        &trees,
    ))
    .await
    .expect("a server on the engine's storage");
    let started = Instant::now();
    let host_app = App::start(config(
        &dir.path().join("host"),
        ImageTreeMode::Host,
        &trees,
    ))
    .await
    .expect("a server on the host copy");
    let first_start = started.elapsed().as_secs_f64();
    let tree = (host_app.shared().image_tree().cloned())
        .expect("the host copy is served (see the server's warning)")
        .root;
    let started = Instant::now();
    let again = App::start(config(
        &dir.path().join("again"),
        ImageTreeMode::Host,
        &trees,
    ))
    .await
    .expect("a second server on the host copy");
    let second_start = started.elapsed().as_secs_f64();
    again.shutdown_all().await;
    let storage = engine_app.shared().image_tree_reason();
    println!("engine: {storage}; copy in {}", tree.display());
    println!(
        "first start with --image-tree host (extraction included): {first_start:.1} s; a second start reusing it: {second_start:.1} s"
    );
    println!();
    println!("| row (n = {n}) | p50 ms | p90 ms | vs engine storage |");
    println!("|---|---:|---:|---:|");

    // Debian's matplotlib reads its data from /usr/share by absolute path, so only the numpy
    // and pandas import runs from the copy outside a container.
    let statements = [
        ("import numpy, pandas", "import numpy, pandas", true),
        (
            "import matplotlib.pyplot",
            "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot",
            false,
        ),
    ];
    for (label, statement, outside) in statements {
        let (mut engine, mut host, mut bare) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            engine.push(run(&engine_app, &timed(statement)).await.0);
            host.push(run(&host_app, &timed(statement)).await.0);
            if outside {
                bare.push(on_host(&tree, statement));
            }
        }
        let base = row(&format!("`{label}`, engine storage"), engine, None);
        row(&format!("`{label}`, host copy"), host, Some(base));
        if outside {
            let label = format!("`{label}`, the copy run on the host (no container)");
            row(&label, bare, Some(base));
        }
    }

    let start_code = "import subprocess, sys, time\nt = time.perf_counter()\nfor _ in range(10):\n    subprocess.run([sys.executable, '-I', '-c', 'pass'], check=True)\nprint((time.perf_counter() - t) * 100)";
    let (mut engine, mut host) = (Vec::new(), Vec::new());
    for _ in 0..n {
        engine.push(run(&engine_app, start_code).await.0);
        host.push(run(&host_app, start_code).await.0);
    }
    let base = row(
        "python3 start-up in the sandbox, engine storage",
        engine,
        None,
    );
    row(
        "python3 start-up in the sandbox, host copy",
        host,
        Some(base),
    );

    let (mut engine, mut host) = (Vec::new(), Vec::new());
    for _ in 0..n {
        engine.push(run(&engine_app, "print(1)").await.1);
        host.push(run(&host_app, "print(1)").await.1);
    }
    let base = row(
        "execute_code(\"print(1)\") cold, engine storage",
        engine,
        None,
    );
    row(
        "execute_code(\"print(1)\") cold, host copy",
        host,
        Some(base),
    );

    engine_app.shutdown_all().await;
    host_app.shutdown_all().await;
}
