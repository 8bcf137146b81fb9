"""In-container harness: runs one job of agent-written Python and reports over stdio.

Frames are JSON objects, one per line, at most 8 MiB each:
  in:  a session's state first, when it has one: {"type":"restore","modules","vars":[{"name",
       "blob","sizes"}],"dir"} (the blobs are files named by their sha256 in dir; with dir null
       their bytes follow, in order, as {"type":"state","data"} frames (base64), then
       {"type":"state_end","bytes"}); then {"type":"job","code",
       "context_vars","limits":{"max_output_bytes","max_result_bytes"},"edge_bytes","servers"?,
       "session"?:{"max_bytes"},"plan"?:{"tools","max_calls","max_bytes"},"egress"?:{"http"}}, then {"type":"reply","id","result"} or {"type":"reply","id",
       "error"} answering our calls, in any order (threads may have several calls out at once).
  out: {"type":"ready"} once the interpreter and its preload are ready for work, {"type":"loaded"}
       once a session's state is loaded, {"type":"output","stream","data"}, per stream that passes its limit {"type":"output","stream",
       "truncated":true,"dropped_bytes"} when it first drops and once more at the end for the rest,
       {"type":"call","id","method","params"}, for a tool whose policy is `plan`
       {"type":"plan","server","tool","arguments"} (no reply), {"type":"plan_options",
       "stop_on_error"}, {"type":"plan_refused","reason"}, {"type":"image","source","data"} (base64 of a PNG,
       JPEG, GIF or WebP; past limits.max_images {"type":"image","source","dropped":true}),
       {"type":"link","path","description"} (a workspace file to return as a resource link),
       and last {"type":"done","success","result","result_truncated","error","error_type",
       "traceback","imports","state"?}; for a session's job the snapshot follows it: per variable
       whose blob is new {"type":"blob","bytes"} and that many raw bytes on the same stream, then
       {"type":"state_end","bytes","manifest":{"modules","vars":[{"name","sizes","blob"|"sent",
       "type","shape"?,"len"?,"preview"}]}} ("bytes": -1 and no manifest when none was taken);
       then exit 0 (1: bad job frame).

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
  One function (_done) makes the done frame, whether the job frame was bad, the code ran or
  raised, or the harness itself failed, so its shape and its cuts cannot drift apart.
- The helpers user code finds among its globals (read_file, show_image, call_tool, ...) are a
  module of their own, cem_helpers, beside cem_matplotlib in /opt/sandbox/lib: the harness is the
  channel and the job's life, the helpers are what user code calls. The harness gives the module
  its channel at start-up (cem_helpers.bind), so the module imports nothing from the harness, and
  leaves the module's frames out of tracebacks, as it does its own.
- Upstream MCP tools are functions of a generated package, read-only under /mnt/servers/<version>;
  the job names the version, which goes on sys.path and behind the image's /servers link. Each
  function calls call_tool, a `call` frame the server answers through the upstream: the package
  holds names, never credentials.
- Images: show_image() and matplotlib (the image's MPLBACKEND is cem_matplotlib, whose show()
  sends the open figures; figures still open at the end are sent too) become image frames. The
  server decodes, bounds and re-encodes them: what the harness sends is as untrusted as the rest.
- Stdlib only (the harness, cem_helpers and cem_state), all imports at start-up: a pooled
  container has paid for them before its job arrives. CEM_PRELOAD (set on pooled containers) names
  more modules to import then, such as pandas, so code that uses them does not wait for the
  import. The ready frame says all that is done: the pool offers a container only after it.
- Sessions carry state as data (cem_state): a session's container loads the snapshot before its
  job (a container prepared for the session's next call does so while the model thinks). Its
  blobs are hard links in the container's own read-only directory /mnt/state, mapped without a
  copy. After the done frame the harness sends the new snapshot: a variable whose bytes did not
  change is named by its blob, not sent; a new blob goes as raw bytes, not base64. The done frame
  reports what was carried; the client does not wait for the bytes to travel. A snapshot that is
  not one fails the job with a clear error.
- The done frame lists the top-level modules the code imported, so the server can preload what
  this tenant's code actually uses.
"""

import base64, builtins, codecs, importlib, io, itertools, json, linecache, os, sys
import threading
import fcntl, mmap, struct, termios, time, traceback, types, warnings

LIB = "/opt/sandbox/lib"  # the helpers and the matplotlib backend (PYTHONPATH, for subprocesses)
sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE
sys.path.insert(0, LIB)  # -I leaves the script's directory off sys.path, and ignores PYTHONPATH
import cem_helpers  # the globals user code gets (names of the original project)
import cem_state  # a session's globals as bytes and back
import cem_egress  # the way out through the server's proxy, when the job has one

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
OURS = (HARNESS, cem_helpers.__file__, cem_state.__file__)  # frames of these files are left out of tracebacks
SKILLS = "/skills"  # the saved skills, mounted read-only
SERVERS_MOUNT = "/mnt/servers"  # generated tools packages, one directory per version, read-only
PACKAGES_MOUNT = "/mnt/packages"  # installed package sets, one directory per set, read-only
SERVERS_LINK = "/tmp/.servers"  # the image's /servers points here; linked to the job's version
PACKAGES = "/opt/sandbox/packages"  # the user's packages (image build --requirements)
MPL_CACHE = "/opt/sandbox/matplotlib"  # matplotlib's font cache, built with the image
STATE_MOUNT = "/mnt/state"  # this container's own read-only directory of a session's blobs
MAX_IMPORTS = 32  # modules (dotted names) the done frame lists


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

    @staticmethod
    def encode(frame):
        """The frame as one line of bytes."""
        line = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return (line + "\n").encode("utf-8", "replace")  # lone surrogates -> "?"

    def send(self, frame, final=False):
        self.send_encoded(self.encode(frame), final)

    def send_encoded(self, line, final=False):
        data = memoryview(line)
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

    def send_blob(self, pieces, size):
        """One blob frame: its header line, then `size` raw bytes (the pieces, end to end), with
        nothing of another thread between them."""
        header = (json.dumps({"type": "blob", "bytes": size}, separators=(",", ":")) + "\n").encode()
        with self.lock:
            if self.closed:
                return
            try:
                for data in [memoryview(header)] + [memoryview(p).cast("B") for p in pieces]:
                    while data:
                        data = data[os.write(self.out_fd, data):]
            except OSError:
                os._exit(3)

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


# ---- wiring user code's world: skills, upstream tools, figures left open ----


def _send_open_figures():
    """Figures the code left open come back as images, as if it had called plt.show()."""
    if "matplotlib.pyplot" not in sys.modules:
        return
    try:
        import cem_matplotlib
        cem_matplotlib.send_figures()
    except BaseException as e:
        print(f"[sandbox] the open matplotlib figures could not be sent: {e!r}", file=sys.stderr)


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


def _install_servers_package(version):
    """Makes `import servers` and /servers show the tools package of this job's version."""
    runtime = types.ModuleType("cem_runtime", "What the generated servers package calls.")
    runtime.call_tool, runtime.ToolError = cem_helpers.call_tool, cem_helpers.ToolError
    runtime.ToolContent = cem_helpers.ToolContent
    # What the matplotlib backend (cem_matplotlib) sends through:
    runtime.show_image = cem_helpers.show_image
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


def _install_package_set(name):
    """Puts the installed package set of this job on sys.path: behind the standard library
    and the harness's own modules (which nothing in a set can replace), ahead of the image's
    site-packages (so a version the call asked for wins over the image's)."""
    if not name:
        return
    if not (len(name) == 32 and all(c in "0123456789abcdef" for c in name)):
        raise ValueError('job frame: "packages" must be a package set name')
    root = os.path.join(PACKAGES_MOUNT, name)
    if root in sys.path:  # a container prepared for a session with this set
        return
    if not os.path.isdir(root):
        raise ValueError(f"the package set {name} is not mounted")
    site = next((i for i, p in enumerate(sys.path)
                 if p.endswith(("site-packages", "dist-packages")) or p == PACKAGES), len(sys.path))
    # A new entry needs no importlib.invalidate_caches() (no finder has looked at it yet),
    # which would cost 100 ms on Python 3.13 (it loads importlib.metadata).
    sys.path.insert(site, root)


def _install_skills_package():
    pkg = _SkillsPackage("skills", "Saved skills, importable by name.")
    pkg.__path__ = [SKILLS]
    sys.modules["skills"] = pkg


# ---- running the job ----

_edge = {"bytes": 0}  # job.edge_bytes: sent past every cut, for the server's PII engine only


def _cap(text):
    return text if len(text) <= TEXT_CAP else text[:TEXT_CAP + _edge["bytes"]]


def _user_frames(stack):
    """Frames from the first <sandbox> frame on, up to (not into) the harness or a helper."""
    frames = list(stack)
    first = next((i for i, f in enumerate(frames) if f.filename == SOURCE), None)
    if first is None:
        return [f for f in frames if f.filename not in OURS]
    return list(itertools.takewhile(lambda f: f.filename not in OURS, frames[first:]))


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


def _done(success, result=None, result_truncated=False, error=None, error_type=None, tb=None):
    """The done frame, whichever way the job ended: every field present, the error and the
    traceback cut at TEXT_CAP (plus the edge). The result comes already cut (_encode_result).
    main() adds the imports and, for a session, the state report."""
    return {"type": "done", "success": success, "result": result,
            "result_truncated": result_truncated,
            "error": None if error is None else _cap(error), "error_type": error_type,
            "traceback": None if tb is None else _cap(tb), "imports": []}


def _failure(exc, harness=False):
    """The done frame of code that raised exc, or (harness=True) of the harness failing."""
    try:
        message = repr(exc) if harness else str(exc)
    except Exception:
        message = f"<str() of {type(exc).__name__} failed>"
    try:
        tb = _traceback(exc)
    except Exception:
        tb = None
    if harness:
        return _done(False, error=f"harness failure: {message}", error_type="HarnessError", tb=tb)
    return _done(False, error=message, error_type=type(exc).__name__, tb=tb)


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
    converted = cem_helpers.json_default(value)
    return converted if isinstance(converted, str) else _without_nan(converted, depth + 1)


def _encode_result(value, limit):
    """json.dumps(default=str) semantics, with pandas and numpy values as plain JSON and NaN as
    null; a value that still cannot be encoded becomes str()."""
    try:
        text = json.dumps(value, default=cem_helpers.json_default, allow_nan=False)
    except Exception:  # NaN/inf, cycles, non-string keys, a failing __str__ ...
        try:
            text = json.dumps(_without_nan(value), default=cem_helpers.json_default, allow_nan=False)
        except Exception:
            try:
                text = json.dumps(str(value))
            except Exception:
                text = json.dumps(f"<unserialisable {type(value).__name__}>")
    if len(text) > limit:  # ASCII JSON text: characters == bytes
        return text[:limit + _edge["bytes"]], True
    return json.loads(text), False


def new_main():
    """User code is the program: a fresh module registered as __main__, so pickle, dataclasses
    and `import __main__` see the user's globals rather than the harness's. Made before a
    session's state loads, so the functions it carries run in these globals."""
    main = sys.modules["__main__"] = types.ModuleType("__main__")
    main.__dict__.update(cem_helpers.GLOBALS)
    main.__dict__["__builtins__"] = builtins
    return main.__dict__


def run_job(g, code, context_vars, max_result_bytes):
    g.update(context_vars or {})  # merged after the helpers and the state: a context var wins
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
    return _done(True, result, truncated)


def read_job(chan, job):
    """The job frame, checked; anything else ends the harness with a failed done frame."""
    if job is None:
        job = first_frame(chan)
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
    max_images = limits.get("max_images", cem_helpers.MAX_IMAGES)
    if type(max_images) is not int or max_images < 0:
        raise ValueError('job frame: "limits.max_images" must be a non-negative integer')
    cem_helpers.limit_images(max_images)
    servers = job.get("servers")
    if not isinstance(servers, (str, type(None))):
        raise ValueError('job frame: "servers" must be a string or absent')
    packages = job.get("packages")
    if not isinstance(packages, (str, type(None))):
        raise ValueError('job frame: "packages" must be a string or absent')
    _read_plan(job.get("plan"))
    _open_egress(job.get("egress"))
    session = job.get("session")
    if session is not None and not (isinstance(session, dict)
                                    and type(session.get("max_bytes")) is int):
        raise ValueError('job frame: "session" must be an object with an integer "max_bytes"')
    return job["code"], job.get("context_vars"), limits, servers, packages, session


def _open_egress(egress):
    """The execution's way out (cem_egress), when the job has one."""
    if egress is None:
        return
    if not (isinstance(egress, dict) and isinstance(egress.get("http"), bool)):
        raise ValueError('job frame: "egress" must be {"http": true|false}')
    cem_egress.start(egress["http"])


def _read_plan(plan):
    """The job's `plan` tools and bounds, checked, for cem_helpers.call_tool."""
    if plan is None:
        return
    tools = plan.get("tools") if isinstance(plan, dict) else None
    bounds = [plan.get("max_calls"), plan.get("max_bytes")] if isinstance(plan, dict) else []
    if (not isinstance(tools, list) or not all(isinstance(t, list) and len(t) == 2 for t in tools)
            or not all(type(b) is int and b >= 0 for b in bounds) or len(bounds) != 2):
        raise ValueError('job frame: "plan" must be {"tools": [[server, tool]], "max_calls", "max_bytes"}')
    cem_helpers.set_plan([tuple(t) for t in tools], *bounds)


def read_restore(chan, frame):
    """A session's state from its restore frame: (modules, [(name, pieces)], {blob: sizes} of
    what loaded). The blobs are files in the frame's dir, mapped; or, without a dir, their bytes
    follow as state frames."""
    modules, entries = frame.get("modules"), frame.get("vars")
    if not isinstance(modules, dict) or not isinstance(entries, list):
        raise cem_state.CorruptState("its restore frame has no modules or vars")
    data = read_state(chan) if frame.get("dir") is None else None
    variables, loaded, at = [], {}, 0
    for entry in entries:
        name, blob, sizes = entry.get("name"), entry.get("blob"), entry.get("sizes")
        if not (isinstance(name, str) and isinstance(blob, str) and len(blob) == 64
                and all(c in "0123456789abcdef" for c in blob) and isinstance(sizes, list)):
            raise cem_state.CorruptState(f"its entry {entry!r} is not a variable")
        total = sum(n for n in sizes if type(n) is int)
        if data is None:
            try:
                blob_bytes = _map(os.path.join(STATE_MOUNT, blob))
            except (OSError, ValueError) as e:
                raise cem_state.CorruptState(f"the blob of {name!r} could not be mapped: {e}") from None
        else:
            blob_bytes, at = memoryview(data)[at:at + total], at + total
        variables.append((name, cem_state.split(blob_bytes, sizes)))
        loaded[blob] = sizes
    return modules, variables, loaded


def read_state(chan):
    """The blobs' bytes that follow a restore frame without a dir: state frames up to state_end."""
    data = bytearray()
    while True:
        try:
            frame = json.loads(chan.read_line())
        except EOFError:
            raise ValueError("stdin closed in the middle of the session's state") from None
        kind = frame.get("type") if isinstance(frame, dict) else None
        if kind == "state_end":
            if frame.get("bytes") != len(data):
                raise ValueError(f"state frames: {len(data)} bytes arrived, {frame.get('bytes')} were sent")
            return data
        if kind != "state" or not isinstance(frame.get("data"), str):
            raise ValueError("state frames: expected state or state_end")
        data += base64.b64decode(frame["data"])


def _map(path):
    """The file at `path`, mapped copy-on-write: the snapshot's arrays use its pages without a
    copy, and code may still change them (the file itself is read-only)."""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)


def first_frame(chan):
    """The first frame from the server, parsed (the job, or a session's first state frame)."""
    try:
        return json.loads(chan.read_line())
    except EOFError:
        raise ValueError("stdin closed before the job frame arrived") from None
    except OverflowError:
        raise ValueError("job frame longer than 8 MiB") from None
    except (ValueError, RecursionError) as e:
        raise ValueError(f"job frame is not valid JSON: {e}") from None


def _prepare_matplotlib():
    """Matplotlib needs a writable config directory; the image's font cache goes there, or the
    first import would spend a second building it. The cache is a file or two: plain reads and
    writes copy it (shutil's imports would cost every container's start about 8 ms of CPU)."""
    target = os.environ.get("MPLCONFIGDIR")
    if target and os.path.isdir(MPL_CACHE) and not os.path.exists(target):
        try:
            os.mkdir(target)
            for name in os.listdir(MPL_CACHE):
                with open(os.path.join(MPL_CACHE, name), "rb") as src:
                    with open(os.path.join(target, name), "wb") as dst:
                        dst.write(src.read())
        except OSError:
            pass


class _Quiet:
    """Points fd 1 and 2 at /dev/null (and silences warnings) for work done before the job:
    nothing a preload or a state load prints reaches the job's output."""

    def __init__(self, chan):
        self.chan = chan

    def __enter__(self):
        self.saved = [os.dup(1), os.dup(2)]
        os.dup2(self.chan.devnull, 1)
        os.dup2(self.chan.devnull, 2)
        self.warnings = warnings.catch_warnings()
        self.warnings.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self.warnings.__exit__(*exc)
        for fd, saved in zip((1, 2), self.saved):
            os.dup2(saved, fd)
            os.close(saved)


def _preload(chan):
    """Imports the modules CEM_PRELOAD names (a pooled container does this before its job
    arrives). A module that fails to import is skipped: the code's own import says why."""
    names = [n.strip() for n in os.environ.get("CEM_PRELOAD", "").split(",") if n.strip()]
    if not names:
        return
    with _Quiet(chan):
        for name in names[:32]:
            try:
                importlib.import_module(name)
            except BaseException:
                pass


class ImportLog:
    """The modules the job's code imports (its own import statements, in order, by their dotted
    names, with the submodules a `from` import brought): what the pool should preload for this
    tenant. `import matplotlib.pyplot` is learned as such, so a preload pays for pyplot too. A
    module a preload imported already still counts, as the code asked for it."""

    OURS = {"cem_helpers", "cem_state", "cem_matplotlib", "cem_runtime", "skills", "servers"}

    def __init__(self):
        self.names, self.scope = [], None
        self.real = builtins.__import__

    def watch(self, scope):
        """Records the imports made from `scope` (the code's globals) from now on."""
        self.scope = scope
        real, names, ours = self.real, self.names, self.OURS

        def recording_import(name, globals=None, locals=None, fromlist=(), level=0):
            module = real(name, globals, locals, fromlist, level)
            top = name.partition(".")[0]
            if level == 0 and globals is scope and top not in ours and not top.startswith("_"):
                # `from matplotlib import pyplot` imported the submodule matplotlib.pyplot.
                subs = [f"{name}.{item}" for item in (fromlist or ()) if isinstance(item, str)]
                for found in [name] + [s for s in subs if s in sys.modules]:
                    if found not in names and len(names) < MAX_IMPORTS:
                        names.append(found)
            return module

        builtins.__import__ = recording_import


def _send_state(chan, modules, variables, loaded):
    """Sends a snapshot after the done frame: each variable's blob, unless it is one that loaded
    (then it is named: a candidate of the same sizes is hashed to know), and last the manifest
    in state_end (the channel's last frame)."""
    described, sent, total = [], 0, 0
    for name, value, pieces in variables:
        sizes = [p.nbytes for p in pieces]
        entry = {"name": name, "sizes": sizes}
        blob = cem_state.digest(pieces) if sizes in loaded.values() else None
        if blob is not None and loaded.get(blob) == sizes:
            entry["blob"] = blob
        else:
            chan.send_blob(pieces, sum(sizes))
            entry["sent"], sent, total = sent, sent + 1, total + sum(sizes)
        entry.update(cem_state.describe(value))
        described.append(entry)
    manifest = {"modules": modules, "vars": described}
    chan.send({"type": "state_end", "bytes": total, "manifest": manifest}, final=True)


def _warm_up():
    """Pays before the job what a process pays once: its first compile() costs about 1 ms on
    Python 3.13, its first result encoding a little."""
    compile("pass", SOURCE, "exec", dont_inherit=True)
    _encode_result({"warm": [1.5, None]}, 64)


def main():
    if os.path.isdir(PACKAGES):
        sys.path.append(PACKAGES)  # after the image's own: a user package cannot replace them
    # Our two reader threads would make every os.fork() warn; they never hold anything a child needs.
    warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
    chan = Channel()
    cem_helpers.bind(chan)
    if os.environ.get("CEM_PACKAGES"):  # prepared for a session: its set before preload and state
        try:
            _install_package_set(os.environ["CEM_PACKAGES"])
        except ValueError:
            pass  # the job names the set again and fails with the cause
    _install_skills_package()
    _prepare_matplotlib()
    _preload(chan)
    _warm_up()
    pumps = start_capture(chan)
    g, lost, later, corrupt, loaded, state_imports = new_main(), [], [], None, {}, []
    chan.send({"type": "ready"})
    try:
        frame = first_frame(chan)
        if isinstance(frame, dict) and frame.get("type") == "restore":
            with _Quiet(chan):
                try:
                    modules, variables, loaded = read_restore(chan, frame)
                    lost, later = cem_state.load(modules, variables, g)
                    state_imports = cem_state.needs(modules, g)
                except cem_state.CorruptState as e:
                    corrupt = str(e)
            chan.send({"type": "loaded"})
            frame = None
        code, context_vars, limits, servers, packages, session = read_job(chan, frame)
        _install_servers_package(servers)
        _install_package_set(packages)
        if later:  # values and modules of the `servers` package, now on the path
            with _Quiet(chan):
                lost += cem_state.retry(later, g)
    except ValueError as e:
        chan.send(_done(False, error=str(e), error_type="HarnessError"), final=True)
        os._exit(1)
    if corrupt is not None:
        chan.send(_done(False, error_type="SessionStateError", error=(
            f"the session's saved state could not be read ({corrupt}); the code did not run. "
            'Run it on an earlier revision (session="HANDLE@N", see the resource session://HANDLE) '
            'or start a new session with session="new"')), final=True)
        os._exit(0)
    imports = ImportLog()
    # What the session's state needed (pandas for a DataFrame) counts as imported: a pool that
    # preloads it is one that loads the state at once.
    imports.names.extend(state_imports[:MAX_IMPORTS])
    imports.watch(g)
    try:
        for pump in pumps:
            pump.arm(limits["max_output_bytes"] + _edge["bytes"])
        done = run_job(g, code, context_vars, limits["max_result_bytes"])
        _send_open_figures()
        stop_capture(chan, pumps)
    except BaseException as e:  # a harness bug: still end with a done frame
        done = _failure(e, harness=True)
    done["imports"] = list(imports.names)
    if session is None:
        chan.send(done, final=True)
        os._exit(0)  # user threads may still run: do not wait for them
    try:
        report, modules, variables = cem_state.snapshot(g, cem_helpers.GLOBALS, session["max_bytes"])
        report["not_carried"] = lost + report["not_carried"]
    except BaseException as e:  # a harness bug: the session keeps its previous state
        report, modules, variables = {"carried": [], "not_carried": lost, "bytes": 0, "saved": False,
                                      "reason": f"the snapshot failed: {e!r}"}, {}, []
    done["state"] = report
    chan.send(done)
    if report["saved"]:
        try:
            _send_state(chan, modules, variables, loaded)
        except BaseException:  # a harness bug: the server drops what arrived, the session keeps its state
            chan.send({"type": "state_end", "bytes": -1}, final=True)
    else:
        chan.send({"type": "state_end", "bytes": -1}, final=True)
    os._exit(0)


if __name__ == "__main__":
    main()
