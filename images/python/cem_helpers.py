"""The helpers agent-written code finds among its globals (names and behaviour of the original
project): workspace files, the data helpers, show_image and resource_link, the server's calls
(skills, PII tokens) and call_tool for upstream MCP tools.

Why a module of its own, beside cem_matplotlib: the harness (harness.py) owns the channel and the
job's life; these are what user code calls, and a change to one should not mean reading the
other. The harness imports this module at start-up and gives it the channel with bind(); nothing
here imports the harness. GLOBALS is what the harness puts into the code's globals.

- Stdlib only, imported at the harness's start-up, before the job arrives: pandas, numpy,
  matplotlib and PIL values are recognised by their class, never imported. What few jobs use
  and costs a start-up measurable CPU (statistics, urllib.parse) is imported on first use: every
  container pays its start-up, on a machine where starts and executions share the cores.
- Workspace paths are resolved and checked against /workspace (symbolic links included).
- Frames (image, link, call) go through the harness's channel. A process without it (a subprocess
  of user code that imports this module) can use the file and data helpers; the rest raise.
- The harness leaves this file's frames out of tracebacks, as its own: an error raised here reads
  as raised by the helper the code called.
"""

import base64, collections, importlib, io, json, math, os, re, threading, types
from datetime import date, datetime, timedelta

WORKSPACE = "/workspace"
MAX_IMAGE_BYTES = 6 << 20  # an image frame's data, before base64 (the frame stays under 8 MiB)
IMAGE_KINDS = ((b"\x89PNG\r\n\x1a\n", "PNG"), (b"\xff\xd8\xff", "JPEG"), (b"GIF87a", "GIF"),
               (b"GIF89a", "GIF"))
MAX_IMAGES = 8  # images sent per job when the job frame does not say (limits.max_images)

_chan = None  # the harness's Channel, once bound


def bind(chan):
    """Gives the helpers the harness's channel (at start-up, before the job arrives)."""
    global _chan
    _chan = chan


def limit_images(max_images):
    """Images past this many (the job's limits.max_images) are dropped, not sent."""
    _images["max"] = max_images


def _channel():
    if _chan is None:
        raise RuntimeError("no channel to the server: only the sandbox's own process has one")
    return _chan


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


def json_default(value):
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


def filter_by_field(data, field, value):
    return [d for d in _records(data) if isinstance(d, dict) and d.get(field) == value]


def summarize_list(data, limit=10):
    if _is_pandas(data, "DataFrame") or _is_pandas(data, "Series"):
        return {"count": len(data), "sample": _records(data.head(limit))}
    data = _records(data)
    return {"count": len(data), "sample": data[:limit]}


def format_output(data, max_chars=5000):
    return json.dumps(_records(data), indent=2, default=json_default)[:max_chars]


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


_images = {"sent": 0, "max": MAX_IMAGES}
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
    chan = _channel()
    if number > _images["max"]:
        chan.send({"type": "image", "source": source, "dropped": True})
        return None
    chan.send({"type": "image", "source": source, "data": base64.b64encode(data).decode("ascii")})
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
    _channel().send(frame)
    from urllib.parse import quote
    return "workspace:///" + quote(rel)


def _server_call(method, **params):
    """Ask the server; its error reply is raised as RuntimeError(message)."""
    return _channel().call(method, params)


def tokenize_pii(text):
    reply = _server_call("tokenize_pii", text=text)
    if isinstance(reply, dict):  # {"sanitized": str, "tokens": {...}}
        return reply.get("sanitized"), reply.get("tokens")
    if isinstance(reply, list) and len(reply) == 2:  # a serialised (sanitized, tokens) pair
        return reply[0], reply[1]
    raise RuntimeError("tokenize_pii: unexpected reply from the server")


class ToolError(Exception):
    """An upstream MCP tool failed, or the call was refused; the message says why."""


class ToolContent(dict):
    """An image, audio clip or resource a tool returned: a dict (type, mime_type, data or
    text, uri) that can write itself to the workspace."""

    @property
    def bytes(self):
        if self.get("data") is not None:
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
    Raises ToolError when the tool fails or the call is refused. A tool whose policy is `plan`
    is not called: the call joins the plan and a Planned value comes back at once."""
    if arguments is not None and not isinstance(arguments, dict):
        raise TypeError("call_tool: arguments must be a dict")
    if (server, tool) in _plan["tools"]:
        return _plan_call(server, tool, arguments or {})
    params = {"server": server, "tool": tool, "arguments": arguments or {}}
    return _wrap_contents(_channel().call("call_tool", params, error=ToolError))


# ---- plans: calls to tools whose policy is `plan` ----

_plan = {"tools": frozenset(), "max_calls": 0, "max_bytes": 0, "calls": 0, "bytes": 0,
         "refused": None}
_plan_lock = threading.Lock()  # numbering, bounds and the frame go together


def set_plan(tools, max_calls, max_bytes):
    """The job's `plan` tools ((server, tool) pairs) and the plan's bounds."""
    _plan.update(tools=frozenset(tools), max_calls=max_calls, max_bytes=max_bytes)


class PlanError(RuntimeError):
    """A planned call's value was used as its result, or the plan went past its bounds."""


class Planned:
    """What a call to a tool whose policy is `plan` returns: the call is recorded, not made.
    When the code has finished, the user is asked once about every planned call; on accept the
    server sends them, in order. There is no result while the code runs: using this value as
    one raises PlanError, which says so."""

    __slots__ = ("call", "server", "tool")
    planned = True

    def __init__(self, call, server, tool):
        self.call, self.server, self.tool = call, server, tool

    def __repr__(self):
        return (f"<Planned call {self.call}: {self.server}/{self.tool}, sent only if the user "
                "approves the plan when the code has finished>")

    def _refuse(self, *_args, **_kwargs):
        raise PlanError(
            f"{self.server}/{self.tool} is planned, not called: its policy is `plan`, so the "
            "call is sent only after the code has finished and the user has approved the whole "
            "plan, and it has no result while the code runs. Do not use its value; with a "
            "session, plan_results() in the next call gives each planned call's outcome")

    def __getattr__(self, name):
        if name.startswith("__") or name in Planned.__slots__:
            raise AttributeError(name)
        self._refuse()

    __getitem__ = __iter__ = __len__ = __bool__ = __contains__ = _refuse
    __int__ = __float__ = __index__ = _refuse


def _plan_call(server, tool, arguments):
    chan = _channel()
    line = chan.encode({"type": "plan", "server": server, "tool": tool, "arguments": arguments})
    # The arguments' bytes, as the server counts them: the line without its envelope.
    size = len(line) - len(chan.encode({"type": "plan", "server": server, "tool": tool,
                                        "arguments": None})) + len("null")
    with _plan_lock:
        if _plan["refused"] is None:
            if _plan["calls"] >= _plan["max_calls"]:
                _refuse_plan(f"the code planned more than {_plan['max_calls']} calls, the most "
                             "one plan may hold (--plan-max-calls)")
            elif _plan["bytes"] + size > _plan["max_bytes"]:
                _refuse_plan(f"the planned calls' arguments came to more than {_plan['max_bytes']} "
                             "bytes, the most one plan may hold (--plan-max-bytes)")
        if _plan["refused"] is not None:
            raise PlanError(_plan["refused"] + ": nothing of the plan will be sent")
        chan.send_encoded(line)
        _plan["calls"] += 1
        _plan["bytes"] += size
        return Planned(_plan["calls"], server, tool)


def _refuse_plan(reason):
    _plan["refused"] = reason
    _channel().send({"type": "plan_refused", "reason": reason})


def plan_options(stop_on_error=True):
    """Whether the plan stops at its first failed call when it applies (the default), or sends
    the calls after a failure all the same."""
    _channel().send({"type": "plan_options", "stop_on_error": bool(stop_on_error)})


def plan_results():
    """With a session: the outcomes of the plan made by the call whose state this call runs on
    ({"plan", "status", "calls": [{"call", "server", "tool", "outcome", "result"|"error"}]}),
    or None when that call planned nothing."""
    return _server_call("plan_results")


def detokenize_pii(text, tokens=None):
    return _server_call("detokenize_pii", text=text, tokens=tokens)


def save_skill(name, code, description=""):
    return _server_call("save_skill", name=name, code=code, description=description)


def load_skill(name):
    return _server_call("load_skill", name=name)


def list_skills():
    return _server_call("list_skills")


class OnFirstUse(types.ModuleType):
    """A module among the globals that is imported when code first uses it: `statistics` costs
    about 10 ms of CPU in every container's start, and most code never touches it. Code that
    imports it binds the real module (cem_state counts that as the helper still)."""

    def __getattr__(self, name):
        return getattr(importlib.import_module(self.__name__), name)

    def __dir__(self):
        return dir(importlib.import_module(self.__name__))


statistics = OnFirstUse("statistics")

GLOBALS = dict(
    json=json, re=re, math=math, statistics=statistics, collections=collections,
    datetime=datetime, date=date, timedelta=timedelta, workspace=WORKSPACE,
    read_file=read_file, write_file=write_file, list_files=list_files, delete_file=delete_file,
    filter_by_field=filter_by_field, summarize_list=summarize_list,
    aggregate_stats=aggregate_stats, format_output=format_output,
    show_image=show_image, resource_link=resource_link,
    _server_call=_server_call,
    call_tool=call_tool, ToolError=ToolError,
    Planned=Planned, PlanError=PlanError, plan_options=plan_options, plan_results=plan_results,
    save_skill=save_skill, load_skill=load_skill, list_skills=list_skills,
    tokenize_pii=tokenize_pii, detokenize_pii=detokenize_pii,
)
