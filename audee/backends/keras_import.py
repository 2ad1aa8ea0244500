"""Import a user's ``.keras`` model as a ModelSpec plus its weights.

Runs where Keras is importable: inside a backend worker (``op_import_keras``), never in
the parent process (``audee.mutation.seeds`` must stay framework-free).  The model's functional
graph is walked from its output back to its inputs; each layer becomes one LayerSpec
whose ``params`` are the layer's ``get_config()`` restricted to constructor arguments
that differ from the constructor's defaults, as plain JSON data.  Dropped on purpose:
``name``/``trainable``, initializers, regularizers and constraints (they do not affect
inference).

The model arrives as it is: each layer's dtype policy is kept as its name (``"float16"``,
``"mixed_bfloat16"``; left out only where it is the policy the layer gets without one,
float32 for most layers), any ``keras.layers`` layer is imported whether or not it has an
API config (one without runs unmutated), the inputs keep their
dtypes, and integer inputs get no range: token ids the user gives are run as given, even
outside an Embedding's vocabulary (what each framework does with those is its own
behaviour to compare).  Weights keep their variables' dtypes, except bfloat16 ones,
widened to float32 exactly (:func:`_carried`).  Not carried: ``autocast`` (Keras'
``get_config()`` omits it).

A final ``Dense(activation="softmax")`` is split into a linear Dense (same name, same
weights) plus a ``Softmax`` layer, so fitness functions read pre-softmax logits.

Unsupported, with an :class:`AudeeError` naming the file: several outputs, nested
models, layers applied more than once (shared weights), layers returning several
tensors, raw ``keras.ops`` calls in the graph, custom or Lambda layers, inputs of
unknown size or of a dtype audee specs do not carry.
"""
from __future__ import annotations

import contextlib
import inspect
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from audee.core.bounded import MAX_DATA_BYTES, check_regular
from audee.core.errors import AudeeError
from audee.cases.spec import DTYPES, InputSpec, LayerSpec, ModelSpec, Weights, validate

# get_config() keys that are not layer semantics (or that audee sets itself).
_NOISE = frozenset({"name", "trainable", "autocast", "batch_input_shape", "batch_shape",
                    "input_shape", "build_config"})
#: the dtype policy a layer built without ``dtype`` gets (audee never sets a global policy)
DEFAULT_POLICY = "float32"
_DROP_SUFFIXES = ("_initializer", "_regularizer", "_constraint")
_NAME_BAD = re.compile(r"[^A-Za-z0-9_]")


def import_keras_model(path: str | Path, *, check: bool = True) -> tuple[ModelSpec, Weights]:
    """Load ``path`` with ``keras.saving.load_model(compile=False)`` and convert it.

    With ``check`` the spec is rebuilt with audee's own builder and the weights are set
    on it, so a model that imports is one audee can run.
    """
    import keras

    src = str(path)
    check_regular(path, MAX_DATA_BYTES)  # a pipe or a device would hang or fill memory: refused unread
    try:
        with _scratch_tempdir():
            model = keras.saving.load_model(str(path), compile=False)
    except Exception as exc:  # custom objects, corrupt zip, unsafe Lambda, assets filling TMPDIR, ...
        first = (str(exc).strip().splitlines() or [""])[0]
        raise AudeeError(f"keras cannot load it: {type(exc).__name__}: {first[:300]}", source=src) from None
    spec, weights = model_to_spec(model, source=src, name=Path(path).stem)
    if check:
        _check_rebuild(keras, spec, weights, src)
    return spec, weights


@contextlib.contextmanager
def _scratch_tempdir() -> Iterator[None]:
    """Keras extracts a ``.keras`` file's assets into ``tempfile.mkdtemp()`` directories and
    leaves them behind when the extraction fails (a full TMPDIR): every temp dir made while
    loading goes into one scratch dir, removed on every way out."""
    scratch = tempfile.mkdtemp(prefix="audee-keras-load-")
    before = tempfile.tempdir
    tempfile.tempdir = scratch
    try:
        yield
    finally:
        tempfile.tempdir = before
        shutil.rmtree(scratch, ignore_errors=True)


def model_to_spec(model: Any, *, source: str = "<model>", name: str | None = None) -> tuple[ModelSpec, Weights]:
    """Convert an in-memory Keras model (functional or Sequential) to (spec, weights)."""
    import keras

    def fail(msg: str) -> AudeeError:
        return AudeeError(f"unsupported model: {msg}", source=source)

    if not isinstance(model, keras.Model):
        raise fail(f"expected a keras Model, got {type(model).__name__}")
    try:
        model_inputs, model_outputs = list(model.inputs), list(model.outputs)
    except (AttributeError, ValueError):
        raise fail("it has no defined inputs (a Sequential model needs an Input or input shape)") from None
    if len(model_outputs) != 1:
        raise fail(f"{len(model_outputs)} outputs; audee needs a model with exactly one output")

    names = _Names()
    tensor_name: dict[int, str] = {}  # id(KerasTensor) -> spec name of the layer/input producing it
    inputs: list[InputSpec] = []
    input_ops: dict[int, str] = {}
    for t in model_inputs:
        op = t._keras_history.operation
        iname = names.new(getattr(op, "name", None) or t.name)
        shape = tuple(t.shape[1:])
        if not shape or any(d is None for d in shape):
            raise fail(f"input {iname!r} has shape {list(t.shape)}; audee needs a fixed size besides the batch")
        dtype = str(t.dtype)
        if dtype not in DTYPES:
            raise fail(f"input {iname!r} has dtype {dtype} (audee specs carry {', '.join(DTYPES)})")
        inputs.append(InputSpec(iname, tuple(int(d) for d in shape), dtype))
        tensor_name[id(t)] = iname
        if op is not None:
            input_ops[id(op)] = iname

    layers: list[LayerSpec] = []
    weights: Weights = {}
    layer_of: dict[str, Any] = {}
    done: dict[int, str] = {}       # id(layer) -> spec name
    node_of: dict[int, int] = {}    # id(layer) -> node index used

    def visit(tensor: Any) -> str:
        if id(tensor) in tensor_name:
            return tensor_name[id(tensor)]
        hist = getattr(tensor, "_keras_history", None)
        if hist is None:
            raise fail("a tensor in the graph has no producing layer")
        op, node_index, tensor_index = hist
        if id(op) in input_ops:
            return input_ops[id(op)]
        if isinstance(op, keras.layers.InputLayer):
            raise fail(f"the graph uses input {op.name!r}, which is not among the model's inputs")
        if id(op) in done:
            if node_of[id(op)] != node_index:
                raise fail(f"layer {op.name!r} is applied more than once (shared weights)")
            return done[id(op)]
        if isinstance(op, keras.Model):
            raise fail(f"layer {op.name!r} is a nested model ({type(op).__name__}); flatten it first")
        if not isinstance(op, keras.layers.Layer):
            raise fail(f"{op.name!r} is a raw keras.ops call ({type(op).__name__}), not a layer; "
                       "use the matching keras.layers layer")
        node = op._inbound_nodes[node_index]
        if len(node.outputs) != 1 or tensor_index != 0:
            raise fail(f"layer {op.name!r} returns {len(node.outputs)} tensors; audee needs one output per layer")
        api = type(op).__name__
        if getattr(keras.layers, api, None) is not type(op):
            raise fail(f"layer {op.name!r} has class {type(op).__module__}.{api}, not a standard keras.layers API")
        if api == "Lambda":
            raise fail(f"layer {op.name!r} is a Lambda layer (arbitrary Python code)")
        args, kwargs = node.arguments.args, node.arguments.kwargs
        if any(_has_tensor(keras, v) for v in kwargs.values()):
            raise fail(f"layer {op.name!r} is called with tensor keyword arguments "
                       f"({', '.join(k for k, v in kwargs.items() if _has_tensor(keras, v))})")
        if len(args) != 1:
            raise fail(f"layer {op.name!r} is called with {len(args)} positional tensors; "
                       "audee passes one tensor or one list of tensors")
        arg = args[0]
        if isinstance(arg, keras.KerasTensor):
            srcs = [arg]
        elif isinstance(arg, (list, tuple)) and arg and all(isinstance(a, keras.KerasTensor) for a in arg):
            srcs = list(arg)
        else:
            raise fail(f"layer {op.name!r} is called with {type(arg).__name__}, not tensors")
        in_names = [visit(s) for s in srcs]  # post-order: inputs first, so the spec is topological
        if id(op) in done:  # reached again through its own inputs: d(d(x))
            raise fail(f"layer {op.name!r} is applied more than once (shared weights)")
        lname = names.new(op.name)
        params = layer_params(keras, op, source=source, where=f"layers[{lname}]")
        fixed = ["input_dim"] if api == "Embedding" else []
        layers.append(LayerSpec(lname, api, params, in_names, fixed))
        layer_of[lname] = op
        w = [_carried(np.asarray(a)) for a in op.get_weights()]
        if w:
            weights[lname] = w
        done[id(op)] = lname
        node_of[id(op)] = node_index
        tensor_name[id(tensor)] = lname
        return lname

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        out = visit(model_outputs[0])
    finally:
        sys.setrecursionlimit(limit)
    if out in {i.name for i in inputs}:
        raise fail("the output is a model input (no layers)")

    output, logits = out, None
    last = next(layer for layer in layers if layer.name == out)
    if last.api == "Dense" and last.params.get("activation") == "softmax":
        last.params.pop("activation")
        sm = names.new(f"{out}_softmax")
        layers.append(LayerSpec(sm, "Softmax", {}, [out]))
        output, logits = sm, out
    elif (last.api == "Softmax" or (last.api == "Activation" and last.params.get("activation") == "softmax")) \
            and last.inputs[0] not in {i.name for i in inputs}:
        logits = last.inputs[0]
    if logits is not None:
        head = next(layer for layer in layers if layer.name == logits)
        if head.api == "Dense" and "units" not in head.fixed:
            head.fixed.append("units")

    spec = ModelSpec(str(name or model.name), inputs, layers, output, logits,
                     meta={"imported_from": Path(source).name, "keras_version": keras.__version__})
    validate(spec, source=source)
    return spec, weights


def _carried(array: np.ndarray) -> np.ndarray:
    """A weight array as weight files and case files carry it: bfloat16 (an ml_dtypes
    dtype, not a plain numeric one) widened to float32, which is exact; every backend
    rounds it back to the bfloat16 variable unchanged.  Other dtypes stay as they are."""
    return array.astype(np.float32) if str(array.dtype) == "bfloat16" else array


def layer_params(keras: Any, layer: Any, *, source: str, where: str) -> dict[str, Any]:
    """Constructor arguments of ``layer`` that differ from their defaults, as JSON data."""
    try:
        config = layer.get_config()
    except Exception as exc:
        raise AudeeError(f"get_config() failed: {type(exc).__name__}: {exc}", source=source, field=where) from None
    return _clean_config(keras, type(layer), config, source, where, _built_policy(type(layer), config))


def _built_policy(cls: type, config: dict[str, Any]) -> str | None:
    """The dtype policy ``cls`` picks when built from ``config`` without a ``dtype``: float32
    for most layers, but the lookup and hashing layers choose by their settings
    (``Discretization(output_mode="int")``: int64), so ``dtype="float32"`` is not always
    the default.  None when the layer cannot be built that way (the dtype is then kept)."""
    try:
        return str(cls.from_config({k: v for k, v in config.items() if k != "dtype"}).dtype_policy.name)
    except Exception:
        return None


def _clean_config(keras: Any, cls: type, config: dict[str, Any], source: str, where: str,
                  default_policy: str | None = DEFAULT_POLICY) -> dict[str, Any]:
    """The constructor arguments in ``config`` worth carrying: every one that differs from
    its default, and ``dtype`` unless it is the policy the layer would get without it."""
    defaults = _defaults(cls)
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in _NOISE or key.endswith(_DROP_SUFFIXES) or key == "activity_regularizer":
            continue
        if key == "dtype":
            policy = policy_name(keras, value, source, f"{where}.params.dtype")
            if policy != default_policy:
                out[key] = policy
            continue
        value = _json(keras, value, source, f"{where}.params.{key}")
        if key in defaults and (_same(value, defaults[key])
                                or (key == "activation" and value == "linear" and defaults[key] is None)):
            continue
        out[key] = value
    return out


def policy_name(keras: Any, value: Any, source: str, where: str) -> str:
    """A layer's serialized dtype policy as the name its constructor takes (``"float16"``,
    ``"mixed_float16"``): a spec carries JSON, and the name rebuilds the same policy."""
    if value is None:
        return DEFAULT_POLICY
    try:
        return str(keras.dtype_policies.get(value).name)
    except Exception as exc:
        raise AudeeError(f"unknown dtype policy {value!r}: {type(exc).__name__}: {exc}"[:300],
                         source=source, field=where) from None


def _json(keras: Any, value: Any, source: str, where: str) -> Any:
    if isinstance(value, (bool, str, type(None))):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_json(keras, v, source, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        return _json(keras, value.tolist(), source, where)
    if isinstance(value, dict):
        if "class_name" in value and "config" in value:
            cls = getattr(keras.layers, str(value["class_name"]), None)
            if isinstance(cls, type) and issubclass(cls, keras.layers.Layer) \
                    and str(value.get("module", "keras.layers")).startswith("keras"):
                if issubclass(cls, keras.Model):
                    raise AudeeError("a nested model is not supported", source=source, field=where)
                # A wrapped layer (Bidirectional, TimeDistributed): audee's builder takes {"api", "params"}.
                return {"api": cls.__name__,
                        "params": _clean_config(keras, cls, dict(value["config"]), source, where)}
            raise AudeeError(f"a serialized {value['class_name']} object cannot be carried by a spec",
                             source=source, field=where)
        return {str(k): _json(keras, v, source, f"{where}.{k}") for k, v in value.items()}
    raise AudeeError(f"a {type(value).__name__} value cannot be carried by a spec", source=source, field=where)


def _defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):  # subclass defaults win
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        try:
            sig = inspect.signature(init)
        except (TypeError, ValueError):
            continue
        for p in sig.parameters.values():
            if p.default is not inspect.Parameter.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                out[p.name] = p.default
    return out


def _same(value: Any, default: Any) -> bool:
    if isinstance(default, (tuple, list)) and isinstance(value, list):
        return len(value) == len(default) and all(_same(v, d) for v, d in zip(value, default))
    if isinstance(default, (tuple, list, dict)) or callable(default):
        return False
    if type(value) is bool or type(default) is bool:
        return type(value) is type(default) and value == default
    try:
        return bool(value == default) and type(value) in (int, float, str, type(None))
    except Exception:
        return False


def _has_tensor(keras: Any, value: Any) -> bool:
    if isinstance(value, keras.KerasTensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(keras, v) for v in value)
    if isinstance(value, dict):
        return any(_has_tensor(keras, v) for v in value.values())
    return False


class _Names:
    """Identifier-safe, unique spec names from Keras names."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def new(self, raw: str) -> str:
        base = _NAME_BAD.sub("_", str(raw)) or "layer"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "l_" + base
        name, k = base, 1
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name


def _check_rebuild(keras: Any, spec: ModelSpec, weights: Weights, source: str) -> None:
    from audee.backends.keras_build import BuiltModel

    try:
        built = BuiltModel(spec, keras)
        built.check_weights(weights)
        built.set_weights(weights)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise AudeeError(f"the imported spec does not rebuild: {type(exc).__name__}: {first[:300]}",
                         source=source) from None
