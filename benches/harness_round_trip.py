#!/usr/bin/env python3
"""Container round trips through the engine's attach stream, the part of a pooled call that
happens inside the container: compares harness versions side by side in one run.

    python3 benches/harness_round_trip.py IMAGE A.py [B.py ...] [--n 10]

For each harness file, N containers of IMAGE (network none) run it bind-mounted; half a second
after the start (the container is idle, as a pooled one is) a `print(1)` job frame is written and
the time to the first frame and to `done` is taken. First, a line echoed by a Python loop in one
container measures the engine's attach relay alone. Needs Debian's python3-docker. Versions are
interleaved, so machine noise hits them alike; compare within a run.
"""
import argparse, json, os, statistics, struct, time

import docker

ECHO = "import sys\nfor l in sys.stdin:\n    sys.stdout.write(l); sys.stdout.flush()"
JOB = (json.dumps({"type": "job", "code": "print(1)", "context_vars": None,
                   "limits": {"max_output_bytes": 100000, "max_result_bytes": 100000}})
       + "\n").encode()


def lines(sock):
    """Lines of the container's stdout from the engine's multiplexed attach stream."""
    buf = b""

    def exact(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise EOFError("the attach stream ended")
            data += chunk
        return data

    while True:
        while b"\n" not in buf:
            header = exact(8)
            body = exact(struct.unpack(">I", header[4:])[0])
            if header[0] == 1:  # stdout
                buf += body
        line, _, buf = buf.partition(b"\n")
        yield line


def attached(client, image, command, mounts):
    container = client.containers.create(image, command, entrypoint=[], stdin_open=True,
                                         network_disabled=True, volumes=mounts)
    sock = container.attach_socket(params={"stdin": 1, "stdout": 1, "stream": 1})._sock
    container.start()
    return container, sock, lines(sock)


def main():
    args = argparse.ArgumentParser()
    args.add_argument("image")
    args.add_argument("harness", nargs="+")
    args.add_argument("--n", type=int, default=10)
    args = args.parse_args()
    client = docker.from_env()

    container, sock, out = attached(client, args.image, ["python3", "-I", "-c", ECHO], {})
    try:
        time.sleep(0.5)
        echo = []
        for _ in range(200):
            t = time.perf_counter()
            sock.sendall(b"x\n")
            next(out)
            echo.append((time.perf_counter() - t) * 1e3)
    finally:
        container.remove(force=True)
    print(f"attach relay, a line echoed: p50 {statistics.median(echo):.3f} ms (200 lines)")

    results = {h: [] for h in args.harness}
    for _ in range(args.n):
        for harness in args.harness:
            mounts = {os.path.abspath(harness): {"bind": "/probe/harness.py", "mode": "ro"}}
            container, sock, out = attached(client, args.image,
                                            ["python3", "-I", "/probe/harness.py"], mounts)
            try:
                time.sleep(0.5)
                t = time.perf_counter()
                sock.sendall(JOB)
                next(out)
                first = time.perf_counter()
                while b'"done"' not in next(out):
                    pass
                done = time.perf_counter()
            finally:
                container.remove(force=True)
            results[harness].append(((first - t) * 1e3, (done - t) * 1e3))
    for harness, r in results.items():
        first = statistics.median(x[0] for x in r)
        done = statistics.median(x[1] for x in r)
        print(f"{harness}: job -> first frame p50 {first:.2f} ms, -> done p50 {done:.2f} ms "
              f"({args.n} containers)")


if __name__ == "__main__":
    main()
