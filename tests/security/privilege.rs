//! Catalogue cases 28-35, privilege: the sandbox's posture, setuid programs, mounts and
//! namespaces, ptrace, keyrings, writes to kernel interfaces, the kernel facilities seccomp keeps
//! out of reach, and the masked `/proc` files. One file per family of the catalogue, so a case is
//! found by its number (the map is in `main.rs`).

use serde_json::{Value, json};

use crate::common::host_watch::HostWatch;
use crate::common::{self, TestApp};
use crate::harness::verdict;

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
