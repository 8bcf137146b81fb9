//! What packages on demand cost: `cargo bench --bench packages` (reaches PyPI).
//!
//! One process, the real Docker engine, an in-process server on the data image (pool of 2,
//! data in a temporary directory, so the package cache starts empty):
//!
//! 1. a first install of a small pure wheel, from the call to the answer: `humanize` at a
//!    version not asked for before in this run, each sample a new set (BENCH_INSTALLS, 5);
//! 2. a pooled call, paced by a think time (BENCH_THINK_MS, 1000), with and without a cached
//!    set (`result = 1`), interleaved: the cached set's cost is the difference of the p50s;
//! 3. `import openpyxl` timed inside the sandbox, from the image (3.1.5, Debian's) and from an
//!    installed set (3.1.4 from PyPI, ahead of the image's), each in a fresh pooled container:
//!    the ratio of the medians.
//!
//! Warm-up: the server starts, its pool fills, and one call runs before any row. Figures on a
//! shared machine are noisy: compare the ratios.

mod common;

use std::time::{Duration, Instant};

use code_execution_mcp::app::App;
use code_execution_mcp::app::execution::request::ExecuteRequest;
use code_execution_mcp::sandbox::stats::percentile;
use common::config::defaults_in;
use common::in_process::wait_for_pool;
use common::knobs::env_usize;

/// One call with `packages`; its latency in ms and its result.
async fn call(app: &App, code: &str, packages: &[&str]) -> (f64, serde_json::Value, bool) {
    let started = Instant::now();
    let ran = app
        .execute(
            ExecuteRequest {
                code: code.into(),
                packages: packages.iter().map(|p| p.to_string()).collect(),
                ..Default::default()
            },
            Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{packages:?}: {e}"));
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    assert!(ran.outcome.success(), "{code}: {:?}", ran.outcome.error);
    let cached = ran.packages.as_ref().is_some_and(|p| p.from_cache);
    (ms, ran.outcome.result, cached)
}

fn row(name: &str, samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    let p50 = percentile(samples, 0.5).unwrap_or(f64::NAN);
    println!(
        "{name:<58} n={:<3} p50 {p50:>8.1} ms  p90 {:>8.1} ms",
        samples.len(),
        percentile(samples, 0.9).unwrap_or(f64::NAN)
    );
    p50
}

#[tokio::main]
async fn main() {
    let installs = env_usize("BENCH_INSTALLS", 5);
    let n = env_usize("BENCH_N", 30);
    let think = Duration::from_millis(env_usize("BENCH_THINK_MS", 1000) as u64);
    let dir = tempfile::tempdir().unwrap();
    let mut config = defaults_in(dir.path());
    config.pool.pool_size = 2;
    config.pool.pool_max = 2;
    config.sandbox.preload = Some(vec!["none".into()]);
    let app = App::start(config).await.expect("the server starts");
    wait_for_pool(&app, 2).await;
    call(&app, "result = 1", &[]).await;

    let versions = [
        "4.12.3", "4.12.2", "4.12.1", "4.11.0", "4.10.0", "4.9.0", "4.8.0", "4.7.0",
    ];
    let mut first = Vec::new();
    for version in versions.iter().take(installs.min(versions.len())) {
        tokio::time::sleep(think).await;
        wait_for_pool(&app, 1).await;
        let pin = format!("humanize=={version}");
        let (ms, result, cached) = call(
            &app,
            "import humanize; result = humanize.__version__",
            &[&pin],
        )
        .await;
        assert!(
            !cached && result == *version,
            "{pin}: {result} (cached {cached})"
        );
        first.push(ms);
    }
    row(
        "1. first install of a small pure wheel (humanize), call to answer",
        &mut first,
    );

    let (mut plain, mut with_set) = (Vec::new(), Vec::new());
    for _ in 0..n {
        for (samples, packages) in [
            (&mut plain, &[][..]),
            (&mut with_set, &["humanize==4.12.3"][..]),
        ] {
            tokio::time::sleep(think).await;
            wait_for_pool(&app, 1).await;
            let (ms, _, _) = call(&app, "result = 1", packages).await;
            samples.push(ms);
        }
    }
    let base = row(
        "2a. pooled `result = 1`, no packages (baseline)",
        &mut plain,
    );
    let cached = row("2b. pooled `result = 1` with a cached set", &mut with_set);
    println!(
        "    the cached set adds {:.1} ms at p50 ({:.2}x)",
        cached - base,
        cached / base
    );

    let timed = "import time; t = time.perf_counter(); import openpyxl; result = [openpyxl.__version__, (time.perf_counter() - t) * 1000]";
    call(&app, timed, &["openpyxl==3.1.4"]).await;
    let (mut image, mut set) = (Vec::new(), Vec::new());
    for _ in 0..n.min(20) {
        for (samples, packages, version) in [
            (&mut image, &[][..], "3.1.5"),
            (&mut set, &["openpyxl==3.1.4"][..], "3.1.4"),
        ] {
            tokio::time::sleep(think).await;
            wait_for_pool(&app, 1).await;
            let (_, result, _) = call(&app, timed, packages).await;
            assert_eq!(result[0], version, "imported from where it should be");
            samples.push(result[1].as_f64().unwrap());
        }
    }
    let from_image = row(
        "3a. import openpyxl from the image (in the sandbox)",
        &mut image,
    );
    let from_set = row("3b. import openpyxl from an installed set", &mut set);
    println!(
        "    import from the set / from the image: {:.2}x",
        from_set / from_image
    );
    app.shutdown().await;
}
