
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
