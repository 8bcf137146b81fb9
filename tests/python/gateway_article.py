"""The "code execution with MCP" workflow end to end, driven by the official MCP Python SDK over
stdio against the real binary: sandbox code reads 10,000 rows with emails and phone numbers from
one upstream ("sheet") and writes them to another ("crm"). The model-visible text must hold no
real email or phone number (tokens only); the second upstream must receive the real values, also
for a token the model saw and put back into code. Then discovery marks the tools callable, and
a tool that needs confirmation is asked for through elicitation (accepted, declined, and refused
for a client that cannot be asked). Whether a call needing confirmation reached the upstream is
read from the upstream's own log of the calls it received (the fixture's --calls-log), never
from the server's answer: a refused call must be absent there, an accepted one there once. All
of it on a legacy session and on a 2026-07-28 one.

    python tests/python/gateway_article.py BINARY DATA_DIR UPSTREAMS_FILE RECORD_FILE CALLS_LOG

Exits non-zero with a message on the first mismatch. Used by tests/gateway/over_mcp.rs.
"""

import asyncio
import json
import re
import sys

from mcp import StdioServerParameters
from mcp.types import ElicitResult

from original_examples import ERAS, check, client_for, payload, server_env  # the script's own directory is on sys.path

EMAIL = re.compile(r"person\d+@example\.com")
PHONE = re.compile(r"415.555.\d{4}")


def arrived(calls_log, tool):
    """The arguments of each call of `tool` the crm upstream received, from its own log."""
    with open(calls_log) as f:
        return [c["arguments"] for c in map(json.loads, f) if c["tool"] == tool]


def visible(result):
    """Everything of a tool result that reaches the model."""
    return json.dumps(result.model_dump(mode="json"))


async def workflow(client, record_file):
    code = '''
from servers.sheet import rows
from servers.crm import store_rows
data = rows(count=10000)["rows"]
stored = store_rows(rows=data)
print("first row:", data[0])
result = {"stored": stored["stored"], "first": data[0]}
'''
    r = await client.call_tool("execute_code", {"code": code, "timeout_seconds": 120})
    p = payload(r)
    check(not r.is_error and p["success"], f"the workflow failed: {p}")
    check(p["result"]["stored"] == 10_000, f"stored: {p['result']}")
    seen = visible(r)
    for pattern, what in [(EMAIL, "email"), (PHONE, "phone number")]:
        found = pattern.search(seen)
        check(found is None, f"a real {what} reached the model: {found and found.group()}")
    token = p["result"]["first"]["email"]
    check(token.startswith("[EMAIL_"), f"the model sees a token for the email: {token}")
    calls = p.get("tool_calls", [])
    check([(c["server"], c["tool"], c["ok"]) for c in calls] == [("sheet", "rows", True), ("crm", "store_rows", True)],
          f"tool_calls: {calls}")
    with open(record_file) as f:
        stored = [json.loads(line) for line in f]
    check(len(stored) == 10_000, f"the crm received {len(stored)} rows")
    check(stored[0]["email"] == "person0@example.com", f"the crm received real values: {stored[0]}")
    check(PHONE.search(stored[0]["phone"]), f"the crm received the real phone: {stored[0]}")

    # A token the model saw goes back into code: the upstream gets the value it stands for.
    r = await client.call_tool("execute_code", {"code": f'''
from servers.crm import store_rows
result = store_rows(rows=[{{"email": "{token}", "note": "from a token"}}])
'''})
    p = payload(r)
    check(not r.is_error and p["success"], f"the second call failed: {p}")
    with open(record_file) as f:
        last = json.loads(f.readlines()[-1])
    check(last == {"email": "person0@example.com", "note": "from a token"}, f"detokenized: {last}")


async def discovery(client):
    r = await client.call_tool("search_tools", {"query": "store rows", "callable_only": True})
    p = payload(r)
    check(p["tools"] and all(t["callable"] for t in p["tools"]), f"callable_only: {p}")
    check(any(t["id"] == "crm/store_rows" for t in p["tools"]), f"crm/store_rows found: {p}")
    r = await client.call_tool("search_tools", {"query": "send an email", "limit": 5})
    p = payload(r)
    check(any(not t["callable"] for t in p["tools"]), f"catalog entries are callable: false: {p}")
    r = await client.call_tool("get_tool_definition", {"tool_name": "sheet/rows"})
    p = payload(r)
    check(p["callable"] and "from servers.sheet import rows" in p["python"], f"definition: {p}")
    r = await client.call_tool("list_tool_categories", {})
    p = payload(r)
    check(p["upstreams"]["crm"]["status"] == "ready", f"upstreams: {p.get('upstreams')}")


async def confirmation(client, answers):
    code = '''
from servers.crm import delete_everything
result = delete_everything()
'''
    r = await client.call_tool("execute_code", {"code": code})
    return payload(r), answers


async def confirmed_by_rule(client):
    """echo is not destructive: only the upstreams file's explicit rule makes it `confirm`."""
    code = '''
from servers.crm import echo
result = echo(value={"id": 7, "note": "re-send"})
'''
    r = await client.call_tool("execute_code", {"code": code})
    return payload(r)


async def main(binary, data_dir, upstreams, record_file, calls_log):
    params = StdioServerParameters(
        command=binary,
        env=server_env(),
        args=["serve", "--data-dir", data_dir, "--upstreams", upstreams, "--pool-size", "1"],
    )
    for mode in ERAS:
        label = f"stdio {mode}"
        # The crm upstream appends what it receives; each era counts its own.
        open(record_file, "w").close()
        open(calls_log, "w").close()
        async with client_for(params, mode, label) as client:
            await workflow(client, record_file)
            await discovery(client)
            # No elicitation support: a destructive tool is refused, saying why.
            p, _ = await confirmation(client, [])
            check(not arrived(calls_log, "delete_everything"),
                  f"{label}: refused without elicitation, yet the upstream received delete_everything")
            check(not p["success"] and "cannot ask" in p["error"], f"{label}: without elicitation: {p}")

        asked = []
        answers = ["accept", "decline", "accept"]

        async def answer(context, params):
            asked.append(params.message)
            return ElicitResult(action=answers[len(asked) - 1])

        async with client_for(params, mode, label, elicitation_callback=answer) as client:
            p, _ = await confirmation(client, asked)
            check(p["success"] and p["result"] == "deleted", f"{label}: accepted: {p}")
            deleted = arrived(calls_log, "delete_everything")
            check(len(deleted) == 1, f"{label}: accepted: the upstream received {len(deleted)} calls, wanted 1")
            # The question names the server, the tool and the arguments, as docs/gateway.md promises.
            check(all(words in asked[0] for words in
                      ["`delete_everything`", "MCP server `crm`", "destructive", "with the arguments {}"]),
                  f"{label}: asked: {asked}")
            p, _ = await confirmation(client, asked)
            deleted = arrived(calls_log, "delete_everything")
            check(len(deleted) == 1, f"{label}: declined, yet the upstream received {len(deleted) - 1} more call(s)")
            check(not p["success"] and "declined" in p["error"], f"{label}: declined: {p}")
            p = await confirmed_by_rule(client)
            echoed = arrived(calls_log, "echo")
            check(echoed == [{"value": {"id": 7, "note": "re-send"}}], f"{label}: by rule: the upstream received {echoed}")
            check(p["success"] and p["result"] == {"value": {"id": 7, "note": "re-send"}}, f"{label}: by rule: {p}")
            check(len(asked) == 3 and all(words in asked[2] for words in
                      ["`echo`", "MCP server `crm`", '{"value":{"id":7,"note":"re-send"}}']),
                  f"{label}: asked: {asked}")
            check("destructive" not in asked[2], f"{label}: echo is not destructive: {asked[2]}")
        print(f"{label}: gateway article workflow ok")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
