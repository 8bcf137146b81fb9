"""The workspace as MCP resources, and images back, with the official MCP Python SDK against the
real binary over stdio and streamable HTTP: code makes a CSV, a chart and a resource link; the
client lists and reads them as resources (text and blob), gets the chart as image content, is
told of changes to a file it subscribed to, and sees traversal and symlink URIs refused like the
workspace tools refuse them.

    python tests/python/workspace_resources.py BINARY DATA_DIR

Exits non-zero with a message on the first mismatch. Used by tests/data_workbench.rs.
"""

import asyncio
import base64
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import check, http_server, payload  # noqa: E402

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


async def resources(session: ClientSession, notes: Notes, label: str):
    await session.initialize()
    r = await session.call_tool("write_workspace_file", {"filename": "out/.keep", "content": ""})
    check(not r.is_error, f"{label}: write failed: {r}")

    r = await session.call_tool("execute_code", {"code": MAKE_FILES, "timeout_seconds": 120})
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
    check(notes.list_changed(), f"{label}: no list_changed notification after new files")

    listed = await session.list_resources()
    uris = {str(x.uri) for x in listed.resources}
    check({"workspace:///out/sales.csv", "workspace:///out/raw.bin"} <= uris, f"{label}: listed {uris}")
    templates = await session.list_resource_templates()
    check(templates.resource_templates[0].uri_template == "workspace:///{+path}",
          f"{label}: templates {templates}")

    text = (await session.read_resource("workspace:///out/sales.csv")).contents[0]
    check(text.text.startswith("month,sales\n1,1\n") and text.mime_type == "text/csv",
          f"{label}: read {text}")
    blob = (await session.read_resource("workspace:///out/raw.bin")).contents[0]
    check(base64.b64decode(blob.blob) == bytes(range(256)), f"{label}: blob {blob}")

    # Subscribed: a change by write_workspace_file is announced.
    await session.subscribe_resource("workspace:///out/sales.csv")
    r = await session.call_tool("write_workspace_file", {"filename": "out/sales.csv", "content": "x\n"})
    check(not r.is_error, f"{label}: rewrite failed")
    for _ in range(50):
        if notes.updated("workspace:///out/sales.csv"):
            break
        await asyncio.sleep(0.1)
    check(notes.updated("workspace:///out/sales.csv"), f"{label}: no resources/updated notification")

    # Traversal and symlinks through URIs fail like through the workspace tools.
    r = await session.call_tool("execute_code", {"code": "import os\nos.symlink('/etc/passwd', 'passwd-link')\nos.symlink('/', 'root-link')"})
    check(not r.is_error, f"{label}: symlink code failed: {payload(r)}")
    # Each refusal is the MCP error the server means: -32602 (invalid params) for a URI that
    # names no workspace path, -32002 (resource not found) with the workspace tools' words for a
    # path the workspace refuses; a panic or an internal error (-32603) fails here.
    for uri, code, words in [
        ("workspace:///../etc/passwd", -32002, "leaves the workspace"),
        ("workspace:///%2E%2E/%2E%2E/etc/passwd", -32002, "leaves the workspace"),
        ("workspace:///passwd-link", -32002, "is a symlink"),
        ("workspace:///root-link/etc/passwd", -32002, "symlink"),
        ("workspace:///out%2F..%2F..%2Fetc%2Fpasswd", -32602, "encoded '/'"),
        ("file:///etc/passwd", -32602, "is not a workspace resource"),
        ("workspace:///out/missing.csv", -32002, "file not found"),
    ]:
        try:
            got = await session.read_resource(uri)
        except MCPError as e:
            check(e.code == code and words in e.message and "root:" not in e.message,
                  f"{label}: {uri} refused with {e.code} {e.message!r}; expected {code} saying {words!r}")
            continue
        raise AssertionError(f"{label}: {uri} was read: {got}")
    r = await session.call_tool("read_workspace_file", {"filename": "passwd-link"})
    check(r.is_error, f"{label}: the tool read a symlink")


async def main(binary, data_dir):
    common = ["--workspace-quota-mb", "0", "--skills-dir", f"{data_dir}/skills", "--preload", "none"]
    notes = Notes()
    params = StdioServerParameters(command=binary,
                                   args=["serve", "--workspace", f"{data_dir}/ws-stdio", *common])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=notes) as session:
            await resources(session, notes, "stdio")

    notes = Notes()
    with http_server(binary, ["--workspace", f"{data_dir}/ws-http", *common]) as url:
        async with streamable_http_client(url) as streams:
            async with ClientSession(streams[0], streams[1], message_handler=notes) as session:
                await resources(session, notes, "http")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
