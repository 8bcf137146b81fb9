
import errno, os, time
pids_max = cgroup("pids/pids.max", "pids.max")
children, err = 0, None
for _ in range(500):
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
    if pid == 0:
        # Every child forks on too, until the limit says no.
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(60)
    children += 1
result = {"children": children, "errno": err, "pids_max": pids_max}
