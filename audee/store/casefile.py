"""Case files: one pickle per failing test case, read back only through a restricted
unpickler.

Pickle is kept (users and older tools expect ``case.pkl``), but loading never executes
anything: the unpickler resolves only the few numpy callables that rebuild arrays and
dtypes, and plain Python containers need no lookup at all.  Anything else — ``os.system``,
``builtins.eval``, any class — is refused with a :class:`CaseFileError`.
"""
from __future__ import annotations

import io
import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np

from audee.errors import CaseFileError
from audee.store.atomic import write_atomic

CASE_FORMAT = "audee.case/1"

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

REQUIRED = {"format": str, "id": str, "spec": dict, "weights": dict, "inputs": dict,
            "backends": list, "verdict": dict, "versions": dict}


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: case files hold only numpy arrays "
                                     "and plain Python data")


def restricted_loads(data: bytes) -> Any:
    return _RestrictedUnpickler(io.BytesIO(data)).load()


def save_case(path: str | Path, record: dict[str, Any]) -> Path:
    """Write a case record atomically; fills ``format`` and ``created``."""
    record = {"format": CASE_FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **record}
    _check(record, str(path))
    data = pickle.dumps(record, protocol=4)
    try:  # never write a file that audee itself would refuse to read
        restricted_loads(data)
    except pickle.UnpicklingError as exc:
        raise ValueError(f"case record {record.get('id')!r} holds a type case files may not: {exc}") from None
    write_atomic(path, data)
    return Path(path)


def load_case(path: str | Path) -> dict[str, Any]:
    """Load and check a case file; any problem is one :class:`CaseFileError` line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CaseFileError(f"cannot read: {exc.strerror}", source=str(path)) from None
    try:
        record = restricted_loads(data)
    except pickle.UnpicklingError as exc:
        raise CaseFileError(f"not an audee case file ({exc})", source=str(path)) from None
    except Exception as exc:  # truncated or garbage bytes raise many kinds of errors
        raise CaseFileError(f"not an audee case file ({type(exc).__name__}: {exc})", source=str(path)) from None
    _check(record, str(path))
    return record


def _check(record: Any, source: str) -> None:
    if not isinstance(record, dict):
        raise CaseFileError(f"not an audee case file (top level is {type(record).__name__})", source=source)
    if record.get("format") != CASE_FORMAT:
        raise CaseFileError(f"not an audee case file (format {record.get('format')!r}, expected {CASE_FORMAT!r})",
                            source=source, field="format")
    for key, typ in REQUIRED.items():
        if key not in record:
            raise CaseFileError("missing", source=source, field=key)
        if not isinstance(record[key], typ):
            raise CaseFileError(f"expected {typ.__name__}, got {type(record[key]).__name__}", source=source, field=key)
    for name, arrs in record["weights"].items():
        if not isinstance(arrs, list) or not all(isinstance(a, np.ndarray) for a in arrs):
            raise CaseFileError("expected a list of arrays", source=source, field=f"weights.{name}")
    for name, arr in record["inputs"].items():
        if not isinstance(arr, np.ndarray):
            raise CaseFileError("expected an array", source=source, field=f"inputs.{name}")
