
net = os.open("/proc/self/ns/net", os.O_RDONLY)
# PID 1's mount namespace, or where the kernel shows none (gVisor: net, pid, user) its pid namespace.
init_ns = next(n for n in ("mnt", "pid") if os.path.exists(f"/proc/1/ns/{n}"))
init = os.open(f"/proc/1/ns/{init_ns}", os.O_RDONLY)
out = {}
for flag, value in (("user", 0x10000000), ("mount", 0x20000), ("net", 0x40000000), ("pid", 0x20000000),
                    ("uts", 0x04000000), ("ipc", 0x08000000), ("cgroup", 0x02000000)):
    out["unshare_" + flag] = call("unshare", value)
out["clone_newuser"] = call("clone", 0x10000000 | 17, 0, 0, 0, 0)
out["setns_net"] = call("setns", net, 0)
out["setns_init_" + init_ns] = call("setns", init, 0)
out["mount_tmpfs"] = call("mount", b"none", b"/tmp", b"tmpfs", 0, None)
out["remount_root_rw"] = call("mount", None, b"/", None, 0x20 | 0x1000, None)
out["umount_workspace"] = call("umount2", b"/workspace", 2)
out["pivot_root"] = call("pivot_root", b"/tmp", b"/tmp")
out["chroot"] = call("chroot", b"/tmp")
out["fsopen"] = call("fsopen", b"tmpfs", 0)
out["open_tree"] = call("open_tree", -100, b"/", 1)
try:
    os.unshare(os.CLONE_NEWUSER)
    out["os_unshare"] = "returned 0"
except OSError as e:
    out["os_unshare"] = errno.errorcode[e.errno]
result = out
