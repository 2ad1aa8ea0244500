"""Build a Keras functional model from a ModelSpec (runs inside a worker, after keras import).

The built model returns *every* layer's output, in the spec's topological order, so one
compiled call serves both the logits oracle and the per-layer NaN / distance oracles.
"""
from __future__ import annotations

import functools

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from audee.apis.keras_layers import runs_code
from audee.apis.owned_layers import OWNED_LAYERS, owned_layer, round_trip
from audee.cases.spec import LayerSpec, ModelSpec, Weights

MERGE_APIS = frozenset({"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot"})
#: layers whose call takes each input as its own positional argument (query, value), not one list
POSITIONAL_INPUT_APIS = frozenset({"MultiHeadAttention", "GroupQueryAttention"})

LayerFactory = Callable[[LayerSpec], Any]


def default_layer(keras: Any, layer: LayerSpec) -> Any:
    """Instantiate ``keras.layers.<api>(**params, name=...)``; nested ``layer`` params
    (Bidirectional, TimeDistributed) are built recursively."""
    params = dict(layer.params)
    for key, value in list(params.items()):
        if isinstance(value, dict) and "api" in value:
            inner = LayerSpec(f"{layer.name}_{key}", value["api"], dict(value.get("params", {})), [])
            params[key] = default_layer(keras, inner)
    if runs_code(layer.api):  # the parent validates specs too; a worker never builds one either way
        raise ValueError(f"{layer.api} runs code its parameters name: audee builds no such layer")
    if layer.api in OWNED_LAYERS:  # audee's own layers, a closed whitelist (audee.apis.owned_layers)
        return owned_layer(keras, layer.api, params, layer.name)
    try:
        cls = getattr(keras.layers, layer.api)
    except AttributeError:
        raise ValueError(f"keras.layers has no API {layer.api!r}") from None
    return cls(**params, name=layer.name)


ToNative = Callable[[np.ndarray], Any]


def force_call_args(layer: Any, call: dict[str, Any]) -> None:
    """Make ``layer`` take the spec's call arguments (``training``) on every call, whatever
    mode the model runs in.  A functional model passes its own ``training`` to every node
    that takes one (``keras.src.models.functional.operation_fn``), overriding what the node
    was called with at build, so the value is set inside the layer's ``call`` itself (an
    instance attribute over the method: plugins' layers keep their own ``call``); the call
    context the layer hands its sublayers follows it, the layers after it do not.  A
    ``mask`` is a tensor of the graph, not a constant: the model passes it (:func:`call_mask`)."""
    fixed = {k: v for k, v in call.items() if v is not None and k != "mask"}
    if not fixed:
        return
    inner = layer.call

    def call_with(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(fixed)
        return inner(*args, **kwargs)

    object.__setattr__(layer, "call", call_with)


def call_mask(keras: Any, ls: LayerSpec, tensors: dict[str, Any], masks: dict[str, Any]) -> dict[str, Any]:
    """The ``mask`` keyword a layer is called with: ``m != 0`` of its spec's mask input
    (made once per input in ``masks``), checked against the shape the layer takes for its
    input (:func:`audee.apis.call_args.mask_shape`; the spec checks it where that input is
    a model input); {} for a layer called without one."""
    from audee.apis.call_args import mask_shape

    if not ls.mask:
        return {}
    src = tensors[ls.inputs[0]]
    want = mask_shape(ls.api, ls.params, tuple(src.shape[1:]))
    got = tuple(tensors[ls.mask].shape[1:])
    if got != want:
        raise ValueError(f"layers[{ls.name}].call.mask: input {ls.mask!r} has shape {list(got)}, {ls.api}'s mask "
                         f"for its input {list(src.shape[1:])} needs {list(want)}")
    if ls.mask not in masks:
        masks[ls.mask] = keras.ops.not_equal(tensors[ls.mask], 0)
    return {"mask": masks[ls.mask]}


class _Placeholder:
    """Stands in for a Keras initializer while a model is built for weights that replace
    every layer weight anyway: zeros from numpy, no framework op.  Running the real
    initializers costs a random draw per variable, and on JAX a compilation per new
    weight shape (1 to 2.3 s per LeNet-5 variant).  ``native`` hands the zeros
    over as the backend's own array where the variable would otherwise convert them with
    a framework op (JAX's ``asarray`` is a small compilation per new shape)."""

    def __init__(self, native: ToNative | None = None):
        self.native = native

    def __call__(self, shape: Any, dtype: Any = None) -> Any:
        from audee.cases.weights import numpy_dtype

        zeros = np.zeros(tuple(int(d) for d in shape), numpy_dtype(dtype or "float32"))
        return zeros if self.native is None else self.native(zeros)


@contextmanager
def placeholder_initializers(native: ToNative | None = None) -> Iterator[list[tuple[Any, Any]]]:
    """While active, every Keras variable created from a ``keras.initializers.Initializer``
    starts as zeros; yields the (variable, real initializer) pairs so that the variables
    audee does not replace (:meth:`BuiltModel.__init__` checks) get their real values.
    Plain-function initializers (seed-generator states) run as usual, and so does
    ``Orthogonal``: on torch its value comes out transposed (a non-contiguous parameter),
    a weight assigned later keeps that memory layout, and the layout changes a matmul's
    rounding; the recurrent kernels of RNN layers default to it."""
    from keras import initializers
    from keras.src.backend.common import variables

    cls = variables.Variable  # every backend's variable class derives from it
    original = cls.__init__
    skipped: list[tuple[Any, Any]] = []
    placeholder = _Placeholder(native)

    def init(self: Any, initializer: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(initializer, initializers.Initializer) and not isinstance(initializer, initializers.Orthogonal):
            original(self, placeholder, *args, **kwargs)
            skipped.append((self, initializer))
        else:
            original(self, initializer, *args, **kwargs)

    cls.__init__ = init
    try:
        yield skipped
    finally:
        cls.__init__ = original


def numpy_dtype(name: str) -> np.dtype | None:
    """A Keras variable's dtype as numpy names it (bfloat16 through ml_dtypes), None for
    one numpy cannot name."""
    try:
        return np.dtype(name)
    except TypeError:
        return None


class BuiltModel:
    """A Keras model over all layer outputs, plus the bookkeeping to move weights in and out.

    ``init_weights=False``: the layer weights start as zeros instead of running their
    initializers (a worker replaces every one of them before a run: ``check_weights``
    refuses a partial set); any other variable still gets its initializer's value.
    ``native`` turns those zeros into the backend's own arrays (see :class:`_Placeholder`)."""

    def __init__(self, spec: ModelSpec, keras: Any, make_layer: LayerFactory | None = None, *,
                 init_weights: bool = True, native: ToNative | None = None):
        if init_weights:
            self._build(spec, keras, make_layer)
            return
        with placeholder_initializers(native) as skipped:
            self._build(spec, keras, make_layer)
        replaced = {id(v) for layer in self.layers.values() for v in layer.weights}
        for variable, initializer in skipped:
            if id(variable) in replaced:
                continue
            if variable._value is None:  # deferred (created in a stateless scope): the real one later
                variable._initializer = initializer
            else:
                variable.assign(initializer(variable.shape, dtype=variable.dtype))

    @functools.cached_property
    def keras_jits(self) -> bool:
        """Whether Keras compiles this model itself (its trainer's ``model_supports_jit``,
        which ``predict`` and ``fit`` consult under ``jit_compile="auto"``): a layer that
        declares ``supports_jit = False`` (RandomCrop slicing at a traced offset, the
        affine-transform augmentations) makes Keras run the whole model uncompiled, so a
        backend that compiles as Keras does runs it uncompiled too: a refusal under a
        compiler Keras never applies to the model is not the model's bug."""
        from keras.src.trainers.trainer import model_supports_jit

        return bool(model_supports_jit(self.model))

    def _build(self, spec: ModelSpec, keras: Any, make_layer: LayerFactory | None) -> None:
        make_layer = make_layer or (lambda ls: default_layer(keras, ls))
        self.spec = spec
        self.order = spec.topological_order()
        tensors: dict[str, Any] = {}
        self.inputs = []
        for inp in spec.inputs:
            t = keras.Input(shape=inp.shape, dtype=inp.dtype, name=inp.name)
            tensors[inp.name] = t
            self.inputs.append(t)
        self.layers: dict[str, Any] = {}
        masks: dict[str, Any] = {}
        for name in self.order:
            ls = spec.layer(name)
            layer = make_layer(ls)
            if ls.call:
                force_call_args(layer, ls.call)
            args = [tensors[i] for i in ls.inputs]
            kwargs = call_mask(keras, ls, tensors, masks)
            if ls.api in POSITIONAL_INPUT_APIS:
                out = layer(*args, **kwargs)
            else:
                out = layer(args if (len(args) > 1 or ls.api in MERGE_APIS) else args[0], **kwargs)
            if isinstance(out, (list, tuple)):
                raise ValueError(f"layer {name!r} returns {len(out)} tensors; audee needs one output per layer")
            tensors[name] = out
            self.layers[name] = layer
        self.model = keras.Model(self.inputs, [tensors[n] for n in self.order], name="audee_model")
        self._index()

    def _index(self) -> None:
        """Where each layer and weight of :attr:`model` is (after a build or a round trip)."""
        self.logits_index = self.order.index(self.spec.logits_layer)
        self.output_index = self.order.index(self.spec.output)
        # Map every layer weight to its slot among the model's (non-)trainable variables, so
        # stateless calls (JAX, ONNX export) can take weights as plain arguments.
        # The lists are kept: Keras walks every layer for them on each access (0.4 ms for
        # LeNet-5), and a weight-level GA swaps a weight set per individual.
        self.trainable_variables = list(self.model.trainable_variables)
        self.non_trainable_variables = list(self.model.non_trainable_variables)
        tv = {id(v): i for i, v in enumerate(self.trainable_variables)}
        ntv = {id(v): i for i, v in enumerate(self.non_trainable_variables)}
        self.slots: dict[str, list[tuple[bool, int]]] = {}
        for name in self.order:
            self.slots[name] = [(id(v) in tv, tv[id(v)] if id(v) in tv else ntv[id(v)])
                                for v in self.layers[name].weights]
        # what Keras declares each layer computes (its symbolic output, batch axis open): the
        # contract every layer after it was built from (audee.oracle.declared)
        self.declared = [([None if d is None else int(d) for d in t.shape], str(t.dtype)) for t in self.model.outputs]
        self.shapes = {n: [(v.name, tuple(int(d) for d in v.shape)) for v in self.layers[n].weights]
                       for n in self.order if self.layers[n].weights}
        self.dtypes = {n: [numpy_dtype(v.dtype) for v in self.layers[n].weights] for n in self.shapes}

    # ---- weights ---------------------------------------------------------------------------
    def weight_shapes(self) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
        """Layer -> [(variable role such as 'kernel' or 'moving_mean', shape)] (a copy:
        the built model's own is what :meth:`check_weights` holds every weight set to)."""
        return {n: list(vs) for n, vs in self.shapes.items()}

    def get_weights(self) -> Weights:
        return {n: [np.asarray(w) for w in self.layers[n].get_weights()]
                for n in self.order if self.layers[n].weights}

    def check_weights(self, weights: Weights) -> None:
        """Refuse a weight set that does not fit the built model (names, counts, shapes)."""
        shapes = {n: [s for _, s in vs] for n, vs in self.shapes.items()}
        missing = sorted(set(shapes) - set(weights))
        if missing:
            raise ValueError(f"weights missing for layers {missing}")
        extra = sorted(set(weights) - set(shapes))
        if extra:
            raise ValueError(f"weights given for unknown or weightless layers {extra}")
        for name, want in shapes.items():
            got = [tuple(a.shape) for a in weights[name]]
            if got != want:
                raise ValueError(f"layer {name!r}: weight shapes {got} do not fit {want}")

    def flat_variables(self, weights: Weights) -> tuple[list[Any], list[Any]]:
        """Trainable and non-trainable variable values with ``weights`` put in their slots."""
        tv = [v.value for v in self.trainable_variables]
        ntv = [v.value for v in self.non_trainable_variables]
        for name, slots in self.slots.items():
            for (trainable, idx), arr in zip(slots, weights.get(name, [])):
                (tv if trainable else ntv)[idx] = arr
        return tv, ntv

    def set_weights(self, weights: Weights) -> None:
        for name, arrs in weights.items():
            self.layers[name].set_weights(arrs)

    def round_trip(self, keras: Any, weights: Weights) -> None:
        """Put ``weights`` in (Keras' own ``set_weights``), then save and load the model the
        way its spec says (``spec.roundtrip``) and run the loaded model from now on: its
        layers, variables and the weights it loaded (``audee.apis.owned_layers.round_trip``).
        A failure of the round trip itself is raised as :class:`RoundTripError`."""
        self.check_weights(weights)
        self.set_weights(weights)
        try:
            loaded = round_trip(keras, self.model, self.spec.roundtrip)
            layers = {n: loaded.get_layer(n) for n in self.order}
        except Exception as exc:
            raise RoundTripError(f"round trip ({self.spec.roundtrip}): {type(exc).__name__}: {exc}") from exc
        for name in self.order:  # the call arguments a spec layer is called with, on the loaded layer too
            call = self.spec.layer(name).call
            if call:
                force_call_args(layers[name], call)
        self.model, self.layers = loaded, layers
        self._index()


class RoundTripError(Exception):
    """A model that was built and took its weights could not be saved and loaded back."""
