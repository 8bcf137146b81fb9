"""Saved skills as MCP skills (the Skills extension, `io.modelcontextprotocol/skills`), with the
official MCP Python SDK against the real binary, over stdio and streamable HTTP, on a legacy
session and on a 2026-07-28 one: the extension is declared; `skills/list` pages through every
published skill; `skills/get` and `resources/read` of the `skill://` files agree with it (sizes,
digests, and a frontmatter that a YAML reader finds in SKILL.md); personal data in a skill reaches
the client as tokens only; names without an Agent Skills form are left out; URIs that name nothing
are refused with -32602 before the store; a new version shows, a deleted skill is gone; and with
bearer tokens, each tenant sees only its own skills.

    python tests/python/skill_resources.py BINARY DATA_DIR

Exits non-zero with a message on the first mismatch. Used by tests/python_client.rs. The SDK has
no client for the extension, so its requests go through `ClientSession.send_request`.
"""

import asyncio
import hashlib
import json
import os
import secrets
import sys
from typing import Any, Literal

import httpx2
import yaml
from mcp import StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams, RequestParams
from pydantic import TypeAdapter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, client_for, http_server, payload  # noqa: E402

EXTENSION = "io.modelcontextprotocol/skills"
EMAIL = "ann.lee@example.com"
SECRET_NAME = "sk_live_4ec39hqlyjwdarjtt1zdp7dc"
INVALID_PARAMS = -32602
# Skills per skills/list page (src/mcp/skill_resources.rs).
PAGE_SIZE = 50


class ListSkills(types.PaginatedRequest[Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"


class GetSkillParams(RequestParams):
    uri: str


class GetSkill(types.Request[GetSkillParams, Literal["skills/get"]]):
    method: Literal["skills/get"] = "skills/get"


ANY = TypeAdapter(dict[str, Any])


async def skills_page(client, cursor=None):
    return await client.session.send_request(ListSkills(params=PaginatedRequestParams(cursor=cursor)), ANY)


async def all_skills(client, label):
    """Every entry of skills/list, following the cursor; checks that pages are full but the last."""
    entries, cursor, pages = [], None, 0
    while True:
        page = await skills_page(client, cursor)
        pages += 1
        entries += page["skills"]
        cursor = page.get("nextCursor")
        if cursor is None:
            return entries, pages
        check(len(page["skills"]) == PAGE_SIZE, f"{label}: a page before the last holds {len(page['skills'])}")


async def get_skill(client, uri):
    return (await client.session.send_request(GetSkill(params=GetSkillParams(uri=uri)), ANY))["skill"]


async def read_text(client, uri):
    """The one text content of a resource (refreshed: skills change under the same URI)."""
    contents = (await client.read_resource(uri, cache_mode="refresh")).contents
    check(len(contents) == 1 and hasattr(contents[0], "text"), f"{uri}: contents {contents}")
    return contents[0]


async def refused(label, what, call, words):
    try:
        got = await call
    except MCPError as e:
        check(e.code == INVALID_PARAMS and words in e.message,
              f"{label}: {what} refused with {e.code} {e.message!r}; expected {INVALID_PARAMS} saying {words!r}")
        return
    raise AssertionError(f"{label}: {what} was answered: {got}")


def frontmatter_of(text):
    check(text.startswith("---\n"), f"SKILL.md does not start with frontmatter: {text[:80]!r}")
    head, _, _ = text[4:].partition("\n---\n")
    return yaml.safe_load(head)


async def save(client, label, name, code, description=""):
    r = await client.call_tool("save_skill", {"name": name, "code": code, "description": description})
    check(not r.is_error and payload(r)["success"], f"{label}: save_skill {name}: {payload(r)}")


async def verified(client, label, entry):
    """Reads every file of `entry`, checking size, digest and SKILL.md's frontmatter; returns the
    texts by URI."""
    texts = {}
    for resource in entry["resources"]:
        content = await read_text(client, resource["uri"])
        data = content.text.encode()
        check(len(data) == resource["size"], f"{label}: {resource['uri']} is {len(data)} bytes: {resource}")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        check(digest == resource["digest"], f"{label}: {resource['uri']} digest {digest}: {resource}")
        texts[resource["uri"]] = content
    skill_md = texts[entry["uri"]]
    check(skill_md.mime_type == "text/markdown", f"{label}: SKILL.md mime {skill_md.mime_type}")
    found = frontmatter_of(skill_md.text)
    check(found == entry["frontmatter"], f"{label}: SKILL.md frontmatter {found} != {entry['frontmatter']}")
    return {uri: c.text for uri, c in texts.items()}


async def skill_resources(client, label):
    extensions = client.server_capabilities.extensions or {}
    check(EXTENSION in extensions, f"{label}: extensions {extensions}")
    check(client.server_capabilities.resources is not None, f"{label}: no resources capability")

    code = f"def csv_rows(text):\n    # questions to {EMAIL}\n    return [l.split(',') for l in text.splitlines()]\n"
    await save(client, label, "csv_rows", code, f"Split CSV text into rows; ask {EMAIL}")
    await save(client, label, "CamelCase", "def CamelCase(): return 1\n", "no Agent Skills name")
    # A name the PII engine reads as a secret (a Stripe key): its URI would show it.
    p = payload(await client.call_tool("sanitize_pii", {"text": SECRET_NAME}))
    check(SECRET_NAME not in p["sanitized_text"], f"{label}: {SECRET_NAME} is not a secret to the engine: {p}")
    await save(client, label, SECRET_NAME, f"def {SECRET_NAME}(): return 1\n")
    for i in range(PAGE_SIZE + 5):
        await save(client, label, f"bulk_{i:02}", f"def bulk_{i:02}(): return {i}\n")

    entries, pages = await all_skills(client, label)
    check(pages >= 2, f"{label}: {len(entries)} skills came in {pages} page(s)")
    names = [e["frontmatter"]["name"] for e in entries]
    check(len(names) == len(set(names)), f"{label}: a skill is listed twice: {names}")
    for name in ["csv-rows", "csv-to-dicts", "top-n", "bulk-00", f"bulk-{PAGE_SIZE + 4}"]:
        check(name in names, f"{label}: {name} not listed: {names}")
    check(not any("camel" in n.lower() for n in names), f"{label}: a name without an Agent Skills form: {names}")
    check(not any(n.startswith("sk-live") for n in names), f"{label}: a name that is a secret: {names}")
    check(EMAIL not in json.dumps(entries), f"{label}: the email reached skills/list")

    entry = next(e for e in entries if e["frontmatter"]["name"] == "csv-rows")
    check(entry["uri"] == "skill://csv-rows/SKILL.md", f"{label}: {entry}")
    check([r["uri"] for r in entry["resources"]] == ["skill://csv-rows/SKILL.md", "skill://csv-rows/csv_rows.py"],
          f"{label}: resources {entry['resources']}")
    check(entry["frontmatter"]["metadata"] == {"python-name": "csv_rows", "version": "1"}, f"{label}: {entry}")
    description = entry["frontmatter"]["description"]
    check(description.startswith("Split CSV text into rows; ask [EMAIL_"), f"{label}: description {description!r}")
    check(await get_skill(client, entry["uri"]) == entry, f"{label}: skills/get differs from skills/list")

    texts = await verified(client, label, entry)
    skill_md, source = texts["skill://csv-rows/SKILL.md"], texts["skill://csv-rows/csv_rows.py"]
    check("from skills import csv_rows" in skill_md and "execute_code" in skill_md, f"{label}: {skill_md}")
    check(EMAIL not in skill_md and EMAIL not in source, f"{label}: the email reached a skill file")
    # The code is what load_skill shows: the same privacy path.
    loaded = payload(await client.call_tool("load_skill", {"name": "csv_rows"}))
    check(source == loaded["code"] and "[EMAIL_" in source, f"{label}: code {source!r} != {loaded['code']!r}")
    # The code still runs in the sandbox with the real value.
    r = await client.call_tool("execute_code", {"code": "from skills import csv_rows\nresult = csv_rows('a,b\\nc,d')"})
    check(payload(r).get("result") == [["a", "b"], ["c", "d"]], f"{label}: the skill did not run: {payload(r)}")

    for uri, words in [
        ("skill://no-such-skill/SKILL.md", "no saved skill is named no_such_skill"),
        ("skill://camelcase/SKILL.md", "no saved skill is named camelcase"),
        ("skill://CamelCase/SKILL.md", "contains 'C'"),
        ("skill://csv_rows/SKILL.md", "contains '_'"),
        ("skill://../SKILL.md", "contains '.'"),
        ("skill://%2e%2e/SKILL.md", "contains '%'"),
        ("skill://class/SKILL.md", "Python keyword"),
        (f"skill://{SECRET_NAME.replace('_', '-')}/SKILL.md", "no skill is served"),
        ("skill://csv-rows/sub/SKILL.md", "has no file"),
    ]:
        await refused(label, f"skills/get {uri}", get_skill(client, uri), words)
    for uri, words in [
        ("skill://csv-rows/other.py", "has no file \"other.py\""),
        ("skill://csv-rows/../../etc/passwd", "has no file"),
        ("skill://csv-rows", "is not a skill resource"),
        ("skill://no-such-skill/no_such_skill.py", "no saved skill is named no_such_skill"),
    ]:
        await refused(label, f"resources/read {uri}", read_text(client, uri), words)

    # A new version is a new entry; a deleted skill is gone from both.
    await save(client, label, "csv_rows", "def csv_rows(text):\n    return text.split(',')\n", "Split one CSV line")
    newer = await get_skill(client, entry["uri"])
    check(newer["frontmatter"]["metadata"]["version"] == "2" and newer["resources"] != entry["resources"],
          f"{label}: after save_skill: {newer}")
    texts = await verified(client, label, newer)
    check(texts["skill://csv-rows/csv_rows.py"].endswith("return text.split(',')\n"), f"{label}: {texts}")
    r = await client.call_tool("delete_skill", {"name": "csv_rows"})
    check(not r.is_error, f"{label}: delete_skill: {payload(r)}")
    await refused(label, "skills/get after delete", get_skill(client, entry["uri"]), "no saved skill is named csv_rows")
    await refused(label, "resources/read after delete", read_text(client, entry["uri"]), "no saved skill")
    entries, _ = await all_skills(client, label)
    check("csv-rows" not in [e["frontmatter"]["name"] for e in entries], f"{label}: deleted skill listed")
    print(f"{label}: skill resources ok")


def tenant_transport(url, token):
    return streamable_http_client(
        url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120))


async def tenants_apart(url, tokens, mode):
    """Alice's skill is in alice's listing and not reachable from bob's session, and back."""
    for me, other in [("alice", "bob"), ("bob", "alice")]:
        label = f"http tenants {mode} {me}"
        async with client_for(tenant_transport(url, tokens[me]), mode, label) as client:
            await save(client, label, f"{me}_{mode}_only", f"def {me}_{mode}_only(): return '{me}'\n")
    for me, other in [("alice", "bob"), ("bob", "alice")]:
        label = f"http tenants {mode} {me}"
        async with client_for(tenant_transport(url, tokens[me]), mode, label) as client:
            names = [e["frontmatter"]["name"] for e in (await all_skills(client, label))[0]]
            check(f"{me}-{mode}-only" in names and f"{other}-{mode}-only" not in names, f"{label}: {names}")
            uri = f"skill://{other}-{mode}-only/SKILL.md"
            await refused(label, f"{other}'s skill", get_skill(client, uri), "no saved skill")
            await refused(label, f"{other}'s SKILL.md", read_text(client, uri), "no saved skill")
        print(f"{label}: sees only its own skills")


async def main(binary, data_dir):
    # One copy of the image's /usr for every server here (each has a data directory of its own):
    # a server that starts slowly answers `server/discover` after the SDK's probe gave up, and the
    # "auto" client falls back to the legacy handshake.
    trees = os.environ.get("CEM_IMAGE_TREE_DIR") or f"{data_dir}/image-trees"
    common = ["--image-tree-dir", trees, "--workspace-quota-mb", "0", "--pool-size", "0", "--preload", "none"]
    for mode in ERAS:
        label = f"stdio {mode}"
        params = StdioServerParameters(command=binary, args=["serve", "--data-dir", f"{data_dir}/stdio-{mode}", *common])
        async with client_for(params, mode, label) as client:
            await skill_resources(client, label)

        label = f"http {mode}"
        with http_server(binary, ["--data-dir", f"{data_dir}/http-{mode}", *common]) as url:
            async with client_for(url, mode, label) as client:
                await skill_resources(client, label)

    tokens = {name: secrets.token_hex(32) for name in ["alice", "bob"]}
    tokens_file = os.path.join(data_dir, "tokens")
    with open(tokens_file, "w") as f:
        f.writelines(f"{name}:{token}\n" for name, token in tokens.items())
    with http_server(binary, ["--data-dir", f"{data_dir}/tenants", "--tokens-file", tokens_file, *common]) as url:
        for mode in ERAS:
            await tenants_apart(url, tokens, mode)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
