
import errno, os, stat
out = {"mknod": {}, "opened": {}, "present": [], "block_devices": []}
for where in ("/tmp", "/workspace"):
    for kind, mode, dev in (("char_mem", stat.S_IFCHR, os.makedev(1, 1)), ("char_null", stat.S_IFCHR, os.makedev(1, 3)),
                            ("block_sda", stat.S_IFBLK, os.makedev(8, 0))):
        try:
            os.mknod(f"{where}/{kind}", mode | 0o666, dev)
            out["mknod"][f"{where}/{kind}"] = "made"
            try:
                os.close(os.open(f"{where}/{kind}", os.O_RDONLY))
                out["opened"][f"{where}/{kind}"] = "opened"
            except OSError as e:
                out["opened"][f"{where}/{kind}"] = errno.errorcode[e.errno]
        except OSError as e:
            out["mknod"][f"{where}/{kind}"] = errno.errorcode[e.errno]
for p in ("/dev/mem", "/dev/kmem", "/dev/port", "/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/xvda",
          "/dev/kmsg", "/dev/loop0", "/dev/loop-control", "/dev/mapper", "/dev/disk", "/dev/fuse", "/dev/dri",
          "/dev/kvm", "/dev/net/tun", "/dev/cpu", "/dev/snd", "/dev/watchdog", "/dev/hwrng"):
    if os.path.lexists(p):
        out["present"].append(p)
for top, dirs, files in os.walk("/dev"):
    for n in dirs + files:
        p = os.path.join(top, n)
        try:
            if stat.S_ISBLK(os.lstat(p).st_mode):
                out["block_devices"].append(p)
        except OSError:
            pass
out["null_works"] = open("/dev/null", "rb").read() == b""
result = out
