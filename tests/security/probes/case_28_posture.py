
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
