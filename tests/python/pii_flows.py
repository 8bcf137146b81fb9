"""Personal data that cannot flow where it should not: tokens remember their origin, and each
upstream's `pii` rule says which origins it receives restored. Driven by the official MCP
Python SDK's `Client` against the real binary, with real upstreams: the project's rmcp fixture
as a CRM (`crm`, its `rows` tool returns people with emails and phones), a mail tool (`mail`,
rule: crm and user, its calls confirmed by the user), a "web search" (`search`, rule: user,
otherwise keep) and an issue tracker (`tracker`, rule: user, otherwise refuse), each recording
what it receives (`--calls-log`), and `mcp-server-sqlite` from PyPI as a second source
(`sqlite`, whose values `mail` does not receive: its rule does not name it).

- The CRM's results reach the code as tokens; sent to the mail tool they arrive restored,
  byte for byte, and the user's question says where each value came from;
- sent to the search they arrive as tokens (its own record shows no value); to the tracker the
  call is refused with a ToolError naming the rule, and the tracker records no call;
- a value the user typed (sanitize_pii) that the CRM also returns follows the user's rule: the
  search receives it restored;
- a token the code forges is never restored: passed as text where the rule keeps, refused
  where it refuses, and recorded in the audit trail;
- detokenize_pii in the sandbox does not hand the CRM's values back in clear, nor does a
  workspace file the model writes with a CRM token in it;
- tokens minted by one server keep their origin on another sharing the key file and the data
  directory (two swarm nodes on a shared volume);
- the audit trail counts restored and withheld tokens by type and origin, never a value;
- a rule naming an unknown server stops the start, naming the line;
- on both protocol eras.

    python tests/python/pii_flows.py BINARY DATA_DIR UPSTREAMS_FILE LOG_DIR DB_PATH KEY_FILE

LOG_DIR holds the fixtures' call logs (mail.jsonl, search.jsonl, tracker.jsonl). Exits non-zero
on the first mismatch. Used by tests/gateway/flows.rs.
"""

import asyncio
import glob
import json
import os
import sqlite3
import subprocess
import sys

from confirm_rounds import answering, stdio_maker
from original_examples import check, payload, server_env

PEOPLE = 3  # rows the code reads from the CRM: person0..person2@example.com


class Logs:
    """The fixtures' own records of every call they received."""

    def __init__(self, folder):
        self.folder = folder

    def calls(self, server):
        path = os.path.join(self.folder, f"{server}.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f]

    def text(self, server):
        return json.dumps(self.calls(server))


def send_code(target, extra=""):
    """Code that reads the CRM and echoes the people's emails and phones to `target`."""
    return f"""
from servers.crm import rows
from servers.{target} import echo
people = rows(count={PEOPLE})["rows"]
emails = [p["email"] for p in people]
phones = [p["phone"] for p in people]
sent = None
try:
    sent = echo(value={{"emails": emails, "phones": phones{extra}}})
    error = None
except ToolError as e:
    error = str(e)
result = {{"emails": emails, "error": error, "clear_in_sandbox": any("@" in e for e in emails)}}
"""


async def crm_to_each(make, label, logs):
    """The CRM's emails: restored into mail, kept as tokens for search, refused for tracker."""
    asked = []
    async with make(elicitation_callback=answering(["accept"], asked)) as c:
        results = {}
        for target in ["mail", "search", "tracker"]:
            p = payload(await c.call_tool("execute_code", {"code": send_code(target)}))
            check(p["success"], f"{label} {target}: {p}")
            results[target] = p["result"]
    for target, r in results.items():
        check(not r["clear_in_sandbox"] and all(e.startswith("[EMAIL_") for e in r["emails"]),
              f"{label} {target}: the code held values, not tokens: {r}")
    emails = [f"person{i}@example.com" for i in range(PEOPLE)]
    mail = logs.calls("mail")[-1]["arguments"]["value"]
    check(mail["emails"] == emails, f"{label}: mail received {mail}")
    check(mail["phones"][0] == "+1 415-555-0000", f"{label}: restored byte for byte: {mail}")
    # Where each value came from: the CRM (and, once the mail tool has echoed them back, it too).
    check(len(asked) == 1 and "Personal data restored into it: EMAIL from crm/rows" in asked[0]
          and "×3" in asked[0] and "person0@" not in asked[0], f"{label}: the confirmation: {asked}")
    search = logs.text("search")
    check("@example.com" not in search and "415-555" not in search and "[EMAIL_" in search,
          f"{label}: search received {search[-400:]}")
    e = results["tracker"]["error"]
    check(e is not None and "`tracker`" in e and "restore_from" in e and "EMAIL from crm/rows" in e
          and "@example.com" not in e, f"{label}: the tracker's refusal: {e}")
    check(logs.calls("tracker") == [], f"{label}: the tracker received {logs.calls('tracker')}")


async def user_typed(make, label, logs):
    """A value the user typed and the CRM also returns follows the user's rule."""
    async with make() as c:
        r = await c.call_tool("sanitize_pii", {"text": "write to person1@example.com"})
        typed = payload(r)["sanitized_text"].split()[-1]
        code = send_code("search") + f"\nresult['same'] = {typed!r} == emails[1]\n"
        p = payload(await c.call_tool("execute_code", {"code": code}))
    check(p["result"]["same"], f"{label}: one value, one token: {p['result']}")
    sent = logs.calls("search")[-1]["arguments"]["value"]["emails"]
    check(sent[1] == "person1@example.com" and sent[0].startswith("[EMAIL_") and sent[2].startswith("[EMAIL_"),
          f"{label}: search received {sent}")


async def forged_and_detokenized(make, label, logs):
    """A forged token is never restored; detokenize_pii keeps the CRM's values as tokens."""
    forged = "[EMAIL_0123abcd]"
    async with make(elicitation_callback=answering(["accept"], [])) as c:
        p = payload(await c.call_tool("execute_code", {"code": send_code("mail", f', "forged": {forged!r}')}))
        check(p["result"]["error"] is None, f"{label}: {p}")
        p = payload(await c.call_tool("execute_code", {"code": send_code("tracker", f', "forged": {forged!r}')}))
        check("never issued" in (p["result"]["error"] or ""), f"{label}: {p['result']}")
        code = ("from servers.crm import rows\n"
                "t = rows(count=1)['rows'][0]['email']\n"
                "result = detokenize_pii(t) == t\n")
        p = payload(await c.call_tool("execute_code", {"code": code}))
        check(p["result"] is True, f"{label}: detokenize_pii handed a CRM value back: {p}")
    check(logs.calls("mail")[-1]["arguments"]["value"]["forged"] == forged, f"{label}: mail {logs.calls('mail')[-1]}")


async def workspace_writes(make, label, ws):
    """A CRM token the model writes into a workspace file stays a token there (the code reads
    the workspace); one the user also typed becomes its value, as before rules."""
    async with make() as c:
        code = "from servers.crm import rows\nresult = [r['email'] for r in rows(count=2)['rows']]"
        crm = payload(await c.call_tool("execute_code", {"code": code}))["result"]
        await c.call_tool("write_workspace_file", {"filename": "flow.txt", "content": " ".join(crm)})
    with open(os.path.join(ws, "flow.txt")) as f:
        written = f.read()
    check(written == f"{crm[0]} person1@example.com", f"{label}: the workspace file holds {written!r}")


async def sqlite_source(make, label, logs):
    """Values from the SQLite server: its origin is `sqlite`, which mail's rule does not name."""
    code = """
import ast
from servers.sqlite import read_query
from servers.mail import echo
rows = ast.literal_eval(str(read_query(query="SELECT email FROM contacts ORDER BY id")))
emails = [r["email"] for r in rows]
echo(value={"emails": emails})
result = emails
"""
    async with make(elicitation_callback=answering(["accept"], [])) as c:
        p = payload(await c.call_tool("execute_code", {"code": code}))
    check(p["success"] and all(e.startswith("[EMAIL_") for e in p["result"]), f"{label}: {p}")
    sent = logs.calls("mail")[-1]["arguments"]["value"]["emails"]
    check(sent == p["result"] and "@" not in json.dumps(sent), f"{label}: mail received {sent}")


def audited_tokens(data_dir):
    """Every call's `tokens` in the audit trail."""
    found = []
    for path in glob.glob(os.path.join(data_dir, "audit", "*", "*")):
        with open(path) as f:
            for line in f:
                for call in json.loads(line).get("calls", []):
                    if call.get("tokens"):
                        found.append((call["server"], call["outcome"], call["tokens"]))
    return found


def check_audit(data_dir):
    found = audited_tokens(data_dir)
    text = json.dumps(found)
    check("@example.com" not in text and "[EMAIL_" not in text, f"the audit trail holds a value or token: {text[:400]}")
    def lists(server, outcome, field):
        return [c for s, o, t in found if (s, o) == (server, outcome) for c in t.get(field, [])]
    check(any(r["type"] == "EMAIL" and "crm/rows" in r["origin"] for r in lists("mail", "ok", "restored")),
          f"audit mail: {found}")
    check(any(w["type"] == "EMAIL" and "crm/rows" in w["origin"] for w in lists("search", "ok", "withheld")),
          f"audit search: {found}")
    check(any(w["type"] == "EMAIL" and w["origin"].startswith("sqlite/") for w in lists("mail", "ok", "withheld")),
          f"audit sqlite to mail: {found}")
    check(lists("tracker", "withheld", "withheld"), f"audit tracker: {found}")
    check(any(u["type"] == "EMAIL" for s, o, t in found for u in t.get("unknown", [])), f"audit forged: {found}")


async def across_servers(binary, args, logs):
    """Two servers sharing the key and the data directory: tokens one minted from the CRM keep
    their origins on the other (restored for mail; kept for search, but for the one the user
    typed too)."""
    one, two = stdio_maker(binary, args), stdio_maker(binary, args)
    async with one() as c:
        p = payload(await c.call_tool("execute_code", {"code": "from servers.crm import rows\nresult = [r['email'] for r in rows(count=2)['rows']]"}))
    tokens = p["result"]
    check(all(t.startswith("[EMAIL_") for t in tokens), f"across: {p}")
    async with two(elicitation_callback=answering(["accept"], [])) as c:
        for target in ["mail", "search"]:
            code = f"from servers.{target} import echo\necho(value={{'emails': {tokens!r}}})\nresult = 1"
            p = payload(await c.call_tool("execute_code", {"code": code}))
            check(p["success"], f"across {target}: {p}")
    check(logs.calls("mail")[-1]["arguments"]["value"]["emails"] == ["person0@example.com", "person1@example.com"],
          f"across: mail received {logs.calls('mail')[-1]}")
    # person1 was also typed by the user (user_typed): that origin came along too.
    check(logs.calls("search")[-1]["arguments"]["value"]["emails"] == [tokens[0], "person1@example.com"],
          f"across: search received {logs.calls('search')[-1]}")


def bad_rule_stops_the_start(binary, data_dir, upstreams):
    with open(upstreams) as f:
        servers = json.load(f)
    servers["mcpServers"]["tracker"]["pii"]["restore_from"] = ["usr"]
    bad = json.dumps(servers, indent=2)
    path = os.path.join(data_dir, "bad-upstreams.json")
    with open(path, "w") as f:
        f.write(bad)
    line = next(i + 1 for i, l in enumerate(bad.splitlines()) if '"usr"' in l)
    r = subprocess.run([binary, "serve", "--data-dir", f"{data_dir}/bad", "--upstreams", path],
                       env=server_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    check(r.returncode != 0 and '"usr"' in r.stderr and f"(line {line})" in r.stderr and "tracker" in r.stderr,
          f"a bad rule: exit {r.returncode}, {r.stderr[-600:]}")


async def main(binary, data_dir, upstreams, log_dir, db_path, key_file):
    logs = Logs(log_dir)
    with sqlite3.connect(db_path) as c:
        c.execute("CREATE TABLE contacts (id INTEGER PRIMARY KEY, email TEXT)")
        c.executemany("INSERT INTO contacts (email) VALUES (?)", [("dana@example.org",), ("eli@example.org",)])
    args = ["--data-dir", f"{data_dir}/server", "--workspace", f"{data_dir}/ws", "--workspace-quota-mb", "0",
            "--upstreams", upstreams, "--pii-key-file", key_file]
    stdio = stdio_maker(binary, args)
    for era in ["auto", "legacy"]:
        make = lambda **kw: stdio(mode=era, **kw)  # noqa: E731
        await crm_to_each(make, f"stdio/{era}", logs)
    await user_typed(stdio, "stdio", logs)
    await forged_and_detokenized(stdio, "stdio", logs)
    await workspace_writes(stdio, "stdio", f"{data_dir}/ws")
    await sqlite_source(stdio, "stdio", logs)
    check_audit(f"{data_dir}/server")
    await across_servers(binary, args, logs)
    bad_rule_stops_the_start(binary, data_dir, upstreams)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
