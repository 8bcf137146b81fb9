//! What the benches share, each bench including it as `mod common`: its knobs, a checked and
//! timed execution in this process, the server binary over stdio and the `docker run` baseline
//! of the stdio benches, the gateway benches' fixture upstream and server; and the test support they need from tests/common (configurations in a
//! temporary directory, the docker CLI, the private engine, the images deployments build on),
//! included from there so that tests and benches run the same code.
#![allow(dead_code)]

pub mod busy;
pub mod cpu;
pub mod docker_run;
pub mod in_process;
pub mod knobs;
pub mod server;
pub mod stdio;
pub mod upstreams;

/// Runs a bench's `run` to its end on a multi-threaded runtime, as the server runs.
pub fn block_on<F: std::future::Future>(run: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(run)
}

#[path = "../../tests/common/config.rs"]
pub mod config;
#[path = "../../tests/common/docker.rs"]
pub mod docker;
#[path = "../../tests/common/images.rs"]
pub mod images;
#[path = "../../tests/common/private_engine.rs"]
pub mod private_engine;
