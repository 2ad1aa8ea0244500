"""Regenerate the ``keras.ops`` configs (``api_configs/ops/<op>.yaml``) from the installed Keras.

    PYTHONPATH=. KERAS_BACKEND=jax python api_configs/ops/make_op_configs.py [--check]

Every public function of ``keras.ops`` (and of ``keras.ops.image`` / ``linalg``, which are
not re-exported at the top) is read from the installed Keras: its signature, default values
and defining module.  What a signature says is generated: a positional argument without a
default is a tensor (``x``, ``x1``, ``a``...) unless its name says otherwise; ``axis`` is an
axis within the first tensor's rank; a keyword with a bool default is a bool, with an int or
float default a number around it, ``dtype`` one of the tensor dtypes.

What a signature cannot say is written here by hand, in ``FAMILIES`` (the tensors' dtypes
and shape rules per kind of op: which ops are elementwise on floats, which are bitwise on
integers, which reduce) and ``HAND`` (one op's arguments, a value range, a coupled draw
``derive``, or what its contract leaves undefined).  Functions neither generated nor hand
written are listed in ``README.md`` with the reason (``EXCLUDED`` below writes that list);
``audee apis --ops --coverage`` shows both.  ``--check`` writes nothing and fails when a
file would change (the test suite runs it against the installed Keras).
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent

FLOATS = ["float32", "float16", "bfloat16"]
NUM = FLOATS + ["int32"]            # float math: Keras promotes an int input to a float result
ALL = NUM + ["bool"]
INTS = ["int32", "int8", "uint8", "int16"]
RANKS = [0, 1, 2, 3, 4]
R1 = [1, 2, 3, 4]

# ---- families: the hand knowledge shared by many ops ------------------------------------------------
UNARY_FLOAT = """abs absolute arccos arccosh arcsin arcsinh arctan arctanh cbrt ceil cos cosh deg2rad exp exp2
expm1 fabs floor log log10 log1p log2 negative rad2deg reciprocal sign sin sinc sinh sqrt square tan tanh trunc
i0 erf erfc erfinv rsqrt isfinite isinf isnan isneginf isposinf signbit copy ravel conj conjugate real imag
angle isreal relu relu6 sigmoid silu softplus softsign selu hard_sigmoid hard_silu hard_tanh log_sigmoid
sparse_plus sparse_sigmoid tanh_shrink stop_gradient size ndim ones_like zeros_like nan_to_num round gelu elu
celu leaky_relu squareplus hard_shrink soft_shrink full_like swish hard_swish silu threshold""".split()
UNARY_ANY = "logical_not".split()
UNARY_INT = "bitwise_invert bitwise_not".split()
BINARY = """add subtract multiply divide true_divide divide_no_nan floor_divide mod fmod power maximum minimum
fmax fmin arctan2 hypot logaddexp logaddexp2 heaviside nextafter equal not_equal greater greater_equal less
less_equal isclose allclose""".split()
BINARY_BOOL = "logical_and logical_or logical_xor".split()
BINARY_INT = "bitwise_and bitwise_or bitwise_xor gcd lcm".split()
SHIFTS = "left_shift right_shift bitwise_left_shift bitwise_right_shift".split()
REDUCE = """all any amax amin max min mean median prod std sum var nanmax nanmean nanmedian nanmin nanprod nanstd
nansum nanvar ptp count_nonzero logsumexp average""".split()
ARG_REDUCE = "argmax argmin nanargmax nanargmin".split()
ALONG_AXIS = """cumsum cumprod nancumsum nancumprod sort argsort softmax log_softmax sparsemax normalize flip
diff""".split()
WINDOWS = "bartlett blackman hamming hanning kaiser".split()

# ---- the dtype contract: what Keras's own dtype tests assert ---------------------------------------
# keras/src/ops/*_test.py, the *DtypeTest classes (keras-team/keras@3422977, August 2026): the numpy
# and core functions are tested on every dtype (integers and bool promote as in NumPy); the nn, math,
# image and linalg functions on floats only, except the math functions below.  A dtype a family
# draws outside that contract stays drawable only as the case's one crafty invalid value (the
# tensor's ``invalid``): a difference there is ``undefined``, not a bug (docs/ops.md).
FLOAT_CONTRACT = ("op.nn", "op.math", "op.image", "op.linalg")
INT_TESTED = ("cdist", "gammainc")            # math functions Keras tests on integers too
INT_CONTRACT = ("bitwise_invert", "bitwise_not")  # tested on integers only (bool is logical_not's)

#: where an op's gradient is undefined (audee/oracle/opgrad.py, docs/ops.md "Gradients"): not
#: differentiable at 0 (each framework answers its own subgradient there: abs at 0 is 0 on
#: TensorFlow and torch, 1 on JAX; selu and leaky_relu at 0 take one slope here, the other there;
#: norm and hypot at the origin are NaN on some, 0 on others; cbrt's slope at 0 is infinite: inf on
#: JAX, NaN on the others), or a selection among tied values (which of them gets the cotangent:
#: maximum(x, x) gives it all to x1 on TensorFlow, half to each on torch and JAX).  Not celu: it is
#: differentiable at 0 (both slopes are 1), so a gradient that differs there is a finding.
GRADIENT_KINKS: dict[str, list[str]] = {
    **{op: ["gradient_at_zero"] for op in ("abs", "absolute", "fabs", "norm", "hypot", "relu", "relu6", "leaky_relu",
                                           "elu", "selu", "sign", "cbrt")},
    **{op: ["gradient_at_ties"] for op in ("max", "min", "amax", "amin", "ptp", "nanmax", "nanmin", "maximum",
                                           "minimum", "fmax", "fmin", "sort", "top_k", "median", "nanmedian",
                                           "segment_max", "segment_min")},
}

# ---- domains: where an op's tensor is defined (the edges special values reach: docs/mutation.md) ----
#: per op, the domain of each tensor argument in order (None: all reals, or not said); written
#: as intervals, ``[`` / ``]`` including a bound; a divisor's domain leaves out 0
NONZERO = "(-inf, 0) | (0, inf)"
DOMAINS: dict[str, list[str | None]] = {
    **{op: ["(0, inf)"] for op in ("log", "log2", "log10", "rsqrt")},
    "log1p": ["(-1, inf)"], "sqrt": ["[0, inf)"], "arccos": ["[-1, 1]"], "arcsin": ["[-1, 1]"],
    "arccosh": ["[1, inf)"], "arctanh": ["(-1, 1)"], "erfinv": ["[-1, 1]"], "reciprocal": [NONZERO],
    **{op: [None, NONZERO] for op in ("divide", "true_divide", "divide_no_nan", "floor_divide", "mod", "fmod")},
}

#: one op's hand-written config: merged over what its family and signature gave
HAND: dict[str, dict[str, Any]] = {
    # arguments with a meaning a signature cannot say
    "clip": {"args": {"x": {"type": "tensor", "dtypes": NUM}, "x_min": {"type": "float", "range": [-3.0, 0.0]},
                      "x_max": {"type": "float", "range": [0.0, 3.0], "invalid": [-5.0]}}},
    "threshold": {"args": {"x": {"type": "tensor", "dtypes": FLOATS},
                           "threshold": {"type": "float", "range": [-2.0, 2.0]},
                           "default_value": {"type": "float", "range": [-1.0, 1.0]}}},
    "full_like": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "fill_value": {"type": "float", "range": [-5, 5]}}},
    "kaiser": {"args": {"x": {"type": "int", "range": [1, 16], "invalid": [0, -3]},
                        "beta": {"type": "float", "range": [0.0, 14.0]}}},
    "ldexp": {"args": {"x1": {"type": "tensor", "dtypes": FLOATS},
                       "x2": {"type": "tensor", "dtypes": ["int32"], "shape": "broadcast", "range": [-8, 8]}}},
    "where": {"args": {"condition": {"type": "tensor", "dtypes": ["bool"]},
                       "x1": {"type": "tensor", "dtypes": ALL, "shape": "broadcast"},
                       "x2": {"type": "tensor", "shape": "broadcast"}}},
    "matmul": {"args": {"x1": {"type": "tensor", "dtypes": NUM}, "x2": {"type": "tensor", "shape": "matmul"}},
               "ranks": R1},
    "dot": {"args": {"x1": {"type": "tensor", "dtypes": NUM}, "x2": {"type": "tensor", "shape": "matmul"}},
            "ranks": [1, 2]},
    "inner": {"args": {"x1": {"type": "tensor", "dtypes": NUM}, "x2": {"type": "tensor", "shape": "last"}},
              "ranks": R1},
    "vdot": {"args": {"x1": {"type": "tensor", "dtypes": NUM}, "x2": {"type": "tensor", "shape": "same"}},
             "ranks": [1, 2]},
    "outer": {"args": {"x1": {"type": "tensor", "dtypes": NUM}, "x2": {"type": "tensor", "shape": "vector"}},
              "ranks": [1, 2]},
    "kron": {"args": {"x1": {"type": "tensor", "dtypes": NUM}, "x2": {"type": "tensor", "shape": "free"}},
             "ranks": [1, 2]},
    "cdist": {"args": {"x": {"type": "tensor", "dtypes": FLOATS}, "y": {"type": "tensor", "shape": "last"}},
              "ranks": [2, 3]},
    "isin": {"args": {"x1": {"type": "tensor", "dtypes": ["int32", "float32"], "range": [-4, 4]},
                      "x2": {"type": "tensor", "shape": "vector", "range": [-4, 4]}}},
    "correlate": {"args": {"x1": {"type": "tensor", "dtypes": ["float32", "int32"], "shape": "vector"},
                           "x2": {"type": "tensor", "shape": "vector"}},
                  "params": {"mode": {"type": "str", "values": ["valid", "same", "full"], "invalid": ["wide"]}}},
    "corrcoef": {"args": {"x": {"type": "tensor", "dtypes": ["float32", "float16"]}}, "ranks": [1, 2]},
    "vander": {"args": {"x": {"type": "tensor", "dtypes": ["float32", "int32"], "shape": "vector",
                              "range": [-3, 3]}},
               "params": {"N": {"type": "int", "range": [1, 6], "nullable": True, "invalid": [-1]},
                          "increasing": {"type": "bool"}}},
    "trapezoid": {"args": {"y": {"type": "tensor", "dtypes": NUM}},
                  "params": {"x": {"skip": "sample points: dx covers the spacing"},
                             "dx": {"type": "float", "range": [0.1, 2.0]}, "axis": {"type": "axis"}},
                  "ranks": R1},
    "nan_to_num": {"params": {"nan": {"type": "float", "range": [-1.0, 1.0]},
                              "posinf": {"type": "float", "range": [1.0, 100.0], "nullable": True},
                              "neginf": {"type": "float", "range": [-100.0, -1.0], "nullable": True}}},
    "round": {"params": {"decimals": {"type": "int", "range": [-1, 3]}}},
    # creation: no tensor in, shapes and numbers
    "eye": {"args": {"N": {"type": "int", "range": [1, 6], "invalid": [-1]}},
            "params": {"M": {"type": "int", "range": [1, 6], "nullable": True}, "k": {"type": "int", "range": [-3, 3]},
                       "dtype": {"type": "str", "values": ALL, "nullable": True}}},
    "identity": {"args": {"n": {"type": "int", "range": [1, 6], "invalid": [-2]}},
                 "params": {"dtype": {"type": "str", "values": ALL, "nullable": True}}},
    "tri": {"args": {"N": {"type": "int", "range": [1, 6], "invalid": [-1]}},
            "params": {"M": {"type": "int", "range": [1, 6], "nullable": True}, "k": {"type": "int", "range": [-3, 3]},
                       "dtype": {"type": "str", "values": ALL, "nullable": True}}},
    "arange": {"args": {"start": {"type": "float", "range": [-5.0, 5.0]}},
               "params": {"stop": {"type": "float", "range": [5.5, 12.0], "nullable": True},
                          "step": {"type": "float", "range": [0.25, 2.0], "nullable": True, "invalid": [0.0]},
                          # float bounds with an integer dtype: NumPy documents "unexpected behaviour"
                          "dtype": {"type": "str", "values": ["float32"], "nullable": True, "invalid": ["int32"]}}},
    "linspace": {"args": {"start": {"type": "float", "range": [-5.0, 5.0]},
                          "stop": {"type": "float", "range": [-5.0, 12.0]}},
                 "params": {"num": {"type": "int", "range": [0, 12], "invalid": [-1]}, "endpoint": {"type": "bool"},
                            "retstep": {"skip": "returns the step as a Python float on some backends"},
                            "dtype": {"type": "str", "values": FLOATS, "nullable": True},
                            "axis": {"skip": "the output of scalar start and stop has one axis"}}},
    "logspace": {"args": {"start": {"type": "float", "range": [-3.0, 3.0]},
                          "stop": {"type": "float", "range": [-3.0, 3.0]}},
                 "params": {"num": {"type": "int", "range": [0, 12], "invalid": [-1]}, "endpoint": {"type": "bool"},
                            "base": {"type": "float", "range": [0.5, 10.0]},
                            "dtype": {"type": "str", "values": FLOATS, "nullable": True},
                            "axis": {"skip": "the output of scalar start and stop has one axis"}}},
    "geomspace": {"args": {"start": {"type": "float", "range": [0.1, 5.0]},
                           "stop": {"type": "float", "range": [0.1, 50.0]}},
                  "params": {"num": {"type": "int", "range": [0, 12], "invalid": [-1]}, "endpoint": {"type": "bool"},
                             "dtype": {"type": "str", "values": FLOATS, "nullable": True},
                             "axis": {"skip": "the output of scalar start and stop has one axis"}}},
    "zeros": {"args": {"shape": {"type": "int", "values": [[0], [3], [2, 3], [1, 4, 2]], "dims": 2, "invalid": [-1]}},
              "params": {"dtype": {"type": "str", "values": ALL, "nullable": True}}},
    "ones": {"args": {"shape": {"type": "int", "values": [[0], [3], [2, 3], [1, 4, 2]], "dims": 2, "invalid": [-1]}},
             "params": {"dtype": {"type": "str", "values": ALL, "nullable": True}}},
    "full": {"args": {"shape": {"type": "int", "values": [[0], [3], [2, 3], [1, 4, 2]], "dims": 2, "invalid": [-1]},
                      "fill_value": {"type": "float", "range": [-5.0, 5.0]}},
             "params": {"dtype": {"type": "str", "values": ALL, "nullable": True}}},
    # shapes and axes
    "transpose": {"params": {"axes": {"skip": "a permutation of the rank: drawn as None (reverse)"}}},
    "expand_dims": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "axis": {"type": "axis", "invalid": [7]}}},
    "squeeze": {"params": {"axis": {"type": "axis", "nullable": True}}, "derive": "unit_axis"},
    "moveaxis": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "source": {"type": "axis"},
                          "destination": {"type": "axis"}}, "ranks": R1},
    "swapaxes": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "axis1": {"type": "axis"},
                          "axis2": {"type": "axis"}}, "ranks": R1},
    "roll": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "shift": {"type": "int", "range": [-7, 7]}},
             "params": {"axis": {"type": "axis", "nullable": True}}},
    "repeat": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "repeats": {"type": "int", "range": [0, 3],
                                                                             "invalid": [-1]}},
               "params": {"axis": {"type": "axis", "nullable": True}}},
    "tile": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "repeats": {"type": "int", "range": [0, 3],
                                                                           "invalid": [-1]}}},
    "rot90": {"args": {"array": {"type": "tensor", "dtypes": ALL}},
              "params": {"k": {"type": "int", "range": [-3, 5]},
                         "axes": {"type": "int", "values": [[0, 1], [1, 0]], "invalid": [[0, 0]]}},
              "ranks": [2, 3, 4]},
    "tril": {"params": {"k": {"type": "int", "range": [-3, 3]}}, "ranks": [2, 3, 4]},
    "triu": {"params": {"k": {"type": "int", "range": [-3, 3]}}, "ranks": [2, 3, 4]},
    "diag": {"params": {"k": {"type": "int", "range": [-3, 3]}}, "ranks": [1, 2]},
    "diagflat": {"params": {"k": {"type": "int", "range": [-3, 3]}}, "ranks": [1, 2]},
    "diagonal": {"params": {"offset": {"type": "int", "range": [-3, 3]}, "axis1": {"type": "axis"},
                            "axis2": {"type": "axis"}}, "ranks": [2, 3, 4], "distinct": ["axis1", "axis2"]},
    "trace": {"params": {"offset": {"type": "int", "range": [-3, 3]}, "axis1": {"type": "axis"},
                         "axis2": {"type": "axis"}}, "ranks": [2, 3, 4], "distinct": ["axis1", "axis2"]},
    "fliplr": {"ranks": [2, 3, 4]},
    "flipud": {"ranks": R1},
    "diff": {"params": {"n": {"type": "int", "range": [0, 3], "invalid": [-1]}, "axis": {"type": "axis"}},
             "ranks": R1},
    "stack": {"args": {"x": {"type": "tensors", "dtypes": ALL, "shape": "same", "count": [1, 4]}},
              "params": {"axis": {"type": "axis"}}},
    "concatenate": {"args": {"xs": {"type": "tensors", "dtypes": ALL, "shape": "same", "count": [1, 4]}},
                    "params": {"axis": {"type": "axis"}}, "ranks": R1},
    "hstack": {"args": {"xs": {"type": "tensors", "dtypes": ALL, "shape": "same", "count": [1, 4]}}, "ranks": R1},
    "vstack": {"args": {"xs": {"type": "tensors", "dtypes": ALL, "shape": "same", "count": [1, 4]}}, "ranks": R1},
    "dstack": {"args": {"xs": {"type": "tensors", "dtypes": ALL, "shape": "same", "count": [1, 4]}}, "ranks": R1},
    "meshgrid": {"args": {"x": {"type": "tensors", "dtypes": NUM, "shape": "vector", "count": [1, 3],
                                "spread": True}},
                 "params": {"indexing": {"type": "str", "values": ["xy", "ij"], "invalid": ["yx"]}}, "ranks": [1]},
    "append": {"args": {"x1": {"type": "tensor", "dtypes": ALL}, "x2": {"type": "tensor", "shape": "same"}},
               "params": {"axis": {"type": "axis", "nullable": True}}, "ranks": R1},
    "unstack": {"params": {"num": {"skip": "the size of the axis: inferred"}, "axis": {"type": "axis"}}, "ranks": R1},
    "nonzero": {"ranks": R1},
    "unique": {"params": {"sorted": {"skip": "unsorted order is the backend's own (undefined)"},
                          "return_index": {"skip": "which duplicate's index: undefined"},
                          "return_inverse": {"type": "bool"}, "return_counts": {"type": "bool"},
                          "axis": {"skip": "whole-array uniqueness only"},
                          "size": {"skip": "a static size is a JAX tracing aid"},
                          "fill_value": {"skip": "goes with size"}},
               "ranks": [1, 2]},
    "take": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "indices": {"type": "tensor", "shape": "index",
                                                                          "dtypes": ["int32"]}},
             "params": {"axis": {"type": "axis", "nullable": True}}, "derive": "index_axis", "ranks": R1},
    "take_along_axis": {"args": {"x": {"type": "tensor", "dtypes": ALL},
                                 "indices": {"type": "tensor", "shape": "same", "dtypes": ["int32"]}},
                        "params": {"axis": {"type": "axis"}}, "derive": "index_axis", "ranks": R1},
    "reshape": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "newshape": {"type": "int", "mutable": False}},
                "derive": "reshape"},
    "broadcast_to": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "shape": {"type": "int", "mutable": False}},
                     "derive": "broadcast_to"},
    "top_k": {"args": {"x": {"type": "tensor", "dtypes": NUM}, "k": {"type": "int", "mutable": False}},
              "params": {"sorted": {"skip": "sorted=False leaves the order undefined: the default (True) is kept"}},
              "derive": "top_k", "undefined": ["tie_indices"], "ranks": R1},
    "one_hot": {"args": {"x": {"type": "tensor", "dtypes": ["int32"], "range": [0, 6]},
                         "num_classes": {"type": "int", "range": [1, 8], "invalid": [0]}},
                "params": {"axis": {"type": "axis"}, "dtype": {"type": "str", "values": ALL, "nullable": True},
                           "sparse": {"skip": "sparse tensors are not compared"}},
                "derive": "class_ids"},
    "multi_hot": {"args": {"inputs": {"type": "tensor", "dtypes": ["int32"], "range": [0, 6]}},
                  "params": {"num_classes": {"type": "int", "range": [6, 8]}, "axis": {"type": "axis"},
                             "dtype": {"type": "str", "values": FLOATS + ["int32"], "nullable": True},
                             "sparse": {"skip": "sparse tensors are not compared"}},
                  "ranks": [1, 2]},
    "segment_sum": {"args": {"data": {"type": "tensor", "dtypes": NUM},
                             "segment_ids": {"type": "tensor", "shape": "index", "dtypes": ["int32"]}},
                    "params": {"num_segments": {"type": "int", "mutable": False}, "sorted": {"type": "bool"}},
                    "derive": "segments", "ranks": R1},
    "cast": {"args": {"x": {"type": "tensor", "dtypes": ALL}, "dtype": {"type": "str", "values": ALL}}},
    "saturate_cast": {"args": {"x": {"type": "tensor", "dtypes": ALL, "range": [-300, 300]},
                               "dtype": {"type": "str", "values": ALL + ["int8", "uint8"]}}},
    "searchsorted": {"args": {"sorted_sequence": {"type": "tensor", "dtypes": ["float32", "int32"],
                                                  "shape": "vector"},
                              "values": {"type": "tensor", "shape": "free"}},
                     "params": {"side": {"type": "str", "values": ["left", "right"], "invalid": ["middle"]}},
                     "derive": "sorted_first"},
    "digitize": {"args": {"x": {"type": "tensor", "dtypes": ["float32", "int32"]},
                          "bins": {"type": "tensor", "shape": "vector"}}, "derive": "sorted_bins"},
    "bincount": {"args": {"x": {"type": "tensor", "dtypes": ["int32"], "shape": "vector", "range": [0, 8]}},
                 "params": {"weights": {"skip": "weights per element: drawn as None"},
                            "minlength": {"type": "int", "range": [0, 10], "invalid": [-1]},
                            "sparse": {"skip": "sparse tensors are not compared"}}, "ranks": [1]},
    "histogram": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "vector"}},
                  "params": {"bins": {"type": "int", "range": [1, 12], "invalid": [0]},
                             "range": {"skip": "the data's own range"}}, "ranks": [1]},
    "psnr": {"args": {"x1": {"type": "tensor", "dtypes": FLOATS, "range": [0, 1]},
                      "x2": {"type": "tensor", "shape": "same", "range": [0, 1]},
                      "max_val": {"type": "float", "range": [0.5, 2.0]}}, "ranks": R1},
    "polar": {"args": {"abs_": {"type": "tensor", "dtypes": ["float32"], "range": [0, 3]},
                       "angle": {"type": "tensor", "shape": "same"}}},
    "binary_crossentropy": {"args": {"target": {"type": "tensor", "dtypes": FLOATS, "range": [0, 1]},
                                     "output": {"type": "tensor", "shape": "same", "range": [0, 1]}},
                            "params": {"from_logits": {"type": "bool"}}, "ranks": R1},
    "categorical_crossentropy": {"args": {"target": {"type": "tensor", "dtypes": FLOATS, "range": [0, 1]},
                                          "output": {"type": "tensor", "shape": "same", "range": [0, 1]}},
                                 "params": {"from_logits": {"type": "bool"}, "axis": {"type": "axis"}},
                                 "ranks": R1},
    "glu": {"params": {"axis": {"type": "axis"}}, "derive": "even_axis", "ranks": R1},
    "batch_normalization": {"args": {"x": {"type": "tensor", "dtypes": FLOATS},
                                     "mean": {"type": "tensor", "shape": "last"},
                                     "variance": {"type": "tensor", "shape": "last", "range": [0.1, 2.0]},
                                     "axis": {"type": "int", "values": [-1]}},
                            "params": {"offset": {"skip": "an optional shift: drawn as None"},
                                       "scale": {"skip": "an optional scale: drawn as None"},
                                       "epsilon": {"type": "float", "range": [0.0, 0.01]}},
                            "derive": "channel_vectors", "ranks": [2, 3, 4]},
    "layer_normalization": {"params": {"gamma": {"skip": "optional scale: drawn as None"},
                                       "beta": {"skip": "optional shift: drawn as None"},
                                       "axis": {"type": "axis"},
                                       "epsilon": {"type": "float", "range": [1.0e-6, 0.01], "nullable": True}},
                            "ranks": R1},
    "rms_normalization": {"params": {"scale": {"skip": "optional scale: drawn as None"}, "axis": {"type": "axis"},
                                     "epsilon": {"type": "float", "range": [1.0e-6, 0.01], "nullable": True}},
                          "ranks": R1},
    "moments": {"args": {"x": {"type": "tensor", "dtypes": FLOATS}, "axes": {"type": "axis"}},
                "params": {"keepdims": {"type": "bool"},
                           "synchronized": {"skip": "distributed training only"}}, "ranks": R1},
    # keras.ops.logdet: "the determinant of a hermitian positive definite matrix" (the contract)
    "logdet": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}}, "derive": "spd",
               "ranks": [2, 3]},
    # an integer to a negative integer power is undefined (numpy refuses it): exponents from 0
    "power": {"args": {"x1": {"type": "tensor", "dtypes": NUM, "range": [-4, 4]},
                       "x2": {"type": "tensor", "shape": "broadcast", "range": [0, 4]}}},
    "slogdet": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}}, "ranks": [2, 3]},
    "det": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}}, "ranks": [2, 3]},
    "inv": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}}, "ranks": [2, 3]},
    "pinv": {"args": {"x": {"type": "tensor", "dtypes": ["float32"]}},
                    "params": {"rcond": {"type": "float", "range": [1.0e-7, 1.0e-3], "nullable": True}},
                    "ranks": [2, 3]},
    "matrix_rank": {"args": {"x": {"type": "tensor", "dtypes": ["float32"]}},
                           "params": {"tol": {"type": "float", "range": [1.0e-6, 0.1], "nullable": True}},
                           "ranks": [2, 3]},
    "cholesky": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}},
                        "params": {"upper": {"type": "bool"}}, "derive": "spd", "ranks": [2, 3]},
    "cholesky_inverse": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}},
                                "params": {"upper": {"type": "bool"}}, "derive": "triangular", "ranks": [2, 3]},
    "solve": {"args": {"a": {"type": "tensor", "dtypes": ["float32"], "shape": "square"},
                              "b": {"type": "tensor", "shape": "matmul"}}, "ranks": [2, 3]},
    "solve_triangular": {"args": {"a": {"type": "tensor", "dtypes": ["float32"], "shape": "square"},
                                         "b": {"type": "tensor", "shape": "matmul"}},
                                "params": {"lower": {"type": "bool"}}, "derive": "triangular", "ranks": [2, 3]},
    "lstsq": {"args": {"a": {"type": "tensor", "dtypes": ["float32"]}, "b": {"type": "tensor",
                                                                                      "shape": "matmul"}},
                     "params": {"rcond": {"skip": "the default cutoff: backends document the same"}},
                     "derive": "lstsq", "ranks": [2]},
    "norm": {"args": {"x": {"type": "tensor", "dtypes": FLOATS}},
                    "params": {"ord": {"type": "str", "values": ["fro"], "nullable": True, "invalid": ["nuc2"]},
                               "axis": {"skip": "vector and matrix norms over every axis (None)"},
                               "keepdims": {"type": "bool"}}, "ranks": [1, 2]},
    "svd": {"args": {"x": {"type": "tensor", "dtypes": ["float32"]}},
                   "params": {"full_matrices": {"type": "bool"},
                              "compute_uv": {"type": "bool", "values": [False],
                                             "note": "singular vectors are defined up to sign: compared only without"}},
                   "derive": "no_uv", "ranks": [2, 3]},
    "eigh": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}},
                    "derive": "symmetric", "undefined": ["values"], "ranks": [2, 3]},
    "qr": {"args": {"x": {"type": "tensor", "dtypes": ["float32"]}},
                  "params": {"mode": {"type": "str", "values": ["reduced", "complete"], "invalid": ["economic"]}},
                  "undefined": ["values"], "ranks": [2, 3]},
    "lu_factor": {"args": {"x": {"type": "tensor", "dtypes": ["float32"], "shape": "square"}},
                         "undefined": ["values"], "ranks": [2, 3]},
    "fft": {"args": {"x": {"type": "tensors", "dtypes": ["float32"], "shape": "same", "count": [2, 2]}},
            "ranks": R1},
    "fft2": {"args": {"x": {"type": "tensors", "dtypes": ["float32"], "shape": "same", "count": [2, 2]}},
             "ranks": [2, 3]},
    "ifft2": {"args": {"x": {"type": "tensors", "dtypes": ["float32"], "shape": "same", "count": [2, 2]}},
              "ranks": [2, 3]},
    "rfft": {"args": {"x": {"type": "tensor", "dtypes": ["float32"]}},
             "params": {"fft_length": {"type": "int", "range": [1, 8], "nullable": True, "invalid": [0]}},
             "ranks": R1},
    "extract_sequences": {"args": {"x": {"type": "tensor", "dtypes": FLOATS},
                                   "sequence_length": {"type": "int", "range": [1, 4], "invalid": [0]},
                                   "sequence_stride": {"type": "int", "range": [1, 3], "invalid": [0]}},
                          "derive": "long_last", "ranks": [1, 2]},
    "image.rgb_to_grayscale": {"args": {"images": {"type": "tensor", "dtypes": FLOATS, "range": [0, 1]}},
                               "params": {"data_format": {"type": "str", "values": ["channels_last"],
                                                          "nullable": True}},
                               "derive": "rgb", "ranks": [3, 4]},
    "image.rgb_to_hsv": {"args": {"images": {"type": "tensor", "dtypes": FLOATS, "range": [0, 1]}},
                         "params": {"data_format": {"type": "str", "values": ["channels_last"], "nullable": True}},
                         "derive": "rgb", "ranks": [3, 4]},
    "image.hsv_to_rgb": {"args": {"images": {"type": "tensor", "dtypes": FLOATS, "range": [0, 1]}},
                         "params": {"data_format": {"type": "str", "values": ["channels_last"], "nullable": True}},
                         "derive": "rgb", "ranks": [3, 4]},
    "image.sobel_edges": {"args": {"images": {"type": "tensor", "dtypes": FLOATS}},
                          "params": {"data_format": {"type": "str", "values": ["channels_last"], "nullable": True}},
                          "ranks": [4]},
    "image.resize": {"args": {"images": {"type": "tensor", "dtypes": FLOATS},
                              "size": {"type": "int", "values": [[1, 1], [2, 3], [4, 4], [7, 5], [3, 9], [9, 9]],
                                       "dims": 2, "invalid": [0]}},
                     # the docstring names nearest, bilinear, bicubic; the Resizing layer adds lanczos3/5;
                     # "area" is the TF backend's alone (torch and JAX refuse it): outside the contract
                     "params": {"interpolation": {"type": "str", "values": ["bilinear", "nearest", "bicubic",
                                                                            "lanczos3", "lanczos5"],
                                                  "invalid": ["trilinear", "area"]},
                                "antialias": {"type": "bool"},
                                "crop_to_aspect_ratio": {"type": "bool"}, "pad_to_aspect_ratio": {"type": "bool"},
                                "fill_mode": {"type": "str", "values": ["constant"]},
                                "fill_value": {"type": "float", "range": [0.0, 1.0]},
                                "data_format": {"type": "str", "values": ["channels_last"], "nullable": True}},
                     "ranks": [3, 4]},
}
HAND["segment_prod"] = HAND["segment_sum"]
# the fill of a segment no id maps to is each framework's own (TF: the dtype's lowest or highest
# finite value, torch and JAX: -inf / +inf) and Keras's docstring is silent: not compared
HAND["segment_max"] = HAND["segment_min"] = {**HAND["segment_sum"], "undefined": ["empty_segments"]}
HAND["nansum"] = {}

#: functions with no config, and why (README.md's Excluded section is written from this)
EXCLUDED: dict[str, list[str]] = {
    "take a Python function (code, which no case file may carry)": [
        "associative_scan", "cond", "custom_gradient", "fori_loop", "map", "scan", "switch", "vectorized_map",
        "while_loop", "vectorize", "jvp"],
    "framework plumbing (type tests and conversions, no computation to compare)": [
        "convert_to_numpy", "convert_to_tensor", "is_tensor", "dtype", "shape", "array", "view"],
    "uninitialized or random results (backends cannot agree by design)": [
        "empty", "empty_like", "image.elastic_transform"],
    "string patterns (einsum subscripts, einops): a grammar of their own, left for a later issue": [
        "einsum", "rearrange"],
    "complex views, audio framing and CTC (complex dtypes and sequence lengths; left for a later issue)": [
        "view_as_complex", "view_as_real", "stft", "istft", "irfft", "ctc_decode", "ctc_loss"],
    "coupled shape arguments not yet drawn (a derive rule per op is left for a later issue)": [
        "array_split", "split", "hsplit", "vsplit", "dsplit", "pad", "select", "slice", "slice_update",
        "scatter", "scatter_update", "get_item", "unravel_index", "in_top_k", "argpartition", "tensordot",
        "cross", "quantile", "percentile", "nanquantile", "nanpercentile", "sparse_categorical_crossentropy",
        "conv", "conv_transpose", "depthwise_conv", "separable_conv", "max_pool", "average_pool",
        "adaptive_average_pool", "adaptive_max_pool", "depth_to_space", "space_to_depth", "dot_product_attention",
        "fold", "unfold", "eig", "image.affine_transform", "image.crop_images", "image.pad_images",
        "image.extract_patches", "image.extract_patches_3d", "image.gaussian_blur", "image.map_coordinates",
        "image.perspective_transform", "image.scale_and_translate", "image.ssim"],
}

TENSOR_NAMES = {"x", "x1", "x2", "a", "b", "y", "inputs", "images", "data", "variable", "target", "output",
                "condition", "abs_", "angle", "array", "elems"}


def op_functions() -> dict[str, Any]:
    """Every public ``keras.ops`` function by op name (audee's one listing of them)."""
    from audee.apis.coverage import keras_op_functions

    return keras_op_functions()


def category(f: Any) -> str:
    mod = getattr(f, "__module__", "") or ""
    return "op." + mod.rsplit(".", 1)[-1] if mod.startswith("keras.src.ops.") else "op.core"


def family(name: str) -> dict[str, Any] | None:
    """The family config of ``name`` (tensors' dtypes, ranks, undefined parts), None if none."""
    short = name.split(".")[-1]
    x = {"type": "tensor", "dtypes": NUM}
    if short in UNARY_FLOAT:
        return {"first": x, "ranks": RANKS}
    if short in UNARY_ANY:
        return {"first": {"type": "tensor", "dtypes": ALL}, "ranks": RANKS}
    if short in UNARY_INT:
        return {"first": {"type": "tensor", "dtypes": INTS + ["bool"]}, "ranks": RANKS}
    if short in BINARY:
        return {"first": {"type": "tensor", "dtypes": NUM}, "second": {"type": "tensor", "shape": "broadcast"},
                "ranks": RANKS}
    if short in BINARY_BOOL:
        return {"first": {"type": "tensor", "dtypes": ["bool"] + NUM}, "second": {"type": "tensor",
                                                                                   "shape": "broadcast"},
                "ranks": RANKS}
    if short in BINARY_INT:
        return {"first": {"type": "tensor", "dtypes": INTS}, "second": {"type": "tensor", "shape": "broadcast"},
                "ranks": RANKS}
    if short in SHIFTS:
        return {"first": {"type": "tensor", "dtypes": INTS, "range": [0, 64]},
                "second": {"type": "tensor", "shape": "broadcast", "range": [0, 8]}, "ranks": RANKS}
    if short in REDUCE:
        return {"first": {"type": "tensor", "dtypes": ALL if short in ("all", "any", "count_nonzero") else NUM},
                "ranks": RANKS}
    if short in ARG_REDUCE:
        return {"first": x, "ranks": RANKS, "undefined": ["tie_indices"]}
    if short in ALONG_AXIS:
        return {"first": x, "ranks": R1, "undefined": ["tie_indices"] if short == "argsort" else []}
    if short in WINDOWS:
        return {"first": {"type": "int", "range": [1, 16], "invalid": [0, -3]}, "ranks": []}
    return None


def number(default: Any) -> dict[str, Any]:
    if isinstance(default, bool):
        return {"type": "bool"}
    if isinstance(default, int):
        lo, hi = (0, 4) if default >= 0 else (-4, 0)
        return {"type": "int", "range": [min(lo, default), max(hi, default)]}
    span = abs(default) or 1.0
    return {"type": "float", "range": [0.0 if default >= 0 else -2 * span, 2 * span if default >= 0 else 0.0]}


def generate(name: str, f: Any) -> dict[str, Any] | None:
    """The config of op ``name`` from its signature, its family and ``HAND``; None when it
    has neither a family nor a hand config (then it is in ``EXCLUDED``)."""
    hand = HAND.get(name)
    fam = family(name)
    if fam is None and hand is None:
        return None
    fam = fam or {}
    hand = hand or {}
    sig = inspect.signature(f)
    args: dict[str, Any] = {}
    params: dict[str, Any] = {}
    first = True
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is p.empty:
            if first:
                args[pname] = dict(fam.get("first", {"type": "tensor", "dtypes": NUM}))
                first = False
            elif "second" in fam:
                args[pname] = dict(fam["second"])
            elif pname == "axis":
                args[pname] = {"type": "axis"}
            elif pname in TENSOR_NAMES:
                args[pname] = {"type": "tensor", "shape": "same"}
            else:
                args[pname] = {"skip": "no rule for this argument: see make_op_configs.HAND"}
            continue
        d = p.default
        if pname == "axis":
            params[pname] = {"type": "axis", **({"nullable": True} if d is None else {})}
        elif pname == "keepdims" or isinstance(d, bool):
            params[pname] = {"type": "bool"}
        elif pname == "dtype":
            params[pname] = {"type": "str", "values": FLOATS + ["int32"], "nullable": True}
        elif isinstance(d, (int, float)):
            params[pname] = number(d)
        elif pname in ("sparse", "ragged"):
            params[pname] = {"skip": "sparse and ragged tensors are not compared"}
        else:
            params[pname] = {"skip": f"default {d!r} kept: no rule to draw it (make_op_configs.HAND)"}
    args.update(hand.get("args", {}))
    for k in hand.get("args", {}):  # a keyword the hand config passes positionally (where's x1, x2)
        params.pop(k, None)
    for k, v in hand.get("params", {}).items():
        params[k] = v
    if any(a.get("skip") for a in args.values()):
        return None  # a positional argument we cannot draw: the op cannot be called
    cfg: dict[str, Any] = {"api": name, "category": category(f)}
    args = {n: with_float64(contract(name, cfg["category"], a)) for n, a in args.items()}
    tensors = [n for n, a in args.items() if a.get("type") in ("tensor", "tensors")]
    for n, dom in zip(tensors, DOMAINS.get(name, [])):
        if dom:
            args[n] = {**args[n], "domain": dom}
    ranks = hand.get("ranks", fam.get("ranks", RANKS))
    if ranks and any(a.get("type") in ("tensor", "tensors") for a in args.values()):
        cfg["ranks"] = ranks
    cfg["args"] = args
    if params:
        cfg["params"] = params
    if hand.get("derive"):
        cfg["derive"] = hand["derive"]
    undefined = hand.get("undefined", fam.get("undefined", [])) + GRADIENT_KINKS.get(name, [])
    if undefined:
        cfg["undefined"] = undefined
    if hand.get("distinct"):  # axis arguments that must name different axes (drawn equal: outside the contract)
        cfg["distinct"] = hand["distinct"]
    cfg["note"] = ("generated by make_op_configs.py from the signature"
                   + (" and its family" if family(name) else "") + (" with a hand config" if name in HAND else ""))
    return cfg


def contract(name: str, cat: str, arg: dict[str, Any]) -> dict[str, Any]:
    """A tensor argument with the dtypes outside the op's contract (``FLOAT_CONTRACT``,
    ``INT_CONTRACT``) moved from ``dtypes`` to ``invalid``; any other argument as given."""
    dtypes = arg.get("dtypes")
    if arg.get("type") not in ("tensor", "tensors") or not dtypes:
        return arg
    short = name.split(".")[-1]
    if short in INT_CONTRACT:
        keep = [t for t in dtypes if t != "bool"]
    elif cat in FLOAT_CONTRACT and short not in INT_TESTED:
        keep = [t for t in dtypes if t in FLOATS]
    else:
        return arg
    if not keep or len(keep) == len(dtypes):
        return arg  # an index or id tensor (integers by nature), or nothing outside the contract
    return {**arg, "dtypes": keep, "invalid": [t for t in dtypes if t not in keep]}


def with_float64(arg: dict[str, Any]) -> dict[str, Any]:
    """A tensor argument that takes float32 takes float64 too (after it): every Keras backend
    computes float64 but JAX without ``jax_enable_x64``, which computes float32 by its own
    documented default (docs/ops.md, "float64").  Drawn rarer than the others
    (``audee.mutation.oplevel.DTYPE_WEIGHTS``)."""
    dtypes = arg.get("dtypes")
    if arg.get("type") not in ("tensor", "tensors") or not dtypes or "float32" not in dtypes or "float64" in dtypes:
        return arg
    at = dtypes.index("float32") + 1
    return {**arg, "dtypes": [*dtypes[:at], "float64", *dtypes[at:]]}


def readme(excluded: dict[str, list[str]], configured: int, total: int) -> str:
    lines = ["# Op configs", "",
             "One YAML file per `keras.ops` function (`<op>.yaml`; the file name is the op: its name under",
             "`keras.ops`, or `image.<f>` / `linalg.<f>` for those not re-exported at the top), in the schema of",
             "the layer configs (`docs/ops.md`). Written by `make_op_configs.py` from the installed Keras; edit",
             "the script's `HAND` table, not a file, and run it again.", "",
             f"{configured} of {total} functions configured. Every other one is listed below with the reason;",
             "`audee apis --ops --coverage` fails on a function neither configured nor listed.", "",
             "## Excluded ops", ""]
    for reason, names in excluded.items():
        lines.append(f"- {reason}: " + ", ".join(f"`{n}`" for n in sorted(names)))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args(argv)
    fns = op_functions()
    files: dict[str, str] = {}
    unlisted = []
    excluded_names = {n for names in EXCLUDED.values() for n in names}
    for name, f in fns.items():
        cfg = generate(name, f) if name not in excluded_names else None
        if cfg is None:
            if name not in excluded_names:
                unlisted.append(name)
            continue
        files[f"{name}.yaml"] = yaml.safe_dump(cfg, sort_keys=False, width=110, default_flow_style=None)
    excluded = {k: [n for n in v if n in fns] for k, v in EXCLUDED.items()}
    if unlisted:
        excluded["no rule yet (neither a family nor a hand config in make_op_configs.py)"] = unlisted
    files["README.md"] = readme(excluded, len(files), len(fns))
    changed = [n for n, text in files.items() if not (args.out / n).is_file()
               or (args.out / n).read_text(encoding="utf-8") != text]
    stale = [p.name for p in args.out.glob("*.yaml") if p.name not in files]
    if args.check:
        for n in changed + stale:
            print(f"{args.out / n}: out of date (run {Path(__file__).name})")
        return 1 if changed or stale else 0
    for n in stale:
        (args.out / n).unlink()
    for n in changed:
        (args.out / n).write_text(files[n], encoding="utf-8")
    print(f"{len(files) - 1} op configs ({len(changed)} written, {len(stale)} removed); "
          f"{sum(len(v) for v in excluded.values())} functions excluded", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
