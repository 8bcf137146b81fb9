
import os, socket, time
open(f"/tmp/{canary}", "w").write("secret")
open(f"/dev/shm/{canary}", "w").write("secret")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + canary)
s.listen()
open("/workspace/ready", "w").write("1")
end = time.monotonic() + 90
while not os.path.exists("/workspace/go") and time.monotonic() < end:
    time.sleep(0.05)
result = {"tmp": os.path.exists(f"/tmp/{canary}"), "shm": os.path.exists(f"/dev/shm/{canary}")}
