"""The backend-neutral model spec: named inputs and a DAG of Keras layers.

A spec is plain JSON data, so it can be hashed, diffed, pickled into case files and
rebuilt on any backend.  Weights travel beside it as ``{layer name: [arrays]}`` in the
order Keras' ``layer.get_weights()`` uses.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from audee.apis.keras_layers import output_activation
from audee.apis.owned_layers import OWNED_LAYERS, ROUNDTRIPS, check_owned
from audee.core.bounded import MAX_DATA_BYTES, open_regular
from audee.core.errors import SpecError
from audee.core.yamlio import read_text
from audee.core.floats import numpy_float

SPEC_FORMAT = "audee.spec/1"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JSON_SCALARS = (str, int, float, bool, type(None))
DTYPES = ("float32", "float64", "float16", "int32", "int64")

Weights = dict[str, list[np.ndarray]]


@dataclass(frozen=True)
class InputSpec:
    """A named model input; ``shape`` excludes the batch axis.

    ``range`` bounds the values: for integer inputs (token ids) it is ``[low, high)``
    and search keeps them inside it; for float inputs it is the seed data's range.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    range: tuple[float, float] | None = None

    @property
    def is_integer(self) -> bool:
        return self.dtype.startswith("int")


@dataclass
class LayerSpec:
    """One layer: its Keras API name, parameters, and the names of the layers feeding it.

    ``fixed`` lists parameters that network mutation must leave alone (for example the
    classifier's ``units``, or an Embedding's ``input_dim`` that must match the vocabulary).
    ``call`` holds the arguments the layer is called with, whatever mode the model runs in
    (``{"training": true}``: a BatchNormalization normalizing with batch statistics at
    inference too; :data:`audee.apis.call_args.CALL_ARGS`); empty, the model's mode decides.
    ``{"mask": "m"}`` calls it with ``m != 0``, ``m`` an integer model input.
    """

    name: str
    api: str
    params: dict[str, Any]
    inputs: list[str]
    fixed: list[str] = field(default_factory=list)
    call: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "api": self.api, "params": self.params, "inputs": self.inputs}
        if self.fixed:
            d["fixed"] = self.fixed
        if self.call:  # absent when empty: a spec without call arguments keeps its JSON and its key
            d["call"] = self.call
        return d

    @property
    def mask(self) -> str | None:
        """The model input the layer's mask is made from (``call.mask``), or None."""
        m = self.call.get("mask")
        return m if isinstance(m, str) else None

    @property
    def reads(self) -> list[str]:
        """Every tensor the layer reads: its inputs, then its mask's model input.  Whatever
        rebuilds the layer alone (:func:`one_layer_spec`) feeds it these."""
        return list(dict.fromkeys([*self.inputs, *([self.mask] if self.mask else [])]))

    def call_renamed(self, rename: "Callable[[str], str]") -> dict[str, Any]:
        """``call`` with its mask's input renamed (a spec whose names change: packs)."""
        return {**self.call, "mask": rename(self.mask)} if self.mask else dict(self.call)


@dataclass
class ModelSpec:
    """A DNN as data.  ``output`` is the model's output layer; ``logits`` the layer whose
    output fitness functions and distances read (the pre-softmax layer where there is one)."""

    name: str
    inputs: list[InputSpec]
    layers: list[LayerSpec]
    output: str
    logits: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: built, weighted, then saved and loaded this way before it runs (``keras``, ``config``,
    #: ``json``: :data:`audee.apis.owned_layers.ROUNDTRIPS`; the equivalence rule ``roundtrip_*``);
    #: None: run as built.  Part of the key: a round-tripped model is another build.
    roundtrip: str | None = None
    #: computed as exactly as the backend can, not as users run it: Keras' narrowing of
    #: float64 to float32 (``backend.result_type`` off TensorFlow) is off while it is built
    #: and run (:meth:`audee.backends.base.Backend.keeping_float64`).  Set only on the models
    #: the float64 reference and the per-layer float64 recomputation read, never on a tested
    #: one.  Part of the key: the same layers computed otherwise are another build.
    exact: bool = False

    # ---- access -------------------------------------------------------------------------
    @property
    def logits_layer(self) -> str:
        return self.logits or self.output

    @property
    def input_names(self) -> list[str]:
        return [i.name for i in self.inputs]

    def layer(self, name: str) -> LayerSpec:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)

    def layer_names(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def mask_inputs(self) -> dict[str, list[str]]:
        """The model inputs some layer's mask is made from, each with the APIs of the layers
        it masks: 0/1 data, not ids or values (generated as padded sequences, left alone by
        special values and the search)."""
        out: dict[str, list[str]] = {}
        for ls in self.layers:
            if ls.mask:
                out.setdefault(ls.mask, []).append(ls.api)
        return out

    def predecessors(self, name: str) -> list[str]:
        """Names of the layers (not model inputs) whose outputs feed ``name``."""
        inputs = set(self.input_names)
        return [n for n in self.layer(name).inputs if n not in inputs]

    def topological_order(self) -> list[str]:
        """Layer names in an order where every layer follows its inputs (stable to spec order)."""
        return _toposort(self)

    # ---- serialization -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": SPEC_FORMAT,
            "name": self.name,
            "inputs": [
                {"name": i.name, "shape": list(i.shape), "dtype": i.dtype}
                | ({"range": list(i.range)} if i.range is not None else {})
                for i in self.inputs
            ],
            "layers": [layer.to_json() for layer in self.layers],
            "output": self.output,
        }
        if self.logits:
            d["logits"] = self.logits
        if self.meta:
            d["meta"] = self.meta
        if self.roundtrip:  # absent when unset: other specs keep their JSON and key
            d["roundtrip"] = self.roundtrip
        if self.exact:  # absent when unset, as roundtrip
            d["exact"] = True
        return d

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def key(self, *, ranges: bool = True) -> str:
        """A content hash: equal specs share built models in the backend workers.
        ``ranges=False``: without the inputs' value ranges, which only draw data and never
        reach a build (a one-layer case and its layer cut out alone share a graph export)."""
        body = self.to_json()
        body.pop("meta", None)
        body.pop("name", None)
        if not ranges:
            body["inputs"] = [{k: v for k, v in i.items() if k != "range"} for i in body["inputs"]]
        return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]

    def copy(self) -> "ModelSpec":
        return copy.deepcopy(self)

    @classmethod
    def from_json(cls, data: Any, *, source: str = "<spec>") -> "ModelSpec":
        spec = _parse(data, source)
        validate(spec, source=source)
        return spec

    @classmethod
    def loads(cls, text: str, *, source: str = "<spec>") -> "ModelSpec":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"not valid JSON ({exc.msg} at line {exc.lineno})", source=source) from None
        return cls.from_json(data, source=source)

    @classmethod
    def load(cls, path: str | Path) -> "ModelSpec":
        return cls.loads(read_text(path, SpecError), source=str(path))

    def save(self, path: str | Path) -> None:
        from audee.store.atomic import write_atomic  # deferred: the audee.store package imports this module

        write_atomic(path, (json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n").encode())


def one_layer_spec(spec: ModelSpec, layer: str, layer_inputs: dict[str, np.ndarray],
                   override: dict[str, Any] | None = None) -> ModelSpec:
    """A model with ``layer`` alone; its inputs are named after the layers feeding it.
    Localization, the deviation oracle's own-layer check and repro scripts all run a layer
    alone, so it is built here, beside the spec it is cut from.  ``layer_inputs`` holds
    every tensor the layer reads (:attr:`LayerSpec.reads`: its mask's input too)."""
    ls = spec.layer(layer)
    names = ls.reads
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
    return ModelSpec(f"{spec.name}-{layer}", inputs,
                     [LayerSpec(layer, ls.api, params, list(ls.inputs), call=dict(ls.call))], output=layer, logits=layer)


def activation_spec(spec: ModelSpec, layer: str, activation: str, pre: np.ndarray) -> ModelSpec:
    """``layer``'s activation alone: a Keras ``Activation`` layer of the same name and dtype
    policy, fed ``pre`` (the layer's output with ``activation: linear``).  With
    :func:`one_layer_spec` it splits a layer into its linear part and its activation."""
    params: dict[str, Any] = {"activation": activation}
    if "dtype" in spec.layer(layer).params:
        params["dtype"] = spec.layer(layer).params["dtype"]
    src = f"{layer}_pre"
    shape = tuple(int(d) for d in np.shape(pre)[1:])
    return ModelSpec(f"{spec.name}-{layer}-activation", [InputSpec(src, shape, str(np.asarray(pre).dtype))],
                     [LayerSpec(layer, "Activation", params, [src])], output=layer, logits=layer)


def layer_feed(spec: ModelSpec, layer: str, layers: Mapping[str, np.ndarray],
               inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
    """Every tensor ``layer`` reads (:attr:`LayerSpec.reads`), from one run's ``layers``
    outputs or else the model ``inputs``: what feeds it alone.  None when one is missing
    (the run did not return it): the layer cannot be fed alone."""
    refs = spec.layer(layer).reads
    if not all(r in layers or r in inputs for r in refs):
        return None
    return {r: _as_input(layers[r] if r in layers else inputs[r]) for r in refs}


def _as_input(a: np.ndarray) -> np.ndarray:
    """A tensor as a model input can hold it: a layer's bfloat16 output (a bfloat16 policy; an
    ml_dtypes array, NumPy kind ``V``) as float32, which holds every bfloat16 value exactly (the
    layer's policy casts it back); a model input has no bfloat16 dtype (:data:`DTYPES`), so fed
    as it is the layer could never be judged alone."""
    return numpy_float(a)


def one_layer_model(spec: ModelSpec, weights: Mapping[str, Any], layer: str, feed: dict[str, np.ndarray],
                    override: dict[str, Any] | None = None) -> tuple[ModelSpec, dict[str, Any]] | None:
    """``layer`` alone (:func:`one_layer_spec` fed ``feed``) with its own weights out of
    ``weights``; None when it cannot stand alone, which every diagnosis reads as "not judged
    alone" rather than as evidence."""
    try:
        spec1 = one_layer_spec(spec, layer, feed, override)
    except Exception:  # noqa: BLE001 - a layer that cannot stand alone is not judged alone
        return None
    return spec1, ({layer: weights[layer]} if layer in weights else {})


def linear_part(spec: ModelSpec, weights: Mapping[str, Any], layer: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``layer``'s linear part: the parameter override that takes its bias and activation off
    (``use_bias: False``, ``activation: linear``) and its weights without the bias (the last
    one, 1-D, of a Dense or a convolution), for :func:`one_layer_model`; None when the layer
    has neither to take off (it is its own linear part).  A sum of products is positively
    homogeneous, its bias and activation are not, so an overflow rule that scales the input
    judges this part.  A layer that takes no ``use_bias``, or whose weights are not what is
    assumed here, fails to build: no evidence, never a wrong one."""
    ls = spec.layer(layer)
    override: dict[str, Any] = {}
    if output_activation(ls.api, ls.params) is not None:
        override["activation"] = "linear"
    own = list(weights.get(layer, []))
    if ls.params.get("use_bias", True) is not False and own and np.ndim(own[-1]) == 1:
        override["use_bias"] = False
        own = own[:-1]
    if not override:
        return None
    return override, ({layer: own} if own else {})


# ---- parsing and validation --------------------------------------------------------------
def _req(d: Mapping[str, Any], key: str, typ: type | tuple[type, ...], source: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise SpecError(f"expected an object, got {type(d).__name__}", source=source, field=where)
    if key not in d:
        raise SpecError("missing", source=source, field=f"{where}.{key}" if where else key)
    value = d[key]
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        name = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise SpecError(f"expected {name}, got {type(value).__name__}", source=source,
                        field=f"{where}.{key}" if where else key)
    return value


def _parse(data: Any, source: str) -> ModelSpec:
    if not isinstance(data, Mapping):
        raise SpecError("a model spec must be a JSON object", source=source)
    fmt = data.get("format", SPEC_FORMAT)
    if fmt != SPEC_FORMAT:
        raise SpecError(f"unsupported format {fmt!r} (expected {SPEC_FORMAT!r})", source=source, field="format")
    name = _req(data, "name", str, source, "")
    inputs = []
    for k, raw in enumerate(_req(data, "inputs", list, source, "")):
        where = f"inputs[{k}]"
        shape = _req(raw, "shape", list, source, where)
        if not shape or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape):
            raise SpecError(f"shape must be a non-empty list of positive ints, got {shape!r}",
                            source=source, field=f"{where}.shape")
        dtype = raw.get("dtype", "float32")
        if dtype not in DTYPES:
            raise SpecError(f"unknown dtype {dtype!r} (one of {', '.join(DTYPES)})", source=source,
                            field=f"{where}.dtype")
        rng = raw.get("range")
        if rng is not None and (not isinstance(rng, list) or len(rng) != 2
                                or not all(isinstance(v, (int, float)) for v in rng) or rng[0] >= rng[1]):
            raise SpecError(f"range must be [low, high] with low < high, got {rng!r}", source=source,
                            field=f"{where}.range")
        inputs.append(InputSpec(_req(raw, "name", str, source, where), tuple(shape), dtype,
                                tuple(rng) if rng is not None else None))
    layers = []
    for k, raw in enumerate(_req(data, "layers", list, source, "")):
        where = f"layers[{k}]"
        lname = _req(raw, "name", str, source, where)
        where = f"layers[{lname}]" if isinstance(lname, str) else where
        params = _req(raw, "params", dict, source, where) if "params" in raw else {}
        fixed = raw.get("fixed", [])
        if not isinstance(fixed, list) or not all(isinstance(f, str) for f in fixed):
            raise SpecError("must be a list of parameter names", source=source, field=f"{where}.fixed")
        layer_inputs = _req(raw, "inputs", list, source, where)
        if not all(isinstance(i, str) for i in layer_inputs):
            raise SpecError("must be a list of layer or input names", source=source, field=f"{where}.inputs")
        call = raw.get("call", {})
        if not isinstance(call, dict):
            raise SpecError(f"expected an object of call arguments, got {type(call).__name__}", source=source,
                            field=f"{where}.call")
        layers.append(LayerSpec(lname, _req(raw, "api", str, source, where), dict(params),
                                list(layer_inputs), list(fixed), dict(call)))
    output = _req(data, "output", str, source, "")
    logits = data.get("logits")
    if logits is not None and not isinstance(logits, str):
        raise SpecError("expected a layer name", source=source, field="logits")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise SpecError("expected an object", source=source, field="meta")
    roundtrip = data.get("roundtrip")
    if roundtrip is not None and roundtrip not in ROUNDTRIPS:
        raise SpecError(f"unknown round trip {roundtrip!r} (one of {', '.join(ROUNDTRIPS)})", source=source,
                        field="roundtrip")
    exact = data.get("exact", False)
    if not isinstance(exact, bool):
        raise SpecError(f"expected true or false, got {type(exact).__name__}", source=source, field="exact")
    return ModelSpec(name, inputs, layers, output, logits, meta, roundtrip, exact)


def _check_json_value(value: Any, source: str, where: str) -> None:
    if isinstance(value, _JSON_SCALARS):
        if isinstance(value, float) and not np.isfinite(value):
            return  # NaN/inf are legitimate crafty values; json.dumps writes them as NaN/Infinity
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json_value(v, source, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise SpecError("object keys must be strings", source=source, field=where)
            _check_json_value(v, source, f"{where}.{k}")
        return
    raise SpecError(f"parameter values must be JSON data, got {type(value).__name__}", source=source, field=where)


def validate(spec: ModelSpec, *, source: str = "<spec>", apis: Mapping[str, Any] | None = None) -> None:
    """Check names, references, acyclicity and (given API configs) APIs and parameter types.

    With ``apis``, a configured layer's parameters are checked against its config, and a
    layer without one must be a ``keras.layers`` class (it runs unmutated).
    Raises :class:`SpecError` naming the field.  Values an API config lists as *invalid* are
    accepted: a mutated spec carries them on purpose.
    """
    seen: set[str] = set()
    for inp in spec.inputs:
        if not _NAME.match(inp.name):
            raise SpecError(f"bad name {inp.name!r}", source=source, field="inputs")
        if inp.name in seen:
            raise SpecError(f"duplicate name {inp.name!r}", source=source, field="inputs")
        seen.add(inp.name)
    if not spec.inputs:
        raise SpecError("a model needs at least one input", source=source, field="inputs")
    for layer in spec.layers:
        where = f"layers[{layer.name}]"
        if not _NAME.match(layer.name):
            raise SpecError(f"bad layer name {layer.name!r} (letters, digits, _)", source=source, field=where)
        if layer.name in seen:
            raise SpecError(f"duplicate name {layer.name!r}", source=source, field=where)
        seen.add(layer.name)
        if not layer.inputs:
            raise SpecError("a layer needs at least one input", source=source, field=f"{where}.inputs")
        _check_json_value(layer.params, source, f"{where}.params")
        _check_call(layer, spec, source, f"{where}.call")
        _refuse_code_layers(layer, source, where)
        if layer.api in OWNED_LAYERS:  # audee's own layers: their closed parameter sets
            problem = check_owned(layer.api, layer.params)
            if problem is not None:
                raise SpecError(problem, source=source, field=f"{where}.params")
        elif apis is not None:
            if layer.api in apis:
                apis[layer.api].check_params(layer.params, source=source, where=f"{where}.params")
            else:
                _check_keras_layer(layer.api, source, f"{where}.api")
    names = {layer.name for layer in spec.layers} | set(spec.input_names)
    for layer in spec.layers:
        for ref in layer.inputs:
            if ref not in names:
                raise SpecError(f"unknown input name {ref!r}", source=source, field=f"layers[{layer.name}].inputs")
    for key, ref in (("output", spec.output), ("logits", spec.logits)):
        if ref is not None and ref not in {layer.name for layer in spec.layers}:
            raise SpecError(f"unknown layer {ref!r}", source=source, field=key)
    _toposort(spec, source=source)


def _check_call(layer: LayerSpec, spec: ModelSpec, source: str, where: str) -> None:
    """A layer's call arguments: known names (:data:`audee.apis.call_args.CALL_ARGS`), a
    boolean ``training`` (null: the model's mode) or ``use_causal_mask``, each only for a Keras
    layer whose call takes it (a name Keras does not know is left to the API check); a ``mask``
    naming an integer model input (:func:`_check_mask`)."""
    from audee.apis.call_args import CALL_ARGS, takes_causal_mask, takes_training
    from audee.apis.keras_layers import is_keras_layer

    for key, value in layer.call.items():
        if key not in CALL_ARGS:
            raise SpecError(f"unknown call argument {key!r} (one of {', '.join(CALL_ARGS)})", source=source,
                            field=f"{where}.{key}")
        if key == "training":
            if value is not None and not isinstance(value, bool):
                raise SpecError(f"expected true, false or null, got {value!r}", source=source, field=f"{where}.{key}")
            if is_keras_layer(layer.api) and not takes_training(layer.api):
                raise SpecError(f"{layer.api}'s call takes no training argument", source=source,
                                field=f"{where}.{key}")
        if key == "use_causal_mask":
            if not isinstance(value, bool):
                raise SpecError(f"expected true or false, got {value!r}", source=source, field=f"{where}.{key}")
            if is_keras_layer(layer.api) and not takes_causal_mask(layer.api):
                raise SpecError(f"{layer.api}'s call takes no use_causal_mask argument", source=source,
                                field=f"{where}.{key}")
        if key == "mask":
            _check_mask(layer, spec, value, source, f"{where}.{key}")


def _check_mask(layer: LayerSpec, spec: ModelSpec, value: Any, source: str, where: str) -> None:
    """A ``mask``: the name of an integer model input, on a layer whose call takes one
    (:data:`audee.apis.call_args.MASK_LAYERS`), of the shape the layer takes
    (:func:`audee.apis.call_args.mask_shape`) where its input is a model input (a layer
    output's shape is known only when the model is built: ``keras_build`` checks it)."""
    from audee.apis.call_args import MASK_LEFT_OUT, mask_shape, takes_mask

    if not takes_mask(layer.api):
        why = MASK_LEFT_OUT.get(layer.api)
        raise SpecError(f"{layer.api}'s call takes no mask" + (f" a spec can give ({why})" if why else ""),
                        source=source, field=where)
    if not isinstance(value, str):
        raise SpecError(f"expected the name of an integer model input, got {value!r}", source=source, field=where)
    inputs = {i.name: i for i in spec.inputs}
    if value not in inputs:
        what = "a layer, not a model input" if value in set(spec.layer_names()) else "no model input"
        raise SpecError(f"{value!r} is {what}: a mask is made from an integer model input", source=source,
                        field=where)
    m = inputs[value]
    if not m.is_integer:
        raise SpecError(f"input {value!r} is {m.dtype}: a mask is made from an integer input (m != 0)",
                        source=source, field=where)
    src = inputs.get(layer.inputs[0]) if layer.inputs else None
    if src is not None:
        want = mask_shape(layer.api, layer.params, src.shape)
        if tuple(m.shape) != want:
            raise SpecError(f"input {value!r} has shape {list(m.shape)}, {layer.api}'s mask for input "
                            f"{src.name!r} {list(src.shape)} needs {list(want)}", source=source, field=where)


def _refuse_code_layers(layer: LayerSpec, source: str, where: str) -> None:
    """A layer, or a layer nested anywhere in its parameters (a wrapper's ``layer``,
    ``Bidirectional``'s ``backward_layer``, a config in a list or dict at any depth), whose
    parameters are code to run is refused, naming its path: nothing a spec or case file
    holds may choose code (``CODE_LAYERS``)."""
    from audee.apis.keras_layers import runs_code

    if runs_code(layer.api):
        raise SpecError(f"{layer.api} runs code its parameters name: audee builds no such layer", source=source,
                        field=f"{where}.api")
    stack: list[tuple[str, Any]] = [(f"{where}.params", layer.params)]
    while stack:  # iterative: a deeply nested value cannot overflow the interpreter's stack
        path, value = stack.pop()
        if isinstance(value, Mapping):
            for key in ("api", "class_name"):  # a spec's nested layer; a Keras serialized config
                named = value.get(key)
                if isinstance(named, str) and runs_code(named):
                    raise SpecError(f"{named} runs code its parameters name: audee builds no such layer",
                                    source=source, field=f"{path}.{key}")
            stack.extend((f"{path}.{k}", v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))


def _check_keras_layer(api: str, source: str, where: str) -> None:
    """A layer without an API config runs as it is (mutation leaves it alone), so any
    ``keras.layers`` class is accepted; a name Keras does not know is an error."""
    from audee.apis.keras_layers import is_keras_layer, keras_version

    if not is_keras_layer(api):
        raise SpecError(f"unknown API {api!r}: not a keras.layers layer (Keras {keras_version()})",
                        source=source, field=where)


def _toposort(spec: ModelSpec, *, source: str = "<spec>") -> list[str]:
    known = set(spec.input_names)
    pending = list(spec.layers)
    order: list[str] = []
    while pending:
        progress = [layer for layer in pending if all(i in known for i in layer.inputs)]
        if not progress:
            cyc = ", ".join(sorted(layer.name for layer in pending))
            raise SpecError(f"the layer graph has a cycle through {cyc}", source=source, field="layers")
        for layer in progress:
            known.add(layer.name)
            order.append(layer.name)
        pending = [layer for layer in pending if layer.name not in known]
    return order


# ---- weights -----------------------------------------------------------------------------
def contiguous(a: Any) -> np.ndarray:
    """``a`` as a C-contiguous array of its own shape: numpy's ``ascontiguousarray`` returns
    at least one dimension, so a scalar weight (Attention's ``concat_score_weight``) would
    come back with shape ``(1,)`` and no longer fit its variable."""
    a = np.asarray(a)
    return np.ascontiguousarray(a).reshape(a.shape)


def weights_key(weights: Weights) -> str:
    """A content hash of a weight set (cheap enough per test case: it hashes bytes once)."""
    h = hashlib.sha1()
    for name in sorted(weights):
        h.update(name.encode())
        for arr in weights[name]:
            a = np.asarray(arr)
            h.update(str(a.shape).encode() + a.dtype.str.encode())
            flat = np.ascontiguousarray(a)  # at least 1-d: a byte view of a 0-d array is refused
            h.update(flat.view(np.uint8).data if a.size else b"")  # raw bytes: bfloat16 has no buffer format
    return h.hexdigest()[:16]


def save_weights(weights: Weights, path: str | Path) -> None:
    from audee.store.atomic import write_via  # deferred: the audee.store package imports this module

    arrays = {f"{name}/{i}": np.asarray(a) for name, arrs in weights.items() for i, a in enumerate(arrs)}
    write_via(path, lambda f: np.savez_compressed(f, **arrays))


def load_weights(path: str | Path) -> Weights:
    out: Weights = {}
    with open_regular(path, MAX_DATA_BYTES) as f, np.load(f, allow_pickle=False) as data:
        items = sorted(((k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1]), k) for k in data.files),
                       key=lambda t: (t[0], t[1]))
        for name, _, key in items:
            out.setdefault(name, []).append(data[key])
    return out


def weight_shapes(weights: Weights) -> dict[str, list[tuple[int, ...]]]:
    return {name: [tuple(a.shape) for a in arrs] for name, arrs in weights.items()}
