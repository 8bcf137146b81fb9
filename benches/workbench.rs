//! What the data workbench costs: `cargo bench --bench workbench`.
//!
//! One process, the real Docker engine, in-process servers (pool of 2, data in temporary
//! directories):
//!
//! 1. image sizes of the two profiles (built first when missing);
//! 2. baseline: `result = 1` on the data image, pooled, sequential, paced by a think time so
//!    the pool has refilled before each call;
//! 3. `import pandas as pd; result = len(pd.DataFrame(...))`, pooled, without preloading;
//! 4. the same with `--preload numpy,pandas` (the data profile's default);
//! 5. idle memory of one pooled container: minimal, data without preloading, data with it.
//!
//! 6. the workspace tools at scale, without the engine: `list_files` and `usage` over 100,000
//!    files, and a 1 TiB sparse file refused from its size (their tests keep the behaviour; the
//!    time is measured here).
//!
//! It prints p50/p99 of rows 2-4 and their ratios to row 2. Knobs: `BENCH_N` samples per row
//! (default 30), `BENCH_THINK_MS` (default 1500: a preloading container takes about a second to
//! be ready). Figures on a shared machine are noisy: compare the ratios.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use code_execution_mcp::app::App;
use code_execution_mcp::config::{Config, ImageProfile};
use code_execution_mcp::sandbox::container::spec::LABEL_INSTANCE;
use code_execution_mcp::sandbox::stats::percentile;
use common::config::defaults_in;
use common::docker::docker;
use common::in_process::{execution_ms, wait_for_pool};
use common::knobs::env_usize;

fn config(dir: &Path, profile: ImageProfile, preload: &str) -> Config {
    let mut c = defaults_in(dir);
    c.pool.pool_size = 2;
    c.sandbox.image_profile = profile;
    c.sandbox.preload = Some(preload.split(',').map(str::to_string).collect());
    c
}

/// `n` pooled executions of `code`, in milliseconds, each after a think time.
async fn latencies(app: &App, code: &str, n: usize, think: Duration) -> Vec<f64> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        tokio::time::sleep(think).await;
        wait_for_pool(app, 1).await;
        samples.push(execution_ms(app, code).await);
    }
    samples
}

/// Memory (MiB) of each idle pooled container of `app`, as the engine reports it.
async fn idle_memory(app: &App) -> Vec<f64> {
    wait_for_pool(app, 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await; // preloading done, page cache settled
    let label = format!("label={LABEL_INSTANCE}={}", app.sandbox().instance().id);
    let ids = docker(&["ps", "-q", "--filter", &label]);
    ids.lines()
        .map(|id| {
            let usage = docker(&["stats", "--no-stream", "--format", "{{.MemUsage}}", id]);
            parse_mib(usage.split('/').next().unwrap_or(""))
        })
        .collect()
}

fn parse_mib(text: &str) -> f64 {
    let text = text.trim();
    let (number, unit) = text.split_at(
        text.find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(text.len()),
    );
    let value: f64 = number.trim().parse().unwrap_or(f64::NAN);
    match unit {
        "KiB" | "kB" => value / 1024.0,
        "GiB" | "GB" => value * 1024.0,
        "B" => value / (1024.0 * 1024.0),
        _ => value,
    }
}

fn row(label: &str, samples: &[f64], base: Option<(f64, f64)>) -> (f64, f64) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |p| percentile(&sorted, p).unwrap_or(f64::NAN);
    let (p50, p99) = (at(0.5), at(0.99));
    let ratio = base
        .map(|(b50, b99)| format!("   x{:.2} / x{:.2}", p50 / b50, p99 / b99))
        .unwrap_or_default();
    println!("{label:<52} p50 {p50:>8.1} ms  p99 {p99:>8.1} ms{ratio}",);
    (p50, p99)
}

/// Row 6: the workspace tools over 100,000 files, best of 3 each.
fn workspace_figures() {
    use code_execution_mcp::workspace::{Workspace, WorkspaceLimits};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("workspace");
    std::fs::create_dir_all(root.join("many")).unwrap();
    for i in 0..100_000 {
        std::fs::File::create(root.join("many").join(format!("f{i:06}"))).unwrap();
    }
    std::fs::File::create(root.join("sparse"))
        .and_then(|f| f.set_len(1 << 40))
        .unwrap();
    let ws = Workspace::open(&root, WorkspaceLimits::default()).unwrap();
    let best = |f: &dyn Fn()| {
        (0..3)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1000.0
            })
            .fold(f64::INFINITY, f64::min)
    };
    let list = best(&|| assert!(ws.list_files("").unwrap().truncated));
    let usage = best(&|| assert_eq!(ws.usage().unwrap().files, 100_001));
    let refuse = best(&|| assert!(ws.read_file("sparse").is_err()));
    println!("workspace list_files, 100,000 files (cut at its limit) {list:>10.1} ms");
    println!("workspace usage, 100,000 files                          {usage:>10.1} ms");
    println!("workspace read_file of a 1 TiB sparse file, refused      {refuse:>10.3} ms\n");
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_N", 30);
    let think = Duration::from_millis(env_usize("BENCH_THINK_MS", 1500) as u64);
    println!("workbench bench: n={n}, think={think:?}\n");
    workspace_figures();

    let engine = code_execution_mcp::sandbox::Engine::connect()
        .await
        .expect("the Docker engine");
    for profile in [ImageProfile::Minimal, ImageProfile::Data] {
        let tag = code_execution_mcp::sandbox::image::default_tag(profile);
        code_execution_mcp::sandbox::image::ensure(&engine, &tag, None, profile)
            .await
            .expect("the sandbox image (built when missing)");
        let bytes: f64 = docker(&["image", "inspect", "-f", "{{.Size}}", &tag])
            .parse()
            .unwrap_or(f64::NAN);
        println!("image {tag:<52} {:>7.0} MB", bytes / 1e6);
    }
    println!();

    let pandas =
        "import pandas as pd\nresult = len(pd.DataFrame({'a': range(1000), 'b': range(1000)}))";
    let mut memory = Vec::new();
    let mut base = None;
    for (label, profile, preload, code) in [
        (
            "result = 1 (data image)",
            ImageProfile::Data,
            "none",
            "result = 1",
        ),
        (
            "import pandas, DataFrame, no preload",
            ImageProfile::Data,
            "none",
            pandas,
        ),
        (
            "import pandas, DataFrame, --preload numpy,pandas",
            ImageProfile::Data,
            "numpy,pandas",
            pandas,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let app = App::start(config(dir.path(), profile, preload))
            .await
            .expect("the server starts");
        let samples = latencies(&app, code, n, think).await;
        let figures = row(label, &samples, base);
        base.get_or_insert(figures);
        if code == pandas {
            memory.push((format!("data, preload {preload}"), idle_memory(&app).await));
        }
        app.shutdown().await;
    }
    let dir = tempfile::tempdir().unwrap();
    let app = App::start(config(dir.path(), ImageProfile::Minimal, "none"))
        .await
        .expect("the server starts");
    memory.insert(0, ("minimal".into(), idle_memory(&app).await));
    app.shutdown().await;

    println!();
    for (label, mib) in memory {
        let shown: Vec<String> = mib.iter().map(|m| format!("{m:.1}")).collect();
        println!(
            "idle pooled container, {label:<28} {} MiB",
            shown.join(", ")
        );
    }
}
