"""Upload and download links (`request_upload`, `request_download`) with the official MCP Python
SDK against the real binary, the links used with nothing but the standard library's urllib (as
curl or a script would), on a legacy session and on a 2026-07-28 one, over:

- stdio, the link routes served by `--links-listen` on a loopback port named by `--public-url`;
- streamable HTTP with two tenants (`--tokens-file`), the routes beside /mcp on the same port
  (alice on the legacy session, bob on the 2026-07-28 one).

For each of them:

- the session subscribes first (`resources/subscribe` on a legacy session, `subscriptions/listen`
  on a 2026-07-28 one); `request_upload` with a filename answers the url, expiry, name, uri,
  limit and link id; the link's page answers GET and HEAD without spending it; a CSV PUT to it
  lands (201, its size and SHA-256); the session hears the listing changed and the subscribed
  file updated; `list_workspace_files` shows its size and SHA-256; pandas reads it in
  `execute_code`; the same link again is refused 410 and the file on disk is unchanged;
- `request_upload` without a filename, a multipart POST (the body built here) named report.csv
  lands as report.csv; a second one of that name is refused 409, leaving its link usable, which
  a PUT to `URL/NAME` then uses;
- `request_download` of files code wrote: HEAD gives the headers (attachment for a CSV, inline
  for a PNG, nosniff, a sandbox policy, no referrer, no store), a range GET gives 206 and the
  exact bytes and leaves the link usable, a full GET the whole file, a second one 410;
- over HTTP: alice's link with bob's bearer token is refused 403 and writes nothing; alice's
  link with its tenant edited to bob (the signature kept) is refused 404 and writes nothing in
  bob's workspace; with alice's own token it works; over stdio, any bearer token is refused 403;
- the audit trail holds an upload record and a download record under the link ids the tools
  answered, with the files' sizes and SHA-256.

    python tests/python/upload_links.py BINARY DATA_DIR

Exits non-zero with a message on the first mismatch.
"""

import asyncio
import base64
import contextlib
import csv
import glob
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import warnings
from datetime import datetime, timezone

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged, ResourceUpdated

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, client_for, free_port, http_server, payload, server_env  # noqa: E402

ALICE = "alice-0123456789abcdef0123456789abcdef"
BOB = "bob-fedcba9876543210fedcba9876543210"
# How long a notification may take to arrive after the upload's answer ("within a few seconds").
NOTICE_WAIT = 10
# The headers every download answer carries (besides its own Content-Type and -Disposition).
GUARDS = {
    "x-content-type-options": "nosniff",
    "content-security-policy": "sandbox",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
# A 1x1 PNG, written by sandbox code, downloaded inline.
DOT_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

# No proxy for loopback, whatever the environment says.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"{self.status} {self.body[:300]!r}"


def http(method, url, body=None, headers=None):
    """One request with urllib; the answer whatever its status."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with OPENER.open(request, timeout=60) as r:
            return Answer(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        with e:
            return Answer(e.code, e.headers, e.read())


def put(url, data, headers=None):
    return http("PUT", url, data, {"Content-Type": "text/csv", **(headers or {})})


def multipart(field, filename, data, content_type="text/csv"):
    """A multipart/form-data body with one file part; its body and Content-Type."""
    boundary = f"----upload-links-{uuid.uuid4().hex}"
    head = (f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="note"\r\n\r\n'
            f"a field before the file\r\n"
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
            f"Content-Type: {content_type}\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    return head + data + tail, f"multipart/form-data; boundary={boundary}"


def sales_csv(rows, seed):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "region", "amount"])
    for i in range(rows):
        writer.writerow([i, ["north", "south", "east", "west"][(i + seed) % 4], (i * 37 + seed) % 1000])
    return out.getvalue().encode()


def disposition(value):
    """A Content-Disposition's type and its RFC 6266 `filename*` (UTF-8, percent-encoded)."""
    kind, _, rest = (value or "").partition(";")
    match = re.fullmatch(r"\s*filename\*=UTF-8''(\S+)\s*", rest)
    return kind.strip(), urllib.parse.unquote(match.group(1)) if match else None


def files_under(root):
    """The files below `root` (relative paths), nothing when it does not exist."""
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


async def call_ok(client, tool, args, label):
    r = await client.call_tool(tool, args)
    p = payload(r)
    check(not r.is_error and p.get("success", True), f"{label}: {tool} {args} failed: {p}")
    return p


class Heard:
    """What a session was told of resources: on a legacy session the notifications its message
    handler received (after `resources/subscribe`), on a 2026-07-28 one the events of its listen
    stream. Kept whole, with marks to look only at what came after one."""

    def __init__(self, label):
        self.label = label
        self.events = []  # ResourcesListChanged() / ResourceUpdated(uri=...)

    async def note(self, message):
        """A legacy session's message handler."""
        if isinstance(message, Exception):
            return
        name = type(message).__name__
        if name == "ResourceListChangedNotification":
            self.events.append(ResourcesListChanged())
        elif name == "ResourceUpdatedNotification":
            self.events.append(ResourceUpdated(uri=str(message.params.uri)))

    async def gather(self, sub):
        async for event in sub:
            self.events.append(event)

    def mark(self):
        return len(self.events)

    async def until(self, wanted, what, since):
        deadline = time.monotonic() + NOTICE_WAIT
        while not all(w in self.events[since:] for w in wanted):
            check(time.monotonic() < deadline,
                  f"{self.label}: {what}: no {wanted} within {NOTICE_WAIT} s; heard {self.events[since:]}")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def watching(client, mode, heard, uris):
    """Subscribes `client` to `uris` and to the listing, the way its era does."""
    if mode == "legacy":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated as of 2026-07-28: this is the legacy session
            for u in uris:
                await client.subscribe_resource(u)
        yield
        return
    async with anyio.create_task_group() as tg:
        async with client.listen(resources_list_changed=True, resource_subscriptions=uris) as sub:
            check(sorted(sub.honored.resource_subscriptions or []) == sorted(uris)
                  and sub.honored.resources_list_changed, f"{heard.label}: listen honored {sub.honored}")
            tg.start_soon(heard.gather, sub)
            yield
        tg.cancel_scope.cancel()


class Place:
    """Where one session's files and records are: its server's public URL, its workspace and
    audit directory on disk, its bearer token (HTTP), and the other tenant's (HTTP)."""

    def __init__(self, label, mode, public_url, workspace, audit_dir, tenant=None, token=None, other=None):
        self.label = label
        self.tenant_name = tenant
        self.mode = mode
        self.public_url = public_url
        self.workspace = workspace
        self.audit_dir = audit_dir
        self.token = token
        self.other = other  # (name, token, workspace) of the other tenant


def check_issued(p, place, label, name=None, max_bytes=None, ttl=None):
    prefix = f"{place.public_url}/links/"
    check(p["success"] is True and p["url"].startswith(prefix) and len(p["url"]) > len(prefix) + 80,
          f"{label}: url {p}")
    check(re.fullmatch(r"[0-9a-f]{32}", p["link_id"] or ""), f"{label}: link_id {p}")
    check(isinstance(p["message"], str) and p["message"], f"{label}: message {p}")
    expires = datetime.strptime(p["expires_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    if ttl is not None:
        check(abs(expires - (time.time() + ttl)) < 60, f"{label}: expires_at {p['expires_at']}, asked {ttl} s")
    if max_bytes is not None:
        check(p["max_bytes"] == max_bytes, f"{label}: max_bytes {p['max_bytes']}, expected {max_bytes}")
    if name is None:
        check("name" not in p and "uri" not in p, f"{label}: a name without a filename: {p}")
    else:
        check(p["name"] == name and p["uri"] == f"workspace:///{name}", f"{label}: name/uri {p}")


def check_received(answer, name, data, label, overwritten=False):
    check(answer.status == 201, f"{label}: upload answered {answer}, expected 201")
    got = answer.json()
    want = {"name": name, "size": len(data), "sha256": sha256(data), "uri": f"workspace:///{name}",
            "overwritten": overwritten}
    check(got == want, f"{label}: upload answered {got}, expected {want}")


def check_refused(answer, status, label, words=None):
    check(answer.status == status, f"{label}: answered {answer}, expected {status}")
    check(answer.headers.get("content-type", "").startswith("application/json"),
          f"{label}: a refusal as {answer.headers.get('content-type')}: {answer}")
    error = answer.json().get("error")
    check(isinstance(error, str) and error and (words is None or words in error), f"{label}: error {answer}")


async def upload_named(client, place, heard):
    """request_upload with a filename, the page, a PUT, the notifications, the listing, pandas,
    the link again."""
    label = place.label
    name = f"data/sales-{place.mode}.csv"
    uri = f"workspace:///{name}"
    data = sales_csv(2_500, seed=len(place.mode))
    async with watching(client, place.mode, heard, [uri]):
        p = await call_ok(client, "request_upload", {"filename": name, "max_mb": 2, "expires_in_seconds": 600}, label)
        check_issued(p, place, f"{label} request_upload", name=name, max_bytes=2 << 20, ttl=600)
        url = p["url"]

        # The page, for a browser, and HEAD: neither spends the link (the PUT below uses it).
        page = http("GET", url, headers={"Accept": "text/html,application/xhtml+xml"})
        check(page.status == 200 and page.headers.get("content-type", "").startswith("text/html")
              and b"Upload a file" in page.body, f"{label}: the upload page: {page}")
        head = http("HEAD", url, headers={"Accept": "text/html"})
        check(head.status == 200 and head.body == b"", f"{label}: HEAD of the upload page: {head}")

        since = heard.mark()
        check_received(put(url, data), name, data, f"{label} PUT")
        await heard.until([ResourcesListChanged(), ResourceUpdated(uri=uri)], "the upload by PUT", since)
        on_disk = os.path.join(place.workspace, name)
        check(read(on_disk) == data, f"{label}: {on_disk} differs from what was sent")

    listed = await call_ok(client, "list_workspace_files", {}, label)
    check(len(listed["sizes"]) == len(listed["files"]), f"{label}: sizes not parallel to files: {listed}")
    check(name in listed["files"], f"{label}: {name} not listed: {listed['files']}")
    check(listed["sizes"][listed["files"].index(name)] == len(data), f"{label}: size of {name}: {listed}")
    check({"path": name, "sha256": sha256(data)} in listed.get("sha256", []), f"{label}: sha256 of {name}: {listed}")

    code = f"import pandas as pd\nresult = len(pd.read_csv('/workspace/{name}'))"
    r = await call_ok(client, "execute_code", {"code": code, "timeout_seconds": 120}, label)
    check(r["result"] == 2_500, f"{label}: pandas read {r['result']} rows, expected 2500")

    again = put(url, sales_csv(10, seed=9))
    check_refused(again, 410, f"{label} the same link again", "used")
    check(read(on_disk) == data, f"{label}: the refused upload changed {on_disk}")
    print(f"{label}: PUT upload landed, announced, listed with its hash, read by pandas; reuse 410")
    return p["link_id"], name, data


async def upload_unnamed(client, place):
    """request_upload without a filename: the form names it; a taken name is 409 and the link
    stays usable, for a PUT that names the file in its URL."""
    label = place.label
    data = sales_csv(40, seed=3)
    p = await call_ok(client, "request_upload", {}, label)
    check_issued(p, place, f"{label} request_upload()", name=None)
    body, content_type = multipart("file", "report.csv", data)
    check_received(http("POST", p["url"], body, {"Content-Type": content_type}), "report.csv", data,
                   f"{label} multipart POST")
    check(read(os.path.join(place.workspace, "report.csv")) == data, f"{label}: report.csv on disk")

    p = await call_ok(client, "request_upload", {}, label)
    other = sales_csv(5, seed=4)
    body, content_type = multipart("file", "report.csv", other)
    check_refused(http("POST", p["url"], body, {"Content-Type": content_type}), 409, f"{label} a taken name")
    check(read(os.path.join(place.workspace, "report.csv")) == data, f"{label}: the 409 changed report.csv")
    check_received(put(f"{p['url']}/report-2.csv", other), "report-2.csv", other, f"{label} PUT URL/NAME")
    check(read(os.path.join(place.workspace, "report-2.csv")) == other, f"{label}: report-2.csv on disk")
    print(f"{label}: multipart POST named by the form; a taken name 409; PUT URL/NAME")


async def download(client, place):
    """request_download of files code wrote: HEAD, a range, the whole, the whole again."""
    label = place.label
    name = f"out/export-{place.mode}.csv"
    code = "\n".join([
        "import os",
        "os.makedirs('/workspace/out', exist_ok=True)",
        "rows = ['id,region,amount'] + [f'{i},r{i % 7},{i * 3}' for i in range(3000)]",
        f"open('/workspace/{name}', 'w').write('\\n'.join(rows) + '\\n')",
        f"open('/workspace/out/dot.png', 'wb').write({DOT_PNG!r})",
        f"result = os.path.getsize('/workspace/{name}')",
    ])
    r = await call_ok(client, "execute_code", {"code": code}, label)
    data = read(os.path.join(place.workspace, name))
    check(r["result"] == len(data) > 2_000, f"{label}: code wrote {r['result']} bytes, {len(data)} on disk")

    p = await call_ok(client, "request_download", {"path": name, "expires_in_seconds": 300}, label)
    check_issued(p, place, f"{label} request_download", name=None, max_bytes=len(data), ttl=300)
    url, link_id = p["url"], p["link_id"]

    head = http("HEAD", url)
    check(head.status == 200 and head.body == b"", f"{label}: HEAD {head}")
    h = {k.lower(): v for k, v in head.headers.items()}
    for key, value in GUARDS.items():
        check(h.get(key) == value, f"{label}: HEAD {key}: {h.get(key)!r}, expected {value!r}; headers {h}")
    check(h.get("content-length") == str(len(data)), f"{label}: HEAD content-length {h}")
    check(h.get("content-type", "").startswith("text/csv"), f"{label}: HEAD content-type {h}")
    check(disposition(h.get("content-disposition")) == ("attachment", name.rsplit("/", 1)[1]),
          f"{label}: HEAD content-disposition {h.get('content-disposition')!r}")
    check(h.get("accept-ranges") == "bytes", f"{label}: HEAD accept-ranges {h}")

    part = http("GET", url, headers={"Range": "bytes=100-1099"})
    check(part.status == 206 and part.body == data[100:1100], f"{label}: range GET {part.status}, {len(part.body)} bytes")
    check(part.headers.get("Content-Range") == f"bytes 100-1099/{len(data)}",
          f"{label}: Content-Range {part.headers.get('Content-Range')}")
    for key, value in GUARDS.items():
        check(part.headers.get(key) == value, f"{label}: range GET {key}: {part.headers.get(key)!r}")

    whole = http("GET", url)
    check(whole.status == 200 and whole.body == data, f"{label}: full GET {whole.status}, {len(whole.body)} bytes")
    check(whole.headers.get("Content-Disposition", "").startswith("attachment"), f"{label}: full GET disposition")
    # The server spends the link, then records the download, once the body ended: waiting for
    # the record keeps the next check off that moment.
    await download_recorded(place, link_id, data)
    again = http("GET", url)
    check_refused(again, 410, f"{label} a second full GET", "used")
    check(read(os.path.join(place.workspace, name)) == data, f"{label}: the download changed the file")

    # An image is shown, not saved; HEAD leaves its link unspent, and the link works after.
    p = await call_ok(client, "request_download", {"path": "out/dot.png"}, label)
    head = http("HEAD", p["url"])
    check(head.status == 200 and head.headers.get("Content-Type") == "image/png"
          and disposition(head.headers.get("Content-Disposition")) == ("inline", "dot.png"),
          f"{label}: HEAD of a PNG: {head.status} {dict(head.headers)}")
    for key, value in GUARDS.items():
        check(head.headers.get(key) == value, f"{label}: PNG {key}: {head.headers.get(key)!r}")
    png = http("GET", p["url"])
    check(png.status == 200 and png.body == DOT_PNG, f"{label}: GET of the PNG {png.status}")
    print(f"{label}: download HEAD headers, range 206, full GET, second GET 410; a PNG inline")
    return link_id, name, data


async def download_recorded(place, link_id, data):
    """Waits for the audit record of the whole download of `data` through `link_id`."""
    deadline = time.monotonic() + 10
    while True:
        mine = [r for r in audit_records(place.audit_dir)
                if r.get("kind") == "download" and r.get("link_id") == link_id and r.get("size") == len(data)]
        if any(r.get("status") == "ok" for r in mine):
            return
        check(time.monotonic() < deadline,
              f"{place.label}: a full GET sent all {len(data)} bytes, but no download of link {link_id} was "
              f"recorded whole (status ok): {mine}. A download recorded \"incomplete\" with every byte sent "
              "did not spend its link")
        await asyncio.sleep(0.05)


async def foreign_links(client, place):
    """Alice's link with bob's token (403), edited to name bob (404), with her own token (201)."""
    label = place.label
    other_name, other_token, other_ws = place.other
    name = f"cross-{place.mode}.csv"
    data = sales_csv(20, seed=5)
    p = await call_ok(client, "request_upload", {"filename": name}, label)
    url = p["url"]
    mine, theirs = files_under(place.workspace), files_under(other_ws)

    check_refused(put(url, data, {"Authorization": f"Bearer {other_token}"}), 403,
                  f"{label}: the link with {other_name}'s token")
    body, content_type = multipart("file", name, data)
    check_refused(http("POST", url, body, {"Content-Type": content_type, "Authorization": f"Bearer {other_token}"}),
                  403, f"{label}: a form POST with {other_name}'s token")
    check_refused(http("GET", url, headers={"Authorization": f"Bearer {other_token}"}), 403,
                  f"{label}: the page with {other_name}'s token")
    check(files_under(place.workspace) == mine, f"{label}: 403 wrote into the own workspace: {files_under(place.workspace)}")
    check(files_under(other_ws) == theirs, f"{label}: 403 wrote into {other_name}'s workspace: {files_under(other_ws)}")

    # The tenant edited in the signed part, the signature kept.
    base, token = url.rsplit("/", 1)
    first, signature = token.split(".")
    link = json.loads(base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)))
    check(link.get("t") == place.tenant_name, f"{label}: the link names tenant {link.get('t')!r}: {link}")
    link["t"] = other_name
    edited = base64.urlsafe_b64encode(json.dumps(link, separators=(",", ":")).encode()).decode().rstrip("=")
    forged = f"{base}/{edited}.{signature}"
    check_refused(put(forged, data), 404, f"{label}: the link edited to {other_name}")
    check_refused(put(forged, data, {"Authorization": f"Bearer {other_token}"}), 404,
                  f"{label}: the edited link with {other_name}'s token")
    check(files_under(other_ws) == theirs, f"{label}: the edited link wrote into {other_name}'s workspace: {files_under(other_ws)}")
    check(files_under(place.workspace) == mine, f"{label}: the edited link wrote into the own workspace")

    # The link itself, with its own tenant's token, still works (nothing above spent it).
    check_received(put(url, data, {"Authorization": f"Bearer {place.token}"}), name, data, f"{label}: with the own token")
    check(not os.path.exists(os.path.join(other_ws, name)), f"{label}: the upload landed in {other_name}'s workspace")
    print(f"{label}: {other_name}'s token 403, a link edited to {other_name} 404, the own token 201")


async def any_token_on_stdio(client, place):
    """A server without tenants takes no bearer token with a link."""
    p = await call_ok(client, "request_upload", {"filename": "tokened.csv"}, place.label)
    check_refused(put(p["url"], b"a\n1\n", {"Authorization": "Bearer whatever-0123456789abcdef"}), 403,
                  f"{place.label}: a link with a bearer token")
    check(not os.path.exists(os.path.join(place.workspace, "tokened.csv")), f"{place.label}: 403 wrote the file")


def audit_records(audit_dir):
    records = []
    for path in glob.glob(os.path.join(audit_dir, "*.jsonl")):
        with open(path) as f:
            records += [json.loads(line) for line in f if line.strip()]
    return records


async def audited(place, up, down):
    """The audit trail has the upload and the download, under the ids the tools answered."""
    label = place.label
    (up_id, up_name, up_data), (down_id, down_name, down_data) = up, down
    want = [("upload", up_id, up_name, up_data), ("download", down_id, down_name, down_data)]
    deadline = time.monotonic() + 10  # a download's record is written once its body ended
    while True:
        records = audit_records(place.audit_dir)
        missing = []
        for kind, link_id, name, data in want:
            mine = [r for r in records if r.get("kind") == kind and r.get("link_id") == link_id and r.get("status") == "ok"]
            if not mine:
                missing.append((kind, link_id))
                continue
            r = mine[0]
            check(r.get("name") == name and r.get("size") == len(data) and r.get("sha256") == sha256(data)
                  and r.get("tenant") == place.tenant_name and r.get("node") and r.get("time")
                  and isinstance(r.get("client"), str),
                  f"{label}: the {kind} record {r}; expected {name}, {len(data)} bytes, {sha256(data)}")
        if not missing:
            break
        check(time.monotonic() < deadline,
              f"{label}: no audit record of {missing} in {place.audit_dir}: "
              f"{[(r.get('kind'), r.get('link_id'), r.get('status')) for r in records if r.get('kind') in ('upload', 'download')]}")
        await asyncio.sleep(0.1)
    print(f"{label}: the audit trail has the upload and the download by link id")


async def exercise(client, place, heard):
    up = await upload_named(client, place, heard)
    await upload_unnamed(client, place)
    down = await download(client, place)
    if place.other is not None:
        await foreign_links(client, place)
    else:
        await any_token_on_stdio(client, place)
    await audited(place, up, down)


LIGHT = ["--workspace-quota-mb", "0", "--pool-size", "1", "--preload", "none"]


async def over_stdio(binary, data_dir, mode):
    label = f"stdio {mode}"
    data = os.path.join(data_dir, f"stdio-{mode}")
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    heard = Heard(label)
    params = StdioServerParameters(command=binary, env=server_env(), args=[
        "serve", "--data-dir", data, "--links-listen", f"127.0.0.1:{port}", "--public-url", public, *LIGHT])
    place = Place(label, mode, public, os.path.join(data, "workspace"), os.path.join(data, "audit", "_default"))
    kwargs = {"message_handler": heard.note} if mode == "legacy" else {}
    async with client_for(params, mode, label, **kwargs) as client:
        await exercise(client, place, heard)


@contextlib.asynccontextmanager
async def tenant_client(url, token, mode, label, **kwargs):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120)) as http_client:
        transport = streamable_http_client(url, http_client=http_client)
        async with client_for(transport, mode, label, **kwargs) as client:
            yield client


async def over_http(binary, data_dir):
    data = os.path.join(data_dir, "http")
    os.makedirs(data, exist_ok=True)
    tokens = os.path.join(data_dir, "tokens")
    with open(os.open(tokens, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(f"# tenants of upload_links.py\nalice:{ALICE}\nbob:{BOB}\n")
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    tenants = {"alice": ALICE, "bob": BOB}
    workspace = {t: os.path.join(data, "tenants", t, "workspace") for t in tenants}
    # Alice on the legacy session, bob on the 2026-07-28 one: each tries the links of the other.
    plan = [("alice", "bob", "legacy"), ("bob", "alice", "auto")]
    check([m for *_, m in plan] == list(ERAS), "a plan for every era")
    with http_server(binary, ["--data-dir", data, "--tokens-file", tokens, "--public-url", public, *LIGHT], port) as url:
        for me, other, mode in plan:
            label = f"http {mode} ({me})"
            heard = Heard(label)
            place = Place(label, mode, public, workspace[me], os.path.join(data, "audit", me),
                          tenant=me, token=tenants[me], other=(other, tenants[other], workspace[other]))
            kwargs = {"message_handler": heard.note} if mode == "legacy" else {}
            async with tenant_client(url, tenants[me], mode, label, **kwargs) as client:
                await exercise(client, place, heard)


async def main(binary, data_dir):
    began = time.monotonic()
    for mode in ERAS:
        await over_stdio(binary, data_dir, mode)
    await over_http(binary, data_dir)
    print(f"upload links: ok ({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
