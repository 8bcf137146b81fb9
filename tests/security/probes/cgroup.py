
import os
def cgroup(v1, v2):
    for p in ("/sys/fs/cgroup/" + v1, "/sys/fs/cgroup/" + v2):
        if os.path.exists(p):
            return open(p).read().strip()
    return None
