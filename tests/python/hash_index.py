"""Writes a PEP 503 simple index into the directory given as the argument, for the test of the
package installer's hash pinning (tests/packages.rs): tiny pure wheels, each a zip with its
METADATA, WHEEL and RECORD, whose module writes /workspace/imported-NAME when imported (the sign
that a package's code ran). Projects:

- cemhashok: its link's #sha256= is the wheel's (the control: it installs and imports);
- cemhashtampered: its link's #sha256= is of other bytes than the wheel the index serves (the file
  was replaced after its hash was published), with PEP 658 metadata, so that pip resolves from
  that and checks the wheel only when it fetches it afterwards;
- cemhashswapped: the same, without metadata (pip downloads the wheel to read its metadata);
- cemhashless: a link with no hash at all (pip downloads it to read its metadata and could only
  pin the hash of what it got);
- cemhashelsewhere (with a second argument, a base URL): its link, with the right hash, points
  there, off the index's host and port (the installer reaches the index and nothing else).

Standard library only. Prints nothing; the layout is index/simple/NAME/index.html and
index/files/*.whl (and *.whl.metadata).
"""
import base64
import hashlib
import io
import os
import sys
import zipfile

VERSION = "1.0"


def wheel(name, marker):
    """The bytes of NAME-1.0-py3-none-any.whl; `marker` goes into the module, so that two
    wheels of one name differ."""
    dist = f"{name}-{VERSION}.dist-info"
    files = {
        f"{name}/__init__.py": (
            "import pathlib\n"
            f"pathlib.Path('/workspace/imported-{name}').write_text({marker!r})\n"
            f"__version__ = {VERSION!r}\n"
        ).encode(),
        f"{dist}/METADATA": metadata(name),
        f"{dist}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: cem-test\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ).encode(),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), data)
    return out.getvalue()


def metadata(name):
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {VERSION}\n".encode()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def main(root, elsewhere=None):
    files = os.path.join(root, "files")
    os.makedirs(files, exist_ok=True)
    projects = []
    for name, fragment, with_metadata in [
        ("cemhashok", "own", True),
        ("cemhashtampered", "other", True),
        ("cemhashswapped", "other", False),
        ("cemhashless", None, False),
    ] + ([("cemhashelsewhere", "own", False)] if elsewhere else []):
        served = wheel(name, "served")
        file = f"{name}-{VERSION}-py3-none-any.whl"
        with open(os.path.join(files, file), "wb") as f:
            f.write(served)
        base = elsewhere if name == "cemhashelsewhere" else "../.."
        href = f"{base}/files/{file}"
        if fragment == "own":
            href += f"#sha256={sha256(served)}"
        elif fragment == "other":
            href += f"#sha256={sha256(wheel(name, 'published'))}"
        attrs = ""
        if with_metadata:
            meta = metadata(name)
            with open(os.path.join(files, file + ".metadata"), "wb") as f:
                f.write(meta)
            attrs = f' data-dist-info-metadata="sha256={sha256(meta)}"' \
                    f' data-core-metadata="sha256={sha256(meta)}"'
        page = os.path.join(root, "simple", name)
        os.makedirs(page, exist_ok=True)
        with open(os.path.join(page, "index.html"), "w", encoding="utf-8") as f:
            f.write(f'<!DOCTYPE html>\n<html><body>\n<a href="{href}"{attrs}>{file}</a>\n'
                    "</body></html>\n")
        projects.append(name)
    with open(os.path.join(root, "simple", "index.html"), "w", encoding="utf-8") as f:
        links = "".join(f'<a href="{p}/">{p}</a>\n' for p in projects)
        f.write(f"<!DOCTYPE html>\n<html><body>\n{links}</body></html>\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
