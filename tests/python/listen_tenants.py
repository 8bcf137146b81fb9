"""`subscriptions/listen` (MCP 2026-07-28) and a `tools/list` that follows the upstreams, with the
official MCP Python SDK's `Client` against the real binary:

- over streamable HTTP with two tenants (bearer tokens), on 2026-07-28: both listen with
  resources_list_changed, the same resource_subscriptions and tools_list_changed; alice's writes
  (write_workspace_file, and execute_code writing a file) and her upstream's new tool reach
  alice's stream and never bob's, and bob's write never reaches alice's: each stream is kept
  whole from its start, and every event on it is counted, whatever its kind;
  when alice's upstream `growing` (tests/python/growing_upstream.py, configured for alice only)
  adds a tool, alice hears tools_list_changed, her tools/list (served through the SDK's response
  cache, which the event evicts) names one more tool and a new package version, and bob's stays
  as it was; a stream asking for too many URIs ends with an error that says what to do; the
  cache hints are private with tokens;
- over stdio on 2026-07-28: the same listen for the only user, and the hints without tokens
  (public for the fixed listings, private once upstreams are named);
- over stdio in the handshake era (mode="legacy"): resources/subscribe still announces a file,
  and notifications/tools/list_changed reaches the session when the upstream grows.

    python tests/python/listen_tenants.py BINARY DATA_DIR UPSTREAMS_FILE

Exits non-zero with a message on the first mismatch. Used by tests/listen.rs.
"""

import asyncio
import contextlib
import os
import sys
import time
import warnings

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated, SubscriptionLost, ToolsListChanged

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import check, http_server, payload, server_env  # noqa: E402

ALICE = "alice-0123456789abcdef0123456789abcdef"
BOB = "bob-fedcba9876543210fedcba9876543210"
MODERN = "2026-07-28"
PACKAGE_KEY = "code-execution-mcp/servers-package"
# How long any one expected event may take before the script gives up (not a timing assertion:
# a generous bound so a broken server fails instead of hanging).
WAIT = 120


def uri(name):
    return f"workspace:///{name}"


class Heard:
    """The events of one listen stream, gathered by a task as they arrive, with their times.
    Nothing is ever dropped: a check looks at the events since a `mark`, so an event that
    arrived where it should not stays there to be counted."""

    def __init__(self, sub, label):
        self.sub = sub
        self.label = label
        self.events = []  # (time.perf_counter() at arrival, event)

    async def gather(self):
        async for event in self.sub:
            self.events.append((time.perf_counter(), event))

    def mark(self):
        """Where the stream is now, for `seen` and `until`."""
        return len(self.events)

    def seen(self, since=0):
        return [e for _, e in self.events[since:]]

    async def until(self, wanted, what, since=0):
        """Waits until every event of `wanted` was heard after `since`."""
        try:
            with anyio.fail_after(WAIT):
                while not all(w in self.seen(since) for w in wanted):
                    await anyio.sleep(0.005)
        except TimeoutError:
            raise AssertionError(f"{self.label}: {what}: no {wanted} within {WAIT} s; heard {self.seen(since)}")


@contextlib.asynccontextmanager
async def http_client(url, token, mode=MODERN):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(180)) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            yield client


@contextlib.asynccontextmanager
async def listening(stack_tg, client, label, uris):
    """A listen stream of `client` for both list changes and `uris`, gathered in `stack_tg`."""
    async with client.listen(resources_list_changed=True, tools_list_changed=True,
                             resource_subscriptions=uris) as sub:
        heard = Heard(sub, label)
        stack_tg.start_soon(heard.gather)
        yield heard


async def call_ok(client, tool, args, label):
    r = await client.call_tool(tool, args)
    p = payload(r)
    check(not r.is_error, f"{label}: {tool} failed: {p}")
    return p


def execute_code_tool(listed):
    return next(t for t in listed.tools if t.name == "execute_code")


def check_hints(result, ttl, scope, label):
    check((result.ttl_ms, result.cache_scope) == (ttl, scope),
          f"{label}: hints {result.ttl_ms}/{result.cache_scope}, wanted {ttl}/{scope}")


async def tools_naming(client, wanted, label):
    """tools/list (past the cache) once its execute_code description contains `wanted`: the
    upstream connects in the background after the server starts."""
    with anyio.fail_after(WAIT):
        while True:
            listed = await client.list_tools(cache_mode="refresh")
            if wanted in (execute_code_tool(listed).description or ""):
                return listed
            await anyio.sleep(0.2)


async def grow(client, label):
    """Sandbox code calls the upstream's `grow`, which adds a tool to its list."""
    # The SDK wraps the tool's `int` as {"result": N}.
    p = await call_ok(client, "execute_code", {"code": "from servers.growing import grow\nresult = grow()['result']"}, label)
    check(p["success"] and isinstance(p["result"], int), f"{label}: grow: {p}")
    return p["result"]


async def over_http_with_tenants(binary, data_dir, upstreams):
    args = ["--data-dir", f"{data_dir}/http", "--tokens", f"alice:{ALICE},bob:{BOB}",
            "--upstreams", upstreams, "--workspace-quota-mb", "0"]
    with http_server(binary, args) as url:
        async with contextlib.AsyncExitStack() as stack:
            alice = await stack.enter_async_context(http_client(url, ALICE))
            bob = await stack.enter_async_context(http_client(url, BOB))
            for name, c in [("alice", alice), ("bob", bob)]:
                check(c.session.protocol_version == MODERN, f"{name}: negotiated {c.session.protocol_version}")

            # What each tenant's tools/list says, and its hints (with tokens every answer is private).
            before = await tools_naming(alice, "`from servers import growing` (2 tools)", "alice")
            names = [t.name for t in before.tools]
            check(names == sorted(names) and len(names) >= 15, f"alice: tools not in name order: {names}")
            check_hints(before, 10_000, "private", "alice tools/list")
            described = execute_code_tool(before).description
            check(described.endswith("search_tools finds their tools."), f"alice: {described}")
            package = (execute_code_tool(before).meta or {}).get(PACKAGE_KEY)
            check(package, f"alice: no {PACKAGE_KEY} in execute_code's _meta: {execute_code_tool(before).meta}")
            bobs = await bob.list_tools(cache_mode="refresh")
            check("from servers import" not in execute_code_tool(bobs).description,
                  f"bob's execute_code names alice's upstream: {execute_code_tool(bobs).description}")
            check([t.name for t in bobs.tools] == names, "bob lists other tools than alice")
            check_hints(bobs, 3_600_000, "private", "bob tools/list")
            check_hints(await bob.list_resource_templates(cache_mode="refresh"), 3_600_000, "private",
                        "bob resources/templates/list")
            check_hints(await bob.list_resources(cache_mode="refresh"), 0, "private", "bob resources/list")

            # Both listen to the same URIs; only each one's own changes may reach it.
            watched = [uri("a.txt"), uri("from-code.txt"), uri("sentinel.txt"), uri("marker.txt"),
                       "file:///etc/passwd"]
            tg = await stack.enter_async_context(anyio.create_task_group())
            a = await stack.enter_async_context(listening(tg, alice, "alice", watched))
            b = await stack.enter_async_context(listening(tg, bob, "bob", watched))
            check(sorted(a.sub.honored.resource_subscriptions or []) == sorted(watched[:4])
                  and a.sub.honored.tools_list_changed and a.sub.honored.resources_list_changed,
                  f"alice: honored {a.sub.honored}")

            await call_ok(alice, "write_workspace_file", {"filename": "a.txt", "content": "one"}, "alice")
            await a.until([ResourceUpdated(uri=uri("a.txt")), ResourcesListChanged()], "write_workspace_file")
            step = a.mark()
            await call_ok(alice, "execute_code", {"code": "write_file('from-code.txt', 'x')"}, "alice")
            await a.until([ResourceUpdated(uri=uri("from-code.txt")), ResourcesListChanged()], "execute_code", step)

            # The upstream grows: alice hears it, her cached listing is evicted, and it says so.
            cached = await alice.list_tools()
            check("(2 tools)" in execute_code_tool(cached).description, "alice: cached listing")
            step = a.mark()
            check(await grow(alice, "alice") == 1, "alice: first grow")
            await a.until([ToolsListChanged()], "the upstream's tool list grew", step)
            after = await alice.list_tools()
            described = execute_code_tool(after).description
            check("`from servers import growing` (3 tools)" in described,
                  f"alice: after the upstream grew, execute_code says: {described}")
            check((execute_code_tool(after).meta or {}).get(PACKAGE_KEY) not in (None, package),
                  f"alice: the package version did not change: {execute_code_tool(after).meta}")
            check_hints(after, 10_000, "private", "alice tools/list after")
            check([t.name for t in after.tools] == names, "alice: the tools themselves stay the same")

            # Alice's changes never reach bob. His own write (a new file) is the marker: a stream
            # delivers in order, so anything of alice's that leaked into his would be there
            # before it. From its start, his stream holds that write's two events and nothing else.
            own = [ResourceUpdated(uri=uri("sentinel.txt")), ResourcesListChanged()]
            before_bob = a.mark()
            await call_ok(bob, "write_workspace_file", {"filename": "sentinel.txt", "content": "bob"}, "bob")
            await b.until(own, "bob's own write")
            check(b.seen() == own, f"bob heard more than his own write (alice's changes leaked): {b.seen()}")
            check("from servers import" not in execute_code_tool(await bob.list_tools(cache_mode="refresh")).description,
                  "bob's listing changed with alice's upstream")
            # Bob's write never reaches alice. Her own next write (a new file) is her marker,
            # made after bob's was delivered to him: since just before bob wrote, her stream
            # holds that write's two events and nothing else.
            await call_ok(alice, "write_workspace_file", {"filename": "marker.txt", "content": "two"}, "alice")
            mine = [ResourceUpdated(uri=uri("marker.txt")), ResourcesListChanged()]
            await a.until(mine, "alice's marker write", before_bob)
            check(a.seen(before_bob) == mine,
                  f"alice heard more than her own write (bob's changes leaked): {a.seen(before_bob)}")

            # A stream asking for more URIs than one may hold ends with an error saying what to do.
            too_many = [uri(f"f{i}.txt") for i in range(1001)]
            try:
                async with alice.listen(resource_subscriptions=too_many) as sub:
                    async for event in sub:
                        raise AssertionError(f"alice: an event on a refused stream: {event}")
                raise AssertionError("alice: a stream of 1001 URIs ended gracefully")
            except SubscriptionLost as lost:
                why = str(lost.__cause__)
                check("at most 1000 resource URIs" in why and "split them" in why, f"alice: refused with {why!r}")
    print("http: each tenant heard only its own changes; tools/list followed alice's upstream")


async def over_stdio(binary, data_dir, upstreams):
    common = ["serve", "--workspace-quota-mb", "0", "--skills-dir", f"{data_dir}/skills",
              "--pool-size", "1", "--pool-max", "1"]

    # Without upstreams: the fixed listings are public and long-lived.
    params = StdioServerParameters(command=binary, env=server_env(), args=[*common, "--workspace", f"{data_dir}/ws-plain"])
    async with Client(params, mode="auto") as client:
        check(client.session.protocol_version == MODERN, f"stdio: negotiated {client.session.protocol_version}")
        listed = await client.list_tools(cache_mode="refresh")
        check_hints(listed, 3_600_000, "public", "stdio tools/list without upstreams")
        check("from servers import" not in execute_code_tool(listed).description, "stdio: a sentence without upstreams")
        check_hints(await client.list_resource_templates(cache_mode="refresh"), 3_600_000, "public",
                    "stdio resources/templates/list")
        check_hints(await client.list_resources(cache_mode="refresh"), 0, "private", "stdio resources/list")

    # With upstreams, on 2026-07-28: listen.
    params = StdioServerParameters(command=binary, env=server_env(), args=[*common, "--workspace", f"{data_dir}/ws-modern",
                                                         "--upstreams", upstreams])
    async with Client(params, mode="auto") as client, anyio.create_task_group() as tg:
        check(client.session.protocol_version == MODERN, f"stdio: negotiated {client.session.protocol_version}")
        listed = await tools_naming(client, "`from servers import growing` (2 tools)", "stdio")
        check_hints(listed, 10_000, "private", "stdio tools/list with upstreams")
        async with listening(tg, client, "stdio", [uri("s.txt"), uri("code.txt")]) as heard:
            await call_ok(client, "write_workspace_file", {"filename": "s.txt", "content": "1"}, "stdio")
            await heard.until([ResourceUpdated(uri=uri("s.txt")), ResourcesListChanged()], "write_workspace_file")
            await call_ok(client, "execute_code", {"code": "write_file('code.txt', 'x')"}, "stdio")
            await heard.until([ResourceUpdated(uri=uri("code.txt"))], "execute_code")
            await grow(client, "stdio")
            await heard.until([ToolsListChanged()], "the upstream's tool list grew")
            listed = await client.list_tools()
            check("`from servers import growing` (3 tools)" in execute_code_tool(listed).description,
                  f"stdio: {execute_code_tool(listed).description}")
    print("stdio 2026-07-28: listen heard writes, code's files and the upstream's new tool")

    # The handshake era: resources/subscribe, and tools/list_changed on the session.
    notes = []

    async def note(message):
        if not isinstance(message, Exception):
            notes.append(message)

    def noted(kind, uri_=None):
        return any(type(m).__name__ == kind and (uri_ is None or str(getattr(m.params, "uri", "")) == uri_)
                   for m in notes)

    params = StdioServerParameters(command=binary, env=server_env(), args=[*common, "--workspace", f"{data_dir}/ws-legacy",
                                                         "--upstreams", upstreams])
    async with Client(params, mode="legacy", message_handler=note) as client:
        check(client.session.protocol_version != MODERN, "legacy: negotiated 2026-07-28")
        caps = client.session.server_capabilities
        check(caps.tools.list_changed and caps.resources.subscribe, f"legacy: capabilities {caps}")
        await tools_naming(client, "`from servers import growing` (2 tools)", "legacy")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated as of 2026-07-28, which is the point here
            await client.subscribe_resource(uri("l.txt"))
        await call_ok(client, "write_workspace_file", {"filename": "l.txt", "content": "1"}, "legacy")
        with anyio.fail_after(WAIT):
            while not noted("ResourceUpdatedNotification", uri("l.txt")):
                await anyio.sleep(0.005)
        await grow(client, "legacy")
        with anyio.fail_after(WAIT):
            while not noted("ToolListChangedNotification"):
                await anyio.sleep(0.005)
        listed = await client.list_tools()
        check("`from servers import growing` (3 tools)" in execute_code_tool(listed).description,
              f"legacy: {execute_code_tool(listed).description}")
    print("stdio handshake era: resources/subscribe and tools/list_changed still reach the session")


async def main(binary, data_dir, upstreams):
    await over_http_with_tenants(binary, data_dir, upstreams)
    await over_stdio(binary, data_dir, upstreams)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
