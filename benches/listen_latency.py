#!/usr/bin/env python3
"""How soon a `subscriptions/listen` stream hears of a write (MCP 2026-07-28), through the
official MCP Python SDK's `Client` against the real binary.

    $CEM_TEST_PYTHON benches/listen_latency.py BINARY [--n 50]

For each transport (streamable HTTP with a bearer token; stdio), a listen stream subscribes to N
files, then each file is written once with write_workspace_file, one after the other. For each
write it takes the time from the moment write_workspace_file's answer is back to the moment the
stream's `ResourceUpdated` event for that file reaches the listener (negative when the event
came first: the server publishes the change before it answers), and from the moment the call
was sent. Prints p50, p90, min and max over the N writes, after 5 writes not counted. Needs the
sandbox image (the server starts a pool) and `mcp` (the SDK) in the interpreter.
"""

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourceUpdated

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from original_examples import http_server  # noqa: E402

TOKEN = "bench-0123456789abcdef0123456789abcdef"
WARMUP = 5
# The host copy of the image's /usr is kept where a server on the default data directory keeps
# it, not made again in each temp data directory (which delays the server's first answer).
os.environ.setdefault("CEM_IMAGE_TREE_DIR", os.path.join(
    os.environ.get("XDG_DATA_HOME", os.path.expanduser("~/.local/share")), "code-execution-mcp", "image-trees"))


async def measure(client, n):
    names = [f"lat-{i}.txt" for i in range(WARMUP + n)]
    uris = [f"workspace:///{name}" for name in names]
    arrived = {}

    async with client.listen(resource_subscriptions=uris) as sub, anyio.create_task_group() as tg:

        async def gather():
            async for event in sub:
                if isinstance(event, ResourceUpdated):
                    arrived.setdefault(event.uri, time.perf_counter())

        tg.start_soon(gather)
        after_answer, after_send = [], []
        for i, (name, uri) in enumerate(zip(names, uris)):
            sent = time.perf_counter()
            r = await client.call_tool("write_workspace_file", {"filename": name, "content": str(i)})
            back = time.perf_counter()
            if r.is_error:
                raise SystemExit(f"write_workspace_file failed: {r.content}")
            with anyio.fail_after(60):
                while uri not in arrived:
                    await anyio.sleep(0.0005)
            if i >= WARMUP:
                after_answer.append((arrived[uri] - back) * 1000)
                after_send.append((arrived[uri] - sent) * 1000)
        tg.cancel_scope.cancel()
    return after_answer, after_send


def report(label, after_answer, after_send):
    def row(what, xs):
        xs = sorted(xs)
        p90 = xs[min(len(xs) - 1, int(len(xs) * 0.9))]
        print(f"  {what:<40} p50 {statistics.median(xs):7.2f}  p90 {p90:7.2f}  "
              f"min {xs[0]:7.2f}  max {xs[-1]:7.2f} ms")

    print(f"{label} ({len(after_answer)} writes):")
    row("event after write_workspace_file's answer", after_answer)
    row("event after the call was sent", after_send)


async def main(binary, n):
    with tempfile.TemporaryDirectory() as data:
        common = ["--workspace-quota-mb", "0", "--pool-size", "1", "--pool-max", "1", "--preload", "none"]
        with http_server(binary, ["--data-dir", f"{data}/http", "--tokens", f"bench:{TOKEN}", *common]) as url:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as http:
                async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28") as client:
                    report("streamable HTTP, bearer token, 2026-07-28", *await measure(client, n))
        env = {k: v for k, v in os.environ.items() if k == "CEM_IMAGE_TREE_DIR"}
        params = StdioServerParameters(command=binary, env=env, args=["serve", "--workspace", f"{data}/ws",
                                                                      "--skills-dir", f"{data}/skills", *common])
        async with Client(params, mode="2026-07-28") as client:
            report("stdio, 2026-07-28", *await measure(client, n))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--n", type=int, default=50)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(args.binary, args.n))
