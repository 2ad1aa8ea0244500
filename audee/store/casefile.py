"""Case files: one pickle per failing test case, read back only through a restricted,
bounded unpickler.

Pickle is kept (users and older tools expect ``case.pkl``), but loading never executes
anything and never runs away:

1. the file size is capped (:data:`MAX_FILE_BYTES`);
2. before loading, the opcodes are scanned (:mod:`pickletools`) and the object graph
   they would build is measured: only plain opcodes are accepted, and the graph must be
   acyclic, at most :data:`MAX_DEPTH` containers deep and at most :data:`MAX_NODES`
   elements counting a shared object each time it is reached — so a few-KB "billion
   laughs" pickle (one list referenced many times, nested) or a tuple-hash bomb is
   refused in milliseconds instead of hanging the loader or the first walk over it;
3. the unpickler resolves only the few numpy callables that rebuild arrays and dtypes;
   anything else — ``os.system``, ``builtins.eval``, any class — is refused;
4. after loading, one bounded walk admits only plain Python data (dict, list, tuple,
   str, bytes, int, float, bool, None) and numpy arrays/scalars of plain numeric dtypes
   (kinds b, i, u, f: no structured, object, void, string or datetime dtypes), before
   anything casts or uses an array.

Every problem is one :class:`CaseFileError` line.  What the record must contain is
:class:`audee.store.caserecord.CaseRecord`'s business.
"""
from __future__ import annotations

import io
import pickle
import pickletools
from pathlib import Path
from typing import Any

import numpy as np

from audee.core.bounded import read_bytes
from audee.core.errors import CaseFileError

CASE_FORMAT = "audee.case/2"                          # what audee writes
READ_FORMATS = ("audee.case/1", "audee.case/2")      # what audee reads

MAX_FILE_BYTES = 2 * 1024 ** 3   # a case file larger than this is refused unread
MAX_DEPTH = 64                   # nested containers
MAX_NODES = 2_000_000            # elements, a shared one counted each time it is reached

# (module, name) pairs a case file may reference: exactly what numpy arrays, dtypes and
# numpy scalars need to be rebuilt.  Both numpy 2 (_core) and numpy 1 (core) spellings.
_ALLOWED = {
    (mod, name)
    for mod in ("numpy._core.multiarray", "numpy.core.multiarray")
    for name in ("_reconstruct", "scalar")
} | {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.numeric", "_frombuffer"),
}

NUMERIC_KINDS = "biufc"  # bool, signed and unsigned integers, floats, complex (an op's fft or polar output)


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: case files hold only numpy arrays "
                                     "and plain Python data")


# ---- 2. the opcode scan ----------------------------------------------------------------------
class _Node:
    """A container (or reduced object) the pickle would build; ``kids`` what it holds."""

    __slots__ = ("kids",)

    def __init__(self, kids: list | None = None):
        self.kids = kids if kids is not None else []


_LEAF = object()   # an atom: int, float, str, bytes, None, bool, a global's name
_MARK = object()

_ATOMS = {"INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "STRING", "BINSTRING",
          "SHORT_BINSTRING", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8", "NONE", "NEWTRUE",
          "NEWFALSE", "FLOAT", "BINFLOAT"}
_STRINGS = {"UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8"}


class _Refused(Exception):
    pass


def scan_opcodes(data: bytes, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Measure the object graph ``data`` would build, without building it; raise
    :class:`_Refused` for opcodes case files never need, cycles, or graphs over the bounds."""
    stack: list[Any] = []
    memo: dict[Any, Any] = {}

    def pop() -> Any:
        if not stack or stack[-1] is _MARK:
            raise _Refused("malformed pickle (stack underflow)")
        return stack.pop()

    def pop_mark() -> list:
        items = []
        while stack and stack[-1] is not _MARK:
            items.append(stack.pop())
        if not stack:
            raise _Refused("malformed pickle (no mark)")
        stack.pop()
        items.reverse()
        return items

    def top_node() -> _Node:
        if not stack or not isinstance(stack[-1], _Node):
            raise _Refused("malformed pickle (no container to fill)")
        return stack[-1]

    root = None
    try:
        for op, arg, _pos in pickletools.genops(data):
            name = op.name
            if name in _ATOMS:
                stack.append(_LEAF)
            elif name in _STRINGS:
                stack.append(arg)  # kept: STACK_GLOBAL names its callable with two of them
            elif name == "GLOBAL":
                _check_global(*str(arg).split(" ", 1))
                stack.append(_LEAF)
            elif name in ("PROTO", "FRAME"):
                pass
            elif name == "STOP":
                root = pop()
                break
            elif name == "MARK":
                stack.append(_MARK)
            elif name == "POP":
                if not stack:
                    raise _Refused("malformed pickle (stack underflow)")
                stack.pop()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                stack.append(pop())
                stack.append(stack[-1])
            elif name == "STACK_GLOBAL":
                qual, module = pop(), pop()
                if not isinstance(qual, str) or not isinstance(module, str):
                    raise _Refused("malformed pickle (STACK_GLOBAL without names)")
                _check_global(module, qual)
                stack.append(_LEAF)
            elif name in ("EMPTY_LIST", "EMPTY_DICT", "EMPTY_SET", "EMPTY_TUPLE"):
                stack.append(_Node())
            elif name in ("LIST", "TUPLE", "DICT", "FROZENSET"):
                stack.append(_Node(pop_mark()))
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                items = [pop() for _ in range(n)]
                items.reverse()
                stack.append(_Node(items))
            elif name == "APPEND":
                x = pop()
                top_node().kids.append(x)
            elif name == "SETITEM":
                v, k = pop(), pop()
                top_node().kids.extend((k, v))
            elif name in ("APPENDS", "SETITEMS", "ADDITEMS"):
                items = pop_mark()
                top_node().kids.extend(items)
            elif name == "REDUCE":
                args = pop()
                pop()  # the callable: a global, checked by find_class at load
                stack.append(_Node([args]))
            elif name == "BUILD":
                state = pop()
                top_node().kids.append(state)
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                if not stack or stack[-1] is _MARK:
                    raise _Refused("malformed pickle (nothing to memoize)")
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                if not stack or stack[-1] is _MARK:
                    raise _Refused("malformed pickle (nothing to memoize)")
                memo[len(memo)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                if arg not in memo:
                    raise _Refused(f"malformed pickle (memo {arg!r} unset)")
                stack.append(memo[arg])
            else:  # INST, OBJ, NEWOBJ(_EX), EXT*, PERSID, out-of-band buffers: never in a case file
                raise _Refused(f"refusing pickle opcode {name}: case files hold only numpy arrays and plain "
                               "Python data")
    except _Refused:
        raise
    except Exception as exc:  # truncated or garbage bytes
        raise _Refused(f"{type(exc).__name__}: {exc}") from None
    if root is None:
        raise _Refused("malformed pickle (no STOP)")
    _measure(root, max_depth, max_nodes)


def _check_global(module: str, name: str = "") -> None:
    if (module, name) not in _ALLOWED:
        raise _Refused(f"refusing to load {module}.{name}: case files hold only numpy arrays and plain Python data")


def _measure(root: Any, max_depth: int, max_nodes: int) -> None:
    """Tree size (shared nodes counted per path) and depth of the DAG under ``root``."""
    if not isinstance(root, _Node):
        return
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    on_path: set[int] = set()
    work: list[tuple[_Node, bool]] = [(root, False)]
    while work:
        node, done = work.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            s, d = 1, 1
            for k in node.kids:
                if isinstance(k, _Node):
                    s += size[id(k)]
                    d = max(d, depth[id(k)] + 1)
                else:
                    s += 1
            if s > max_nodes:
                raise _Refused(f"too many elements (over {max_nodes:,}, counting shared ones each time they "
                               "are reached)")
            if d > max_depth:
                raise _Refused(f"containers nested deeper than {max_depth}")
            size[key], depth[key] = s, d
            continue
        if key in size:
            continue
        if key in on_path:
            raise _Refused("a container holds itself (cycle)")
        on_path.add(key)
        work.append((node, True))
        for k in node.kids:
            if isinstance(k, _Node):
                if id(k) in on_path:
                    raise _Refused("a container holds itself (cycle)")
                if id(k) not in size:
                    work.append((k, False))


# ---- 4. the walk after loading ---------------------------------------------------------------
_PLAIN = (str, bytes, int, float, bool, type(None))


def numeric_dtype_problem(dtype: Any) -> str | None:
    """Why ``dtype`` is not a plain numeric dtype (None when it is)."""
    if not isinstance(dtype, np.dtype):
        return f"not a dtype ({type(dtype).__name__})"
    if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None \
            or dtype.hasobject or dtype.names is not None:
        return f"dtype {dtype.str!r} (kind {dtype.kind!r}) is not a plain bool/int/uint/float/complex dtype"
    if np.dtype(dtype.str) != dtype:
        return f"dtype {dtype.str!r} is not a plain numeric dtype"
    return None


def check_plain(obj: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Admit only plain data and numeric arrays; bounded (depth, elements), no cycles.
    Raises :class:`_Refused` naming the path of the first offending element."""
    count = 0
    on_path: set[int] = set()
    work: list[tuple[Any, str, int, bool]] = [(obj, "", 0, False)]
    while work:
        item, where, level, leave = work.pop()
        if leave:
            on_path.discard(id(item))
            continue
        count += 1
        if count > max_nodes:
            raise _Refused(f"too many elements (over {max_nodes:,})")
        if type(item) in _PLAIN:
            continue
        if isinstance(item, (np.ndarray, np.generic)):
            if type(item) is not np.ndarray and not isinstance(item, np.generic):
                raise _Refused(f"{where or 'record'}: array subclass {type(item).__name__}")
            problem = numeric_dtype_problem(item.dtype)
            if problem:
                raise _Refused(f"{where or 'record'}: {problem}")
            continue
        if type(item) not in (dict, list, tuple):
            raise _Refused(f"{where or 'record'}: holds a {type(item).__name__}")
        if level >= max_depth:
            raise _Refused(f"{where or 'record'}: containers nested deeper than {max_depth}")
        if id(item) in on_path:
            raise _Refused(f"{where or 'record'}: a container holds itself (cycle)")
        on_path.add(id(item))
        work.append((item, where, level, True))
        if type(item) is dict:
            for k, v in item.items():
                if type(k) not in _PLAIN:  # numpy scalar or tuple keys: checked like values
                    work.append((k, f"{where}<key>", level + 1, False))
                work.append((v, f"{where}.{k}" if where else str(k), level + 1, False))
        else:
            for i, v in enumerate(item):
                work.append((v, f"{where}[{i}]", level + 1, False))


# ---- the entry points ------------------------------------------------------------------------
def restricted_loads(data: bytes) -> Any:
    """Scan, load (restricted) and check ``data``; raises :class:`pickle.UnpicklingError`."""
    try:
        scan_opcodes(data)
    except _Refused as exc:
        raise pickle.UnpicklingError(str(exc)) from None
    obj = _RestrictedUnpickler(io.BytesIO(data)).load()
    try:
        check_plain(obj)
    except _Refused as exc:
        raise pickle.UnpicklingError(str(exc)) from None
    return obj


def read_case_bytes(path: str | Path, *, max_bytes: int | None = None) -> Any:
    """The plain data in a case file (not yet checked as a record); one-line errors."""
    path = Path(path)
    max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
    data = read_bytes(path, max_bytes, CaseFileError)  # a pipe or /dev/zero: refused unread, never a hang
    try:
        return restricted_loads(data)
    except pickle.UnpicklingError as exc:
        raise CaseFileError(f"not an audee case file ({exc})", source=str(path)) from None
    except Exception as exc:  # truncated or garbage bytes raise many kinds of errors
        raise CaseFileError(f"not an audee case file ({type(exc).__name__}: {exc})", source=str(path)) from None


def widen_reduced_floats(obj: Any) -> Any:
    """``obj`` with every bfloat16 array (``ml_dtypes``, which case files may not hold: only
    plain numpy dtypes pass the loader) widened to float32, exactly.  A bfloat16 layer fed
    those weights rounds them back to the same values; reproduce and localize re-run the
    backends, so the dtype a comparison is judged in comes from fresh outputs."""
    if isinstance(obj, np.ndarray):
        return obj.astype(np.float32) if obj.dtype.kind == "V" or obj.dtype.name == "bfloat16" else obj
    if isinstance(obj, dict):
        return {k: widen_reduced_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [widen_reduced_floats(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(widen_reduced_floats(v) for v in obj)
    return obj


def encode(obj: Any) -> bytes:
    """Pickle ``obj`` (bfloat16 arrays widened to float32), refusing (ValueError) anything
    audee itself would not read back."""
    obj = widen_reduced_floats(obj)
    data = pickle.dumps(obj, protocol=4)
    try:
        restricted_loads(data)
    except pickle.UnpicklingError as exc:
        raise ValueError(f"case record {obj.get('id') if isinstance(obj, dict) else None!r} holds a type case "
                         f"files may not: {exc}") from None
    return data
