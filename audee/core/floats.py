"""Which arrays hold floating-point values: one test for every module that asks.

NumPy counts ml_dtypes' bfloat16, the type TensorFlow, torch and JAX hand a bfloat16 tensor
out as, as void (kind ``V``), not as ``np.floating``.  A test by ``np.issubdtype(...,
np.floating)`` alone takes every bfloat16 layer for one without values: its NaN and Inf go
unseen, and a backend whose layer returns float32 where the others return bfloat16 looks like
the only one with non-finite values.  NumPy's ufuncs (``isnan``, ``isfinite``) work on it.
"""
from __future__ import annotations

from typing import Any

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


__all__ = ["holds_nonfinite", "is_float", "is_float_dtype", "numpy_float"]
