"""The workspace as MCP resources, and images back, with the official MCP Python SDK against the
real binary over stdio and streamable HTTP, each on a legacy session and on a 2026-07-28 one: code
makes a CSV, a chart and a resource link; the client lists and reads them as resources (text and
blob), gets the chart as image content, sees traversal and symlink URIs refused like the workspace
tools refuse them, and, on the legacy session, is told of new files and of changes to a file it
subscribed to.

    python tests/python/workspace_resources.py BINARY DATA_DIR

Exits non-zero with a message on the first mismatch. Used by tests/data_workbench.rs.
"""

import asyncio
import base64
import os
import sys

from mcp import StdioServerParameters
from mcp.shared.exceptions import MCPError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, client_for, http_server, payload, server_env  # noqa: E402

MAKE_FILES = '''
import pandas as pd
import matplotlib.pyplot as plt
df = pd.DataFrame({"month": range(1, 13), "sales": [m * m for m in range(1, 13)]})
df.to_csv("out/sales.csv", index=False)
df.plot(x="month", y="sales")
plt.show()
with open("out/raw.bin", "wb") as f:
    f.write(bytes(range(256)))
uri = resource_link("out/sales.csv", description="monthly sales")
result = {"rows": len(df), "uri": uri}
'''


class Notes:
    """The server notifications the session received."""

    def __init__(self):
        self.seen = []

    async def __call__(self, message):
        if not isinstance(message, Exception):
            self.seen.append(message)

    def updated(self, uri):
        for m in self.seen:
            params = getattr(m, "params", None)
            if "Updated" in type(m).__name__ and getattr(params, "uri", None) == uri:
                return True
        return False

    def list_changed(self):
        return any("ListChanged" in type(m).__name__ for m in self.seen)


async def resources(client, notes: Notes, label: str, legacy: bool):
    r = await client.call_tool("write_workspace_file", {"filename": "out/.keep", "content": ""})
    check(not r.is_error, f"{label}: write failed: {r}")

    r = await client.call_tool("execute_code", {"code": MAKE_FILES, "timeout_seconds": 120})
    p = payload(r)
    check(not r.is_error and p["success"], f"{label}: execute_code failed: {p}")
    check(p["result"] == {"rows": 12, "uri": "workspace:///out/sales.csv"}, f"{label}: {p['result']}")
    kinds = [type(c).__name__ for c in r.content]
    images = [c for c in r.content if type(c).__name__ == "ImageContent"]
    links = [c for c in r.content if type(c).__name__ == "ResourceLink"]
    check(len(images) == 1 and images[0].mime_type == "image/png", f"{label}: content {kinds}")
    png = base64.b64decode(images[0].data)
    check(png.startswith(b"\x89PNG\r\n\x1a\n"), f"{label}: not a PNG")
    check(p["images"][0]["source"] == "figure 1", f"{label}: images {p['images']}")
    check(len(links) == 1 and str(links[0].uri) == "workspace:///out/sales.csv", f"{label}: links {links}")
    changed = {f["path"]: f for f in p["files"]}
    check(changed["out/sales.csv"]["change"] == "created", f"{label}: files {p['files']}")
    check(changed["out/sales.csv"]["mime_type"] == "text/csv", f"{label}: files {p['files']}")
    check(changed["out/raw.bin"]["size"] == 256, f"{label}: files {p['files']}")
    if legacy:
        check(notes.list_changed(), f"{label}: no list_changed notification after new files")

    # Relisted after a change: a 2026-07-28 client would otherwise answer from its cache.
    listed = await client.list_resources(cache_mode="refresh")
    uris = {str(x.uri) for x in listed.resources}
    check({"workspace:///out/sales.csv", "workspace:///out/raw.bin"} <= uris, f"{label}: listed {uris}")
    templates = await client.list_resource_templates()
    check(templates.resource_templates[0].uri_template == "workspace:///{+path}",
          f"{label}: templates {templates}")

    text = (await client.read_resource("workspace:///out/sales.csv", cache_mode="refresh")).contents[0]
    check(text.text.startswith("month,sales\n1,1\n") and text.mime_type == "text/csv",
          f"{label}: read {text}")
    blob = (await client.read_resource("workspace:///out/raw.bin", cache_mode="refresh")).contents[0]
    check(base64.b64decode(blob.blob) == bytes(range(256)), f"{label}: blob {blob}")

    if legacy:
        # Subscribed: a change by write_workspace_file is announced. resources/subscribe and the
        # notifications of a session are the legacy era's; a 2026-07-28 client is told through
        # subscriptions/listen instead, which the tests of listen cover.
        await client.subscribe_resource("workspace:///out/sales.csv")
        r = await client.call_tool("write_workspace_file", {"filename": "out/sales.csv", "content": "x\n"})
        check(not r.is_error, f"{label}: rewrite failed")
        for _ in range(50):
            if notes.updated("workspace:///out/sales.csv"):
                break
            await asyncio.sleep(0.1)
        check(notes.updated("workspace:///out/sales.csv"), f"{label}: no resources/updated notification")

    # Traversal and symlinks through URIs fail like through the workspace tools.
    r = await client.call_tool("execute_code", {"code": "import os\nos.symlink('/etc/passwd', 'passwd-link')\nos.symlink('/', 'root-link')"})
    check(not r.is_error, f"{label}: symlink code failed: {payload(r)}")
    # Each refusal is the MCP error the server means: -32602 (invalid params) for a URI that
    # names no workspace path, "resource not found" with the workspace tools' words for a path the
    # workspace refuses (-32002 on a legacy session; 2026-07-28 made it -32602, and rmcp sends
    # that); a panic or an internal error (-32603) fails here.
    not_found = -32002 if legacy else -32602
    for uri, code, words in [
        ("workspace:///../etc/passwd", not_found, "leaves the workspace"),
        ("workspace:///%2E%2E/%2E%2E/etc/passwd", not_found, "leaves the workspace"),
        ("workspace:///passwd-link", not_found, "is a symlink"),
        ("workspace:///root-link/etc/passwd", not_found, "symlink"),
        ("workspace:///out%2F..%2F..%2Fetc%2Fpasswd", -32602, "encoded '/'"),
        ("file:///etc/passwd", -32602, "is not a workspace resource"),
        ("workspace:///out/missing.csv", not_found, "file not found"),
    ]:
        try:
            got = await client.read_resource(uri, cache_mode="refresh")
        except MCPError as e:
            check(e.code == code and words in e.message and "root:" not in e.message,
                  f"{label}: {uri} refused with {e.code} {e.message!r}; expected {code} saying {words!r}")
            continue
        raise AssertionError(f"{label}: {uri} was read: {got}")
    r = await client.call_tool("read_workspace_file", {"filename": "passwd-link"})
    check(r.is_error, f"{label}: the tool read a symlink")
    print(f"{label}: workspace resources ok")


async def main(binary, data_dir):
    common = ["--workspace-quota-mb", "0", "--skills-dir", f"{data_dir}/skills", "--preload", "none"]
    for mode in ERAS:
        legacy = mode == "legacy"
        label = f"stdio {mode}"
        notes = Notes()
        params = StdioServerParameters(command=binary, env=server_env(),
                                       args=["serve", "--workspace", f"{data_dir}/ws-stdio-{mode}", *common])
        async with client_for(params, mode, label, message_handler=notes) as client:
            await resources(client, notes, label, legacy)

        label = f"http {mode}"
        notes = Notes()
        with http_server(binary, ["--workspace", f"{data_dir}/ws-http-{mode}", *common]) as url:
            async with client_for(url, mode, label, message_handler=notes) as client:
                await resources(client, notes, label, legacy)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
