"""The first start answers at once, with the official MCP Python SDK against the real binary over
stdio, on a legacy session (`initialize`) and on a 2026-07-28 one (`server/discover`): each server
starts on a data directory of its own, so it copies the image's /usr anew (`--image-tree host`)
after probing the engine's limits, seconds of work. The handshake is answered before that work is
done: `get_execution_stats`, asked right after it, still reports the start's step and about how
long is left; `tools/list` already names every tool; then `execute_code` waits for the start and
runs.

    python tests/python/first_answer.py BINARY DATA_DIR

Prints each era's time to the handshake's answer. Exits non-zero with a message on the first
mismatch. Used by tests/python_client.rs.
"""

import asyncio
import os
import sys
import time

from mcp import StdioServerParameters

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, client_for, payload, server_env  # noqa: E402

TOOLS = {"execute_code", "search_tools", "get_tool_definition", "list_tool_categories",
         "save_skill", "load_skill", "list_skills", "sanitize_pii", "restore_pii",
         "write_workspace_file", "read_workspace_file", "list_workspace_files",
         "get_execution_stats"}
# What a 2026-07-28 client gives `server/discover`; an answer past it is a failed connection.
DISCOVER_LIMIT = 10.0


async def first_answer(binary, data_dir, mode):
    label = f"stdio {mode}"
    env = server_env()
    # A data directory of its own, and no shared copy of the image's /usr: a first start.
    env.pop("CEM_IMAGE_TREE_DIR", None)
    env["CEM_DATA_DIR"] = f"{data_dir}/fresh-{mode}"
    params = StdioServerParameters(command=binary, env=env,
                                   args=["serve", "--image-tree", "host", "--pool-size", "0"])
    began = time.monotonic()
    async with client_for(params, mode, label) as client:
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
    for mode in ERAS:
        await first_answer(binary, data_dir, mode)


if __name__ == "__main__":
    asyncio.run(main())
