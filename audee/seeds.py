"""Seeds: the shipped seed DNNs (``audee/data/seeds/<name>/``) and user-supplied inputs.

A seed directory holds ``spec.json`` (a ModelSpec), ``inputs.npz`` (one array per model
input, plus ``labels``), ``seed.json`` (provenance, weight seed, input scaling) and, for
trained seeds, ``weights.npz``.  Untrained seeds get deterministic weights at run time
(``audee.weights.init_weights``).  No framework is imported here.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audee.errors import AudeeError
from audee.paths import seeds_dir
from audee.spec import ModelSpec, Weights, load_weights


@dataclass
class Seed:
    name: str
    spec: ModelSpec
    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    weights: Weights | None
    weight_seed: int
    description: str
    data: str
    source: str


def list_seeds() -> list[str]:
    d = seeds_dir()
    return sorted(p.parent.name for p in d.glob("*/spec.json")) if d.is_dir() else []


def load_seed(name_or_path: str) -> Seed:
    """A shipped seed by name, a directory with spec.json, or a spec .json file."""
    p = Path(name_or_path)
    if (seeds_dir() / name_or_path / "spec.json").is_file():
        d = seeds_dir() / name_or_path
    elif p.is_dir() and (p / "spec.json").is_file():
        d = p
    elif p.suffix == ".json" and p.is_file():
        spec = ModelSpec.load(p)
        return Seed(spec.name, spec, {}, None, None, 0, f"spec {p}", "user", str(p))
    else:
        known = ", ".join(list_seeds()) or "none found"
        raise AudeeError(f"no seed named {name_or_path!r} (shipped: {known}; or give a seed directory, a spec "
                         ".json or a .keras model)", field="--seed")
    spec = ModelSpec.load(d / "spec.json")
    meta = _meta(d / "seed.json")
    inputs, labels = load_inputs(d / "inputs.npz", scale=meta.get("input_scale", {}))
    inputs = check_inputs(spec, inputs, str(d / "inputs.npz"))
    weights = load_weights(d / "weights.npz") if (d / "weights.npz").is_file() else None
    return Seed(d.name, spec, inputs, labels, weights, int(meta.get("weight_seed", 0)),
                str(meta.get("description", "")), str(meta.get("data", "")), str(d))


def _meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AudeeError(f"not valid JSON ({exc.msg} at line {exc.lineno})", source=str(path)) from None
    if not isinstance(meta, dict):
        raise AudeeError("expected a JSON object", source=str(path))
    return meta


def load_inputs(path: str | Path, scale: dict[str, float] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Arrays from an .npz (``labels`` apart); integer images are scaled by ``scale``."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as exc:
        raise AudeeError(f"cannot read inputs: {exc}", source=str(path)) from None
    except Exception as exc:  # a corrupt archive: BadZipFile, zlib.error, EOFError, a mangled .npy header...
        detail = str(exc).splitlines()[0] if str(exc) else ""
        raise AudeeError(f"cannot read inputs: not a valid .npz ({type(exc).__name__}"
                         + (f": {detail}" if detail else "") + ")", source=str(path)) from None
    labels = arrays.pop("labels", None)
    for name, factor in (scale or {}).items():
        if name in arrays:
            arrays[name] = arrays[name].astype(np.float32) * np.float32(factor)
    return arrays, labels


def check_inputs(spec: ModelSpec, inputs: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
    """Names, shapes (batch first) and dtypes against the spec; integer inputs in range."""
    out = {}
    n = None
    for inp in spec.inputs:
        if inp.name not in inputs:
            raise AudeeError(f"no array for model input {inp.name!r} (found: {', '.join(inputs) or 'none'})",
                             source=source, field=inp.name)
        arr = np.asarray(inputs[inp.name])
        if arr.ndim != len(inp.shape) + 1 or tuple(arr.shape[1:]) != tuple(inp.shape):
            raise AudeeError(f"shape {list(arr.shape)} does not fit [batch, {', '.join(map(str, inp.shape))}]",
                             source=source, field=inp.name)
        if n is not None and arr.shape[0] != n:
            raise AudeeError(f"{arr.shape[0]} rows where other inputs have {n}", source=source, field=inp.name)
        n = arr.shape[0]
        if n == 0:
            raise AudeeError("no rows", source=source, field=inp.name)
        if inp.is_integer:
            if not np.issubdtype(arr.dtype, np.integer) and not np.all(arr == np.round(arr)):
                raise AudeeError("expected integer values (token ids)", source=source, field=inp.name)
            if inp.range is not None and (arr.min() < inp.range[0] or arr.max() >= inp.range[1]):
                raise AudeeError(f"values outside [{inp.range[0]:g}, {inp.range[1]:g})", source=source,
                                 field=inp.name)
        elif not np.issubdtype(arr.dtype, np.number):
            raise AudeeError(f"expected numbers, got {arr.dtype}", source=source, field=inp.name)
        out[inp.name] = arr.astype(inp.dtype)
    return out
