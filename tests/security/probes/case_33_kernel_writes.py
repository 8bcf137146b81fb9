
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
