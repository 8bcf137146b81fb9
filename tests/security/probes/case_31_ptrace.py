
import time
child = os.fork()
if child == 0:
    time.sleep(60)
    os._exit(0)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local, target = buf(64), buf(64)
liov = iovec(ctypes.cast(local, ctypes.c_void_p), 64)
riov = iovec(ctypes.cast(target, ctypes.c_void_p), 64)
calls = {
    "ptrace_traceme": call("ptrace", 0, 0, 0, 0),
    "ptrace_attach_init": call("ptrace", 16, 1, 0, 0),
    "ptrace_attach_child": call("ptrace", 16, child, 0, 0),
    "ptrace_seize_child": call("ptrace", 0x4206, child, 0, 0),
    "vm_readv_init": call("process_vm_readv", 1, ctypes.addressof(liov), 1, ctypes.addressof(riov), 1, 0),
    "vm_readv_child": call("process_vm_readv", child, ctypes.addressof(liov), 1, ctypes.addressof(riov), 1, 0),
    "vm_writev_child": call("process_vm_writev", child, ctypes.addressof(liov), 1, ctypes.addressof(riov), 1, 0),
}
try:
    with open("/proc/1/mem", "rb") as f:
        f.seek(int(open("/proc/1/maps").readline().split("-")[0], 16))
        mem = "readable" if f.read(16) else "empty"
except OSError as e:
    mem = errno.errorcode[e.errno]
procs = {}
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        procs[pid] = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        pass
host = None
try:
    host = open(f"/proc/{host_pid}/cmdline", "rb").read().decode(errors="replace")
except OSError:
    pass
try:
    init_exe = os.readlink("/proc/1/exe")
except OSError as e:
    init_exe = errno.errorcode[e.errno]
os.kill(child, 9)
result = {"calls": calls, "proc1_mem": mem, "init_exe": init_exe, "procs": procs, "host_process": host}
