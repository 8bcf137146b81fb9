
import os, signal, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() > 0:
        os._exit(0)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    os.write(w, str(os.getpid()).encode())
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    beat = 0
    while True:
        beat += 1
        with open("/workspace/heartbeat.tmp", "w") as f:
            f.write(str(beat))
        os.rename("/workspace/heartbeat.tmp", "/workspace/heartbeat")
        time.sleep(0.05)
os.close(w)
daemon = int(os.read(r, 32))
os.waitpid(pid, 0)
while not os.path.exists("/workspace/heartbeat"):
    time.sleep(0.05)
result = {"daemon": daemon, "ppid_of_daemon": int(open(f"/proc/{daemon}/stat").read().split()[3])}
