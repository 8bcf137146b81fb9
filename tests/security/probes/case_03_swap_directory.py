
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/workspace/d")
open("/workspace/d/secret.txt", "w").write("inside")
os.symlink(outside, "/workspace/d_swap")
open("/workspace/flipping", "w").write("1")
# RENAME_EXCHANGE swaps the two names at once. gVisor's kernel does not support it on the
# workspace (EINVAL): there three renames swap them, one name missing in between.
def exchange():
    if libc.renameat2(-100, b"/workspace/d", -100, b"/workspace/d_swap", 2) == 0:
        return True
    if ctypes.get_errno() != errno.EINVAL:
        return False
    try:
        os.rename("/workspace/d", "/workspace/d_tmp")
        os.rename("/workspace/d_swap", "/workspace/d")
        os.rename("/workspace/d_tmp", "/workspace/d_swap")
        return True
    except OSError:
        return False
flips, failed = 0, 0
deadline = time.monotonic() + 100
while not os.path.exists("/workspace/stop") and time.monotonic() < deadline:
    for _ in range(100):
        if exchange():
            flips += 1
        else:
            failed += 1
result = {"flips": flips, "failed": failed}
