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
* **expected propagation** (``nan_propagated``, not a failure): the input holds NaN/Inf,
  or finite values at overflow scale (:func:`overflow_scale`: a square or a product of two
  of them overflows), and every backend's non-finite pattern is identical, or differs
  only where the conditioning rule below clears it; the result row says
  ``propagated_nonfinite: true``.
* **conditioning** (run by the Executor, decided by :func:`condition_pattern`): a pair's
  pattern difference is judged at its first differing layer, that layer alone fed the
  same input on both backends.  It is *cleared* when the layer alone agrees
  (``accumulated``: the difference came in with its input's rounding), when that input is
  finite but at overflow scale (``overflow``: where a sum or product of such values lands
  on the boundary depends on the order of operations; not in a dtype narrower than
  float32 when the exact result fits: see *compute dtype*; at a recurrent layer, also
  when its state at an earlier step, recomputed in float64, was at overflow scale:
  :func:`state_at_overflow_scale`, rows fed NaN/Inf zeroed where the pair does not differ
  there: :func:`rowwise_feed`), or when a rounding-level
  perturbation of the input changes the layer's own pattern on either backend
  (``ill_conditioned``).  At a layer with an output activation it is cleared when the
  layer's linear part agrees within tolerance and its activation, the same on both
  backends, carries that difference across a boundary (``amplified``:
  :func:`amplified_rounding`).  A difference that does not show again when the diagnosed
  rows are run again, on every layer and the output (``unstable``: a smaller batch, other
  kernels), is cleared too: it reproduces in no repro script.  A finding whose pairs are
  all cleared is no longer ``strong``: it falls back to the rules above (propagation if
  the input explains it, else the paper's NaN oracle).  A difference on a layer fed NaN/Inf
  is judged on that input with its NaN/Inf set to 0 when it differs there exactly as before
  (:func:`same_difference`: no NaN or Inf reaches where the pair parts); otherwise it is never cleared by scale:
  how a layer treats NaN and Inf is exactly what differs between frameworks
  (``tf-maxpool-drops-nan``).
* **NaN from finite inputs** (``nan`` finding, not ``strong``): the input is finite and
  every backend produces the same non-finite pattern: the paper's NaN oracle, counted in
  its NaN tables; with two or more backends it is recorded ``agreed`` (every backend made
  the same overflow: no evidence against one of them, so not a bug).
* **compute dtype**: overflow scale is judged in the dtype a layer computes in
  (:mod:`audee.oracle.compute_dtype`), not the input array's: 300 in a float32 array fed
  to a ``mixed_float16`` model is at float16's overflow scale.  That explains an overflow
  only where the math forces it: a float16 layer fed values at float16's (not float32's)
  overflow scale, overflowing on one backend where another stays finite, and whose exact
  result is representable in float16 (the layer recomputed in float64, on the run's
  backends and the float64 reference's workers; without one, the finite backend's value
  far below the maximum) is a finding: one backend kept an intermediate in float16 where
  another did not (:func:`unforced_narrow_overflow`).  Between independent frameworks it is
  cleared when each of the pair overflows somewhere the float64 result fits: both keep
  float16 intermediates, and where each overflows is its order (:func:`both_overflow_narrow`).
* **overflow boundary** (:func:`overflow_boundary`): a difference that stands at a layer
  whose finite input gives a result beyond the compute dtype's maximum (the layer
  recomputed in float64) is recorded ``overflow_boundary``: undefined, not a bug.

Detail keys are documented in ``docs/oracles.md`` ("Non-finite patterns").
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Mapping

import numpy as np

from audee.backends.info import program_of
from audee.cases.case import Finding, Kind, Outcome
from audee.oracle.compute_dtype import FLOAT32, cast_overflow_min, dtype_max, narrow_range, overflow_scale_min
from audee.records.findings import NanDetail, NanExample, NanPattern
from audee.core.floats import holds_nonfinite, is_float

FINITE, NAN, POSINF, NEGINF = 0, 1, 2, 3
CODE_NAMES = ("finite", "nan", "+inf", "-inf")
ARRAYS = ("output", "logits")  # what every run returns, compared element by element


def nonfinite_codes(a: np.ndarray) -> np.ndarray:
    """Per element: 0 finite, 1 NaN, 2 +Inf, 3 -Inf (all 0 for non-float arrays)."""
    a = np.asarray(a)
    codes = np.zeros(a.shape, np.int8)
    if not is_float(a) and not np.issubdtype(a.dtype, np.complexfloating):
        return codes
    codes[np.isnan(a)] = NAN
    codes[np.isposinf(a)] = POSINF
    codes[np.isneginf(a)] = NEGINF
    return codes


def has_nonfinite(arrays: Mapping[str, np.ndarray] | None) -> bool:
    """Whether any float array of ``arrays`` (e.g. a test case's inputs) holds NaN/Inf."""
    return any(holds_nonfinite(v) for v in (arrays or {}).values())


def nonfinite_rows(arrays: Mapping[str, np.ndarray] | None,
                   compute: Mapping[str, str] | str | None = None) -> list[int]:
    """The batch rows (axis 0) of ``arrays`` holding a NaN or an Inf, or a finite value beyond
    the range of the dtype it is computed in (``compute`` as :func:`overflow_scale` reads it:
    an Inf to its layer).  A layer computes each row of a batch alone, so a row whose input is
    finite gets no NaN or Inf of another row's."""
    rows: set[int] = set()
    for name, v in (arrays or {}).items():
        v = np.asarray(v)
        if not is_float(v) or v.ndim == 0 or v.size == 0:
            continue
        dtype = compute.get(name) if isinstance(compute, Mapping) else compute
        flat = v.reshape(v.shape[0], -1)
        bad = ~np.isfinite(flat)
        big = np.abs(np.where(bad, 0, flat).astype(np.float64)) >= cast_overflow_min(dtype or v.dtype)
        rows.update(int(r) for r in np.flatnonzero((bad | big).any(axis=1)))
    return sorted(rows)


def overflow_scale(arrays: Mapping[str, np.ndarray] | None, compute: Mapping[str, str] | str | None = None) -> bool:
    """Whether a float array of ``arrays`` holds a finite value at overflow scale: at least
    the square root of the maximum of the dtype it is computed in, so that its square, or
    its product with a value as large, is not representable (1.8e19 in float32, 256 in
    float16).  Such inputs make Inf by plain arithmetic; where exactly a backend crosses
    the boundary depends on its order of operations.  ``compute``: the compute dtype of
    the layers reading each array (one for all, or per array name:
    :func:`audee.oracle.compute_dtype.consumer_compute_dtypes`); an array without one is
    judged in its own dtype.  A float32 input array feeding a ``mixed_float16`` layer is
    judged in float16."""
    return _reaches(arrays, compute, overflow_scale_min)


def beyond_range(arrays: Mapping[str, np.ndarray] | None, compute: Mapping[str, str] | str | None = None) -> bool:
    """Whether a float array of ``arrays`` holds a finite value beyond the maximum of the
    dtype it is computed in (``compute`` as :func:`overflow_scale` reads it): 1.3e5 read by
    a float16 layer, whose cast makes it Inf before any arithmetic.  Such a value is an Inf
    to the layer, and what the backends make of an Inf is the NaN-input rule's business
    (a float16 Resizing cast 1.3e5 to Inf, and JAX's einsum resize spread 0 * Inf to every
    row where TensorFlow and torch kept it to the image's: the api-cpu campaign, rng 2887)."""
    return _reaches(arrays, compute, cast_overflow_min)


def _reaches(arrays: Mapping[str, np.ndarray] | None, compute: Mapping[str, str] | str | None,
             threshold: Callable[[Any], float]) -> bool:
    """Whether a finite value of a float array of ``arrays`` is at least ``threshold`` of the
    dtype it is computed in (``compute`` as :func:`overflow_scale` reads it)."""
    for name, v in (arrays or {}).items():
        v = np.asarray(v)
        if not is_float(v) or v.size == 0:
            continue
        dtype = compute.get(name) if isinstance(compute, Mapping) else compute
        finite = np.abs(v[np.isfinite(v)].astype(np.float64))
        if finite.size and finite.max() >= threshold(dtype or v.dtype):
            return True
    return False


#: why a pair's pattern difference is no evidence against a backend (docs/oracles.md)
CLEARED = ("accumulated", "overflow", "ill_conditioned", "amplified", "unstable")


def condition_pattern(fed: Mapping[str, np.ndarray], alone: Mapping[str, np.ndarray],
                      moved: Mapping[str, np.ndarray] | None, compute: str | None = None,
                      wide: Mapping[str, np.ndarray] | None = None) -> str | None:
    """The conditioning rule on one pair at its first differing layer (module docstring):
    ``fed`` is the layer's input (the same on both backends), ``alone`` each backend's
    output of the layer alone on it, ``moved`` each backend's output on ``fed`` moved by a
    rounding-level perturbation (None: not run), ``compute`` the layer's compute dtype
    (:func:`audee.oracle.compute_dtype.layer_compute_dtype`; None: each array's own),
    ``wide`` the layer recomputed in float64 (as :func:`overflow_boundary` reads it; None or
    empty: none).  An input at overflow scale clears the difference (``overflow``) unless
    the overflow is one of a narrow compute dtype the math does not force
    (:func:`unforced_narrow_overflow`).  Returns the reason the difference is cleared (one
    of :data:`CLEARED`), or None when it stands against the pair."""
    (a, out_a), (b, out_b) = list(alone.items())[:2]
    if compare_codes(out_a, out_b) is None:
        return "accumulated"
    if not has_nonfinite(fed) and overflow_scale(fed, compute) and not unforced_narrow_overflow(fed, alone, wide,
                                                                                                compute):
        return "overflow"
    if moved is not None:
        for label, out in alone.items():
            if label in moved and compare_codes(out, moved[label]) is not None:
                return "ill_conditioned"
    return None


def without_nonfinite(fed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``fed`` with every NaN and Inf of its float arrays set to 0: the layer's input as if
    its non-finite values were not there (:func:`same_difference`)."""
    out = {}
    for k, v in fed.items():
        if is_float(v) and holds_nonfinite(v):
            v = np.array(v, copy=True)
            v[~np.isfinite(v.astype(np.float32))] = 0
        out[k] = v
    return out


def differing_rows(alone: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Per batch row, whether the first two backends of ``alone`` differ in non-finite pattern
    there; None where their outputs cannot be compared by row (other shapes, a scalar)."""
    outs = [np.asarray(v) for v in list(alone.values())[:2]]
    if len(outs) < 2 or outs[0].shape != outs[1].shape or outs[0].ndim == 0:
        return None
    return (nonfinite_codes(outs[0]) != nonfinite_codes(outs[1])).reshape(len(outs[0]), -1).any(axis=1)


def rowwise_feed(fed: Mapping[str, np.ndarray], alone: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """For a layer that computes each batch row alone (a recurrent layer: each row's state
    is its own): ``fed`` with its NaN and Inf set to 0 when the first two backends of
    ``alone`` differ only in rows fed finite values (:func:`nonfinite_rows`), so a float64
    recomputation of those rows on it is exact; None where a differing row was fed a NaN or
    an Inf, or the outputs do not say which rows differ.  A special value placed in one row
    then leaves the other rows' exploding state judgeable (the api-cpu campaign, rng 3023: an
    Inf in row 0 of a ConvLSTM3D whose rows 1-7 overflow)."""
    differ = differing_rows(alone)
    if differ is None or not differ.any() or set(np.flatnonzero(differ).tolist()) & set(nonfinite_rows(fed)):
        return None
    return without_nonfinite(fed)


def same_difference(alone: Mapping[str, np.ndarray], cleaned: Mapping[str, np.ndarray]) -> bool:
    """Whether the first two backends of ``alone`` (each one's output of the layer alone on
    an input holding NaN/Inf) differ exactly as they do on that input with its non-finite
    values set to 0 (``cleaned``, :func:`without_nonfinite`): the same elements, each
    backend with the same code there.  Then no NaN or Inf of the input reaches the elements
    where they part (a window of values near float32's maximum beside the one holding the
    Inf), and the difference is judged as one on finite values."""
    codes = _pair_codes(alone, cleaned)
    if codes is None:
        return False
    ca, cb, za, zb = codes
    differ = ca != cb
    return bool(differ.any() and (differ == (za != zb)).all() and (ca[differ] == za[differ]).all()
                and (cb[differ] == zb[differ]).all())


def _pair_codes(alone: Mapping[str, np.ndarray],
                other: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The non-finite codes of the first two backends of ``alone`` and of the same two in
    ``other`` (another run of theirs on a related input or layer), or None where ``other``
    lacks one or a shape differs."""
    (a, out_a), (b, out_b) = list(alone.items())[:2]
    if a not in other or b not in other:
        return None
    codes = (nonfinite_codes(out_a), nonfinite_codes(out_b), nonfinite_codes(other[a]), nonfinite_codes(other[b]))
    return codes if len({c.shape for c in codes}) == 1 else None


def amplified_rounding(alone: Mapping[str, np.ndarray], pre: Mapping[str, np.ndarray],
                       act: Mapping[tuple[str, str], np.ndarray], within: Callable[[np.ndarray, np.ndarray], bool]) -> bool:
    """Whether a standing pattern difference at a layer with an output activation is the
    activation magnifying a rounding-level difference of the layer's linear part: each
    backend's linear part (``pre[x]``: the layer alone with ``activation: linear``) has the
    same pattern and agrees ``within`` tolerance; each backend's activation fed its own
    ``pre`` (``act[(x, x)]``) gives the pattern of its whole layer (``alone[x]``: the split
    computes what the layer computes, no fused kernel lost); and each backend's activation
    fed the other's ``pre`` (``act[(x, y)]``) gives the pattern the other backend's
    activation gives on it.  An exp just below float16's maximum, fed a pre-activation two
    float16 steps high from one backend's summation order, overflows there and not on the
    other: both backends' parts are right, the boundary sits inside the tolerance."""
    (a, out_a), (b, out_b) = list(alone.items())[:2]
    need = [(a, a), (b, b), (a, b), (b, a)]
    if a not in pre or b not in pre or any(k not in act for k in need):
        return False
    if compare_codes(pre[a], pre[b]) is not None or not within(pre[a], pre[b]):
        return False
    if compare_codes(act[(a, a)], out_a) is not None or compare_codes(act[(b, b)], out_b) is not None:
        return False
    if np.shape(act[(a, a)]) != np.shape(out_a) or np.shape(act[(b, b)]) != np.shape(out_b):
        return False
    return compare_codes(act[(a, a)], act[(b, a)]) is None and compare_codes(act[(b, b)], act[(a, b)]) is None


#: the binary exponent :func:`scaled_into_range` brings a layer's largest input to: below
#: float32's overflow scale (2^64), far above its smallest normal numbers
SCALED_EXPONENT = 60


def scaled_into_range(fed: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
    """``fed`` with its float arrays times ``2^-k`` (exact in binary, but for values far below
    the row's largest, which only underflow), ``k`` bringing the largest finite magnitude to
    about ``2^SCALED_EXPONENT``; and ``k`` (0: nothing to scale)."""
    peak = max((float(np.max(np.abs(v[np.isfinite(v)]), initial=0.0)) for v in fed.values() if is_float(v)),
               default=0.0)
    if peak <= 0.0:
        return dict(fed), 0
    k = max(0, int(np.ceil(np.log2(peak))) - SCALED_EXPONENT)
    return {r: ((np.asarray(v, np.float64) * 2.0 ** -k).astype(v.dtype) if is_float(v) else v)
            for r, v in fed.items()}, k


def intermediate_overflow(wide: Mapping[str, np.ndarray] | None, wide_scaled: Mapping[str, np.ndarray] | None,
                          k: int, scaled_alone: Mapping[str, np.ndarray],
                          within: Callable[[np.ndarray, np.ndarray], bool]) -> bool:
    """Whether a standing pattern difference of a float32 layer fed finite values at overflow
    scale is an intermediate sum overflowing in one order of operations and not in another:
    the layer is positively homogeneous on this input (recomputed in float64, ``wide``, it
    computes ``2^k`` times what it computes on the input scaled by ``2^-k``, ``wide_scaled``:
    the same non-finite values, the finite ones within tolerance; a sum, an average, a linear
    map without bias are homogeneous, a bias, an exp, a square are not: a layer with a bias
    or an activation is judged by its linear part, :func:`part_differs_there`), and scaled into
    range the two backends (``scaled_alone``) give the same non-finite values (an Inf of the
    input stays one) and agree ``within`` tolerance on the rest.  They compute one thing; at
    full scale only where a partial sum crossed the maximum differs (an average pooling of
    near-maximal values of both signs: -inf summed one way, inf - inf = NaN another, a finite
    mean a third).  float32 only: nothing wider accumulates it, while a float16 sum is
    expected to run in float32 (keeping it in float16 is a bug of its own)."""
    if k <= 0 or not wide or not wide_scaled:
        return False
    # scaled back up, a value past float64's range is an Inf where the layer at full scale was
    # finite: not homogeneous, which the comparison says; the overflow itself is no news
    with np.errstate(over="ignore"):
        both = [(np.asarray(wide[x], np.float64), np.asarray(wide_scaled[x], np.float64) * 2.0 ** k)
                for x in wide if x in wide_scaled and np.shape(wide[x]) == np.shape(wide_scaled[x])]
        # the backends' scaled outputs judged at full scale: an absolute tolerance at 2^-k would pass anything
        outs = [np.asarray(v, np.float64) * 2.0 ** k for v in scaled_alone.values()][:2]
    if not both or len(outs) < 2 or outs[0].shape != outs[1].shape:
        return False
    return all(_alike(u, v, within) for u, v in [*both, (outs[0], outs[1])])


def part_differs_there(alone: Mapping[str, np.ndarray], part: Mapping[str, np.ndarray]) -> bool:
    """Whether the first two backends' outputs of a layer's part (``part``: its linear part,
    :func:`audee.cases.spec.linear_part`, on the same input) differ in non-finite pattern at
    every element where their outputs of the whole layer (``alone``) do.  A bias add and an
    activation act element by element, so a whole-layer difference the part does not show
    was made after it, and no judgement of the part speaks for it."""
    codes = _pair_codes(alone, part)
    if codes is None:
        return False
    ca, cb, pa, pb = codes
    differ = ca != cb
    return bool(differ.any() and (pa != pb)[differ].all())


def _alike(u: np.ndarray, v: np.ndarray, within: Callable[[np.ndarray, np.ndarray], bool]) -> bool:
    """The same non-finite values, and the finite ones (zero where either is not) ``within``."""
    if compare_codes(u, v) is not None:
        return False
    finite = np.isfinite(u) & np.isfinite(v)
    return within(np.where(finite, u, 0).astype(u.dtype), np.where(finite, v, 0).astype(v.dtype))


def state_at_overflow_scale(alone: Mapping[str, np.ndarray], states: Mapping[str, np.ndarray] | None,
                            sequences: bool, compute: str | None = None) -> bool:
    """Whether a recurrent layer's state was at overflow scale before every element where
    the first two backends of ``alone`` differ in pattern: ``states`` holds, per backend
    that could, the layer recomputed in float64 with ``return_sequences`` (each step's
    output, in the order the layer stepped: reversed with ``go_backwards``); ``sequences``
    says whether ``alone`` is such a sequence (an element's step is its second index) or
    the last step's output.  The state carried into a step is that step's input: where it
    is at overflow scale (:func:`overflow_scale`: a square or a product of two of its
    values overflows) the overflow rule applies to it as to any input, though the layer's
    output, saturated by its activation (selu of a cell state past float32's range), fits.
    Every float64 recomputation must say so; none: no evidence."""
    (a, out_a), (b, out_b) = list(alone.items())[:2]
    out_a, out_b = np.asarray(out_a), np.asarray(out_b)
    seqs = [np.asarray(v, np.float64) for v in (states or {}).values() if v is not None and np.ndim(v) >= 2]
    if out_a.shape != out_b.shape or not out_a.ndim or not seqs:
        return False
    differ = np.argwhere(nonfinite_codes(out_a) != nonfinite_codes(out_b))
    if not len(differ):
        return False
    limit = overflow_scale_min(compute or out_a.dtype)
    rows = differ[:, 0]
    for seq in seqs:
        n, steps = seq.shape[:2]
        if n != out_a.shape[0] or (sequences and (out_a.ndim < 2 or out_a.shape[1] != steps)):
            return False
        with np.errstate(invalid="ignore"):
            big = ~(np.abs(seq.reshape(n, steps, -1)) < limit).all(-1)   # a step's state at overflow scale
        seen = np.zeros((n, steps), bool)                                # ... at a step before this one
        seen[:, 1:] = np.logical_or.accumulate(big, axis=1)[:, :-1]
        at = differ[:, 1] if sequences else np.full(len(differ), steps - 1)
        if not seen[rows, at].all():
            return False
    return True


def overflow_boundary(fed: Mapping[str, np.ndarray], alone: Mapping[str, np.ndarray],
                      wide: Mapping[str, np.ndarray] | None, compute: str | None = None) -> bool:
    """Whether a standing pattern difference sits at the overflow boundary of the compute
    dtype: the layer's input ``fed`` is finite and the math forces the overflow at every
    element where the two backends' outputs of the layer alone (``alone``) differ in
    pattern (:func:`overflow_forced`).  Such a result is not representable in the compute
    dtype whatever the backend does: which elements end as Inf, NaN or a huge finite value
    depends on the order of operations (an exploding recurrence), so the difference is
    undefined behaviour, not evidence against a backend."""
    return not has_nonfinite(fed) and overflow_forced(alone, wide, compute)


def overflow_forced(alone: Mapping[str, np.ndarray], wide: Mapping[str, np.ndarray] | None,
                    compute: str | None = None) -> bool:
    """Whether the exact result is beyond the compute dtype's maximum at every element where
    the first two backends of ``alone`` (each one's output of the layer alone) differ in
    pattern.  The exact result is the layer recomputed in float64 (``wide``: per backend
    that could, its float64 output; every one of them must overflow there; an Inf or NaN in
    float64 counts as overflowing).  Without a float64 result, the backends' own values
    stand in: in float32 or wider, every value at those elements, on both backends, is
    non-finite or at overflow scale (at least the square root of the maximum); in a dtype
    that overflows before float32 (:func:`audee.oracle.compute_dtype.narrow_range`:
    float16) every finite value there is within a factor 2 of the maximum, since one far
    below it (a backend that kept an intermediate in float32, finite at 17000 where float16
    sums overflowed) shows a representable result no rounding can push over.  A difference
    in the kind of non-finite value alone (NaN on one backend, Inf on the other, at every
    differing element) is forced too: both overflowed inside the layer, and whether an
    overflow ends as Inf or as Inf - Inf = NaN is the order of operations."""
    (a, out_a), (b, out_b) = list(alone.items())[:2]
    out_a, out_b = np.asarray(out_a), np.asarray(out_b)
    if out_a.shape != out_b.shape or not is_float(out_a):
        return False
    differ = nonfinite_codes(out_a) != nonfinite_codes(out_b)
    if not differ.any():
        return False
    if not np.isfinite(out_a[differ]).any() and not np.isfinite(out_b[differ]).any():
        return True
    limit = dtype_max(compute or out_a.dtype)
    exact = [np.asarray(w, np.float64) for w in (wide or {}).values()
             if w is not None and np.shape(w) == out_a.shape and np.asarray(w).dtype == np.float64]
    if exact:
        return all(bool((~(np.abs(w[differ]) <= limit)).all()) for w in exact)
    both = np.concatenate([out_a[differ].astype(np.float64), out_b[differ].astype(np.float64)])
    if narrow_range(compute or out_a.dtype):
        finite = np.abs(both[np.isfinite(both)])
        return bool((finite >= limit / 2).all())
    return bool((~(np.abs(both) < overflow_scale_min(compute or out_a.dtype))).all())


def unforced_narrow_overflow(fed: Mapping[str, np.ndarray], alone: Mapping[str, np.ndarray],
                             wide: Mapping[str, np.ndarray] | None, compute: str | None = None) -> bool:
    """Whether an overflow that the input's scale would explain is one of a narrow compute
    dtype that the math does not force: ``compute`` overflows before float32
    (:func:`audee.oracle.compute_dtype.narrow_range`), the finite input ``fed`` is at that
    dtype's overflow scale but not at float32's, and the exact result is representable at
    some element where the pair differs (:func:`overflow_forced` is False: a backend stayed
    finite there, and the float64 result, or without one that backend's value, says the
    result fits).  Then one backend made an intermediate in the narrow dtype where another
    did not (a float16 average pooling summing in float16): a finding, not the order of
    operations at the boundary."""
    compute = narrow_overflow_scale(fed, compute)
    return compute is not None and not overflow_forced(alone, wide, compute)


def float64_nan_within(alone: Mapping[str, np.ndarray], wide: Mapping[str, np.ndarray] | None,
                       compute: str | None = None, programs: int = 1) -> dict[str, list[str]] | None:
    """Which side of a pair stands on the exact result where their non-finite patterns
    differ, in the shape of a deviation's ``float64_within`` (side -> the float64 results it
    is within; :func:`audee.oracle.pairs.float64_sides`): at the differing elements whose
    layer recomputed in float64 (every result in ``wide``) is finite and within the compute
    dtype's maximum, a side finite at each of them is within every result, a side non-finite
    at one within none: it kept an intermediate in the narrow dtype where the math needs a
    wider one, as mixed precision promises (:func:`unforced_narrow_overflow`).  Only for a
    dtype that overflows before float32 (:func:`audee.oracle.compute_dtype.narrow_range`): a
    float32 sum overflowing on the way to a result float32 holds is every BLAS's order of
    operations, no evidence against the one that did.  ``programs``: how many frameworks'
    programs (:func:`audee.backends.info.program_of`) the float64 results must come from: on
    an input holding NaN/Inf, two, since one framework's float64 kernel treats them as its
    float16 one does (a max pooling dropping the NaN would make its element "fit"), and
    only where they all are finite is the exact result known.  None without such results or
    such an element (an overflow the math forces says nothing of either side)."""
    (a, out_a), (b, out_b) = list(alone.items())[:2]
    compute = compute or str(np.asarray(out_a).dtype)
    exact = {t: w for t, w in (wide or {}).items()
             if w is not None and np.asarray(w).dtype == np.float64 and np.shape(w) == np.shape(out_a)}
    if np.shape(out_b) != np.shape(out_a) or not is_float(np.asarray(out_a)) or not narrow_range(compute) \
            or len({program_of(t) for t in exact}) < programs:
        return None
    fits = _fits(exact.values(), np.shape(out_a), compute)
    if fits is None:
        return None
    ca, cb = nonfinite_codes(np.asarray(out_a)), nonfinite_codes(np.asarray(out_b))
    there = (ca != cb) & fits
    if not there.any():
        return None
    return {x: ([] if (c[there] != FINITE).any() else sorted(exact)) for x, c in ((a, ca), (b, cb))}


def _fits(wide: Any, shape: tuple[int, ...], compute: str) -> np.ndarray | None:
    """Where every float64 result in ``wide`` of the output ``shape`` is finite and within
    ``compute``'s maximum: the exact result the dtype holds.  None without such a result."""
    exact = [np.asarray(w, np.float64) for w in wide
             if w is not None and np.asarray(w).dtype == np.float64 and np.shape(w) == shape]
    if not exact:
        return None
    limit = dtype_max(compute)
    with np.errstate(invalid="ignore"):
        return np.logical_and.reduce([np.abs(w) <= limit for w in exact])


def narrow_overflow_scale(fed: Mapping[str, np.ndarray], compute: str | None) -> str | None:
    """The compute dtype (None: the input's own) when it overflows before float32 and the
    finite input ``fed`` is at its overflow scale but not at float32's; else None."""
    if compute is None:
        dtypes = [np.asarray(v).dtype for v in fed.values() if is_float(v)]
        compute = str(dtypes[0]) if dtypes else None
    if compute is None or not narrow_range(compute) or has_nonfinite(fed) or overflow_scale(fed, FLOAT32):
        return None
    return compute if overflow_scale(fed, compute) else None


def both_overflow_narrow(fed: Mapping[str, np.ndarray], alone: Mapping[str, np.ndarray],
                         wide: Mapping[str, np.ndarray] | None, compute: str | None = None) -> bool:
    """Whether both backends of a pair whose difference :func:`unforced_narrow_overflow`
    let stand overflow the narrow ``compute`` dtype where the math does not: each is
    non-finite at some element whose exact result (every float64 recomputation in ``wide``;
    none: no evidence) is finite and within the dtype's maximum.  The finding that rule
    stands for is one backend keeping an intermediate in the narrow dtype where the other
    kept a wider one; a backend that itself overflows where the result fits keeps narrow
    intermediates too, so where each of the two overflows is the order of its operations
    (a float16 attention: every backend NaN at most query positions, one finite, and exact,
    at another)."""
    compute = narrow_overflow_scale(fed, compute)
    outs = [np.asarray(v) for v in list(alone.values())[:2]]
    if compute is None or len(outs) < 2 or outs[0].shape != outs[1].shape:
        return False
    fits = _fits((wide or {}).values(), outs[0].shape, compute)
    return fits is not None and all(bool((fits & (nonfinite_codes(out) != FINITE)).any()) for out in outs)


def contraction_overflow(fed: Mapping[str, np.ndarray], alone: Mapping[str, np.ndarray],
                         peaks: list[np.ndarray], compute: str | None = None) -> bool:
    """Whether a pair's standing difference that :func:`unforced_narrow_overflow` let stand
    (the layer's output fits the narrow ``compute`` dtype) is one the formula forces all the
    same: in every batch row where the first two backends of ``alone`` differ in non-finite
    pattern, a contraction inside the layer stores a value beyond the dtype's maximum
    (``peaks``: per row, the largest such magnitude, computed at least in float32, each
    tracing backend's; :mod:`audee.backends.jax_trace`).  A float16 attention whose exact
    scores pass 65504 is +inf and NaN after its softmax as Keras writes it, where torch's
    fused attention keeps the scores in float32 and stays finite: the input forces the
    overflow, neither backend is at fault.  By row, not by element: the scores of a row
    reach every output element of it."""
    compute = narrow_overflow_scale(fed, compute)
    differ = differing_rows(alone)
    if compute is None or not peaks or differ is None or not differ.any():
        return False
    limit = dtype_max(compute)
    return all(np.shape(p) == differ.shape and bool((np.asarray(p)[differ] > limit).all()) for p in peaks)


def compare_codes(a: np.ndarray, b: np.ndarray) -> dict[str, Any] | None:
    """How two arrays' non-finite patterns differ: None when they agree (or cannot be
    compared: different shapes are the inconsistency oracle's business), else
    ``{"elements": n, "index": [...], "values": [code name on a, code name on b], "rows": [...]}``
    (``rows``: the batch rows, axis 0, where they differ)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return None
    ca, cb = nonfinite_codes(a), nonfinite_codes(b)
    differ = ca != cb
    n = int(differ.sum())
    if not n:
        return None
    idx = np.unravel_index(int(np.flatnonzero(differ)[0]), differ.shape)
    rows = sorted(int(r) for r in np.flatnonzero(differ.reshape(differ.shape[0], -1).any(axis=1))) \
        if differ.ndim else []
    return {"elements": n, "index": [int(i) for i in idx],
            "values": [CODE_NAMES[ca[idx]], CODE_NAMES[cb[idx]]], "rows": rows}


def _first_layer_by_lists(a: Outcome, b: Outcome) -> str | None:
    """The first layer non-finite on exactly one of the two backends (layer granularity;
    both lists are in the spec's topological order)."""
    sa, sb = set(a.nonfinite), set(b.nonfinite)
    for name in a.nonfinite + b.nonfinite:
        if (name in sa) != (name in sb):
            return name
    return None


def pair_pattern(a: Outcome, b: Outcome) -> NanPattern | None:
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
    example = NanExample(array=next(iter(arrays)), index=first["index"],
                         **{a.backend: first["values"][0], b.backend: first["values"][1]}) if first else None
    rows = sorted({r for got in arrays.values() for r in got["rows"]}) if arrays else None
    return NanPattern(first_layer=layer, first_layer_from="layer-lists" if layer is not None else None,
                      elements=first["elements"] if first else 0, example=example, arrays=sorted(arrays), rows=rows)


def nan_findings(outcomes: list[Outcome], inputs: Mapping[str, np.ndarray] | None = None,
                 compute: Mapping[str, str] | str | None = None) -> list[Finding]:
    """The rules of the module docstring on one test case's outcomes; ``inputs`` is the
    batch that was run (to tell propagation of a non-finite input from a NaN made inside),
    ``compute`` the compute dtype of the layers reading each input
    (:func:`audee.oracle.compute_dtype.consumer_compute_dtypes`; overflow scale is judged
    in it)."""
    ok = [o for o in outcomes if o.ok]
    bad = [o for o in ok if o.nonfinite or any(holds_nonfinite(getattr(o, n)) for n in ARRAYS)]
    if not bad:
        return []
    patterns = {}
    for a, b in combinations(ok, 2):
        p = pair_pattern(a, b)
        if p is not None:
            patterns[f"{a.backend}|{b.backend}"] = p
    in_bad = has_nonfinite(inputs) or beyond_range(inputs, compute)   # a value its reader's cast makes Inf
    in_big = overflow_scale(inputs, compute)
    bad_names = {o.backend for o in bad}
    detail = NanDetail(
        first_layer={o.backend: o.nonfinite[0] for o in bad if o.nonfinite},
        layers={o.backend: o.nonfinite for o in bad},
        strong=bool(patterns), finite_backends=finite_where_others_are_not(ok),
        input_nonfinite=in_bad, input_overflow_scale=in_big, patterns=patterns,
        input_nonfinite_rows=nonfinite_rows(inputs, compute) if in_bad else None,
        counts={o.backend: _counts(o.output) for o in ok if o.output is not None},
        ran=len(ok), agreed=False, overflow_boundary=False,
        program={o.backend: dict(o.facts) for o in ok if o.facts},
    )
    if patterns:
        involved = bad_names | {b for k in patterns for b in k.split("|")}
        finding = Finding(Kind.NAN, [o.backend for o in ok if o.backend in involved], detail)
    else:
        finding = Finding(Kind.NAN, [o.backend for o in bad], detail)
    _settle_kind(finding)
    return [finding]


def finite_where_others_are_not(ok: list[Outcome]) -> list[str]:
    """The backends finite somewhere another backend is not: at an element of the output
    or the logits, or at a whole layer non-finite on the other (layer lists).  A backend
    that drops a NaN the others propagate is named even if an earlier layer of its own
    held the NaN."""
    out = []
    for o in ok:
        for other in ok:
            if other is o:
                continue
            if set(other.nonfinite) - set(o.nonfinite) or any(
                    is_float(getattr(o, k)) and is_float(getattr(other, k))
                    and np.shape(getattr(o, k)) == np.shape(getattr(other, k))
                    and (np.isfinite(getattr(o, k)) & ~np.isfinite(getattr(other, k))).any() for k in ARRAYS):
                out.append(o.backend)
                break
    return out


def unpatterned_kind(detail: NanDetail) -> str:
    """The kind of a NaN finding with no standing pattern difference: propagation when the
    input explains the non-finite values (NaN/Inf or overflow-scale values in it), else
    the paper's NaN oracle (NaN/Inf made from ordinary finite inputs)."""
    if detail.input_nonfinite or detail.input_overflow_scale:
        return Kind.NAN_PROPAGATED
    return Kind.NAN


def _settle_kind(finding: Finding) -> None:
    """Kind and ``agreed`` from ``strong``: a finding with no standing pattern difference
    takes :func:`unpatterned_kind`; when that is the paper's NaN oracle and at least two
    backends ran, the backends agree on a non-finite result from finite, ordinary inputs
    (``agreed``): counted in the paper's NaN tables, not evidence of a bug in any one
    backend (``audee.triage.known`` classes it)."""
    d = finding.detail
    if not d.strong:
        finding.kind = unpatterned_kind(d)
    d.agreed = bool(finding.kind == Kind.NAN and not d.strong and d.ran >= 2)


def stood(p: NanPattern) -> bool:
    """Whether a pair's difference stood as evidence against a side: judged (its per-layer
    diagnosis came back), not cleared by the conditioning rule, not forced by an overflow."""
    return not p.lost and p.cleared not in CLEARED and not p.overflow_boundary


def settle_conditioning(finding: Finding) -> None:
    """After :func:`condition_pattern` ran on each pair (``patterns[pair]["cleared"]``):
    a finding whose every pair is cleared is not ``strong`` and takes
    :func:`unpatterned_kind` (and ``agreed`` when that is the paper's NaN oracle).  A
    strong finding whose every standing pair is at the overflow boundary
    (``patterns[pair]["overflow_boundary"]``, :func:`overflow_boundary`) records
    ``overflow_boundary``: undefined behaviour, not a bug."""
    d = finding.detail
    patterns = d.patterns
    if patterns and all(p.cleared in CLEARED for p in patterns.values()):
        d.strong = False
    standing = [p for p in patterns.values() if p.cleared not in CLEARED]
    d.overflow_boundary = bool(d.strong and standing and all(p.overflow_boundary for p in standing))
    _settle_kind(finding)


def diagnose_patterns(finding: Finding, layers: Mapping[str, Mapping[str, np.ndarray]],
                      rows: list[int] | None = None, failed: Mapping[str, str] | None = None) -> None:
    """Refine each pair's ``first_layer`` from per-layer outputs (``layers[backend][layer]``,
    layers in topological order, on the batch rows ``rows``): the first layer whose
    element-wise non-finite patterns differ, with its element count and an example index
    (row numbers of the full batch).  Pairs whose layer outputs all agree keep the
    output-level record, marked ``first_layer_from: "output"``.  A pair with a backend whose
    per-layer run failed (``failed``: backend -> why) records why as ``lost``: its difference
    was never judged, so no rule may read it as one that stood (:func:`stood`)."""
    for key, p in finding.detail.patterns.items():
        a, b = key.split("|")
        la, lb = layers.get(a), layers.get(b)
        if not isinstance(la, Mapping) or not isinstance(lb, Mapping):
            p.lost = {x: (failed or {})[x] for x in (a, b) if x in (failed or {})} or p.lost
            continue
        p.lost = None
        for name, va in la.items():
            if name not in lb:
                continue
            got = compare_codes(va, lb[name])
            if got:
                index = list(got["index"])
                if rows is not None and index:
                    index[0] = int(rows[index[0]])
                p.first_layer, p.first_layer_from, p.layer_elements = name, "layers", got["elements"]
                p.layer_example = NanExample(index=index, **{a: got["values"][0], b: got["values"][1]})
                break
        else:
            p.first_layer_from = "output" if p.arrays else p.first_layer_from


def diagnose_rows(outcomes: list[Outcome], inputs: Mapping[str, np.ndarray] | None, limit: int) -> list[int]:
    """Batch rows worth a per-layer look, at most ``limit``: first the rows where two
    backends' output or logits patterns differ (a difference must be re-run to be judged),
    then rows with NaN/Inf in the input or in any backend's output or logits (the first
    rows if none is)."""
    n = None
    hit: set[int] = set()
    for arr in list((inputs or {}).values()) + [getattr(o, k) for o in outcomes if o.ok for k in ARRAYS]:
        if arr is None or not is_float(arr) or np.ndim(arr) == 0:
            continue
        arr = np.asarray(arr)
        n = arr.shape[0] if n is None else n
        hit.update(np.flatnonzero(~np.isfinite(arr.reshape(arr.shape[0], -1)).all(1)).tolist())
    differ: set[int] = set()
    ok = [o for o in outcomes if o.ok]
    for a, b in combinations(ok, 2):
        for k in ARRAYS:
            va, vb = getattr(a, k), getattr(b, k)
            if is_float(va) and is_float(vb) and np.shape(va) == np.shape(vb) and np.ndim(va) > 0:
                d = nonfinite_codes(va) != nonfinite_codes(vb)
                differ.update(np.flatnonzero(d.reshape(d.shape[0], -1).any(1)).tolist())
    # rows of the batch only: an output whose first axis is longer than the inputs' (a backend that
    # returned another shape: MultiHeadAttention's 16 rows for 8 on one, rng 2988) has rows no input has
    batch = next((np.shape(v)[0] for v in (inputs or {}).values() if np.ndim(v)), None)
    if batch is not None:
        differ, hit, n = {r for r in differ if r < batch}, {r for r in hit if r < batch}, batch
    rows = (sorted(differ) + sorted(hit - differ))[:limit]
    return sorted(rows) or list(range(min(limit, n or 0)))


def _counts(a: np.ndarray) -> dict[str, int]:
    c = np.bincount(nonfinite_codes(a).ravel(), minlength=4)
    return {"nan": int(c[NAN]), "+inf": int(c[POSINF]), "-inf": int(c[NEGINF])}
