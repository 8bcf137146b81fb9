"""The original project's README examples (data processing, tool discovery, privacy, skills),
driven by the official MCP Python SDK against the real `code-execution-mcp` binary, over stdio and
over streamable HTTP, each on a legacy session (the initialize handshake) and on a 2026-07-28 one
(`server/discover`).

    python tests/python/original_examples.py BINARY DATA_DIR

Exits non-zero with a message on the first mismatch. Used by tests/python_client.rs. The other
scripts of this folder import its helpers: `check`, `payload`, `http_server`, `server_env`, and
`ERAS` with `client_for`, which every script uses to run on both eras.
"""

import asyncio
import contextlib
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request

from mcp import Client, StdioServerParameters

# The eras a script runs on: the `Client` mode that asks for one, and the protocol version it must
# land on. "legacy" forces the initialize handshake; "auto" (the SDK's default) probes
# `server/discover` and takes the newest version both sides speak.
ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def server_env():
    """What a stdio server of a script inherits beside the SDK's short default list: the test
    harness's settings for the servers it starts (tests/common `python_client_env`), so that a
    stdio server shares the image-tree copy and answers `server/discover` in time, keeps its
    data (the audit trail among it) where the harness looks, and logs as asked."""
    return {k: v for k, v in os.environ.items()
            if k in ("CEM_IMAGE_TREE_DIR", "CEM_PRELOAD", "CEM_DATA_DIR", "CEM_AUDIT_CODE", "RUST_LOG")}


@contextlib.asynccontextmanager
async def client_for(server, mode, label, started=True, **kwargs):
    """A `Client` of `server` (a `StdioServerParameters`, a URL, or a transport) in `mode`,
    checked to have negotiated the version of `ERAS`; with `started`, once the server's start
    is done too (`wait_started`)."""
    async with Client(server, mode=mode, **kwargs) as client:
        check(client.protocol_version == ERAS[mode],
              f"{label}: mode {mode!r} negotiated {client.protocol_version}, expected {ERAS[mode]}")
        if started:
            await wait_started(client, label)
        yield client


async def wait_started(client, label, limit=600):
    """Waits until a server that answered its handshake has also started (the start goes on
    behind the handshake, and a tool call meanwhile waits 20 s at most before it is answered
    "still starting"): a script meets the server a user meets once it is ready, as the Rust
    tests' `wait_started` does. A first start on a busy machine (the image's /usr copied) can
    take longer than those 20 s."""
    deadline = time.monotonic() + limit
    while True:
        r = await client.call_tool("get_execution_stats", {})
        if not r.is_error:
            return
        p = payload(r)
        check(p.get("starting") and time.monotonic() < deadline, f"{label}: the server did not start: {p}")
        await asyncio.sleep(0.2)


class TerminationFailures(logging.Handler):
    """The SDK's warnings that ending an HTTP session failed (it expects 200 or 204 to a DELETE)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        message = record.getMessage()
        if "Session termination failed" in message:
            self.messages.append(message)

    @classmethod
    @contextlib.contextmanager
    def watched(cls):
        handler = cls()
        logger = logging.getLogger("mcp.client.streamable_http")
        logger.addHandler(handler)
        try:
            yield handler
        finally:
            logger.removeHandler(handler)


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def payload(result):
    """The structured content of a tool result, else its text parsed as JSON."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


async def original_examples(client: Client, label: str):
    tools = {t.name for t in (await client.list_tools()).tools}
    for name in ["execute_code", "search_tools", "get_tool_definition", "list_tool_categories",
                 "save_skill", "load_skill", "list_skills", "sanitize_pii", "restore_pii",
                 "write_workspace_file", "read_workspace_file", "list_workspace_files",
                 "get_execution_stats"]:
        check(name in tools, f"{label}: tool {name} missing from {sorted(tools)}")
    # What the workspace held before (a tenant's files of an earlier run).
    before = set(payload(await client.call_tool("list_workspace_files", {}))["files"])

    # "Efficient Data Processing": 10,000 rows stay in the sandbox; only a summary returns.
    rows = [{"id": i, "status": "active" if i % 4 else "inactive", "value": i} for i in range(10_000)]
    r = await client.call_tool("write_workspace_file",
                                {"filename": "large_dataset.json", "content": json.dumps(rows)})
    check(not r.is_error and payload(r)["success"], f"{label}: write failed: {r}")
    code = '''
data = json.loads(read_file("large_dataset.json"))
filtered = [d for d in data if d['status'] == 'active']
result = {
    'total': len(data),
    'active': len(filtered),
    'sample': filtered[:5]
}
'''
    r = await client.call_tool("execute_code", {"code": code})
    p = payload(r)
    check(not r.is_error and p["success"], f"{label}: execute_code failed: {p}")
    check(p["result"]["total"] == 10_000 and p["result"]["active"] == 7_500, f"{label}: {p['result']}")
    check(len(p["result"]["sample"]) == 5, f"{label}: sample {p['result']['sample']}")
    check(isinstance(p["execution_time_ms"], int), f"{label}: execution_time_ms {p}")
    check(len(r.content[0].text) < 2_000, f"{label}: the summary is not small")

    # Workspace round trip and the helpers.
    code = 'write_file("report.txt", "active=%d" % len(filter_by_field(json.loads(read_file("large_dataset.json")), "status", "active")))\nprint(list_files())'
    r = await client.call_tool("execute_code", {"code": code})
    p = payload(r)
    check(p["success"] and "report.txt" in p["output"][0], f"{label}: {p}")
    r = await client.call_tool("read_workspace_file", {"filename": "report.txt"})
    check(payload(r)["content"] == "active=7500", f"{label}: {payload(r)}")
    r = await client.call_tool("list_workspace_files", {})
    check(sorted(payload(r)["files"]) == sorted(before | {"large_dataset.json", "report.txt"}),
          f"{label}: {payload(r)}")

    # Errors come back as data the model can act on.
    r = await client.call_tool("execute_code", {"code": "1/0"})
    p = payload(r)
    check(r.is_error and p["status"] == "error" and p["error_type"] == "ZeroDivisionError", f"{label}: {p}")
    r = await client.call_tool("execute_code", {"code": "while True: pass", "timeout_seconds": 1})
    check(payload(r)["status"] == "timeout", f"{label}: {payload(r)}")

    # "Progressive Tool Discovery": search, then load one definition.
    r = await client.call_tool("search_tools", {"query": "vulnerability", "category": "security",
                                                 "detail_level": "summary"})
    p = payload(r)
    check(not r.is_error and p["count"] > 0, f"{label}: search_tools: {p}")
    check(all(t["category"] == "security" for t in p["tools"]), f"{label}: category filter: {p}")
    first = p["tools"][0]["id"]
    r = await client.call_tool("get_tool_definition", {"tool_name": first})
    check(not r.is_error and payload(r)["id"] == first, f"{label}: get_tool_definition: {r}")
    # A paraphrased need, not the tool's own words, is found in the top results.
    r = await client.call_tool("search_tools", {
        "query": "what's the weather going to be like in Paris tomorrow", "limit": 5})
    hits = [t["name"].lower() + " " + t["description"].lower() for t in payload(r)["tools"]]
    check(any("weather" in h or "forecast" in h for h in hits), f"{label}: paraphrase search: {hits}")

    # "Privacy-Preserving Operations".
    r = await client.call_tool("sanitize_pii", {"text": "Contact john@example.com at 555-123-4567"})
    p = payload(r)
    check("john@example.com" not in p["sanitized_text"] and p["pii_found"] == 2, f"{label}: {p}")
    email_token = p["sanitized_text"].split()[1]
    r = await client.call_tool("restore_pii", {"text": email_token})
    check(payload(r)["restored_text"] == "john@example.com", f"{label}: restore_pii: {payload(r)}")
    # Data with emails and card numbers processed in the sandbox: tokens reach the model.
    code = "\n".join([
        'rows = [{"email": "ann.lee@example.com", "card": "4111 1111 1111 1111"},',
        '        {"email": "bob@example.org", "card": "5500 0000 0000 0004"}]',
        'print("contacting", rows[0]["email"])',
        'result = rows',
    ])
    r = await client.call_tool("execute_code", {"code": code})
    text = r.content[0].text
    for value in ["ann.lee@example.com", "bob@example.org", "4111 1111 1111 1111", "5500 0000 0000 0004"]:
        check(value not in text, f"{label}: {value} reached the model: {text}")
    card_token = payload(r)["result"][0]["card"]
    r = await client.call_tool("restore_pii", {"text": card_token})
    check(payload(r)["restored_text"] == "4111 1111 1111 1111", f"{label}: {payload(r)}")

    # "Building Skills": save, then exec(load_skill(...)); and a skill saved from sandbox code
    # is listed and importable in the next execution.
    r = await client.call_tool("save_skill", {
        "name": "filter_high_risk",
        "code": "def filter_high_risk(vulns): return [v for v in vulns if v['severity'] in ['high', 'critical']]",
        "description": "Filter vulnerabilities to high/critical only"})
    check(not r.is_error and payload(r)["success"], f"{label}: save_skill: {r}")
    await client.call_tool("write_workspace_file", {"filename": "scan_results.json", "content": json.dumps(
        [{"id": 1, "severity": "low"}, {"id": 2, "severity": "critical"}])})
    code = "\n".join([
        'skill = load_skill("filter_high_risk")',
        'exec(skill)',
        'vulns = json.loads(read_file("scan_results.json"))',
        'result = filter_high_risk(vulns)',
    ])
    r = await client.call_tool("execute_code", {"code": code})
    check(payload(r)["result"] == [{"id": 2, "severity": "critical"}], f"{label}: skill example: {payload(r)}")
    skill_code = "def count_by(rows, key):\n    return len({r[key] for r in rows})\n"
    r = await client.call_tool("execute_code", {
        "code": f"print(save_skill('count_by', {skill_code!r}, 'distinct values'))"})
    check(payload(r)["success"], f"{label}: save_skill from code: {payload(r)}")
    names = [s["name"] for s in payload(await client.call_tool("list_skills", {}))["skills"]]
    check("count_by" in names, f"{label}: list_skills: {names}")
    r = await client.call_tool("execute_code", {
        "code": "from skills import count_by\nresult = count_by([{'a': 1}, {'a': 1}, {'a': 2}], 'a')"})
    check(payload(r)["result"] == 2, f"{label}: import of a saved skill: {payload(r)}")

    r = await client.call_tool("get_execution_stats", {})
    p = payload(r)
    total = p["executions"]["executions_total"]
    check(total >= 7 and p["limits"]["default_memory_mb"] == 500, f"{label}: {p}")
    print(f"{label}: original examples ok ({total} executions)", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def http_server(binary, args, port=None):
    """`binary serve --transport http` on loopback `port` (default: a free one) with `args`;
    yields its MCP URL once it has started (it listens from the start: `/health` answers 200
    once it has), and checks that it exits cleanly on SIGTERM afterwards."""
    port = port or free_port()
    server = subprocess.Popen([binary, "serve", "--transport", "http", "--listen",
                               f"127.0.0.1:{port}", *args])
    try:
        started(server, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        check(server.wait(timeout=30) == 0, "the HTTP server did not exit cleanly on SIGTERM")


def started(server, port):
    """Waits (10 minutes at most: a first start may build the image) for the HTTP server on
    `port` to answer `/health` with 200; fails if it exits first."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        check(server.poll() is None, f"the HTTP server exited with {server.returncode} while starting")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
                if r.status == 200:
                    return
        except OSError:  # not listening yet, or 503 while it starts (HTTPError)
            pass
        time.sleep(0.1)
    raise AssertionError("the HTTP server did not start within 10 minutes")


async def main(binary, data_dir):
    common = ["--workspace-quota-mb", "0", "--skills-dir", f"{data_dir}/skills"]
    for mode in ERAS:
        label = f"stdio {mode}"
        params = StdioServerParameters(command=binary, env=server_env(),
                                       args=["serve", "--workspace", f"{data_dir}/ws-stdio-{mode}", *common])
        async with client_for(params, mode, label) as client:
            await original_examples(client, label)

        label = f"http {mode}"
        with http_server(binary, ["--workspace", f"{data_dir}/ws-http-{mode}", *common]) as url:
            with TerminationFailures.watched() as failures:
                async with client_for(url, mode, label) as client:
                    await original_examples(client, label)
            # Leaving a legacy session sends DELETE; the server answers it 204.
            check(not failures.messages, f"{label}: {failures.messages}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
