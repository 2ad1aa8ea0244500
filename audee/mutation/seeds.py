"""Seeds: the shipped seed DNNs (``seeds/<name>/``) and user-supplied inputs.

A seed directory holds ``spec.json`` (a ModelSpec), ``inputs.npz`` (one array per model
input, plus ``labels``), ``seed.json`` (provenance, weight seed, input scaling) and, for
trained seeds, ``weights.npz``.  Untrained seeds get deterministic weights at run time
(``audee.cases.weights.init_weights``).  No framework is imported here.

A user's seed (a spec ``.json``, a directory, a ``.keras`` model) takes its inputs from,
in order: ``--inputs`` (a campaign run's ``inputs:``), an ``inputs.npz`` beside its spec
or model, or inputs generated from the declared shapes and dtypes
(:func:`generate_inputs`, distribution in docs/architecture.md).  Where they came from is
kept in ``spec.meta["inputs"]``, so every case file of the run records it.
"""
from __future__ import annotations

import json
import os
import logging
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from audee.apis.call_args import MASK_ROWS, draw_masks
from audee.core.bounded import MAX_DATA_BYTES, check_regular, open_regular
from audee.core.errors import AudeeError
from audee.core.paths import seeds_dir
from audee.cases.spec import InputSpec, ModelSpec, Weights, load_weights
from audee.store.caserecord import CASE_ID
from audee.core.yamlio import read_text

log = logging.getLogger(__name__)
#: rows generated for a user seed that brings no inputs (a shipped seed has >= 100)
GENERATED_ROWS = 128
#: token ids of a generated integer input: [0, this) unless a range or an Embedding says
GENERATED_INT_HIGH = 10
INPUTS_FILE = "inputs.npz"  # the inputs beside a user's spec or .keras model
#: generated inputs, all together, at most (a seed that needs more brings its own)
GENERATED_MAX_BYTES = 1 << 30


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


#: the longest seed name: its case ids (``<name>-v00001``, a search's ``<name>-v00001-<kind>-...``)
#: must stay within :data:`audee.store.caserecord.CASE_ID`
MAX_SEED_NAME = 100


def _present(path: Path) -> bool:
    """Whether a name is there at all: a pipe or a device given as a spec or inputs is read
    (and refused in one line naming it, :mod:`audee.core.bounded`), never taken for a missing file."""
    return os.path.lexists(path)


def load_seed(name_or_path: str, log_dir: str | Path | None = None, inputs: str | None = None, *,
              field: str | None = "--inputs") -> Seed:
    """A shipped seed by name, a directory with spec.json, a spec .json file, or a .keras
    model (read in a TensorFlow worker logging to ``log_dir``), with the inputs a run uses:
    ``inputs`` (an .npz, named by the setting ``field``) or its own (:func:`with_inputs`)."""
    return with_inputs(read_seed(name_or_path, log_dir), inputs, field=field)


def read_seed(name_or_path: str, log_dir: str | Path | None = None) -> Seed:
    """:func:`load_seed` without resolving a user's inputs: a user's seed may come back
    with none, so that inputs the user gives are read instead of generated first (a spec's
    input shapes may be far too large to generate); pass it to :func:`with_inputs`.  Its
    name starts every case id it gives, so it must be one."""
    seed = _load_seed(name_or_path, log_dir)
    if len(seed.name) > MAX_SEED_NAME or not CASE_ID.match(seed.name):
        raise AudeeError(f"the seed's name {ascii(seed.name[:60])} cannot start case ids, which name files: use "
                         f"letters, digits and _ . + = - (at most {MAX_SEED_NAME}, a letter or digit first)",
                         source=seed.source or None, field="name")
    return seed


def _load_seed(name_or_path: str, log_dir: str | Path | None = None) -> Seed:
    p = Path(name_or_path)
    if p.suffix == ".keras":
        return import_keras_seed(p, log_dir)
    if (seeds_dir() / name_or_path / "spec.json").is_file():
        d = seeds_dir() / name_or_path
    elif p.is_dir() and _present(p / "spec.json"):
        d = p
    elif p.suffix == ".json" and _present(p):
        spec = ModelSpec.load(p)
        return Seed(spec.name, spec, {}, None, None, 0, f"spec {p}", "user", str(p))
    else:
        known = ", ".join(list_seeds()) or "none found"
        raise AudeeError(f"no seed named {name_or_path!r} (shipped: {known}; or give a seed directory, a spec "
                         ".json or a .keras model)", field="--seed")
    spec = ModelSpec.load(d / "spec.json")
    meta = _meta(d / "seed.json")
    inputs, labels = {}, None  # a user's directory may hold no inputs: with_inputs supplies them
    if _present(d / INPUTS_FILE) or d.parent == seeds_dir():
        inputs, labels = load_inputs(d / INPUTS_FILE, scale=meta.get("input_scale", {}))
        inputs = check_inputs(spec, inputs, str(d / INPUTS_FILE))
    weights = load_weights(d / "weights.npz") if _present(d / "weights.npz") else None
    return Seed(d.name, spec, inputs, labels, weights, int(meta.get("weight_seed", 0)),
                str(meta.get("description", "")), str(meta.get("data", "")), str(d / "spec.json"))


_IMPORTED: dict[tuple[str, float], Seed] = {}  # .keras imports of this process (a campaign checks, then runs)


def import_keras_seed(path: str | Path, log_dir: str | Path | None = None) -> Seed:
    """A user's .keras model: converted to a spec inside a TensorFlow worker (this process
    imports no framework); any ``keras.layers`` layer, with or without an API config."""
    import tempfile

    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    src = str(path)
    check_regular(path, MAX_DATA_BYTES)  # a pipe or a device: one line here, before a worker starts
    key = (str(Path(path).resolve()), Path(path).stat().st_mtime)
    if key in _IMPORTED:
        return _IMPORTED[key]
    with tempfile.TemporaryDirectory(prefix="audee-import-") as tmp:
        with Pool(parse_backends("tensorflow"), Path(log_dir or tmp)) as pool:
            pool.start_or_fail(source=src)  # no TensorFlow worker to read it: exit 4, as for any command
            try:
                got = pool.call("tensorflow", "import_keras", path=key[0])
            except RuntimeError as exc:
                raise AudeeError(str(exc).splitlines()[0], source=src) from None
    if "refused" in got:
        raise AudeeError(got["refused"])
    spec = ModelSpec.from_json(got["spec"], source=src)
    _IMPORTED[key] = Seed(name=spec.name, spec=spec, inputs={}, labels=None, weights=got["weights"], weight_seed=0,
                          description=f"imported from {src}", data="user", source=src)
    return _IMPORTED[key]


def _meta(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        meta = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise AudeeError(f"not valid JSON ({exc.msg} at line {exc.lineno})", source=str(path)) from None
    if not isinstance(meta, dict):
        raise AudeeError("expected a JSON object", source=str(path))
    return meta


def load_inputs(path: str | Path, scale: dict[str, float] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Arrays from an .npz (``labels`` apart); integer images are scaled by ``scale``."""
    try:
        with open_regular(path, MAX_DATA_BYTES) as f, np.load(f, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except AudeeError:  # no regular file, or too large: its own line
        raise
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
    """Names, shapes (batch first) and dtypes against the spec; integer inputs in range.
    Only real numbers pass: a complex array would lose its imaginary part in the cast to
    the input's dtype, silently, and a boolean or text one is no model input."""
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
        if arr.dtype.kind == "c":
            raise AudeeError(f"complex values ({arr.dtype}): the model takes real numbers, and the cast would "
                             "drop the imaginary part", source=source, field=inp.name)
        if arr.dtype.kind not in "iuf":
            raise AudeeError(f"expected real numbers, got {arr.dtype}", source=source, field=inp.name)
        if inp.is_integer:
            if not np.issubdtype(arr.dtype, np.integer) and not np.all(arr == np.round(arr)):
                raise AudeeError("expected integer values (token ids)", source=source, field=inp.name)
            if inp.range is not None and (arr.min() < inp.range[0] or arr.max() >= inp.range[1]):
                raise AudeeError(f"values outside [{inp.range[0]:g}, {inp.range[1]:g})", source=source,
                                 field=inp.name)
        out[inp.name] = arr.astype(inp.dtype)
    return out


def with_inputs(seed: Seed, path: str | None = None, *, field: str | None = "--inputs") -> Seed:
    """``seed`` with the inputs a run uses: ``path`` (an .npz, checked against the spec), else
    the ones it ships, else an ``inputs.npz`` beside a user's spec or model, else generated
    (:func:`generate_inputs`); never a seed without inputs.  Bad inputs are one line naming
    the file and the array (``field`` names the setting that gave the path)."""
    described: dict[str, Any] | None = None
    if path:
        if not _present(Path(path)):
            raise AudeeError("no such file", source=str(path), field=field)
        raw, _ = load_inputs(path)
        inputs, described = check_inputs(seed.spec, raw, str(path)), {"file": str(path)}
    elif seed.inputs:
        return seed
    else:
        beside = Path(seed.source).parent / INPUTS_FILE if seed.source else None
        beside = beside if beside is not None and beside.parent.resolve() != seeds_dir().resolve() else None
        if beside is not None and _present(beside):
            raw, _ = load_inputs(beside)
            inputs, described = check_inputs(seed.spec, raw, str(beside)), {"file": str(beside)}
        else:
            inputs, described = generate_inputs(seed.spec, source=seed.source or seed.name)
            log.info("seed %s ships no inputs: %d rows generated from its input shapes (%s)", seed.name,
                     GENERATED_ROWS, "; ".join(f"{k}: {v}" for k, v in described["generated"].items()))
    spec = seed.spec.copy()
    spec.meta = {**spec.meta, "inputs": described}
    return replace(seed, spec=spec, inputs=inputs, labels=None)


def generate_inputs(spec: ModelSpec, rows: int = GENERATED_ROWS, *,
                    source: str | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Deterministic inputs for a model that brings none, drawn from the spec's content key
    (the same spec gets the same rows on every machine and every rng).  Floats: uniform over
    the input's ``range`` when it declares one, else standard normal.  Integers: uniform over
    ``[low, high)`` of its ``range``, else over ``[0, input_dim)`` of an Embedding it feeds,
    else over ``[0, GENERATED_INT_HIGH)``; a mask's input (a layer's ``call.mask``): 0/1
    rows, padded sequences mostly (:func:`audee.apis.call_args.draw_masks`).  Returns the
    arrays and their description.  Inputs over :data:`GENERATED_MAX_BYTES` together are
    refused before any is drawn, naming the spec (``source``) and the input's shape."""
    _check_generated_size(spec, rows, source)
    rng_seed = zlib.crc32(spec.key().encode())
    rng = np.random.default_rng([rng_seed, len(spec.inputs)])
    out: dict[str, np.ndarray] = {}
    how: dict[str, str] = {}
    masks = spec.mask_inputs()
    for inp in spec.inputs:
        shape = (rows, *inp.shape)
        if inp.name in masks:
            out[inp.name] = draw_masks(shape, rng, inp.dtype, masks[inp.name])
            how[inp.name] = MASK_ROWS
        elif inp.is_integer:
            low, high = _int_bounds(spec, inp)
            out[inp.name] = rng.integers(low, high, size=shape).astype(inp.dtype)
            how[inp.name] = f"uniform integers in [{low}, {high})"
        elif inp.range is not None:
            out[inp.name] = rng.uniform(inp.range[0], inp.range[1], size=shape).astype(inp.dtype)
            how[inp.name] = f"uniform in [{inp.range[0]:g}, {inp.range[1]:g})"
        else:
            out[inp.name] = rng.standard_normal(shape).astype(inp.dtype)
            how[inp.name] = "standard normal"
    return out, {"generated": how, "rows": rows, "rng": [rng_seed, len(spec.inputs)]}


def _check_generated_size(spec: ModelSpec, rows: int, source: str | None) -> None:
    """Refuse inputs too large to generate (a shape typed ``[1000000000]`` asks hundreds of GiB),
    naming the largest input's ``shape`` field."""
    sizes = [rows * int(np.prod(inp.shape, dtype=object)) * np.dtype(inp.dtype).itemsize for inp in spec.inputs]
    if sum(sizes) <= GENERATED_MAX_BYTES:
        return
    k = int(np.argmax(sizes))
    inp = spec.inputs[k]
    raise AudeeError(f"{rows} generated rows of input {inp.name!r} {list(inp.shape)} {inp.dtype} would take "
                     f"{sizes[k] / 2**30:.1f} GiB (all inputs together at most {GENERATED_MAX_BYTES / 2**30:g} GiB):"
                     f" give the inputs (--inputs, or {INPUTS_FILE} beside the model) or a smaller shape",
                     source=source, field=f"inputs[{k}].shape")


def _int_bounds(spec: ModelSpec, inp: InputSpec) -> tuple[int, int]:
    if inp.range is not None:
        return int(np.ceil(inp.range[0])), int(np.ceil(inp.range[1]))
    dims = [layer.params.get("input_dim") for layer in spec.layers
            if layer.api == "Embedding" and inp.name in layer.inputs]
    dims = [d for d in dims if isinstance(d, int) and not isinstance(d, bool) and d > 0]
    return 0, (min(dims) if dims else GENERATED_INT_HIGH)
