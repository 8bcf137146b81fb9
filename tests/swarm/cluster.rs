//! A Docker Swarm of private engines on this machine, with the stack of compose.yaml and
//! swarm.yaml deployed on it and HAProxy in front (tests/swarm and benches/swarm). The nodes and
//! their shared GlusterFS volume are made by `cluster.sh` (see its header); this file deploys
//! the server and drives clients. Everything is removed on drop, even after a failed assertion.

// The test and the bench each use part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");
/// The stack's name on the swarm.
pub const STACK: &str = "cem";
/// Where the proxy listens, inside the proxy's namespace (where the clients run).
pub const PROXY_URL: &str = "http://127.0.0.1:8080/mcp";
/// HAProxy's stats page, in the proxy's namespace.
const STATS_ADDR: &str = "127.0.0.1:8404";

fn script() -> PathBuf {
    Path::new(MANIFEST_DIR).join("tests/swarm/cluster.sh")
}

/// Runs `cmd`, panicking with its output when it fails.
pub fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What this machine lacks to build a swarm, if anything.
pub fn missing_prerequisite() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("building a swarm of private engines needs root".into());
    }
    for (tool, package) in [
        ("dockerd", "docker.io"),
        ("glusterd", "glusterfs-server"),
        ("haproxy", "haproxy"),
        ("ip", "iproute2"),
        ("nsenter", "util-linux"),
        ("curl", "curl"),
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!("{tool} is missing (apt-get install {package})"));
        }
    }
    None
}

/// The nodes, the volume, the proxy and the stack.
pub struct Swarm {
    pub dir: PathBuf,
    pub nodes: usize,
    /// The tenants' `name:token` file (the stack's tokens secret).
    pub tokens_file: PathBuf,
    pub tenants: Vec<(String, String)>,
    /// A Python with the MCP SDK (the clients).
    python: PathBuf,
    deployed: bool,
}

impl Swarm {
    /// `nodes` nodes with the GlusterFS volume mounted on each, the images loaded into each
    /// engine, and HAProxy in front of them. Tenants `tenants` get random tokens.
    pub fn up(nodes: usize, images: &[&str], tenants: &[&str], python: PathBuf) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = PathBuf::from(format!("/tmp/cem-swarm-{}", &id[..8]));
        let tenants: Vec<(String, String)> = tenants
            .iter()
            .map(|n| (n.to_string(), uuid::Uuid::new_v4().simple().to_string()))
            .collect();
        let swarm = Self {
            tokens_file: dir.join("tokens"),
            dir,
            nodes,
            tenants,
            python,
            deployed: false,
        };
        let started = Instant::now();
        run(Command::new("bash")
            .arg(script())
            .args(["up", &swarm.dir_str(), &nodes.to_string()]));
        eprintln!(
            "swarm: {nodes} nodes, volume and swarm up in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        swarm.load_images(images);
        swarm.write_secrets();
        swarm.start_proxy();
        swarm
    }

    pub fn dir_str(&self) -> String {
        self.dir.to_str().expect("UTF-8 path").to_string()
    }

    /// `docker save` once, `docker load` into every node at once (no registry here).
    fn load_images(&self, images: &[&str]) {
        let started = Instant::now();
        let tar = self.dir.join("images.tar");
        run(Command::new("docker")
            .args(["save", "-o"])
            .arg(&tar)
            .args(images));
        let loads: Vec<_> = (1..=self.nodes)
            .map(|i| {
                self.cluster(&["docker", &i.to_string(), "load", "-q", "-i"])
                    .arg(&tar)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("docker load")
            })
            .collect();
        for mut l in loads {
            assert!(
                l.wait().unwrap().success(),
                "docker load into a node failed"
            );
        }
        let _ = std::fs::remove_file(&tar);
        eprintln!(
            "swarm: {} images loaded into {} nodes in {:.1} s",
            images.len(),
            self.nodes,
            started.elapsed().as_secs_f64()
        );
    }

    fn write_secrets(&self) {
        let mut tokens = String::from("# swarm test tenants\n");
        for (name, token) in &self.tenants {
            tokens.push_str(&format!("{name}:{token}\n"));
        }
        std::fs::write(&self.tokens_file, tokens).unwrap();
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).unwrap();
        std::fs::write(self.dir.join("pii-key"), format!("{}\n", hex::encode(key))).unwrap();
    }

    /// images/proxy/haproxy.cfg with one `server` line per node.
    fn start_proxy(&self) {
        let template =
            std::fs::read_to_string(Path::new(MANIFEST_DIR).join("images/proxy/haproxy.cfg"))
                .unwrap();
        let mut cfg: String = template
            .lines()
            .filter(|l| !l.trim_start().starts_with("server "))
            .map(|l| format!("{l}\n"))
            .collect();
        for i in 1..=self.nodes {
            cfg.push_str(&format!(
                "    server node{i} {}:8080 check\n",
                self.node_ip(i)
            ));
        }
        // The proxy's own view of the nodes, for `wait_routed`.
        cfg.push_str(&format!(
            "\nfrontend stats\n    bind {STATS_ADDR}\n    stats enable\n    stats uri /stats\n"
        ));
        let path = self.dir.join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        run(self
            .cluster(&["proxy"])
            .arg(&path)
            .env("CEM_PROXY_BIND", "127.0.0.1:8080"));
    }

    /// The proxy sends to nodes 1..=n only (restarted with that server list).
    pub fn route_to(&self, n: usize) {
        let cfg = self.dir.join("haproxy.cfg");
        let text = std::fs::read_to_string(&cfg).unwrap();
        let kept: String = text
            .lines()
            .map(|l| {
                let t = l.trim_start().trim_start_matches("# ");
                match t.strip_prefix("server node") {
                    Some(rest) => {
                        let i: usize = rest.split(' ').next().unwrap().parse().unwrap();
                        if i <= n {
                            format!("    {t}\n")
                        } else {
                            format!("    # {t}\n")
                        }
                    }
                    None => format!("{l}\n"),
                }
            })
            .collect();
        std::fs::write(&cfg, kept).unwrap();
        let pid = std::fs::read_to_string(self.dir.join("proxy.pid")).unwrap();
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        std::thread::sleep(Duration::from_millis(300));
        run(self
            .cluster(&["proxy"])
            .arg(&cfg)
            .env("CEM_PROXY_BIND", "127.0.0.1:8080"));
        self.wait_routed(&(1..=n).collect::<Vec<_>>());
    }

    /// `curl -s ARGS` in the proxy's namespace.
    fn curl(&self, args: &[&str]) -> Command {
        let mut command = self.cluster(&["in-proxy", "curl", "-s"]);
        command.args(args);
        command
    }

    /// The proxy's stats, one row per node: its number and its fields.
    fn node_stats(&self) -> Vec<(usize, Vec<String>)> {
        let url = format!("http://{STATS_ADDR}/stats;csv");
        let Ok(out) = self.curl(&["-m", "3", &url]).output() else {
            return vec![];
        };
        stdout(&out)
            .lines()
            .filter_map(|l| {
                let f: Vec<String> = l.split(',').map(str::to_string).collect();
                let node = f.get(1)?.strip_prefix("node")?.parse().ok()?;
                (f.first().map(String::as_str) == Some("servers")).then_some((node, f))
            })
            .collect()
    }

    /// The nodes HAProxy marks UP (its stats page, in the proxy's namespace).
    pub fn routed(&self) -> Vec<usize> {
        (self.node_stats().into_iter())
            .filter(|(_, f)| f.get(17).map(String::as_str) == Some("UP"))
            .map(|(node, _)| node)
            .collect()
    }

    /// The node the proxy sends a request with this `Authorization` header to: the one whose
    /// session count in the proxy's stats grew by it.
    pub fn node_for(&self, authorization: &str) -> usize {
        let before = self.sessions_per_node();
        let header = format!("Authorization: {authorization}");
        let mcp = "http://127.0.0.1:8080/mcp";
        let args = [
            "-o",
            "/dev/null",
            "-m",
            "10",
            "-X",
            "POST",
            "-H",
            &header,
            "-d",
            "{}",
            mcp,
        ];
        let _ = self.curl(&args).output();
        let after = self.sessions_per_node();
        let grown: Vec<usize> = (after.iter())
            .filter(|(node, n)| before.get(node).is_none_or(|b| b < n))
            .map(|(node, _)| *node)
            .collect();
        assert_eq!(
            grown.len(),
            1,
            "one node got the request: {before:?} -> {after:?}"
        );
        grown[0]
    }

    /// Sessions the proxy sent each node so far (`stot` of its stats).
    fn sessions_per_node(&self) -> std::collections::BTreeMap<usize, u64> {
        (self.node_stats().into_iter())
            .filter_map(|(node, f)| Some((node, f.get(7)?.parse().ok()?)))
            .collect()
    }

    /// Waits until the proxy routes to exactly `nodes` (its checks need three good answers).
    pub fn wait_routed(&self, nodes: &[usize]) {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(60) {
            if self.routed() == nodes {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "the proxy did not route to nodes {nodes:?} within 60 s (it routes to {:?}):\n{}",
            self.routed(),
            self.diagnostics()
        );
    }

    /// The prefix of the swarm's namespaces and cgroups (`csXXXX`).
    pub fn prefix(&self) -> String {
        std::fs::read_to_string(self.dir.join("prefix"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// Node `i`'s address on the nodes' network.
    pub fn node_ip(&self, i: usize) -> String {
        let net = std::fs::read_to_string(self.dir.join("net")).unwrap();
        format!("{}.{}", net.trim(), 10 + i)
    }

    /// `cluster.sh CMD DIR ARGS...`
    pub fn cluster(&self, args: &[&str]) -> Command {
        let mut c = Command::new("bash");
        c.arg(script()).arg(args[0]).arg(&self.dir).args(&args[1..]);
        c
    }

    /// The docker CLI against node `i`.
    pub fn docker(&self, i: usize, args: &[&str]) -> Command {
        let mut c = Command::new("docker");
        c.arg("-H")
            .arg(format!("unix://{}/n{i}/run/docker.sock", self.dir_str()))
            .args(args);
        c
    }

    /// `docker stack deploy` of compose.yaml + swarm.yaml with `server_image`, then waits until
    /// every node's server answers /health.
    pub fn deploy(&mut self, server_image: &str, extra_env: &[(&str, &str)]) {
        let started = Instant::now();
        let mut cmd = self.docker(
            1,
            &[
                "stack",
                "deploy",
                "-c",
                "compose.yaml",
                "-c",
                "swarm.yaml",
                "--resolve-image",
                "never",
                STACK,
            ],
        );
        cmd.current_dir(MANIFEST_DIR)
            .env("CEM_SERVER_IMAGE", server_image)
            .env("CEM_DATA_HOST_DIR", "/run/cem-data")
            .env("CEM_TOKENS_FILE", &self.tokens_file)
            .env("CEM_PII_KEY_FILE", self.dir.join("pii-key"))
            .env("CEM_IMAGE_PROFILE", "minimal")
            .env("CEM_ALLOWED_HOSTS", "127.0.0.1,localhost")
            .env("CEM_POOL_SIZE", "1");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        run(&mut cmd);
        self.deployed = true;
        for i in 1..=self.nodes {
            self.wait_healthy(i, Duration::from_secs(180));
        }
        self.wait_routed(&(1..=self.nodes).collect::<Vec<_>>());
        eprintln!(
            "swarm: stack deployed, {} servers healthy in {:.1} s",
            self.nodes,
            started.elapsed().as_secs_f64()
        );
    }

    /// The HTTP status node `i`'s server answers `/health` with, seen from the proxy's side.
    pub fn health(&self, i: usize) -> Option<u16> {
        let url = format!("http://{}:8080/health", self.node_ip(i));
        let out = (self.curl(&["-o", "/dev/null", "-m", "5", "-w", "%{http_code}", &url]))
            .output()
            .ok()?;
        stdout(&out).parse().ok().filter(|c| *c != 0)
    }

    pub fn wait_healthy(&self, i: usize, limit: Duration) {
        let started = Instant::now();
        while started.elapsed() < limit {
            if self.health(i) == Some(200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!(
            "node {i}'s server never answered /health in {limit:?}:\n{}",
            self.diagnostics()
        );
    }

    /// Runs tests/python/swarm_tenants.py PHASE through the proxy (from the proxy's namespace).
    pub fn python(&self, phase: &str, args: &[&str]) -> Result<String, String> {
        let out = self
            .cluster(&["in-proxy"])
            .arg(&self.python)
            .arg(Path::new(MANIFEST_DIR).join("tests/python/swarm_tenants.py"))
            .args([phase, PROXY_URL])
            .arg(&self.tokens_file)
            .args(args)
            .output()
            .expect("run the Python client");
        if out.status.success() {
            Ok(stdout(&out))
        } else {
            Err(format!(
                "{phase} failed:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// The sandbox containers (managed label) on node `i`: (id, state).
    pub fn sandboxes(&self, i: usize) -> Vec<(String, String)> {
        let out = self
            .docker(
                i,
                &[
                    "ps",
                    "-a",
                    "--filter",
                    "label=io.code-execution-mcp.managed",
                    "--format",
                    "{{.ID}} {{.State}}",
                ],
            )
            .output()
            .expect("docker ps");
        // An engine that did not answer must not pass for one without sandboxes.
        assert!(
            out.status.success(),
            "docker ps on node {i} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    /// The id of the server's task container on node `i`.
    pub fn server_container(&self, i: usize) -> Option<String> {
        let out = self
            .docker(
                i,
                &[
                    "ps",
                    "-q",
                    "--filter",
                    &format!("label=com.docker.swarm.service.name={STACK}_server"),
                ],
            )
            .output()
            .ok()?;
        stdout(&out).lines().next().map(str::to_string)
    }

    /// The server's resident memory on node `i`, in MiB, and the node's engine's (dockerd and
    /// containerd).
    pub fn memory_mib(&self, i: usize) -> (f64, f64) {
        let server = self
            .server_container(i)
            .and_then(|c| {
                let out = self
                    .docker(i, &["inspect", "-f", "{{.State.Pid}}", &c])
                    .output()
                    .ok()?;
                stdout(&out).parse::<u32>().ok()
            })
            .map(rss_mib)
            .unwrap_or(0.0);
        let engine: f64 = ["dockerd", "containerd"]
            .iter()
            .map(|name| node_process_rss(&self.dir, i, name))
            .sum();
        (server, engine)
    }

    /// Logs of the stack and the nodes, for a failure message.
    pub fn diagnostics(&self) -> String {
        let mut out = String::new();
        let ps = self
            .docker(
                1,
                &["service", "ps", "--no-trunc", &format!("{STACK}_server")],
            )
            .output();
        if let Ok(ps) = ps {
            out.push_str(&String::from_utf8_lossy(&ps.stdout));
            out.push_str(&String::from_utf8_lossy(&ps.stderr));
        }
        for i in 1..=self.nodes {
            if let Some(c) = self.server_container(i)
                && let Ok(logs) = self.docker(i, &["logs", "--tail", "30", &c]).output()
            {
                out.push_str(&format!("--- node {i} server\n"));
                out.push_str(&String::from_utf8_lossy(&logs.stdout));
                out.push_str(&String::from_utf8_lossy(&logs.stderr));
            }
        }
        if let Ok(log) = std::fs::read_to_string(self.dir.join("haproxy.log")) {
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            out.push_str("--- haproxy\n");
            for l in tail.into_iter().rev() {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// Removes the stack (each server removes its sandboxes on SIGTERM) and waits for its
    /// containers to go.
    pub fn remove_stack(&mut self) {
        if !self.deployed {
            return;
        }
        let _ = self.docker(1, &["stack", "rm", STACK]).output();
        self.deployed = false;
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(90) {
            if (1..=self.nodes).all(|i| self.server_container(i).is_none()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!("the stack's servers did not stop in 90 s");
    }
}

impl Drop for Swarm {
    fn drop(&mut self) {
        let _ = self.cluster(&["down"]).output();
    }
}

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map(|kib| kib / 1024.0)
        .unwrap_or(0.0)
}

/// RSS of node `i`'s process named `name` (dockerd or containerd), found among the processes of
/// its network namespace.
fn node_process_rss(dir: &Path, i: usize, name: &str) -> f64 {
    let prefix = std::fs::read_to_string(dir.join("prefix")).unwrap_or_default();
    let out = Command::new("ip")
        .args(["netns", "pids", &format!("{}-n{i}", prefix.trim())])
        .output();
    let Ok(out) = out else { return 0.0 };
    stdout(&out)
        .lines()
        .filter_map(|p| p.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == name)
        })
        .map(rss_mib)
        .sum()
}

/// The host's network as `ip` shows it (links, addresses, routes, namespaces), to compare
/// before and after: the swarm must leave no trace on it.
pub fn host_network() -> String {
    let mut all = String::new();
    for args in [
        &["-o", "link", "show"][..],
        &["-o", "addr", "show"],
        &["route", "show"],
        &["-6", "route", "show"],
        &["netns", "list"],
    ] {
        let out = Command::new("ip").args(args).output().expect("ip");
        // Link counters and flags that change with traffic are not part of the comparison.
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let mut words = line.split_whitespace();
            let mut kept = vec![];
            while let Some(w) = words.next() {
                if w == "valid_lft" || w == "preferred_lft" {
                    words.next();
                } else {
                    kept.push(w);
                }
            }
            let line = kept.join(" ");
            all.push_str(&line);
            all.push('\n');
        }
    }
    all
}

/// The server image, built on the host's engine from `binary` (this build's server) on the
/// offline base the sandbox image was built on (no registry here); removed on drop.
pub struct ServerImage {
    pub tag: String,
}

impl ServerImage {
    /// `base`: the image the sandbox image was built on (`common::images::sandbox_base`).
    pub fn build(binary: &Path, base: &str) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let tag = format!("code-execution-mcp-server:swarm-{}", &id[..12]);
        let binary = binary
            .strip_prefix(MANIFEST_DIR)
            .expect("the server binary is inside the repository (no CARGO_TARGET_DIR)")
            .to_str()
            .expect("UTF-8 path")
            .to_string();
        run(Command::new("docker")
            .current_dir(MANIFEST_DIR)
            .args(["build", "-q", "-f", "images/server/Dockerfile", "-t", &tag])
            .args(["--build-arg", &format!("BASE={base}")])
            .args(["--build-arg", &format!("BUILD_IMAGE={base}")])
            .args(["--build-arg", &format!("BINARY={binary}"), "."]));
        Self { tag }
    }
}

impl Drop for ServerImage {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rmi", "-f", &self.tag])
            .output();
    }
}

/// What a removed swarm must not leave on the host: cgroups named after its prefix (the nodes'
/// and their containers'), and mounts below its directory.
pub fn leftovers(prefix: &str, dir: &Path) -> Vec<String> {
    let mut left = vec![];
    if let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") {
        for h in hierarchies.flatten() {
            if let Ok(entries) = std::fs::read_dir(h.path()) {
                left.extend(
                    entries
                        .flatten()
                        .map(|e| e.path())
                        .filter(|p| {
                            p.file_name()
                                .and_then(|n| n.to_str())
                                .is_some_and(|n| n.starts_with(&format!("{prefix}-n")))
                        })
                        .map(|p| p.display().to_string()),
                );
            }
        }
    }
    let dir = dir.to_str().unwrap_or_default().to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    left.extend(
        mounts
            .lines()
            .filter(|l| l.split(' ').nth(4).is_some_and(|m| m.starts_with(&dir)))
            .map(str::to_string),
    );
    left
}
