"""Special-value inputs: the values where frameworks disagree most and seeds never go.

Seed data plus Cauchy noise is always finite and well scaled.  Real bugs live at the
edges: NaN and infinities (does a max pooling keep a NaN? does a ReLU?), magnitudes near
the dtype's maximum (overflow in a sum of squares), a large common offset with a small
spread (cancellation in a variance), tiny and subnormal values (flush-to-zero on one
backend only), signed zeros, exact ties (argmax, max pooling, sorting), and for integer
inputs ids out of range or negative (an embedding lookup that clamps on one backend,
raises on another and reads garbage on a third).

Many bugs need one special element among finite ones: a reduction, a segment or a pooling
window that drops or picks a lone NaN (``lone_nan``, ``lone_inf``, ``lone_-inf``: exactly one
in the row, or with a reduced ``axis`` one in some of the slices along it), an argmax or a
sort facing equal maxima and a NaN (``nan_tie``), or a value at the edge of the op's domain
(``domain_edge``: the last float before and after each bound of the tensor's ``domain``, the
bound itself, and the dtype's edges: 0, -0, the largest finite, the smallest normal and
subnormal).

:func:`inject` gives each row of a batch one special kind with probability ``rate``
(deterministic in the generator), and each float input, with the same probability, a
batch-wide kind (:func:`inject_batch`: a common offset over the rows left alone, what batch
statistics see), and returns what it did; :func:`describe` counts the
special values any batch carries, so every case can record them, whoever made them.
"""
from __future__ import annotations

from typing import Any, Collection, Iterable, Mapping, Sequence

import numpy as np

from audee.cases.case import SPECIAL_FLOAT_KINDS as FLOAT_KINDS  # the element or row patterns special_row makes
from audee.cases.case import SPECIAL_INT_KINDS as INT_KINDS      # for integer inputs (token ids)
from audee.cases.spec import InputSpec
from audee.core.floats import is_float

# ---- rows with no spread: where normalization layers' gradients turn NaN ---------------------
#: an all-zero row: a zero norm or a zero variance, where a normalization layer's forward pass
#: is kept finite by an epsilon or a clamp but its backward pass may differentiate ``rsqrt(0)``
#: (``UnitNormalization``: Keras' L2 ``normalize`` clamps ``rsqrt``'s output, not its input).
#: The all-equal row with a nonzero mean (zero variance) is ``ties``.
ROW_KINDS = ("zero_row",)
FLOAT_KINDS = FLOAT_KINDS + ROW_KINDS

#: kinds given to a whole batch at once (:func:`inject_batch`): what batch statistics see
BATCH_KINDS = ("batch_offset",)
KINDS = FLOAT_KINDS + INT_KINDS + BATCH_KINDS


def _some(rng: np.random.Generator, n: int) -> np.ndarray:
    """A few element positions of a row of ``n``: one to an eighth of the row."""
    k = int(rng.integers(1, max(2, n // 8 + 1)))
    return rng.choice(n, size=min(k, n), replace=False)


def finfo(dtype: Any) -> Any:
    """The float limits of ``dtype``, bfloat16 and the other ml_dtypes floats included
    (NumPy's ``finfo`` does not know them); float32's for a non-float dtype."""
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        return np.finfo(dtype)
    try:
        import ml_dtypes  # noqa: PLC0415 - installed with every framework here

        return ml_dtypes.finfo(dtype)
    except (ImportError, ValueError, TypeError):
        return np.finfo(np.float32)


def edge_values(dtype: Any, bounds: Sequence[float] = ()) -> tuple[np.ndarray, np.ndarray]:
    """The values at a domain's edges in ``dtype``: for each finite bound, the last float
    before it, the bound, the first float after it (``np.nextafter`` in the dtype); and the
    dtype's own edges: 0, -0, the largest finite, the smallest normal and the smallest
    subnormal, each with both signs.  (bound edges, dtype edges), both arrays of ``dtype``."""
    dt = np.dtype(dtype)
    info = finfo(dt)
    near = []
    for b in bounds:
        if not np.isfinite(b):
            continue
        v = np.asarray(b).astype(dt)
        near += [np.nextafter(v, np.asarray(-np.inf, dt)), v, np.nextafter(v, np.asarray(np.inf, dt))]
    own = [0.0, -0.0] + [s * float(v) for v in (info.max, info.tiny, info.smallest_subnormal) for s in (1.0, -1.0)]
    return np.asarray(near, dt).reshape(-1), np.asarray(own, np.float64).astype(dt)


def _slices(out: np.ndarray, axis: int | None, rng: np.random.Generator) -> list[np.ndarray]:
    """Views of ``out`` along which a slice kind places its values: with ``axis``, some of
    the 1-d slices along it (each with probability 1/2, at least one); without, the whole
    array flattened (one slice)."""
    if axis is None or out.ndim == 0 or not -out.ndim <= axis < out.ndim:
        return [out.reshape(-1)]
    moved = np.moveaxis(out, axis, -1)  # a view: writing through it writes ``out``
    index = list(np.ndindex(moved.shape[:-1]))
    pick = rng.random(len(index)) < 0.5
    if not pick.any():
        pick[int(rng.integers(len(index)))] = True
    return [moved[i] for i, p in zip(index, pick) if p]


def special_row(row: np.ndarray, kind: str, rng: np.random.Generator, high: float | None = None,
                axis: int | None = None, bounds: Sequence[float] = (), dtype: Any = None) -> np.ndarray:
    """A copy of one input row (any shape) carrying special kind ``kind``.  ``high``: the
    exclusive upper bound of an integer input (its vocabulary size), for out-of-range ids;
    ``axis``: the row's axis a call reduces (``lone_*`` and ``nan_tie`` place one pattern in
    some slices along it; None: in the whole row); ``bounds``: the finite bounds of the
    tensor's domain (``domain_edge``); ``dtype``: the float dtype whose edges the values sit
    at (default: the row's own), narrower where the row's readers compute in a narrower one
    (a float32 input of a ``mixed_float16`` layer: its largest finite value is float16's,
    3.4e38 would only be Inf there)."""
    out = np.array(row, copy=True)
    flat = out.reshape(-1)
    n = flat.size
    if n == 0:
        return out
    if kind in INT_KINDS:
        idx = _some(rng, n)
        if kind == "negative":
            flat[idx] = -rng.integers(1, 11, size=idx.size)
        else:
            base = int(high) if high is not None else int(np.iinfo(flat.dtype).max) - 10
            flat[idx] = base + rng.integers(0, 10, size=idx.size)
        return out
    edges = _edge_dtype(flat.dtype, dtype)
    info = finfo(edges)
    if kind in ("lone_nan", "lone_inf", "lone_-inf"):  # one element per chosen slice, the rest as it was
        value = {"lone_nan": np.nan, "lone_inf": np.inf, "lone_-inf": -np.inf}[kind]
        for sl in _slices(out, axis, rng):
            if sl.size:
                sl[int(rng.integers(sl.size))] = value
        return out
    if kind == "nan_tie":  # the slice's maximum twice and a NaN, at random places (NaN before or after)
        for sl in _slices(out, axis, rng):
            finite = sl.astype(np.float64)
            finite = finite[np.isfinite(finite)]
            if sl.size >= 3 and finite.size:
                p, q, r = rng.choice(sl.size, size=3, replace=False)
                sl[[p, q]] = finite.max()
                sl[r] = np.nan
            elif sl.size:
                sl[int(rng.integers(sl.size))] = np.nan
        return out
    if kind == "domain_edge":  # one to a few elements at the domain's or the dtype's edges
        near, own = (a.astype(flat.dtype) for a in edge_values(edges, bounds))
        idx = _some(rng, n)
        pool = [own] if near.size == 0 else [near, own]
        for i in idx:
            src = pool[int(rng.integers(len(pool)))]
            flat[i] = src[int(rng.integers(src.size))]
        return out
    idx = _some(rng, n)
    if kind == "nan":
        flat[idx] = np.nan
    elif kind == "inf":
        flat[idx] = np.inf
    elif kind == "-inf":
        flat[idx] = -np.inf
    elif kind == "near_max":
        flat[idx] = rng.choice([-1.0, 1.0], size=idx.size) * float(info.max) * rng.uniform(0.5, 1.0, size=idx.size)
    elif kind == "subnormal":
        tiny = float(info.smallest_subnormal)
        flat[idx] = rng.choice([-1.0, 1.0], size=idx.size) * tiny * rng.integers(1, 64, size=idx.size)
    elif kind == "signed_zero":
        flat[idx] = rng.choice([-0.0, 0.0], size=idx.size)
    elif kind == "offset":  # a large common offset, a small spread: cancellation in mean/variance
        x = flat.astype(np.float64)
        spread = x - x.mean()
        scale = float(np.abs(spread).max()) or 1.0
        offset = 10.0 ** rng.uniform(3, min(6, np.log10(float(info.max)) - 1))
        flat[:] = offset + spread / scale * offset * 1e-4
    elif kind == "tiny":  # every value a small normal number: underflow in products and squares
        x = flat.astype(np.float64)
        scale = float(np.abs(x).max()) or 1.0
        flat[:] = x / scale * float(info.tiny) * 10.0 ** rng.uniform(0, 3)
    elif kind == "ties":  # exact ties: one value repeated over the whole row (zero variance)
        flat[:] = flat[int(rng.integers(n))]
    elif kind == "zero_row":
        flat[:] = 0
    else:
        raise ValueError(f"unknown special kind {kind!r} (one of {', '.join(KINDS)})")
    return out


def _edge_dtype(own: Any, narrower: Any = None) -> np.dtype:
    """The dtype whose edges a special value of an array of dtype ``own`` sits at: ``narrower``
    where given and float with a smaller maximum (the readers' compute dtype), else ``own``."""
    if narrower is None:
        return np.dtype(own)
    try:
        want = np.dtype(narrower)
    except TypeError:  # bfloat16 and the other ml_dtypes floats by name
        import ml_dtypes  # noqa: PLC0415 - installed with every framework here

        want = np.dtype(getattr(ml_dtypes, str(narrower), np.float32))
    if not is_float(np.zeros(0, want)) or not is_float(np.zeros(0, own)):
        return np.dtype(own)
    return want if float(finfo(want).max) < float(finfo(own).max) else np.dtype(own)


def _subnormal(a: np.ndarray, dtype: Any = None) -> np.ndarray:
    """Where ``a`` (a float array of any float dtype) holds a subnormal value of ``dtype``
    (default: its own)."""
    x = np.asarray(a).astype(np.float64)
    return (x != 0) & (np.abs(x) < float(finfo(_edge_dtype(np.asarray(a).dtype, dtype)).tiny))


def inject(inputs: Mapping[str, np.ndarray], specs: Iterable[InputSpec], rng: np.random.Generator, rate: float,
           kinds: Sequence[str] | None = None, masks: Collection[str] = (),
           axes: Mapping[str, int | None] | None = None, bounds: Mapping[str, Sequence[float]] | None = None,
           dtypes: Mapping[str, str] | None = None) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """``inputs`` with each row of each input given one special kind with probability
    ``rate`` (float kinds for float inputs, integer kinds for integer ones; ``kinds``
    restricts the choice), and the record of what was done: ``[{input, row, kind}]``.
    The inputs in ``masks`` (a spec's :meth:`~audee.cases.spec.ModelSpec.mask_inputs`) are left
    as they are: a mask is ``m != 0``, an id out of range is only one more 1 there.
    ``axes``: per input, the axis of its rows a call reduces (slice kinds place along it);
    ``bounds``: per input, the finite bounds of its domain (``domain_edge``); ``dtypes``: per
    input, the dtype its readers compute in (:func:`audee.oracle.compute_dtype.consumer_compute_dtypes`),
    whose edges the values sit at where it is narrower than the array's.  A
    ``domain_edge`` that placed a subnormal is recorded as ``subnormal``: its value is one,
    which flushing backends treat as 0 by design."""
    by_name = {s.name: s for s in specs}
    allowed = set(kinds) if kinds is not None else set(KINDS)
    axes, bounds, dtypes = axes or {}, bounds or {}, dtypes or {}
    out: dict[str, np.ndarray] = {}
    done: list[dict[str, Any]] = []
    for name, arr in inputs.items():
        arr = np.asarray(arr)
        spec = by_name.get(name)
        integer = np.issubdtype(arr.dtype, np.integer)
        choice = [k for k in (INT_KINDS if integer else FLOAT_KINDS) if k in allowed]
        if rate <= 0 or not choice or arr.ndim == 0 or name in masks:
            out[name] = arr
            continue
        hit = np.flatnonzero(rng.random(arr.shape[0]) < rate)
        if hit.size == 0:
            out[name] = arr
            continue
        arr = arr.copy()
        high = spec.range[1] if spec is not None and spec.range and integer else None
        for r in hit:
            kind = choice[int(rng.integers(len(choice)))]
            before = np.array(arr[r], copy=True)
            dtype = dtypes.get(name)
            arr[r] = special_row(before, kind, rng, high, axes.get(name), bounds.get(name, ()), dtype)
            if kind == "domain_edge" and (_subnormal(arr[r], dtype) & ~_subnormal(before, dtype)).any():
                kind = "subnormal"
            done.append({"input": name, "row": int(r), "kind": kind})
        out[name] = arr
    inject_batch(out, done, rng.spawn(1)[0], rate, allowed, masks, dtypes)  # its own stream: the rows' draws stay
    return out, done


# ---- batch-wide kinds ------------------------------------------------------------------------------
def inject_batch(out: dict[str, np.ndarray], done: list[dict[str, Any]], rng: np.random.Generator, rate: float,
                 allowed: Collection[str], masks: Collection[str] = (), dtypes: Mapping[str, str] | None = None
                 ) -> None:
    """Give each float input of ``out`` (changed in place, arrays copied before they change),
    with probability ``rate``, a batch-wide kind: ``batch_offset``, the rows :func:`inject`
    left alone moved together to one large common offset with a small spread across them
    all.  A row kind changes one row, so the statistics over the batch — a
    BatchNormalization in training mode, a reduction over the batch axis — still see
    ordinary data; here its mean is huge and its variance tiny beside it, where a one-pass
    variance cancels; the offset stays below a tenth of the largest value of the dtype the
    input's readers compute in (``dtypes``, as :func:`inject`'s).  Recorded in ``done`` like a
    row kind, ``row: None`` for the whole batch: ``{input, row: None, kind, rows: how many
    rows, offset}``."""
    if rate <= 0 or "batch_offset" not in allowed:
        return
    for name, arr in list(out.items()):
        arr = np.asarray(arr)
        if name in masks or not np.issubdtype(arr.dtype, np.floating) or arr.ndim == 0:
            continue
        if rng.random() >= rate:
            continue
        special_rows = {d["row"] for d in done if d.get("input") == name}
        rows = [r for r in range(arr.shape[0]) if r not in special_rows]
        block = arr[rows].astype(np.float64)
        if len(rows) < 2 or block.size == 0 or not np.isfinite(block).all():  # empty rows: nothing to move
            continue
        spread = block - block.mean()
        scale = float(np.abs(spread).max()) or 1.0
        top = float(finfo(_edge_dtype(arr.dtype, (dtypes or {}).get(name))).max)
        offset = float(10.0 ** rng.uniform(3, min(6, np.log10(top) - 1)))
        arr = arr.copy()
        arr[rows] = (offset + spread / scale * offset * 1e-4).astype(arr.dtype)
        out[name] = arr
        done.append({"input": name, "row": None, "kind": "batch_offset", "rows": len(rows), "offset": offset})


def describe(inputs: Mapping[str, np.ndarray], specs: Iterable[InputSpec] = (),
             bounds: Mapping[str, Sequence[float]] | None = None) -> dict[str, int]:
    """How many special values a batch carries, by kind (kinds absent are left out):
    NaN, +Inf, -Inf, values beyond half the dtype's maximum, subnormals, negative zeros,
    values at a domain's edge (``domain_edge``: a bound of the input's ``bounds`` or the
    float next to it, the largest finite, the smallest normal), and for integer inputs ids
    outside ``[low, high)`` of their spec."""
    ranges = {s.name: s.range for s in specs}
    bounds = bounds or {}
    counts: dict[str, int] = {}

    def add(kind: str, n: int) -> None:
        if n:
            counts[kind] = counts.get(kind, 0) + int(n)

    for name, arr in inputs.items():
        a = np.asarray(arr)
        if is_float(a):
            info = finfo(a.dtype)
            x = a.astype(np.float64)
            with np.errstate(invalid="ignore"):
                add("nan", np.isnan(x).sum())
                add("inf", np.isposinf(x).sum())
                add("-inf", np.isneginf(x).sum())
                fin = x[np.isfinite(x)]
                add("near_max", (np.abs(fin) > float(info.max) / 2).sum())
                add("subnormal", ((fin != 0) & (np.abs(fin) < float(info.tiny))).sum())
                add("signed_zero", ((fin == 0) & np.signbit(fin)).sum())
                near, _ = edge_values(a.dtype, bounds.get(name, ()))
                edges = np.concatenate([near.astype(np.float64), [float(info.max), float(info.tiny)]])
                add("domain_edge", (np.isin(fin, edges) | np.isin(-fin, edges[-2:])).sum())
        elif np.issubdtype(a.dtype, np.integer):
            rng_ = ranges.get(name)
            add("negative", (a < 0).sum())
            if rng_:
                add("out_of_range", (a >= rng_[1]).sum())
    return counts


