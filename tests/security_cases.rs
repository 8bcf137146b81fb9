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
//! - 28 [`case_28_the_sandbox_posture`]
//! - 29 [`case_29_setuid_programs_su_and_chmod_u_s_do_not_escalate`]
//! - 30 [`case_30_mount_unshare_setns_and_pivot_root_are_refused`]
//! - 31 [`case_31_ptrace_and_process_vm_access_are_refused_and_only_the_container_is_in_sight`]
//! - 32 [`case_32_keyctl_and_add_key_are_refused`]
//! - 33 [`case_33_writes_to_proc_sys_sysrq_and_cgroups_are_denied`]
//! - 34 [`case_34_io_uring_bpf_perf_userfaultfd_and_module_loading_are_refused`]
//! - 35 [`case_35_proc_kcore_and_proc_keys_are_masked`]
//! - 36 [`case_36_the_servers_environment_never_reaches_the_sandbox`]
//! - 37 [`case_37_a_canary_in_tmp_is_gone_next_time_and_invisible_to_concurrent_executions`]
//! - 38 [`case_38_mountinfo_reveals_no_host_paths_beyond_the_workspace`]
//! - 39 [`case_39_another_instances_workspace_skills_and_tokens_are_out_of_reach`] (between
//!   server instances); between HTTP tenants of one server: `tests/tenants.rs` and, in the
//!   compose stack, `tests/compose.rs`
//! - 40 [`case_40_a_100_mb_code_string_is_refused_before_the_engine`]
//! - 41 [`case_41_nul_and_invalid_utf8_in_code_get_clear_errors`]
//! - 42 `tests/protocol_robustness.rs` (malformed JSON-RPC over stdio and HTTP)
//! - 43 [`case_43_bad_skill_names_are_refused_by_the_allowlist_before_any_path`]
//! - 44 [`case_44_forged_and_foreign_tokens_never_resolve`]
//! - 45 [`case_45_output_shaped_like_frames_or_json_rpc_is_carried_as_data`]
//! - 46 [`case_46_out_of_range_limits_are_clamped_and_the_response_says_so`]
//! - 47 [`case_47_a_burst_beyond_the_queue_gets_a_clear_busy_error`]
//! - 48 `tests/faults.rs` (the engine stops mid-execution)
//! - 49 `tests/faults.rs` (the server is SIGKILLed mid-execution)

mod common;

use std::path::Path;
use std::time::Duration;

use code_execution_mcp::sandbox::{Backend, Status};
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

// ----- privilege -----

/// Errno names that mean a system call was refused (seccomp's EPERM; ENOSYS where the kernel or
/// a user-space kernel such as gVisor does not offer the call at all).
const REFUSED: [&str; 2] = ["EPERM", "ENOSYS"];

/// Python: `call(name, *args)` makes the raw system call `name` (numbers for x86_64 and
/// aarch64) and returns the errno name it failed with, or `"returned N"`.
const SYSCALLS: &str = r#"
import ctypes, errno, os, platform
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
NR = {
    "x86_64": dict(io_uring_setup=425, bpf=321, perf_event_open=298, userfaultfd=323, init_module=175,
                   finit_module=313, delete_module=176, kexec_load=246, kexec_file_load=320,
                   open_by_handle_at=304, keyctl=250, add_key=248, request_key=249, unshare=272,
                   setns=308, mount=165, umount2=166, pivot_root=155, chroot=161, ptrace=101,
                   process_vm_readv=310, process_vm_writev=311, clone=56, fsopen=430, open_tree=428,
                   move_mount=429, swapon=167, reboot=169, syslog=103, iopl=172, ioperm=173,
                   openat2=437, fchmodat2=452),
    "aarch64": dict(io_uring_setup=425, bpf=280, perf_event_open=241, userfaultfd=282, init_module=105,
                    finit_module=273, delete_module=106, kexec_load=104, kexec_file_load=294,
                    open_by_handle_at=265, keyctl=219, add_key=217, request_key=218, unshare=97,
                    setns=268, mount=40, umount2=39, pivot_root=41, chroot=51, ptrace=117,
                    process_vm_readv=270, process_vm_writev=271, clone=220, fsopen=430, open_tree=428,
                    move_mount=429, swapon=224, reboot=142, syslog=116, openat2=437, fchmodat2=452),
}[platform.machine()]
def call(name, *args):
    conv = [a if isinstance(a, (bytes, ctypes.Array)) or a is None else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    ret = _libc.syscall(ctypes.c_long(NR[name]), *conv)
    if ret == 0 and name == "clone":
        os._exit(0)  # a child the filter should never have allowed
    if ret == -1:
        e = ctypes.get_errno()
        return errno.errorcode.get(e, str(e))
    return f"returned {ret}"
buf = lambda n=256: ctypes.create_string_buffer(n)
"#;

/// Asserts that every attempt in `v` (name → errno name) was refused.
#[track_caller]
fn assert_all_refused(v: &Value, expected: usize) {
    let attempts = v.as_object().unwrap();
    assert_eq!(attempts.len(), expected, "{v}");
    for (name, outcome) in attempts {
        assert!(
            REFUSED.contains(&outcome.as_str().unwrap_or("")),
            "{name}: {outcome}"
        );
    }
}

/// 28. "Posture: CapEff 0, CapBnd 0, NoNewPrivs 1, Seccomp 2, uid ≠ 0 (as gVisor's sandbox posture
///     test checks)."
///
/// From inside: every capability set empty, no_new_privs, a seccomp filter, non-root ids and
/// groups, a read-only root, the workspace the only writable host mount, /tmp a tmpfs with
/// nosuid/nodev/noexec, masked and read-only /proc and /sys paths. From the engine: the
/// container's host config as the server created it.
#[tokio::test]
async fn case_28_the_sandbox_posture() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, os, stat
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
out = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters")}
out["uids"] = [int(x) for x in status["Uid"].split()]
out["gids"] = [int(x) for x in status["Gid"].split()]
out["groups"] = [int(x) for x in status["Groups"].split()]
mounts = []
for line in open("/proc/self/mountinfo").read().splitlines():
    f = line.split()
    sep = f.index("-")
    mounts.append({"point": f[4], "opts": f[5].split(","), "fstype": f[sep + 1]})
at = {}
for m in mounts:
    at[m["point"]] = m  # the last mount at a point is the visible one
out["root_opts"] = at["/"]["opts"]
out["tmp"] = {"fstype": at["/tmp"]["fstype"], "opts": at["/tmp"]["opts"]}
pseudo = {"proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2"}
out["writable_host_mounts"] = sorted(p for p, m in at.items() if "rw" in m["opts"] and m["fstype"] not in pseudo)
out["writable_points"] = sorted(p for p in at if os.path.isdir(p) and os.access(p, os.W_OK))
null = os.stat("/dev/null").st_rdev
masked = {}
for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats",
          "/proc/timer_stats", "/sys/firmware", "/proc/acpi", "/proc/scsi", "/proc/asound"):
    try:
        st = os.stat(p)
    except FileNotFoundError:
        masked[p] = "absent"
        continue
    except OSError as e:
        masked[p] = errno.errorcode[e.errno]
        continue
    try:
        if stat.S_ISDIR(st.st_mode):
            masked[p] = "empty_dir" if not os.listdir(p) else "listed"
        elif stat.S_ISCHR(st.st_mode) and st.st_rdev == null:
            masked[p] = "null_device" if open(p, "rb").read(1) == b"" else "readable"
        else:
            masked[p] = "empty" if open(p, "rb").read(1) == b"" else "readable"
    except OSError as e:
        masked[p] = errno.errorcode[e.errno]
out["masked"] = masked
read_only = {}
for p in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"):
    if not os.path.exists(p):
        read_only[p] = "absent"
        continue
    cover = max((m for m in at if p == m or p.startswith(m.rstrip("/") + "/")), key=len)
    read_only[p] = "ro" if "ro" in at[cover]["opts"] else "rw"
out["read_only"] = read_only
result = out
"#,
        json!({}),
    )
    .await;
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(v[cap], "0000000000000000", "{cap}: {v}");
    }
    assert_eq!(v["NoNewPrivs"], "1");
    assert_eq!(v["Seccomp"], "2");
    assert_ne!(v["Seccomp_filters"], "0");
    for ids in ["uids", "gids", "groups"] {
        let ids = v[ids].as_array().unwrap();
        assert!(!ids.is_empty() && ids.iter().all(|id| id != 0), "{v}");
    }
    assert!(
        v["root_opts"].as_array().unwrap().contains(&json!("ro")),
        "{v}"
    );
    assert_eq!(v["writable_host_mounts"], json!(["/workspace"]), "{v}");
    for point in v["writable_points"].as_array().unwrap() {
        assert!(
            ["/workspace", "/tmp", "/dev/shm", "/dev/mqueue"].contains(&point.as_str().unwrap()),
            "the sandbox can write {point}"
        );
    }
    assert_eq!(v["tmp"]["fstype"], "tmpfs");
    for opt in ["nosuid", "nodev", "noexec"] {
        assert!(
            v["tmp"]["opts"].as_array().unwrap().contains(&json!(opt)),
            "{v}"
        );
    }
    let masked = v["masked"].as_object().unwrap();
    for (path, state) in masked {
        assert!(
            ["absent", "null_device", "empty_dir", "EACCES", "EPERM"]
                .contains(&state.as_str().unwrap()),
            "{path} is not masked: {state}"
        );
    }
    assert!(
        masked.values().any(|s| s == "null_device") && masked.values().any(|s| s == "empty_dir"),
        "some masked path exists on every kernel: {v}"
    );
    for (path, state) in v["read_only"].as_object().unwrap() {
        assert!(state == "ro" || state == "absent", "{path}: {state}");
    }
    assert_eq!(v["read_only"]["/proc/sys"], "ro");

    // The engine's view of a container the server made (the pooled one).
    let inspected = common::inspect_pooled(&t.app).await;
    let config = inspected.config.unwrap();
    assert_ne!(
        config.user.as_deref().unwrap_or(""),
        "",
        "a non-root user is set"
    );
    assert!(!config.user.unwrap().starts_with("0:"));
    let host = inspected.host_config.unwrap();
    assert_eq!(host.privileged, Some(false));
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
    assert!(host.cap_add.unwrap_or_default().is_empty());
    let security = host.security_opt.unwrap_or_default();
    assert!(
        security
            .iter()
            .any(|s| s == "no-new-privileges=true" || s == "no-new-privileges")
    );
    assert!(security.iter().any(|s| s.starts_with("seccomp=")));
    assert!(
        !security.iter().any(|s| s.contains("unconfined")),
        "{security:?}"
    );
    assert!(host.pids_limit.unwrap_or(0) > 0);
    assert_eq!(
        host.memory, host.memory_swap,
        "no swap beyond the memory limit"
    );
    assert!(host.devices.unwrap_or_default().is_empty());
    assert!(
        host.binds.unwrap_or_default().is_empty(),
        "mounts only, no binds"
    );
    watch.finish(t).await;
}

/// 29. "setuid binaries, `su`, a `chmod u+s` file → no escalation."
///
/// Setuid-root programs of the image run with the sandbox's own ids (sampled from
/// /proc/PID/status while they wait for a password), `su` fails, and the sandbox cannot give a
/// file the setuid or setgid bit at all: the seccomp profile refuses chmod, fchmod, fchmodat,
/// fchmodat2, open/openat/creat with `O_CREAT` and mknod/mknodat whenever the mode has a bit of
/// 06000 (`EPERM`, a `PermissionError` in Python), and openat2, whose mode seccomp cannot read, is
/// `ENOSYS`. Inside the container no_new_privs already makes such a file harmless; the point is
/// the host, where a workspace that is not the nosuid quota mount (server not root, or
/// `--workspace-quota-mb 0`) could otherwise hold a program that runs as the workspace's owner
/// for any other user who can reach it. So the test also walks the workspace on the host and
/// finds no setuid/setgid file. Ordinary modes (0o755, 0o600, sticky) still work.
#[tokio::test]
async fn case_29_setuid_programs_su_and_chmod_u_s_do_not_escalate() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let code = format!(
        "{SYSCALLS}{}",
        r##"
import io, os, shutil, stat, subprocess, tarfile, time
me = [os.getuid(), os.getgid()]
setuid = []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys"):
        dirs[:] = []
        continue
    for n in files:
        p = os.path.join(top, n)
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & stat.S_ISUID and st.st_uid == 0:
            setuid.append(p)
def creds_while_running(cmd):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen, name = set(), os.path.basename(cmd[0])[:15]
    end = time.monotonic() + 10
    while p.poll() is None and time.monotonic() < end and len(seen) == 0:
        try:
            fields = dict(l.split(":\t", 1) for l in open(f"/proc/{p.pid}/status").read().splitlines() if ":\t" in l)
        except OSError:
            break
        if fields["Name"].strip() == name:
            seen.add((tuple(int(x) for x in fields["Uid"].split()), tuple(int(x) for x in fields["Gid"].split())))
        time.sleep(0.002)
    p.kill()
    out, err = p.communicate()
    return {"creds": [list(u) + list(g) for u, g in seen], "output": (out + err).decode(errors="replace")[:200]}
probes = {name: creds_while_running(cmd) for name, cmd in
          (("su", ["su", "-c", "id -u", "root"]), ("passwd", ["passwd"]), ("chfn", ["chfn"]))}

os.chdir("/workspace")
shutil.copy("/usr/bin/id", "myid")
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return f"{type(e).__name__} {errno.errorcode.get(e.errno, e.errno)}"
def sh(cmd):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    return {"rc": r.returncode, "err": r.stderr.strip()[-200:]}
def member(name, mode, data=b"#!/bin/sh\nid -u\n"):
    info = tarfile.TarInfo(name)
    info.mode, info.size = mode, len(data)
    return info, io.BytesIO(data)
tar = io.BytesIO()
with tarfile.open(fileobj=tar, mode="w") as archive:
    archive.addfile(*member("tar-suid", 0o4755))
    archive.addfile(*member("tar-sgid", 0o2755))
fd = os.open("myid", os.O_RDONLY)
refused = {
    "chmod 4755": attempt(lambda: os.chmod("myid", 0o4755)),
    "chmod 2755": attempt(lambda: os.chmod("myid", 0o2755)),
    "chmod 6755": attempt(lambda: os.chmod("myid", 0o6755)),
    "fchmod 4755": attempt(lambda: os.fchmod(fd, 0o4755)),
    "chmod nofollow 4755": attempt(lambda: os.chmod("myid", 0o4755, follow_symlinks=False)),
    "chmod dir 2755": attempt(lambda: (os.mkdir("shared"), os.chmod("shared", 0o2755))),
    "os.open O_CREAT 4755": attempt(lambda: os.open("created-suid", os.O_CREAT | os.O_WRONLY, 0o4755)),
    "os.open O_CREAT 2755": attempt(lambda: os.open("created-sgid", os.O_CREAT | os.O_WRONLY, 0o2755)),
    "os.open O_TMPFILE 4755": attempt(lambda: os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o4755)),
    "mknod S_ISUID": attempt(lambda: os.mknod("mknod-suid", stat.S_IFREG | stat.S_ISUID | 0o755)),
    "mknod S_ISGID": attempt(lambda: os.mknod("mknod-sgid", stat.S_IFREG | stat.S_ISGID | 0o755)),
    "copymode from su": attempt(lambda: shutil.copymode("/usr/bin/su", "myid")),
    "copy2 of su": attempt(lambda: shutil.copy2("/usr/bin/su", "su-copy")),
    "file capability": attempt(lambda: os.setxattr("myid", "security.capability", b"\x01\x00\x00\x02" + bytes(16))),
}
os.close(fd)
tar.seek(0)
with tarfile.open(fileobj=tar) as archive:
    archive.extractall("untarred", filter="fully_trusted")
tar.seek(0)
try:
    with tarfile.open(fileobj=tar, errorlevel=2) as archive:
        archive.extractall("untarred-strict", filter="fully_trusted")
    refused["tarfile errorlevel 2"] = "ok"
except tarfile.ExtractError as e:
    refused["tarfile errorlevel 2"] = f"ExtractError {e}"
raw = {
    "fchmodat2 4755": call("fchmodat2", -100, b"myid", 0o4755, 0),
    "fchmodat2 0644": call("fchmodat2", -100, b"myid", 0o644, 0),
    "openat2": call("openat2", -100, b"myid", buf(24), 24),
}
commands = {"chmod u+s": sh("chmod u+s myid"), "chmod g+s": sh("chmod g+s myid"),
            "install -m 4755": sh("install -m 4755 /usr/bin/id installed-id")}
with open("mine.txt", "w") as f:
    f.write("x")
allowed = {
    "chmod 0755": attempt(lambda: os.chmod("myid", 0o755)),
    "chmod 0600": attempt(lambda: os.chmod("mine.txt", 0o600)),
    "chmod 1777 dir": attempt(lambda: os.chmod("shared", 0o1777)),
    "os.open O_CREAT 0644": attempt(lambda: os.close(os.open("created", os.O_CREAT | os.O_WRONLY, 0o644))),
    "chmod +x": sh("chmod +x mine.txt")["rc"] == 0 and "ok",
}
modes = {}
for top, dirs, files in os.walk("."):
    for n in dirs + files:
        p = os.path.join(top, n)
        modes[p] = oct(os.lstat(p).st_mode & 0o7777)
mine = subprocess.run(["/workspace/myid", "-u"], capture_output=True, text=True)
become = {}
for name, fn in (("setuid", lambda: os.setuid(0)), ("setresuid", lambda: os.setresuid(0, 0, 0)),
                 ("setgid", lambda: os.setgid(0)), ("setgroups", lambda: os.setgroups([0]))):
    try:
        fn()
        become[name] = "became root"
    except PermissionError as e:
        become[name] = e.errno
result = {"me": me, "setuid_root_files": setuid, "probes": probes, "refused": refused, "raw": raw,
          "commands": commands, "allowed": allowed, "modes": modes, "myid_euid": mine.stdout.strip(),
          "become_root": become}
"##
    );
    let v = verdict(&t, &code, json!({})).await;
    let (uid, gid) = (v["me"][0].as_u64().unwrap(), v["me"][1].as_u64().unwrap());
    assert_ne!(uid, 0);
    assert!(
        v["setuid_root_files"].as_array().unwrap().len() >= 3,
        "the image has setuid-root programs to try: {v}"
    );
    for (name, probe) in v["probes"].as_object().unwrap() {
        let creds = probe["creds"].as_array().unwrap();
        assert!(!creds.is_empty(), "{name} was never seen running: {probe}");
        for c in creds {
            assert_eq!(
                c,
                &json!([uid, uid, uid, uid, gid, gid, gid, gid]),
                "{name}: {probe}"
            );
        }
    }
    assert!(
        !v["probes"]["su"]["output"]
            .as_str()
            .unwrap()
            .contains("\n0\n")
    );
    // Every way of asking for S_ISUID/S_ISGID is refused with EPERM, which Python raises as
    // PermissionError; tarfile reports the refused chmod as an ExtractError (and only when
    // errorlevel > 1, otherwise it leaves the member without the bits).
    for (what, outcome) in v["refused"].as_object().unwrap() {
        let expected = match what.as_str() {
            "tarfile errorlevel 2" => "ExtractError could not change mode",
            _ => "PermissionError EPERM",
        };
        assert_eq!(outcome, expected, "{what}: {v}");
    }
    // fchmodat2 has the same rule as fchmodat where runc's libseccomp knows it (this machine's
    // does), and is ENOSYS (glibc then falls back to fchmodat) where it does not.
    let raw = &v["raw"];
    assert!(
        raw["fchmodat2 4755"] == "EPERM"
            || (raw["fchmodat2 4755"] == "ENOSYS" && raw["fchmodat2 0644"] == "ENOSYS"),
        "{raw}"
    );
    assert!(
        ["returned 0", "ENOSYS"].contains(&raw["fchmodat2 0644"].as_str().unwrap()),
        "{raw}"
    );
    assert_eq!(raw["openat2"], "ENOSYS", "so callers fall back to openat");
    for (what, outcome) in v["commands"].as_object().unwrap() {
        assert_ne!(outcome["rc"], 0, "{what}: {outcome}");
        assert!(
            outcome["err"]
                .as_str()
                .unwrap()
                .contains("Operation not permitted"),
            "{what}: {outcome}"
        );
    }
    for (what, outcome) in v["allowed"].as_object().unwrap() {
        assert_eq!(outcome, "ok", "{what}: {v}");
    }
    let modes = v["modes"].as_object().unwrap();
    for name in [
        "./myid",
        "./untarred/tar-suid",
        "./untarred/tar-sgid",
        "./su-copy",
        "./shared",
        "./created",
    ] {
        assert!(modes.contains_key(name), "{name} was not made: {modes:?}");
    }
    assert_eq!(modes["./myid"], "0o755");
    assert_eq!(
        modes["./shared"], "0o1777",
        "the sticky bit is still allowed"
    );
    for gone in [
        "./created-suid",
        "./created-sgid",
        "./mknod-suid",
        "./mknod-sgid",
    ] {
        assert!(!modes.contains_key(gone), "{gone} was created: {modes:?}");
    }
    for (name, mode) in modes {
        let mode = u32::from_str_radix(mode.as_str().unwrap().trim_start_matches("0o"), 8).unwrap();
        assert_eq!(mode & 0o6000, 0, "{name} is setuid/setgid inside: {mode:o}");
    }
    assert_eq!(v["myid_euid"], uid.to_string());
    assert_eq!(
        v["become_root"],
        json!({"setuid": 1, "setresuid": 1, "setgid": 1, "setgroups": 1}),
        "EPERM for each"
    );
    // On the host: what the sandbox wrote is the sandbox user's, and nothing in the workspace is
    // setuid or setgid, so no other host user can run a program as the workspace's owner.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let host = std::fs::metadata(t.workspace().join("myid")).unwrap();
    assert_eq!(u64::from(host.uid()), uid);
    assert_ne!(host.uid(), 0);
    let mut seen = 0;
    let mut pending = vec![t.workspace()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            seen += 1;
            assert_eq!(
                meta.permissions().mode() & 0o6000,
                0,
                "{} is setuid/setgid on the host: {:o}",
                entry.path().display(),
                meta.permissions().mode()
            );
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    assert!(seen >= 10, "the host walk saw the sandbox's files ({seen})");
    watch.finish(t).await;
}

/// 30. "mount, unshare, setns, pivot_root → EPERM."
#[tokio::test]
async fn case_30_mount_unshare_setns_and_pivot_root_are_refused() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let code = format!(
        "{SYSCALLS}{}",
        r#"
net = os.open("/proc/self/ns/net", os.O_RDONLY)
mnt = os.open("/proc/1/ns/mnt", os.O_RDONLY)
out = {}
for flag, value in (("user", 0x10000000), ("mount", 0x20000), ("net", 0x40000000), ("pid", 0x20000000),
                    ("uts", 0x04000000), ("ipc", 0x08000000), ("cgroup", 0x02000000)):
    out["unshare_" + flag] = call("unshare", value)
out["clone_newuser"] = call("clone", 0x10000000 | 17, 0, 0, 0, 0)
out["setns_net"] = call("setns", net, 0)
out["setns_init_mnt"] = call("setns", mnt, 0)
out["mount_tmpfs"] = call("mount", b"none", b"/tmp", b"tmpfs", 0, None)
out["remount_root_rw"] = call("mount", None, b"/", None, 0x20 | 0x1000, None)
out["umount_workspace"] = call("umount2", b"/workspace", 2)
out["pivot_root"] = call("pivot_root", b"/tmp", b"/tmp")
out["chroot"] = call("chroot", b"/tmp")
out["fsopen"] = call("fsopen", b"tmpfs", 0)
out["open_tree"] = call("open_tree", -100, b"/", 1)
try:
    os.unshare(os.CLONE_NEWUSER)
    out["os_unshare"] = "returned 0"
except OSError as e:
    out["os_unshare"] = errno.errorcode[e.errno]
result = out
"#
    );
    let v = verdict(&t, &code, json!({})).await;
    assert_all_refused(&v, 18);
    watch.finish(t).await;
}

/// 31. "ptrace, `/proc/1/mem`, process_vm_readv of anything outside → denied."
///
/// ptrace and process_vm_* are refused even against the sandbox's own child. The only
/// processes in sight are the container's own (its init, the harness, its children): the test
/// process on the host is not. `/proc/1/mem` names the container's init; whether it opens is
/// recorded in the verdict, and when it does, PID 1 must be that init.
#[tokio::test]
async fn case_31_ptrace_and_process_vm_access_are_refused_and_only_the_container_is_in_sight() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let code = format!(
        "{SYSCALLS}{}",
        r#"
import time
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local, target = buf(64), buf(64)
liov = iovec(ctypes.cast(local, ctypes.c_void_p), 64)
riov = iovec(ctypes.cast(target, ctypes.c_void_p), 64)
calls = {
    "ptrace_traceme": call("ptrace", 0, 0, 0, 0),
    "ptrace_attach_init": call("ptrace", 16, 1, 0, 0),
    "ptrace_attach_child": call("ptrace", 16, child, 0, 0),
    "ptrace_seize_child": call("ptrace", 0x4206, child, 0, 0),
    "vm_readv_init": call("process_vm_readv", 1, ctypes.addressof(liov), 1, ctypes.addressof(riov), 1, 0),
    "vm_readv_child": call("process_vm_readv", child, ctypes.addressof(liov), 1, ctypes.addressof(riov), 1, 0),
    "vm_writev_child": call("process_vm_writev", child, ctypes.addressof(liov), 1, ctypes.addressof(riov), 1, 0),
}
try:
    with open("/proc/1/mem", "rb") as f:
        f.seek(int(open("/proc/1/maps").readline().split("-")[0], 16))
        mem = "readable" if f.read(16) else "empty"
except OSError as e:
    mem = errno.errorcode[e.errno]
procs = {}
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        procs[pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        pass
host = None
try:
    host = open(f"/proc/{host_pid}/cmdline", "rb").read().decode(errors="replace")
except OSError:
    pass
os.kill(child, 9)
result = {"calls": calls, "proc1_mem": mem, "init_exe": os.readlink("/proc/1/exe"), "procs": procs,
          "host_process": host}
"#
    );
    let v = verdict(&t, &code, json!({"host_pid": std::process::id()})).await;
    assert_all_refused(&v["calls"], 7);
    let procs = v["procs"].as_object().unwrap();
    assert!(procs.len() >= 3 && procs.len() < 16, "{v}");
    for (pid, cmdline) in procs {
        let cmdline = cmdline.as_str().unwrap();
        assert!(
            cmdline.contains("docker-init") || cmdline.contains("/opt/sandbox/harness.py"),
            "/proc/{pid} is not the container's: {cmdline}"
        );
    }
    let test_binary = std::env::current_exe().unwrap();
    let test_name = test_binary.file_name().unwrap().to_str().unwrap();
    assert!(
        !v["host_process"].as_str().unwrap_or("").contains(test_name),
        "the host's test process is visible: {v}"
    );
    // PID 1 is the container's init (docker-init): what /proc/1/mem opens, if anything.
    assert!(
        v["init_exe"].as_str().unwrap().ends_with("docker-init"),
        "{v}"
    );
    assert!(
        ["readable", "EACCES", "EPERM", "EIO"].contains(&v["proc1_mem"].as_str().unwrap()),
        "{v}"
    );
    watch.finish(t).await;
}

/// 32. "keyctl/add_key → EPERM."
#[tokio::test]
async fn case_32_keyctl_and_add_key_are_refused() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let code = format!(
        "{SYSCALLS}{}",
        r#"
result = {
    "keyctl_session_id": call("keyctl", 0, -3, 1),
    "keyctl_join_session": call("keyctl", 1, b"cem-evil"),
    "keyctl_describe_user": call("keyctl", 6, -4, buf(), 256),
    "add_key_process": call("add_key", b"user", b"cem", b"secret", 6, -2),
    "add_key_user": call("add_key", b"user", b"cem", b"secret", 6, -4),
    "request_key": call("request_key", b"user", b"cem", None, 0),
}
"#
    );
    let v = verdict(&t, &code, json!({})).await;
    assert_all_refused(&v, 6);
    watch.finish(t).await;
}

/// 33. "Writes to `/proc/sys`, `/proc/sysrq-trigger`, `/sys/fs/cgroup` → denied."
#[tokio::test]
async fn case_33_writes_to_proc_sys_sysrq_and_cgroups_are_denied() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let core_pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let v = verdict(
        &t,
        r#"
import errno, glob, os
targets = ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname", "/proc/sys/kernel/modprobe",
           "/proc/sys/vm/drop_caches", "/proc/sys/net/ipv4/ip_forward", "/proc/sysrq-trigger",
           "/sys/kernel/uevent_helper", "/sys/kernel/mm/transparent_hugepage/enabled",
           "/proc/self/oom_score_adj"]
targets += sorted(set(glob.glob("/sys/fs/cgroup/**/pids.max", recursive=True)
                      + glob.glob("/sys/fs/cgroup/**/memory.limit_in_bytes", recursive=True)
                      + glob.glob("/sys/fs/cgroup/**/memory.max", recursive=True)
                      + glob.glob("/sys/fs/cgroup/**/cgroup.procs", recursive=True)
                      + glob.glob("/sys/fs/cgroup/**/release_agent", recursive=True)))
values = {"/proc/self/oom_score_adj": "-1000"}
out = {}
for path in targets:
    if not os.path.exists(path):
        out[path] = "absent"
        continue
    try:
        with open(path, "w") as f:
            f.write(values.get(path, "1"))
        out[path] = "written"
    except OSError as e:
        out[path] = errno.errorcode[e.errno]
for d in glob.glob("/sys/fs/cgroup/*/") + ["/sys/fs/cgroup/"]:
    try:
        os.mkdir(d + "cem-evil")
        out["mkdir " + d] = "made"
    except OSError as e:
        out["mkdir " + d] = errno.errorcode[e.errno]
result = out
"#,
        json!({}),
    )
    .await;
    let attempts = v.as_object().unwrap();
    let existing = attempts.values().filter(|s| *s != "absent").count();
    assert!(existing >= 8, "too few targets exist here: {v}");
    assert!(attempts.keys().any(|k| k.contains("cgroup")), "{v}");
    for (path, outcome) in attempts {
        assert!(
            ["absent", "EROFS", "EACCES", "EPERM"].contains(&outcome.as_str().unwrap()),
            "{path}: {outcome}"
        );
    }
    assert_eq!(v["/proc/sys/kernel/core_pattern"], "EROFS", "{v}");
    assert_eq!(
        std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(),
        core_pattern,
        "the host's core_pattern"
    );
    watch.finish(t).await;
}

/// 34. "io_uring_setup, bpf, perf_event_open, userfaultfd, init_module → EPERM (io_uring needs our
///     own seccomp profile on Docker < 25)."
#[tokio::test]
async fn case_34_io_uring_bpf_perf_userfaultfd_and_module_loading_are_refused() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let code = format!(
        "{SYSCALLS}{}",
        r#"
null = os.open("/dev/null", os.O_RDONLY)
calls = {
    "io_uring_setup": call("io_uring_setup", 8, buf(120)),
    "bpf_map_create": call("bpf", 0, buf(128), 128),
    "bpf_prog_load": call("bpf", 5, buf(128), 128),
    "perf_event_open": call("perf_event_open", buf(128), 0, -1, -1, 0),
    "userfaultfd": call("userfaultfd", 0),
    "init_module": call("init_module", buf(64), 64, b""),
    "finit_module": call("finit_module", null, b"", 0),
    "delete_module": call("delete_module", b"loop", 0),
    "kexec_load": call("kexec_load", 0, 0, None, 0),
    "kexec_file_load": call("kexec_file_load", null, null, 0, b"", 0),
    "open_by_handle_at": call("open_by_handle_at", -100, buf(64), 0),
    "swapon": call("swapon", b"/tmp/swap", 0),
    "reboot": call("reboot", 0xfee1dead, 0x28121969, 0x4321fedc, None),
    "syslog": call("syslog", 3, buf(), 256),
}
if "iopl" in NR:
    calls["iopl"] = call("iopl", 3)
    calls["ioperm"] = call("ioperm", 0x80, 1, 1)
result = calls
"#
    );
    let v = verdict(&t, &code, json!({})).await;
    let expected = if std::env::consts::ARCH == "x86_64" {
        16
    } else {
        14
    };
    assert_all_refused(&v, expected);
    watch.finish(t).await;
}

/// 35. "`/proc/kcore`, `/proc/keys` → masked."
///
/// Masked means absent (the kernel has no such file), or the engine's /dev/null (or an empty
/// read-only tmpfs) mounted over it: never the kernel's own contents.
#[tokio::test]
async fn case_35_proc_kcore_and_proc_keys_are_masked() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let v = verdict(
        &t,
        r#"
import errno, os, stat
null = os.stat("/dev/null").st_rdev
out = {}
for p in ("/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/sched_debug"):
    try:
        st = os.stat(p)
    except FileNotFoundError:
        out[p] = {"state": "absent"}
        continue
    masked = stat.S_ISCHR(st.st_mode) and st.st_rdev == null
    try:
        data = open(p, "rb").read(4096)
        out[p] = {"state": "null_device" if masked else "kernel", "bytes": len(data)}
    except OSError as e:
        out[p] = {"state": "null_device" if masked else "kernel", "error": errno.errorcode[e.errno]}
result = out
"#,
        json!({}),
    )
    .await;
    for path in ["/proc/kcore", "/proc/keys"] {
        let state = &v[path]["state"];
        assert!(state == "absent" || state == "null_device", "{path}: {v}");
        if state == "null_device" {
            assert_eq!(v[path]["bytes"], 0, "{path}: {v}");
        }
    }
    for path in ["/proc/timer_list", "/proc/sched_debug"] {
        assert_ne!(v[path]["state"], "kernel", "{path}: {v}");
    }
    watch.finish(t).await;
}

// ----- information leaks -----

/// 36. "The server's environment (tokens, secrets) → absent from the sandbox's environ and
///     /proc/1/environ."
///
/// The server binary is started with secrets in its environment (and a setting of its own);
/// sandbox code looks for them in its environment and in every /proc/PID/environ it can read.
#[tokio::test]
async fn case_36_the_servers_environment_never_reaches_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let watch = HostWatch::new(
        dir.path(),
        &[dir.path().join("workspace"), dir.path().join("skills")],
    );
    let marker = format!("CEMLEAK{}", uuid::Uuid::new_v4().simple());
    let secrets = [
        ("CEM_TEST_API_TOKEN", format!("{marker}-token")),
        ("AWS_SECRET_ACCESS_KEY", format!("{marker}-aws")),
        ("GITHUB_TOKEN", format!("{marker}-github")),
        ("ANTHROPIC_API_KEY", format!("{marker}-anthropic")),
        ("CEM_MAX_QUEUE", "17".to_string()),
    ];
    let env: Vec<(&str, &str)> = secrets.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (mut child, client) =
        common::spawn_server_with(dir.path(), &env, &["--pool-size", "1"]).await;
    let pid = child.id().unwrap();
    let names: Vec<&str> = secrets.iter().map(|(k, _)| *k).collect();
    let code = r#"
import os
hits = {"environ_values": [k for k, v in os.environ.items() if marker in v],
        "environ_names": [k for k in names if k in os.environ], "proc": {}}
readable = 0
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    try:
        data = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    readable += 1
    found = [k for k in names if (k + "=").encode() in data] + (["marker"] if marker.encode() in data else [])
    if found:
        hits["proc"][pid] = found
hits["readable_environs"] = readable
hits["has_path"] = "PATH" in os.environ
result = hits
"#;
    for _ in 0..2 {
        let (err, v) = call_tool(
            &client,
            "execute_code",
            json!({"code": code, "context_vars": {"marker": marker, "names": names}}),
        )
        .await;
        assert!(!err, "{v}");
        let r = &v["result"];
        assert_eq!(r["environ_values"], json!([]), "{r}");
        assert_eq!(r["environ_names"], json!([]), "{r}");
        assert_eq!(r["proc"], json!({}), "{r}");
        assert!(
            r["readable_environs"].as_u64().unwrap() >= 2,
            "PID 1 and self: {r}"
        );
        assert_eq!(
            r["has_path"], true,
            "the check reads a real environment: {r}"
        );
    }
    client.cancel().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server exits when its client goes")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(common::containers_of(pid).await, Vec::<String>::new());
    watch.check();
}

/// 37. "A canary written to /tmp in one execution → absent in the next; invisible to concurrent
///     executions."
///
/// The canary goes to /tmp, /dev/shm and an abstract unix socket; a concurrent execution and
/// the next one look for all three.
#[tokio::test]
async fn case_37_a_canary_in_tmp_is_gone_next_time_and_invisible_to_concurrent_executions() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let ws = t.workspace();
    let canary = token("case37");
    let writer = r#"
import os, socket, time
open(f"/tmp/{canary}", "w").write("secret")
open(f"/dev/shm/{canary}", "w").write("secret")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + canary)
s.listen()
open("/workspace/ready", "w").write("1")
end = time.monotonic() + 90
while not os.path.exists("/workspace/go") and time.monotonic() < end:
    time.sleep(0.05)
result = {"tmp": os.path.exists(f"/tmp/{canary}"), "shm": os.path.exists(f"/dev/shm/{canary}")}
"#;
    let looker = r#"
import errno, os, socket
out = {"tmp": os.listdir("/tmp"), "shm": os.listdir("/dev/shm"),
       "in_unix_table": canary in open("/proc/net/unix").read()}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0" + canary)
    out["socket"] = "connected"
except OSError as e:
    out["socket"] = errno.errorcode[e.errno]
result = out
"#;
    let app = t.app.clone();
    let ctx = json!({ "canary": canary });
    let first_ctx = ctx.clone();
    let first = tokio::spawn(async move {
        app.execute(
            writer.into(),
            Some(first_ctx),
            Some(120.0),
            None,
            Default::default(),
            None,
        )
        .await
    });
    for _ in 0..600 {
        if ws.join("ready").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ws.join("ready").exists(), "the writer did not start");
    let check = |v: &Value, when: &str| {
        assert_eq!(v["tmp"], json!([]), "{when}: {v}");
        assert_eq!(v["shm"], json!([]), "{when}: {v}");
        assert_eq!(v["in_unix_table"], false, "{when}: {v}");
        assert_eq!(v["socket"], "ECONNREFUSED", "{when}: {v}");
    };
    check(&verdict(&t, looker, ctx.clone()).await, "concurrently");
    std::fs::write(ws.join("go"), "1").unwrap();
    let (o, _) = first.await.unwrap().unwrap();
    assert_ok(&o);
    assert_eq!(
        o.result,
        json!({"tmp": true, "shm": true}),
        "the canary existed"
    );
    check(&verdict(&t, looker, ctx).await, "next");
    watch.finish(t).await;
}

/// 38. "`/proc/self/mountinfo` → host paths in it reveal no user or tenant names beyond the
///     workspace itself."
///
/// Beyond the workspace and skills mounts' own host paths, mountinfo names neither this
/// server's other directories, nor another server's, nor a home directory or a host user.
#[tokio::test]
async fn case_38_mountinfo_reveals_no_host_paths_beyond_the_workspace() {
    let t =
        TestApp::start_with(|c| c.pii_output = code_execution_mcp::config::PiiOutput::Off).await;
    let watch = HostWatch::for_app(&t);
    let other = TestApp::start().await;
    let other_watch = HostWatch::for_app(&other);
    let v = verdict(
        &t,
        "result = open('/proc/self/mountinfo').read()",
        json!({}),
    )
    .await;
    let mut rest = v.as_str().unwrap().to_string();
    let ws = t.workspace().canonicalize().unwrap();
    let skills = t.app.skills_dir.canonicalize().unwrap();
    assert!(
        rest.contains(ws.to_str().unwrap()),
        "the workspace mount is listed"
    );
    for own in [&ws, &skills] {
        rest = rest.replace(own.to_str().unwrap(), "<own>");
    }
    let mut forbidden: Vec<String> = vec![
        watch.root().display().to_string(),
        watch.canary_dir().display().to_string(),
        other_watch.root().display().to_string(),
        "/home/".into(),
    ];
    if let Some(home) = std::env::var_os("HOME") {
        let home = home.to_string_lossy().into_owned();
        if home.len() > 1 {
            forbidden.push(format!("{home}/"));
        }
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() > 2
            && fields[2]
                .parse::<u32>()
                .is_ok_and(|uid| (1000..60000).contains(&uid))
        {
            forbidden.push(format!("/{}/", fields[0]));
        }
    }
    for needle in &forbidden {
        assert!(
            !rest.contains(needle.as_str()),
            "mountinfo names {needle}:\n{rest}"
        );
    }
    other_watch.finish(other).await;
    watch.finish(t).await;
}

/// 39. "Another tenant's workspace, skills, PII tokens (HTTP mode) → unreachable and
///     unguessable."
///
/// Here between two server instances with their own directories and PII secrets: the sandbox
/// of one cannot see the other's workspace or skills (not mounted, the paths absent), and
/// restore_pii on one never resolves tokens the other minted. Tenants of one HTTP server (the
/// same separation, plus sessions and bearer tokens) are tested in `tests/tenants.rs`.
#[tokio::test]
async fn case_39_another_instances_workspace_skills_and_tokens_are_out_of_reach() {
    let a = TestApp::start().await;
    let a_watch = HostWatch::for_app(&a);
    let b = TestApp::start().await;
    let b_watch = HostWatch::for_app(&b);
    let a_client = mcp_client(a.app.clone()).await;
    let b_client = mcp_client(b.app.clone()).await;
    let marker = token("case39");
    let (err, v) = call_tool(
        &b_client,
        "write_workspace_file",
        json!({"filename": format!("{marker}.txt"), "content": "tenant b"}),
    )
    .await;
    assert!(!err, "{v}");
    let (err, v) = call_tool(
        &b_client,
        "save_skill",
        json!({"name": "tenant_b_only", "code": "def tenant_b_only():\n    return 'b'\n"}),
    )
    .await;
    assert!(!err, "{v}");
    std::fs::write(a.workspace().join("mine.txt"), "tenant a").unwrap();

    let look = r#"
import os
found = []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys"):
        dirs[:] = []
        continue
    found += [os.path.join(top, n) for n in files if n.startswith(marker) or n == "mine.txt"]
result = {"paths": {p: os.path.exists(p) for p in paths}, "found": sorted(found),
          "skill_file": os.path.exists("/skills/tenant_b_only.py"),
          "skills": [s["name"] for s in list_skills()],
          "mounts": [l for l in open("/proc/self/mountinfo").read().splitlines() if any(p in l for p in paths)]}
try:
    load_skill("tenant_b_only")
    result["load"] = "loaded"
except RuntimeError as e:
    result["load"] = str(e)[:60]
"#;
    let b_paths = [
        b.workspace().canonicalize().unwrap(),
        b.app.skills_dir.canonicalize().unwrap(),
        b_watch.root().to_path_buf(),
    ];
    let v = verdict(&a, look, json!({"marker": marker, "paths": b_paths})).await;
    assert!(
        v["paths"].as_object().unwrap().values().all(|e| e == false),
        "{v}"
    );
    assert_eq!(
        v["found"],
        json!(["/workspace/mine.txt"]),
        "only its own file: {v}"
    );
    assert_eq!(v["skill_file"], false);
    assert!(
        !v["skills"]
            .as_array()
            .unwrap()
            .contains(&json!("tenant_b_only")),
        "{v}"
    );
    assert!(v["load"].as_str().unwrap().contains("not found"), "{v}");
    assert_eq!(v["mounts"], json!([]), "{v}");
    // The positive control: B's sandbox sees B's skill.
    let v = verdict(
        &b,
        "result = __import__('os').path.exists('/skills/tenant_b_only.py')",
        json!({}),
    )
    .await;
    assert_eq!(v, true);

    // PII tokens: the same value gets different tokens on each server, and neither resolves the
    // other's.
    let value = "ann.lee@example.com";
    let mint = |client| async move {
        let (err, v) = call_tool(client, "sanitize_pii", json!({ "text": value })).await;
        assert!(!err, "{v}");
        v["sanitized_text"].as_str().unwrap().to_string()
    };
    let (a_token, b_token) = (mint(&a_client).await, mint(&b_client).await);
    assert!(a_token.starts_with("[EMAIL_") && b_token.starts_with("[EMAIL_"));
    assert_ne!(a_token, b_token, "tokens are keyed per server");
    for (client, own, foreign) in [
        (&a_client, &a_token, &b_token),
        (&b_client, &b_token, &a_token),
    ] {
        let (_, v) = call_tool(client, "restore_pii", json!({ "text": foreign })).await;
        assert_eq!(v["restored_text"], foreign.as_str(), "{v}");
        assert_eq!(v["restored"], 0);
        assert_eq!(v["unknown"], 1);
        let (_, v) = call_tool(client, "restore_pii", json!({ "text": own })).await;
        assert_eq!(v["restored_text"], value, "the positive control");
    }
    a_client.cancel().await.unwrap();
    b_client.cancel().await.unwrap();
    b_watch.finish(b).await;
    a_watch.finish(a).await;
}

// ----- server-side input -----

/// 40. "100 MB code string → refused before the engine is called."
///
/// Through the library and over the binary's stdio (where the message itself is over the
/// transport's bound and gets a JSON-RPC error before it is parsed); code over the code limit
/// but small enough to travel gets a tool error saying what to do. No execution is counted and
/// no container is made (neither server has a pool).
#[tokio::test]
async fn case_40_a_100_mb_code_string_is_refused_before_the_engine() {
    let _one_at_a_time = MEMORY.lock().await;
    let t = TestApp::start_with(|c| c.pool_size = 0).await;
    let watch = HostWatch::for_app(&t);
    let big = format!("x = 1\n{}", "#".repeat(100 * 1024 * 1024));
    let err = t
        .app
        .execute(big.clone(), None, None, None, Default::default(), None)
        .await
        .expect_err("100 MB of code");
    assert!(
        matches!(
            err,
            code_execution_mcp::app::ExecuteError::Input(
                code_execution_mcp::limits::InputError::CodeTooLarge { .. }
            )
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("over the 1048576-byte limit"),
        "{err}"
    );
    // Through MCP, code over the limit that the transport still carries: a tool error that
    // says what to do instead.
    let client = mcp_client(t.app.clone()).await;
    let two_mib = format!("x = 1\n{}", "#".repeat(2 << 20));
    let (is_error, v) = call_tool(&client, "execute_code", json!({ "code": two_mib })).await;
    assert!(is_error);
    let text = v.as_str().unwrap();
    assert!(
        text.contains("over the 1048576-byte limit") && text.contains("write_workspace_file"),
        "{text:.300}"
    );
    client.cancel().await.unwrap();
    // Nothing reached the engine: no execution counted, no container made.
    assert_eq!(t.app.stats.snapshot().executions_total, 0);
    let engine = &t.app.shared.engine;
    let label = format!(
        "{}={}",
        code_execution_mcp::sandbox::spec::LABEL_INSTANCE,
        t.app.sandbox.instance().id
    );
    assert!(engine.list_labelled(&[label]).await.unwrap().is_empty());

    // The binary over stdio: the 100 MB request is answered with an error, the session goes on.
    let mut raw = common::RawStdio::start(&[]).await;
    let raw_watch = HostWatch::for_raw(&raw);
    let pid = raw.child.id().unwrap();
    let request = json!({"jsonrpc": "2.0", "id": 40, "method": "tools/call",
        "params": {"name": "execute_code", "arguments": {"code": big}}})
    .to_string();
    drop(big);
    raw.send_line(&request).await;
    drop(request);
    raw.send(json!({"jsonrpc": "2.0", "id": 41, "method": "ping"}))
        .await;
    let seen = raw.until_response(41).await;
    assert_eq!(seen.len(), 2, "an answer, then the ping's: {seen:.300?}");
    assert_eq!(seen[0]["error"]["code"], -32600, "{}", seen[0]);
    assert!(
        seen[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("send less per call"),
        "{}",
        seen[0]
    );
    raw.finish_watched(raw_watch).await;
    assert!(
        common::containers_of(pid).await.is_empty(),
        "a container was made"
    );
    watch.finish(t).await;
}

/// 41. "Invalid UTF-8 / NUL in code → clear error."
///
/// NUL (and empty code, and context variables that are not an object of identifiers) are
/// refused with a message that names the problem. Invalid UTF-8 cannot be carried in a JSON
/// string: sent raw on stdio, or as a lone surrogate escape, the request gets a JSON-RPC error
/// and the session goes on.
#[tokio::test]
async fn case_41_nul_and_invalid_utf8_in_code_get_clear_errors() {
    let t = TestApp::start_with(|c| c.pool_size = 0).await;
    let watch = HostWatch::for_app(&t);
    let run = |code: &str, ctx: Option<Value>| {
        t.app
            .execute(code.to_string(), ctx, None, None, Default::default(), None)
    };
    for (code, ctx, needle) in [
        ("print(1)\0", None, "NUL character at byte 8"),
        ("\0", None, "NUL"),
        ("", None, "empty"),
        ("  \n\t", None, "empty"),
        ("x", Some(json!([1])), "context_vars` must be a JSON object"),
        ("x", Some(json!({"a b": 1})), "not a Python identifier"),
        (
            "x",
            Some(json!({"__import__('os')": 1})),
            "not a Python identifier",
        ),
    ] {
        let err = run(code, ctx).await.expect_err(code);
        assert!(err.to_string().contains(needle), "{code:?}: {err}");
    }
    let client = mcp_client(t.app.clone()).await;
    let (is_error, v) = call_tool(&client, "execute_code", json!({"code": "a = 1\u{0}"})).await;
    assert!(is_error);
    assert!(v.as_str().unwrap().contains("NUL"), "{v}");
    client.cancel().await.unwrap();
    assert_eq!(t.app.stats.snapshot().executions_total, 0);

    // Over the binary's stdio: raw invalid UTF-8 and a lone surrogate escape.
    let mut raw = common::RawStdio::start(&[]).await;
    let raw_watch = HostWatch::for_raw(&raw);
    let pid = raw.child.id().unwrap();
    let mut bad_utf8 = br#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"print('"#.to_vec();
    bad_utf8.extend_from_slice(b"\xff\xfe\xc3\x28");
    bad_utf8.extend_from_slice(br#"')"}}}"#);
    let surrogate = r#"{"jsonrpc":"2.0","id":21,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"print('\ud800')"}}}"#;
    for (n, line) in [(1, bad_utf8.as_slice()), (2, surrogate.as_bytes())] {
        raw.send_bytes(line).await;
        let ping = 100 + n;
        raw.send(json!({"jsonrpc": "2.0", "id": ping, "method": "ping"}))
            .await;
        let seen = raw.until_response(ping).await;
        assert_eq!(seen.len(), 2, "an answer, then the ping's: {seen:?}");
        let answer = &seen[0];
        assert_eq!(answer["error"]["code"], -32700, "a parse error: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("not JSON"), "the error says why: {answer}");
        assert_eq!(seen[1]["result"], json!({}));
    }
    raw.send(json!({"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"execute_code","arguments":{"code":"print(1)"}}}))
        .await;
    let answer = raw.until_response(30).await.pop().unwrap();
    assert_eq!(
        answer["result"]["structuredContent"]["output"],
        json!(["1"]),
        "{answer}"
    );
    raw.finish_watched(raw_watch).await;
    assert_eq!(common::containers_of(pid).await, Vec::<String>::new());
    watch.finish(t).await;
}

// 42. "Malformed JSON-RPC (truncated, 10k-deep nesting, wrong types, odd ids) → protocol
//     errors, no panic.": tests/protocol_robustness.rs covers it, over stdio and HTTP.

/// 43. "Skill names `../../x`, `%2e%2e`, look-alike Unicode, 300 chars, empty → refused by an
///     allowlist before any path."
#[tokio::test]
async fn case_43_bad_skill_names_are_refused_by_the_allowlist_before_any_path() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let skills = t.app.skills_dir.clone();
    let listing = |dir: &Path| {
        let mut names: Vec<_> = walk_names(dir);
        names.sort();
        names
    };
    let before = listing(&skills);
    let client = mcp_client(t.app.clone()).await;
    let escape = token("case43");
    let bad = [
        format!("../../{escape}"),
        format!("..%2f..%2f{escape}"),
        "%2e%2e".into(),
        "%2e%2e%2fx".into(),
        "ｆｏｏ".into(),
        "ѕkill".into(),
        "skil\u{200b}l".into(),
        "a".repeat(300),
        String::new(),
        "a/b".into(),
        "a\\b".into(),
        "x\0y".into(),
        ".hidden".into(),
        "x.py".into(),
        "__init__".into(),
        "class".into(),
        "name\n".into(),
    ];
    for name in &bad {
        for (tool, args) in [
            ("save_skill", json!({"name": name, "code": "x = 1"})),
            ("load_skill", json!({ "name": name })),
            ("delete_skill", json!({ "name": name })),
        ] {
            let (err, v) = call_tool(&client, tool, args).await;
            assert!(err, "{tool}({name:.40?}) was accepted: {v}");
            assert!(
                v.to_string().contains("Invalid skill name"),
                "{tool}({name:.40?}): {v}"
            );
        }
    }
    // The same names from sandbox code, over the channel.
    let v = verdict(
        &t,
        r#"
out = []
for name in names:
    try:
        save_skill(name, "x = 1")
        out.append("saved")
    except RuntimeError as e:
        out.append("Invalid skill name" in str(e))
result = out
"#,
        json!({ "names": bad }),
    )
    .await;
    assert_eq!(v, json!(vec![true; bad.len()]), "{v}");
    assert_eq!(listing(&skills), before, "the skills directory changed");
    for dir in [
        skills.parent().unwrap(),
        skills.parent().unwrap().parent().unwrap(),
    ] {
        assert!(
            !walk_names(dir).iter().any(|n| n.contains(&escape)),
            "escaped into {}",
            dir.display()
        );
    }
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// Every path below `dir` (not following links), relative, as text.
fn walk_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            }
        }
    }
    out
}

/// 44. "restore_pii with forged or foreign tokens → unchanged text; only tokens this server
///     minted resolve."
#[tokio::test]
async fn case_44_forged_and_foreign_tokens_never_resolve() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let other = TestApp::start().await;
    let other_watch = HostWatch::for_app(&other);
    let client = mcp_client(t.app.clone()).await;
    let other_client = mcp_client(other.app.clone()).await;
    let (_, v) = call_tool(&client, "sanitize_pii", json!({"text": "ann@example.com"})).await;
    let own = v["sanitized_text"].as_str().unwrap().to_string();
    let hex = own
        .trim_start_matches("[EMAIL_")
        .trim_end_matches(']')
        .to_string();
    assert_eq!(hex.len(), 8, "{own}");
    let (_, v) = call_tool(
        &other_client,
        "sanitize_pii",
        json!({"text": "bob@example.com"}),
    )
    .await;
    let foreign = v["sanitized_text"].as_str().unwrap().to_string();
    let flipped: String = hex
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if i == 7 {
                if c == '0' { '1' } else { '0' }
            } else {
                c
            }
        })
        .collect();
    let mut forged = vec![
        "[EMAIL_deadbeef]".to_string(),
        format!("[EMAIL_{flipped}]"),
        format!("[PHONE_{hex}]"),
        format!("[CREDIT_CARD_{hex}]"),
        format!("[EMAIL_{hex}0000]"),
        format!("[EMAIL_{}]", &hex[..6]),
        foreign.clone(),
    ];
    // Upper-case hex is not a token (when the real one has a letter to change).
    if hex.chars().any(|c| c.is_ascii_alphabetic()) {
        forged.push(format!("[EMAIL_{}]", hex.to_uppercase()));
    }
    for token in &forged {
        let text = format!("send it to {token} today");
        let (err, v) = call_tool(&client, "restore_pii", json!({ "text": text })).await;
        assert!(!err, "{v}");
        assert_eq!(v["restored_text"], text, "{token} resolved");
        assert_eq!(v["restored"], 0, "{token}: {v}");
    }
    let (_, v) = call_tool(
        &client,
        "restore_pii",
        json!({ "text": format!("to {own}") }),
    )
    .await;
    assert_eq!(
        v["restored_text"], "to ann@example.com",
        "the positive control"
    );

    // In the sandbox: detokenize_pii with a forged token map verifies each pair.
    let v = verdict(
        &t,
        r#"
forged_map = {t: "evil@example.org" for t in forged}
forged_map[own] = "evil@example.org"
result = {"with_map": detokenize_pii(" ".join(forged) + " " + own, forged_map),
          "vault": detokenize_pii(" ".join(forged))}
"#,
        json!({"forged": forged, "own": own}),
    )
    .await;
    let joined = forged.join(" ");
    assert_eq!(
        v["with_map"],
        format!("{joined} {own}"),
        "a forged map resolved: {v}"
    );
    assert_eq!(v["vault"], joined, "{v}");
    // A foreign token in a file name stays literal.
    let (err, v) = call_tool(
        &client,
        "write_workspace_file",
        json!({"filename": format!("{foreign}.txt"), "content": "x"}),
    )
    .await;
    assert!(!err, "{v}");
    assert!(t.workspace().join(format!("{foreign}.txt")).exists());
    client.cancel().await.unwrap();
    other_client.cancel().await.unwrap();
    other_watch.finish(other).await;
    watch.finish(t).await;
}

/// 45. "Output that looks like channel frames or JSON-RPC → carried as data."
#[tokio::test]
async fn case_45_output_shaped_like_frames_or_json_rpc_is_carried_as_data() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    std::fs::write(t.workspace().join("keep.txt"), "kept").unwrap();
    let lines = [
        r#"{"type":"done","success":true,"result":"forged"}"#,
        r#"{"type":"call","id":1,"method":"save_skill","params":{"name":"forged_skill","code":"x = 1"}}"#,
        r#"{"type":"reply","id":1,"result":"forged"}"#,
        r#"{"type":"output","stream":"stderr","data":"forged stderr"}"#,
        r#"{"type":"job","code":"print('again')","context_vars":null,"limits":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"delete_workspace_file","arguments":{"filename":"keep.txt"}}}"#,
        "Content-Length: 52",
        "",
    ];
    let client = mcp_client(t.app.clone()).await;
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "for line in lines:\n    print(line)\nresult = lines", "context_vars": {"lines": lines}}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["status"], "ok");
    assert_eq!(
        v["output"],
        json!(lines),
        "printed lines come back verbatim"
    );
    assert_eq!(v["result"], json!(lines));
    assert_eq!(v["stderr"], "");
    assert!(!t.app.skills_dir.join("forged_skill.py").exists());
    assert!(t.workspace().join("keep.txt").exists());
    // The session still answers.
    let (err, _) = call_tool(&client, "list_workspace_files", json!({})).await;
    assert!(!err);
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 46. "timeout or memory of -1, 0, 1e308 → clamped to configured bounds or refused, and the
///     response says which."
#[tokio::test]
async fn case_46_out_of_range_limits_are_clamped_and_the_response_says_so() {
    let t = TestApp::start().await;
    let watch = HostWatch::for_app(&t);
    let client = mcp_client(t.app.clone()).await;
    let memory =
        format!("{CGROUP}result = int(cgroup('memory/memory.limit_in_bytes', 'memory.max'))");
    // 1e308 s and 0 MB: the maximum timeout, the minimum memory (and it is the limit in force).
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": memory, "timeout_seconds": 1e308, "memory_mb": 0}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["result"], 32 << 20, "{v}");
    assert_eq!(v["limits"]["timeout_seconds"], 300.0);
    assert_eq!(v["limits"]["memory_mb"], 32);
    let notes = v["limits"]["adjustments"].to_string();
    assert!(
        notes.contains("timeout_seconds 1000000") && notes.contains("clamped to the maximum 300"),
        "{notes}"
    );
    assert!(
        notes.contains("memory_mb 0 raised to the minimum 32"),
        "{notes}"
    );
    // -1 s and 1e308 MB: the minimum timeout (and it is the deadline in force), the maximum memory.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "import time\ntime.sleep(30)", "timeout_seconds": -1, "memory_mb": 1e308}),
    )
    .await;
    assert!(err);
    assert_eq!(v["status"], "timeout", "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("timed out after 1 seconds"),
        "{v}"
    );
    assert_eq!(v["limits"]["timeout_seconds"], 1.0);
    assert_eq!(v["limits"]["memory_mb"], 4096);
    let notes = v["limits"]["adjustments"].to_string();
    assert!(
        notes.contains("timeout_seconds -1 raised to the minimum 1"),
        "{notes}"
    );
    assert!(
        notes.contains("memory_mb 1000000") && notes.contains("clamped to the maximum 4096"),
        "{notes}"
    );
    // 0 s and -1 MB.
    let (err, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "result = 1", "timeout_seconds": 0, "memory_mb": -1}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["limits"]["timeout_seconds"], 1.0);
    assert_eq!(v["limits"]["memory_mb"], 32);
    assert_eq!(v["limits"]["adjustments"].as_array().unwrap().len(), 2);
    // In range: no note.
    let (_, v) = call_tool(
        &client,
        "execute_code",
        json!({"code": "result = 1", "timeout_seconds": 10, "memory_mb": 100}),
    )
    .await;
    assert!(v["limits"].get("adjustments").is_none(), "{v}");
    // Not numbers at all (not expressible in JSON, but in the library): refused, named.
    for (timeout, memory, name) in [
        (Some(f64::NAN), None, "timeout_seconds"),
        (Some(f64::INFINITY), None, "timeout_seconds"),
        (None, Some(f64::NEG_INFINITY), "memory_mb"),
    ] {
        let err = t
            .app
            .execute(
                "x = 1".into(),
                None,
                timeout,
                memory,
                Default::default(),
                None,
            )
            .await
            .expect_err("a non-finite limit");
        let text = err.to_string();
        assert!(text.contains(name) && text.contains("finite"), "{text}");
    }
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

/// 47. "A burst of concurrent executions above the limit → queued up to a bound, then a clear
///     "busy" error."
///
/// With one slot and a queue of two, eight calls at once: the first runs, two wait, five are
/// refused at once with a message naming the limits. The running ones are held open until the
/// refusals are in, so no timing decides the split.
#[tokio::test]
async fn case_47_a_burst_beyond_the_queue_gets_a_clear_busy_error() {
    let t = TestApp::start_with(|c| {
        c.max_concurrency = 1;
        c.max_queue = 2;
    })
    .await;
    let watch = HostWatch::for_app(&t);
    let ws = t.workspace();
    let client = mcp_client(t.app.clone()).await;
    let hold = "import os, time\nend = time.monotonic() + 90\nwhile not os.path.exists('/workspace/release') and time.monotonic() < end:\n    time.sleep(0.05)\nresult = 'ran'";
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let peer = client.peer().clone();
            tokio::spawn(async move {
                call_tool(
                    &peer,
                    "execute_code",
                    json!({"code": hold, "timeout_seconds": 120}),
                )
                .await
            })
        })
        .collect();
    let mut pending = calls;
    let mut busy = Vec::new();
    // The refusals come back while the admitted calls are still held.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while busy.len() < 5 && tokio::time::Instant::now() < deadline {
        let mut still = Vec::new();
        for call in pending {
            if call.is_finished() {
                busy.push(call.await.unwrap());
            } else {
                still.push(call);
            }
        }
        pending = still;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(busy.len(), 5, "refused at once");
    for (is_error, v) in &busy {
        assert!(is_error);
        let text = v.as_str().unwrap();
        assert!(
            text.contains("the server is busy")
                && text.contains("--max-concurrency")
                && text.contains("--max-queue"),
            "{text}"
        );
    }
    std::fs::write(ws.join("release"), "1").unwrap();
    for call in pending {
        let (is_error, v) = call.await.unwrap();
        assert!(!is_error, "{v}");
        assert_eq!(v["result"], "ran");
    }
    client.cancel().await.unwrap();
    watch.finish(t).await;
}

// 48. "The engine stops mid-execution → clear error; the server recovers when it is back,
//     without a restart." and 49. "The server is SIGKILLed mid-execution → its containers are
//     removed at the next start; no partial files.": tests/faults.rs covers both, on an engine
//     of its own.
