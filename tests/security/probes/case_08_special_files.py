
import os, socket
os.mkfifo("/workspace/fifo")
s = socket.socket(socket.AF_UNIX)
s.bind("/workspace/sock")
s.close()
with open("/workspace/sparse.bin", "wb") as f:
    f.truncate(1 << 40)
open("/workspace/ok.txt", "w").write("ok")
result = sorted(os.listdir("/workspace"))
