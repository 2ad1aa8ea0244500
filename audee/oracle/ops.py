"""The oracles on an op-level case: one ``keras.ops`` call's outputs per backend.

An op returns one or more tensors instead of a model's output and logits.  The existing
oracles judge them, output by output:

* crashes and rejections: :func:`audee.oracle.crash.crash_findings` on the calls;
* structure: two backends returning a different number of outputs, or an output of another
  shape or another dtype (Keras promises one result dtype on every backend), are a
  ``deviation`` of that pair with ``tensor`` ``outputs``, ``out<k>:shape`` or ``out<k>:dtype``
  and an infinite score (``mismatch`` says what each returned; ``rows`` empty: no input
  value explains a structure, so special values do not make it undefined);
* non-finite patterns: :func:`audee.oracle.nan.nan_findings` on each float output, the
  call's tensors as the input (NaN/Inf given in is propagation, not a bug);
* values: each float output compared by :func:`audee.oracle.deviation.compare` with the
  dtype's tolerances, the whole output one row (its largest |value| the scale) and the
  elements non-finite on either side left to the NaN oracle; integer and boolean outputs
  exactly (:data:`EXACT`);
* indices (:data:`INDEX_OPS`: argmax, argmin, argsort, top_k's second output) by the values
  they point at in the input: two indices of tied values agree, an index of a NaN and one
  of the finite maximum differ.  A NaN in the input is judged as for values: a difference
  is a finding, and the class rule decides (``audee.oracle.pairs.in_contract``: a compiled or
  converted backend against its reference must agree NaN included; between independent
  frameworks a NaN input makes it ``undefined``), never skipped as a conversion;
* what the op's contract leaves undefined is not compared (:data:`audee.apis.config.UNDEFINED`):
  ``tie_indices`` (the indices of tied values: argmax, argsort, top_k) when the input has
  ties and no value they point at can judge them, ``values`` (a factorization's signs and
  order: qr, eigh), ``empty_segments`` (the rows of segment_max/min no id maps to: each
  framework's own fill); nor an integer output
  of an op fed float values beyond that integer's range (a conversion C leaves undefined;
  :data:`SATURATING` ops define it); nor the values of an integer division by zero
  (:data:`INT_DIVISION`: the case's row says so and its failures are ``undefined``), nor a
  reduction without an identity over an empty axis (:data:`NO_IDENTITY`: NumPy raises, the
  frameworks raise or return -inf, NaN or the dtype's lowest; undefined alike).  Each skip
  is returned with its reason, so counts stay honest.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np

from audee.cases.case import EMPTY_REDUCTION, ZERO_DIVISOR, Finding, Kind, Outcome
from audee.oracle.crash import crash_findings
from audee.oracle.deviation import Tolerance, Tolerances, as_tolerances, compare, pair_compute
from audee.oracle.nan import nan_findings
from audee.oracle.odd import mark_odd
from audee.oracle.pairs import Float64Verdict, nonfinite_by_float64
from audee.records.findings import DeviationDetail
from audee.core.floats import is_float

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")  # complex: as (re, im)
#: integers and booleans are equal or not: any difference of 1 scores 2 (half a unit of tolerance)
#: ops whose contract defines float-to-integer conversion out of range (they clamp)
SATURATING = ("saturate_cast",)
#: ops dividing integers by their second tensor: a 0 there is undefined (:data:`audee.cases.case.ZERO_DIVISOR`)
INT_DIVISION = ("floor_divide", "mod", "fmod")
#: reductions without an identity: over an empty axis NumPy raises ("zero-size array to reduction
#: operation maximum which has no identity"), so the result is undefined (:data:`audee.cases.case.EMPTY_REDUCTION`)
NO_IDENTITY = ("max", "min", "amax", "amin", "ptp", "nanmax", "nanmin", "argmax", "argmin", "nanargmax", "nanargmin")
#: ops whose integer output ``k`` holds positions in the first tensor, not values: judged by
#: what they point at (:func:`pointed_values`); op -> (output, how its positions index)
INDEX_OPS: dict[str, tuple[int, str]] = {"argmax": (0, "reduce"), "argmin": (0, "reduce"), "nanargmax": (0, "reduce"),
                                         "nanargmin": (0, "reduce"), "argsort": (0, "along"), "top_k": (1, "last")}
EXACT = Tolerances(float32=Tolerance(0.0, 0.5), float16=Tolerance(0.0, 0.5), bfloat16=Tolerance(0.0, 0.5))


def op_findings(outcomes: Sequence[Outcome], outputs: Mapping[str, list[np.ndarray]],
                dtypes: Mapping[str, list[str]], inputs: Mapping[str, np.ndarray],
                tolerances: Tolerances | Mapping[str, Any] | None = None,
                undefined: Sequence[str] = (), op: str = "",
                call: Mapping[str, Any] | None = None,
                float64: Sequence[Float64Verdict | None] = (),
                names: Sequence[str] | None = None) -> tuple[list[Finding], list[str]]:
    """The findings of one op call ``op`` (``outcomes``: one per backend, failures included;
    ``outputs``/``dtypes``: each backend that ran, its outputs and their Keras dtypes;
    ``call``: its arguments, :meth:`audee.cases.opcase.OpCase.call`), and what was not compared
    because the contract leaves it undefined.  ``float64``: per output, what the call's
    float64 reference says of the backends (:func:`float64_verdicts`): where it tells, it
    names the odd backends of that output's findings before the majority does.  ``names``:
    what each output is called in a finding (default ``out<k>``; the gradient phase names its
    gradients ``grad:<tensor>``)."""
    tol = as_tolerances(tolerances)

    def name(k: int) -> str:
        return names[k] if names is not None and k < len(names) else f"out{k}"

    findings = crash_findings(list(outcomes))
    mark_odd(list(outcomes), findings)
    ok = [o for o in outcomes if o.ok]
    skipped: list[str] = []
    if "values" in undefined:
        skipped.append("values: the op's result is defined up to signs and order")
    if op in INT_DIVISION and zero_int_divisor(inputs):  # each framework raises, returns 0 or garbage
        skipped.append(ZERO_DIVISOR)
        undefined = (*undefined, "values")
    whole = op in NO_IDENTITY and empty_reduction(call or {}, inputs)  # the whole result undefined
    if whole:
        skipped.append(EMPTY_REDUCTION)
        undefined = (*undefined, "values")
    for a, b in combinations(ok, 2):
        na, nb = len(outputs[a.backend]), len(outputs[b.backend])
        if na != nb:
            findings.append(_mismatch(a, b, "outputs", na, nb))
    if "empty_segments" in undefined and "segment_ids" in inputs:  # segment_max/min: their fill is each framework's
        outputs, empty = _without_empty_segments(outputs, inputs["segment_ids"])
        if empty:
            skipped.append(f"rows of empty segments {empty}: each framework's own fill")
    n = min((len(outputs[o.backend]) for o in ok), default=0)
    for k in range(n):
        group: list[Finding] = []
        for a, b in combinations(ok, 2):
            xa, xb = outputs[a.backend][k], outputs[b.backend][k]
            da, db = dtypes[a.backend][k], dtypes[b.backend][k]
            if np.shape(xa) != np.shape(xb):
                group.append(_mismatch(a, b, f"{name(k)}:shape", list(np.shape(xa)), list(np.shape(xb))))
            elif da != db:
                group.append(_mismatch(a, b, f"{name(k)}:dtype", da, db))
        views = [_view(o, outputs[o.backend][k], dtypes[o.backend][k], name(k)) for o in ok]
        floats = all(dtypes[o.backend][k] in FLOAT_DTYPES for o in ok)
        if floats and not whole:
            group += nan_findings(views, inputs)
        index = not floats and INDEX_OPS.get(op, (None,))[0] == k
        if "values" not in undefined and index and (pointing := _pointed_all(op, call or {}, inputs, outputs, ok, k)):
            group += _index_findings(views, k, pointing)
            if has_ties(inputs):
                skipped.append(f"out{k}: indices of tied values judged by the values they point at")
        elif "values" not in undefined:
            if not floats and "tie_indices" in undefined and has_ties(inputs):
                skipped.append(f"{name(k)}: indices of tied values")
            elif not floats and op not in SATURATING and beyond_int_range(inputs, dtypes[ok[0].backend][k]):
                skipped.append(f"{name(k)}: float values beyond {dtypes[ok[0].backend][k]}'s range (conversion undefined)")
            else:
                group += _value_findings(views, name(k), tol if floats else EXACT, floats)
        mark_odd(views, group, float64[k] if k < len(float64) else None)
        findings += group
    return findings, skipped


def float64_verdicts(outcomes: Sequence[Outcome], outputs: Mapping[str, list[np.ndarray]],
                     dtypes: Mapping[str, list[str]], reference: Sequence[np.ndarray], reference_dtypes: Sequence[str],
                     inputs: Mapping[str, np.ndarray], tolerances: Tolerances | Mapping[str, Any] | None = None,
                     undefined: Sequence[str] = ()) -> list[Float64Verdict | None]:
    """Per output, each backend that ran against the call's float64 reference (``reference``:
    the call on the tensors widened to float64, its outputs and Keras dtypes): its score as
    the value oracle judges a pair (:func:`value_compare`: floats on the elements finite on
    both sides, in the backend's dtype's tolerance; integers exactly), and the backends
    non-finite where it is finite (:func:`audee.oracle.pairs.nonfinite_by_float64`).  None for
    an output the reference cannot judge: another shape, a float output the reference did not
    compute in float64, an integer one it computed as a float, or rows of empty segments
    (each framework's own fill, as :func:`op_findings` leaves them)."""
    tol = as_tolerances(tolerances)
    ok = [o for o in outcomes if o.ok and o.backend in outputs]
    if "empty_segments" in undefined and "segment_ids" in inputs:
        outputs, _ = _without_empty_segments(outputs, inputs["segment_ids"])
        reference = _without_empty_segments({"ref": list(reference)}, inputs["segment_ids"])[0]["ref"]
    out: list[Float64Verdict | None] = []
    n = min((len(outputs[o.backend]) for o in ok), default=0)
    for k in range(n):
        if k >= len(reference) or k >= len(reference_dtypes):
            out.append(None)
            continue
        floats = all(dtypes[o.backend][k] in FLOAT_DTYPES for o in ok)
        rdt = reference_dtypes[k]
        if (floats and rdt not in ("float64", "complex128")) or (not floats and rdt in FLOAT_DTYPES):
            out.append(None)
            continue
        ref = restore(reference[k], rdt).reshape(1, -1)
        errors: dict[str, float] = {}
        arrays: dict[str, np.ndarray] = {}
        for o in ok:
            mine = restore(outputs[o.backend][k], dtypes[o.backend][k]).reshape(1, -1)
            if mine.shape != ref.shape:
                continue
            got = value_compare(mine, ref if floats else ref.astype(np.float64), tol if floats else EXACT,
                                pair_compute(o.precision))
            if got is not None:
                errors[o.backend] = float(got["score"])
            arrays[o.backend] = mine
        nonfinite = nonfinite_by_float64(arrays, ref) if floats and len(arrays) == len(ok) else None
        out.append(Float64Verdict(errors, nonfinite) if errors or nonfinite else None)
    return out


def pointed_values(op: str, call: Mapping[str, Any], inputs: Mapping[str, np.ndarray], idx: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray] | None:
    """The values of the call's first tensor that the index output ``idx`` of ``op``
    (:data:`INDEX_OPS`) points at, as float64 in ``idx``'s shape, and where ``idx`` is a
    position at all (an index out of range points at nothing); None when the call cannot
    say (no first tensor, shapes that do not fit, an empty axis)."""
    how = INDEX_OPS.get(op, (None, ""))[1]
    first = next((a for a in call.get("args", []) if isinstance(a, dict) and "tensor" in a), None)
    if not how or first is None or first["tensor"] not in inputs:
        return None
    x = np.asarray(inputs[first["tensor"]]).astype(np.float64)
    pos = np.asarray(idx)
    if not np.issubdtype(pos.dtype, np.integer):
        return None
    kwargs = call.get("kwargs", {})
    axis = -1 if how == "last" else kwargs.get("axis", -1 if how == "along" else None)
    if axis is None or x.ndim == 0:  # positions in the flattened tensor
        x, axis = x.reshape(-1), 0
        pos = pos.reshape(-1) if how == "along" else pos.reshape(()) if pos.size == 1 else pos
    if not isinstance(axis, int) or not -x.ndim <= axis < x.ndim or x.shape[axis] == 0:
        return None
    axis %= x.ndim
    squeeze = how == "reduce" and pos.ndim == x.ndim - 1  # the reduced axis dropped (keepdims False)
    at = np.expand_dims(pos, axis) if squeeze else pos
    want = [d if i != axis else at.shape[axis] for i, d in enumerate(x.shape)] if at.ndim == x.ndim else None
    if want is None or list(at.shape) != want:
        return None
    valid = (at >= 0) & (at < x.shape[axis])
    vals = np.take_along_axis(x, np.where(valid, at, 0), axis)
    if squeeze:
        vals, valid = np.squeeze(vals, axis), np.squeeze(valid, axis)
    return vals.reshape(np.shape(idx)), valid.reshape(np.shape(idx))


def _pointed_all(op: str, call: Mapping[str, Any], inputs: Mapping[str, np.ndarray],
                 outputs: Mapping[str, list[np.ndarray]], ok: Sequence[Outcome], k: int
                 ) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """Each backend's index output ``k`` with the values it points at and where it is a
    position (:func:`pointed_values`); None unless every backend's can be read so."""
    out = {}
    for o in ok:
        idx = np.asarray(outputs[o.backend][k])
        got = pointed_values(op, call, inputs, idx)
        if got is None:
            return None
        out[o.backend] = (idx, *got)
    return out


def _index_findings(views: list[Outcome], k: int, pointing: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
                    ) -> list[Finding]:
    """A ``deviation`` per pair whose indices point at different values (NaN and NaN the
    same; an index out of range only equal to itself), scored exactly on those positions."""
    found = []
    for a, b in combinations(views, 2):
        ia, va, oka = pointing[a.backend]
        ib, vb, okb = pointing[b.backend]
        if ia.shape != ib.shape:
            continue  # the structure oracle's
        same_value = (va == vb) | (np.isnan(va) & np.isnan(vb))
        agree = np.where(oka & okb, same_value, ~oka & ~okb & (ia == ib))
        if agree.all():
            continue
        got = value_compare(np.where(agree, 0, ia), np.where(agree, 0, ib), EXACT)
        if got is not None and got["score"] > 1.0:
            got["dtype"] = str(ia.dtype)
            got["rows"] = None
            found.append(Finding(Kind.DEVIATION, [a.backend, b.backend],
                                 DeviationDetail(pair=f"{a.backend}|{b.backend}", tensor=f"out{k}", **got,
                                                 first_layer=None, own_layers=[], own={})))
    return found


def _without_empty_segments(outputs: Mapping[str, list[np.ndarray]], ids: np.ndarray
                            ) -> tuple[dict[str, list[np.ndarray]], list[int]]:
    """Each backend's outputs with the rows (first axis) of the segments no id maps to set to
    0, and those segments."""
    present = set(np.asarray(ids).reshape(-1).tolist())
    out: dict[str, list[np.ndarray]] = {}
    empty: set[int] = set()
    for b, outs in outputs.items():
        out[b] = []
        for a in outs:
            a = np.array(a, copy=True)
            rows = [r for r in range(a.shape[0] if a.ndim else 0) if r not in present]
            if rows:
                a[rows] = 0
                empty.update(rows)
            out[b].append(a)
    return out, sorted(empty)


def empty_reduction(call: Mapping[str, Any], inputs: Mapping[str, np.ndarray]) -> bool:
    """Whether the call reduces its first tensor over an axis of size 0 (``axis`` None: all
    of them, so any empty tensor)."""
    first = next((a for a in call.get("args", []) if isinstance(a, dict) and "tensor" in a), None)
    if first is None or first["tensor"] not in inputs:
        return False
    shape = np.shape(inputs[first["tensor"]])
    axis = call.get("kwargs", {}).get("axis")
    if axis is None:
        return 0 in shape
    axes = axis if isinstance(axis, (list, tuple)) else [axis]
    return any(isinstance(a, int) and -len(shape) <= a < len(shape) and shape[a] == 0 for a in axes)


def zero_int_divisor(inputs: Mapping[str, np.ndarray]) -> bool:
    """Whether a divisor (any tensor after the first) is integer and holds a 0."""
    for a in list(inputs.values())[1:]:
        a = np.asarray(a)
        if (np.issubdtype(a.dtype, np.integer) or a.dtype == bool) and (a == 0).any():
            return True
    return False


def beyond_int_range(inputs: Mapping[str, np.ndarray], dtype: str) -> bool:
    """Whether a float tensor holds a value (NaN and Inf too) an integer output of ``dtype``
    cannot hold: converting it is undefined (C's rule, which each framework's kernel keeps
    its own way: saturate, wrap or INT_MIN)."""
    try:
        info = np.iinfo(dtype)
    except (TypeError, ValueError):
        return False  # bool: any value converts
    for a in inputs.values():
        a = np.asarray(a)
        if is_float(a):
            x = a.astype(np.float64)
            if (~np.isfinite(x)).any() or (x > info.max).any() or (x < info.min).any():
                return True
    return False


def has_ties(inputs: Mapping[str, np.ndarray]) -> bool:
    """Whether some tensor holds a value twice (or a NaN, which ties with nothing and
    everything): the indices of tied values are undefined."""
    for a in inputs.values():
        flat = np.asarray(a).reshape(-1)
        if flat.size != np.unique(flat).size or (np.issubdtype(flat.dtype, np.floating) and np.isnan(flat).any()):
            return True
    return False


def restore(a: np.ndarray, dtype: str) -> np.ndarray:
    """An output as its Keras dtype (a bfloat16 one arrives as float32 holding its values)."""
    if dtype == "bfloat16":
        import ml_dtypes  # noqa: PLC0415 - installed with every framework here

        return np.asarray(a).astype(ml_dtypes.bfloat16)
    a = np.asarray(a)
    if np.iscomplexobj(a):  # (angle, conj, fft of a real input): real and imaginary parts, compared as floats
        return np.stack([a.real, a.imag], axis=-1)
    return a


def _view(o: Outcome, out: np.ndarray, dtype: str, name: str) -> Outcome:
    """Output ``name`` of a backend as an Outcome the model oracles read: one row."""
    a = restore(out, dtype).reshape(1, -1)
    bad = dtype in FLOAT_DTYPES and not np.isfinite(a.astype(np.float32)).all()
    return Outcome(o.backend, logits=a, output=a, nonfinite=[name] if bad else [], run_s=o.run_s,
                   precision=o.precision)


def value_compare(xa: np.ndarray, xb: np.ndarray, tol: Tolerances, compute: str = "full") -> dict[str, Any] | None:
    """:func:`audee.oracle.deviation.compare` of one output on two runs, as one row: floats
    on the elements finite on both sides (non-finite ones are the NaN oracle's), integers
    and booleans exactly; None when nothing compares (shapes differ, empty)."""
    xa, xb = np.asarray(xa).reshape(1, -1), np.asarray(xb).reshape(1, -1)
    if xa.shape != xb.shape or xa.size == 0:
        return None
    if is_float(xa) and is_float(xb):
        both = np.isfinite(xa.astype(np.float64)) & np.isfinite(xb.astype(np.float64))
        xa, xb = np.where(both, xa, 0).astype(xa.dtype), np.where(both, xb, 0).astype(xb.dtype)
        return compare(xa, xb, tol, compute=compute)
    return compare(xa.astype(np.float64), xb.astype(np.float64), EXACT, compute=compute)


def _value_findings(views: list[Outcome], name: str, tol: Tolerances, floats: bool) -> list[Finding]:
    """A ``deviation`` per pair out of tolerance on the elements finite on both sides."""
    found = []
    for a, b in combinations(views, 2):
        if str(a.output.dtype) != str(b.output.dtype) and not floats:
            continue
        got = value_compare(a.output, b.output, tol, pair_compute(a.precision, b.precision))
        if got is not None and got["score"] > 1.0:
            if not floats:
                got["dtype"] = str(a.output.dtype)  # judged exactly
            got["rows"] = None  # the whole output is one row: every tensor's special values may explain it
            found.append(Finding(Kind.DEVIATION, [a.backend, b.backend],
                                 DeviationDetail(pair=f"{a.backend}|{b.backend}", tensor=name, **got,
                                                 first_layer=None, own_layers=[], own={})))
    return found


def _mismatch(a: Outcome, b: Outcome, what: str, va: Any, vb: Any) -> Finding:
    return Finding(Kind.DEVIATION, [a.backend, b.backend],
                   DeviationDetail(pair=f"{a.backend}|{b.backend}", tensor=what, score=float("inf"), rows=[],
                                   first_layer=None, own_layers=[], own={}, mismatch={a.backend: va, b.backend: vb}))
