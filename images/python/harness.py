"""In-container harness: runs one job of agent-written Python and reports over stdio.

Frames are JSON objects, one per line, at most 8 MiB each:
  in:  {"type":"job","code","context_vars","limits":{"max_output_bytes","max_result_bytes"},
       "edge_bytes","servers"?} first, then {"type":"reply","id","result"} or {"type":"reply","id","error"}
       answering our calls, in any order (threads may have several calls out at once).
  out: {"type":"output","stream","data"}, per stream that passes its limit {"type":"output","stream",
       "truncated":true,"dropped_bytes"} when it first drops and once more at the end for the rest,
       {"type":"call","id","method","params"}, {"type":"image","source","data"} (base64 of a PNG,
       JPEG, GIF or WebP; past limits.max_images {"type":"image","source","dropped":true}),
       {"type":"link","path","description"} (a workspace file to return as a resource link),
       and last {"type":"done","success","result","result_truncated","error","error_type",
       "traceback"}; then exit 0 (1: bad job frame).

Why it is built this way:

- The container's stdio is the only channel to the server, so the harness owns it. Frames go out
  on a private, non-inheritable dup of the ORIGINAL stdout; the job and the replies to calls come
  in on a private dup of stdin. fd 0 becomes /dev/null, so neither user code nor its children can
  read (and steal) reply frames, and fd 1 never reaches the channel, so nothing user code prints,
  however it is shaped, can be mistaken for a frame: it travels as data inside output frames.
- User output is captured at the fd level (pipes dup2'd onto fd 1 and 2), so subprocesses and C
  extensions are captured too. One reader thread per pipe drains it continuously: past
  max_output_bytes it drops instead of forwarding, so a chatty program never blocks on a full pipe,
  and the loss is reported once, at the end.
- Every cut (output, the result's JSON, error and traceback) sends edge_bytes more than its limit.
  The server shows nothing past the limit, but its PII engine reads those bytes so that a value the
  cut would split (an email's name part, a card's first digits) is seen, and tokenized, whole.
- A background child can hold a pipe's write end forever. After user code returns the harness
  points fd 1/2 away from the pipes, waits briefly for the readers, and sends done regardless.
- Everything the server relies on (frame shape, one done frame, exit code) is kept even when user
  code misbehaves; then the harness leaves with os._exit so leftover user threads cannot hang it.
- Upstream MCP tools are functions of a generated package, read-only under /mnt/servers/<version>;
  the job names the version, which goes on sys.path and behind the image's /servers link. Each
  function calls call_tool, a `call` frame the server answers through the upstream: the package
  holds names, never credentials.
- Images: show_image() and matplotlib (the image's MPLBACKEND is cem_matplotlib, whose show()
  sends the open figures; figures still open at the end are sent too) become image frames. The
  server decodes, bounds and re-encodes them: what the harness sends is as untrusted as the rest.
- Stdlib only, all imports at start-up: a pooled container has paid for them before its job arrives.
  CEM_PRELOAD (set on pooled containers) names more modules to import then, such as pandas, so
  code that uses them does not wait for the import.
"""

import base64, builtins, codecs, importlib, io, itertools, linecache, os, shutil, sys, threading
import fcntl, struct, termios, time, traceback, types, warnings
# The globals user code gets (names of the original project), imported before the job arrives:
import collections, json, math, re, statistics
from datetime import date, datetime, timedelta

MAX_FRAME = 8 << 20  # longest frame line we accept (bytes, without the newline)
READ_CHUNK = 16 << 10  # <= 16 KiB read => an output frame's data stays under 64 KiB of UTF-8
JOIN_IDLE, JOIN_MAX = 0.2, 0.5  # how long done waits for quiet pipes once user code returned
# How long done waits while a pipe still holds unread output: on a busy machine (or a sandbox at
# its CPU quota) a reader thread can go unscheduled for longer than JOIN_IDLE, and giving up
# then would lose what the code printed.
JOIN_PENDING_MAX = 5.0
TEXT_CAP = 64 << 10  # error and traceback strings are cut past this many characters (+ the edge)
SOURCE = "<sandbox>"
HARNESS = __file__
WORKSPACE = "/workspace"
SKILLS = "/skills"  # the saved skills, mounted read-only
SERVERS_MOUNT = "/mnt/servers"  # generated tools packages, one directory per version, read-only
SERVERS_LINK = "/tmp/.servers"  # the image's /servers points here; linked to the job's version
LIB = "/opt/sandbox/lib"  # the matplotlib backend (the image's PYTHONPATH, for subprocesses)
PACKAGES = "/opt/sandbox/packages"  # the user's packages (image build --requirements)
MPL_CACHE = "/opt/sandbox/matplotlib"  # matplotlib's font cache, built with the image
MAX_IMAGE_BYTES = 6 << 20  # an image frame's data, before base64 (the frame stays under 8 MiB)
IMAGE_KINDS = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF87a", "GIF"),
               (b"GIF89a", "GIF"))


class Channel:
    """Frames out on a dup of the original stdout, frames in on a dup of the original stdin."""

    def __init__(self):
        self.out_fd = os.dup(1)  # os.dup is non-inheritable: children never see the channel
        self.err_fd = os.dup(2)  # original stderr, put back on fd 2 after the job
        self.inp = open(os.dup(0), "rb", buffering=1 << 16)
        self.devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(self.devnull, 0)  # stdin readers (and children) get EOF, not our replies
        os.dup2(self.devnull, 1)  # stray writes before capture cannot corrupt the frame stream
        self.lock = threading.Lock()  # one frame at a time on the wire
        self.replies = {}  # call id -> reply frame, for the thread waiting on it
        self.replies_cond = threading.Condition()
        self.reading = False  # a thread is reading the next frame
        self.broken = None  # why the channel can no longer be read
        self.ids = itertools.count(1)
        self.closed = False

    def send(self, frame, final=False):
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = memoryview((line + "\n").encode("utf-8", "replace"))  # lone surrogates -> "?"
        with self.lock:
            if self.closed:  # nothing may follow done
                return
            if final:
                self.closed = True
            try:
                while data:
                    data = data[os.write(self.out_fd, data):]
            except OSError:
                os._exit(3)  # the server went away (or user code closed our fd): no one to tell

    def read_line(self):
        line = self.inp.readline(MAX_FRAME + 1)
        if not line:
            raise EOFError("stdin closed")
        if len(line) > MAX_FRAME and not line.endswith(b"\n"):
            raise OverflowError("frame longer than 8 MiB")
        return line

    def call(self, method, params, error=RuntimeError):
        """Sends a call and waits for its reply. Threads may call at once: whichever thread is
        not waiting for the lock reads the next frame and hands it to the thread it is for."""
        call_id = next(self.ids)  # itertools.count is atomic under the GIL
        self.send({"type": "call", "id": call_id, "method": method, "params": params})
        with self.replies_cond:
            while call_id not in self.replies:
                if self.broken:
                    raise RuntimeError(f"server channel broken during {method}: {self.broken}")
                if self.reading:
                    self.replies_cond.wait()
                    continue
                self.reading = True
                self.replies_cond.release()
                try:
                    frame = self._next_reply()
                finally:
                    self.replies_cond.acquire()
                    self.reading = False
                    self.replies_cond.notify_all()
                if frame is not None:
                    self.replies[frame.get("id")] = frame
            frame = self.replies.pop(call_id)
        if frame.get("error") is not None:
            raise error(str(frame["error"]))
        return frame.get("result")

    def _next_reply(self):
        """The next reply frame, or None for a line that is not one; a broken channel is
        recorded for every waiting thread."""
        try:
            frame = json.loads(self.read_line())
        except (EOFError, OverflowError) as e:
            self.broken = str(e)
            return None
        except (ValueError, RecursionError):
            return None  # not a frame for us
        if isinstance(frame, dict) and frame.get("type") == "reply":
            return frame
        return None


class Pump(threading.Thread):
    """Drains one capture pipe; forwards up to `limit` bytes as output frames, drops the rest.
    Started before the job arrives (a thread start costs milliseconds on a busy machine); it
    reads nothing until `arm` gives it the job's limit."""

    def __init__(self, chan, stream, fd):
        super().__init__(name=f"harness-{stream}", daemon=True)
        self.chan, self.stream, self.fd, self.limit = chan, stream, fd, 0
        self.forwarded = self.dropped = self.reported = 0
        self.last_read = 0.0
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.armed = threading.Event()

    def arm(self, limit):
        self.limit = limit
        self.armed.set()

    def pending(self):
        """Bytes in the pipe this pump has not read yet."""
        try:
            return struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:  # closed: nothing left to read
            return 0

    def run(self):
        self.armed.wait()
        while True:
            try:
                chunk = os.read(self.fd, READ_CHUNK)
            except OSError:  # user code closed our read end
                return
            if not chunk:
                break
            self.last_read = time.monotonic()
            room = self.limit - self.forwarded
            if room <= 0:
                self.drop(len(chunk))
                continue
            cut = len(chunk) >= room  # this chunk reaches the limit: flush the decoder now
            if len(chunk) > room:
                self.drop(len(chunk) - room)
                chunk = chunk[:room]
            self.forwarded += len(chunk)
            self.emit(self.decoder.decode(chunk, final=cut))
        if self.forwarded < self.limit:
            self.emit(self.decoder.decode(b"", final=True))
        os.close(self.fd)

    def drop(self, n):
        self.dropped += n
        if not self.reported:
            # Said at once, not only at the end: code killed at its deadline never gets there.
            self.reported = self.dropped
            self.chan.send({"type": "output", "stream": self.stream, "truncated": True,
                            "dropped_bytes": self.reported})

    def emit(self, text):
        if text:
            self.chan.send({"type": "output", "stream": self.stream, "data": text})


def start_capture(chan):
    """Points fd 1 and 2 at pipes drained by two pumps, before the job arrives."""
    pumps = []
    for fd, stream in ((1, "stdout"), (2, "stderr")):
        r, w = os.pipe()
        os.dup2(w, fd)  # fd 1/2 are the only write ends we keep; children inherit them
        os.close(w)
        pumps.append(Pump(chan, stream, r))
        pumps[-1].start()
    # -I ignores PYTHONUNBUFFERED: rebuild unbuffered text streams so prints interleave with
    # subprocess output in order and show up as progress while the job runs.
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                  errors="surrogateescape", write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                  errors="backslashreplace", write_through=True)
    return pumps


def stop_capture(chan, pumps):
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    os.dup2(chan.devnull, 1)  # drop our write ends: readers see EOF unless a child holds one
    os.dup2(chan.err_fd, 2)
    start = time.monotonic()
    for pump in pumps:
        while pump.is_alive():
            pump.join(0.02)
            now = time.monotonic()
            quiet = now - max(pump.last_read, start) > JOIN_IDLE
            if quiet and pump.pending() and now - start < JOIN_PENDING_MAX:
                continue  # output left unread while the reader read nothing: starved, not done
            if now - start > JOIN_MAX or now - max(pump.last_read, start) > JOIN_IDLE:
                break  # a background child keeps the pipe open: done goes out anyway
    for pump in pumps:
        if pump.dropped > pump.reported:
            chan.send({"type": "output", "stream": pump.stream, "truncated": True,
                       "dropped_bytes": pump.dropped - pump.reported})


# ---- helpers visible to user code (names and behaviour of the original project) ----

_chan = None


def _resolve(name):
    root = os.path.realpath(WORKSPACE)
    path = os.path.realpath(os.path.join(root, os.fspath(name)))
    if path != root and not path.startswith(root + os.sep):
        raise PermissionError("Access denied: path outside workspace")
    return path


def read_file(filename):
    path = _resolve(filename)
    if not os.path.exists(path):
        raise FileNotFoundError(f"File not found: {filename}")
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_file(filename, content):
    path = _resolve(filename)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(content)
    return f"Written {len(content)} bytes to {filename}"


def list_files(subpath="."):
    path, root = _resolve(subpath), os.path.realpath(WORKSPACE)
    found = []
    for top, _dirs, files in os.walk(path):
        found.extend(os.path.relpath(os.path.join(top, n), root) for n in files
                     if os.path.isfile(os.path.join(top, n)))
    return sorted(found)


def delete_file(filename):
    path = _resolve(filename)
    if not os.path.exists(path):
        raise FileNotFoundError(f"File not found: {filename}")
    os.remove(path)
    return f"Deleted {filename}"


def _is_pandas(value, kind):
    """Whether value is a pandas object of this class name (pandas need not be installed)."""
    cls = type(value)
    return cls.__name__ == kind and (cls.__module__ or "").startswith("pandas")


def _records(data):
    """What the data helpers work on: lists of dicts. A pandas DataFrame becomes its rows (NaN as
    None, timestamps in ISO 8601), a Series or numpy array a list; anything else is left as is."""
    if _is_pandas(data, "DataFrame"):
        return json.loads(data.to_json(orient="records", date_format="iso", default_handler=str))
    if _is_pandas(data, "Series"):
        return json.loads(data.to_json(orient="values", date_format="iso", default_handler=str))
    if type(data).__module__ == "numpy" and hasattr(data, "tolist"):
        return data.tolist()
    return data


def _json_default(value):
    """json.dumps's fallback for the code's result: pandas and numpy values as plain JSON, other
    objects as their str() (the original project's default=str)."""
    if _is_pandas(value, "Series") and type(value.index).__name__ != "RangeIndex":
        rows = _records(value)
        return dict(zip(map(str, value.index), rows))
    if _is_pandas(value, "DataFrame") or _is_pandas(value, "Series"):
        return _records(value)
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()
    if (type(value).__module__ or "").startswith("pandas") and hasattr(value, "isoformat"):
        return value.isoformat()  # Timestamp
    return str(value)


def _without_nan(value, depth=0):
    """The value with NaN and infinities (which JSON cannot hold) as None, pandas and numpy values
    converted on the way."""
    if depth > 100:
        raise RecursionError("result nested too deeply")
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {k: _without_nan(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_nan(v, depth + 1) for v in value]
    if isinstance(value, (str, int, bool, type(None))):
        return value
    converted = _json_default(value)
    return converted if isinstance(converted, str) else _without_nan(converted, depth + 1)


def filter_by_field(data, field, value):
    return [d for d in _records(data) if isinstance(d, dict) and d.get(field) == value]


def summarize_list(data, limit=10):
    if _is_pandas(data, "DataFrame") or _is_pandas(data, "Series"):
        return {"count": len(data), "sample": _records(data.head(limit))}
    data = _records(data)
    return {"count": len(data), "sample": data[:limit]}


def format_output(data, max_chars=5000):
    return json.dumps(_records(data), indent=2, default=_json_default)[:max_chars]


def aggregate_stats(data, numeric_fields=None):
    data = _records(data)
    if not data:
        return {"count": 0}
    stats = {"count": len(data)}
    if numeric_fields is None and isinstance(data[0], dict):
        numeric_fields = [k for k, v in data[0].items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)]
    for field in numeric_fields or ():
        values = [d.get(field, 0) for d in data if isinstance(d, dict)]
        values = [v for v in values if v is not None]  # a DataFrame's NaN
        if values:
            stats[f"{field}_sum"] = sum(values)
            stats[f"{field}_avg"] = sum(values) / len(values)
            stats[f"{field}_min"] = min(values)
            stats[f"{field}_max"] = max(values)
    return stats


_images = {"sent": 0, "max": 8}
_images_lock = threading.Lock()


def _image_bytes(image):
    """The encoded bytes of what show_image was given, and a name for it."""
    if hasattr(image, "savefig"):  # a matplotlib figure
        buffer = io.BytesIO()
        image.savefig(buffer, format="png")
        return buffer.getvalue(), None
    if hasattr(image, "save") and hasattr(image, "mode"):  # a PIL image
        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue(), None
    if isinstance(image, ToolContent):  # an image an upstream tool returned
        return image.bytes, None
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image), None
    if isinstance(image, (str, os.PathLike)):
        path = _resolve(image)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"File not found: {image}")
        if os.path.getsize(path) > MAX_IMAGE_BYTES:
            raise ValueError(f"show_image: {image} is over {MAX_IMAGE_BYTES} bytes; save a smaller image")
        with open(path, "rb") as f:
            return f.read(MAX_IMAGE_BYTES + 1), os.fspath(image)
    raise TypeError("show_image: pass PNG, JPEG, GIF or WebP bytes, a workspace path, a PIL image "
                    f"or a matplotlib figure, not {type(image).__name__}")


def show_image(image, source=None):
    """Returns an image to the caller of execute_code as MCP image content (PNG): PNG, JPEG, GIF
    or WebP bytes, a workspace path, a PIL image, a matplotlib figure or an upstream tool's
    image (ToolContent). The server scales large
    images down; past the per-execution limit, images are dropped and the result says so."""
    data, name = _image_bytes(image)
    if not (any(data.startswith(magic) for magic, _ in IMAGE_KINDS)
            or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")):
        raise ValueError("show_image: the data is not a PNG, JPEG, GIF or WebP image")
    if len(data) > MAX_IMAGE_BYTES:
        raise ValueError(f"show_image: the image is {len(data)} bytes, over the {MAX_IMAGE_BYTES} "
                         "sent; save it smaller (fewer pixels, lower dpi)")
    with _images_lock:
        number = _images["sent"] = _images["sent"] + 1
    source = str(source or name or f"image {number}")[:200]
    if number > _images["max"]:
        _chan.send({"type": "image", "source": source, "dropped": True})
        return None
    _chan.send({"type": "image", "source": source, "data": base64.b64encode(data).decode("ascii")})
    return None


def resource_link(filename, description=None):
    """Returns a workspace file to the caller of execute_code as an MCP resource link (its URI,
    not its content); a client reads it with resources/read. Returns the URI."""
    path = _resolve(filename)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"File not found: {filename}")
    rel = os.path.relpath(path, os.path.realpath(WORKSPACE))
    frame = {"type": "link", "path": rel}
    if description is not None:
        frame["description"] = str(description)[:1000]
    _chan.send(frame)
    from urllib.parse import quote
    return "workspace:///" + quote(rel)


def _send_open_figures():
    """Figures the code left open come back as images, as if it had called plt.show()."""
    if "matplotlib.pyplot" not in sys.modules:
        return
    try:
        import cem_matplotlib
        cem_matplotlib.send_figures()
    except BaseException as e:
        print(f"[sandbox] the open matplotlib figures could not be sent: {e!r}", file=sys.stderr)


def _server_call(method, **params):
    """Ask the server; its error reply is raised as RuntimeError(message)."""
    return _chan.call(method, params)


def tokenize_pii(text):
    reply = _server_call("tokenize_pii", text=text)
    if isinstance(reply, dict):  # {"sanitized": str, "tokens": {...}}
        return reply.get("sanitized"), reply.get("tokens")
    if isinstance(reply, list) and len(reply) == 2:  # a serialised (sanitized, tokens) pair
        return reply[0], reply[1]
    raise RuntimeError("tokenize_pii: unexpected reply from the server")


class _SkillsPackage(types.ModuleType):
    """`from skills import NAME` gives the function NAME that skill NAME defines (or the module if
    it defines none); `import skills.NAME` gives the module (in sys.modules). Skills come from the
    read-only mount, so code can use them but change them only through save_skill, which the
    server validates."""

    def __setattr__(self, name, value):
        # The import system binds each imported submodule on the package: the function wins.
        if isinstance(value, types.ModuleType) and value.__name__ == f"skills.{name}":
            value = getattr(value, name, value)
        super().__setattr__(name, value)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            importlib.import_module(f"skills.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"skills.{name}":
                raise
            raise ImportError(f"no skill named {name!r}: list_skills() shows the saved ones") from None
        return self.__dict__[name]


class ToolError(Exception):
    """An upstream MCP tool failed, or the call was refused; the message says why."""


class ToolContent(dict):
    """An image, audio clip or resource a tool returned: a dict (type, mime_type, data or
    text, uri) that can write itself to the workspace."""

    @property
    def bytes(self):
        if self.get("data") is not None:
            import base64
            return base64.b64decode(self["data"])
        return (self.get("text") or "").encode("utf-8")

    def save(self, filename):
        """Writes the content to a workspace file; returns the number of bytes written."""
        path = _resolve(filename)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = self.bytes
        with open(path, "wb") as f:
            f.write(data)
        return len(data)


def _wrap_contents(value):
    if isinstance(value, dict):
        kind = value.get("__cem_content__")
        if kind is not None:
            fields = {k: v for k, v in value.items() if k != "__cem_content__" and v is not None}
            return ToolContent(type=kind, **fields)
        return value
    if isinstance(value, list):
        return [_wrap_contents(v) for v in value]
    return value


def call_tool(server, tool, arguments=None):
    """Calls tool `tool` of the upstream MCP server `server` (their original names) with a dict
    of arguments; returns its structured result, else its text parsed as JSON, else the text.
    Raises ToolError when the tool fails or the call is refused."""
    if arguments is not None and not isinstance(arguments, dict):
        raise TypeError("call_tool: arguments must be a dict")
    reply = _chan.call("call_tool", {"server": server, "tool": tool, "arguments": arguments or {}},
                       error=ToolError)
    return _wrap_contents(reply)


def _install_servers_package(version):
    """Makes `import servers` and /servers show the tools package of this job's version."""
    runtime = types.ModuleType("cem_runtime", "What the generated servers package calls.")
    runtime.call_tool, runtime.ToolError, runtime.ToolContent = call_tool, ToolError, ToolContent
    runtime.show_image = show_image  # what the matplotlib backend (cem_matplotlib) sends through
    sys.modules["cem_runtime"] = runtime
    if not version:
        return
    if not (len(version) == 16 and all(c in "0123456789abcdef" for c in version)):
        raise ValueError("job frame: \"servers\" must be a package version")
    root = os.path.join(SERVERS_MOUNT, version)
    sys.path.insert(0, root)
    try:
        os.symlink(os.path.join(root, "servers"), SERVERS_LINK)
    except OSError:
        pass  # /servers is a convenience; the import works without it


def _install_skills_package():
    pkg = _SkillsPackage("skills", "Saved skills, importable by name.")
    pkg.__path__ = [SKILLS]
    sys.modules["skills"] = pkg


HELPERS = dict(
    json=json, re=re, math=math, statistics=statistics, collections=collections,
    datetime=datetime, date=date, timedelta=timedelta, workspace=WORKSPACE,
    read_file=read_file, write_file=write_file, list_files=list_files, delete_file=delete_file,
    filter_by_field=filter_by_field, summarize_list=summarize_list,
    aggregate_stats=aggregate_stats, format_output=format_output,
    show_image=show_image, resource_link=resource_link,
    _server_call=_server_call,
    call_tool=call_tool, ToolError=ToolError,
    save_skill=lambda name, code, description="": _server_call(
        "save_skill", name=name, code=code, description=description),
    load_skill=lambda name: _server_call("load_skill", name=name),
    list_skills=lambda: _server_call("list_skills"),
    tokenize_pii=tokenize_pii,
    detokenize_pii=lambda text, tokens=None: _server_call("detokenize_pii", text=text, tokens=tokens),
)


# ---- running the job ----

_edge = {"bytes": 0}  # job.edge_bytes: sent past every cut, for the server's PII engine only


def _cap(text):
    return text if len(text) <= TEXT_CAP else text[:TEXT_CAP + _edge["bytes"]]


def _user_frames(stack):
    """Frames from the first <sandbox> frame on, up to (not into) any harness helper."""
    frames = list(stack)
    first = next((i for i, f in enumerate(frames) if f.filename == SOURCE), None)
    if first is None:
        return [f for f in frames if f.filename != HARNESS]
    return list(itertools.takewhile(lambda f: f.filename != HARNESS, frames[first:]))


def _traceback(exc):
    te = traceback.TracebackException.from_exception(exc)
    todo, seen = [te], set()
    while todo:  # the whole chain: causes, contexts, exception-group members
        t = todo.pop()
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        t.stack = traceback.StackSummary.from_list(_user_frames(t.stack))
        todo += [t.__cause__, t.__context__, *(t.exceptions or ())]
    return "".join(te.format())


def _failure(exc):
    try:
        message = str(exc)
    except Exception:
        message = f"<str() of {type(exc).__name__} failed>"
    try:
        tb = _traceback(exc)
    except Exception:
        tb = None
    return {"success": False, "result": None, "result_truncated": False, "error": _cap(message),
            "error_type": type(exc).__name__, "traceback": tb and _cap(tb)}


def _encode_result(value, limit):
    """json.dumps(default=str) semantics, with pandas and numpy values as plain JSON and NaN as
    null; a value that still cannot be encoded becomes str()."""
    try:
        text = json.dumps(value, default=_json_default, allow_nan=False)
    except Exception:  # NaN/inf, cycles, non-string keys, a failing __str__ ...
        try:
            text = json.dumps(_without_nan(value), default=_json_default, allow_nan=False)
        except Exception:
            try:
                text = json.dumps(str(value))
            except Exception:
                text = json.dumps(f"<unserialisable {type(value).__name__}>")
    if len(text) > limit:  # ASCII JSON text: characters == bytes
        return text[:limit + _edge["bytes"]], True
    return json.loads(text), False


def run_job(code, context_vars, max_result_bytes):
    # User code is the program: a fresh module registered as __main__, so pickle, dataclasses
    # and `import __main__` see the user's globals rather than the harness's.
    main = sys.modules["__main__"] = types.ModuleType("__main__")
    g = main.__dict__
    g.update(HELPERS)
    g.update(context_vars or {})  # merged after the helpers: a context var may shadow one
    g["__builtins__"] = builtins
    linecache.cache[SOURCE] = (len(code), None, code.splitlines(True), SOURCE)  # lines in tracebacks
    try:
        try:
            exec(compile(code, SOURCE, "exec", dont_inherit=True), g)
        except SystemExit as e:
            if e.code is not None and e.code != 0:
                return _failure(e)
        result, truncated = _encode_result(g.get("result"), max_result_bytes)
    except BaseException as e:
        return _failure(e)
    return {"success": True, "result": result, "result_truncated": truncated,
            "error": None, "error_type": None, "traceback": None}


def read_job(chan):
    """The first frame, checked; anything else ends the harness with a failed done frame."""
    try:
        job = json.loads(chan.read_line())
    except EOFError:
        raise ValueError("stdin closed before the job frame arrived") from None
    except OverflowError:
        raise ValueError("job frame longer than 8 MiB") from None
    except (ValueError, RecursionError) as e:
        raise ValueError(f"job frame is not valid JSON: {e}") from None
    if not isinstance(job, dict) or job.get("type") != "job":
        raise ValueError('first frame must be an object with "type": "job"')
    if not isinstance(job.get("code"), str):
        raise ValueError('job frame: "code" must be a string')
    if not isinstance(job.get("context_vars"), (dict, type(None))):
        raise ValueError('job frame: "context_vars" must be an object or null')
    limits = job.get("limits")
    for key in ("max_output_bytes", "max_result_bytes"):
        value = limits.get(key) if isinstance(limits, dict) else None
        if type(value) is not int or value < 0:
            raise ValueError(f'job frame: "limits.{key}" must be a non-negative integer')
    edge = job.get("edge_bytes", 0)
    if type(edge) is not int or edge < 0:
        raise ValueError('job frame: "edge_bytes" must be a non-negative integer')
    _edge["bytes"] = edge
    max_images = limits.get("max_images", _images["max"])
    if type(max_images) is not int or max_images < 0:
        raise ValueError('job frame: "limits.max_images" must be a non-negative integer')
    _images["max"] = max_images
    servers = job.get("servers")
    if not isinstance(servers, (str, type(None))):
        raise ValueError('job frame: "servers" must be a string or absent')
    return job["code"], job.get("context_vars"), limits, servers


def _prepare_matplotlib():
    """Matplotlib needs a writable config directory; the image's font cache goes there, or the
    first import would spend a second building it."""
    target = os.environ.get("MPLCONFIGDIR")
    if target and os.path.isdir(MPL_CACHE) and not os.path.exists(target):
        try:
            shutil.copytree(MPL_CACHE, target)
        except OSError:
            pass


def _preload(chan):
    """Imports the modules CEM_PRELOAD names (a pooled container does this before its job
    arrives). A module that fails to import is skipped: the code's own import says why. Nothing
    they print reaches the job's output."""
    names = [n.strip() for n in os.environ.get("CEM_PRELOAD", "").split(",") if n.strip()]
    if not names:
        return
    saved = os.dup(2)
    os.dup2(chan.devnull, 2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in names[:32]:
                try:
                    importlib.import_module(name)
                except BaseException:
                    pass
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _warm_up():
    """Pays before the job what a process pays once: its first compile() costs about 1 ms on
    Python 3.13, its first result encoding a little."""
    compile("pass", SOURCE, "exec", dont_inherit=True)
    _encode_result({"warm": [1.5, None]}, 64)


def main():
    global _chan
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE
    sys.path.insert(0, LIB)  # -I leaves the script's directory off sys.path
    if os.path.isdir(PACKAGES):
        sys.path.append(PACKAGES)  # after the image's own: a user package cannot replace them
    # Our two reader threads would make every os.fork() warn; they never hold anything a child needs.
    warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
    _chan = chan = Channel()
    _install_skills_package()
    _prepare_matplotlib()
    _preload(chan)
    _warm_up()
    pumps = start_capture(chan)
    try:
        code, context_vars, limits, servers = read_job(chan)
        _install_servers_package(servers)
    except ValueError as e:
        chan.send({"type": "done", "success": False, "result": None, "result_truncated": False,
                   "error": str(e), "error_type": "HarnessError", "traceback": None}, final=True)
        os._exit(1)
    try:
        for pump in pumps:
            pump.arm(limits["max_output_bytes"] + _edge["bytes"])
        outcome = run_job(code, context_vars, limits["max_result_bytes"])
        _send_open_figures()
        stop_capture(chan, pumps)
    except BaseException as e:  # a harness bug: still end with a done frame
        outcome = dict(_failure(e), error=f"harness failure: {e!r}", error_type="HarnessError")
    chan.send({"type": "done", **outcome}, final=True)
    os._exit(0)  # user threads may still run: do not wait for them


if __name__ == "__main__":
    main()
