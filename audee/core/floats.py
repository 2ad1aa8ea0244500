"""Which arrays hold floating-point values: one test for every module that asks.

NumPy counts ml_dtypes' bfloat16, the type TensorFlow, torch and JAX hand a bfloat16 tensor
out as, as void (kind ``V``), not as ``np.floating``.  A test by ``np.issubdtype(...,
np.floating)`` alone takes every bfloat16 layer for one without values: its NaN and Inf go
unseen, and a backend whose layer returns float32 where the others return bfloat16 looks like
the only one with non-finite values.  NumPy's ufuncs (``isnan``, ``isfinite``) work on it.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def is_float_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` (a NumPy dtype, ml_dtypes' included) is a floating-point type."""
    return bool(np.issubdtype(dtype, np.floating)) or getattr(dtype, "name", str(dtype)) == "bfloat16"


def is_float(a: Any) -> bool:
    """Whether ``a`` (an array, or anything NumPy makes one of; None: no) holds floats."""
    return a is not None and is_float_dtype(np.asarray(a).dtype)


def numpy_float(a: Any) -> np.ndarray:
    """``a`` as an array NumPy computes on everywhere: a bfloat16 one as float32, which holds
    every bfloat16 value exactly (``np.finfo`` and friends refuse ml_dtypes' types); any
    other as it is."""
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.name == "bfloat16" else a


def holds_nonfinite(a: Any) -> bool:
    """Whether ``a`` holds floats (bfloat16 included) and a NaN or an Inf among them."""
    return is_float(a) and not bool(np.isfinite(a).all())


def float32_valued(a: Any) -> bool:
    """Whether a float64 array may hold float32 rounding: every finite value a float32
    number, and some not an integer (an integer-valued result, a count or a one-hot, is
    exact in either dtype).  A backend that computes a float64 layer in float32 and casts
    back answers such an array (TensorFlow's bilinear resize; Keras' normalizations off
    TensorFlow, as users run them); so does an exact computation on float32 inputs widened
    (a max, a shift by an integer), which :func:`nudged` tells apart."""
    a = np.asarray(a)
    if a.dtype != np.float64:
        return False
    v = a[np.isfinite(a)]
    v = v[np.abs(v) <= np.finfo(np.float32).max]
    if v.size == 0 or bool(np.all(v == np.round(v))):
        return False
    return bool(np.all(v.astype(np.float32).astype(np.float64) == v))


#: the relative nudge :func:`nudged` gives a float64 value: below half a float32 ulp of any
#: float32 number (at least 2**-25 of it), so a float32 cast takes it away, and as far above
#: float64's rounding (2**-53) as that allows, so an ill-conditioned float64 computation
#: (a normalization whose epsilon of 1e-12 amplifies its terms a millionfold) still shows it
NUDGE = 2.0 ** -26


def nudged(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Float64 arrays each element moved by :data:`NUDGE` of itself, up and down in turn
    (others as they are; one scale for all would vanish in a normalization): a computation
    in float64 answers them otherwise where its result depends on them; one that casts them
    to float32 first answers them bit for bit as before."""
    def nudge(v: Any) -> Any:
        a = np.asarray(v)
        if a.dtype != np.float64:
            return v
        sign = np.where(np.arange(a.size) % 2 == 0, 1.0, -1.0).reshape(a.shape)
        return a * (1.0 + NUDGE * sign)

    return {k: nudge(v) for k, v in inputs.items()}


__all__ = ["NUDGE", "float32_valued", "nudged", "holds_nonfinite", "is_float", "is_float_dtype", "numpy_float"]
