"""Latency of execute_code("print(1)") through the official MCP client over stdio, with the pool
of pre-started single-use containers and without it (cold path), beside `docker run --rm` of the
same image with the same isolation flags, measured in one run.

    python tests/python/latency.py BINARY [N]

Prints a table; figures on a shared 2-core machine are noisy: compare ratios, not absolutes.
"""

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def pct(samples, p):
    s = sorted(samples)
    return s[max(0, min(len(s) - 1, round(p * len(s) + 0.5) - 1))]


async def mcp_samples(binary, n, data_dir, pool_size):
    params = StdioServerParameters(command=binary, args=[
        "serve", "--workspace", f"{data_dir}/ws", "--skills-dir", f"{data_dir}/skills",
        "--workspace-quota-mb", "0", "--pool-size", str(pool_size)])
    out = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await asyncio.sleep(2)  # let the pool fill, as it does after start-up
            for i in range(n + 2):
                t = time.perf_counter()
                r = await session.call_tool("execute_code", {"code": "print(1)"})
                dt = (time.perf_counter() - t) * 1000
                assert r.structured_content["output"] == ["1"], r
                if i >= 2:  # warm-up
                    out.append(dt)
    return out


def docker_run_samples(image, n, data_dir):
    seccomp = os.path.join(os.path.dirname(__file__), "../../images/python/seccomp.json")
    ws = f"{data_dir}/ws"
    cmd = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only",
           "--tmpfs", "/tmp:rw,nosuid,nodev,noexec,size=64m", "--init", "--user", "10001:10001",
           "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
           "--security-opt", f"seccomp={seccomp}", "--memory", "500m", "--memory-swap", "500m",
           "--pids-limit", "128", "--log-driver", "none", "-v", f"{ws}:/workspace",
           image, "python3", "-c", "print(1)"]
    out = []
    for i in range(n + 2):
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        dt = (time.perf_counter() - t) * 1000
        assert r.stdout.strip() == "1", r.stderr
        if i >= 2:
            out.append(dt)
    return out


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    image = subprocess.run([binary, "image", "tag"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(f"{d}/ws")
        os.chmod(f"{d}/ws", 0o777)
        runs = {
            "docker run --rm (same flags)": docker_run_samples(image, n, d),
            "execute_code, cold (pool 0)": asyncio.run(mcp_samples(binary, n, d, 0)),
            "execute_code, pooled (pool 2)": asyncio.run(mcp_samples(binary, n, d, 2)),
        }
    base = statistics.median(runs["docker run --rm (same flags)"])
    print(f"{'path':32} {'n':>4} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} {'p50 vs docker run':>18}")
    for name, s in runs.items():
        print(f"{name:32} {len(s):>4} {statistics.median(s):8.1f} {pct(s, 0.9):8.1f} {max(s):8.1f} "
              f"{statistics.median(s) / base:17.2f}x")


if __name__ == "__main__":
    main()
