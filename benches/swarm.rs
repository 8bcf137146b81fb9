//! Scale-out on Docker Swarm: `cargo bench --bench swarm` (root; builds a 3-node swarm of private
//! engines on this machine as tests/swarm does, see tests/swarm/cluster.sh).
//!
//! One run measures, through HAProxy (images/proxy/haproxy.cfg) with the official MCP Python
//! SDK, against compose.yaml + swarm.yaml deployed with `docker stack deploy`:
//!
//! 1. throughput of `execute_code("print(1)")` from 8 and from 24 concurrent clients spread over
//!    six tenants, with the proxy sending to 1, 2 and 3 nodes (the same swarm; the proxy's
//!    server list changes), each for `SWARM_BENCH_SECS` seconds (default 20); ratios against
//!    one node, in the same run;
//! 2. the time from the loss of a node (everything it runs SIGKILLed, its link cut) to the
//!    first successful call of a tenant that node served, on another node;
//! 3. memory per node: the server's resident set, and the node's dockerd and containerd.
//!
//! On one machine the nodes share its cores: the figures show what the proxy, the shared
//! volume and the servers cost together, not what separate hosts would add (see
//! docs/measured.md, "Scale out on Docker Swarm").

#[path = "../tests/swarm/cluster.rs"]
mod cluster;
mod common;

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use cluster::{Swarm, run};

const TENANTS: [&str; 6] = ["ada", "bea", "cyd", "dov", "eli", "fay"];

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    if let Some(why) = cluster::missing_prerequisite() {
        eprintln!("swarm bench cannot run: {why}");
        std::process::exit(1);
    }
    let python = PathBuf::from(
        std::env::var("CEM_TEST_PYTHON")
            .expect("CEM_TEST_PYTHON: a Python with the main pins of tests/upstream-pins.txt"),
    );
    let secs: f64 = std::env::var("SWARM_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20.0);

    let image = cluster::ServerImage::build(
        Path::new(env!("CARGO_BIN_EXE_code-execution-mcp")),
        &common::images::sandbox_base(),
    );
    let sandbox = code_execution_mcp::sandbox::image::default_tag(
        code_execution_mcp::sandbox::image::ImageProfile::Minimal,
    );
    let mut swarm = Swarm::up(3, &[&image.tag, &sandbox], &TENANTS, python);
    swarm.deploy(
        &image.tag,
        &[
            ("CEM_MAX_CONCURRENCY", "8"),
            ("CEM_TENANT_MAX_CONCURRENCY", "8"),
            ("CEM_POOL_SIZE", "2"),
        ],
    );
    // Warm every tenant's pool on its node.
    swarm
        .python("load", &["6", "5"])
        .unwrap_or_else(|e| panic!("{e}\n{}", swarm.diagnostics()));

    let idle: Vec<(f64, f64)> = (1..=3).map(|i| swarm.memory_mib(i)).collect();
    println!("\n## Throughput through the proxy, execute_code(\"print(1)\"), {secs} s each\n");
    println!("| clients | 1 node | 2 nodes | 3 nodes | 2 / 1 | 3 / 1 |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut failed = vec![];
    for clients in [8, 24] {
        let mut rates = vec![];
        for nodes in 1..=3 {
            swarm.route_to(nodes);
            let out = swarm
                .python("load", &[&clients.to_string(), &secs.to_string()])
                .unwrap_or_else(|e| panic!("{e}\n{}", swarm.diagnostics()));
            let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
            let errors = v["errors"].as_u64().unwrap();
            if errors > 0 {
                failed.push(format!(
                    "{clients} clients, {nodes} nodes: {errors} of {} calls failed: {}",
                    errors + v["executions"].as_u64().unwrap(),
                    v["error_samples"]
                ));
            }
            rates.push(v["per_second"].as_f64().unwrap());
        }
        println!(
            "| {clients} | {:.1}/s | {:.1}/s | {:.1}/s | {:.2}x | {:.2}x |",
            rates[0],
            rates[1],
            rates[2],
            rates[1] / rates[0],
            rates[2] / rates[0]
        );
    }
    for f in &failed {
        println!("- {f}");
    }
    let loaded: Vec<(f64, f64)> = (1..=3).map(|i| swarm.memory_mib(i)).collect();
    swarm.route_to(3);

    println!("\n## Memory per node (MiB, resident)\n");
    println!("| node | server idle | server after load | dockerd + containerd |");
    println!("|---|---:|---:|---:|");
    for i in 0..3 {
        println!(
            "| {} | {:.1} | {:.1} | {:.1} |",
            i + 1,
            idle[i].0,
            loaded[i].0,
            loaded[i].1
        );
    }

    // Node loss: the node serving the first tenant goes; how long until that tenant is served.
    let state = swarm.dir.join("state.json");
    let out = swarm
        .python("check", &[state.to_str().unwrap(), "--data-only"])
        .or_else(|_| swarm.python("examples", &[state.to_str().unwrap()]))
        .unwrap_or_else(|e| panic!("{e}"));
    let nodes: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let node_of = |t: &str| {
        let n = &nodes[t];
        n.as_str()
            .or_else(|| n["node"].as_str())
            .unwrap()
            .to_string()
    };
    let victim_name = node_of(TENANTS[0]);
    let victim: usize = victim_name["cem-node".len()..].parse().unwrap();
    let lost_at = SystemTime::now();
    run(&mut swarm.cluster(&["kill-node", &victim.to_string()]));
    let out = swarm
        .python("probe", &[TENANTS[0], "120"])
        .unwrap_or_else(|e| panic!("{e}\n{}", swarm.diagnostics()));
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let served_at = v["served_at"].as_f64().unwrap();
    let lost = lost_at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    println!("\n## Node loss\n");
    println!(
        "- {} (on {victim_name}) served by {} {:.1} s after the node was lost",
        TENANTS[0],
        v["node"].as_str().unwrap(),
        served_at - lost
    );
    swarm.remove_stack();
    for i in (1..=3).filter(|i| *i != victim) {
        assert!(swarm.sandboxes(i).is_empty(), "node {i} kept sandboxes");
    }
}
