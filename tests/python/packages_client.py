"""Packages on demand through the official MCP Python SDK, over stdio, on a legacy session and
on a 2026-07-28 one: `execute_code`'s schema offers `packages`, a call with them answers with
what was installed (the second era's from the cache the first filled), and a package the index
does not have is a tool error that names it.

    python tests/python/packages_client.py BINARY DATA_DIR

Used by tests/packages.rs.
"""

import asyncio
import sys

from mcp import StdioServerParameters

from original_examples import ERAS, check, client_for, payload, server_env


async def packages(client, label, cached):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    schema = tools["execute_code"].input_schema["properties"]["packages"]
    check("array" in str(schema), f"{label}: packages' schema: {schema}")
    r = await client.call_tool("execute_code", {
        "code": "import humanize\nresult = humanize.intcomma(1234567)",
        "packages": ["humanize==4.12.3"]})
    p = payload(r)
    check(not r.is_error and p["result"] == "1,234,567", f"{label}: {p}")
    installed = {i["name"]: i["version"] for i in p["packages"]["installed"]}
    check(installed.get("humanize") == "4.12.3", f"{label}: installed {installed}")
    check(p["packages"]["from_cache"] is cached, f"{label}: from_cache {p['packages']}")
    r = await client.call_tool("execute_code", {"code": "result = 1", "packages": ["no-such-package-cem-zz"]})
    text = " ".join(c.text for c in r.content if getattr(c, "text", None))
    check(r.is_error and "no-such-package-cem-zz" in text and "did not run" in text, f"{label}: {text}")
    print(f"{label}: packages ok", flush=True)


async def main(binary, data_dir):
    for i, mode in enumerate(ERAS):
        label = f"stdio {mode}"
        params = StdioServerParameters(command=binary, env=server_env(),
                                       args=["serve", "--workspace", f"{data_dir}/ws-{mode}"])
        async with client_for(params, mode, label) as client:
            await packages(client, label, cached=i > 0)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
