"""Writes approved as one plan (policy `plan`), driven by the official MCP Python SDK's `Client`
against the real binary, with real upstreams: `mcp-server-sqlite` from PyPI (its `write_query`
planned) and the project's rmcp fixture (`store_rows` and `fail` planned):

- a loop of 40 updates is planned, asked once (one question listing every call and the count
  per tool) and applied on accept: the database shows exactly those 40 rows changed, once;
- decline, cancel, expiry, a client that cannot be asked, a forged, an altered, a replayed and
  another tenant's request state send nothing;
- a failing call stops the plan (the calls after it are not sent), or not with
  plan_options(stop_on_error=False);
- a plan past --plan-max-calls or --plan-max-bytes ends the execution as an error, sends
  nothing and asks nothing, even when the code swallows the error; so does a `plan` frame the
  code forges for a tool whose policy is not `plan`, and a `call` frame it forges for a `plan`
  tool is refused;
- personal data the model saw as a token is shown to the user, and sent, restored;
- a session's next call reads the outcomes with plan_results(); the audit trail keeps the plan;
- on both protocol eras, over stdio and HTTP.

Every "nothing was sent" is read from the upstreams' own state (the database, the fixture's
record file), never from the server's words.

    python tests/python/plan_rounds.py BINARY DATA_DIR UPSTREAMS_FILE DB_PATH RECORD_PATH

The upstreams file names `sqlite` (policy: write_query plan) on DB_PATH and `fixture` (policy:
default plan) whose FIXTURE_RECORD is RECORD_PATH. Exits non-zero on the first mismatch. Used by
tests/gateway/plans.rs.
"""

import asyncio
import glob
import json
import os
import sqlite3
import sys

from mcp_types import ElicitResult, InputRequiredResult

from confirm_rounds import answering, by_hand, http_maker, stdio_maker, tenants_on
from original_examples import check, http_server, payload

ROWS = 50  # the contacts table's rows; the loop updates the first 40
MAX_CALLS, MAX_BYTES = 45, 20000  # the servers' --plan-max-calls and --plan-max-bytes
WAIT = 5  # their --confirm-wait-secs: long enough for a loaded machine's rounds, short to wait out


def update_code(label, n=40):
    """Sandbox code that plans `n` updates, each marking one contact with `label`."""
    return f"""
from servers.sqlite import write_query
planned = []
for i in range(1, {n} + 1):
    planned.append(write_query(query=f"UPDATE contacts SET touched = touched + 1, note = '{label}' WHERE id = {{i}}"))
try:
    planned[0]["rows"]
    used = None
except PlanError as e:
    used = str(e)
result = {{"planned": len(planned), "first": repr(planned[0]), "is_planned": isinstance(planned[0], Planned),
          "used": used}}
"""


class Db:
    """The sqlite upstream's database, read and reset by the test itself."""

    def __init__(self, path):
        self.path = path
        with sqlite3.connect(path) as c:
            c.execute("CREATE TABLE IF NOT EXISTS contacts "
                      "(id INTEGER PRIMARY KEY, email TEXT, note TEXT, touched INTEGER NOT NULL DEFAULT 0)")
            c.execute("DELETE FROM contacts")
            c.executemany("INSERT INTO contacts (id) VALUES (?)", [(i,) for i in range(1, ROWS + 1)])

    def reset(self):
        with sqlite3.connect(self.path) as c:
            c.execute("UPDATE contacts SET touched = 0, note = NULL, email = NULL")

    def touched(self):
        """{id: times updated} of the rows any update reached."""
        with sqlite3.connect(self.path) as c:
            return dict(c.execute("SELECT id, touched FROM contacts WHERE touched != 0").fetchall())

    def expect_untouched(self, what):
        t = self.touched()
        check(t == {}, f"{what}: the database shows rows changed: {t}")

    def expect_forty(self, label, what):
        t = self.touched()
        check(t == {i: 1 for i in range(1, 41)}, f"{what}: not exactly rows 1-40 changed once: {t}")
        with sqlite3.connect(self.path) as c:
            notes = {n for (n,) in c.execute("SELECT DISTINCT note FROM contacts WHERE touched != 0")}
        check(notes == {label}, f"{what}: notes {notes}")

    def email(self, row):
        with sqlite3.connect(self.path) as c:
            return c.execute("SELECT email FROM contacts WHERE id = ?", (row,)).fetchone()[0]


class Record:
    """The fixture's record file: one JSON line per row `store_rows` stored."""

    def __init__(self, path):
        self.path = path

    def stored(self, label):
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            rows = [json.loads(line) for line in f]
        return [r["n"] for r in rows if r.get("label") == label]


def checked_plan(p, what, status, calls):
    plan = p.get("plan")
    check(plan is not None, f"{what}: no plan in the response: {p}")
    check(plan["status"] == status and plan["calls"] == calls, f"{what}: plan {plan}")
    check(plan["id"].startswith("plan_") and plan["message"], f"{what}: plan {plan}")
    return plan


async def accepted(make, era, label, db):
    """40 updates planned, asked once, applied on accept; the code sees Planned values."""
    db.reset()
    asked = []
    async with make(elicitation_callback=answering(["accept"], asked), mode=era) as c:
        p = payload(await c.call_tool("execute_code", {"code": update_code(label)}))
    check(p["success"], f"{label}: {p}")
    r = p["result"]
    check(r["planned"] == 40 and r["is_planned"] and r["first"].startswith("<Planned call 1: sqlite/write_query"),
          f"{label}: the code's view: {r}")
    check("is planned, not called" in r["used"] and "plan_results()" in r["used"], f"{label}: {r['used']}")
    check(len(asked) == 1, f"{label}: asked {len(asked)} times")
    q = asked[0]
    check("planned 40 calls" in q and "sqlite/write_query ×40" in q and "40. sqlite/write_query" in q
          and f"note = '{label}' WHERE id = 40" in q, f"{label}: the question: {q[:600]}")
    plan = checked_plan(p, label, "applied", 40)
    check(plan["ok"] == 40 and plan["failed"] == 0 and plan["not_sent"] == 0, f"{label}: {plan}")
    check(plan["per_tool"] == {"sqlite/write_query": 40}, f"{label}: {plan}")
    db.expect_forty(label, label)
    return plan["id"]


async def refused_answers(make, era, label, db):
    """Decline and cancel send nothing; a client that cannot be asked neither."""
    for action, status in [("decline", "declined"), ("cancel", "cancelled")]:
        db.reset()
        asked = []
        async with make(elicitation_callback=answering([action], asked), mode=era) as c:
            p = payload(await c.call_tool("execute_code", {"code": update_code(f"{label} {action}")}))
        check(len(asked) == 1, f"{label} {action}: asked {asked}")
        checked_plan(p, f"{label} {action}", status, 40)
        db.expect_untouched(f"{label} {action}")
    db.reset()
    async with make(mode=era) as c:
        p = payload(await c.call_tool("execute_code", {"code": update_code(f"{label} unaskable")}))
    plan = checked_plan(p, f"{label} unaskable", "not_asked", 40)
    check("cannot answer questions" in plan["message"], f"{label}: {plan}")
    db.expect_untouched(f"{label} unaskable")


async def legacy_expiry(make, label, db):
    """A legacy elicitation nobody answers within --confirm-wait-secs: expired, nothing sent."""
    db.reset()

    async def slow(_context, _params):
        await asyncio.sleep(WAIT + 3)
        return ElicitResult(action="accept")
    async with make(elicitation_callback=slow, mode="legacy") as c:
        p = payload(await c.call_tool("execute_code", {"code": update_code(f"{label} late")}))
    checked_plan(p, f"{label} late", "expired", 40)
    await asyncio.sleep(WAIT)  # the late accept arrives: it must change nothing
    db.expect_untouched(f"{label} late")


def accept(first):
    return {key: ElicitResult(action="accept") for key in first.input_requests}


async def sealed(make, label, db, make_other_tenant=None):
    """2026-07-28: the plan travels as one input request; forged, altered, replayed (and
    another tenant's) request states send nothing; the genuine one applies the plan once."""
    db.reset()
    async with make(**{"elicitation_callback": answering(["accept"], [])}) as c:
        code = update_code(f"{label} sealed")
        first = await by_hand(c, code)
        check(isinstance(first, InputRequiredResult) and len(first.input_requests) == 1, f"{label}: {first}")
        key = next(iter(first.input_requests))
        check(key.startswith("plan-plan_"), f"{label}: the question's key {key}")
        state = first.request_state
        forged = "rs1." + "A" * 40
        i = len(state) // 2
        altered = state[:i] + ("A" if state[i] != "A" else "B") + state[i + 1:]
        for bad, words in [(forged, "not issued by this server"), (altered, "not issued by this server")]:
            r = await by_hand(c, code, bad, accept(first))
            check(r.is_error and words in r.content[0].text, f"{label}: {r}")
            db.expect_untouched(f"{label}: a forged or altered state")
        if make_other_tenant is not None:
            async with make_other_tenant(**{"elicitation_callback": answering(["accept"], [])}) as bob:
                r = await by_hand(bob, code, state, accept(first))
            check(r.is_error and "another tenant" in r.content[0].text, f"{label}: {r}")
            db.expect_untouched(f"{label}: another tenant's answer")
        done = await by_hand(c, code, state, accept(first))
        check(not isinstance(done, InputRequiredResult), f"{label}: {done}")
        checked_plan(payload(done), f"{label} sealed", "applied", 40)
        db.expect_forty(f"{label} sealed", f"{label}: accepted")
        again = await by_hand(c, code, state, accept(first))
        # Answered already ("nothing ran"), or, on a slow machine, past its wait ("expired").
        words = again.content[0].text if again.is_error else ""
        check("nothing ran" in words or "expired" in words, f"{label}: replay {again}")
        db.expect_forty(f"{label} sealed", f"{label}: replayed")


async def sealed_expiry(make, label, db):
    """A paused plan nobody answers expires; its state then sends nothing."""
    db.reset()
    async with make(**{"elicitation_callback": answering(["accept"], [])}) as c:
        code = update_code(f"{label} expires")
        first = await by_hand(c, code)
        check(isinstance(first, InputRequiredResult), f"{label}: {first}")
        await asyncio.sleep(WAIT + 2)
        r = await by_hand(c, code, first.request_state, accept(first))
        check(r.is_error and "expired" in r.content[0].text, f"{label}: {r}")
        db.expect_untouched(f"{label}: expired")


def rows_code(label, stop=True):
    """Plans store_rows 1, 2, then a failing call, then store_rows 4."""
    options = "" if stop else "plan_options(stop_on_error=False)\n"
    return options + f"""
from servers.fixture import store_rows, fail
store_rows(rows=[{{"label": {label!r}, "n": 1}}])
store_rows(rows=[{{"label": {label!r}, "n": 2}}])
fail(message="boom at 3")
store_rows(rows=[{{"label": {label!r}, "n": 4}}])
"""


async def stop_on_error(make, label, record):
    async with make(elicitation_callback=answering(["accept"], [])) as c:
        p = payload(await c.call_tool("execute_code", {"code": rows_code(f"{label} stop")}))
        plan = checked_plan(p, f"{label} stop", "stopped", 4)
        check(plan["ok"] == 2 and plan["failed"] == 1 and plan["not_sent"] == 1, f"{label}: {plan}")
        f = plan["failures"][0]
        check(f["call"] == 3 and f["tool"] == "fail" and "boom at 3" in f["error"], f"{label}: {plan}")
        check("were not sent" in plan["message"], f"{label}: {plan['message']}")
        check(record.stored(f"{label} stop") == [1, 2], f"{label}: stored {record.stored(f'{label} stop')}")
        p = payload(await c.call_tool("execute_code", {"code": rows_code(f"{label} go on", stop=False)}))
        plan = checked_plan(p, f"{label} go on", "applied_with_errors", 4)
        check(plan["ok"] == 3 and plan["failed"] == 1 and not plan["stop_on_error"], f"{label}: {plan}")
        check(record.stored(f"{label} go on") == [1, 2, 4], f"{label}: {record.stored(f'{label} go on')}")


async def bounds(make, label, db):
    """Past either bound: an error, nothing asked, nothing sent, even if the code catches it."""
    too_big = "x" * (MAX_BYTES + 10)
    for what, code, words in [
        ("calls", update_code(f"{label} many", MAX_CALLS + 1), "--plan-max-calls"),
        ("calls, caught", "from servers.sqlite import write_query\n"
         f"for i in range({MAX_CALLS + 5}):\n"
         "    try:\n"
         "        write_query(query='UPDATE contacts SET touched = touched + 1 WHERE id = 1')\n"
         "    except PlanError:\n"
         "        pass\n", "--plan-max-calls"),
        ("bytes", "from servers.sqlite import write_query\n"
         "write_query(query='UPDATE contacts SET touched = touched + 1 WHERE id = 2')\n"
         f"write_query(query='UPDATE contacts SET note = \"{too_big}\" WHERE id = 3')\n", "--plan-max-bytes"),
    ]:
        db.reset()
        asked = []
        async with make(elicitation_callback=answering(["accept"], asked)) as c:
            r = await c.call_tool("execute_code", {"code": code})
        p = payload(r)
        check(r.is_error and not p["success"] and p["error_type"] == "PlanError" and words in p["error"],
              f"{label} {what}: {p.get('error_type')} {p.get('error')}")
        checked_plan(p, f"{label} {what}", "refused", p["plan"]["calls"])
        check(asked == [], f"{label} {what}: asked {asked}")
        db.expect_untouched(f"{label} {what}")


async def forged_frames(make, label, db):
    """Frames code writes itself: a `plan` frame for a tool whose policy is not `plan` refuses
    the whole plan; a `call` frame for a `plan` tool is refused. Nothing is asked or sent."""
    db.reset()
    asked = []
    forged_plan = ("import cem_helpers\n"
                   "from servers.sqlite import write_query\n"
                   "write_query(query='UPDATE contacts SET touched = touched + 1 WHERE id = 1')\n"
                   "cem_helpers._chan.send({'type': 'plan', 'server': 'sqlite', 'tool': 'create_table',"
                   " 'arguments': {'query': 'CREATE TABLE forged (x INTEGER)'}})\n")
    forged_call = ("import cem_helpers\n"
                   "try:\n"
                   "    cem_helpers._chan.call('call_tool', {'server': 'sqlite', 'tool': 'write_query',"
                   " 'arguments': {'query': 'UPDATE contacts SET touched = 9 WHERE id = 2'}})\n"
                   "    result = 'sent'\n"
                   "except RuntimeError as e:\n"
                   "    result = str(e)\n")
    async with make(elicitation_callback=answering(["accept"], asked)) as c:
        r = await c.call_tool("execute_code", {"code": forged_plan})
        p = payload(r)
        check(r.is_error and p["error_type"] == "PlanError" and "not `plan`" in p["error"],
              f"{label}: a forged plan frame: {p.get('error')}")
        checked_plan(p, f"{label} forged plan", "refused", 1)
        p = payload(await c.call_tool("execute_code", {"code": forged_call}))
        check("has the policy `plan`" in p["result"], f"{label}: a forged call frame: {p['result']}")
    check(asked == [], f"{label}: asked {asked}")
    db.expect_untouched(f"{label} forged frames")
    with sqlite3.connect(db.path) as c:
        tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    check(tables == ["contacts"], f"{label}: the forged plan created a table: {tables}")


async def personal_data(make, label, db):
    """A value the model saw as a token is shown to the user, and sent, as itself."""
    db.reset()
    asked = []
    async with make(elicitation_callback=answering(["accept"], asked)) as c:
        p = payload(await c.call_tool("execute_code", {"code": "result = 'carol.jones@example.com'"}))
        token = p["result"]
        check(token.startswith("[EMAIL_"), f"{label}: not tokenized: {token}")
        code = ("from servers.sqlite import write_query\n"
                f"write_query(query=\"UPDATE contacts SET email = '{token}', touched = 1 WHERE id = 41\")\n")
        p = payload(await c.call_tool("execute_code", {"code": code}))
    checked_plan(p, f"{label} pii", "applied", 1)
    check(len(asked) == 1 and "carol.jones@example.com" in asked[0] and token not in asked[0],
          f"{label}: the question shows {asked}")
    check(db.email(41) == "carol.jones@example.com", f"{label}: the row holds {db.email(41)!r}")
    check("carol.jones@example.com" not in json.dumps(p), f"{label}: the response shows the email: {p}")


async def session_results(make, label):
    """The next call of a session reads the plan's outcomes."""
    async with make(elicitation_callback=answering(["accept"], [])) as c:
        code = rows_code(f"{label} session", stop=True).replace('fail(message="boom at 3")\n', "")
        p = payload(await c.call_tool("execute_code", {"code": code + "x = 1\n", "session": "new"}))
        plan = checked_plan(p, f"{label} session", "applied", 3)
        handle = p["session"]
        p = payload(await c.call_tool("execute_code", {"code": "result = plan_results()", "session": handle}))
        r = p["result"]
        check(r["plan"] == plan["id"] and r["status"] == "applied" and len(r["calls"]) == 3, f"{label}: {r}")
        check(all(c["outcome"] == "ok" and c["result"] == {"stored": 1} for c in r["calls"]), f"{label}: {r}")
        p = payload(await c.call_tool("execute_code", {"code": "result = plan_results()", "session": handle}))
        check(p["result"] is None, f"{label}: a call that planned nothing leaves none: {p['result']}")
        p = payload(await c.call_tool("execute_code", {"code": "result = plan_results()"}))
        check(p["result"] is None, f"{label}: without a session: {p['result']}")
    return plan["id"]


def audited(data_dir, plan_id, what):
    """The audit trail's record of the plan `plan_id`."""
    for path in glob.glob(os.path.join(data_dir, "audit", "*", "*")):
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                if (record.get("plan") or {}).get("id") == plan_id:
                    return record["plan"]
    raise AssertionError(f"{what}: no audit record of {plan_id} under {data_dir}")


async def main(binary, data_dir, upstreams, db_path, record_path):
    db, record = Db(db_path), Record(record_path)
    common = ["--workspace-quota-mb", "0", "--upstreams", upstreams, "--confirm-wait-secs", str(WAIT),
              "--plan-max-calls", str(MAX_CALLS), "--plan-max-bytes", str(MAX_BYTES)]
    stdio_data = f"{data_dir}/stdio"
    stdio = stdio_maker(binary, ["--data-dir", stdio_data, "--workspace", f"{data_dir}/ws-stdio", *common])
    for era in ["auto", "legacy"]:
        plan_id = await accepted(stdio, era, f"stdio/{era}", db)
        await refused_answers(stdio, era, f"stdio/{era}", db)
    trail = audited(stdio_data, plan_id, "stdio")
    check(trail["status"] == "applied" and trail["answer"] == "accept" and len(trail["calls"]) == 40
          and all(c["outcome"] == "ok" and len(c["arguments_sha256"]) == 64 for c in trail["calls"]),
          f"the audit record: {trail}")
    check(len({c["arguments_sha256"] for c in trail["calls"]}) == 40, "each call its own digest")
    await legacy_expiry(stdio, "stdio", db)
    await sealed(stdio, "stdio", db)
    await sealed_expiry(stdio, "stdio", db)
    await stop_on_error(stdio, "stdio", record)
    await bounds(stdio, "stdio", db)
    await forged_frames(stdio, "stdio", db)
    await personal_data(stdio, "stdio", db)
    plan_id = await session_results(stdio, "stdio")
    check(audited(stdio_data, plan_id, "session")["status"] == "applied", "the session's plan audited")

    with http_server(binary, [*tenants_on(f"{data_dir}/http"), *common]) as url:
        alice = http_maker(url, "alice-token-0123456789abcdef0123456789")
        bob = http_maker(url, "bob-token-0123456789abcdef0123456789ab")
        for era in ["auto", "legacy"]:
            await accepted(alice, era, f"http/{era}", db)
        await refused_answers(alice, "auto", "http/auto", db)
        await sealed(alice, "http", db, make_other_tenant=bob)
        await session_results(bob, "http")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
