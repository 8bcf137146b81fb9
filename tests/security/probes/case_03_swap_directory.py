
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/workspace/d")
open("/workspace/d/secret.txt", "w").write("inside")
os.symlink(outside, "/workspace/d_swap")
open("/workspace/flipping", "w").write("1")
flips, failed = 0, 0
deadline = time.monotonic() + 100
while not os.path.exists("/workspace/stop") and time.monotonic() < deadline:
    if not flip:
        # The host swaps them (gVisor's kernel has no RENAME_EXCHANGE on the workspace).
        time.sleep(0.05)
        continue
    for _ in range(100):
        if libc.renameat2(-100, b"/workspace/d", -100, b"/workspace/d_swap", 2) == 0:
            flips += 1
        else:
            failed += 1
result = {"flips": flips, "failed": failed}
