"""Tenants of a swarm of servers behind the proxy, with the official MCP Python SDK (tests/swarm).

    python swarm_tenants.py examples URL TOKENS_FILE STATE_FILE
    python swarm_tenants.py check URL TOKENS_FILE STATE_FILE
    python swarm_tenants.py probe URL TOKENS_FILE TENANT LIMIT
    python swarm_tenants.py load URL TOKENS_FILE CLIENTS SECONDS
    python swarm_tenants.py links URL TOKENS_FILE TENANT NODE=BASE,NODE=BASE,...

`examples`: every tenant of TOKENS_FILE (`name:token` lines) runs the original project's README
examples at once with the others, then leaves something of its own: a file, a skill, a PII token
(of a value only it knows) and an open session. STATE_FILE records, per tenant, the node that
served it, its PII token and value, and its session id. Prints the state as JSON.

`examples` and `check` run each tenant on a legacy session and on a 2026-07-28 one (`ERAS`);
`probe` and `load` measure, on the SDK's default era (2026-07-28) and on both eras spread over the
clients respectively.

`check [--data-only]`: each tenant, in a new session, still finds its own file and skill and not
the others', restores its PII token to its value and not another tenant's, runs code that sees
only its own workspace in a sandbox that is isolated (non-root, read-only root, no network);
unless --data-only, its old session id is answered 404 when the tenant is now on another node
(MCP's "initialize again") and 200 when not. Prints `{tenant: node}` as JSON.

`probe TENANT LIMIT`: calls as TENANT until a call succeeds; prints the time of the first success
(seconds since the epoch) and the node that served it.

`load`: CLIENTS concurrent clients spread over the tenants, each running `print(1)` in a loop
for SECONDS; prints `{"executions": N, "seconds": S, "per_second": R, "errors": E,
"error_samples": [...]}` (executions that did not print 1, and up to three of their errors).

`links TENANT NODES`: TENANT asks for an upload link through the proxy (served on its node);
the file is sent to another node's own address (NODES maps node names to their base URLs), and
lands: the tenant's next execution reads it; the same link sent to a third node is refused (410),
its single use recorded on the shared volume. Prints `{"issued_on": NODE, "uploaded_on": NODE,
"refused_on": NODE}`.

Exits non-zero with a message on the first mismatch.
"""

import asyncio
import json
import os
import sys
import time

import httpx2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, original_examples, payload  # noqa: E402
from tenants_over_http import session_for  # noqa: E402

PROTOCOL = "2025-06-18"

# What a sandbox on any node must show: its own workspace and skills, a non-root user, a
# read-only root filesystem, no network but loopback.
ISOLATION = """
import os, socket
from skills import SKILL
try:
    open('/usr/probe', 'w')
    root_writable = True
except OSError:
    root_writable = False
try:
    socket.create_connection(('10.0.0.1', 80), timeout=2)
    network = True
except OSError:
    network = False
result = {'files': sorted(os.listdir('/workspace')), 'skill': SKILL(), 'uid': os.getuid(),
          'root_writable': root_writable, 'network': network,
          'interfaces': sorted(os.listdir('/sys/class/net'))}
"""


def tenants(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            name, token = line.split(":", 1)
            out[name] = token
    return out


async def call(session, tool, args):
    r = await session.call_tool(tool, args)
    try:
        return r.is_error, payload(r)
    except ValueError:
        raise AssertionError(f"{tool}: not JSON: {r.content[0].text if r.content else r}") from None


async def node_of(session):
    _, p = await call(session, "get_execution_stats", {})
    return p["node"]["name"]


async def raw_session(url, token):
    """A session opened by hand, left open: its id is what a client holds when its node goes."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "swarm-test", "version": "1"}}}
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http:
        r = await http.post(url, headers=headers, json=body)
        check(r.status_code == 200, f"initialize by hand: {r.status_code} {r.text}")
        sid = r.headers["mcp-session-id"]
        headers["Mcp-Session-Id"] = sid
        headers["MCP-Protocol-Version"] = PROTOCOL
        r = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        check(r.status_code == 202, f"initialized: {r.status_code} {r.text}")
        return sid


async def old_session_answer(url, token, sid):
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL}
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http:
        r = await http.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        return r.status_code


async def examples(url, tokens_file, state_file):
    all_tenants = tenants(tokens_file)

    async def run(name, token):
        for mode in ERAS:
            state = await run_on(name, token, mode)
        return name, {**state, "session": await raw_session(url, token)}

    async def run_on(name, token, mode):
        label = f"{name} {mode}"
        async with session_for(url, token, mode, label) as s:
            await original_examples(s, label)
            _, p = await call(s, "write_workspace_file", {"filename": f"{name}-only.txt", "content": f"{name}'s"})
            check(p["success"], f"{name}: write: {p}")
            _, p = await call(s, "save_skill", {"name": f"{name}_only", "code": f"def {name}_only(): return '{name}'",
                                                "description": f"{name}'s own skill"})
            check(p["success"], f"{name}: save_skill: {p}")
            value = f"{name}.private@example.com"
            _, p = await call(s, "execute_code", {"code": f"print('write to {value}')"})
            check(p["success"] and value not in json.dumps(p), f"{name}: the value reached the model: {p}")
            pii_token = p["output"][0].split()[-1]
            check(pii_token.startswith("[EMAIL_"), f"{name}: no token in {p}")
            node = await node_of(s)
        return {"node": node, "pii_token": pii_token, "pii_value": value}

    state = dict(await asyncio.gather(*(run(n, t) for n, t in all_tenants.items())))
    with open(state_file, "w") as f:
        json.dump(state, f)
    print(json.dumps(state))


async def check_tenants(url, tokens_file, state_file, sessions=True):
    all_tenants = tenants(tokens_file)
    state = json.load(open(state_file))

    async def one(name, token):
        for mode in ERAS:
            node = await one_on(name, token, mode)
        if not sessions:
            return name, node
        status = await old_session_answer(url, token, state[name]["session"])
        if node != state[name]["node"]:
            check(status == 404, f"{name}: moved from {state[name]['node']} to {node}, old session answered {status}")
        else:
            check(status == 200, f"{name}: still on {node}, old session answered {status}")
        return name, node

    async def one_on(name, token, mode):
        others = [o for o in all_tenants if o != name]
        async with session_for(url, token, mode, f"{name} {mode}") as s:
            node = await node_of(s)
            _, p = await call(s, "read_workspace_file", {"filename": f"{name}-only.txt"})
            check(p.get("content") == f"{name}'s", f"{name}: its file: {p}")
            _, p = await call(s, "read_workspace_file", {"filename": "report.txt"})
            check(p.get("content") == "active=7500", f"{name}: report.txt: {p}")
            _, p = await call(s, "list_workspace_files", {})
            check(not any(f"{o}-only.txt" in p["files"] for o in others), f"{name}: others' files: {p}")
            _, p = await call(s, "list_skills", {})
            names = [k["name"] for k in p["skills"]]
            check(f"{name}_only" in names and not any(f"{o}_only" in names for o in others),
                  f"{name}: skills {names}")
            _, p = await call(s, "restore_pii", {"text": state[name]["pii_token"]})
            check(p["restored_text"] == state[name]["pii_value"], f"{name}: restore_pii after the move: {p}")
            other = others[0]
            _, p = await call(s, "restore_pii", {"text": state[other]["pii_token"]})
            check(p["restored_text"] == state[other]["pii_token"], f"{name} restored {other}'s token: {p}")
            _, p = await call(s, "execute_code", {"code": ISOLATION.replace("SKILL", f"{name}_only")})
            r = p.get("result") or {}
            check(p["success"] and f"{name}-only.txt" in r["files"] and r["skill"] == name
                  and not any(f"{o}-only.txt" in r["files"] for o in others), f"{name}: sandbox {p}")
            check(r["uid"] != 0 and r["root_writable"] is False and r["network"] is False
                  and r["interfaces"] == ["lo"], f"{name}: sandbox isolation on {node}: {r}")
        return node

    nodes = dict(await asyncio.gather(*(one(n, t) for n, t in all_tenants.items())))
    print(json.dumps(nodes))


async def load(url, tokens_file, clients, seconds):
    all_tenants = list(tenants(tokens_file).values())
    done, errors, samples = 0, 0, []
    start = time.monotonic()
    deadline = start + seconds

    async def client(i):
        nonlocal done, errors
        mode = list(ERAS)[i % len(ERAS)]
        async with session_for(url, all_tenants[i % len(all_tenants)], mode, f"load {i} {mode}") as s:
            while time.monotonic() < deadline:
                r = await s.call_tool("execute_code", {"code": "print(1)"})
                p = payload(r)
                if r.is_error or p.get("output") != ["1"]:
                    errors += 1
                    if len(samples) < 3:
                        samples.append(str(p.get("error") or p)[:300])
                else:
                    done += 1

    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.monotonic() - start
    print(json.dumps({"executions": done, "seconds": round(elapsed, 2),
                      "per_second": round(done / elapsed, 2), "errors": errors, "error_samples": samples}))


async def probe(url, tokens_file, tenant, limit):
    """Calls as TENANT until a call succeeds; prints the wall-clock time of that success."""
    token = tenants(tokens_file)[tenant]
    start = time.time()
    while time.time() - start < limit:
        try:
            async with session_for(url, token) as s:
                r = await s.call_tool("execute_code", {"code": "print(1)"})
                if not r.is_error:
                    served_at = time.time()
                    print(json.dumps({"served_at": served_at, "node": await node_of(s)}))
                    return
        except Exception:
            pass
        await asyncio.sleep(0.1)
    sys.exit(f"{tenant} was not served within {limit} s")


def put(url, body):
    """PUT `body` to `url`: the status and the answer's text."""
    import urllib.error
    import urllib.request
    request = urllib.request.Request(url, data=body, method="PUT",
                                     headers={"Content-Type": "text/csv"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def links(url, tokens_file, tenant, nodes):
    token = tenants(tokens_file)[tenant]
    bases = dict(pair.split("=", 1) for pair in nodes.split(","))
    body = "".join(f"{i},{i * i}\n" for i in range(1000)).encode()
    async with session_for(url, token, "legacy", f"{tenant} links") as s:
        issued_on = await node_of(s)
        _, p = await call(s, "request_upload", {"filename": "by-link.csv"})
        check(p.get("success") and "/links/" in p.get("url", ""), f"{tenant}: request_upload: {p}")
        path = "/links/" + p["url"].split("/links/", 1)[1]
        others = [n for n in sorted(bases) if n != issued_on]
        check(len(others) >= 2, f"two nodes other than {issued_on} in {sorted(bases)}")
        status, text = put(bases[others[0]] + path, body)
        check(status == 201, f"{tenant}: upload on {others[0]}: {status} {text}")
        status, text = put(bases[others[1]] + path, b"again\n")
        check(status == 410, f"{tenant}: the used link on {others[1]}: {status} {text}")
        code = "result = open('/workspace/by-link.csv', 'rb').read().count(b'\\n')"
        _, p = await call(s, "execute_code", {"code": code})
        check(p.get("result") == 1000, f"{tenant}: the file read on {issued_on}: {p}")
    print(json.dumps({"issued_on": issued_on, "uploaded_on": others[0], "refused_on": others[1]}))


if __name__ == "__main__":
    phase, url, tokens_file = sys.argv[1:4]
    if phase == "examples":
        asyncio.run(examples(url, tokens_file, sys.argv[4]))
    elif phase == "check":
        asyncio.run(check_tenants(url, tokens_file, sys.argv[4], sessions="--data-only" not in sys.argv[5:]))
    elif phase == "probe":
        asyncio.run(probe(url, tokens_file, sys.argv[4], float(sys.argv[5])))
    elif phase == "links":
        asyncio.run(links(url, tokens_file, sys.argv[4], sys.argv[5]))
    elif phase == "load":
        asyncio.run(load(url, tokens_file, int(sys.argv[4]), float(sys.argv[5])))
    else:
        sys.exit(f"unknown phase {phase}")
