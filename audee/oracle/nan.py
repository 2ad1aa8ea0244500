"""NaN oracle: where the non-finite values are, on each backend.

Every run returns each backend's output and logits and the layers holding NaN/Inf; the
oracle compares, element by element, *which kind* of value each backend has at each
position: finite, NaN, +Inf or -Inf (:func:`nonfinite_codes`).  The rules:

* **pattern difference** (``nan`` finding, ``strong``): for some pair of backends the
  codes differ at some element of the output or the logits (NaN on one backend where the
  other is finite, or the reverse, or NaN against Inf), or a layer is non-finite on one
  backend and entirely finite on the other.  A finding whether or not the outputs
  otherwise agree, and whether or not the input held NaN/Inf.  Per pair the detail
  records how many elements differ, an example index and the first layer where the
  patterns differ (element-exact after :func:`diagnose_patterns` ran on per-layer
  outputs; from the lists of non-finite layers before).
* **expected propagation** (``nan_propagated``, not a failure): the input holds NaN/Inf
  and every backend's non-finite pattern is identical; the result row says
  ``propagated_nonfinite: true``.
* **NaN from finite inputs** (``nan`` finding, not ``strong``): the input is finite and
  every backend produces the same non-finite pattern: the paper's NaN oracle.

Detail keys are documented in ``docs/oracles.md`` ("Non-finite patterns").
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Mapping

import numpy as np

from audee.case import Finding, Kind, Outcome

FINITE, NAN, POSINF, NEGINF = 0, 1, 2, 3
CODE_NAMES = ("finite", "nan", "+inf", "-inf")
ARRAYS = ("output", "logits")  # what every run returns, compared element by element


def nonfinite_codes(a: np.ndarray) -> np.ndarray:
    """Per element: 0 finite, 1 NaN, 2 +Inf, 3 -Inf (all 0 for non-float arrays)."""
    a = np.asarray(a)
    codes = np.zeros(a.shape, np.int8)
    if not np.issubdtype(a.dtype, np.floating) and not np.issubdtype(a.dtype, np.complexfloating):
        return codes
    codes[np.isnan(a)] = NAN
    codes[np.isposinf(a)] = POSINF
    codes[np.isneginf(a)] = NEGINF
    return codes


def has_nonfinite(arrays: Mapping[str, np.ndarray] | None) -> bool:
    """Whether any float array of ``arrays`` (e.g. a test case's inputs) holds NaN/Inf."""
    return any(np.issubdtype(np.asarray(v).dtype, np.floating) and not np.isfinite(v).all()
               for v in (arrays or {}).values())


def compare_codes(a: np.ndarray, b: np.ndarray) -> dict[str, Any] | None:
    """How two arrays' non-finite patterns differ: None when they agree (or cannot be
    compared: different shapes are the inconsistency oracle's business), else
    ``{"elements": n, "index": [...], "values": [code name on a, code name on b]}``."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return None
    ca, cb = nonfinite_codes(a), nonfinite_codes(b)
    differ = ca != cb
    n = int(differ.sum())
    if not n:
        return None
    idx = np.unravel_index(int(np.flatnonzero(differ)[0]), differ.shape)
    return {"elements": n, "index": [int(i) for i in idx],
            "values": [CODE_NAMES[ca[idx]], CODE_NAMES[cb[idx]]]}


def _first_layer_by_lists(a: Outcome, b: Outcome) -> str | None:
    """The first layer non-finite on exactly one of the two backends (layer granularity;
    both lists are in the spec's topological order)."""
    sa, sb = set(a.nonfinite), set(b.nonfinite)
    for name in a.nonfinite + b.nonfinite:
        if (name in sa) != (name in sb):
            return name
    return None


def pair_pattern(a: Outcome, b: Outcome) -> dict[str, Any] | None:
    """Where two backends' non-finite patterns differ (output, logits, layer lists), or None."""
    arrays = {}
    for name in ARRAYS:
        va, vb = getattr(a, name), getattr(b, name)
        if va is not None and vb is not None:
            got = compare_codes(va, vb)
            if got:
                arrays[name] = got
    layer = _first_layer_by_lists(a, b)
    if not arrays and layer is None:
        return None
    first = next(iter(arrays.values()), None)
    return {"first_layer": layer, "first_layer_from": "layer-lists" if layer is not None else None,
            "elements": first["elements"] if first else 0,
            "example": ({"array": next(iter(arrays)), "index": first["index"],
                         a.backend: first["values"][0], b.backend: first["values"][1]} if first else None),
            "arrays": sorted(arrays)}


def nan_findings(outcomes: list[Outcome], inputs: Mapping[str, np.ndarray] | None = None) -> list[Finding]:
    """The rules of the module docstring on one test case's outcomes; ``inputs`` is the
    batch that was run (to tell propagation of a non-finite input from a NaN made inside)."""
    ok = [o for o in outcomes if o.ok]
    bad = [o for o in ok if o.nonfinite or any(getattr(o, n) is not None and not np.isfinite(getattr(o, n)).all()
                                               for n in ARRAYS if _is_float(getattr(o, n)))]
    if not bad:
        return []
    patterns = {}
    for a, b in combinations(ok, 2):
        p = pair_pattern(a, b)
        if p is not None:
            patterns[f"{a.backend}|{b.backend}"] = p
    in_bad = has_nonfinite(inputs)
    bad_names = {o.backend for o in bad}
    finite = [o.backend for o in ok if o.backend not in bad_names]
    detail: dict[str, Any] = {
        "first_layer": {o.backend: o.nonfinite[0] for o in bad if o.nonfinite},
        "layers": {o.backend: o.nonfinite for o in bad},
        "strong": bool(patterns), "finite_backends": finite,
        "input_nonfinite": in_bad, "patterns": patterns,
        "counts": {o.backend: _counts(o.output) for o in bad if o.output is not None},
    }
    if patterns:
        involved = bad_names | {b for k in patterns for b in k.split("|")}
        return [Finding(Kind.NAN, [o.backend for o in ok if o.backend in involved], detail)]
    if in_bad:
        return [Finding(Kind.NAN_PROPAGATED, [o.backend for o in bad], detail)]
    return [Finding(Kind.NAN, [o.backend for o in bad], detail)]


def diagnose_patterns(finding: Finding, layers: Mapping[str, Mapping[str, np.ndarray]],
                      rows: list[int] | None = None) -> None:
    """Refine each pair's ``first_layer`` from per-layer outputs (``layers[backend][layer]``,
    layers in topological order, on the batch rows ``rows``): the first layer whose
    element-wise non-finite patterns differ, with its element count and an example index
    (row numbers of the full batch).  Pairs whose layer outputs all agree keep the
    output-level record, marked ``first_layer_from: "output"``."""
    for key, p in finding.detail.get("patterns", {}).items():
        a, b = key.split("|")
        la, lb = layers.get(a), layers.get(b)
        if not isinstance(la, Mapping) or not isinstance(lb, Mapping):
            continue
        for name, va in la.items():
            if name not in lb:
                continue
            got = compare_codes(va, lb[name])
            if got:
                index = list(got["index"])
                if rows is not None and index:
                    index[0] = int(rows[index[0]])
                p.update({"first_layer": name, "first_layer_from": "layers", "layer_elements": got["elements"],
                          "layer_example": {"index": index, a: got["values"][0], b: got["values"][1]}})
                break
        else:
            p.update({"first_layer_from": "output" if p.get("arrays") else p.get("first_layer_from")})


def diagnose_rows(outcomes: list[Outcome], inputs: Mapping[str, np.ndarray] | None, limit: int) -> list[int]:
    """Batch rows worth a per-layer look: rows with NaN/Inf in the input or in any
    backend's output or logits (at most ``limit``; the first rows if none is)."""
    n = None
    hit: set[int] = set()
    for arr in list((inputs or {}).values()) + [getattr(o, k) for o in outcomes if o.ok for k in ARRAYS]:
        if arr is None or not _is_float(arr) or np.ndim(arr) == 0:
            continue
        arr = np.asarray(arr)
        n = arr.shape[0] if n is None else n
        hit.update(np.flatnonzero(~np.isfinite(arr.reshape(arr.shape[0], -1)).all(1)).tolist())
    rows = sorted(hit)[:limit]
    return rows or list(range(min(limit, n or 0)))


def _is_float(a: Any) -> bool:
    return a is not None and np.issubdtype(np.asarray(a).dtype, np.floating)


def _counts(a: np.ndarray) -> dict[str, int]:
    c = np.bincount(nonfinite_codes(a).ravel(), minlength=4)
    return {"nan": int(c[NAN]), "+inf": int(c[POSINF]), "-inf": int(c[NEGINF])}
