"""What a layer's formula stores between its ops, read from JAX's trace of it.

A float16 layer stores each op's result in float16: a contraction's (a matmul's, an
einsum's, a convolution's) output is float16 whatever its accumulator was.  Where the exact
value of such an output passes float16's maximum, the overflow is forced by the formula on
that input, whichever backend computes it; a backend that stays finite there kept the
intermediate wider (torch's fused attention computes its scores in float32), a design
choice, not the other's bug.  The layer's final output can fit all the same (a softmax of
overflowing scores), so only the intermediates say so: this module evaluates a traced
function equation by equation, as :func:`jax.core.eval_jaxpr` does, and records each
contraction's output on the way (:func:`contraction_row_peaks`).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

#: the primitives whose output is a contraction's stored result
CONTRACTIONS = frozenset({"dot_general", "conv_general_dilated"})
#: elementwise scalings a formula may put before or after a contraction (attention's
#: 1/sqrt(d)): Keras scales the query first on one backend and the scores after on another,
#: so a contraction's result counts at the smaller of its two magnitudes
SCALINGS = frozenset({"mul", "div"})
#: primitives whose inner jaxpr runs once per call: evaluated equation by equation inside;
#: a loop's or a branch's body (scan, while, cond) is bound whole
_CALLS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
_LOOPS = frozenset({"scan", "while", "cond"})


def _row_peaks(value: Any, batch: int) -> np.ndarray | None:
    """Per batch row (axis 0), the largest magnitude of ``value`` (an Inf counts, a NaN
    does not); None for an array whose first axis is not the batch (a weight's product)."""
    a = np.asarray(value)
    if a.ndim == 0 or a.shape[0] != batch or not np.issubdtype(a.dtype, np.floating) or a.size == 0:
        return None
    m = np.abs(a.astype(np.float64)).reshape(batch, -1)
    return np.where(np.isnan(m), 0.0, m).max(axis=1)


def _scalar(value: Any) -> bool:
    return np.size(value) == 1


def contraction_row_peaks(fn: Callable[..., Any], args: tuple[Any, ...], batch: int) -> np.ndarray | None:
    """Per batch row, the largest magnitude any contraction of ``fn(*args)`` stores (its
    output, or that output scaled by a scalar right after, whichever is smaller): the trace
    of ``fn`` (``jax.make_jaxpr``) evaluated equation by equation in the dtype it was traced
    in, calls inlined.  None when no contraction's output has the batch as its first axis."""
    import jax
    from jax.extend import core as jcore

    closed = jax.make_jaxpr(fn)(*args)
    slots: list[np.ndarray] = []  # each contraction's row peaks
    slot_of: dict[Any, int] = {}  # a variable holding a contraction's output -> its slot

    def walk(jaxpr: Any, consts: list[Any], values: list[Any]) -> list[Any]:
        env: dict[Any, Any] = {}

        def read(v: Any) -> Any:
            return v.val if isinstance(v, jcore.Literal) else env[v]

        env.update(zip(jaxpr.constvars, consts))
        env.update(zip(jaxpr.invars, values))
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            inner = None if name in _LOOPS else next(
                (j for j in (eqn.params.get(p) for p in _CALLS)
                 if isinstance(j, jcore.ClosedJaxpr) and len(j.jaxpr.invars) == len(invals)), None)
            if inner is not None:
                outs = walk(inner.jaxpr, list(inner.consts), invals)
                for outer, v in zip(eqn.outvars, inner.jaxpr.outvars):  # a call returning a contraction's output
                    if not isinstance(v, jcore.Literal) and v in slot_of:
                        slot_of[outer] = slot_of[v]
            else:
                got = eqn.primitive.bind(*invals, **eqn.params)
                outs = list(got) if eqn.primitive.multiple_results else [got]
            if name in CONTRACTIONS:
                rows = _row_peaks(outs[0], batch)
                if rows is not None:
                    slot_of[eqn.outvars[0]] = len(slots)
                    slots.append(rows)
            elif name in SCALINGS and len(eqn.invars) == 2:
                for k, v in enumerate(eqn.invars):
                    if not isinstance(v, jcore.Literal) and v in slot_of and _scalar(invals[1 - k]):
                        scaled = _row_peaks(outs[0], batch)
                        if scaled is not None:
                            slots[slot_of[v]] = np.minimum(slots[slot_of[v]], scaled)
            env.update(zip(eqn.outvars, outs))
        return [read(v) for v in jaxpr.outvars]

    walk(closed.jaxpr, list(closed.consts), jax.tree_util.tree_leaves(args))
    return np.max(np.stack(slots), axis=0) if slots else None
