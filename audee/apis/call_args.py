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
mode unless a spec asks otherwise (``audee.train.setup.train_spec``), and API-level
mutation only draws ``training=True`` for one whose randomness is off (a rate of 0).
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping

#: the call arguments a spec layer may set (``"call": {...}``)
CALL_ARGS = ("training",)

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


__all__ = ["ALWAYS_RANDOM", "CALL_ARGS", "DROPOUT_PARAMS", "RATE_PARAMS", "TRAINING_LAYERS", "random_in_training",
           "takes_training", "training_layers_from"]
