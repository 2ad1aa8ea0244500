"""The deviation oracle: the one owner of the normalized deviation between two backends.

Two backends' values ``a`` and ``b`` of the same tensor (row ``i`` is input ``i`` of the
batch) are compared element by element::

    error = |a - b| / (atol + rtol * s)        s = max |value| over the row, both sides

``error > 1`` is out of tolerance.  A row's score is its largest element error.

Why the row's largest magnitude, not each element's own: floating-point rounding in a
sum, a convolution or a matrix product is of the order of eps times the magnitude of the
*terms* summed, not of the result.  An output near zero made by cancellation (a logit of
0.001 from terms of size 10) carries an absolute rounding error of about 10 * eps, which
is a huge error relative to the element itself; the row's largest |value| on either side
is a cheap, robust stand-in for the size of those terms.  Both sides enter ``s``, so the
score is symmetric, and scaling a row (inputs or weights made larger) leaves it unchanged
while ``rtol * s`` dominates ``atol``.  ``atol`` only matters for rows that are all
(nearly) zero.

Tolerances per dtype (defaults in :data:`audee.settings.TOLERANCES`, all configurable as
``--float32-rtol`` ... on the command line and ``float32_rtol: ...`` in campaign YAML):

* float32 — rtol 1e-3, atol 1e-5.  Keras 3 documents ~1e-7 per op across backends; rounding
  accumulates with depth.  Measured on the seven unmutated seeds over all four backends,
  the worst row score with these defaults is 0.16 (MobileNet-V2, 152 layers, onnxruntime
  against the others, first 100 inputs; max |a - b| / s = 1.6e-4; ``docs/oracles.md``), a
  6x margin; the other six seeds stay below 0.02.  A 1% error injected into one layer moves
  the logits by up to 1e-2 of their magnitude: a score near 10.
* float16 — rtol 1e-2, atol 1e-3: 11 significant bits (spacing 9.8e-4 at 1), ten times the
  per-op disagreement of float32 on a relative scale after a few layers; a starting point,
  not measured on audee's (float32) seeds.
* bfloat16 — rtol 5e-2, atol 1e-2: 8 significant bits (spacing 7.8e-3 at 1).  Same caveat.
* tf32 — rtol 1e-2, atol 1e-3: float32 arrays computed by a GPU backend in TF32 mode
  (``torch@cuda:tf32``; :data:`audee.backends.registry.PRECISIONS`), whose matmuls and
  convolutions round their inputs to 11 significant bits, float16's precision; so its
  tolerances start as float16's.  Measured on an H100: ``docs/oracles.md``.

The precision of a comparison is the lowest of the two arrays' dtypes and the two
backends' compute modes (bfloat16 < float16 < tf32 < float32): a pair with one backend in
TF32 mode is judged as tf32.  Any other dtype (float64, integers) is judged as float32.

Non-finite values are the NaN oracle's business: the oracle (:func:`compare`) judges only
rows that are finite on both sides.  :func:`normalized_error` itself is total: the same
value on both sides (the same infinity, NaN on both) is no error; a non-finite value on
one side only is an infinite error (what the search's fitness wants).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np

from audee.settings import TOLERANCES
from audee.core.floats import is_float
from audee.oracle.compute_dtype import dtype_max

TENSORS = ("logits", "output")          # what the whole-model check compares, in this order
PRECISION = ("bfloat16", "float16", "tf32", "float32")  # low to high
FULL = "full"   # a backend's compute mode when it computes each dtype in its own precision


def pair_compute(*modes: str) -> str:
    """The compute mode a pair of backends is judged in: ``tf32`` if either computes in
    TF32 mode, else ``full`` (modes: :data:`audee.backends.registry.PRECISIONS`)."""
    return "tf32" if "tf32" in modes else FULL


class Tolerance(NamedTuple):
    rtol: float
    atol: float


@dataclass(frozen=True)
class Tolerances:
    """Tolerances per dtype; ``Tolerances()`` holds the defaults."""

    float32: Tolerance = Tolerance(*TOLERANCES["float32"])
    float16: Tolerance = Tolerance(*TOLERANCES["float16"])
    bfloat16: Tolerance = Tolerance(*TOLERANCES["bfloat16"])
    tf32: Tolerance = Tolerance(*TOLERANCES["tf32"])

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> "Tolerances":
        """From ``{dtype: {"rtol": .., "atol": ..}}`` (FuzzSettings.tolerances(), a case
        file's ``tolerances``); missing dtypes keep their defaults."""
        base = cls()
        got = {}
        for dt in PRECISION:
            v = (d or {}).get(dt)
            if isinstance(v, Mapping):
                dflt = getattr(base, dt)
                got[dt] = Tolerance(float(v.get("rtol", dflt.rtol)), float(v.get("atol", dflt.atol)))
        return cls(**got)

    def to_json(self) -> dict[str, dict[str, float]]:
        return {dt: {"rtol": float(getattr(self, dt).rtol), "atol": float(getattr(self, dt).atol)}
                for dt in ("float32", "float16", "bfloat16", "tf32")}

    def at_most(self, dtype: str) -> "Tolerances":
        """These tolerances with every dtype more precise than ``dtype`` judged as ``dtype``:
        a computation that ran in bfloat16 is judged in bfloat16 wherever it shows, a float32
        array it produced (a gradient with respect to a float32 input) included."""
        if dtype not in PRECISION:
            return self
        low = getattr(self, dtype)
        return replace(self, **{d: low for d in PRECISION[PRECISION.index(dtype) + 1:]})

    def dtype_of(self, a: np.ndarray, b: np.ndarray, compute: str = FULL) -> str:
        """The precision a comparison is judged as: the lowest of the two arrays' dtypes
        and the pair's compute mode (:func:`pair_compute`)."""
        return _judged_dtype(a.dtype, b.dtype, compute)

    def for_arrays(self, a: np.ndarray, b: np.ndarray, compute: str = FULL) -> tuple[str, Tolerance]:
        dt = self.dtype_of(a, b, compute)
        return dt, getattr(self, dt)


@functools.lru_cache(maxsize=256)
def _judged_dtype(da: np.dtype, db: np.dtype, compute: str) -> str:
    """:meth:`Tolerances.dtype_of` for two dtypes (cached: the search judges every
    generation's pairs, and naming a dtype costs more than comparing the arrays)."""
    known = [n for n in (str(da), str(db)) if n in PRECISION and n != "tf32"]
    if compute == "tf32":
        known.append("tf32")
    return min(known, key=PRECISION.index) if known else "float32"


def as_tolerances(tol: Tolerances | Mapping[str, Any] | None) -> Tolerances:
    if isinstance(tol, Tolerances):
        return tol
    return Tolerances.from_json(tol)


def _tol(a: np.ndarray, b: np.ndarray, tol: Tolerance | Tolerances | Mapping | None, compute: str = FULL) -> Tolerance:
    if isinstance(tol, Tolerance):
        return tol
    if isinstance(tol, tuple) and len(tol) == 2:
        return Tolerance(float(tol[0]), float(tol[1]))
    return as_tolerances(tol).for_arrays(a, b, compute)[1]


def relative_tie_margin(a: np.ndarray, b: np.ndarray, tol: Tolerances | Mapping | None = None,
                        compute: str = FULL) -> float:
    """The label-flip rule's relative tie margin for two backends' outputs
    (:func:`audee.oracle.labels.label_flips`): the rtol of the precision the pair is judged
    in when that is reduced (float16, bfloat16, tf32), else 0 — float32 keeps the paper's
    definition with the absolute tie margin alone."""
    dt, t = as_tolerances(tol).for_arrays(a, b, compute)
    return 0.0 if dt == "float32" else float(t.rtol)


def row_scale(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: the largest finite |value| on either side (0 for an empty or all-non-finite row)."""
    n = a.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.concatenate([np.abs(a.reshape(n, -1).astype(np.float64)),
                            np.abs(b.reshape(n, -1).astype(np.float64))], axis=1)
    m[~np.isfinite(m)] = 0.0
    return m.max(axis=1) if m.shape[1] else np.zeros(n)


def normalized_error(a: np.ndarray, b: np.ndarray, tol: Tolerance | Tolerances | Mapping | None = None,
                     compute: str = FULL) -> np.ndarray:
    """Per element: |a - b| / (atol + rtol * s), rows flattened to shape (n, -1).  The same
    value on both sides (also the same infinity, NaN on both) is 0; a non-finite value on
    one side only is ``inf``.  ``tol``: one :class:`Tolerance`, or tolerances per dtype
    (default: :class:`Tolerances`); ``compute``: the pair's compute mode."""
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {a.shape} and {b.shape}")
    t = _tol(a, b, tol, compute)
    n = a.shape[0]
    fa, fb = a.reshape(n, -1).astype(np.float64), b.reshape(n, -1).astype(np.float64)
    denom = t.atol + t.rtol * row_scale(a, b)[:, None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        err = np.abs(fa - fb) / denom
    same = (fa == fb) | (np.isnan(fa) & np.isnan(fb))
    err[same] = 0.0
    err[np.isnan(err)] = np.inf   # one side non-finite, or inf - inf of opposite signs
    return err


def deviation_score(a: np.ndarray, b: np.ndarray, tol: Tolerance | Tolerances | Mapping | None = None,
                    compute: str = FULL) -> np.ndarray:
    """Per row: the largest :func:`normalized_error` (> 1: out of tolerance; 0 for an empty row).
    Shapes that differ cannot be compared: every row scores ``inf``."""
    if a.shape != b.shape:
        return np.full(a.shape[0], np.inf)
    err = normalized_error(a, b, tol, compute)
    return err.max(axis=1) if err.shape[1] else np.zeros(a.shape[0])


def bound_score(a: np.ndarray, b: np.ndarray, bound: float, tol: Tolerance | Tolerances | Mapping | None = None,
                compute: str = FULL) -> float:
    """An absolute error ``bound`` as the score :func:`deviation_score` gives two outputs ``a``
    and ``b`` that far apart, the largest over their rows (0 for no bound): what a
    conditioning bound known from a formula, not from a probe, weighs against a deviation."""
    if bound <= 0 or a.shape != b.shape or a.shape[0] == 0:
        return 0.0
    t = _tol(a, b, tol, compute)
    return float((bound / (t.atol + t.rtol * row_scale(a, b))).max())


def finite_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows finite on both sides: the only rows the oracle judges."""
    n = a.shape[0]
    return np.isfinite(a.reshape(n, -1)).all(1) & np.isfinite(b.reshape(n, -1)).all(1)


def compare(a: np.ndarray, b: np.ndarray, tol: Tolerances | Mapping | None = None,
            max_rows: int = 64, compute: str = FULL) -> dict[str, Any] | None:
    """The oracle's judgement of one tensor on two backends, over the rows finite on both
    sides: ``score`` (max normalized error), ``max_abs``, ``max_rel`` (max |a - b| / s),
    ``n_out`` / ``n`` (elements out of tolerance / compared), ``rows`` (rows out of
    tolerance, worst first, at most ``max_rows``), ``dtype`` (the precision judged as) and
    ``tolerance``.  ``compute``: the pair's compute mode (:func:`pair_compute`).  None when
    nothing can be compared (shapes differ, non-float values, no finite row)."""
    if a.shape != b.shape or a.ndim == 0 or not is_float(a):
        return None
    tols = as_tolerances(tol)
    dtype, t = tols.for_arrays(a, b, compute)
    ok = finite_rows(a, b)
    if not ok.any():
        return None
    idx = np.flatnonzero(ok)
    fa, fb = a[idx], b[idx]
    err = normalized_error(fa, fb, t)
    n = fa.shape[0]
    s = row_scale(fa, fb)
    diff = np.abs(fa.reshape(n, -1).astype(np.float64) - fb.reshape(n, -1).astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(diff == 0, 0.0, diff / s[:, None])
    row_score = err.max(axis=1) if err.shape[1] else np.zeros(n)
    bad = np.flatnonzero(row_score > 1.0)
    bad = bad[np.argsort(-row_score[bad], kind="stable")]
    return {"score": float(row_score.max()) if n else 0.0,
            "max_abs": float(diff.max()) if diff.size else 0.0,
            "max_rel": float(rel.max()) if rel.size else 0.0,
            "n_out": int((err > 1.0).sum()), "n": int(err.size),
            "rows": [int(idx[i]) for i in bad[:max_rows]],
            "dtype": dtype, "tolerance": {"rtol": float(t.rtol), "atol": float(t.atol)}}


def layer_scores(layers_a: Mapping[str, np.ndarray], layers_b: Mapping[str, np.ndarray], order: Iterable[str],
                 tol: Tolerances | Mapping | None = None, compute: str = FULL) -> dict[str, dict[str, Any]]:
    """:func:`compare` for every layer (in ``order``) both sides have and that can be compared."""
    out = {}
    for name in order:
        if name in layers_a and name in layers_b:
            got = compare(np.asarray(layers_a[name]), np.asarray(layers_b[name]), tol, compute=compute)
            if got is not None:
                out[name] = got
    return out


def deviation_pairs(outcomes: list[Any], tol: Tolerances | Mapping | None = None) -> list[tuple[str, str, str, dict]]:
    """The whole-model check: for every pair of backends that both ran, the first tensor
    of :data:`TENSORS` out of tolerance, as (a, b, tensor, :func:`compare` result)."""
    usable = [o for o in outcomes if o.ok]
    found = []
    for a, b in combinations(usable, 2):
        for tensor in TENSORS:
            x, y = getattr(a, tensor), getattr(b, tensor)
            if x is None or y is None:
                continue
            got = compare(np.asarray(x), np.asarray(y), tol, compute=pair_compute(a.precision, b.precision))
            if got is not None and got["score"] > 1.0:
                found.append((a.backend, b.backend, tensor, got))
                break
    return found


def deviation_findings(outcomes: list[Any], tol: Tolerances | Mapping | None = None) -> list[Any]:
    """One ``deviation`` finding per backend pair whose logits (or, if those agree, output)
    are out of tolerance on some row finite on both sides.  The per-layer fields
    (``first_layer``, ``own_layers``, ``own``) start empty: the Executor fills them in."""
    from audee.cases.case import Finding, Kind
    from audee.records.findings import DeviationDetail

    facts = {o.backend: dict(o.facts) for o in outcomes if o.ok and getattr(o, "facts", None)}
    return [Finding(Kind.DEVIATION, [a, b], DeviationDetail(
                pair=f"{a}|{b}", tensor=tensor, **got, first_layer=None, own_layers=[], own={},
                program={x: facts[x] for x in (a, b) if x in facts}))
            for a, b, tensor, got in deviation_pairs(outcomes, tol)]


#: a layer's cross-backend deviation on its own input counts only when it exceeds this many
#: times what a rounding-level perturbation of its input does to its output on one backend
CONDITIONING_FACTOR = 10.0
#: relative size of that perturbation: about two float32 ulps
PERTURBATION = 2.0 ** -22
#: the perturbation per compute mode (:func:`pair_compute`): two ulps of the precision the
#: pair computes in (TF32 keeps 11 significant bits)
ROUNDING = {FULL: PERTURBATION, "tf32": 2.0 ** -10}
#: two ulps of a reduced-precision input's own dtype: a float16 tensor moved by 2^-22 rounds
#: back to itself, and the layer would look perfectly conditioned
DTYPE_ROUNDING = {"float16": 2.0 ** -9, "bfloat16": 2.0 ** -6}


#: the conditioning probe's two draws for a reduced-precision layer: the random move and its
#: mirror image.  Rounding moves a value either way, and one random direction can carry a
#: layer's pre-activation away from a threshold its mirror crosses (a mixed_float16 GRU whose
#: hard_shrink sees -0.49981: two frameworks land past -0.5 by their order of float16 adds, two
#: do not; the move scored 1.6x tolerance, its mirror 26x, where the frameworks were 27x apart;
#: the api-cpu campaign, rng 2962)
PROBE_SIGNS = (1.0, -1.0)


def rounding_for(compute: str, inputs: Mapping[str, np.ndarray]) -> float:
    """The perturbation for a conditioning check: rounding noise of the pair's compute mode
    (:data:`ROUNDING`) or of the inputs' own dtype (:data:`DTYPE_ROUNDING`), the larger."""
    size = ROUNDING.get(compute, PERTURBATION)
    for v in inputs.values():
        size = max(size, DTYPE_ROUNDING.get(str(np.asarray(v).dtype), 0.0))
    return size


def perturbed(inputs: Mapping[str, np.ndarray], seed: int = 0, size: float = PERTURBATION) -> dict[str, np.ndarray]:
    """``inputs`` with every float array moved by a relative ``size`` (random signs,
    deterministic; a negative ``size`` is the mirror image, :data:`PROBE_SIGNS`): the rounding
    noise one backend's previous layers could have put there.  Integer inputs (token ids) are
    exact and stay as they are."""
    rng = np.random.default_rng(seed)
    return {k: _moved(v, rng, size) for k, v in inputs.items()}


#: the seed of the weights' draw in a conditioning probe: not the inputs' (0), so that a layer
#: whose input and kernel have one shape is not moved along one direction twice
WEIGHTS_SEED = 1


def perturbed_weights(weights: Mapping[str, list[np.ndarray]], layer: str, size: float = PERTURBATION,
                      seed: int = WEIGHTS_SEED) -> dict[str, list[np.ndarray]]:
    """``layer``'s own arrays of ``weights`` (layer -> arrays), every float one moved by a
    relative ``size`` (the rest of the model is not run by a probe of one layer).

    Why weights, not only inputs: a layer's own rounding is, by backward error analysis, the
    exact computation on weights moved by a few ulps (a computed ``W @ x`` is ``(W + dW) @ x``
    with ``|dW| <= n eps |W|``), and that noise enters at every use of a weight: at every step
    of a recurrence, where a nudge of the input enters once.  A probe that moves only the
    input calls a chaotic recurrence well conditioned (a GRU whose state grows 1.5x a step:
    two correct tanh kernels 3e-7 apart end 10^3 apart, while a moved input moves it 15x
    tolerance)."""
    rng = np.random.default_rng(seed)
    return {layer: [_moved(w, rng, size) for w in weights[layer]]} if layer in weights else {}


def _moved(v: Any, rng: np.random.Generator, size: float) -> Any:
    """A float array (bfloat16 included) moved by a relative ``size`` (random signs, from
    ``rng``); others as they are.  A finite value stays finite: a near-maximum moved past its
    dtype's range would be an Inf, a change no rounding of the layer makes."""
    v = np.asarray(v)
    if not is_float(v):
        return v
    u = rng.uniform(-1.0, 1.0, size=v.shape)
    moved = v.astype(np.float64) * (1.0 + size * u)
    top = dtype_max(v.dtype)
    return np.where(np.isfinite(v), np.clip(moved, -top, top), moved).astype(v.dtype)


def float64_floor(scores: Mapping[str, Mapping[str, float]] | None) -> float:
    """The rounding a layer's reduced-precision dtype forces on the better of a pair: the
    smallest score of either side's output against the layer recomputed in float64 (``scores``:
    side -> float64 result's backend -> score), 0 with none.  Part of a layer's self score: a
    layer that rounds an intermediate coarsely (bfloat16 AutoContrast's ``x * scale - low *
    scale`` cancels to a few of 255 levels) lands both sides off the exact result by about what
    they are apart, each by its own order of rounding; the input probe cannot show it (a
    quantized output moves by nothing), the exact result does.  Only a side far further off
    than the other is evidence against it."""
    return min((float(s) for side in (scores or {}).values() for s in side.values()), default=0.0)


def attributed(own_score: float, self_score: float) -> bool:
    """Whether a layer deviates on its own: beyond tolerance, and well beyond what the layer
    itself does to a rounding-level change of its input (an ill-conditioned computation — a
    chaotic recurrence, a threshold right at its input — turns rounding into large changes
    on every backend alike; that is no evidence against any one backend)."""
    return own_score > 1.0 and own_score > CONDITIONING_FACTOR * self_score


def jump_order(scores: Mapping[str, Mapping[str, Any]], order: list[str], predecessors: Any) -> list[str]:
    """Layers out of tolerance, the first one first, then by how much each raises the score
    over its inputs' (where a deviation is made, not merely carried): the layers worth
    judging on their own input."""
    out = [n for n in order if n in scores and scores[n]["score"] > 1.0]
    if not out:
        return []

    def jump(name: str) -> float:
        before = max((scores[p]["score"] for p in predecessors(name) if p in scores), default=0.0)
        return scores[name]["score"] / max(before, 1e-3)

    return [out[0]] + sorted(out[1:], key=lambda n: -jump(n))
