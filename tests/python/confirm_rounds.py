"""Confirmation of upstream calls (policy `confirm`) and long executions as tasks, driven by the
official MCP Python SDK's `Client` against the real binary:

- on a 2026-07-28 connection the question travels as an `InputRequiredResult` and the retry
  resumes the same execution (accept, decline, cancel; two questions in one execution; two
  executions paused at once; a forged, replayed, other tenant's, other server's and expired
  `requestState`);
- on a legacy (initialize) connection the server asks with its own elicitation request;
- on both, a client that cannot be asked is refused;
- after every refusal the call is absent from the `stamp` upstream's own log of the calls it
  received (STAMP_LOG, named in the upstreams file), and after every acceptance there once:
  the upstream's state, never the server's word for it;
- `execute_code` as a task (the tasks extension): polled, with progress, and cancelled, after
  which its container is gone.

    python tests/python/confirm_rounds.py BINARY DATA_DIR UPSTREAMS_FILE
    python tests/python/confirm_rounds.py BINARY DATA_DIR --measure N

The upstreams file names `stamp` (tests/python/stamp_server.py, with STAMP_LOG in its `env`)
and `time` (mcp-server-time), each with policy `confirm`. With --measure, prints the confirmation round trip instead (the
client sends its retry → the upstream receives the call) over N rounds, beside the legacy
era's (the client answers the server's elicitation → the upstream receives the call).
Exits non-zero with a message on the first mismatch. Used by tests/gateway/rounds.rs.
"""

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import encode_header_value
from mcp_types import ElicitResult, InputRequiredResult

from original_examples import check, http_server, payload, server_env

TASKS = "io.modelcontextprotocol/tasks"

# Sandbox code that writes its own container's id to /workspace/NAME. The hostname is always
# "sandbox"; the engine's bind of /etc/hostname names the container's directory.
def write_container_id(name):
    return ("import re\n"
            "src = [l.split()[3] for l in open('/proc/self/mountinfo') if l.split()[4] == '/etc/hostname']\n"
            f"open('/workspace/{name}', 'w').write(re.search('[0-9a-f]{{64}}', src[0]).group(0))\n")


def stamp_code(note):
    """Sandbox code that calls `stamp` once with `note` (which names the call in the log)."""
    return f"""
from servers.stamp import stamp
from servers import ToolError
try:
    first = stamp(note={note!r})
    result = {{"ok": True, "calls": first["calls"]}}
except ToolError as e:
    result = {{"ok": False, "error": str(e)}}
"""


def two_code(label):
    """Sandbox code that calls `stamp` twice, noted `{label} two-a` and `{label} two-b`."""
    return f"""
from servers.stamp import stamp
a = stamp(note={label + ' two-a'!r})
b = stamp(note={label + ' two-b'!r})
result = {{"calls": [a["calls"], b["calls"]]}}
"""


class Stamps:
    """The `stamp` upstream's own log of the calls it received: one JSON line per call."""

    def __init__(self, path):
        self.path = path

    def arrived(self, note):
        """How many calls noted `note` reached the upstream."""
        if not os.path.exists(self.path):  # the upstream writes it on its first call
            return 0
        with open(self.path) as f:
            return sum(1 for line in f if json.loads(line)["note"] == note)

    def expect(self, note, times, what):
        n = self.arrived(note)
        check(n == times, f"{what}: the upstream received {n} call(s) noted {note!r}, wanted {times}")


def answering(actions, asked):
    """An elicitation callback that answers with `actions` in turn and records each question."""
    async def answer(_context, params):
        asked.append(params.message)
        return ElicitResult(action=actions[min(len(asked), len(actions)) - 1])
    return answer


def can_ask():
    """The client declares elicitation (it answers when driving by hand)."""
    return {"elicitation_callback": answering(["accept"], [])}


async def confirmations(make, label, era, stamps):
    """Accept, decline and cancel; a client that cannot be asked; two questions in one
    execution."""
    for action, ok in [("accept", True), ("decline", False), ("cancel", False)]:
        asked = []
        note = f"{label} {action}"
        async with make(elicitation_callback=answering([action], asked), mode=era) as c:
            check(c.protocol_version == ("2026-07-28" if era == "auto" else "2025-11-25"),
                  f"{label}: era {era} negotiated {c.protocol_version}")
            r = await c.call_tool("execute_code", {"code": stamp_code(note)})
            stamps.expect(note, 1 if ok else 0, f"{label} {action}")
            p = payload(r)
            check(p["success"], f"{label} {action}: {p}")
            check(p["result"]["ok"] is ok, f"{label} {action}: {p['result']}")
            check(len(asked) == 1 and "stamp" in asked[0], f"{label} {action}: asked {asked}")
            if action == "accept":
                check(len(p["tool_calls"]) == 1 and p["tool_calls"][0]["ok"], f"{label}: {p['tool_calls']}")
            if action == "decline":
                check("declined" in p["result"]["error"], f"{label}: {p['result']}")
            if action == "cancel":
                check("dismissed" in p["result"]["error"], f"{label}: {p['result']}")
    note = f"{label} unaskable"
    async with make(mode=era) as c:
        p = payload(await c.call_tool("execute_code", {"code": stamp_code(note)}))
        stamps.expect(note, 0, f"{label}: a client that cannot be asked")
        check(p["success"] and not p["result"]["ok"] and "cannot ask" in p["result"]["error"],
              f"{label}: a client that cannot be asked: {p}")
    asked = []
    async with make(elicitation_callback=answering(["accept"], asked), mode=era) as c:
        p = payload(await c.call_tool("execute_code", {"code": two_code(label)}))
        check(p["success"] and len(asked) == 2, f"{label}: two questions: {p} {asked}")
        a, b = p["result"]["calls"]
        check(b == a + 1, f"{label}: each accepted call went out once: {p['result']}")
        for half in ("two-a", "two-b"):
            stamps.expect(f"{label} {half}", 1, f"{label}: two questions")


async def by_hand(c, code, state=None, responses=None):
    """One round of execute_code, the client driving: the raw InputRequiredResult or result."""
    return await c.session.call_tool("execute_code", {"code": code}, request_state=state,
                                     input_responses=responses, allow_input_required=True)


def accept(first):
    return {key: ElicitResult(action="accept") for key in first.input_requests}


async def paused_rounds(make, label, stamps):
    """Two executions paused at once; forged and replayed states run nothing."""
    async with make(**can_ask()) as c:
        note_a, note_b = f"{label} paused-a", f"{label} paused-b"
        code_a, code_b = stamp_code(note_a), stamp_code(note_b)
        first_a = await by_hand(c, code_a)
        first_b = await by_hand(c, code_b)
        paused = payload(await c.call_tool("get_execution_stats", {}))["executions_paused"]
        check(paused == 2, f"{label}: two executions paused: {paused}")
        for first in (first_a, first_b):
            check(isinstance(first, InputRequiredResult) and first.request_state and first.input_requests,
                  f"{label}: paused: {first}")
        # The second answered first.
        done_b = await by_hand(c, code_b, first_b.request_state, accept(first_b))
        done_a = await by_hand(c, code_a, first_a.request_state, accept(first_a))
        for done in (done_a, done_b):
            check(not isinstance(done, InputRequiredResult) and payload(done)["result"]["ok"], f"{label}: {done}")
        calls = sorted([payload(done_a)["result"]["calls"], payload(done_b)["result"]["calls"]])
        check(calls[1] == calls[0] + 1, f"{label}: one call each: {calls}")
        stamps.expect(note_a, 1, f"{label}: a answered")
        stamps.expect(note_b, 1, f"{label}: b answered")

        # A replay of an answered state runs nothing.
        again = await by_hand(c, code_a, first_a.request_state, accept(first_a))
        stamps.expect(note_a, 1, f"{label}: replay")
        check(again.is_error and "nothing ran" in again.content[0].text, f"{label}: replay: {again}")
        # A forged one neither.
        forged = first_a.request_state[:-4] + ("AAAA" if not first_a.request_state.endswith("AAAA") else "BBBB")
        r = await by_hand(c, code_a, forged, accept(first_a))
        stamps.expect(note_a, 1, f"{label}: forged")
        check(r.is_error and "not issued by this server" in r.content[0].text, f"{label}: forged: {r}")
        r = await by_hand(c, code_a, "made-up", None)
        stamps.expect(note_a, 1, f"{label}: made up")
        check(r.is_error and "not issued by this server" in r.content[0].text, f"{label}: made up: {r}")
        # Other code with a genuine state.
        first = await by_hand(c, code_a)
        r = await by_hand(c, code_b, first.request_state, accept(first))
        stamps.expect(note_a, 1, f"{label}: other code")
        stamps.expect(note_b, 1, f"{label}: other code")
        check(r.is_error and "other code" in r.content[0].text, f"{label}: other code: {r}")
        done = await by_hand(c, code_a, first.request_state, accept(first))
        check(payload(done)["result"]["ok"], f"{label}: after the refusal the state still works: {done}")
        stamps.expect(note_a, 2, f"{label}: the state still works")
        stats = payload(await c.call_tool("get_execution_stats", {}))
        return stats


async def expiry(make, label, container_gone, stamps):
    """A pause nobody answers ends as cancelled, its container removed; its state then expires."""
    async with make(**can_ask()) as c:
        note = f"{label} expired"
        code = write_container_id("paused-host.txt") + stamp_code(note)
        first = await by_hand(c, code)
        check(isinstance(first, InputRequiredResult), f"{label}: paused: {first}")
        host = payload(await c.call_tool("read_workspace_file", {"filename": "paused-host.txt"}))["content"]
        await asyncio.sleep(4)  # the server runs with --confirm-wait-secs 2
        container_gone(host, label)
        stamps.expect(note, 0, f"{label}: unanswered")
        r = await by_hand(c, code, first.request_state, accept(first))
        stamps.expect(note, 0, f"{label}: expired")
        check(r.is_error and "expired" in r.content[0].text, f"{label}: expired: {r}")
        stats = payload(await c.call_tool("get_execution_stats", {}))
        check(stats["executions_paused"] == 0, f"{label}: nothing stays paused: {stats['executions_paused']}")
        # The execution is counted once its container's removal has ended, which on a loaded
        # machine may come after the container is gone from the engine's list: asked again
        # for up to 10 s.
        for _ in range(20):
            by_status = stats["executions"]["executions_by_status"]
            if by_status.get("cancelled", 0) >= 1:
                break
            await asyncio.sleep(0.5)
            stats = payload(await c.call_tool("get_execution_stats", {}))
        check(by_status.get("cancelled", 0) >= 1, f"{label}: ended as cancelled: {by_status}")


async def foreign(make_alice, make_bob, label, stamps):
    """Bob cannot resume Alice's paused execution."""
    async with make_alice(**can_ask()) as alice, make_bob(**can_ask()) as bob:
        note = f"{label} foreign"
        code = stamp_code(note)
        first = await by_hand(alice, code)
        r = await by_hand(bob, code, first.request_state, accept(first))
        stamps.expect(note, 0, f"{label}: bob answered alice's question")
        check(r.is_error and "another tenant" in r.content[0].text, f"{label}: foreign: {r}")
        done = await by_hand(alice, code, first.request_state, accept(first))
        check(payload(done)["result"]["ok"], f"{label}: alice resumes her own: {done}")
        stamps.expect(note, 1, f"{label}: alice resumed her own")


async def elsewhere(make, make_other, label, stamps):
    """A retry that reaches another server (another replica behind a proxy) runs nothing, says
    where it must go, and leaves the execution paused on the server that asked."""
    async with make(**can_ask()) as c, make_other(**can_ask()) as other:
        note = f"{label} elsewhere"
        code = stamp_code(note)
        first = await by_hand(c, code)
        check(isinstance(first, InputRequiredResult), f"{label}: paused: {first}")
        r = await by_hand(other, code, first.request_state, accept(first))
        stamps.expect(note, 0, f"{label}: another server answered the question")
        text = r.content[0].text if r.is_error else ""
        check("not issued by this server" in text and "nothing ran" in text
              and "must reach that same server" in text, f"{label}: another server: {r}")
        done = await by_hand(c, code, first.request_state, accept(first))
        check(payload(done)["result"]["ok"], f"{label}: still paused where it asked: {done}")
        stamps.expect(note, 1, f"{label}: resumed where it asked")


async def tasks(make, label, container_gone, stamps):
    """A long execution becomes a task: polled with progress, answered through the task, and
    cancelled, after which its container is gone."""
    async def send(c, method, params):
        # The SDK has no tasks client of its own: raw requests, stamped with the 2026-07-28
        # _meta and headers as the SDK stamps its own (the capabilities carry the extension).
        data = {"method": method, "params": dict(params)}
        opts = {}
        c.session._stamp(data, opts)
        if "taskId" in params:  # HTTP routes tasks/* by the task's id (Mcp-Name)
            opts["headers"]["mcp-name"] = encode_header_value(params["taskId"])
        return await c.session._dispatcher.send_raw_request(method, data["params"], opts)

    async with make(extensions=[advertise_tasks()], **can_ask()) as c:
        # Quick code answers inline (or, on a machine so loaded that its container took over a
        # second to start, as a task that ends with the same answer).
        raw = await send(c, "tools/call", {"name": "execute_code", "arguments": {"code": "result = 1"}})
        if raw.get("resultType") == "task":
            for _ in range(120):
                got = await send(c, "tasks/get", {"taskId": raw["taskId"]})
                if got["status"] != "working":
                    break
                await asyncio.sleep(0.25)
            check(got["status"] == "completed", f"{label}: quick task: {got}")
            raw = got["result"]
        check(raw["structuredContent"]["result"] == 1, f"{label}: quick: {raw}")
        # Long code becomes a task.
        code = (write_container_id("task-host.txt") + "import time\n"
                "for i in range(600):\n    print('step', i, flush=True)\n    time.sleep(0.1)\n")
        raw = await send(c, "tools/call", {"name": "execute_code", "arguments": {"code": code}})
        check(raw.get("resultType") == "task" and raw.get("taskId"), f"{label}: a task: {raw}")
        task_id = raw["taskId"]
        seen = None
        for _ in range(60):
            got = await send(c, "tasks/get", {"taskId": task_id})
            check(got["status"] == "working", f"{label}: working: {got}")
            if "step" in (got.get("statusMessage") or ""):
                seen = got["statusMessage"]
                break
            await asyncio.sleep(0.5)
        check(seen, f"{label}: progress in the status message")
        host = payload(await c.call_tool("read_workspace_file", {"filename": "task-host.txt"}))["content"]
        await send(c, "tasks/cancel", {"taskId": task_id})
        for _ in range(60):
            got = await send(c, "tasks/get", {"taskId": task_id})
            if got["status"] == "cancelled":
                break
            await asyncio.sleep(0.5)
        check(got["status"] == "cancelled", f"{label}: cancelled: {got}")
        container_gone(host, label)

        # A question inside a task: input_required in tasks/get, answered by tasks/update.
        note = f"{label} task"
        code = "import time\ntime.sleep(1.5)\n" + stamp_code(note)
        raw = await send(c, "tools/call", {"name": "execute_code", "arguments": {"code": code}})
        task_id = raw["taskId"]
        for _ in range(60):
            got = await send(c, "tasks/get", {"taskId": task_id})
            if got["status"] == "input_required":
                break
            await asyncio.sleep(0.25)
        check(got["status"] == "input_required", f"{label}: input_required: {got}")
        keys = list(got["inputRequests"])
        await send(c, "tasks/update", {"taskId": task_id,
                                       "inputResponses": {k: {"action": "accept"} for k in keys}})
        for _ in range(60):
            got = await send(c, "tasks/get", {"taskId": task_id})
            if got["status"] == "completed":
                break
            await asyncio.sleep(0.25)
        check(got["status"] == "completed", f"{label}: completed: {got}")
        result = got["result"]["structuredContent"]
        check(result["result"]["ok"], f"{label}: the call went out: {result}")
        stamps.expect(note, 1, f"{label}: the task's question answered")


def advertise_tasks():
    from mcp.client.extension import advertise
    return advertise(TASKS)


def docker_container_gone(host, label):
    """The container whose id is `host` (from write_container_id) is removed within 30 s."""
    for _ in range(60):
        # check=True: an engine the command cannot reach fails the test, not passes it.
        out = subprocess.run(["docker", "ps", "-aq", "--no-trunc"], capture_output=True, text=True,
                             check=True).stdout
        check(len(host) == 64, f"{label}: {host!r} is not a container id")
        if not any(line.startswith(host) for line in out.split()):
            return
        time.sleep(0.5)
    raise AssertionError(f"{label}: container {host} is still there")


async def measure(make, rounds):
    """The confirmation round trip on 2026-07-28 (the client sends its retry → the upstream
    receives the call), against the legacy era's (the client answers the server's elicitation
    request → the upstream receives the call), in one process over the same stdio server."""
    def p(values, q):
        values = sorted(values)
        return round(values[min(len(values) - 1, int(len(values) * q))], 2)

    retry = []
    async with make(**can_ask()) as c:
        check(c.protocol_version == "2026-07-28",
              f"the server answered server/discover too late and the SDK fell back to {c.protocol_version} "
              "(a first start copies the image's /usr): run again")
        for i in range(rounds):
            code = f"from servers.stamp import stamp\nresult = stamp(note='m{i}')"
            first = await by_hand(c, code)
            sent = time.time()
            done = await by_hand(c, code, first.request_state, accept(first))
            retry.append((payload(done)["result"]["at"] - sent) * 1000)
    legacy = []
    answered = []

    async def answer(_context, _params):
        answered.append(time.time())
        return ElicitResult(action="accept")
    async with make(elicitation_callback=answer, mode="legacy") as c:
        for i in range(rounds):
            code = f"from servers.stamp import stamp\nresult = stamp(note='l{i}')"
            done = await c.call_tool("execute_code", {"code": code})
            legacy.append((payload(done)["result"]["at"] - answered[-1]) * 1000)
    print(json.dumps({
        "rounds": rounds,
        "requestState_retry_ms": {"p50": p(retry, 0.5), "p90": p(retry, 0.9)},
        "legacy_elicitation_ms": {"p50": p(legacy, 0.5), "p90": p(legacy, 0.9)},
        "ratio_p50": round(statistics.median(retry) / statistics.median(legacy), 2),
    }))


def stdio_maker(binary, args):
    params = StdioServerParameters(command=binary, args=["serve", *args], env=server_env())

    def make(**kw):
        return Client(params, **kw)
    return make


def http_maker(url, token=None):
    def make(**kw):
        if token is None:
            return Client(url, **kw)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(120))
        return Client(streamable_http_client(url, http_client=http), **kw)
    return make


def stamp_upstreams(data_dir):
    """An upstreams file with only `stamp`, policy confirm (for --measure)."""
    os.makedirs(data_dir, exist_ok=True)
    path = os.path.join(data_dir, "upstreams.json")
    stamp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stamp_server.py")
    with open(path, "w") as f:
        json.dump({"mcpServers": {"stamp": {"command": sys.executable, "args": [stamp],
                                            "policy": {"tools": {"stamp": "confirm"}}}}}, f)
    return path


def tenants_on(data_dir):
    """The HTTP servers' arguments: alice and bob, their data in `data_dir`."""
    return ["--data-dir", data_dir, "--tokens",
            "alice:alice-token-0123456789abcdef0123456789,bob:bob-token-0123456789abcdef0123456789ab"]


async def main(binary, data_dir, upstreams, rounds):
    common = ["--workspace-quota-mb", "0", "--upstreams", upstreams, "--confirm-wait-secs", "2"]
    stdio = stdio_maker(binary, ["--workspace", f"{data_dir}/ws-stdio", "--skills-dir", f"{data_dir}/sk", *common])
    if rounds:
        await measure(stdio, rounds)
        return
    with open(upstreams) as f:
        stamps = Stamps(json.load(f)["mcpServers"]["stamp"]["env"]["STAMP_LOG"])
    for era in ["auto", "legacy"]:
        await confirmations(stdio, f"stdio/{era}", era, stamps)
    await paused_rounds(stdio, "stdio", stamps)
    await expiry(stdio, "stdio", docker_container_gone, stamps)
    await tasks(stdio, "stdio", docker_container_gone, stamps)

    tenants = tenants_on(f"{data_dir}/http")
    with http_server(binary, [*tenants, *common]) as url:
        alice = http_maker(url, "alice-token-0123456789abcdef0123456789")
        bob = http_maker(url, "bob-token-0123456789abcdef0123456789ab")
        for era in ["auto", "legacy"]:
            await confirmations(alice, f"http/{era}", era, stamps)
        await paused_rounds(alice, "http", stamps)
        await foreign(alice, bob, "http", stamps)
        with http_server(binary, [*tenants_on(f"{data_dir}/http-2"), *common]) as other_url:
            other = http_maker(other_url, "alice-token-0123456789abcdef0123456789")
            await elsewhere(alice, other, "http", stamps)
        await expiry(bob, "http", docker_container_gone, stamps)
        await tasks(alice, "http", docker_container_gone, stamps)


if __name__ == "__main__":
    if sys.argv[3] == "--measure":
        asyncio.run(main(sys.argv[1], sys.argv[2], stamp_upstreams(sys.argv[2]), int(sys.argv[4])))
    else:
        asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], 0))
