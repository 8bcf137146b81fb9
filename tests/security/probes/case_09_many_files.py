
import os
for d in range(10):
    os.makedirs(f"/workspace/many/d{d}")
flags = os.O_CREAT | os.O_WRONLY
for i in range(100_000):
    os.close(os.open(f"/workspace/many/d{i % 10}/f{i}", flags, 0o644))
os.makedirs("/workspace/odd")
for name in (b"new\nline.txt", b"bad\xff\xfe.txt", b"tab\there.txt", b"back\\slash.txt", b"esc\x1b[31m.txt", b"ok.txt"):
    os.close(os.open(b"/workspace/odd/" + name, flags, 0o644))
result = sum(len(os.listdir(f"/workspace/many/d{d}")) for d in range(10))
