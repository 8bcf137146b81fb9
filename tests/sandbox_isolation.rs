//! Isolation claims of the sandbox not yet moved to the adversarial suite
//! (`tests/security_cases.rs`): posture, denied system calls, a private /tmp.

mod common;

use common::{TestApp, assert_ok};
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
