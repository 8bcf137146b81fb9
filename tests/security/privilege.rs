//! Catalogue cases 28-35, privilege: the sandbox's posture, setuid programs, mounts and
//! namespaces, ptrace, keyrings, writes to kernel interfaces, the kernel facilities seccomp keeps
//! out of reach, and the masked `/proc` files. One file per family of the catalogue, so a case is
//! found by its number (the map is in `main.rs`).

use serde_json::{Value, json};

use crate::common;
use crate::harness::{verdict, watched};

/// Errno names that mean a system call was refused (seccomp's EPERM; ENOSYS where the kernel or
/// a user-space kernel such as gVisor does not offer the call at all).
const REFUSED: [&str; 2] = ["EPERM", "ENOSYS"];

/// Python: `call(name, *args)` makes the raw system call `name` (numbers for x86_64 and
/// aarch64) and returns the errno name it failed with, or `"returned N"`.
const SYSCALLS: &str = include_str!("probes/syscalls.py");

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
///
/// Under gVisor the posture is its own kernel's, and it shows less of it: /proc/self/status has
/// no `CapAmb`, `NoNewPrivs` or `Seccomp_filters` (prctl answers for those: no_new_privs 1,
/// seccomp mode 2, and `PR_CAP_AMBIENT` is `EINVAL` for every capability — there is no ambient
/// set); mountinfo lists only `noexec` of /tmp's options (the engine was asked for all three);
/// its /proc has none of the masked files, and its /proc/sys (gVisor's own few sysctls, not the
/// host's) is not mounted read-only, but no file there is writable to the sandbox's user.
#[tokio::test]
async fn case_28_the_sandbox_posture() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_28_posture.py"), json!({})).await;
        let gvisor = crate::harness::gvisor(t);
        for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd"] {
            assert_eq!(v[cap], "0000000000000000", "{cap}: {v}");
        }
        assert_eq!(v["Seccomp"], "2");
        // gVisor's status has none of these three; wherever one is shown, it must hold.
        let shown = |field: &str| !(gvisor && v[field].is_null());
        if shown("CapAmb") {
            assert_eq!(v["CapAmb"], "0000000000000000", "{v}");
        }
        if shown("NoNewPrivs") {
            assert_eq!(v["NoNewPrivs"], "1", "{v}");
        }
        if shown("Seccomp_filters") {
            assert!(
                v["Seccomp_filters"].is_string() && v["Seccomp_filters"] != "0",
                "{v}"
            );
        }
        // Asked of the kernel (either runtime): no capability in the ambient or bounding set
        // (`EINVAL` past the last capability, and for every one where gVisor has no ambient set).
        let prctl = &v["prctl"];
        assert_eq!(prctl["no_new_privs"], "1", "{v}");
        assert_eq!(prctl["seccomp"], "2", "{v}");
        for set in ["ambient", "bounding"] {
            let answers = prctl[set].as_array().unwrap();
            assert!(
                answers.iter().all(|a| a == "0" || a == "EINVAL"),
                "{set}: {v}"
            );
        }
        assert!(
            prctl["bounding"].as_array().unwrap().contains(&json!("0")),
            "{v}"
        );
        if !gvisor {
            assert!(
                prctl["ambient"].as_array().unwrap().contains(&json!("0")),
                "{v}"
            );
        }
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
                ["/workspace", "/tmp", "/dev/shm", "/dev/mqueue"]
                    .contains(&point.as_str().unwrap()),
                "the sandbox can write {point}"
            );
        }
        assert_eq!(v["tmp"]["fstype"], "tmpfs");
        // gVisor's mountinfo shows noexec only (and gVisor refuses to exec from /tmp); nosuid is
        // moot under no_new_privs (above), nodev under no CAP_MKNOD (case 6). The options the
        // engine was asked for are checked below.
        let tmp_opts: &[&str] = if gvisor {
            &["noexec"]
        } else {
            &["nosuid", "nodev", "noexec"]
        };
        for opt in tmp_opts {
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
        if gvisor {
            // gVisor's kernel has none of these /proc files: nothing there to mask.
            for (path, state) in masked {
                assert!(
                    !path.starts_with("/proc/") || state == "absent",
                    "{path}: {state}"
                );
            }
        } else {
            assert!(
                masked.values().any(|s| s == "null_device")
                    && masked.values().any(|s| s == "empty_dir"),
                "some masked path exists on every kernel: {v}"
            );
        }
        for (path, state) in v["read_only"].as_object().unwrap() {
            assert!(
                state == "ro" || state == "absent" || (gvisor && path == "/proc/sys"),
                "{path}: {state}"
            );
        }
        if !gvisor {
            assert_eq!(v["read_only"]["/proc/sys"], "ro");
        }
        // Read-only or not, /proc is the kernel's own proc and nothing in /proc/sys is writable.
        assert_eq!(v["proc_fstype"], "proc", "{v}");
        assert_eq!(v["proc_sys_writable"], json!([]), "{v}");

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
        // Docker keeps the request (`ALL`); Podman lists the capabilities it dropped. The sets
        // inside are checked empty above either way.
        let dropped = host.cap_drop.unwrap_or_default();
        assert!(
            dropped == ["ALL"]
                || (dropped.len() >= 14 && dropped.iter().any(|c| c == "SYS_CHROOT")),
            "{dropped:?}"
        );
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
        if gvisor {
            // What gVisor's mountinfo does not show: the options the engine was asked for.
            let tmpfs = host.tmpfs.unwrap_or_default();
            let tmp: Vec<&str> = tmpfs.get("/tmp").map_or(vec![], |o| o.split(',').collect());
            for opt in ["nosuid", "nodev", "noexec"] {
                assert!(tmp.contains(&opt), "/tmp without {opt}: {tmpfs:?}");
            }
        }
        // Docker lists the server's mounts under Mounts only; Podman repeats them as binds.
        // Either way, nothing but the workspace, skills and tools package is bound, the package
        // sets and the container's state directory read-only, and, with the image's tree served
        // from the host (--image-tree), its /usr directories read-only.
        use code_execution_mcp::sandbox::container::spec::{
            PACKAGES_MOUNT, SERVERS_MOUNT, SKILLS_MOUNT, STATE_MOUNT, WORKSPACE_MOUNT,
        };
        for bind in host.binds.unwrap_or_default() {
            let mut parts = bind.split(':');
            let target = parts.nth(1).unwrap_or_default();
            let read_only = parts
                .next()
                .is_some_and(|o| o.split(',').any(|o| o == "ro"));
            assert!(
                [WORKSPACE_MOUNT, SKILLS_MOUNT, SERVERS_MOUNT].contains(&target)
                    || ((target.starts_with("/usr/")
                        || [PACKAGES_MOUNT, STATE_MOUNT].contains(&target))
                        && read_only),
                "an unexpected bind: {bind}"
            );
        }
    })
    .await;
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
/// finds no setuid/setgid file. Ordinary modes (0o755, 0o600, sticky) still work. With /usr
/// served from a host copy (`--image-tree`), the copy has no setuid or setgid file at all; the
/// programs run all the same, with the sandbox's ids.
///
/// Under gVisor (runsc with `--oci-seccomp`) its own kernel runs the same filter but ignores
/// `errnoRet`, so what the profile answers with ENOSYS is EPERM there (openat2, and fchmodat2
/// for every mode, which that filter has no rule for): still refusals. A file capability is
/// `ENOTSUP`: gVisor's filesystems take no `security.*` attribute (its kernel has no file
/// capabilities). On the host, no file the sandbox wrote has one either way.
#[tokio::test]
async fn case_29_setuid_programs_su_and_chmod_u_s_do_not_escalate() {
    watched(async |t, _| {
        let code = format!("{SYSCALLS}{}", include_str!("probes/case_29_setuid.py"));
        let v = verdict(t, &code, json!({})).await;
        let gvisor = crate::harness::gvisor(t);
        let (uid, gid) = (v["me"][0].as_u64().unwrap(), v["me"][1].as_u64().unwrap());
        assert_ne!(uid, 0);
        let host_copy = t.app.shared().image_tree().is_some();
        let setuid_files = v["setuid_root_files"].as_array().unwrap();
        if host_copy {
            // /usr from the host copy (--image-tree): it was made without the bits.
            assert!(
                setuid_files.is_empty(),
                "the host copy has no setuid file: {v}"
            );
        } else {
            assert!(
                setuid_files.len() >= 3,
                "the image has setuid-root programs to try: {v}"
            );
        }
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
                // The host copy's su has no setuid bit to copy.
                "copy2 of su" | "copymode from su" if host_copy => "ok",
                "file capability" if gvisor => "OSError ENOTSUP",
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
        if gvisor {
            // The profile's ENOSYS arrives as EPERM (runsc ignores errnoRet), and the filter
            // refuses fchmodat2 whatever the mode: callers that fall back only on ENOSYS fail.
            assert_eq!(raw["fchmodat2 0644"], "EPERM", "{raw}");
            assert_eq!(raw["openat2"], "EPERM", "{raw}");
        } else {
            assert!(
                ["returned 0", "ENOSYS"].contains(&raw["fchmodat2 0644"].as_str().unwrap()),
                "{raw}"
            );
            assert_eq!(raw["openat2"], "ENOSYS", "so callers fall back to openat");
        }
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
            let mode =
                u32::from_str_radix(mode.as_str().unwrap().trim_start_matches("0o"), 8).unwrap();
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
        assert_eq!(
            file_capability(&t.workspace().join("myid")),
            None,
            "the refused file capability is on the host's file"
        );
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
    })
    .await;
}

/// The `security.capability` attribute of the host file at `path`, if it has one.
fn file_capability(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let mut value = [0u8; 64];
    // SAFETY: both names are NUL-terminated and `value` is writable for its length.
    let n = unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"security.capability".as_ptr(),
            value.as_mut_ptr().cast(),
            value.len(),
        )
    };
    if n < 0 {
        let e = std::io::Error::last_os_error().raw_os_error();
        assert!(
            e == Some(libc::ENODATA) || e == Some(libc::ENOTSUP),
            "getxattr: {e:?}"
        );
        return None;
    }
    Some(value[..n as usize].to_vec())
}

/// 30. "mount, unshare, setns, pivot_root → EPERM."
///
/// setns is tried into PID 1's mount namespace; gVisor shows no mount namespace in /proc/1/ns
/// (only net, pid and user), so there its pid namespace.
#[tokio::test]
async fn case_30_mount_unshare_setns_and_pivot_root_are_refused() {
    watched(async |t, _| {
        let code = format!("{SYSCALLS}{}", include_str!("probes/case_30_namespaces.py"));
        let v = verdict(t, &code, json!({})).await;
        assert_all_refused(&v, 18);
        let init_ns = if crate::harness::gvisor(t) {
            "setns_init_pid"
        } else {
            "setns_init_mnt"
        };
        assert!(v.get(init_ns).is_some(), "{init_ns} was not tried: {v}");
    })
    .await;
}

/// 31. "ptrace, `/proc/1/mem`, process_vm_readv of anything outside → denied."
///
/// ptrace and process_vm_* are refused even against the sandbox's own child. The only
/// processes in sight are the container's own (its init, the harness, its children): the test
/// process on the host is not. `/proc/1/mem` names the container's init; whether it opens is
/// recorded in the verdict, and when it does, PID 1 must be that init. Under gVisor, whose kernel
/// restricts ptrace access as Yama's scope 1 does (its /proc/sys/kernel/yama/ptrace_scope is 1:
/// descendants only), PID 1's `exe` link and `mem` are both `EACCES`; its command line still
/// names the init.
#[tokio::test]
async fn case_31_ptrace_and_process_vm_access_are_refused_and_only_the_container_is_in_sight() {
    watched(async |t, _| {
        let code = format!("{SYSCALLS}{}", include_str!("probes/case_31_ptrace.py"));
        let v = verdict(t, &code, json!({"host_pid": std::process::id()})).await;
        assert_all_refused(&v["calls"], 7);
        let procs = v["procs"].as_object().unwrap();
        assert!(procs.len() >= 3 && procs.len() < 16, "{v}");
        for (pid, cmdline) in procs {
            let cmdline = cmdline.as_str().unwrap();
            assert!(
                ENGINE_INITS.iter().any(|init| cmdline.contains(init))
                    || cmdline.contains("/opt/sandbox/harness.py"),
                "/proc/{pid} is not the container's: {cmdline}"
            );
        }
        let test_binary = std::env::current_exe().unwrap();
        let test_name = test_binary.file_name().unwrap().to_str().unwrap();
        assert!(
            !v["host_process"].as_str().unwrap_or("").contains(test_name),
            "the host's test process is visible: {v}"
        );
        // PID 1 is the container's init: what /proc/1/mem opens, if anything.
        if crate::harness::gvisor(t) {
            assert_eq!(v["init_exe"], "EACCES", "{v}");
            assert_eq!(v["proc1_mem"], "EACCES", "{v}");
            let argv0 = v["procs"]["1"].as_str().unwrap_or("").split(' ').next();
            assert!(
                argv0.is_some_and(|a| ENGINE_INITS.iter().any(|i| a.ends_with(i))),
                "{v}"
            );
        } else {
            let init = v["init_exe"].as_str().unwrap();
            assert!(ENGINE_INITS.iter().any(|i| init.ends_with(i)), "{v}");
            assert!(
                ["readable", "EACCES", "EPERM", "EIO"].contains(&v["proc1_mem"].as_str().unwrap()),
                "{v}"
            );
        }
    })
    .await;
}

/// The init each engine runs as PID 1 (`HostConfig.Init`): Docker's tini, Podman's catatonit.
const ENGINE_INITS: [&str; 2] = ["docker-init", "podman-init"];

/// 32. "keyctl/add_key → EPERM."
#[tokio::test]
async fn case_32_keyctl_and_add_key_are_refused() {
    watched(async |t, _| {
        let code = format!("{SYSCALLS}{}", include_str!("probes/case_32_keyctl.py"));
        let v = verdict(t, &code, json!({})).await;
        assert_all_refused(&v, 6);
    })
    .await;
}

/// 33. "Writes to `/proc/sys`, `/proc/sysrq-trigger`, `/sys/fs/cgroup` → denied."
///
/// Besides the named targets, every file under /proc/sys with a write bit in its mode is opened
/// for writing (and closed unwritten): each is refused. The probe also sets its own
/// oom_score_adj to -1000 (the kernel refuses that without `CAP_SYS_RESOURCE`) and waits while
/// the test looks for a host process newly at -1000: none.
///
/// Under gVisor the targets are its kernel's own: its /proc/sys has a few dozen files
/// (kernel/hostname and net/ipv4/ip_forward, no core_pattern), /proc has no sysrq-trigger and
/// /sys/fs/cgroup no file (the host's cgroups are not in sight). Its kernel lets the sandbox
/// lower its own oom_score_adj, but the value stays there: the host's OOM killer sees the
/// sandbox's host processes, and none of them changes.
#[tokio::test]
async fn case_33_writes_to_proc_sys_sysrq_and_cgroups_are_denied() {
    watched(async |t, _| {
        let gvisor = crate::harness::gvisor(t);
        let core_pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
        let marker = crate::harness::token("case33");
        let written = t.workspace().join(&marker);
        let before = host_processes_at_oom_score_adj_min();
        let (v, newly) = tokio::join!(
            verdict(
                t,
                include_str!("probes/case_33_kernel_writes.py"),
                json!({ "marker": marker }),
            ),
            async {
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
                while !written.exists() && std::time::Instant::now() < deadline {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                let now = host_processes_at_oom_score_adj_min();
                std::fs::write(written.with_file_name(format!("{marker}.seen")), "").unwrap();
                now.difference(&before).cloned().collect::<Vec<_>>()
            }
        );
        assert_eq!(v["host_looked"], true, "{v}");
        assert!(
            newly.is_empty(),
            "host processes newly at oom_score_adj -1000: {newly:?} ({v})"
        );
        let refused = ["EROFS", "EACCES", "EPERM"];
        let attempts = v["targets"].as_object().unwrap();
        let existing = attempts.values().filter(|s| *s != "absent").count();
        assert!(
            existing >= if gvisor { 4 } else { 8 },
            "too few targets exist here: {v}"
        );
        assert!(attempts.keys().any(|k| k.contains("cgroup")), "{v}");
        for (path, outcome) in attempts {
            let outcome = outcome.as_str().unwrap();
            assert!(
                outcome == "absent"
                    || refused.contains(&outcome)
                    || (gvisor && path == "/proc/self/oom_score_adj" && outcome == "written"),
                "{path}: {outcome}"
            );
        }
        if gvisor {
            for path in [
                "/proc/sys/kernel/hostname",
                "/proc/sys/net/ipv4/ip_forward",
                "mkdir /sys/fs/cgroup/",
            ] {
                assert!(
                    refused.contains(&v["targets"][path].as_str().unwrap_or("")),
                    "{v}"
                );
            }
            assert_eq!(
                v["targets"]["/proc/sys/kernel/core_pattern"], "absent",
                "{v}"
            );
        } else {
            assert_eq!(
                v["targets"]["/proc/sys/kernel/core_pattern"], "EROFS",
                "{v}"
            );
            assert_ne!(v["oom_score_adj"], "-1000", "{v}");
        }
        let writable_looking = v["writable_looking"].as_object().unwrap();
        assert!(!writable_looking.is_empty(), "{v}");
        for (path, outcome) in writable_looking {
            assert!(
                refused.contains(&outcome.as_str().unwrap()),
                "{path}: {outcome}"
            );
        }
        assert_eq!(
            std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap(),
            core_pattern,
            "the host's core_pattern"
        );
    })
    .await;
}

/// The host's processes (pid, name) whose oom_score_adj is -1000: the OOM killer never picks them.
fn host_processes_at_oom_score_adj_min() -> std::collections::BTreeSet<(u32, String)> {
    let mut found = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let adj = std::fs::read_to_string(entry.path().join("oom_score_adj")).unwrap_or_default();
        if adj.trim() == "-1000" {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.insert((pid, comm.trim().to_string()));
        }
    }
    found
}

/// 34. "io_uring_setup, bpf, perf_event_open, userfaultfd, init_module → EPERM (io_uring needs our
///     own seccomp profile on Docker < 25)."
#[tokio::test]
async fn case_34_io_uring_bpf_perf_userfaultfd_and_module_loading_are_refused() {
    watched(async |t, _| {
        let code = format!(
            "{SYSCALLS}{}",
            include_str!("probes/case_34_kernel_facilities.py")
        );
        let v = verdict(t, &code, json!({})).await;
        let expected = if std::env::consts::ARCH == "x86_64" {
            16
        } else {
            14
        };
        assert_all_refused(&v, expected);
    })
    .await;
}

/// 35. "`/proc/kcore`, `/proc/keys` → masked."
///
/// Masked means absent (the kernel has no such file), or the engine's /dev/null (or an empty
/// read-only tmpfs) mounted over it: never the kernel's own contents.
#[tokio::test]
async fn case_35_proc_kcore_and_proc_keys_are_masked() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_35_masked_proc.py"), json!({})).await;
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
    })
    .await;
}
