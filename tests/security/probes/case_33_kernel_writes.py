
import errno, glob, os, time
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
# Every file under /proc/sys whose mode has a write bit, opened for writing (and closed unwritten).
writable_looking = {}
for top, _, files in os.walk("/proc/sys"):
    for n in files:
        p = os.path.join(top, n)
        try:
            if not os.lstat(p).st_mode & 0o222:
                continue
            os.close(os.open(p, os.O_WRONLY))
            writable_looking[p] = "opened"
        except OSError as e:
            writable_looking[p] = errno.errorcode[e.errno]
# The oom_score_adj this process now has, and a pause while the host looks at its own processes'.
oom_score_adj = open("/proc/self/oom_score_adj").read().strip()
with open(f"/workspace/{marker}", "w") as f:
    f.write(oom_score_adj)
end = time.monotonic() + 60
while not os.path.exists(f"/workspace/{marker}.seen") and time.monotonic() < end:
    time.sleep(0.05)
result = {"targets": out, "writable_looking": writable_looking, "oom_score_adj": oom_score_adj,
          "host_looked": os.path.exists(f"/workspace/{marker}.seen")}
