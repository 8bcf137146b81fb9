
import os
os.symlink(secret, "/workspace/evil")
os.symlink("/etc/passwd", "/workspace/passwd")
os.symlink(outside, "/workspace/outdir")
os.symlink("..", "/workspace/up")
os.symlink("/", "/workspace/rootlink")
os.makedirs("/workspace/sub")
os.symlink("/etc", "/workspace/sub/etc")
os.symlink(secret, "/workspace/sub/secret")
os.symlink("../real.txt", "/workspace/sub/inner")
open("/workspace/real.txt", "w").write("real")
result = sorted(os.listdir("/workspace"))
