
import errno, os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
fds, err = [], None
while len(fds) < 100_000:
    try:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = errno.errorcode[e.errno]
        break
opened = len(fds)
for fd in fds:
    os.close(fd)
try:
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard * 2, hard * 2))
    raised = "raised"
except (ValueError, OSError) as e:
    raised = type(e).__name__
result = {"soft": soft, "hard": hard, "opened": opened, "errno": err, "raise": raised,
          "nproc": resource.getrlimit(resource.RLIMIT_NPROC)}
