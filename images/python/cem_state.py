"""A session's state as data: the globals one execution leaves, turned into bytes at its end and
turned back into globals at the start of the next execution, in another fresh container.

Why it is built this way:

- The bytes are opaque to the server. It stores them and streams them back; only a sandbox ever
  unpickles them, so a snapshot crafted by hostile code can only affect the next sandbox of its
  own session, which that code could have affected anyway.
- One pickle per variable, each with its own out-of-band buffers (pickle protocol 5): a value
  that cannot be carried (an open file, a socket, a generator, a thread) is listed with the
  reason and the others are carried; a value that fails to load is listed the same way and the
  others load. numpy arrays and the blocks of pandas frames travel as raw buffers, without a
  copy on either side.
- Modules are carried by name and imported again. Functions and classes the session's code
  defined live in `__main__`, which plain pickle only refers to by name; they are carried by
  value instead (their code object through marshal, their closures, defaults and attributes),
  the way cloudpickle does, with the stdlib alone. The two-step reduction (a skeleton first,
  its state after) lets functions and classes refer to themselves.
- One blob per variable (its pickle and buffers end to end, named by their sha256): a variable
  whose blob did not change since the state loaded is named, not sent again, and the server
  keeps every blob once for all of a tenant's revisions and forks. The manifest (modules, and
  per variable its blob, the sizes of its pieces, its type, shape and a short preview) is JSON.
- Stdlib only.
"""

import importlib, io, marshal, pickle, reprlib, sys, types

MB = 1 << 20

_UNCARRIABLE = (  # type names -> why they cannot travel, in words a user acts on
    ("TextIOWrapper", "an open file: open it again in the next call"),
    ("BufferedReader", "an open file: open it again in the next call"),
    ("BufferedWriter", "an open file: open it again in the next call"),
    ("FileIO", "an open file: open it again in the next call"),
    ("socket", "a socket: connect again in the next call"),
    ("generator", "a generator: turn it into a list to keep its items"),
    ("coroutine", "a coroutine: await it within one call"),
    ("Thread", "a thread: it ends with its container"),
    ("lock", "a lock: make a new one in the next call"),
    ("Popen", "a process: it ends with its container"),
)


def _why_not(value, error):
    name = type(value).__name__
    for kind, reason in _UNCARRIABLE:
        if name == kind or name.endswith(kind):
            return reason
    return f"cannot be serialized: {error}"


# ---- functions and classes of __main__, by value ----


# What one load has rebuilt, by the id the object had where it was dumped: each variable is a
# pickle of its own, and a class two variables share (a class and its instances) must come back
# as one class.
_rebuilt, _filled = {}, set()


def _make_function(code, name, qualname, ncells, key, module):
    """A function skeleton: its code and globals (those of `module`, `__main__` for the
    session's own functions); its closure's cells are filled by _fill_function."""
    if key in _rebuilt:
        return _rebuilt[key]
    closure = tuple(types.CellType() for _ in range(ncells)) or None
    scope = importlib.import_module(module).__dict__ if module != "__main__" else \
        sys.modules["__main__"].__dict__
    fn = types.FunctionType(marshal.loads(code), scope, name, None, closure)
    fn.__qualname__ = qualname
    _rebuilt[key] = fn
    return fn


def _fill_function(fn, state):
    if id(fn) in _filled:
        return
    defaults, kwdefaults, cells, attrs, annotations = state
    fn.__defaults__, fn.__kwdefaults__ = defaults, kwdefaults
    for cell, (filled, value) in zip(fn.__closure__ or (), cells):
        if filled:
            cell.cell_contents = value
    fn.__dict__.update(attrs)
    if annotations:
        fn.__annotations__ = annotations
    _filled.add(id(fn))


def _make_class(meta, name, qualname, bases, slots, key):
    if key in _rebuilt:
        return _rebuilt[key]
    namespace = {"__module__": "__main__", "__qualname__": qualname}
    if slots is not None:
        namespace["__slots__"] = slots
    cls = _rebuilt[key] = meta(name, bases, namespace)
    return cls


def _fill_class(cls, attrs):
    if id(cls) in _filled:
        return
    _filled.add(id(cls))
    for key, value in attrs.items():
        try:
            setattr(cls, key, value)
        except (AttributeError, TypeError):
            pass  # read-only attributes of the type itself


def _is_helper(helper, value):
    """Whether `value` is still the helper: the same object, or the module a helper imported on
    first use stands for (code that runs `import statistics` binds the real one)."""
    if helper is value:
        return True
    modules = isinstance(helper, types.ModuleType) and isinstance(value, types.ModuleType)
    return modules and value.__name__ == helper.__name__


def _dataclass_marker(name):
    import dataclasses  # imported already by the code whose state holds the marker

    return getattr(dataclasses, name)


def _mapping_proxy(mapping):
    return types.MappingProxyType(mapping)


_CLASS_SKIP = {"__dict__", "__weakref__", "__module__", "__qualname__", "__slots__", "__doc__"}


def _globals_module(fn):
    """The module whose globals `fn` runs in: `__main__`, or (a wrapper that functools.wraps
    named after a session function, such as dataclasses' repr) the module that made it."""
    main = sys.modules.get("__main__")
    if main is not None and fn.__globals__ is main.__dict__:
        return "__main__"
    name = fn.__globals__.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    if module is None or module.__dict__ is not fn.__globals__:
        raise pickle.PicklingError(f"function {fn.__qualname__} runs in globals of no module")
    return name


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        # Only code that imported dataclasses can hold its markers (importing it here would cost
        # every container's start about 13 ms of CPU).
        dataclasses = sys.modules.get("dataclasses")
        if dataclasses is not None and obj is dataclasses.MISSING:
            return _dataclass_marker, ("MISSING",)
        if dataclasses is not None and isinstance(obj, dataclasses._FIELD_BASE):
            return _dataclass_marker, (obj.name,)
        if isinstance(obj, types.MappingProxyType):  # a dataclass field's metadata
            return _mapping_proxy, (dict(obj),)
        if getattr(obj, "__module__", None) != "__main__":
            return NotImplemented
        if isinstance(obj, types.FunctionType):
            cells = []
            for cell in obj.__closure__ or ():
                try:
                    cells.append((True, cell.cell_contents))
                except ValueError:  # an empty cell
                    cells.append((False, None))
            state = (obj.__defaults__, obj.__kwdefaults__, cells, dict(obj.__dict__),
                     dict(getattr(obj, "__annotations__", None) or {}))
            return (_make_function,
                    (marshal.dumps(obj.__code__), obj.__name__, obj.__qualname__, len(cells),
                     id(obj), _globals_module(obj)),
                    state, None, None, _fill_function)
        if isinstance(obj, type):
            slots = obj.__dict__.get("__slots__")
            if isinstance(slots, str):
                slots = [slots]
            skip = _CLASS_SKIP | set(slots or ())
            attrs = {k: v for k, v in obj.__dict__.items() if k not in skip}
            if obj.__doc__ is not None:
                attrs["__doc__"] = obj.__doc__
            return (_make_class,
                    (type(obj), obj.__name__, obj.__qualname__, obj.__bases__,
                     list(slots) if slots is not None else None, id(obj)),
                    attrs, None, None, _fill_class)
        return NotImplemented


def _dump(value):
    """The value's pickle and its out-of-band buffers (as bytes-like views)."""
    buffers = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(value)
    return [out.getbuffer()] + [b.raw() for b in buffers]


# ---- taking and loading a snapshot ----


def snapshot(namespace, skip, max_bytes):
    """The state of `namespace` (a module's globals), leaving out dunder names and the values
    `skip` maps to (the helpers, unless code rebound them).

    Returns (report, modules, variables): report = {"carried", "not_carried", "bytes", "saved",
    "reason"}; modules maps names to the modules they are; variables, when saved, lists
    (name, value, pieces), pieces being the variable's pickle and its out-of-band buffers."""
    modules, variables, carried, not_carried = {}, [], [], []
    total = 0
    for name, value in list(namespace.items()):
        if name.startswith("__") and name.endswith("__"):
            continue
        if name in skip and _is_helper(skip[name], value):
            continue
        if isinstance(value, types.ModuleType):
            module = getattr(value, "__name__", None)
            if module and sys.modules.get(module) is value:
                modules[name] = module
                carried.append(name)
            else:
                not_carried.append({"name": name, "reason": "a module that cannot be imported by name"})
            continue
        try:
            pieces = _dump(value)
        except BaseException as e:  # noqa: BLE001 - any failure means "not carried"
            not_carried.append({"name": name, "reason": _why_not(value, e)})
            continue
        size = sum(p.nbytes for p in pieces)
        if size > max_bytes:
            not_carried.append({"name": name, "reason": f"{size / MB:.1f} MB, over the session's "
                                f"bound of {max_bytes / MB:.0f} MB by itself"})
            continue
        total += size
        variables.append((name, value, pieces))
        carried.append(name)
    report = {"carried": sorted(carried), "not_carried": not_carried, "bytes": total,
              "saved": True, "reason": None}
    if total > max_bytes:
        report.update(saved=False, carried=[], reason=(
            f"the state is {total / MB:.1f} MB, over the session's bound of {max_bytes / MB:.0f} MB: "
            "the session keeps its previous state; delete large variables (del name) to save again"))
        return report, {}, []
    return report, modules, variables


def digest(pieces):
    """The sha256 of a variable's pieces, end to end: the name the server stores them under.
    Only a snapshot sent after the done frame needs it: hashlib (OpenSSL's start-up, about 4 ms
    of CPU) is imported then, not in every container's start."""
    import hashlib

    h = hashlib.sha256()
    for piece in pieces:
        h.update(piece)
    return h.hexdigest()


_PREVIEW = reprlib.Repr()
_PREVIEW.maxstring, _PREVIEW.maxother, _PREVIEW.maxlevel = 80, 80, 2
_PREVIEW.maxlist = _PREVIEW.maxtuple = _PREVIEW.maxdict = _PREVIEW.maxset = 6
PREVIEW_CHARS = 160


def describe(value):
    """What a session's manifest says of a variable: its type, its shape or length where it has
    one, and a short preview (a DataFrame's columns, a value's bounded repr)."""
    kind = type(value)
    info = {"type": (kind.__qualname__ if kind.__module__ == "builtins"
                     else f"{kind.__module__}.{kind.__qualname__}")[:120]}
    try:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple) and len(shape) <= 8 and all(type(n) is int for n in shape):
            info["shape"] = list(shape)
        elif not isinstance(value, type) and hasattr(kind, "__len__"):
            info["len"] = int(len(value))
    except Exception:  # noqa: BLE001 - a value that cannot say is described without it
        pass
    try:
        columns = getattr(value, "columns", None) if "shape" in info else None
        if columns is not None:
            names = [str(c) for c in list(columns)[:12]]
            preview = "columns: " + ", ".join(names) + (", …" if len(columns) > 12 else "")
        else:
            preview = _PREVIEW.repr(value)
    except Exception as e:  # noqa: BLE001
        preview = f"<no preview: {type(e).__name__}>"
    info["preview"] = preview[:PREVIEW_CHARS]
    return info


class CorruptState(Exception):
    """The snapshot's bytes are not a snapshot."""


def load(modules, variables, namespace):
    """Puts a snapshot's modules ({name: module}) and variables ([(name, pieces)], pieces being
    bytes-like) into `namespace`. Returns what could not be loaded, as not_carried entries, and
    what failed for want of a module (to try again with retry() once the job's `servers`
    package is on the path)."""
    failed, later = [], []
    _rebuilt.clear()
    _filled.clear()
    for name, module in modules.items():
        try:
            namespace[name] = importlib.import_module(module)
        except ImportError as e:
            later.append((name, "module", module, e))
        except BaseException as e:  # noqa: BLE001
            failed.append({"name": name, "reason": f"import {module} failed: {e!r}"})
    for name, pieces in variables:
        try:
            namespace[name] = pickle.loads(pieces[0], buffers=pieces[1:])
        except ImportError as e:
            later.append((name, "value", [bytes(p) for p in pieces], e))
        except BaseException as e:  # noqa: BLE001
            failed.append({"name": name, "reason": f"could not be restored: {e!r}"})
    return failed, later


def needs(modules, namespace):
    """The top-level packages a loaded state needs: those of its modules and of its values'
    types (pandas for a DataFrame), in a stable order."""
    found = [m.partition(".")[0] for m in modules.values()]
    for value in list(namespace.values()):
        module = getattr(type(value), "__module__", None)
        if isinstance(module, str):
            found.append(module.partition(".")[0])
    skip = {"builtins", "__main__", "cem_state", "cem_helpers"}
    seen = []
    for name in found:
        if name not in seen and name not in skip and not name.startswith("_"):
            seen.append(name)
    return seen


def split(data, sizes):
    """The pieces of a variable whose bytes are `data` (bytes-like), `sizes` long each."""
    view, pieces, at = memoryview(data).cast("B"), [], 0
    if not sizes or sum(sizes) != len(view) or any(type(n) is not int or n < 0 for n in sizes):
        raise CorruptState(f"its pieces ({sizes!r}) do not add up to its {len(view)} bytes")
    for size in sizes:
        pieces.append(view[at:at + size])
        at += size
    return pieces


def retry(later, namespace):
    """Loads again what load() could not for want of a module; returns what still fails."""
    failed = []
    for name, kind, payload, first in later:
        try:
            if kind == "module":
                namespace[name] = importlib.import_module(payload)
            else:
                namespace[name] = pickle.loads(payload[0], buffers=payload[1:])
        except BaseException as e:  # noqa: BLE001
            what = f"import {payload} failed" if kind == "module" else "could not be restored"
            failed.append({"name": name, "reason": f"{what}: {e!r}"})
    return failed
