"""What every mutation strategy shares: one parameter value drawn from its API config
(valid or crafty invalid), coupled draws that keep a layer buildable, and the record of
one change (:class:`Mutation`).

Network-level variants (:mod:`audee.mutation.network`), the structural operators
(:mod:`audee.mutation.operators`) and API-level cases (:mod:`audee.mutation.apilevel`)
all draw and record through this module, so none of them imports another for it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from audee.apis import ParamConfig
from audee.apis.config import named_axes


@dataclass
class Mutation:
    """One change of a variant.  ``op`` says which operator made it (``redraw``: a
    parameter of ``layer`` went from ``old`` to ``new``, the only kind before structural
    operators, so records without ``op`` read as redraws).  Structural operators
    (:mod:`audee.mutation.operators`) also list the layers they ``added`` (LayerSpec JSON,
    each with ``after``: the layer it follows in the spec's list, None at the start), the
    layers they ``removed`` and the inputs they ``rewired`` ([consumer, old, new];
    consumer ``@output`` for the model output).

    ``invalid`` marks a value outside the layer's or op's contract: a crafty invalid draw
    from its config, or a valid-looking one that the case's input makes invalid, with
    ``why`` saying so (:func:`outside_contract`: ``axis names one axis twice``).  Either way
    what it triggers is ``undefined`` (:mod:`audee.triage.rootcause`), never a bug."""

    layer: str
    param: str
    old: Any
    new: Any
    invalid: bool
    op: str = "redraw"
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    rewired: list[list[str]] = field(default_factory=list)
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-safe; a plain redraw keeps exactly the five keys it always had."""
        d = asdict(self)
        for key in ("added", "removed", "rewired", "why"):
            if not d[key]:
                del d[key]
        if d["op"] == "redraw":
            del d["op"]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Mutation":
        return cls(d["layer"], d["param"], d.get("old"), d.get("new"), bool(d.get("invalid", False)),
                   d.get("op", "redraw"), list(d.get("added", [])), list(d.get("removed", [])),
                   [list(r) for r in d.get("rewired", [])], str(d.get("why") or ""))

    def mark_outside(self, why: str) -> None:
        """This value is outside the contract for the input it meets (``why``, without values:
        the record holds them): invalid from now on, never redrawn as a valid draw would be."""
        self.invalid, self.why = True, why


#: the parameters that name axes of the one input tensor, by name in every Keras layer (``axes``
#: of a ``Dot`` names one axis per input: not among them) or by type in an op config
AXIS_PARAMS = ("axis",)


def outside_contract(name: str, param: ParamConfig, value: Any, rank: int) -> str | None:
    """Why a value drawn for ``param`` (named ``name``) is outside its contract for an input
    of ``rank`` (the batch axis included), or None: an axis list naming one axis twice once
    negative axes count from the end (``[1, -1]`` at rank 2, where the configs allow pairs
    only from rank 3 and list ``[1, 1]`` as invalid; TensorFlow, torch and JAX each refuse
    it at run, in their own words, while the model builds).  A valid draw from the config
    can meet such an input: the value is fine, the pair is not.  An axis the input has not
    is no such case: no backend builds it, and a valid draw no backend builds is redrawn."""
    if name not in AXIS_PARAMS and param.type != "axis":
        return None
    axes = named_axes(value)
    if axes is None or rank <= 0 or any(not -rank <= a < rank for a in axes):
        return None
    if len({a % rank for a in axes}) < len(axes):
        return f"{name} names one axis twice"
    return None


def _py(v: Any) -> Any:
    """JSON-safe Python values (never numpy scalars)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_py(x) for x in v]
    return v


def draw_value(param: ParamConfig, rng: np.random.Generator, *, invalid: bool) -> Any:
    """One value for ``param``: from its invalid list, or valid (values, range, None)."""
    if invalid and param.invalid:
        v = param.invalid[int(rng.integers(len(param.invalid)))]
        if param.dims and isinstance(v, int) and not isinstance(v, bool) and rng.random() < 0.5:
            v = [v] * param.dims
        return _py(v)
    if param.nullable and rng.random() < 0.1:
        return None
    if param.type == "bool":
        return bool(rng.random() < 0.5)
    if param.type == "str":
        return str(param.values[int(rng.integers(len(param.values)))])
    if param.values and (param.range is None or rng.random() < 0.3):
        return _py(param.values[int(rng.integers(len(param.values)))])
    lo, hi = param.range
    if param.type == "float":
        return float(f"{rng.uniform(lo, hi):.4g}")
    if param.dims and rng.random() < 0.5:
        if rng.random() < 0.7:
            return [int(rng.integers(lo, hi + 1))] * param.dims
        return [int(rng.integers(lo, hi + 1)) for _ in range(param.dims)]
    return int(rng.integers(lo, hi + 1))


#: parameters a network-level draw leaves as they are: a layer's ``data_format`` says how to
#: read the tensor it is given, and inside a network that layout is fixed by the layers
#: before it (flipping it reinterprets the tensor, and the network no longer fits
#: together); API-level cases, built around one layer for either layout, draw it
NETWORK_FIXED = ("data_format",)


def _per_dim(value: Any, n: int) -> list[int] | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return [value] * n
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    return None


def couple_params(params: dict[str, Any], muts: list[Mutation], rng: np.random.Generator) -> None:
    """Draw coupled parameters together, so that valid draws make a valid layer: a
    transposed convolution's ``output_padding`` below its ``strides`` in every dimension,
    and ``strides`` and ``dilation_rate`` not both above 1 in a dimension (Keras refuses
    both).  The mutation records follow the values."""
    for name in ("output_padding", "dilation_rate"):
        raw, raw_strides = params.get(name), params.get("strides", 1)
        # as many dimensions as a per-dimension form says; two scalars stay one scalar
        n = next((len(v) for v in (raw, raw_strides) if isinstance(v, (list, tuple))), 1)
        value, dims = _per_dim(raw, n), _per_dim(raw_strides, n)
        if value is None or dims is None or len(value) != len(dims):
            continue
        if name == "output_padding":
            fixed = [min(v, int(rng.integers(0, s))) if s >= 1 else 0 for v, s in zip(value, dims)]
        else:
            if any(s > 1 for s in dims) and any(v > 1 for v in value):
                fixed = [1] * n  # Keras: strides > 1 with dilation_rate > 1 is not supported
            else:
                fixed = value
        if fixed != value:
            fixed = fixed[0] if not isinstance(raw, (list, tuple)) and len(set(fixed)) == 1 else fixed
            params[name] = fixed
            for m in muts:
                if m.param == name and not m.invalid:
                    m.new = fixed
