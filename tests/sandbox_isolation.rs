//! Every isolation claim of the sandbox, checked against the real Docker engine: network,
//! read-only root, non-root user, capabilities / no_new_privs / seccomp, io_uring and
//! namespaces denied, memory, pids, timeout, output caps, /tmp size, no leaks between
//! executions or from the server's environment.

mod common;

use code_execution_mcp::sandbox::Status;
use common::{TestApp, assert_ok, stdout};
use serde_json::json;

#[tokio::test]
async fn posture_matches_the_sandbox_posture_test() {
    let t = TestApp::start().await;
    let o = t
        .run(
            r#"
import os
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
result = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")}
result["uid"] = os.getuid()
result["euid"] = os.geteuid()
result["gid"] = os.getgid()
mounts = open("/proc/self/mounts").read().splitlines()
root = [m.split() for m in mounts if m.split()[1] == "/"][0]
result["root_opts"] = root[3].split(",")
tmp = [m.split() for m in mounts if m.split()[1] == "/tmp"][0]
result["tmp_opts"] = tmp[3].split(",")
result["kcore"] = os.stat("/proc/kcore").st_size if os.path.exists("/proc/kcore") else None
"#,
        )
        .await;
    assert_ok(&o);
    let r = &o.result;
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(r[cap], "0000000000000000", "{cap}");
    }
    assert_eq!(r["NoNewPrivs"], "1");
    assert_eq!(r["Seccomp"], "2");
    assert_ne!(r["uid"], 0);
    assert_ne!(r["euid"], 0);
    assert_ne!(r["gid"], 0);
    assert!(r["root_opts"].as_array().unwrap().contains(&json!("ro")));
    let tmp = r["tmp_opts"].as_array().unwrap();
    assert!(tmp.contains(&json!("nosuid")) && tmp.contains(&json!("noexec")));
    // /proc/kcore is masked (bind-mounted /dev/null: size 0) when present.
    assert!(r["kcore"].is_null() || r["kcore"] == 0);
    t.finish().await;
}

#[tokio::test]
async fn network_is_absent() {
    let t = TestApp::start().await;
    let o = t
        .run(
            r#"
import socket
out = {}
try:
    socket.getaddrinfo("example.com", 80)
    out["dns"] = "resolved"
except OSError as e:
    out["dns"] = type(e).__name__
for name, addr in [("public", ("1.1.1.1", 53)), ("gateway", ("172.17.0.1", 2375)), ("metadata", ("169.254.169.254", 80))]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr)
        out[name] = "connected"
    except OSError as e:
        out[name] = e.errno
    finally:
        s.close()
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    out["raw"] = "opened"
except OSError as e:
    out["raw"] = e.errno
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
result = out
"#,
        )
        .await;
    assert_ok(&o);
    let r = &o.result;
    assert_ne!(r["dns"], "resolved");
    for name in ["public", "gateway", "metadata"] {
        assert_ne!(r[name], "connected", "{name} reachable");
    }
    assert_ne!(r["raw"], "opened");
    assert_eq!(r["interfaces"], json!(["lo"]));
    t.finish().await;
}

#[tokio::test]
async fn root_filesystem_is_read_only_and_workspace_is_writable() {
    let t = TestApp::start().await;
    let o = t
        .run(
            r#"
import errno
out = {}
for path in ["/usr/evil", "/etc/evil", "/evil"]:
    try:
        open(path, "w").write("x")
        out[path] = "written"
    except OSError as e:
        out[path] = errno.errorcode[e.errno]
open("/workspace/ok.txt", "w").write("fine")
out["docker_sock"] = __import__("os").path.exists("/var/run/docker.sock")
result = out
"#,
        )
        .await;
    assert_ok(&o);
    for path in ["/usr/evil", "/etc/evil", "/evil"] {
        assert_eq!(o.result[path], "EROFS", "{path}");
    }
    assert_eq!(o.result["docker_sock"], false);
    assert_eq!(
        std::fs::read_to_string(t.workspace().join("ok.txt")).unwrap(),
        "fine"
    );
    t.finish().await;
}

#[tokio::test]
async fn io_uring_namespaces_and_privileged_syscalls_are_denied() {
    let t = TestApp::start().await;
    let o = t
        .run(
            r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    r = libc.syscall(nr, *args)
    return 0 if r >= 0 else ctypes.get_errno()
params = ctypes.create_string_buffer(120)
result = {
    "io_uring_setup": call(425, 8, params),
    "unshare_user": call(272, 0x10000000),
    "unshare_net": call(272, 0x40000000),
    "bpf": call(321, 0, 0, 0),
    "perf_event_open": call(298, 0, 0, -1, -1, 0),
    "userfaultfd": call(323, 0),
    "keyctl": call(250, 0, 0, 0, 0, 0),
    "ptrace_attach_1": call(101, 16, 1, 0, 0),
    "mount": call(165, b"none", b"/tmp", b"tmpfs", 0, 0),
}
try:
    os.setuid(0)
    result["setuid0"] = "became root"
except PermissionError as e:
    result["setuid0"] = e.errno
"#,
        )
        .await;
    assert_ok(&o);
    let r = o.result.as_object().unwrap();
    // EPERM (1) from seccomp or missing capabilities, for every one of them.
    for (name, errno) in r {
        assert_eq!(errno, &json!(1), "{name}: expected EPERM");
    }
    t.finish().await;
}

#[tokio::test]
async fn memory_limit_kills_and_is_reported() {
    let t = TestApp::start().await;
    let o = t
        .run_with(
            "b = bytearray(512 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1",
            None,
            None,
            Some(64.0),
        )
        .await;
    assert_eq!(o.status, Status::MemoryLimit, "{:?}", o.error);
    assert!(
        o.error
            .as_deref()
            .unwrap()
            .contains("Memory limit exceeded")
    );
    // The server is healthy afterwards.
    assert_ok(&t.run("result = 1").await);
    t.finish().await;
}

#[tokio::test]
async fn fork_bomb_stops_at_the_pids_limit() {
    let t = TestApp::start_with(|c| c.pids_limit = 32).await;
    let o = t
        .run_with(
            r#"
import os, time
children = 0
err = None
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as e:
        err = e.errno
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
result = {"children": children, "errno": err}
"#,
            None,
            Some(20.0),
            None,
        )
        .await;
    assert_ok(&o);
    assert!(o.result["children"].as_u64().unwrap() < 32, "{}", o.result);
    assert_eq!(o.result["errno"], 11, "EAGAIN expected: {}", o.result);
    assert_ok(&t.run("result = 1").await);
    t.finish().await;
}

#[tokio::test]
async fn timeout_kills_at_the_deadline_even_when_sigterm_is_ignored() {
    let t = TestApp::start().await;
    let o = t
        .run_with(
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('started')\nwhile True: pass",
            None,
            Some(2.0),
            None,
        )
        .await;
    assert_eq!(o.status, Status::Timeout);
    assert!(
        o.error
            .as_deref()
            .unwrap()
            .contains("timed out after 2 seconds")
    );
    assert_eq!(stdout(&o), "started\n");
    // Killed at the deadline, not left running: a generous bound, not a timing measurement.
    assert!(o.elapsed.as_secs_f64() < 30.0, "{:?}", o.elapsed);
    t.finish().await;
}

#[tokio::test]
async fn output_is_capped_and_marked_and_the_result_survives() {
    let t = TestApp::start_with(|c| c.max_output_bytes = 10_000).await;
    let o = t
        .run("import sys\nfor i in range(200000): print('x' * 50)\nsys.stderr.write('e' * 50000)\nresult = 'done'")
        .await;
    assert_ok(&o);
    assert_eq!(o.result, json!("done"));
    assert!(o.stdout.truncated() && o.stderr.truncated());
    assert!(o.stdout.as_str().len() <= 10_000);
    assert!(o.stderr.as_str().len() <= 10_000);
    t.finish().await;
}

#[tokio::test]
async fn a_flood_that_bypasses_the_harness_is_killed() {
    let t = TestApp::start_with(|c| c.max_output_bytes = 10_000).await;
    // Writes straight to the container's original stdout (the frame channel), around the
    // harness's own cap: the server's hard cap must stop it.
    let o = t
        .run_with(
            r#"
import os
fds = [fd for fd in range(3, 64) if os.path.exists(f"/proc/self/fd/{fd}")]
chunk = b"y" * 65536 + b"\n"
while True:
    for fd in fds:
        try:
            os.write(fd, chunk)
        except OSError:
            pass
"#,
            None,
            Some(60.0),
            None,
        )
        .await;
    assert_eq!(
        o.status,
        Status::OutputLimit,
        "{:?} {:?}",
        o.status,
        o.error
    );
    assert!(o.stdout.as_str().len() <= 10_000);
    t.finish().await;
}

#[tokio::test]
async fn tmp_is_small_private_and_fresh_every_time() {
    let t = TestApp::start_with(|c| c.tmpfs_mb = 8).await;
    let o = t
        .run(
            r#"
import errno
open("/tmp/canary", "w").write("secret")
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
    result = "filled"
except OSError as e:
    result = errno.errorcode[e.errno]
"#,
        )
        .await;
    assert_ok(&o);
    assert_eq!(o.result, "ENOSPC");
    let o = t
        .run("import os\nresult = os.path.exists('/tmp/canary')")
        .await;
    assert_eq!(o.result, false);
    t.finish().await;
}
