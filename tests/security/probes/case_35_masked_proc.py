
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
