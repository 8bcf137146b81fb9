
import os
def channel_fds():
    return [fd for fd in range(3, 64) if os.path.exists(f"/proc/self/fd/{fd}")]
def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
