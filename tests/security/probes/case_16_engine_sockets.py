
import glob, os, stat
known = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
         "/var/run/containerd/containerd.sock", "/run/docker/containerd/containerd.sock",
         "/run/crio/crio.sock", "/run/podman/podman.sock", "/run/buildkit/buildkitd.sock"]
out = {"present": [p for p in known + glob.glob("/run/user/*/docker.sock") if os.path.lexists(p)]}
sockets = []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys"):
        dirs[:] = []
        continue
    for n in files + dirs:
        p = os.path.join(top, n)
        try:
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                sockets.append(p)
        except OSError:
            pass
out["socket_files"] = sockets
unix = open("/proc/net/unix").read().splitlines()[1:]
out["engine_unix_sockets"] = [l for l in unix if "docker" in l or "containerd" in l or "runc" in l]
out["unix_sockets"] = len(unix)
result = out
