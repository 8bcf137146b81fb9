"""Two tenants of one server over streamable HTTP, with the official MCP Python SDK: each runs the
original project's README examples at the same time as the other, and neither sees the other's
files or skills. Run again after the server restarted, `after-restart` checks that each tenant's
workspace and skills are still there and still apart. Every phase runs on a legacy session and on
a 2026-07-28 one.

    python tests/python/tenants_over_http.py URL ALICE_TOKEN BOB_TOKEN examples|after-restart

Exits non-zero with a message on the first mismatch. Used by tests/compose.rs.
"""

import asyncio
import contextlib
import os
import sys

import httpx2
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, client_for, original_examples, payload  # noqa: E402


@contextlib.asynccontextmanager
async def session_for(url, token, mode="auto", label="tenant", started=True):
    """A `Client` with the tenant's bearer token, on the era `mode` asks for (once the server
    has started, unless `started` is false)."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as http:
        transport = streamable_http_client(url, http_client=http)
        async with client_for(transport, mode, label, started=started) as client:
            yield client


async def call(session, tool, args):
    r = await session.call_tool(tool, args)
    return r.is_error, payload(r)


async def examples(url, alice, bob):
    async def run(name, token, mode):
        label = f"{name} {mode}"
        async with session_for(url, token, mode, label) as s:
            await original_examples(s, label)
            # Something of this tenant's own, for the other to look for.
            _, p = await call(s, "write_workspace_file", {"filename": f"{name}-only.txt", "content": f"{name}'s"})
            check(p["success"], f"{label}: write: {p}")
            _, p = await call(s, "save_skill", {"name": f"{name}_only", "code": f"def {name}_only(): return '{name}'",
                                                "description": f"{name}'s own skill"})
            check(p["success"], f"{label}: save_skill: {p}")

    for mode in ERAS:
        await asyncio.gather(run("alice", alice, mode), run("bob", bob, mode))
        await apart(url, alice, bob, mode)


async def apart(url, alice, bob, mode):
    """Each tenant sees its own file and skill, and not the other's."""
    for me, other, token in [("alice", "bob", alice), ("bob", "alice", bob)]:
        async with session_for(url, token, mode, f"{me} {mode}") as s:
            _, p = await call(s, "list_workspace_files", {})
            check(f"{me}-only.txt" in p["files"] and f"{other}-only.txt" not in p["files"], f"{me}: files {p}")
            err, p = await call(s, "read_workspace_file", {"filename": f"{other}-only.txt"})
            check(err, f"{me} read {other}'s file: {p}")
            err, p = await call(s, "read_workspace_file", {"filename": f"../../{other}/workspace/{other}-only.txt"})
            check(err, f"{me} read {other}'s file by a relative path: {p}")
            _, p = await call(s, "list_skills", {})
            names = [k["name"] for k in p["skills"]]
            check(f"{me}_only" in names and f"{other}_only" not in names, f"{me}: skills {names}")
            code = "\n".join([
                "import os",
                "result = {'files': sorted(os.listdir('/workspace')),",
                f"          'mounts': '{other}' in open('/proc/self/mountinfo').read()}}",
            ])
            _, p = await call(s, "execute_code", {"code": code})
            check(p["success"] and f"{other}-only.txt" not in p["result"]["files"]
                  and f"{me}-only.txt" in p["result"]["files"] and not p["result"]["mounts"], f"{me}: sandbox {p}")


async def after_restart(url, alice, bob):
    for mode in ERAS:
        await apart(url, alice, bob, mode)
        async with session_for(url, alice, mode, f"alice {mode}") as s:
            _, p = await call(s, "read_workspace_file", {"filename": "report.txt"})
            check(p.get("content") == "active=7500", f"alice {mode}: report.txt after the restart: {p}")
            _, p = await call(s, "execute_code", {
                "code": "from skills import count_by\nresult = count_by([{'a': 1}, {'a': 2}], 'a')"})
            check(p["success"] and p["result"] == 2, f"alice {mode}: a skill saved before the restart: {p}")
    print("after-restart: workspaces and skills survived, still apart")


if __name__ == "__main__":
    url, alice, bob, phase = sys.argv[1:5]
    asyncio.run({"examples": examples, "after-restart": after_restart}[phase](url, alice, bob))
    print(f"{phase}: ok")
