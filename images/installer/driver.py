"""Resolves and installs the requirements given as arguments for this image's Python and
platform, binary wheels only, into /out; prints one JSON line saying what happened.

The server runs it (as `python3 -I -c`) in a container of its own made from the sandbox image,
with no network: pip reaches the package index through the server's proxy (cem_egress, on the
socket in /mnt/egress), which lets through the configured index's hosts and nothing else.
Nothing else is mounted but /out, /mnt/egress and, for an air-gapped host, the wheelhouse. No
package code runs here: only wheels are accepted (a source distribution would run its own
build), and pip unpacks them.

Two pip runs, in this one process: a dry run that resolves against what the image already has and reports every
file it would install with its sha256 from the index, then an install of exactly those files,
pinned by hash (--require-hashes), without dependencies, into /out.

The pin is the hash the index published in the file's link (`#sha256=`), never one computed
here: for a link without one, pip's report carries the sha256 of whatever it downloaded, which
pins nothing. So the driver records the hash of every link pip prepares (`published`) and
refuses a wheel whose link had none. A served file that does not match its published hash is
refused by pip itself (while resolving, or in the pinned install) and reported as such. The
wheelhouse, the operator's own directory, publishes no hashes: its files are pinned as found.
"""
import contextlib
import glob
import io
import json
import os
import re
import sys
from urllib.parse import unquote

OUT = "/out"
WHEELHOUSE = "/wheelhouse"
REPORT = "/tmp/cem-report.json"
PINNED = "/tmp/cem-pinned.txt"
# What a failure may quote of pip: its ERROR lines, bounded.
MAX_SAID = 2000


def finish(ok, **fields):
    print(json.dumps({"ok": ok, **fields}), flush=True)
    sys.exit(0)


def pip_main():
    """pip's entry point, imported once: both runs happen in this process, so pip's import (a
    second or more, from a wheel without compiled bytecode) is paid once."""
    try:
        from pip._internal.cli.main import main  # the registry's python image has pip installed
        return main
    except ImportError:
        pass
    # The offline base's pip wheel, unpacked and compiled by the image's Dockerfile, else as is.
    unpacked = "/opt/sandbox/installer"
    wheels = sorted(glob.glob("/usr/share/python-wheels/pip-*.whl"))
    place = unpacked if os.path.isdir(os.path.join(unpacked, "pip")) else (wheels or [None])[-1]
    if place is None:
        finish(False, kind="failed", said="the sandbox image has no pip to install packages with")
    sys.path.insert(0, place)
    from pip._internal.cli.main import main
    return main


PIP = pip_main()
OFFLINE = os.path.isdir(WHEELHOUSE)
SOURCE = ["--no-index", "--find-links", WHEELHOUSE] if OFFLINE else []
COMMON = ["--disable-pip-version-check", "--no-input", "--progress-bar", "off",
          "--only-binary=:all:", "--retries", "1", "--timeout", "20"]


# The sha256 each link pip prepared carried, as the index published it, by file name (None: no
# hash in the link).
PUBLISHED = {}


def record_published():
    """Wraps pip's one step that turns a prepared link into its report entry, to keep the hash
    the link itself carried. Without that step (another pip), nothing can be pinned to the
    index's hashes, and the install is refused rather than pinned to a hash computed here."""
    try:
        from pip._internal.operations import prepare
        original = prepare.direct_url_from_link
    except (ImportError, AttributeError) as e:
        finish(False, kind="failed",
               said=f"this image's pip does not show the hashes its index publishes ({e}); "
                    "use an image whose pip is 22.2 or later")

    def recording(link, *args, **kwargs):
        published = link.hash if link.hash_name == "sha256" else None
        PUBLISHED.setdefault(link.filename, set()).add(published)
        return original(link, *args, **kwargs)

    prepare.direct_url_from_link = recording


class Ran:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def pip(*args):
    """One pip command, in this process; what it printed is kept, not shown."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = PIP(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return Ran(code, out.getvalue(), err.getvalue())


def said(stderr):
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    if errors and errors[-1] == "ERROR: Exception:" and lines:
        errors.append(lines[-1])  # pip's traceback: its last line is the cause
    text = " ".join(errors) if errors else stderr.strip()[-MAX_SAID:]
    return text[:MAX_SAID]


UNREACHABLE = re.compile(
    r"Max retries exceeded|Failed to establish a new connection|Name or service not known|"
    r"Temporary failure in name resolution|Connection refused|CERTIFICATE_VERIFY_FAILED|"
    r"Network is unreachable|Read timed out|ProxyError|Could not fetch URL")
MISMATCH = "THESE PACKAGES DO NOT MATCH THE HASHES"
SERVED = re.compile(r"\bfrom (\S+?\.whl)")
EXPECTED = re.compile(r"Expected sha256 ([0-9a-f]{64})\s+Got\s+([0-9a-f]{64})")
NO_VERSION = re.compile(
    r"Could not find a version that satisfies the requirement (\S+) \(from versions: ([^)]*)\)")


def refuse(stderr):
    """Ends with the cause of a failed resolution: unreachable index, no such package or
    version, or a package that has only source distributions."""
    if MISMATCH in stderr:
        mismatch(stderr)
    missing = NO_VERSION.search(stderr)
    cause = [line.strip() for line in stderr.splitlines() if UNREACHABLE.search(line)]
    if cause and (not missing or missing.group(2).strip() == "none"):
        # pip says "no version" when it could not ask: the connection is the cause.
        finish(False, kind="unreachable", said=cause[-1][:MAX_SAID])
    if missing:
        requirement, versions = missing.group(1), missing.group(2).strip()
        name = re.split(r"[\s<>=!~;\[(@]", requirement, maxsplit=1)[0]
        if versions == "none":
            # Nothing this Python can use: is there anything at all under that name?
            listed = pip("index", "versions", name, *SOURCE,
                         "--disable-pip-version-check", "--retries", "1", "--timeout", "20")
            if listed.returncode == 0 and "Available versions" in listed.stdout:
                finish(False, kind="source_only", name=name, said=said(stderr))
        finish(False, kind="not_found", name=requirement, said=said(stderr))
    finish(False, kind="failed", said=said(stderr))


def mismatch(stderr):
    """Ends with the file whose bytes did not match the sha256 its link published (named by
    its link, else by what pip quoted, else by the requirements it was for)."""
    found = EXPECTED.search(stderr)
    expected, got = found.groups() if found else ("?", "?")
    files = sorted(f for f, hashes in PUBLISHED.items() if expected in hashes)
    files += [unquote(u.rsplit("/", 1)[-1]) for u in SERVED.findall(stderr)]
    files.append("a wheel for " + " ".join(sys.argv[1:]))
    finish(False, kind="hash_mismatch", name=files[0],
           said=f"published sha256 {expected}, served {got}")


def pinned_by_index(chosen):
    """Ends the install unless every chosen file's sha256 is the one its link published."""
    for c in chosen:
        published = PUBLISHED.get(unquote(c["file"]), {None})
        if None in published:
            finish(False, kind="unhashed", name=c["file"])
        if published != {c["sha256"]}:
            finish(False, kind="hash_mismatch", name=c["file"],
                   said=f"published sha256 {sorted(published)}, resolved {c['sha256']}")


def replaced(chosen):
    """The distributions of the set that this image has too (the set's version wins)."""
    from importlib import metadata
    names = []
    for c in chosen:
        try:
            metadata.version(c["name"])
            names.append(c["name"])
        except metadata.PackageNotFoundError:
            pass
    return names


def open_way_out():
    """The index through the server's proxy (cem_egress): the container has no network."""
    sys.path.insert(0, "/opt/sandbox/lib")
    import cem_egress
    if not cem_egress.start(os.environ.get("CEM_EGRESS_HTTP") == "1"):
        finish(False, kind="failed", said="the installer has no way to the index (no egress socket)")


def main(requirements):
    if not OFFLINE:
        open_way_out()
        record_published()
    resolved = pip("install", "--dry-run", "--quiet", "--report", REPORT, *COMMON, *SOURCE,
                   "--", *requirements)
    if resolved.returncode != 0:
        refuse(resolved.stderr)
    with open(REPORT, encoding="utf-8") as f:
        report = json.load(f)
    chosen = []
    for item in report.get("install", []):
        meta, info = item.get("metadata", {}), item.get("download_info", {})
        url = info.get("url", "")
        digest = (info.get("archive_info", {}).get("hashes") or {}).get("sha256")
        if not url.endswith(".whl"):
            finish(False, kind="source_only", name=meta.get("name", "?"), said=url)
        if not digest:
            finish(False, kind="failed", said=f"no sha256 for {url}: the index must publish hashes")
        chosen.append({"name": meta["name"], "version": meta["version"], "sha256": digest,
                       "file": url.rsplit("/", 1)[-1]})
    if not OFFLINE:
        pinned_by_index(chosen)
    if chosen:
        with open(PINNED, "w", encoding="utf-8") as f:
            for c in chosen:
                f.write(f"{c['name']}=={c['version']} --hash=sha256:{c['sha256']}\n")
        installed = pip("install", "--no-deps", "--require-hashes", "--target", OUT, "--quiet",
                        "--no-warn-script-location", *COMMON, *SOURCE, "-r", PINNED)
        if installed.returncode != 0:
            refuse(installed.stderr)
    finish(True, resolved=chosen, replaces=replaced(chosen))


if __name__ == "__main__":
    main(sys.argv[1:])
