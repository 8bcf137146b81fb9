//! The adversarial suite: every case of the security catalogue
//! (`../shared/design/security-cases.md`), each attempted against the real engine and checked
//! for its safe outcome inside the sandbox and on the host. Every case takes a
//! [`HostWatch`] before it runs (canaries outside the workspace, a snapshot of the test's
//! directory) and finishes with it: canaries unchanged, nothing created or changed outside the
//! workspace and skills directories, the server still running `print(1)`, no container left.
//!
//! Sandbox code reports a JSON verdict (its `result`); the assertions are on the parsed values.
//!
//! Case → test:
//! - 1 [`case_01_file_tool_names_are_refused_before_any_disk_access`]
//! - 2 [`case_02_planted_symlinks_are_never_followed_by_the_file_tools`]
//! - 3 [`case_03_a_directory_swapped_for_a_symlink_mid_call_never_leads_outside`]
//! - 4 [`case_04_hard_links_out_of_the_workspace_fail_and_linked_names_are_replaced_not_written`]
//! - 5 [`case_05_proc_root_and_cwd_links_show_only_the_container`]
//! - 6 [`case_06_device_nodes_cannot_be_made_and_host_devices_are_absent`]
//! - 7 [`case_07_writes_under_the_root_filesystem_get_erofs`]
//! - 8 [`case_08_fifos_sockets_devices_and_sparse_files_are_refused_without_blocking`]
//! - 9 [`case_09_a_hundred_thousand_files_and_odd_names_list_bounded_and_usable`]
//! - 10 [`case_10_filling_the_workspace_past_its_quota_gets_enospc_or_a_quota_error`]
//! - 11 [`case_11_filling_tmp_gets_enospc_at_its_size`]
//! - 12 [`case_12_dns_lookups_fail`]
//! - 13 [`case_13_public_addresses_the_bridge_gateway_and_the_metadata_service_are_unreachable`]
//! - 14 [`case_14_ipv6_reaches_nothing_but_loopback`]
//! - 15 [`case_15_raw_and_packet_sockets_are_refused`]
//! - 16 [`case_16_engine_sockets_are_absent`]
//! - 17 [`case_17_netlink_changes_to_links_addresses_and_routes_are_refused`]
//! - 18 [`case_18_a_fork_bomb_stops_at_the_pids_limit`]
//! - 19 [`case_19_a_thread_bomb_stops_at_the_pids_limit`]
//! - 20 [`case_20_a_memory_bomb_is_killed_and_reported_as_the_memory_limit`]
//! - 21 [`case_21_a_busy_loop_is_killed_at_the_deadline`]
//! - 22 [`case_22_code_ignoring_sigterm_is_sigkilled_at_the_deadline`]
//! - 23 [`case_23_a_double_forked_daemon_is_gone_with_the_container`]
//! - 24 [`case_24_a_gigabyte_to_stdout_is_capped_and_the_server_stays_small`]
//! - 25 [`case_25_a_100_mb_line_and_binary_output_are_bounded_and_decoded_lossily`]
//! - 26 [`case_26_opening_files_stops_at_the_nofile_limit`]
//! - 27 [`case_27_a_huge_result_is_capped_and_marked`]

mod common;

use std::path::Path;
use std::time::Duration;

use code_execution_mcp::sandbox::Status;
use common::host_watch::HostWatch;
use common::{TestApp, assert_ok, call_tool, mcp_client};
use serde_json::{Value, json};

/// Runs `code` with `ctx` as its context variables and returns its `result`, asserting it ran.
async fn verdict(t: &TestApp, code: &str, ctx: Value) -> Value {
    let o = t.run_with(code, Some(ctx), Some(120.0), None).await;
    assert_ok(&o);
    o.result
}

/// A unique name for paths a case must not create.
fn token(case: &str) -> String {
    format!("cem-{case}-{}", uuid::Uuid::new_v4().simple())
}

/// The error text of a refused tool call (`{success: false, error}`).
#[track_caller]
fn refusal(is_error: bool, answer: &Value, what: &str) -> String {
    assert!(is_error, "{what} was accepted: {answer}");
    assert_eq!(answer["success"], false, "{what}: {answer}");
    answer["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no error text in {answer}"))
        .to_string()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

// ----- filesystem escape -----

/// 1. "File tool names `../../x`, `/etc/x`, NUL inside, 4 KB long, `a/../../b` → refused before
///    any disk access."
#[tokio::test]
async fn case_01_file_tool_names_are_refused_before_any_disk_access() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let client = mcp_client(t.app.clone()).await;
    let name = token("case01");
    let escapes = "leaves the workspace";
    let names = [
        (format!("../../{name}"), escapes),
        (format!("/etc/{name}"), escapes),
        (format!("{}/{name}", watch.canary_dir().display()), escapes),
        ("../outside/secret.txt".to_string(), escapes),
        (format!("a/../../{name}"), escapes),
        (format!("a/b/../../../{name}"), escapes),
        (format!("{name}\0.txt"), "NUL"),
        (format!("a\0/../../{name}"), "NUL"),
        ("a".repeat(4096), "4096 bytes long"),
        (
            format!("{}/{name}", "d".repeat(300)),
            "a name in it is 300 bytes long",
        ),
        (format!("a\nb/{name}"), "control character"),
        (format!("a\\..\\..\\{name}"), "backslash"),
    ];
    for (bad, rule) in &names {
        for tool in [
            "read_workspace_file",
            "write_workspace_file",
            "delete_workspace_file",
        ] {
            let (err, v) = call_tool(&client, tool, json!({"filename": bad, "content": "x"})).await;
            let message = refusal(err, &v, &format!("{tool}({bad:.60?})"));
            assert!(
                message.contains(rule),
                "{tool}({bad:.60?}): the error names the rule {rule:?}: {message}"
            );
            watch.assert_not_leaked(&v);
        }
        let (err, v) = call_tool(&client, "list_workspace_files", json!({"subpath": bad})).await;
        let message = refusal(err, &v, &format!("list_workspace_files({bad:.60?})"));
        assert!(message.contains(rule), "{message}");
    }
    // Nothing was created, not even the directory `a` that `a/../../x` starts with.
    let left: Vec<_> = std::fs::read_dir(t.workspace())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "the workspace gained {left:?}");
    for dir in [
        Path::new("/tmp"),
        Path::new("/etc"),
        watch.root(),
        watch.root().parent().unwrap(),
    ] {
        assert!(!dir.join(&name).exists(), "{} was created", dir.display());
    }
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 2. "Sandbox plants `ws/evil -> /etc/passwd` (or -> a host secret's absolute path); then
///    read/write/list via the workspace tools → refused; host file neither returned nor
///    modified."
#[tokio::test]
async fn case_02_planted_symlinks_are_never_followed_by_the_file_tools() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let client = mcp_client(t.app.clone()).await;
    let plant = r#"
import os
os.symlink(secret, "/workspace/evil")
os.symlink("/etc/passwd", "/workspace/passwd")
os.symlink(outside, "/workspace/outdir")
os.symlink("..", "/workspace/up")
os.symlink("/", "/workspace/rootlink")
os.makedirs("/workspace/sub")
os.symlink("/etc", "/workspace/sub/etc")
os.symlink(secret, "/workspace/sub/secret")
os.symlink("../real.txt", "/workspace/sub/inner")
open("/workspace/real.txt", "w").write("real")
result = sorted(os.listdir("/workspace"))
"#;
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": plant, "context_vars": {"secret": watch.canary_file(), "outside": watch.canary_dir()}}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(
        v["result"],
        json!([
            "evil", "outdir", "passwd", "real.txt", "rootlink", "sub", "up"
        ])
    );

    // Reads through a link, at the end of the path or in the middle: refused as a symlink.
    for name in [
        "evil",
        "passwd",
        "outdir/secret.txt",
        "outdir/only-outside.txt",
        "up/outside/secret.txt",
        "rootlink/etc/passwd",
        "sub/etc/passwd",
        "sub/secret",
        "sub/inner",
    ] {
        let (err, v) = call_tool(&client, "read_workspace_file", json!({ "filename": name })).await;
        let message = refusal(err, &v, &format!("read of {name}"));
        assert!(message.contains("symlink"), "{name}: {message}");
        watch.assert_not_leaked(&v);
        assert!(!v.to_string().contains("root:x:0"), "{v}");
    }
    // Listing shows regular files only and never descends into a linked directory.
    let (err, v) = call_tool(&client, "list_workspace_files", json!({})).await;
    assert!(!err, "{v}");
    assert_eq!(v["files"], json!(["real.txt"]), "{v}");
    for sub in ["outdir", "up", "rootlink", "sub/etc"] {
        let (err, v) = call_tool(&client, "list_workspace_files", json!({ "subpath": sub })).await;
        let message = refusal(err, &v, &format!("list of {sub}"));
        assert!(message.contains("symlink"), "{sub}: {message}");
    }
    // Writes and deletes through a linked directory: refused, nothing created or removed there.
    for name in [
        "outdir/secret.txt",
        "outdir/new.txt",
        "up/outside/secret.txt",
        "up/escaped.txt",
        "sub/etc/evil",
        "rootlink/tmp/evil",
    ] {
        let (err, v) = call_tool(
            &client,
            "write_workspace_file",
            json!({ "filename": name, "content": "pwned" }),
        )
        .await;
        let message = refusal(err, &v, &format!("write through {name}"));
        assert!(message.contains("symlink"), "{name}: {message}");
        let (err, v) = call_tool(
            &client,
            "delete_workspace_file",
            json!({ "filename": name }),
        )
        .await;
        refusal(err, &v, &format!("delete through {name}"));
    }
    let (err, v) = call_tool(
        &client,
        "delete_workspace_file",
        json!({"filename": "outdir/only-outside.txt"}),
    )
    .await;
    refusal(err, &v, "delete of a file behind a linked directory");

    // A link at the name itself: a write replaces the link (its target is untouched), a delete
    // removes the link.
    for name in ["evil", "sub/secret"] {
        let (err, v) = call_tool(
            &client,
            "write_workspace_file",
            json!({ "filename": name, "content": "replaced" }),
        )
        .await;
        assert!(!err, "{v}");
        let path = t.workspace().join(name);
        assert!(!path.is_symlink(), "{name} is still a link");
        assert_eq!(std::fs::read_to_string(path).unwrap(), "replaced");
    }
    let (err, v) = call_tool(
        &client,
        "delete_workspace_file",
        json!({ "filename": "passwd" }),
    )
    .await;
    assert!(!err, "{v}");
    assert!(!t.workspace().join("passwd").exists());
    let (_, v) = call_tool(&client, "list_workspace_files", json!({})).await;
    assert_eq!(v["files"], json!(["evil", "real.txt", "sub/secret"]), "{v}");
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 3. "Directory swapped for a symlink between check and use → still safe: resolve beneath an
///    open dir fd, no check-then-open."
///
/// Sandbox code exchanges `d` (a real directory) and `d_swap` (a symlink to the canary's
/// directory) with `renameat2(RENAME_EXCHANGE)` in a tight loop while the file tools read,
/// write, list and delete through `d` hundreds of times.
#[tokio::test]
async fn case_03_a_directory_swapped_for_a_symlink_mid_call_never_leads_outside() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let client = mcp_client(t.app.clone()).await;
    let ws = t.workspace();
    let flipper = r#"
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/workspace/d")
open("/workspace/d/secret.txt", "w").write("inside")
os.symlink(outside, "/workspace/d_swap")
open("/workspace/flipping", "w").write("1")
flips, failed = 0, 0
deadline = time.monotonic() + 100
while not os.path.exists("/workspace/stop") and time.monotonic() < deadline:
    for _ in range(100):
        if libc.renameat2(-100, b"/workspace/d", -100, b"/workspace/d_swap", 2) == 0:
            flips += 1
        else:
            failed += 1
result = {"flips": flips, "failed": failed}
"#;
    let app = t.app.clone();
    let outside = watch.canary_dir();
    let flipping = tokio::spawn(async move {
        app.execute(
            flipper.into(),
            Some(json!({ "outside": outside })),
            Some(120.0),
            None,
            Default::default(),
            None,
        )
        .await
    });
    for _ in 0..600 {
        if ws.join("flipping").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ws.join("flipping").exists(), "the flipper did not start");

    let (mut read_ok, mut read_refused, mut write_ok, mut write_refused) = (0, 0, 0, 0);
    let mut i = 0;
    while i < 300 || (i < 3000 && (read_ok == 0 || read_refused == 0)) {
        i += 1;
        let (err, v) = call_tool(
            &client,
            "read_workspace_file",
            json!({"filename": "d/secret.txt"}),
        )
        .await;
        watch.assert_not_leaked(&v);
        if err {
            read_refused += 1;
        } else {
            let content = v["content"].as_str().unwrap();
            assert!(
                content == "inside" || content.starts_with("write "),
                "read {content:?}"
            );
            read_ok += 1;
        }
        let (err, v) = call_tool(
            &client,
            "write_workspace_file",
            json!({"filename": "d/secret.txt", "content": format!("write {i}")}),
        )
        .await;
        if err {
            write_refused += 1;
        } else {
            write_ok += 1;
        }
        watch.assert_not_leaked(&v);
        let (err, v) = call_tool(&client, "list_workspace_files", json!({})).await;
        assert!(!err, "{v}");
        for f in v["files"].as_array().unwrap() {
            let f = f.as_str().unwrap();
            assert!(!f.contains("only-outside"), "listed through the link: {f}");
        }
        if i % 10 == 0 {
            let (err, v) = call_tool(
                &client,
                "delete_workspace_file",
                json!({"filename": "d/only-outside.txt"}),
            )
            .await;
            assert!(err, "deleted through the link: {v}");
        }
    }
    std::fs::write(ws.join("stop"), "1").unwrap();
    let (o, _) = flipping.await.unwrap().unwrap();
    assert_ok(&o);
    assert!(o.result["flips"].as_u64().unwrap() > 0, "{}", o.result);
    // Both states were seen, so the calls really raced the swap.
    assert!(
        read_ok > 0 && read_refused > 0,
        "reads ok {read_ok}, refused {read_refused} in {i} rounds"
    );
    assert!(
        write_ok > 0 && write_refused > 0,
        "writes ok {write_ok}, refused {write_refused}"
    );
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 4. "Hard link from the workspace to another file → EXDEV/EPERM; the server skips files with
///    st_nlink > 1 when it matters."
///
/// From the sandbox, links to anything outside the workspace mount fail (EXDEV), and a link to
/// a host-owned file inside it fails under `fs.protected_hardlinks` (EPERM). A file with
/// several names inside the workspace (made by the sandbox, or by the host to a host file):
/// the server may read it, and its writes and deletes replace or unlink the name, so the other
/// name's data never changes.
#[tokio::test]
async fn case_04_hard_links_out_of_the_workspace_fail_and_linked_names_are_replaced_not_written() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let ws = t.workspace();
    // A file the host owns inside the workspace (root-owned when the tests run as root).
    std::fs::write(ws.join("host_owned.txt"), "host").unwrap();
    let v = verdict(
        &t,
        r#"
import errno, os
out = {}
open("/tmp/t.txt", "w").write("tmp")
skill = "/skills/" + next(n for n in sorted(os.listdir("/skills")) if n.endswith(".py"))
for name, src in [("etc_passwd", "/etc/passwd"), ("skills", skill), ("tmp", "/tmp/t.txt"),
                  ("harness", "/opt/sandbox/harness.py"), ("proc", "/proc/self/status")]:
    try:
        os.link(src, f"/workspace/link_{name}")
        out[name] = "linked"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
try:
    os.link("/workspace/host_owned.txt", "/workspace/link_host_owned")
    out["host_owned"] = "linked"
except OSError as e:
    out["host_owned"] = errno.errorcode[e.errno]
open("/workspace/a.txt", "w").write("original")
os.link("/workspace/a.txt", "/workspace/b.txt")
out["nlink"] = os.stat("/workspace/a.txt").st_nlink
result = out
"#,
        json!({}),
    )
    .await;
    for name in ["etc_passwd", "skills", "tmp", "harness", "proc"] {
        assert_eq!(v[name], "EXDEV", "a link to {name}: {v}");
    }
    let protected =
        std::fs::read_to_string("/proc/sys/fs/protected_hardlinks").is_ok_and(|s| s.trim() == "1");
    if is_root() && protected {
        assert_eq!(v["host_owned"], "EPERM", "{v}");
    }
    assert_eq!(v["nlink"], 2);

    let client = mcp_client(t.app.clone()).await;
    let (err, r) = call_tool(&client, "read_workspace_file", json!({"filename": "b.txt"})).await;
    assert!(!err, "{r}");
    assert_eq!(r["content"], "original");
    let (err, r) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": "b.txt", "content": "changed"}),
    )
    .await;
    assert!(!err, "{r}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "original"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("b.txt")).unwrap(),
        "changed"
    );

    // A host file linked into the workspace by someone on the host: writes and deletes through
    // the tools leave the host file as it was (the watch checks its content and mtime).
    std::fs::hard_link(watch.canary_file(), ws.join("shared.txt")).unwrap();
    std::fs::hard_link(watch.canary_file(), ws.join("shared2.txt")).unwrap();
    let (err, r) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": "shared.txt", "content": "overwritten"}),
    )
    .await;
    assert!(!err, "{r}");
    let (err, r) = call_tool(
        &client,
        "delete_workspace_file",
        json!({"filename": "shared2.txt"}),
    )
    .await;
    assert!(!err, "{r}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(watch.canary_file()).unwrap().nlink(), 1);
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 5. "`/proc/self/root`, `/proc/1/root`, `/proc/self/cwd` → only the container's own tree."
#[tokio::test]
async fn case_05_proc_root_and_cwd_links_show_only_the_container() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, os
def same(a, b):
    x, y = os.stat(a), os.stat(b)
    return (x.st_dev, x.st_ino) == (y.st_dev, y.st_ino)
out = {"self_root": same("/proc/self/root", "/"),
       "self_root_listing": sorted(os.listdir("/proc/self/root")) == sorted(os.listdir("/")),
       "cwd": os.readlink("/proc/self/cwd"),
       "cwd_is_workspace": same("/proc/self/cwd", "/workspace"),
       "harness_via_root": os.path.exists("/proc/self/root/opt/sandbox/harness.py")}
roots = {}
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        roots[pid] = same(f"/proc/{pid}/root", "/")
    except OSError as e:
        roots[pid] = errno.errorcode[e.errno]
out["roots"] = roots
out["host_paths_seen"] = [base + p for base in ("/proc/self/root", "/proc/1/root", "/proc/self/cwd/..", "")
                          for p in host_paths if os.path.lexists(base + p)]
result = out
"#,
        json!({"host_paths": [watch.canary_file(), watch.root(), t.workspace()]}),
    )
    .await;
    assert_eq!(v["self_root"], true, "{v}");
    assert_eq!(v["self_root_listing"], true, "{v}");
    assert_eq!(v["cwd"], "/workspace");
    assert_eq!(v["cwd_is_workspace"], true);
    assert_eq!(v["harness_via_root"], true, "the check itself works: {v}");
    let roots = v["roots"].as_object().unwrap();
    assert!(roots.contains_key("1"), "{v}");
    for (pid, root) in roots {
        assert!(
            root == true || root == "EACCES" || root == "EPERM",
            "/proc/{pid}/root leads elsewhere: {root}"
        );
    }
    assert_eq!(v["host_paths_seen"], json!([]), "{v}");
    watch.finish(t).await;
}

/// 6. "`mknod`, `/dev/mem`, `/dev/sda` → EPERM / absent."
#[tokio::test]
async fn case_06_device_nodes_cannot_be_made_and_host_devices_are_absent() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, os, stat
out = {"mknod": {}, "present": [], "block_devices": []}
for where in ("/tmp", "/workspace"):
    for kind, mode, dev in (("char_mem", stat.S_IFCHR, os.makedev(1, 1)), ("char_null", stat.S_IFCHR, os.makedev(1, 3)),
                            ("block_sda", stat.S_IFBLK, os.makedev(8, 0))):
        try:
            os.mknod(f"{where}/{kind}", mode | 0o666, dev)
            out["mknod"][f"{where}/{kind}"] = "made"
        except OSError as e:
            out["mknod"][f"{where}/{kind}"] = errno.errorcode[e.errno]
for p in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/xvda",
          "/dev/kmsg", "/dev/loop0", "/dev/loop-control", "/dev/mapper", "/dev/disk", "/dev/fuse", "/dev/dri",
          "/dev/kvm", "/dev/net/tun", "/dev/cpu", "/dev/snd", "/dev/watchdog", "/dev/hwrng"):
    if os.path.lexists(p):
        out["present"].append(p)
for top, dirs, files in os.walk("/dev"):
    for n in dirs + files:
        p = os.path.join(top, n)
        try:
            if stat.S_ISBLK(os.lstat(p).st_mode):
                out["block_devices"].append(p)
        except OSError:
            pass
out["null_works"] = open("/dev/null", "rb").read() == b""
result = out
"#,
        json!({}),
    )
    .await;
    let made = v["mknod"].as_object().unwrap();
    assert_eq!(made.len(), 6);
    for (path, errno) in made {
        assert_eq!(errno, "EPERM", "mknod {path}");
    }
    assert_eq!(v["present"], json!([]), "{v}");
    assert_eq!(v["block_devices"], json!([]), "{v}");
    assert_eq!(v["null_works"], true);
    watch.finish(t).await;
}

/// 7. "Writes under `/`, `/usr`, `/etc` → EROFS."
#[tokio::test]
async fn case_07_writes_under_the_root_filesystem_get_erofs() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, os, sysconfig
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
site = sysconfig.get_path("purelib")
for path in ("/evil", "/usr/evil", "/etc/evil", "/etc/profile.d/evil.sh", "/opt/sandbox/evil.py",
             "/usr/local/bin/evil", site + "/evil.pth", "/var/tmp/evil", "/run/evil", "/home/evil",
             "/skills/evil.py"):
    attempt("create " + path, lambda: open(path, "x").write("x"))
attempt("mkdir /usr/evil.d", lambda: os.mkdir("/usr/evil.d"))
attempt("rename python", lambda: os.rename("/usr/local/bin/python3", "/usr/local/bin/python3.bak"))
attempt("symlink /etc", lambda: os.symlink("/tmp", "/etc/evil-link"))
out["left"] = [p for p in ("/evil", "/usr/evil", "/etc/evil", "/usr/evil.d", site + "/evil.pth") if os.path.lexists(p)]
open("/workspace/ok.txt", "w").write("fine")
result = out
"#,
        json!({}),
    )
    .await;
    let attempts = v.as_object().unwrap();
    for (name, errno) in attempts {
        if name != "left" {
            assert_eq!(errno, "EROFS", "{name}: {v}");
        }
    }
    assert_eq!(attempts.len(), 15, "{v}");
    assert_eq!(v["left"], json!([]));
    // The positive control: the workspace is writable.
    assert_eq!(
        std::fs::read_to_string(t.workspace().join("ok.txt")).unwrap(),
        "fine"
    );
    watch.finish(t).await;
}

/// 8. "FIFO, socket, device, huge sparse file left in the workspace → the server reads regular
///    files only, without blocking, with a size cap."
#[tokio::test]
async fn case_08_fifos_sockets_devices_and_sparse_files_are_refused_without_blocking() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let ws = t.workspace();
    let v = verdict(
        &t,
        r#"
import os, socket
os.mkfifo("/workspace/fifo")
s = socket.socket(socket.AF_UNIX)
s.bind("/workspace/sock")
s.close()
with open("/workspace/sparse.bin", "wb") as f:
    f.truncate(1 << 40)
open("/workspace/ok.txt", "w").write("ok")
result = sorted(os.listdir("/workspace"))
"#,
        json!({}),
    )
    .await;
    assert_eq!(v, json!(["fifo", "ok.txt", "sock", "sparse.bin"]));
    let mut expected = vec![
        ("fifo", "fifo"),
        ("sock", "socket"),
        ("sparse.bin", "over the 10 MiB limit"),
    ];
    // The sandbox cannot make a device node (case 6); the host can, and it is refused too.
    if is_root() {
        let dev = ws.join("zero.dev");
        let path = std::ffi::CString::new(dev.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path; mknod does not keep the pointer.
        let made =
            unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 5)) };
        assert_eq!(made, 0, "mknod: {}", std::io::Error::last_os_error());
        expected.push(("zero.dev", "character device"));
    }
    let client = mcp_client(t.app.clone()).await;
    for (name, why) in expected {
        let (err, v) = tokio::time::timeout(
            Duration::from_secs(30),
            call_tool(&client, "read_workspace_file", json!({ "filename": name })),
        )
        .await
        .unwrap_or_else(|_| panic!("reading {name} blocked"));
        let message = refusal(err, &v, &format!("read of {name}"));
        assert!(message.contains(why), "{name}: {message}");
    }
    let (err, v) = call_tool(&client, "list_workspace_files", json!({})).await;
    assert!(!err, "{v}");
    assert_eq!(v["files"], json!(["ok.txt", "sparse.bin"]), "{v}");
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 9. "100k files, names with newlines or invalid UTF-8 → listing bounded; names escaped or
///    skipped, never a crash."
#[tokio::test]
async fn case_09_a_hundred_thousand_files_and_odd_names_list_bounded_and_usable() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import os
for d in range(10):
    os.makedirs(f"/workspace/many/d{d}")
flags = os.O_CREAT | os.O_WRONLY
for i in range(100_000):
    os.close(os.open(f"/workspace/many/d{i % 10}/f{i}", flags, 0o644))
os.makedirs("/workspace/odd")
for name in (b"new\nline.txt", b"bad\xff\xfe.txt", b"tab\there.txt", b"back\\slash.txt", b"esc\x1b[31m.txt", b"ok.txt"):
    os.close(os.open(b"/workspace/odd/" + name, flags, 0o644))
result = sum(len(os.listdir(f"/workspace/many/d{d}")) for d in range(10))
"#,
        json!({}),
    )
    .await;
    assert_eq!(v, 100_000);
    let limit = code_execution_mcp::workspace::DEFAULT_MAX_LIST_ENTRIES;
    let client = mcp_client(t.app.clone()).await;
    let (err, v) = call_tool(&client, "list_workspace_files", json!({})).await;
    assert!(!err, "{:.300}", v.to_string());
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), limit, "bounded at the listing limit");
    assert_eq!(v["count"], limit);
    assert_eq!(v["truncated"], true);
    for f in files {
        let f = f.as_str().unwrap();
        assert!(
            !f.chars().any(char::is_control) && !f.contains('\\'),
            "{f:?}"
        );
    }
    // Names the tools would refuse are left out and counted; the rest can be used as listed.
    let (err, v) = call_tool(&client, "list_workspace_files", json!({"subpath": "odd"})).await;
    assert!(!err, "{v}");
    assert_eq!(v["files"], json!(["odd/ok.txt"]), "{v}");
    assert_eq!(v["skipped"], 5, "{v}");
    assert_eq!(v["truncated"], false, "{v}");
    let (err, v) = call_tool(
        &client,
        "read_workspace_file",
        json!({"filename": "odd/ok.txt"}),
    )
    .await;
    assert!(!err, "{v}");
    let (err, v) = call_tool(
        &client,
        "read_workspace_file",
        json!({"filename": "odd/new\nline.txt"}),
    )
    .await;
    refusal(err, &v, "a name with a newline");
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 10. "Filling the workspace past its quota → ENOSPC or a clear quota error; host disk
///     unaffected."
///
/// As root the quota is a loop-mounted ext4 image: code gets ENOSPC, the image never grows past
/// the quota, and the file tools say the workspace is full. Without a kernel quota (soft mode:
/// here a workspace that already held files) the next execution and tool writes are refused
/// with "workspace is full" until files are deleted.
#[tokio::test]
async fn case_10_filling_the_workspace_past_its_quota_gets_enospc_or_a_quota_error() {
    const QUOTA_MB: u64 = 16;
    let fill = r#"
import errno
try:
    with open("/workspace/big.bin", "wb") as f:
        for _ in range(40):
            f.write(b"\1" * (1 << 20))
            f.flush()
    result = "wrote 40 MiB"
except OSError as e:
    result = errno.errorcode[e.errno]
"#;
    if common::root_or_skip("the loop-mounted quota") {
        let t = TestApp::start_with(|c| c.workspace_quota_mb = QUOTA_MB).await;
        let watch = HostWatch::for_app(&t);
        assert_eq!(t.app.quota.kind(), "loop_mount");
        let ws = t.workspace();
        let o = t.run(fill).await;
        assert_ok(&o);
        assert_eq!(o.result, "ENOSPC");
        let size = std::fs::metadata(ws.join("big.bin")).unwrap().len();
        assert!(size <= QUOTA_MB << 20, "{size}");
        // The host disk holds at most the image's size.
        use std::os::unix::fs::MetadataExt;
        let image = common::host_watch::app_dirs(&t)[2].clone();
        let allocated = std::fs::metadata(&image).unwrap().blocks() * 512;
        assert!(allocated <= QUOTA_MB << 20, "image allocates {allocated}");
        let client = mcp_client(t.app.clone()).await;
        let (err, v) = call_tool(
            &client,
            "write_workspace_file",
            json!({"filename": "more.txt", "content": "x".repeat(2 << 20)}),
        )
        .await;
        let message = refusal(err, &v, "a write to a full workspace");
        assert!(message.contains("workspace is full"), "{message}");
        client.cancel().await.unwrap();
        watch.finish(t).await;
        code_execution_mcp::workspace::quota::unmount(&ws).unwrap();
    }

    // Soft mode: a workspace that already holds files is not mounted over.
    let t = TestApp::start_with(|c| {
        c.workspace_quota_mb = QUOTA_MB;
        let ws = c.workspace.clone().unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("existing.txt"), "kept").unwrap();
    })
    .await;
    let watch = HostWatch::for_app(&t);
    assert_eq!(t.app.quota.kind(), "soft");
    let o = t.run(fill).await;
    assert_ok(&o);
    assert_eq!(o.result, "wrote 40 MiB", "soft mode has no kernel limit");
    let err = t
        .app
        .execute(
            "print(1)".into(),
            None,
            None,
            None,
            Default::default(),
            None,
        )
        .await
        .expect_err("an execution while over the quota");
    assert!(err.to_string().contains("workspace is full"), "{err}");
    let client = mcp_client(t.app.clone()).await;
    let (err, v) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": "more.txt", "content": "x"}),
    )
    .await;
    let message = refusal(err, &v, "a write over the soft quota");
    assert!(message.contains("workspace is full"), "{message}");
    let (err, v) = call_tool(
        &client,
        "delete_workspace_file",
        json!({"filename": "big.bin"}),
    )
    .await;
    assert!(!err, "{v}");
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 11. "Filling `/tmp` (tmpfs) → ENOSPC at its size."
#[tokio::test]
async fn case_11_filling_tmp_gets_enospc_at_its_size() {
    let t = TestApp::start_with(|c| c.tmpfs_mb = 8).await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, os
st = os.statvfs("/tmp")
written, err = 0, None
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
            f.flush()
            written += 1 << 20
except OSError as e:
    err = errno.errorcode[e.errno]
result = {"size": st.f_blocks * st.f_frsize, "written": written, "errno": err}
"#,
        json!({}),
    )
    .await;
    assert_eq!(v["errno"], "ENOSPC", "{v}");
    assert_eq!(v["size"], 8 << 20, "{v}");
    let written = v["written"].as_u64().unwrap();
    assert!(
        (4 << 20..=8 << 20).contains(&written),
        "stopped at {written} bytes"
    );
    watch.finish(t).await;
}

// ----- network -----

/// The errno names that mean "no route from here": what every outside address must get.
const UNREACHABLE: [&str; 2] = ["ENETUNREACH", "EHOSTUNREACH"];

/// Python: `probe(targets)` tries TCP connect and UDP send to each `label: [address, port]` and
/// returns `{label: errno name | "connected" | "sent" | "timeout"}` (labels get `_tcp`/`_udp`).
const PROBE: &str = r#"
import errno, socket
def _name(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    return errno.errorcode.get(e.errno, str(e.errno))
def probe(targets, family=socket.AF_INET):
    out = {}
    for label, (host, port) in targets.items():
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect((host, port))
            out[label + "_tcp"] = "connected"
        except OSError as e:
            out[label + "_tcp"] = _name(e)
        finally:
            s.close()
        u = socket.socket(family, socket.SOCK_DGRAM)
        try:
            u.sendto(b"x", (host, port))
            out[label + "_udp"] = "sent"
        except OSError as e:
            out[label + "_udp"] = _name(e)
        finally:
            u.close()
    return out
"#;

/// 12. "DNS lookup → fails."
#[tokio::test]
async fn case_12_dns_lookups_fail() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let code = format!(
        "{PROBE}{}",
        r#"
import struct
out = {}
for label, name in (("public", "example.com"), ("google", "dns.google"), ("metadata", "metadata.google.internal")):
    try:
        socket.getaddrinfo(name, 80)
        out[label] = "resolved"
    except socket.gaierror:
        out[label] = "gaierror"
    except OSError as e:
        out[label] = _name(e)
servers = [l.split()[1] for l in open("/etc/resolv.conf").read().splitlines() if l.startswith("nameserver")]
resolvers = {f"resolv_conf_{i}": [ip, 53] for i, ip in enumerate(servers)}
resolvers.update(public_resolvers)
out["resolvers"] = probe(resolvers)
result = out
"#
    );
    let v = verdict(
        &t,
        &code,
        json!({"public_resolvers": {"google_dns": ["8.8.8.8", 53], "cloudflare_dns": ["1.1.1.1", 53]}}),
    )
    .await;
    for name in ["public", "google", "metadata"] {
        assert_eq!(v[name], "gaierror", "{name}: {v}");
    }
    let resolvers = v["resolvers"].as_object().unwrap();
    assert!(resolvers.len() >= 4, "{v}");
    for (label, outcome) in resolvers {
        assert!(
            UNREACHABLE.contains(&outcome.as_str().unwrap()),
            "{label}: {outcome}"
        );
    }
    watch.finish(t).await;
}

/// The engine's default bridge gateway: the IPAM gateway of the `bridge` network, or the first
/// address of its subnet (what Docker assigns when it names none).
async fn bridge_gateway() -> String {
    let engine = code_execution_mcp::sandbox::Engine::connect()
        .await
        .unwrap();
    let network = engine.client().inspect_network("bridge", None).await;
    let config = network
        .ok()
        .and_then(|n| n.ipam)
        .and_then(|i| i.config)
        .and_then(|c| c.into_iter().next());
    if let Some(gateway) = config.as_ref().and_then(|c| c.gateway.clone()) {
        return gateway;
    }
    let subnet = config.and_then(|c| c.subnet);
    let base: Option<std::net::Ipv4Addr> = subnet
        .as_deref()
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.parse().ok());
    base.map_or_else(
        || "172.17.0.1".into(),
        |b| std::net::Ipv4Addr::from(u32::from(b) + 1).to_string(),
    )
}

/// The host's primary IPv4 address (the source of its default route), if it has one.
fn host_address() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("1.1.1.1:53").ok()?;
    Some(socket.local_addr().ok()?.ip().to_string())
}

/// 13. "TCP to a public address, to the engine's bridge gateway (172.17.0.1) and to
///     169.254.169.254 → unreachable."
#[tokio::test]
async fn case_13_public_addresses_the_bridge_gateway_and_the_metadata_service_are_unreachable() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let gateway = bridge_gateway().await;
    let mut targets = json!({
        "public_web": ["1.1.1.1", 443],
        "public_dns": ["8.8.8.8", 53],
        "gateway_engine_api": [gateway, 2375],
        "gateway_ssh": [gateway, 22],
        "metadata": ["169.254.169.254", 80],
        "private_net": ["10.0.0.1", 80],
    });
    if let Some(host) = host_address() {
        targets["host_ssh"] = json!([host, 22]);
        targets["host_engine_api"] = json!([host, 2375]);
    }
    let code = format!(
        "{PROBE}{}",
        r#"
out = {"targets": probe(targets)}
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
out["routes"] = open("/proc/net/route").read().splitlines()[1:]
result = out
"#
    );
    let v = verdict(&t, &code, json!({ "targets": targets })).await;
    let outcomes = v["targets"].as_object().unwrap();
    assert_eq!(outcomes.len(), 2 * targets.as_object().unwrap().len());
    for (label, outcome) in outcomes {
        assert!(
            UNREACHABLE.contains(&outcome.as_str().unwrap()),
            "{label} ({gateway} is the gateway): {outcome}"
        );
    }
    assert_eq!(v["interfaces"], json!(["lo"]));
    assert_eq!(v["routes"], json!([]), "no route leaves the container");
    watch.finish(t).await;
}

/// 14. "IPv6 to anything but ::1 → unreachable."
#[tokio::test]
async fn case_14_ipv6_reaches_nothing_but_loopback() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let gateway = bridge_gateway().await;
    let code = format!(
        "{PROBE}{}",
        r#"
out = {"targets": probe(targets, socket.AF_INET6)}
out["addresses"] = sorted(l.split()[0] for l in open("/proc/net/if_inet6").read().splitlines())
result = out
"#
    );
    let v = verdict(
        &t,
        &code,
        json!({"targets": {
            "public_cloudflare": ["2606:4700:4700::1111", 53],
            "public_google": ["2001:4860:4860::8888", 443],
            "mapped_gateway": [format!("::ffff:{gateway}"), 2375],
            "mapped_metadata": ["::ffff:169.254.169.254", 80],
            "metadata_v6": ["fd00:ec2::254", 80],
            "unique_local": ["fd00::1", 80],
            "link_local": ["fe80::1%lo", 80],
            "multicast": ["ff02::1", 80],
        }}),
    )
    .await;
    let outcomes = v["targets"].as_object().unwrap();
    assert_eq!(outcomes.len(), 16);
    for (label, outcome) in outcomes {
        assert!(
            ["ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL", "EINVAL"]
                .contains(&outcome.as_str().unwrap()),
            "{label}: {outcome}"
        );
    }
    // The only IPv6 address the sandbox may hold is ::1 (none, when the engine disables IPv6).
    for address in v["addresses"].as_array().unwrap() {
        assert_eq!(address, "00000000000000000000000000000001", "{v}");
    }
    watch.finish(t).await;
}

/// 15. "raw / AF_PACKET sockets → EPERM."
#[tokio::test]
async fn case_15_raw_and_packet_sockets_are_refused() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, socket
out = {}
for label, family, kind, proto in (
        ("packet_raw", socket.AF_PACKET, socket.SOCK_RAW, 0x0300),
        ("packet_dgram", socket.AF_PACKET, socket.SOCK_DGRAM, 0x0300),
        ("inet_raw_icmp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
        ("inet_raw_tcp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP),
        ("inet_raw_ip", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW),
        ("inet6_raw_icmp", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
        ("alg", 38, socket.SOCK_SEQPACKET, 0),
        ("vsock", 40, socket.SOCK_STREAM, 0)):
    try:
        socket.socket(family, kind, proto).close()
        out[label] = "opened"
    except OSError as e:
        out[label] = errno.errorcode.get(e.errno, str(e.errno))
result = out
"#,
        json!({}),
    )
    .await;
    let outcomes = v.as_object().unwrap();
    assert_eq!(outcomes.len(), 8);
    for (label, outcome) in outcomes {
        assert!(
            ["EPERM", "EACCES", "EAFNOSUPPORT"].contains(&outcome.as_str().unwrap()),
            "{label}: {outcome}"
        );
    }
    assert_eq!(v["packet_raw"], "EPERM", "{v}");
    watch.finish(t).await;
}

/// 16. "`/var/run/docker.sock`, containerd's socket → absent."
///
/// Beyond the well-known paths: no socket file anywhere in the container's tree, and no
/// engine socket among the unix sockets its network namespace can see.
#[tokio::test]
async fn case_16_engine_sockets_are_absent() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import glob, os, stat
known = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
         "/var/run/containerd/containerd.sock", "/run/docker/containerd/containerd.sock",
         "/run/crio/crio.sock", "/run/podman/podman.sock", "/run/buildkit/buildkitd.sock"]
out = {"present": [p for p in known + glob.glob("/run/user/*/docker.sock") if os.path.lexists(p)]}
sockets = []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys"):
        dirs[:] = []
        continue
    for n in files + dirs:
        p = os.path.join(top, n)
        try:
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                sockets.append(p)
        except OSError:
            pass
out["socket_files"] = sockets
unix = open("/proc/net/unix").read().splitlines()[1:]
out["engine_unix_sockets"] = [l for l in unix if "docker" in l or "containerd" in l or "runc" in l]
out["unix_sockets"] = len(unix)
result = out
"#,
        json!({}),
    )
    .await;
    assert_eq!(v["present"], json!([]), "{v}");
    assert_eq!(v["socket_files"], json!([]), "{v}");
    assert_eq!(v["engine_unix_sockets"], json!([]), "{v}");
    watch.finish(t).await;
}

/// 17. "Netlink changes to links or routes → EPERM."
#[tokio::test]
async fn case_17_netlink_changes_to_links_addresses_and_routes_are_refused() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, socket, struct
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 1, 4, 0x200, 0x400
def rta(kind, data):
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * ((4 - length % 4) % 4)
def request(msg_type, payload, flags=0):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.bind((0, 0))
    s.send(struct.pack("=IHHII", 16 + len(payload), msg_type, flags | NLM_F_REQUEST | NLM_F_ACK, 1, 0) + payload)
    reply = s.recv(65536)
    s.close()
    kind = struct.unpack("=H", reply[4:6])[0]
    if kind != 2:
        return f"reply type {kind}"
    code = -struct.unpack("=i", reply[16:20])[0]
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))
lo = socket.if_nametoindex("lo")
ifinfo = lambda index, flags, change: struct.pack("=BxHiII", socket.AF_UNSPEC, 0, index, flags, change)
new = NLM_F_CREATE | NLM_F_EXCL
out = {
    "set_lo_down": request(19, ifinfo(lo, 0, 1)),
    "new_dummy_link": request(16, ifinfo(0, 0, 0) + rta(3, b"evil0\0") + rta(18, rta(1, b"dummy\0")), new),
    "new_veth_link": request(16, ifinfo(0, 0, 0) + rta(3, b"evil1\0") + rta(18, rta(1, b"veth\0")), new),
    "new_address": request(20, struct.pack("=BBBBI", socket.AF_INET, 32, 0, 0, lo)
                           + rta(2, socket.inet_aton("10.9.9.9")) + rta(1, socket.inet_aton("10.9.9.9")), new),
    "new_default_route": request(24, struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 254, 3, 0, 1, 0)
                                 + rta(4, struct.pack("=I", lo)), new),
    "delete_lo_address": request(21, struct.pack("=BBBBI", socket.AF_INET, 8, 0, 0, lo)
                                 + rta(2, socket.inet_aton("127.0.0.1"))),
}
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
out["lo_up"] = bool(int(open("/sys/class/net/lo/flags").read(), 16) & 1)
out["routes"] = open("/proc/net/route").read().splitlines()[1:]
result = out
"#,
        json!({}),
    )
    .await;
    for change in [
        "set_lo_down",
        "new_dummy_link",
        "new_veth_link",
        "new_address",
        "new_default_route",
        "delete_lo_address",
    ] {
        assert_eq!(v[change], "EPERM", "{change}: {v}");
    }
    assert_eq!(v["interfaces"], json!(["lo"]));
    assert_eq!(v["lo_up"], true);
    assert_eq!(v["routes"], json!([]));
    watch.finish(t).await;
}

// ----- resources -----

/// Python: the sandbox's own cgroup file `name` (v1 or v2 layout) as text.
const CGROUP: &str = r#"
import os
def cgroup(v1, v2):
    for p in ("/sys/fs/cgroup/" + v1, "/sys/fs/cgroup/" + v2):
        if os.path.exists(p):
            return open(p).read().strip()
    return None
"#;

/// 18. "Fork bomb → stops at the pids limit; next execution healthy."
#[tokio::test]
async fn case_18_a_fork_bomb_stops_at_the_pids_limit() {
    let t = TestApp::start_with(|c| c.pids_limit = 32).await;
    let watch = HostWatch::for_app(&t);
    let code = format!(
        "{CGROUP}{}",
        r#"
import errno, os, time
pids_max = cgroup("pids/pids.max", "pids.max")
children, err = 0, None
for _ in range(500):
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
    if pid == 0:
        # Every child forks on too, until the limit says no.
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(60)
    children += 1
result = {"children": children, "errno": err, "pids_max": pids_max}
"#
    );
    let o = t.run_with(&code, None, Some(30.0), None).await;
    assert_ok(&o);
    let v = &o.result;
    assert_eq!(v["pids_max"], "32", "{v}");
    assert_eq!(v["errno"], "EAGAIN", "{v}");
    assert!(v["children"].as_u64().unwrap() < 32, "{v}");
    watch.finish(t).await;
}

/// 19. "Thread bomb → same."
#[tokio::test]
async fn case_19_a_thread_bomb_stops_at_the_pids_limit() {
    let t = TestApp::start_with(|c| c.pids_limit = 32).await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import threading
stop = threading.Event()
threads, err = [], None
for _ in range(10_000):
    th = threading.Thread(target=stop.wait, daemon=True)
    try:
        th.start()
    except RuntimeError as e:
        err = str(e)
        break
    threads.append(th)
stop.set()
result = {"threads": len(threads), "error": err}
"#,
        json!({}),
    )
    .await;
    assert_eq!(v["error"], "can't start new thread", "{v}");
    assert!(v["threads"].as_u64().unwrap() < 32, "{v}");
    watch.finish(t).await;
}

/// 20. "Memory bomb → OOM kill reported as "memory limit exceeded" (inspect OOMKilled); server
///     healthy."
#[tokio::test]
async fn case_20_a_memory_bomb_is_killed_and_reported_as_the_memory_limit() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let o = t
        .run_with(
            "b = bytearray(512 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1",
            None,
            None,
            Some(64.0),
        )
        .await;
    assert_eq!(o.status, Status::MemoryLimit, "{:?}", o.error);
    let error = o.error.as_deref().unwrap();
    assert!(
        error.contains("Memory limit exceeded") && error.contains("64 MB"),
        "{error}"
    );
    // Through MCP the status is machine-readable.
    let client = mcp_client(t.app.clone()).await;
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "x = []\nwhile True: x.append(bytearray(1 << 20))", "memory_mb": 48}),
    )
    .await;
    assert!(err);
    assert_eq!(v["status"], "memory_limit", "{v}");
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// After a deadline kill: the execution's container is gone (no pool, so the instance has
/// no other container).
async fn assert_killed_and_removed(t: &TestApp) {
    common::assert_no_containers(&t.app.sandbox.instance().id).await;
}

/// 21. "`while True: pass` → killed at the deadline."
#[tokio::test]
async fn case_21_a_busy_loop_is_killed_at_the_deadline() {
    let t = TestApp::start_with(|c| c.pool_size = 0).await;
    let watch = HostWatch::for_app(&t);
    let o = t
        .run_with("print('looping')\nwhile True: pass", None, Some(2.0), None)
        .await;
    assert_eq!(o.status, Status::Timeout, "{:?}", o.error);
    assert!(
        o.error
            .as_deref()
            .unwrap()
            .contains("timed out after 2 seconds"),
        "{:?}",
        o.error
    );
    assert_eq!(o.stdout.as_str(), "looping\n");
    // Killed at the deadline, not left running: generous bounds, not a timing measurement.
    assert!(o.elapsed >= Duration::from_secs(2), "{:?}", o.elapsed);
    assert!(o.elapsed < Duration::from_secs(32), "{:?}", o.elapsed);
    assert_killed_and_removed(&t).await;
    watch.finish(t).await;
}

/// 22. "SIGTERM ignored + sleep → SIGKILL at the deadline."
#[tokio::test]
async fn case_22_code_ignoring_sigterm_is_sigkilled_at_the_deadline() {
    let t = TestApp::start_with(|c| c.pool_size = 0).await;
    let watch = HostWatch::for_app(&t);
    let o = t
        .run_with(
            r#"
import os, signal, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, signal.SIG_IGN)
if os.fork() == 0:
    time.sleep(600)
print("started")
time.sleep(600)
"#,
            None,
            Some(2.0),
            None,
        )
        .await;
    assert_eq!(o.status, Status::Timeout, "{:?}", o.error);
    assert_eq!(o.stdout.as_str(), "started\n");
    assert!(o.elapsed < Duration::from_secs(32), "{:?}", o.elapsed);
    assert_killed_and_removed(&t).await;
    watch.finish(t).await;
}

/// 23. "Double-forked daemon → gone with the container."
#[tokio::test]
async fn case_23_a_double_forked_daemon_is_gone_with_the_container() {
    let t = TestApp::start_with(|c| c.pool_size = 0).await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import os, signal, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    os.write(w, str(os.getpid()).encode())
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    beat = 0
    while True:
        beat += 1
        with open("/workspace/heartbeat.tmp", "w") as f:
            f.write(str(beat))
        os.rename("/workspace/heartbeat.tmp", "/workspace/heartbeat")
        time.sleep(0.05)
os.close(w)
daemon = int(os.read(r, 32))
os.waitpid(pid, 0)
while not os.path.exists("/workspace/heartbeat"):
    time.sleep(0.05)
result = {"daemon": daemon, "ppid_of_daemon": int(open(f"/proc/{daemon}/stat").read().split()[3])}
"#,
        json!({}),
    )
    .await;
    assert!(v["daemon"].as_u64().unwrap() > 1, "{v}");
    assert_ne!(v["ppid_of_daemon"], 0, "{v}");
    // The execution has answered; its container goes, and the daemon with it.
    assert_killed_and_removed(&t).await;
    let beat = || std::fs::read_to_string(t.workspace().join("heartbeat")).unwrap();
    let first = beat();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(beat(), first, "the daemon is still writing");
    watch.finish(t).await;
}

/// Tests that measure this process's memory, or allocate a lot of it, run one at a time.
static MEMORY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
/// Growth of the server's peak memory a flood may cause (generous: the caps are far smaller).
const RSS_GROWTH_LIMIT_KIB: u64 = 200 * 1024;

/// Python: `channel_fds()`: the descriptors that may be the harness's frame channel.
const CHANNEL_FDS: &str = r#"
import os
def channel_fds():
    return [fd for fd in range(3, 64) if os.path.exists(f"/proc/self/fd/{fd}")]
def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
"#;

/// 24. "1 GB to stdout → capped, marked truncated, container killed if it keeps going; the
///     server's memory stays bounded."
#[tokio::test]
async fn case_24_a_gigabyte_to_stdout_is_capped_and_the_server_stays_small() {
    let _one_at_a_time = MEMORY.lock().await;
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let limit = t.app.config.max_output_bytes;
    common::host_watch::reset_peak_rss();
    let base = common::host_watch::proc_status_kib("VmHWM");

    // 1 GiB through stdout, then the code ends: capped and marked, the result intact.
    let o = t
        .run_with(
            &format!(
                "{CHANNEL_FDS}{}",
                "write_all(2, b'e' * 300_000)\nchunk = b'x' * (1 << 20)\nfor _ in range(1024): write_all(1, chunk)\nresult = 'done'"
            ),
            None,
            Some(120.0),
            None,
        )
        .await;
    assert_ok(&o);
    assert_eq!(o.result, "done");
    assert!(o.stdout.truncated());
    assert!(o.stdout.as_str().len() <= limit);
    assert!(
        o.stdout.dropped_bytes() >= (1 << 30) - limit as u64,
        "{}",
        o.stdout.dropped_bytes()
    );
    assert!(o.stderr.truncated() && o.stderr.as_str().len() <= limit);

    // Output that never stops: killed at the deadline, what was kept still capped.
    let o = t
        .run_with(
            &format!(
                "{CHANNEL_FDS}{}",
                "chunk = b'y' * (1 << 20)\nwhile True: write_all(1, chunk)"
            ),
            None,
            Some(3.0),
            None,
        )
        .await;
    assert_eq!(o.status, Status::Timeout, "{:?}", o.error);
    assert!(o.stdout.truncated() && o.stdout.as_str().len() <= limit);

    // A flood written around the harness, straight at the channel: the server's own cap kills it.
    let o = t
        .run_with(
            &format!(
                "{CHANNEL_FDS}{}",
                r#"
chunk = b"z" * 65536 + b"\n"
fds = channel_fds()
while True:
    for fd in fds:
        try:
            os.write(fd, chunk)
        except OSError:
            pass
"#
            ),
            None,
            Some(60.0),
            None,
        )
        .await;
    assert_eq!(o.status, Status::OutputLimit, "{:?}", o.error);
    assert!(o.stdout.as_str().len() <= limit);

    let peak = common::host_watch::proc_status_kib("VmHWM");
    assert!(
        peak.saturating_sub(base) < RSS_GROWTH_LIMIT_KIB,
        "peak RSS grew from {base} KiB to {peak} KiB"
    );
    watch.finish(t).await;
}

/// 25. "One 100 MB line, binary or invalid UTF-8 output → bounded, decoded lossily."
#[tokio::test]
async fn case_25_a_100_mb_line_and_binary_output_are_bounded_and_decoded_lossily() {
    let _one_at_a_time = MEMORY.lock().await;
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let limit = t.app.config.max_output_bytes;
    common::host_watch::reset_peak_rss();
    let base = common::host_watch::proc_status_kib("VmHWM");

    let o = t
        .run_with(
            &format!(
                "{CHANNEL_FDS}{}",
                r#"
write_all(1, b"bin\xff\xfe\x00\x80 \xc3\x28 end\n")
write_all(2, b"err\xff\n")
write_all(1, b"L" * (100 * 1024 * 1024))
result = "done"
"#
            ),
            None,
            Some(120.0),
            None,
        )
        .await;
    assert_ok(&o);
    assert_eq!(o.result, "done");
    let out = o.stdout.as_str();
    assert!(
        out.starts_with("bin\u{fffd}\u{fffd}\0\u{fffd} \u{fffd}( end\nLLLL"),
        "{:?}",
        &out[..40.min(out.len())]
    );
    assert!(out.len() <= limit && o.stdout.truncated());
    assert_eq!(o.stderr.as_str(), "err\u{fffd}\n");

    // One 100 MB line written straight at the channel: the server stops reading it and kills.
    let o = t
        .run_with(
            &format!(
                "{CHANNEL_FDS}{}",
                r#"
line = b"\xff" * (100 * 1024 * 1024)
for fd in channel_fds():
    try:
        write_all(fd, line)
    except OSError:
        pass
import time
time.sleep(60)
"#
            ),
            None,
            Some(90.0),
            None,
        )
        .await;
    assert_eq!(o.status, Status::OutputLimit, "{:?}", o.error);
    assert!(o.stdout.as_str().len() <= limit);

    let peak = common::host_watch::proc_status_kib("VmHWM");
    assert!(
        peak.saturating_sub(base) < RSS_GROWTH_LIMIT_KIB,
        "peak RSS grew from {base} KiB to {peak} KiB"
    );
    watch.finish(t).await;
}

/// 26. "Open files until EMFILE → nofile limit."
#[tokio::test]
async fn case_26_opening_files_stops_at_the_nofile_limit() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
fds, err = [], None
while len(fds) < 100_000:
    try:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
opened = len(fds)
for fd in fds:
    os.close(fd)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 2, hard * 2))
    raised = "raised"
except (ValueError, OSError) as e:
    raised = type(e).__name__
result = {"soft": soft, "hard": hard, "opened": opened, "errno": err, "raise": raised}
"#,
        json!({}),
    )
    .await;
    let limit = code_execution_mcp::sandbox::spec::NOFILE_LIMIT;
    assert_eq!(v["soft"], limit, "{v}");
    assert_eq!(v["hard"], limit, "{v}");
    assert_eq!(v["errno"], "EMFILE", "{v}");
    assert!(v["opened"].as_i64().unwrap() < limit, "{v}");
    assert_eq!(v["raise"], "ValueError", "{v}");
    watch.finish(t).await;
}

/// 27. "A huge `result` value → capped."
///
/// Both a real result and one in a `done` frame forged by sandbox code straight on the channel.
#[tokio::test]
async fn case_27_a_huge_result_is_capped_and_marked() {
    let t = TestApp::start_with(|c| c.max_result_bytes = 1000).await;
    let watch = HostWatch::for_app(&t);
    for code in [
        "result = 'x' * (50 * 1024 * 1024)",
        "result = ['x' * 100] * 100_000",
        "result = set(range(1_000_000))",
    ] {
        let o = t.run(code).await;
        assert_ok(&o);
        assert!(o.result_truncated, "{code}");
        assert!(
            o.result.as_str().unwrap().len() <= 1000,
            "{code}: not bounded"
        );
    }
    // A done frame written by sandbox code itself: bounded like a real one.
    let o = t
        .run(&format!(
            "{CHANNEL_FDS}{}",
            r#"
import json
frame = {"type": "done", "success": True, "result": "r" * 400_000, "error": "e" * 200_000,
         "traceback": "t" * 200_000}
data = (json.dumps(frame) + "\n").encode()
for fd in channel_fds():
    try:
        os.write(fd, data)
    except OSError:
        pass
import time
time.sleep(5)
"#
        ))
        .await;
    assert!(o.result_truncated, "{:?}", o.status);
    assert!(
        o.result.as_str().unwrap().len() <= 1000,
        "result not bounded"
    );
    assert!(o.error.as_deref().unwrap_or("").len() <= 64 * 1024 + 512);
    assert!(o.traceback.as_deref().unwrap_or("").len() <= 64 * 1024);
    watch.finish(t).await;
}
