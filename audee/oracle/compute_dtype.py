"""The one owner of "the dtype a layer computes in", read from its spec parameters.

The ModelSpec has no model-level dtype: a dtype policy travels as each layer's ``dtype``
parameter (``audee/mutation/apilevel.py``, ``audee/backends/keras_import.py``), and Keras casts a
float32 model input to the consuming layer's compute dtype.  So whether a value is at
overflow scale, or how large a rounding step is, depends on that compute dtype, not on the
dtype of the array fed in: 192125 in a float32 input array is ordinary for a float32
layer and already Inf for a ``mixed_float16`` one.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

FLOAT32 = "float32"
#: a Keras dtype policy name -> the dtype its layers compute in
POLICY_COMPUTE = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16",
                  "float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
                  "half": "float16", "float": "float32", "double": "float64"}


#: the compute dtypes that keep fewer significant bits than float32: a layer computing in one
#: may round an intermediate beyond the tolerance on every backend alike
REDUCED_PRECISION = ("float16", "bfloat16")


def reduced_precision(dtype: Any) -> bool:
    """Whether ``dtype`` (a name or a dtype) is one of :data:`REDUCED_PRECISION`."""
    return str(dtype) in REDUCED_PRECISION


def layer_policy(params: Mapping[str, Any] | None) -> str | None:
    """The name of the ``dtype`` policy a layer's spec parameters ``params`` give (a name, or a
    serialized ``DTypePolicy`` / ``{"name": ...}`` dict), or None when they give none (the
    layer runs under float32: audee never sets a global policy)."""
    policy = (params or {}).get("dtype")
    if isinstance(policy, Mapping):  # {"class_name": "DTypePolicy", "config": {"name": ...}} or {"name": ...}
        policy = (policy.get("config") or policy).get("name")
    return None if policy is None else str(policy)


def layer_compute_dtype(params: Mapping[str, Any] | None) -> str:
    """The compute dtype of a layer with spec parameters ``params``: its ``dtype`` policy's
    (:func:`layer_policy`), float32 when unset or unknown."""
    policy = layer_policy(params)
    return POLICY_COMPUTE.get(policy, FLOAT32) if policy is not None else FLOAT32


def overflow_scale_min(dtype: Any) -> float:
    """The smallest magnitude at overflow scale in ``dtype``: the square root of its maximum,
    from where a square or a product of two such values overflows."""
    return float(np.sqrt(dtype_max(dtype)))


def _finfo(dtype: Any) -> Any:
    """The machine limits of a float dtype (bfloat16 and its names through ml_dtypes)."""
    try:
        return np.finfo(dtype)
    except (TypeError, ValueError):  # bfloat16 and other ml_dtypes types, or their names
        import ml_dtypes

        return ml_dtypes.finfo(getattr(ml_dtypes, str(dtype), dtype))


def dtype_max(dtype: Any) -> float:
    """The largest finite value of a float dtype (bfloat16 through ml_dtypes)."""
    return float(_finfo(dtype).max)


def cast_overflow_min(dtype: Any) -> float:
    """The smallest magnitude a cast to ``dtype`` rounds to Inf: its maximum plus half its
    spacing there (65520 in float16: 65519 rounds down to 65504)."""
    info = _finfo(dtype)
    top = float(info.max)
    # the binade of the maximum from its exponent (log2 of float64's maximum rounds up to 1024)
    return top + math.ldexp(float(info.eps) / 2, math.frexp(top)[1] - 1)


def narrow_range(dtype: Any) -> bool:
    """Whether ``dtype`` overflows before float32 does (float16: yes; bfloat16 shares float32's
    exponent range: no).  Only in such a dtype can a backend avoid an overflow by computing an
    intermediate in float32 (as mixed precision does): there the overflow-scale rule alone does
    not explain an overflow that another backend does not make."""
    return 2 * dtype_max(dtype) < dtype_max(FLOAT32)  # bfloat16 is a mantissa short of float32, not an exponent


def narrowest(dtypes: list[str]) -> str:
    """The dtype with the smallest maximum among ``dtypes`` (float32 when empty): where a
    value is consumed by layers of several compute dtypes, the first to overflow decides."""
    return min(dtypes, key=dtype_max) if dtypes else FLOAT32


def consumer_compute_dtypes(spec: Any, names: list[str] | None = None) -> dict[str, str]:
    """For each model input (or each of ``names``: inputs or layers of ``spec``), the
    narrowest compute dtype among the layers that read it."""
    names = list(spec.input_names) if names is None else names
    readers: dict[str, list[str]] = {n: [] for n in names}
    for layer in spec.layers:
        for ref in layer.inputs:
            if ref in readers:
                readers[ref].append(layer_compute_dtype(layer.params))
    return {n: narrowest(d) for n, d in readers.items()}
