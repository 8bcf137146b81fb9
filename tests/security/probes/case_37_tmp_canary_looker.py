
import errno, os, socket
out = {"tmp": os.listdir("/tmp"), "shm": os.listdir("/dev/shm"),
       "in_unix_table": canary in open("/proc/net/unix").read()}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0" + canary)
    out["socket"] = "connected"
except OSError as e:
    out["socket"] = errno.errorcode[e.errno]
result = out
