"""The first start answers at once, with the official MCP Python SDK against the real binary, on
a legacy session (`initialize`) and on a 2026-07-28 one (`server/discover`): each server starts
on a data directory of its own, so it copies the image's /usr anew (`--image-tree host`) after
probing the engine's limits, seconds of work. The handshake is answered before that work is
done: `get_execution_stats`, asked right after it, still reports the start's step and about how
long is left; `tools/list` already names every tool; then `execute_code` waits for the start and
runs.

Over stdio by default; with FIRST_ANSWER_OVER=http over streamable HTTP, where the server
listens from the start: `/health` answers 503 with the step until it has started, then 200; and
with a bearer token (a tenant's first request during the start, its handshake at once), where a
request without a token is refused 401 at once.

    python tests/python/first_answer.py BINARY DATA_DIR

Prints each era's time to the handshake's answer. Exits non-zero with a message on the first
mismatch. Used by tests/python_client.rs.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from mcp import StdioServerParameters

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, client_for, free_port, payload, server_env  # noqa: E402
from tenants_over_http import session_for  # noqa: E402

TOOLS = {"execute_code", "search_tools", "get_tool_definition", "list_tool_categories",
         "save_skill", "load_skill", "list_skills", "sanitize_pii", "restore_pii",
         "write_workspace_file", "read_workspace_file", "list_workspace_files",
         "get_execution_stats"}
# What a 2026-07-28 client gives `server/discover`; an answer past it is a failed connection.
DISCOVER_LIMIT = 10.0


# A tenant's token (the server wants at least 32 characters).
TOKEN = "alice-" + "0123456789abcdef" * 3
# The arguments of a first start: no pool, the image's /usr copied anew; no quota (as root the
# quota is a loop mount, which would outlive the test's directory).
FIRST_START = ["--image-tree", "host", "--pool-size", "0", "--workspace-quota-mb", "0"]


async def first_answer(binary, data_dir, mode):
    label = f"stdio {mode}"
    env = fresh_env(server_env(), f"{data_dir}/fresh-{mode}")
    params = StdioServerParameters(command=binary, env=env, args=["serve", *FIRST_START])
    began = time.monotonic()
    async with client_for(params, mode, label, started=False) as client:
        await answered_while_starting(client, label, began)


def fresh_env(env, data):
    """`env` for a first start on the data directory `data`: no shared copy of the image's /usr."""
    env = dict(env)
    env.pop("CEM_IMAGE_TREE_DIR", None)
    env["CEM_DATA_DIR"] = data
    return env


def health(base):
    """`GET /health`: its status code and its JSON body."""
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def unauthenticated(base):
    """A POST to /mcp without a token: its status code, and how long it took."""
    request = urllib.request.Request(f"{base}/mcp", method="POST", data=b"{}",
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json, text/event-stream"})
    began = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, time.monotonic() - began
    except urllib.error.HTTPError as e:
        return e.code, time.monotonic() - began


def listening(port, began, label):
    """Waits (20 ms apart, 10 s at most) for the server to accept connections."""
    while time.monotonic() - began < DISCOVER_LIMIT:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return time.monotonic() - began
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"{label}: not listening after {DISCOVER_LIMIT} s")


async def first_answer_http(binary, data_dir, mode, tenant):
    label = f"http {mode}" + (" tenant" if tenant else "")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [binary, "serve", "--transport", "http", "--listen", f"127.0.0.1:{port}", *FIRST_START]
    if tenant:
        args += ["--tokens", f"alice:{TOKEN}"]
    env = fresh_env(os.environ, f"{data_dir}/fresh-http-{mode}{'-tenant' if tenant else ''}")
    began = time.monotonic()
    server = subprocess.Popen(args, env=env)
    try:
        print(f"{label}: listening after {listening(port, began, label):.2f} s")
        status, body = health(base)
        check(status == 503 and body["status"] == "starting" and body["step"]
              and body["about_seconds_left"] > 0, f"{label}: /health while starting: {status} {body}")
        if tenant:
            status, took = unauthenticated(base)
            check(status == 401, f"{label}: a request without a token was answered {status}")
            print(f"{label}: refused without a token (401) in {took:.2f} s")
            session = session_for(f"{base}/mcp", TOKEN, mode, label, started=False)
        else:
            session = client_for(f"{base}/mcp", mode, label, started=False)
        async with session as client:
            await answered_while_starting(client, label, began)
        status, body = health(base)
        check(status == 200 and body["status"] == "ok", f"{label}: /health once started: {status} {body}")
    finally:
        server.terminate()
        code = server.wait(timeout=60)
    check(code == 0, f"{label}: the server exited with {code} on SIGTERM")


async def answered_while_starting(client, label, began):
    """The session of a server that answered its handshake `began` ago: still starting, its tools
    listed, then code run once it has started."""
    answered = time.monotonic() - began
    print(f"{label}: handshake answered in {answered:.2f} s")
    check(answered < DISCOVER_LIMIT, f"{label}: the handshake took {answered:.1f} s")
    r = await client.call_tool("get_execution_stats", {})
    p = payload(r)
    check(r.is_error and p.get("starting"),
          f"{label}: the start had ended when the handshake was answered: {p}")
    starting = p["starting"]
    check(isinstance(starting["step"], str) and starting["about_seconds_left"] > 0,
          f"{label}: no step or time left: {starting}")
    check("still starting" in p["error"], f"{label}: {p['error']}")
    print(f"{label}: then starting: {starting['step']}, about {starting['about_seconds_left']} s left")
    tools = {t.name for t in (await client.list_tools()).tools}
    check(TOOLS <= tools, f"{label}: tools/list while starting lacks {TOOLS - tools}")
    r = await client.call_tool("execute_code", {"code": "print(6 * 7)", "timeout_seconds": 120})
    check(not r.is_error and payload(r)["output"] == ["42"], f"{label}: execute_code: {payload(r)}")
    r = await client.call_tool("get_execution_stats", {})
    check(not r.is_error and "executions" in payload(r), f"{label}: stats once started: {payload(r)}")


async def main():
    binary, data_dir = sys.argv[1], sys.argv[2]
    over = os.environ.get("FIRST_ANSWER_OVER", "stdio")
    for mode in ERAS:
        if over == "http":
            await first_answer_http(binary, data_dir, mode, tenant=False)
            await first_answer_http(binary, data_dir, mode, tenant=True)
        else:
            await first_answer(binary, data_dir, mode)


if __name__ == "__main__":
    asyncio.run(main())
