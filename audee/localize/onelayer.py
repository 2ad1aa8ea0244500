"""One-layer DNNs: a single spec layer, fed the layer input recorded in a case.

Algorithm 2 rebuilds the suspicious layer alone, with one parameter replaced, and feeds
it the same input it saw inside the full model; these helpers build that spec and the
candidate values to try.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from audee.spec import InputSpec, LayerSpec, ModelSpec


def one_layer_spec(spec: ModelSpec, layer: str, layer_inputs: dict[str, np.ndarray],
                   override: dict[str, Any] | None = None) -> ModelSpec:
    """A model with ``layer`` alone; its inputs are named after the layers feeding it."""
    ls = spec.layer(layer)
    names = list(dict.fromkeys(ls.inputs))
    inputs = []
    for ref in names:
        arr = layer_inputs[ref]
        rng = None
        if np.issubdtype(arr.dtype, np.integer):
            src = next((i for i in spec.inputs if i.name == ref), None)
            rng = src.range if src is not None else None
        elif arr.size and np.isfinite(arr).all() and float(arr.max()) > float(arr.min()):
            rng = (float(arr.min()), float(arr.max()))  # the search perturbs at the data's scale
        inputs.append(InputSpec(ref, tuple(int(d) for d in arr.shape[1:]), str(arr.dtype), rng))
    params = {**ls.params, **(override or {})}
    return ModelSpec(f"{spec.name}-{layer}", inputs, [LayerSpec(layer, ls.api, params, list(ls.inputs))],
                     output=layer, logits=layer)


def alternatives(pcfg: Any, current: Any, max_values: int = 4) -> list[Any]:
    """Valid values to try in place of ``current`` (the paper's 'other values guided by the
    API configuration'), in a fixed order."""
    out: list[Any] = []
    t = pcfg.type
    if t == "bool":
        out = [True, False] if current is None else [not current]  # unset: Keras' default is unknown here
    elif t == "str":
        out = [v for v in (pcfg.values or []) if v != current]
    elif t in ("int", "float"):
        lo, hi = (pcfg.range or [None, None])
        cands: list[Any] = list(pcfg.values or [])
        if t == "int":
            cur = current[0] if isinstance(current, (list, tuple)) and current else current
            cands += [1, lo, hi]
            if isinstance(cur, int):
                cands += [cur - 1, cur + 1]
            cands = [int(c) for c in cands if c is not None and (lo is None or c >= lo) and (hi is None or c <= hi)]
            if isinstance(current, (list, tuple)):
                cands = [[c] * len(current) for c in cands]
        else:
            cands += [lo, hi, (lo + hi) / 2 if lo is not None and hi is not None else None]
            cands = [float(c) for c in cands if c is not None]
        out = [c for c in cands if c != current]
    if getattr(pcfg, "nullable", False) and current is not None:
        out.append(None)
    seen, uniq = set(), []
    for v in out:
        key = repr(v)
        if key not in seen:
            seen.add(key)
            uniq.append(v)
    return uniq[:max_values] if t not in ("str", "bool") else uniq
