
import errno, os, stat
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
# A field the kernel does not show is null (gVisor's status has no CapAmb, NoNewPrivs, Seccomp_filters).
out = {k: status[k].strip() if k in status else None
       for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters")}
import ctypes
_libc = ctypes.CDLL(None, use_errno=True)
def prctl(*args):
    ctypes.set_errno(0)
    r = _libc.prctl(*(ctypes.c_ulong(a) for a in args + (0,) * (5 - len(args))))
    return str(r) if r != -1 else errno.errorcode[ctypes.get_errno()]
# The same facts asked of the kernel: PR_GET_NO_NEW_PRIVS, PR_GET_SECCOMP, and for each capability
# number PR_CAP_AMBIENT_IS_SET and PR_CAPBSET_READ (EINVAL past the last capability).
out["prctl"] = {"no_new_privs": prctl(39), "seccomp": prctl(21),
                "ambient": sorted({prctl(47, 1, c) for c in range(64)}),
                "bounding": sorted({prctl(23, c) for c in range(64)})}
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
out["proc_fstype"] = at["/proc"]["fstype"]
out["proc_sys_writable"] = sorted(os.path.join(top, n) for top, _, files in os.walk("/proc/sys")
                                  for n in files if os.access(os.path.join(top, n), os.W_OK))
result = out
