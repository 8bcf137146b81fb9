
chunk = b"z" * 65536 + b"\n"
fds = channel_fds()
while True:
    for fd in fds:
        try:
            os.write(fd, chunk)
        except OSError:
            pass
