"""Guarded egress driven by the official MCP Python SDK's `Client` against the real binary,
with real HTTPS APIs on loopback that record every request they receive
(tests/python/recording_https.py):

- over stdio on both protocol eras (2026-07-28, where the question travels as an
  `InputRequiredResult`, and the handshake era, where the server asks with its own
  elicitation request): `pd.read_csv(url)` of a listed API works unchanged; a POST under the
  entry's `confirm` policy reaches the API once the user accepts, and is absent from the API's
  record when the user declines;
- over streamable HTTP with two tenants (bearer tokens): the tenant an entry names reaches its
  API, the other tenant's request is refused by the proxy and absent from that API's record.

    python tests/python/egress_client.py BINARY DATA_DIR UPSTREAMS_FILE CA_FILE API_LOG OTHER_LOG API_PORT OTHER_PORT

The upstreams file lists `127.0.0.1` (API_PORT; GET allowed, POST confirmed) for every tenant
and `localhost` (OTHER_PORT; GET) for the tenant `sales` alone; CA_FILE is the APIs' CA, which
the server trusts (`--egress-ca-file`). Exits non-zero with a message
on the first mismatch. Used by tests/egress.rs.
"""

import asyncio
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from confirm_rounds import answering, http_maker, stdio_maker  # noqa: E402
from original_examples import check, http_server, payload  # noqa: E402

SALES = "sales-0123456789abcdef0123456789abcdef"
SUPPORT = "support-0123456789abcdef0123456789abcd"


def requests_of(log):
    """Every request the API at `log` received, as `METHOD path`."""
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [f"{r['method']} {r['path']}" for r in map(json.loads, f)]


def read_and_post(port, note):
    """Sandbox code: the API's CSV through pandas, then a POST noted `note`."""
    return f"""
import urllib.error, urllib.request
import pandas as pd
df = pd.read_csv("https://127.0.0.1:{port}/data.csv")
try:
    with urllib.request.urlopen(urllib.request.Request(
            "https://127.0.0.1:{port}/submit?note={note}", data=b"x", method="POST"), timeout=30) as r:
        posted = r.status
except urllib.error.HTTPError as e:
    posted = [e.code, e.read().decode()]
result = {{"total": int(df.amount.sum()), "posted": posted}}
"""


def get_code(url):
    """Sandbox code that GETs `url`: its status and the start of its body."""
    return f"""
import urllib.error, urllib.request
try:
    with urllib.request.urlopen({url!r}, timeout=30) as r:
        result = [r.status, r.read().decode()[:200]]
except urllib.error.HTTPError as e:
    result = [e.code, e.read().decode()[:400]]
"""


async def eras(binary, data_dir, server_args, api_log, port):
    make = stdio_maker(binary, ["--data-dir", f"{data_dir}/stdio", *server_args])
    for era, version in [("auto", "2026-07-28"), ("legacy", "2025-11-25")]:
        for action, sent in [("accept", True), ("decline", False)]:
            note = f"{era}-{action}"
            asked = []
            async with make(elicitation_callback=answering([action], asked), mode=era) as c:
                check(c.protocol_version == version, f"{note}: negotiated {c.protocol_version}")
                p = payload(await c.call_tool("execute_code", {"code": read_and_post(port, note)}))
                check(p["success"], f"{note}: {p}")
                check(p["result"]["total"] == 6, f"{note}: {p['result']}")
                check(len(asked) == 1 and f"POST https://127.0.0.1:{port}/submit" in asked[0],
                      f"{note}: asked {asked}")
                if sent:
                    check(p["result"]["posted"] == 200, f"{note}: {p['result']}")
                else:
                    check(p["result"]["posted"][0] == 403 and "declined" in p["result"]["posted"][1],
                          f"{note}: {p['result']}")
                decisions = [(h["method"], h["decision"]) for h in p["http_requests"]]
                check(decisions == [("GET", "sent"), ("POST", "sent" if sent else "refused")],
                      f"{note}: {decisions}")
            posts = requests_of(api_log).count(f"POST /submit?note={note}")
            check(posts == (1 if sent else 0), f"{note}: the API received {posts} such POSTs")


async def tenants(binary, data_dir, server_args, other_log, other_port):
    args = ["--data-dir", f"{data_dir}/http", *server_args,
            "--tokens", f"sales:{SALES},support:{SUPPORT}"]
    url = f"https://localhost:{other_port}/for-sales"
    with http_server(binary, args) as mcp_url:
        async with http_maker(mcp_url, SALES)(mode="auto") as c:
            p = payload(await c.call_tool("execute_code", {"code": get_code(url + "?by=sales")}))
            check(p["success"] and p["result"][0] == 200, f"sales: {p}")
        async with http_maker(mcp_url, SUPPORT)(mode="auto") as c:
            p = payload(await c.call_tool("execute_code", {"code": get_code(url + "?by=support")}))
            check(p["success"] and p["result"][0] == 403, f"support: {p}")
            check("localhost" in p["result"][1], f"support: the refusal names the host: {p}")
    got = requests_of(other_log)
    check(got == ["GET /for-sales?by=sales"], f"the tenant-only API received {got}")


async def main():
    binary, data_dir, upstreams, ca, api_log, other_log, port, other_port = sys.argv[1:9]
    server_args = ["--upstreams", upstreams, "--egress-ca-file", ca]
    await eras(binary, data_dir, server_args, api_log, int(port))
    await tenants(binary, data_dir, server_args, other_log, int(other_port))
    print("egress client: both eras and HTTP tenants passed")


asyncio.run(main())
