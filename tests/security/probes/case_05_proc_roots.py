
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
