"""The upload link's page in a real headless Chromium (tests/python/upload_browser.py drives it),
against the real binary over streamable HTTP (no tokens, loopback, `--public-url`), the links
asked for with the official MCP Python SDK:

- picker (a legacy session): `request_upload` without a filename; a 5 MB CSV chosen with the
  labelled file input and sent with Upload, the upload throttled so that the progress bar is seen
  moving (at least 3 distinct values between 0 and 100); the page ends `done` showing the name,
  size and SHA-256 the file has; the file on disk equals the one sent;
- drop (a 2026-07-28 session): `request_upload(filename="big/sales.csv")`; a 50 MB CSV dropped
  on the drop zone by a CDP drag; `done`; on disk equal; pandas in `execute_code` counts its rows;
- the drop link opened again shows the "used" error page (410), and the file is unchanged;
- the page's accessibility checks (a labelled input and progress bar, a drop zone reached by
  Tab, a live region that spoke) hold on both runs.

With CEM_UPLOAD_SCREENSHOT set, the picker run's finished page is saved there as a PNG.

    python tests/python/upload_page.py BINARY DATA_DIR

Needs Chromium and its driver (Debian: `apt-get install chromium chromium-driver`; CHROMIUM and
CHROMEDRIVER name others) and selenium (tests/upstream-pins.txt): fails, never skips, without
them. Exits non-zero with a message on the first mismatch.
"""

import asyncio
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import check, client_for, free_port, http_server, payload  # noqa: E402
from upload_links import LIGHT  # noqa: E402

PICKED_BYTES = 5 << 20
DROPPED_BYTES = 50 << 20
THROTTLE_KBPS = 4000  # 500 KiB/s: the 5 MB take about ten seconds


def browser_or_fail():
    """upload_browser, once Chromium, its driver and selenium are known to be there."""
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    chromedriver = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
    missing = [f"{path} (Debian package {package})" for path, package in
               [(chromium, "chromium"), (chromedriver, "chromium-driver")]
               if not (os.path.isfile(path) and os.access(path, os.X_OK))]
    if missing:
        sys.exit(f"upload_page: FAIL: no browser to drive: missing {', '.join(missing)}. "
                 "Install them with `apt-get install chromium chromium-driver`, "
                 "or name others with CHROMIUM and CHROMEDRIVER")
    try:
        import upload_browser
    except ImportError as e:
        sys.exit(f"upload_page: FAIL: {e}: install selenium at the version tests/upstream-pins.txt pins "
                 "(main environment) into this interpreter")
    return upload_browser


def sales_csv(path, size, seed):
    """A CSV of `id,region,amount` rows of at least `size` bytes; its bytes and data rows."""
    regions = ["north", "south", "east", "west", "centre"]
    lines = ["id,region,amount"]
    total = len(lines[0]) + 1
    i = 0
    while total < size:
        line = f"{i},{regions[(i + seed) % 5]},{(i * 7919 + seed) % 100_000 / 100:.2f}"
        lines.append(line)
        total += len(line) + 1
        i += 1
    data = ("\n".join(lines) + "\n").encode()
    with open(path, "wb") as f:
        f.write(data)
    return data, i


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def check_accessible(report, label):
    a = report["accessibility"]
    check(all(a.values()) and set(a) == {"input_labelled", "dropzone_focusable", "progress_labelled", "live_region"},
          f"{label}: accessibility {a}; details {report.get('accessibility_details')}, status {report.get('status_text')!r}")


def check_done(report, name, data, label):
    check(report["state"] == "done",
          f"{label}: the page ended {report['state']!r}: error {report.get('error')!r}, "
          f"{report.get('script_error', '')}; status {report.get('status_text')!r}")
    want = {"name": name, "size": len(data), "sha256": sha256(data), "uri": f"workspace:///{name}"}
    check(report["result"] == want, f"{label}: the page showed {report['result']}, expected {want}")
    check(report["max_progress"] == 100, f"{label}: progress ended at {report['max_progress']}")


async def picker(browser, url, workspace, sources, label):
    async with client_for(url, "legacy", label) as client:
        r = await client.call_tool("request_upload", {})
        p = payload(r)
        check(not r.is_error and p["success"] and "name" not in p, f"{label}: request_upload: {p}")
        link = p["url"]
    name = "picked-sales.csv"
    data, _ = sales_csv(os.path.join(sources, name), PICKED_BYTES, seed=1)
    shot = os.environ.get("CEM_UPLOAD_SCREENSHOT") or None
    report = browser.run(link, os.path.join(sources, name), "picker", throttle_kbps=THROTTLE_KBPS,
                         screenshot_path=shot, timeout=180)
    check(report["throttle"] and report["throttle"]["applied"], f"{label}: throttling refused: {report['throttle']}")
    check_done(report, name, data, label)
    seen = report["progress_seen"]
    check(len(seen) >= 3 and all(0 < v < 100 for v in seen),
          f"{label}: the progress bar showed {seen} on its way (3 distinct values or more expected) "
          f"in {report.get('elapsed_seconds')} s")
    check_accessible(report, label)
    check(read(os.path.join(workspace, name)) == data, f"{label}: {name} on disk differs from the file sent")
    if shot:
        check(read(shot).startswith(b"\x89PNG\r\n\x1a\n"), f"{label}: {shot} is not a PNG")
    print(f"{label}: {len(data)} bytes picked and sent in {report['elapsed_seconds']} s, "
          f"progress {seen[:3]}… ({len(seen)} values), sha256 shown, on disk equal"
          + (f"; screenshot {shot}" if shot else ""))


async def dropped(browser, url, workspace, sources, label):
    name = "big/sales.csv"
    data, rows = sales_csv(os.path.join(sources, "sales.csv"), DROPPED_BYTES, seed=2)
    async with client_for(url, "auto", label) as client:
        r = await client.call_tool("request_upload", {"filename": name})
        p = payload(r)
        check(not r.is_error and p["success"] and p["name"] == name and p["max_bytes"] >= len(data),
              f"{label}: request_upload: {p}")
        link = p["url"]

        began = time.monotonic()
        report = browser.run(link, os.path.join(sources, "sales.csv"), "drop", drop_via="cdp", timeout=300)
        check(report["drop_via"] == "cdp", f"{label}: the file was not dropped by a CDP drag: {report['drop_via']}")
        check_done(report, name, data, label)
        check_accessible(report, label)
        on_disk = os.path.join(workspace, name)
        check(read(on_disk) == data, f"{label}: {name} on disk differs from the file dropped")
        print(f"{label}: {len(data)} bytes dropped and stored in {time.monotonic() - began:.1f} s, on disk equal")

        code = f"import pandas as pd\ndf = pd.read_csv('/workspace/{name}')\nresult = [len(df), list(df.columns)]"
        r = await client.call_tool("execute_code", {"code": code, "timeout_seconds": 120, "memory_mb": 1024})
        p = payload(r)
        check(not r.is_error and p["success"], f"{label}: execute_code: {p}")
        check(p["result"] == [rows, ["id", "region", "amount"]], f"{label}: pandas read {p['result']}, expected {rows} rows")
        print(f"{label}: pandas counted {rows} rows")

    # The same link again: the "used" page, and the file as it was.
    seen = browser.visit(link)
    check(seen["status"] == 410 and seen["title"] == "Link used already" and "used already" in seen["error"]
          and not seen["has_file_input"], f"{label}: the used link opened again showed {seen}")
    check(read(on_disk) == data, f"{label}: {name} changed after the link was opened again")
    print(f"{label}: the link opened again shows {seen['status']} {seen['title']!r}")


async def main(binary, data_dir):
    browser = browser_or_fail()
    began = time.monotonic()
    data = os.path.join(data_dir, "page")
    sources = os.path.join(data_dir, "sources")
    os.makedirs(sources, exist_ok=True)
    port = free_port()
    args = ["--data-dir", data, "--public-url", f"http://127.0.0.1:{port}", *LIGHT, "--max-memory-mb", "2048"]
    with http_server(binary, args, port) as url:
        workspace = os.path.join(data, "workspace")
        await picker(browser, url, workspace, sources, "picker")
        await dropped(browser, url, workspace, sources, "drop")
    print(f"upload page: ok ({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
