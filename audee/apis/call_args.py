"""A layer's call arguments a spec may set, without importing Keras.

A spec layer may say how it is *called* (``"call": {"training": true}``), not only how it
is built: a ``BatchNormalization`` called with ``training=True`` normalizes with the
batch's own statistics even when the model runs for inference, and one called with
``training=False`` keeps its moving statistics while the model trains.  The spec is
checked in the parent process, where Keras is not imported, so the names of the layers
whose ``call`` takes ``training`` (in the pinned Keras 3.15) are listed here;
``tests/test_train_spec.py`` checks the list against the installed Keras
(:func:`training_layers_from`).

Some layers are *random* in training mode (dropout, noise, the ``Random*`` augmentation
layers, recurrent and attention layers with a dropout rate): each framework draws its own
masks, so their training-mode outputs cannot agree across backends.
:func:`random_in_training` says which and why; the training phase calls them in inference
mode unless a spec asks otherwise (``audee.train.setup.train_spec``).  API-level mutation
draws ``training=True`` for them too: such a case's values are not compared
(:func:`random_values`), only whether each backend accepts it and the shapes and dtypes
Keras declares for it (CutMix refusing bfloat16 on torch and TensorFlow, findings row 118).

An attention layer may be called with ``use_causal_mask`` (``"call": {"use_causal_mask": true}``):
each query position attends to the value positions up to its own only (:data:`CAUSAL_LAYERS`,
checked against the installed Keras with :func:`causal_layers_from`).

A layer may also be called with a ``mask`` (``"call": {"mask": "m"}``): ``m`` names an
integer *model input* (never a layer output, so the spec's order stays as it is) and the
layer gets ``m != 0``, a boolean tensor the model makes itself (``keras.ops.not_equal``:
the converters see an ordinary op).  :data:`MASK_LAYERS` lists the layers whose call takes
one (``tests/test_mask.py`` checks it against the installed Keras with
:func:`mask_layers_from`), :func:`mask_shape` the mask's shape for a layer input's shape,
and :func:`draw_masks` the 0/1 rows a mask input is fed (padded sequences).
"""
from __future__ import annotations

import inspect
from typing import Any, Iterable, Mapping

import numpy as np

#: the call arguments a spec layer may set (``"call": {...}``)
CALL_ARGS = ("training", "mask", "use_causal_mask")

#: every keras.layers class whose ``call`` takes ``use_causal_mask`` (Keras 3.15.1): attention
#: layers that, with it true, let each query position attend to the positions up to its own only
CAUSAL_LAYERS = frozenset({"AdditiveAttention", "Attention", "GroupQueryAttention", "MultiHeadAttention"})

#: every keras.layers class whose ``call`` takes ``training`` (Keras 3.15.1; aliases included)
TRAINING_LAYERS = frozenset({
    "AdditiveAttention", "AlphaDropout", "Attention", "AugMix", "AutoContrast", "BatchNormalization", "Bidirectional",
    "CenterCrop", "ContrastLimitedAdaptiveHistogramEqualization", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "CutMix",
    "Dense", "Dropout", "EinsumDense", "Equalization", "FlaxLayer", "GRU", "GRUCell", "GaussianDropout",
    "GaussianNoise", "GroupQueryAttention", "JaxLayer", "LSTM", "LSTMCell", "Lambda", "MaxNumBoundingBoxes", "MixUp",
    "MultiHeadAttention", "Pipeline", "RNN", "RandAugment", "RandomBrightness", "RandomColorDegeneration",
    "RandomColorJitter", "RandomContrast", "RandomCrop", "RandomElasticTransform", "RandomErasing", "RandomFlip",
    "RandomGaussianBlur", "RandomGrayscale", "RandomHue", "RandomInvert", "RandomPerspective", "RandomPosterization",
    "RandomRotation", "RandomSaturation", "RandomSharpness", "RandomShear", "RandomTranslation", "RandomZoom",
    "Resizing", "SimpleRNN", "SimpleRNNCell", "Solarization", "SpatialDropout1D", "SpatialDropout2D",
    "SpatialDropout3D", "SpectralNormalization", "StackedRNNCells", "TFSMLayer", "TimeDistributed",
    "TorchModuleWrapper"})

#: layers random in training mode, by the parameter that turns the randomness off at 0
RATE_PARAMS = {"Dropout": "rate", "SpatialDropout1D": "rate", "SpatialDropout2D": "rate",
               "SpatialDropout3D": "rate", "GaussianDropout": "rate", "AlphaDropout": "rate",
               "GaussianNoise": "stddev"}
#: augmentation layers random in training whatever their parameters (besides ``Random*``)
ALWAYS_RANDOM = frozenset({"AugMix", "CutMix", "MixUp", "RandAugment", "Solarization"})
#: parameters of other layers (recurrent, attention) that draw masks in training when above 0
DROPOUT_PARAMS = ("dropout", "recurrent_dropout")


#: every keras.layers class whose ``call`` takes ``mask`` and that a spec may call with one
#: (Keras 3.15.1; aliases included), by the axes of the layer input the mask covers:
#: ``time`` the steps axis (batch excluded), ``all_but_last`` every axis but the features,
#: ``all`` the input's own shape
MASK_LAYERS: dict[str, str] = {
    "SimpleRNN": "time", "LSTM": "time", "GRU": "time", "RNN": "time", "Bidirectional": "time",
    "ConvLSTM1D": "time", "ConvLSTM2D": "time", "ConvLSTM3D": "time", "TimeDistributed": "time",
    "GlobalAveragePooling1D": "time", "GlobalAvgPool1D": "time",
    "BatchNormalization": "all_but_last", "Softmax": "all"}
#: layers whose call takes ``mask`` but that a spec may not call with one, and why
MASK_LEFT_OUT: dict[str, str] = {
    "Attention": "takes a list of masks, one per input (query, value)",
    "AdditiveAttention": "takes a list of masks, one per input (query, value)",
    "Lambda": "runs code its parameters name: audee builds no such layer",
    "Pipeline": "a list of layers, none of which a spec can name"}
#: the share of mask rows with a trailing run of zeros (padded), of all-zero rows (each layer
#: defines a fully masked row its own way: docs/mutation.md), the rest all ones
MASK_PADDED, MASK_EMPTY = 0.6, 0.1
#: layers whose output for a fully masked row Keras leaves undefined, and what they make of
#: it (alike on every backend: tests/test_mask.py); their masks get no all-zero rows.  The
#: recurrent layers return their initial state (zeros) and Softmax zeros, as documented.
EMPTY_UNDEFINED: dict[str, str] = {
    "GlobalAveragePooling1D": "the mean over no steps, 0/0: NaN on every backend",
    "GlobalAvgPool1D": "the mean over no steps, 0/0: NaN on every backend"}
#: how :func:`draw_masks` draws, as a spec's ``meta["inputs"]`` records it
MASK_ROWS = f"0/1 mask rows: a trailing run of zeros ({MASK_PADDED:g}), all zeros ({MASK_EMPTY:g}), else all ones"


def takes_mask(api: str) -> bool:
    """Whether a spec layer of ``api`` may be called with a ``mask`` (:data:`MASK_LAYERS`)."""
    return api in MASK_LAYERS


def mask_shape(api: str, params: Mapping[str, Any], shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape (batch excluded) of the mask a layer of ``api`` with ``params`` takes for an
    input of ``shape`` (batch excluded): the steps axis of recurrent and 1D-pooling layers
    (the last one for a channels_first ``GlobalAveragePooling1D``), every axis but the
    features for BatchNormalization, the whole input for Softmax."""
    how = MASK_LAYERS[api]
    if how == "all":
        return tuple(shape)
    if how == "all_but_last":
        return tuple(shape[:-1])
    if api in ("GlobalAveragePooling1D", "GlobalAvgPool1D") and params.get("data_format") == "channels_first":
        return tuple(shape[-1:])
    return tuple(shape[:1])


def draw_masks(shape: tuple[int, ...], rng: np.random.Generator, dtype: str = "int32",
               apis: Iterable[str] = ()) -> np.ndarray:
    """0/1 mask rows of ``shape`` (batch first), as padded sequences make them: each row
    all ones, or ones then a trailing run of zeros along its first axis after the batch
    (:data:`MASK_PADDED`; at least one step kept), or all zeros (:data:`MASK_EMPTY`)
    unless one of ``apis``, the layers the mask is given to, leaves a fully masked row
    undefined (:data:`EMPTY_UNDEFINED`)."""
    out = np.ones(shape, dtype=dtype)
    if len(shape) < 2:
        return out
    steps = shape[1]
    empty = 0.0 if any(a in EMPTY_UNDEFINED for a in apis) else MASK_EMPTY
    for r in range(shape[0]):
        u = rng.random()
        if u < empty:
            out[r] = 0
        elif u < MASK_EMPTY + MASK_PADDED and steps > 1:
            out[r, int(rng.integers(1, steps)):] = 0
    return out


def mask_layers_from(keras: Any) -> frozenset[str]:
    """The layers whose ``call`` takes ``mask`` as the given Keras module makes them
    (:data:`MASK_LAYERS` and :data:`MASK_LEFT_OUT` together)."""
    from audee.apis.keras_layers import layer_names_from

    return frozenset(n for n in layer_names_from(keras)
                     if "mask" in inspect.signature(getattr(keras.layers, n).call).parameters)


def takes_causal_mask(api: str) -> bool:
    """Whether ``keras.layers.<api>``'s call takes ``use_causal_mask`` (:data:`CAUSAL_LAYERS`)."""
    return api in CAUSAL_LAYERS


def causal_layers_from(keras: Any) -> frozenset[str]:
    """:data:`CAUSAL_LAYERS` as the given Keras module makes it."""
    from audee.apis.keras_layers import layer_names_from

    return frozenset(n for n in layer_names_from(keras)
                     if "use_causal_mask" in inspect.signature(getattr(keras.layers, n).call).parameters)


def takes_training(api: str) -> bool:
    """Whether ``keras.layers.<api>``'s call takes ``training`` (:data:`TRAINING_LAYERS`)."""
    return api in TRAINING_LAYERS


def random_in_training(api: str, params: Mapping[str, Any]) -> str | None:
    """Why a layer (API and parameters, a wrapper's inner ``layer`` too) is random in
    training mode, or None when it is deterministic there."""
    if api in ALWAYS_RANDOM or (api.startswith("Random") and api in TRAINING_LAYERS):
        return f"{api} draws random transformations in training"
    rate = RATE_PARAMS.get(api)
    if rate is not None and _positive(params.get(rate, 0.5 if rate == "rate" else 1.0)):
        return f"{api} draws a random mask or noise in training ({rate}={params.get(rate)!r})"
    for p in DROPOUT_PARAMS:
        if _positive(params.get(p, 0.0)):
            return f"{api} drops at random in training ({p}={params[p]!r})"
    for value in params.values():
        if isinstance(value, Mapping) and isinstance(value.get("api"), str):
            inner = random_in_training(value["api"], value.get("params") or {})
            if inner is not None:
                return inner
    return None


def random_values(layers: Iterable[Any]) -> str | None:
    """Why a model's values differ from backend to backend by design, or None when they are
    comparable: a layer (a spec layer: ``api``, ``params``, ``call``) called with
    ``training=True`` that is random in training (:func:`random_in_training`), each
    framework drawing its own masks or transformations."""
    for layer in layers:
        if (layer.call or {}).get("training") is True:
            why = random_in_training(layer.api, layer.params)
            if why is not None:
                return why
    return None


def _positive(v: Any) -> bool:
    """A rate that draws masks: a number above 0 (anything else, an invalid draw, counts too)."""
    if isinstance(v, bool) or v is None:
        return False
    if isinstance(v, (int, float)):
        return v > 0 or v != v  # NaN: whatever the framework makes of it, not 0
    return True


def training_layers_from(keras: Any) -> frozenset[str]:
    """:data:`TRAINING_LAYERS` as the given Keras module makes it."""
    from audee.apis.keras_layers import layer_names_from

    return frozenset(n for n in layer_names_from(keras)
                     if "training" in inspect.signature(getattr(keras.layers, n).call).parameters)


__all__ = ["ALWAYS_RANDOM", "CALL_ARGS", "CAUSAL_LAYERS", "DROPOUT_PARAMS", "EMPTY_UNDEFINED", "MASK_LAYERS", "MASK_LEFT_OUT", "MASK_ROWS", "RATE_PARAMS",
           "TRAINING_LAYERS", "draw_masks", "mask_layers_from", "mask_shape", "random_in_training", "random_values", "takes_mask",
           "takes_training", "training_layers_from", "causal_layers_from", "takes_causal_mask"]
