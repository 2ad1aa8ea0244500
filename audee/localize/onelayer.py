"""One-layer DNNs: the candidate values of a single layer's parameters.

Algorithm 2 rebuilds the suspicious layer alone (:func:`audee.cases.spec.one_layer_spec`), with
one parameter replaced, and feeds it the same input it saw inside the full model; these
helpers say which parameters to replace and the values to try.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from audee.localize.signatures import REQUIRED, defaults_for, skipped
from audee.cases.spec import LayerSpec

MISSING = object()  # a parameter with no known Keras default
# Alternatives for string parameters outside the API configs, by parameter name.
VOCABULARY: dict[str, list[str]] = {
    "data_format": ["channels_last", "channels_first"],
    "interpolation": ["nearest", "bilinear"],
    "padding": ["valid", "same"],
    "merge_mode": ["concat", "sum", "mul", "ave"],
}



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
        values = list(pcfg.values or [])
        listed = [list(v) for v in values if isinstance(v, (list, tuple))]  # per-dimension / per-side forms
        cands: list[Any] = [v for v in values if not isinstance(v, (list, tuple))]
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
        cands += [v for v in listed if not isinstance(current, (list, tuple)) or len(v) == len(current)]
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


@dataclass
class ParamSpace:
    """One constructor parameter of a layer: its current value (the Keras default when
    unset), its default, the alternatives to try (the default first), and where they
    come from (``config``: the API config, ``signature``: the constructor)."""

    name: str
    current: Any
    default: Any
    values: list[Any]
    origin: str


def same_value(a: Any, b: Any) -> bool:
    """Keras equality for parameter values: ``2`` is ``[2, 2]``, tuples are lists."""
    def norm(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            v = [norm(x) for x in v]
            return v[0] if v and all(x == v[0] for x in v) else v
        return v
    return type(norm(a)) is type(norm(b)) and norm(a) == norm(b) or (
        isinstance(norm(a), (int, float)) and isinstance(norm(b), (int, float))
        and not isinstance(norm(a), bool) and not isinstance(norm(b), bool) and float(norm(a)) == float(norm(b)))


def param_spaces(layer: LayerSpec, api_cfg: Any, max_values: int = 4) -> list[ParamSpace]:
    """Every constructor parameter of ``layer`` worth trying: each API-config parameter
    (mutable or not) with alternatives from the config, then each other literal parameter
    of the Keras constructor with alternatives from its default and its type; the default
    is always tried first when the layer does not use it."""
    defaults = defaults_for(layer.api)
    out: list[ParamSpace] = []
    seen: set[str] = set()
    for name, pcfg in (api_cfg.params.items() if api_cfg is not None else []):
        if pcfg.type == "layer":
            continue
        seen.add(name)
        default = defaults.get(name, MISSING)
        default = MISSING if default == REQUIRED else default
        current = layer.params.get(name, default if default is not MISSING else None)
        if name == "data_format":  # None is Keras' image_data_format(): channels_last
            default = "channels_last" if default in (None, MISSING) else default
            current = current or "channels_last"
        values = alternatives(pcfg, current, max_values)
        if name == "data_format":  # None is channels_last again: no alternative
            values = [v for v in values if v is not None]
        if pcfg.type == "bool" and isinstance(current, bool):
            values = [not current]
        values = _with_default(values, default, current)
        if not values or not pcfg.mutable:  # a pinned parameter (an axis): alternatives from its type
            values += [v for v in _from_signature(name, current, default, max_values)
                       if not any(same_value(v, w) for w in values)]
        out.append(ParamSpace(name, current, default, values, "config" if pcfg.mutable else "signature"))
    for name, default in defaults.items():
        if name in seen or skipped(name):
            continue
        default = MISSING if default == REQUIRED else default
        current = layer.params.get(name, default)
        if current is MISSING:
            continue
        values = _from_signature(name, current, default, max_values)
        if values:
            out.append(ParamSpace(name, current, default, values, "signature"))
    return out


def _with_default(values: list[Any], default: Any, current: Any) -> list[Any]:
    if default is MISSING or same_value(default, current):
        return [v for v in values if not same_value(v, current)]
    return [default] + [v for v in values if not same_value(v, default) and not same_value(v, current)]


def _from_signature(name: str, current: Any, default: Any, max_values: int) -> list[Any]:
    """Alternatives for a parameter outside the API config, from its default's type."""
    if name == "data_format":  # None is Keras' image_data_format(): channels_last
        current = current or "channels_last"
        default = default or "channels_last"
    probe = current if current is not None else default
    if isinstance(probe, bool):
        cands: list[Any] = [not probe]
    elif isinstance(probe, int):
        cands = [probe - 1, probe + 1, 1, -1] if name == "axis" else [probe - 1, probe + 1, 1]
        cands = [c for c in cands if c != 0] if name == "axis" else [c for c in cands if c >= 1]
    elif isinstance(probe, float):
        cands = [probe / 10, probe * 10] if probe else [0.1, 1.0]
    elif isinstance(probe, str) or name in VOCABULARY:
        cands = list(VOCABULARY.get(name, []))
    elif isinstance(probe, list) and probe and all(isinstance(x, int) and not isinstance(x, bool) for x in probe):
        cands = [[1] * len(probe), [x + 1 for x in probe]]
    else:
        cands = []
    uniq: list[Any] = []
    for c in _with_default(cands, default, current):
        if not any(same_value(c, u) for u in uniq):
            uniq.append(c)
    return uniq[:max_values]
