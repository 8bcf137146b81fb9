
line = b"\xff" * (100 * 1024 * 1024)
for fd in channel_fds():
    try:
        write_all(fd, line)
    except OSError:
        pass
import time
time.sleep(60)
