
import errno
try:
    with open("/workspace/big.bin", "wb") as f:
        for _ in range(40):
            f.write(b"\1" * (1 << 20))
            f.flush()
    result = "wrote 40 MiB"
except OSError as e:
    result = errno.errorcode[e.errno]
