"""Sessions through the official MCP Python SDK, over stdio, on a legacy session and on a
2026-07-28 one: a session call links its `session://` resource, which `resources/list` lists
and `resources/read` shows as JSON (variables with type, size, shape and a tokenized preview,
revisions, no container started); `HANDLE@N` runs on an earlier revision and `fork` branches
a session without touching its source.

    python tests/python/sessions_client.py BINARY DATA_DIR

Used by tests/sessions.rs.
"""

import asyncio
import json
import sys

from mcp import StdioServerParameters

from original_examples import ERAS, check, client_for, payload, server_env


async def run(client, label, args):
    r = await client.call_tool("execute_code", args)
    p = payload(r)
    check(not r.is_error and p.get("success"), f"{label}: {args} -> {p}")
    return r, p


async def sessions(client, label):
    r, p = await run(client, label, {
        "code": "rows = [{'email': 'ann@example.com', 'n': i} for i in range(50)]\nkind = 'list'",
        "session": "new"})
    handle, rev = p["session"], p["state"]["revision"]
    check(rev == 1, f"{label}: first revision {p['state']}")
    links = [c for c in r.content if getattr(c, "type", None) == "resource_link"]
    check(any(str(c.uri) == f"session://{handle}" for c in links), f"{label}: links {links}")
    listed = [str(res.uri) for res in (await client.list_resources()).resources]
    check(f"session://{handle}" in listed, f"{label}: listed {listed}")
    read = await client.read_resource(f"session://{handle}")
    view = json.loads(read.contents[0].text)
    rows = {v["name"]: v for v in view["variables"]}["rows"]
    check(rows["type"] == "list" and rows["len"] == 50 and rows["bytes"] > 0, f"{label}: {rows}")
    check("ann@example.com" not in read.contents[0].text, f"{label}: the preview is tokenized")
    check([x["revision"] for x in view["revisions"]] == [1], f"{label}: {view['revisions']}")
    await run(client, label, {"code": "rows = None", "session": handle})
    _, p = await run(client, label, {"code": "result = len(rows)", "session": f"{handle}@1"})
    check(p["result"] == 50 and p["state"]["revision"] == 3, f"{label}: rewind {p}")
    _, p = await run(client, label, {"code": "kind = 'fork'", "session": handle, "fork": True})
    check(p["session"] != handle and p["state"]["forked_from"] == f"{handle}@3", f"{label}: {p}")
    _, p = await run(client, label, {"code": "result = kind", "session": handle})
    check(p["result"] == "list", f"{label}: the source is unchanged: {p}")
    r = await client.call_tool("execute_code", {"code": "pass", "session": f"{handle}@99"})
    text = " ".join(c.text for c in r.content if getattr(c, "text", None))
    check(r.is_error and "has no revision 99" in text, f"{label}: {text}")
    print(f"{label}: sessions ok", flush=True)


async def main(binary, data_dir):
    for mode in ERAS:
        label = f"stdio {mode}"
        params = StdioServerParameters(command=binary, env=server_env(),
                                       args=["serve", "--workspace", f"{data_dir}/ws-{mode}"])
        async with client_for(params, mode, label) as client:
            await sessions(client, label)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
