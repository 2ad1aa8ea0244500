"""The activation level: one ``keras.activations`` function (every name the swap-activation
operator draws, :data:`audee.cases.opcase.ACTIVATIONS`) applied to a drawn float tensor, with its
own parameters drawn (``relu``'s ``max_value``, ``elu``'s ``alpha``, ``softmax``'s
``axis``, ...), ids ``activation-<name>-v<i>`` (``audee fuzz --activation``).

Why a level of its own: the layers reach these functions only through their defaults and
the op level calls the ``keras.ops`` twins, whose parameters differ (``keras.activations.relu``
adds ``negative_slope``, ``max_value``, ``threshold`` in Python over the backend ops).  The
case is an op call as data (:class:`audee.cases.opcase.OpCase` naming ``activations.<name>``), so
every call level's runner, oracles, re-run, script and localization refusal serve it
unchanged (:class:`audee.levels.calls.CallLevel`).
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from audee.levels.base import SPECIAL_STREAM, nonempty
from audee.levels.calls import CallLevel
from audee.mutation import special
from audee.cases.opcase import ACTIVATION_NS, ACTIVATIONS, OpCase

DTYPES = ("float32", "float32", "float16", "bfloat16")  # float32 twice: most cases judged at float32 tolerance
MAX_DIM = 6
EVEN_LAST = frozenset({"glu"})  # halves its axis


def _params(name: str, rank: int, rng: np.random.Generator) -> dict[str, Any]:
    """Each parameter of ``keras.activations.<name>`` drawn with probability 1/2 (the
    required ones always): plain JSON values within what the function documents."""
    def coin() -> bool:
        return bool(rng.random() < 0.5)

    def scale() -> float:
        return round(float(rng.uniform(0.05, 3.0)), 3)

    out: dict[str, Any] = {}
    if name in ("celu", "elu") and coin():
        out["alpha"] = scale()
    if name == "gelu" and coin():
        out["approximate"] = bool(coin())
    if name in ("glu", "log_softmax", "softmax", "sparsemax") and coin() and rank > 1:
        out["axis"] = int(rng.integers(-rank, rank))
    if name in ("hard_shrink", "soft_shrink") and coin():
        out["threshold"] = scale()
    if name == "leaky_relu" and coin():
        out["negative_slope"] = scale()
    if name == "relu":
        if coin():
            out["negative_slope"] = scale()
        if coin():
            out["max_value"] = scale()
        if coin():
            out["threshold"] = round(float(rng.uniform(-1.0, 1.0)), 3)
    if name == "squareplus" and coin():
        out["b"] = scale()
    if name == "threshold":  # both required
        out["threshold"] = round(float(rng.uniform(-1.0, 1.0)), 3)
        out["default_value"] = round(float(rng.uniform(-2.0, 2.0)), 3)
    return out


def generate_activation_case(name: str, rng: int, index: int) -> OpCase:
    """Case ``index`` of ``keras.activations.<name>``: a tensor of rank 1-4 (a dim of 0
    now and then), its dtype, the drawn parameters; the same stream as every level's
    ``(rng, crc32(name), index)``."""
    from audee.mutation.apilevel import case_rng
    from audee.mutation.oplevel import values

    r = case_rng(rng, name, index)
    rank = int(r.integers(1, 5))
    shape = [0 if r.random() < 0.05 else int(r.integers(1, MAX_DIM + 1)) for _ in range(rank)]
    params = _params(name, rank, r)
    if name in EVEN_LAST:  # the axis glu halves must be even
        axis = int(params.get("axis", -1)) % rank
        shape[axis] = 2 * max(1, shape[axis] // 2)
    dtype = str(r.choice(DTYPES))
    x = values(shape, dtype, r, None)
    return OpCase(ACTIVATION_NS + name, [{"tensor": "x"}], params, {"x": x}, {"x": dtype})


def activation_case_id(name: str, index: int) -> str:
    return f"activation-{name}-v{index:05d}"


class ActivationLevel(CallLevel):
    name = "activation"
    label = "activation"
    settings = ("variants", "special_inputs")

    def case_id(self, target: str, index: int) -> str:
        return activation_case_id(target, index)

    def target_names(self) -> Sequence[str]:
        return list(ACTIVATIONS)

    def cases(self, runner: Any, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
        """Each case with its row's provenance: the drawn call, then special values in its
        tensor (``--special-inputs``, their own random stream)."""
        from audee.mutation.apilevel import case_rng
        from audee.mutation.oplevel import wire_array
        from audee.cases.spec import InputSpec

        for name, index in todo:
            case = generate_activation_case(name, cfg.rng, index)
            case.id = activation_case_id(name, index)
            x = case.tensors["x"]
            spec = InputSpec("x", tuple(x.shape[1:]), str(x.dtype))
            tensors, specials = special.inject({"x": x}, [spec], case_rng(cfg.rng, name, index, stream=SPECIAL_STREAM),
                                               cfg.special_inputs)
            case.tensors["x"] = wire_array(tensors["x"], case.dtypes["x"])
            case.meta = {"seed": f"activation:{name}", "api": case.op, "variant": index, "rng": cfg.rng,
                         "mutations": [], "invalid": False, "dtype": case.dtypes["x"], **case.describe(),
                         **nonempty({"special_inputs": specials})}
            yield case, dict(case.meta)


LEVEL = ActivationLevel()
