"""Special-value inputs: the values where frameworks disagree most and seeds never go.

Seed data plus Cauchy noise is always finite and well scaled.  Real bugs live at the
edges: NaN and infinities (does a max pooling keep a NaN? does a ReLU?), magnitudes near
the dtype's maximum (overflow in a sum of squares), a large common offset with a small
spread (cancellation in a variance), tiny and subnormal values (flush-to-zero on one
backend only), signed zeros, exact ties (argmax, max pooling, sorting), and for integer
inputs ids out of range or negative (an embedding lookup that clamps on one backend,
raises on another and reads garbage on a third).

:func:`inject` gives each row of a batch one special kind with probability ``rate``
(deterministic in the generator), and each float input, with the same probability, a
batch-wide kind (:func:`inject_batch`: a common offset over the rows left alone, what batch
statistics see), and returns what it did; :func:`describe` counts the
special values any batch carries, so every case can record them, whoever made them.
"""
from __future__ import annotations

from typing import Any, Collection, Iterable, Mapping, Sequence

import numpy as np

from audee.case import SPECIAL_FLOAT_KINDS as FLOAT_KINDS  # the element or row patterns special_row makes
from audee.case import SPECIAL_INT_KINDS as INT_KINDS      # for integer inputs (token ids)
from audee.spec import InputSpec

#: kinds given to a whole batch at once (:func:`inject_batch`): what batch statistics see
BATCH_KINDS = ("batch_offset",)
KINDS = FLOAT_KINDS + INT_KINDS + BATCH_KINDS


def _some(rng: np.random.Generator, n: int) -> np.ndarray:
    """A few element positions of a row of ``n``: one to an eighth of the row."""
    k = int(rng.integers(1, max(2, n // 8 + 1)))
    return rng.choice(n, size=min(k, n), replace=False)


def special_row(row: np.ndarray, kind: str, rng: np.random.Generator, high: float | None = None) -> np.ndarray:
    """A copy of one input row (any shape) carrying special kind ``kind``.  ``high``: the
    exclusive upper bound of an integer input (its vocabulary size), for out-of-range ids."""
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
    info = np.finfo(flat.dtype) if np.issubdtype(flat.dtype, np.floating) else np.finfo(np.float32)
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
    elif kind == "ties":  # exact ties: one value repeated over the whole row
        flat[:] = flat[int(rng.integers(n))]
    else:
        raise ValueError(f"unknown special kind {kind!r} (one of {', '.join(KINDS)})")
    return out


def inject(inputs: Mapping[str, np.ndarray], specs: Iterable[InputSpec], rng: np.random.Generator, rate: float,
           kinds: Sequence[str] | None = None, masks: Collection[str] = ()
           ) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
    """``inputs`` with each row of each input given one special kind with probability
    ``rate`` (float kinds for float inputs, integer kinds for integer ones; ``kinds``
    restricts the choice), and the record of what was done: ``[{input, row, kind}]``.
    The inputs in ``masks`` (a spec's :meth:`~audee.spec.ModelSpec.mask_inputs`) are left
    as they are: a mask is ``m != 0``, an id out of range is only one more 1 there."""
    by_name = {s.name: s for s in specs}
    allowed = set(kinds) if kinds is not None else set(KINDS)
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
            arr[r] = special_row(arr[r], kind, rng, high)
            done.append({"input": name, "row": int(r), "kind": kind})
        out[name] = arr
    inject_batch(out, done, rng.spawn(1)[0], rate, allowed, masks)  # its own stream: the rows' draws stay
    return out, done


# ---- batch-wide kinds ------------------------------------------------------------------------------
def inject_batch(out: dict[str, np.ndarray], done: list[dict[str, Any]], rng: np.random.Generator, rate: float,
                 allowed: Collection[str], masks: Collection[str] = ()) -> None:
    """Give each float input of ``out`` (changed in place, arrays copied before they change),
    with probability ``rate``, a batch-wide kind: ``batch_offset``, the rows :func:`inject`
    left alone moved together to one large common offset with a small spread across them
    all.  A row kind changes one row, so the statistics over the batch — a
    BatchNormalization in training mode, a reduction over the batch axis — still see
    ordinary data; here its mean is huge and its variance tiny beside it, where a one-pass
    variance cancels.  Recorded in ``done`` like a row kind, ``row: None`` for the whole
    batch: ``{input, row: None, kind, rows: how many rows, offset}``."""
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
        if len(rows) < 2 or not np.isfinite(block).all():
            continue
        spread = block - block.mean()
        scale = float(np.abs(spread).max()) or 1.0
        offset = float(10.0 ** rng.uniform(3, min(6, np.log10(float(np.finfo(arr.dtype).max)) - 1)))
        arr = arr.copy()
        arr[rows] = (offset + spread / scale * offset * 1e-4).astype(arr.dtype)
        out[name] = arr
        done.append({"input": name, "row": None, "kind": "batch_offset", "rows": len(rows), "offset": offset})


def describe(inputs: Mapping[str, np.ndarray], specs: Iterable[InputSpec] = ()) -> dict[str, int]:
    """How many special values a batch carries, by kind (kinds absent are left out):
    NaN, +Inf, -Inf, values beyond half the dtype's maximum, subnormals, negative zeros,
    and for integer inputs ids outside ``[low, high)`` of their spec."""
    ranges = {s.name: s.range for s in specs}
    counts: dict[str, int] = {}

    def add(kind: str, n: int) -> None:
        if n:
            counts[kind] = counts.get(kind, 0) + int(n)

    for name, arr in inputs.items():
        a = np.asarray(arr)
        if np.issubdtype(a.dtype, np.floating):
            info = np.finfo(a.dtype)
            with np.errstate(invalid="ignore"):
                add("nan", np.isnan(a).sum())
                add("inf", np.isposinf(a).sum())
                add("-inf", np.isneginf(a).sum())
                fin = a[np.isfinite(a)]
                add("near_max", (np.abs(fin) > float(info.max) / 2).sum())
                add("subnormal", ((fin != 0) & (np.abs(fin) < float(info.tiny))).sum())
                add("signed_zero", ((fin == 0) & np.signbit(fin)).sum())
        elif np.issubdtype(a.dtype, np.integer):
            rng_ = ranges.get(name)
            add("negative", (a < 0).sum())
            if rng_:
                add("out_of_range", (a >= rng_[1]).sum())
    return counts
