"""What an op-level test case is: one ``keras.ops`` call as plain data.

The op is named, never given as code: a worker looks the name up in the closed set of
configured ops (``api_configs/ops/``).  Its positional and keyword arguments are JSON data
where each tensor is a reference ``{"tensor": name}`` into ``tensors`` (numpy arrays; a
bfloat16 tensor travels as float32 holding bfloat16 values, ``dtypes`` saying so, and is
cast in the worker).  Drawn by :mod:`audee.mutation.oplevel`, run by :mod:`audee.engine.opexec`,
kept in case files by :class:`audee.store.caserecord.CaseRecord` (``op``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# keras.activations of Keras 3.15 (the serialization helpers get/serialize/deserialize
# left out); tests/test_mutation_operators.py checks this list against the installed Keras.
ACTIVATIONS = (
    "celu", "elu", "exponential", "gelu", "glu", "hard_shrink", "hard_sigmoid", "hard_silu", "hard_swish",
    "hard_tanh", "leaky_relu", "linear", "log_sigmoid", "log_softmax", "mish", "relu", "relu6", "selu",
    "sigmoid", "silu", "soft_shrink", "softmax", "softplus", "softsign", "sparse_plus", "sparse_sigmoid",
    "sparsemax", "squareplus", "swish", "tanh", "tanh_shrink", "threshold",
)
#: a call's name in this namespace is a ``keras.activations`` function; any other name is a
#: ``keras.ops`` function (``add``, ``image.resize``)
ACTIVATION_NS = "activations."


def callable_names() -> frozenset[str]:
    """The closed set of functions a call may name (a case names data, never code): the
    configured ``keras.ops`` functions (``api_configs/ops/``) and every ``keras.activations``
    function as ``activations.<name>``."""
    from audee.apis import load_op_configs

    return frozenset(load_op_configs()) | {ACTIVATION_NS + a for a in ACTIVATIONS}


def call_function(keras: Any, name: str) -> Any:
    """The function a call names, from the ``keras`` module given (the worker's, a script's):
    ``activations.<name>`` from ``keras.activations``, else from ``keras.ops``."""
    obj: Any = keras if name.startswith(ACTIVATION_NS) else keras.ops
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass
class OpCase:
    """One call of a ``keras.ops`` function, as data."""

    op: str
    args: list[Any]
    kwargs: dict[str, Any]
    tensors: dict[str, np.ndarray]
    dtypes: dict[str, str]                   # tensor -> the Keras dtype it is called with
    mutations: list[Any] = field(default_factory=list)   # audee.mutation.base.Mutation, one per drawn value
    invalid: bool = False
    id: str = ""
    meta: dict[str, Any] = field(default_factory=dict)  # provenance (a row's fields: api, variant, rng, ...)
    spec: None = None  # no model: what reads a test case's spec (rows, signatures) finds none

    @property
    def inputs(self) -> dict[str, np.ndarray]:
        """The call's tensors: what the NaN oracle and the special values read as its input."""
        return self.tensors

    def call(self) -> dict[str, Any]:
        """What a worker needs besides the tensors (and what a case file keeps): op, args,
        kwargs, dtypes: plain JSON data."""
        return {"op": self.op, "args": self.args, "kwargs": self.kwargs, "dtypes": dict(self.dtypes)}

    def describe(self) -> dict[str, Any]:
        """The row's provenance: each tensor's dtype and shape, the drawn values."""
        return {"input_shapes": {k: list(v.shape) for k, v in self.tensors.items()},
                "tensor_dtypes": dict(self.dtypes),
                "params": {k: v for k, v in self.kwargs.items() if not _has_ref(v)}}


def _has_ref(v: Any) -> bool:
    return isinstance(v, dict) and "tensor" in v or isinstance(v, list) and any(_has_ref(x) for x in v)


def refs(value: Any) -> list[str]:
    """The tensor names an argument refers to."""
    if isinstance(value, dict) and set(value) == {"tensor"}:
        return [value["tensor"]]
    if isinstance(value, list):
        return [n for v in value for n in refs(v)]
    return []


#: the dtypes a call is differentiated in: a tensor argument of one of these has a gradient,
#: integer, boolean and complex ones have none (complex: each framework conjugates its own way)
GRAD_DTYPES = ("float16", "bfloat16", "float32", "float64")


def cotangent(seed: int, k: int, shape: tuple[int, ...]) -> np.ndarray:
    """The cotangent of a call's output ``k`` (the vector of its vector-Jacobian product):
    standard normal values drawn from ``default_rng([seed, k])``, so every backend (and a
    repro script, which carries this function's text) pulls back the same vector whatever
    its framework; float64, cast by the caller to the output's dtype."""
    return np.random.default_rng([int(seed), int(k)]).standard_normal(tuple(int(d) for d in shape))
