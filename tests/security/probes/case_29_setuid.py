
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
