//! Catalogue cases 1-11, filesystem escape: names that leave the workspace, symlinks and hard
//! links planted by sandbox code, a directory swapped for a symlink mid-call, the `/proc` root
//! links, device nodes, the read-only root, special files left in the workspace, a hundred
//! thousand files, and filling the workspace and `/tmp`. One file per family of the catalogue, so
//! a case is found by its number (the map is in `main.rs`).

use std::path::Path;
use std::time::Duration;

use code_execution_mcp::app::execution::request::ExecuteRequest;
use serde_json::json;

use crate::common::{self, assert_ok, call_tool, mcp_client};
use crate::harness::{gvisor, refusal, token, verdict, watched, watched_with};

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// 1. "File tool names `../../x`, `/etc/x`, NUL inside, 4 KB long, `a/../../b` → refused before
///    any disk access."
#[tokio::test]
async fn case_01_file_tool_names_are_refused_before_any_disk_access() {
    watched(async |t, watch| {
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
            for (tool, args) in [
                ("read_workspace_file", json!({"filename": bad})),
                (
                    "write_workspace_file",
                    json!({"filename": bad, "content": "x"}),
                ),
                ("delete_workspace_file", json!({"filename": bad})),
            ] {
                let (err, v) = call_tool(&client, tool, args).await;
                let message = refusal(err, &v, &format!("{tool}({bad:.60?})"));
                assert!(
                    message.contains(rule),
                    "{tool}({bad:.60?}): the error names the rule {rule:?}: {message}"
                );
                watch.assert_not_leaked(&v);
            }
            let (err, v) =
                call_tool(&client, "list_workspace_files", json!({"subpath": bad})).await;
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
    })
    .await;
}

/// 2. "Sandbox plants `ws/evil -> /etc/passwd` (or -> a host secret's absolute path); then
///    read/write/list via the workspace tools → refused; host file neither returned nor
///    modified."
#[tokio::test]
async fn case_02_planted_symlinks_are_never_followed_by_the_file_tools() {
    watched(async |t, watch| {
        let client = mcp_client(t.app.clone()).await;
        let plant = include_str!("probes/case_02_plant_symlinks.py");
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
    })
    .await;
}

/// 3. "Directory swapped for a symlink between check and use → still safe: resolve beneath an
///    open dir fd, no check-then-open."
///
/// Sandbox code exchanges `d` (a real directory) and `d_swap` (a symlink to the canary's
/// directory) with `renameat2(RENAME_EXCHANGE)` in a tight loop (under gVisor the host does)
/// while the file tools read, write, list and delete through `d` hundreds of times.
#[tokio::test]
async fn case_03_a_directory_swapped_for_a_symlink_mid_call_never_leads_outside() {
    watched(async |t, watch| {
        let client = mcp_client(t.app.clone()).await;
        let ws = t.workspace();
        let flipper = include_str!("probes/case_03_swap_directory.py");
        let outside = watch.canary_dir();
        // gVisor's kernel cannot exchange two names on the workspace (RENAME_EXCHANGE gets
        // EINVAL), so there the host swaps them, as fast: the file tools meet the same race.
        let host_flips = gvisor(t);
        let context = json!({ "outside": outside, "flip": !host_flips });
        let flipping = t
            .start_in_background(flipper, context, "flipping", "the flipper")
            .await;
        let stop_host = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let host_flipper = host_flips.then(|| {
            let (stop, ws) = (stop_host.clone(), ws.clone());
            std::thread::spawn(move || host_flip(&ws, &stop))
        });

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
        let o = flipping.await.unwrap().unwrap().outcome;
        assert_ok(&o);
        let flips = match host_flipper {
            Some(thread) => {
                stop_host.store(true, std::sync::atomic::Ordering::Relaxed);
                thread.join().unwrap()
            }
            None => o.result["flips"].as_u64().unwrap(),
        };
        assert!(flips > 0, "{}", o.result);
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
    })
    .await;
}

/// Exchanges `d` and `d_swap` in `ws` until `stop`; the number of exchanges.
fn host_flip(ws: &std::path::Path, stop: &std::sync::atomic::AtomicBool) -> u64 {
    let path = |name: &str| {
        std::ffi::CString::new(ws.join(name).into_os_string().into_encoded_bytes()).unwrap()
    };
    let (d, swap) = (path("d"), path("d_swap"));
    let mut flips = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        // SAFETY: two valid NUL-terminated paths; renameat2 keeps neither pointer.
        let done = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                d.as_ptr(),
                libc::AT_FDCWD,
                swap.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        if done == 0 {
            flips += 1;
        }
    }
    flips
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
    watched(async |t, watch| {
        let ws = t.workspace();
        // A file the host owns inside the workspace (root-owned when the tests run as root).
        std::fs::write(ws.join("host_owned.txt"), "host").unwrap();
        let v = verdict(t, include_str!("probes/case_04_hard_links.py"), json!({})).await;
        for name in ["etc_passwd", "skills", "tmp", "harness", "proc"] {
            assert_eq!(v[name], "EXDEV", "a link to {name}: {v}");
        }
        let protected = std::fs::read_to_string("/proc/sys/fs/protected_hardlinks")
            .is_ok_and(|s| s.trim() == "1");
        if is_root() && protected {
            assert_eq!(v["host_owned"], "EPERM", "{v}");
        }
        assert_eq!(v["nlink"], 2);

        let client = mcp_client(t.app.clone()).await;
        let (err, r) =
            call_tool(&client, "read_workspace_file", json!({"filename": "b.txt"})).await;
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
    })
    .await;
}

/// 5. "`/proc/self/root`, `/proc/1/root`, `/proc/self/cwd` → only the container's own tree."
#[tokio::test]
async fn case_05_proc_root_and_cwd_links_show_only_the_container() {
    watched(async |t, watch| {
        let v = verdict(
            t,
            include_str!("probes/case_05_proc_roots.py"),
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
    })
    .await;
}

/// 6. "`mknod`, `/dev/mem`, `/dev/sda` → EPERM / absent."
#[tokio::test]
async fn case_06_device_nodes_cannot_be_made_and_host_devices_are_absent() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_06_device_nodes.py"), json!({})).await;
        let made = v["mknod"].as_object().unwrap();
        assert_eq!(made.len(), 6);
        for (path, errno) in made {
            // gVisor's kernel lets a node be made in its own in-memory /tmp, but it leads to no
            // host device: the memory and disk nodes fail to open (ENXIO), the null device is
            // gVisor's own. Nodes in the workspace are refused there too.
            if gvisor(t) && path.starts_with("/tmp/") && errno == "made" {
                let opened = if path.ends_with("char_null") {
                    "opened"
                } else {
                    "ENXIO"
                };
                assert_eq!(v["opened"][path], opened, "open {path}: {v}");
                continue;
            }
            assert_eq!(errno, "EPERM", "mknod {path}");
        }
        // gVisor's kernel has FUSE and TUN devices of its own, which reach nothing on the host:
        // using them takes a mount or CAP_NET_ADMIN, refused to the sandbox (cases 17 and 30).
        let own: &[&str] = if gvisor(t) {
            &["/dev/fuse", "/dev/net/tun"]
        } else {
            &[]
        };
        let present: Vec<&str> = (v["present"].as_array().unwrap().iter())
            .filter_map(|p| p.as_str())
            .filter(|p| !own.contains(p))
            .collect();
        assert_eq!(present, Vec::<&str>::new(), "{v}");
        assert_eq!(v["block_devices"], json!([]), "{v}");
        assert_eq!(v["null_works"], true);
    })
    .await;
}

/// 7. "Writes under `/`, `/usr`, `/etc` → EROFS."
#[tokio::test]
async fn case_07_writes_under_the_root_filesystem_get_erofs() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_07_root_writes.py"), json!({})).await;
        let attempts = v.as_object().unwrap();
        for (name, errno) in attempts {
            if name == "left" {
                continue;
            }
            // gVisor serves the read-only root through its gofer and refuses creating a file
            // there with EACCES (mkdir, rename and symlink still get EROFS).
            if gvisor(t) && name.starts_with("create ") {
                assert_eq!(errno, "EACCES", "{name}: {v}");
            } else {
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
    })
    .await;
}

/// 8. "FIFO, socket, device, huge sparse file left in the workspace → the server reads regular
///    files only, without blocking, with a size cap."
#[tokio::test]
async fn case_08_fifos_sockets_devices_and_sparse_files_are_refused_without_blocking() {
    watched(async |t, _| {
        let ws = t.workspace();
        let v = verdict(
            t,
            include_str!("probes/case_08_special_files.py"),
            json!({}),
        )
        .await;
        assert_eq!(v, json!(["fifo", "ok.txt", "sock", "sparse.bin"]));
        let mut expected = vec![("sparse.bin", "over the 10 MiB limit")];
        if gvisor(t) {
            // gVisor keeps a FIFO and a socket made in the workspace in its own kernel: they
            // never reach the host's directory, so the file tools cannot meet them.
            for name in ["fifo", "sock"] {
                assert!(!ws.join(name).exists(), "{name} reached the host");
            }
        } else {
            expected.extend([("fifo", "fifo"), ("sock", "socket")]);
        }
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
    })
    .await;
}

/// 9. "100k files, names with newlines or invalid UTF-8 → listing bounded; names escaped or
///    skipped, never a crash."
#[tokio::test]
async fn case_09_a_hundred_thousand_files_and_odd_names_list_bounded_and_usable() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_09_many_files.py"), json!({})).await;
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
    })
    .await;
}

/// The workspace quota of case 10's tests.
const QUOTA_MB: u64 = 16;

/// 10. "Filling the workspace past its quota → ENOSPC or a clear quota error; host disk
///     unaffected."
///
/// As root the quota is a loop-mounted ext4 image: code gets ENOSPC, the image never grows past
/// the quota, and the file tools say the workspace is full.
#[tokio::test]
#[ignore = "needs root: loop-mounts an ext4 image as the workspace quota"]
async fn case_10_filling_the_workspace_past_its_quota_gets_enospc() {
    common::require_root("the loop-mounted quota");
    let fill = include_str!("probes/case_10_fill_workspace.py");
    {
        let ws = watched_with(
            |c| c.storage.workspace_quota_mb = QUOTA_MB,
            async |t, _| {
                assert_eq!(t.app.quota().kind(), "loop_mount");
                let ws = t.workspace();
                let o = t.run(fill).await;
                assert_ok(&o);
                assert_eq!(o.result, "ENOSPC");
                let size = std::fs::metadata(ws.join("big.bin")).unwrap().len();
                assert!(size <= QUOTA_MB << 20, "{size}");
                // The host disk holds at most the image's size.
                use std::os::unix::fs::MetadataExt;
                let image = common::host_watch::app_dirs(t)[2].clone();
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
                ws
            },
        )
        .await;
        code_execution_mcp::workspace::quota::unmount(&ws).unwrap();
    }
}

/// 10, without a kernel quota (soft mode: a workspace that already held files, or a server not
/// running as root): the next execution and tool writes are refused with "workspace is full"
/// until files are deleted.
#[tokio::test]
async fn case_10_filling_the_workspace_past_a_soft_quota_gets_a_quota_error() {
    let fill = include_str!("probes/case_10_fill_workspace.py");
    watched_with(
        |c| {
            c.storage.workspace_quota_mb = QUOTA_MB;
            let ws = c.storage.workspace.clone().unwrap();
            std::fs::create_dir_all(&ws).unwrap();
            std::fs::write(ws.join("existing.txt"), "kept").unwrap();
        },
        async |t, _| {
            assert_eq!(t.app.quota().kind(), "soft");
            let o = t.run(fill).await;
            assert_ok(&o);
            assert_eq!(o.result, "wrote 40 MiB", "soft mode has no kernel limit");
            let err = t
                .app
                .execute(ExecuteRequest::code("print(1)"), Default::default())
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
        },
    )
    .await;
}

/// 11. "Filling `/tmp` (tmpfs) → ENOSPC at its size."
#[tokio::test]
async fn case_11_filling_tmp_gets_enospc_at_its_size() {
    watched_with(
        |c| c.sandbox.tmpfs_mb = 8,
        async |t, _| {
            let v = verdict(t, include_str!("probes/case_11_fill_tmp.py"), json!({})).await;
            assert_eq!(v["errno"], "ENOSPC", "{v}");
            assert_eq!(v["size"], 8 << 20, "{v}");
            let written = v["written"].as_u64().unwrap();
            assert!(
                (4 << 20..=8 << 20).contains(&written),
                "stopped at {written} bytes"
            );
        },
    )
    .await;
}
