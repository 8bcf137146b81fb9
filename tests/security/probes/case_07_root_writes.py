
import errno, os, sysconfig
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
site = sysconfig.get_path("purelib")
for path in ("/evil", "/usr/evil", "/etc/evil", "/etc/profile.d/evil.sh", "/opt/sandbox/evil.py",
             "/usr/local/bin/evil", site + "/evil.pth", "/var/tmp/evil", "/run/evil", "/home/evil",
             "/skills/evil.py"):
    attempt("create " + path, lambda: open(path, "x").write("x"))
attempt("mkdir /usr/evil.d", lambda: os.mkdir("/usr/evil.d"))
attempt("rename python", lambda: os.rename("/usr/local/bin/python3", "/usr/local/bin/python3.bak"))
attempt("symlink /etc", lambda: os.symlink("/tmp", "/etc/evil-link"))
out["left"] = [p for p in ("/evil", "/usr/evil", "/etc/evil", "/usr/evil.d", site + "/evil.pth") if os.path.lexists(p)]
open("/workspace/ok.txt", "w").write("fine")
result = out
