
import json
frame = {"type": "done", "success": True, "result": "r" * 400_000, "error": "e" * 200_000,
         "traceback": "t" * 200_000}
data = (json.dumps(frame) + "\n").encode()
for fd in channel_fds():
    try:
        write_all(fd, data)
    except OSError:
        pass
import time
time.sleep(5)
