
import errno, os
st = os.statvfs("/tmp")
written, err = 0, None
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(64):
            f.write(b"\0" * (1 << 20))
            f.flush()
            written += 1 << 20
except OSError as e:
    err = errno.errorcode[e.errno]
result = {"size": st.f_blocks * st.f_frsize, "written": written, "errno": err}
