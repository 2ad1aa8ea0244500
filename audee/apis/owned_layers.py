"""audee's own layers and the model round trips: the closed whitelist a spec may name
beyond ``keras.layers`` (the equivalence rules need them).

Two layers: ``AudeeReverse`` (the time-reversed sequence: ``go_backwards``' equivalent input)
and ``AudeeFormula`` (a normalization or an activation computed by its documented formula,
written with ``keras.ops``; ``formula`` is one of :data:`FORMULAS`).  Neither takes code:
a spec chooses a name from these closed sets, never a callable, so the rule that nothing in
a case file may choose code still holds.  Three round trips of a built model
(:data:`ROUNDTRIPS`): ``.keras`` save and load, ``get_config``/``from_config`` with
``set_weights``, ``to_json``/``model_from_json`` with ``set_weights``.

This module is the one owner of both, and it stands alone: it imports numpy only, and
takes the ``keras`` module as an argument, so the spec loader reads its names without a
framework, every worker builds the layers through :func:`owned_layer`, and a standalone
repro script carries this file's text verbatim (:mod:`audee.repro`) to run without audee.
"""
import os
import tempfile

import numpy as np

OWNED_LAYERS = ("AudeeReverse", "AudeeFormula")
#: the normalizations (with the weights of the Keras layer they stand for, in its order)
NORM_FORMULAS = ("layer_norm", "batch_norm", "group_norm", "unit_norm")
#: the activations, keras.activations' documented formulas (softplus and tanh in their overflow-free forms)
ACTIVATION_FORMULAS = ("relu", "relu6", "leaky_relu", "elu", "selu", "gelu", "gelu_tanh", "silu", "hard_sigmoid",
                       "hard_silu", "softplus", "softsign", "sigmoid", "tanh", "mish", "exponential", "softmax",
                       "log_softmax")
FORMULAS = NORM_FORMULAS + ACTIVATION_FORMULAS
#: an activation's other names in Keras (``swish`` is ``silu``)
ACTIVATION_ALIASES = {"swish": "silu", "hard_swish": "hard_silu"}
ROUNDTRIPS = ("keras", "config", "json")
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
UNIT_NORM_EPSILON = 1e-12  # UnitNormalization's: x / max(||x||, 1e-12)


def check_owned(api, params):
    """Why the parameters of owned layer ``api`` are wrong (one line), or None."""
    if api == "AudeeReverse":
        axis = params.get("axis", 1)
        if not isinstance(axis, int) or isinstance(axis, bool) or axis == 0:
            return f"axis must be a non-batch axis (an int), got {axis!r}"
        if not isinstance(params.get("autocast", False), bool):
            return f"autocast must be a bool, got {params['autocast']!r}"
        extra = set(params) - {"axis", "dtype", "autocast"}  # autocast: an equivalence rule's feeder's
    elif api == "AudeeFormula":
        if params.get("formula") not in FORMULAS:
            return f"formula must be one of {', '.join(FORMULAS)}, got {params.get('formula')!r}"
        extra = set(params) - {"formula", "axis", "epsilon", "groups", "center", "scale", "dtype"}
    else:
        return f"{api!r} is not an audee layer ({', '.join(OWNED_LAYERS)})"
    return f"unknown parameters {sorted(extra)}" if extra else None


_CLASSES = {}


def owned_classes(keras):
    """The owned layer classes for this ``keras`` module (made once, registered for
    serialization under the package ``audee`` so a saved model holding them loads)."""
    if id(keras) in _CLASSES:
        return _CLASSES[id(keras)]
    ops = keras.ops

    @keras.saving.register_keras_serializable(package="audee")
    class AudeeReverse(keras.layers.Layer):
        """The input reversed along ``axis`` (1: a sequence's time axis)."""

        def __init__(self, axis=1, **kwargs):
            super().__init__(**kwargs)
            self.axis = axis

        def call(self, x):
            return ops.flip(x, axis=self.axis)

        def compute_output_shape(self, shape):
            return shape

        def get_config(self):
            return {**super().get_config(), "axis": self.axis}

    @keras.saving.register_keras_serializable(package="audee")
    class AudeeFormula(keras.layers.Layer):
        """A normalization or activation by its documented formula (``formula``)."""

        def __init__(self, formula, axis=-1, epsilon=1e-3, groups=32, center=True, scale=True, **kwargs):
            super().__init__(**kwargs)
            if formula not in FORMULAS:
                raise ValueError(f"unknown formula {formula!r}")
            self.formula, self.axis, self.epsilon, self.groups = formula, axis, epsilon, groups
            self.center, self.scale = center, scale

        def _axes(self, rank):
            axes = self.axis if isinstance(self.axis, (list, tuple)) else [self.axis]
            return sorted(a % rank for a in axes)

        def build(self, shape):
            f = self.formula
            if f not in ("layer_norm", "batch_norm", "group_norm"):
                return
            rank = len(shape)
            axes = self._axes(rank) if f != "group_norm" else [self.axis % rank]
            wshape = tuple(int(shape[a]) for a in axes)
            if self.scale:
                self.gamma = self.add_weight(shape=wshape, name="gamma", initializer="ones")
            if self.center:
                self.beta = self.add_weight(shape=wshape, name="beta", initializer="zeros")
            if f == "batch_norm":
                self.moving_mean = self.add_weight(shape=wshape, name="moving_mean", initializer="zeros",
                                                   trainable=False)
                self.moving_variance = self.add_weight(shape=wshape, name="moving_variance", initializer="ones",
                                                       trainable=False)

        def _broadcast(self, w, rank, axes):
            shape = [1] * rank
            for a, n in zip(axes, w.shape):
                shape[a] = int(n)
            return ops.reshape(w, shape)

        def _affine(self, y, rank, axes):
            if self.scale:
                y = y * self._broadcast(self.gamma, rank, axes)
            if self.center:
                y = y + self._broadcast(self.beta, rank, axes)
            return y

        def call(self, x):
            f, rank = self.formula, len(x.shape)
            if f == "layer_norm":  # (x - mean) / sqrt(var + epsilon) * gamma + beta over axis
                axes = self._axes(rank)
                mean = ops.mean(x, axis=axes, keepdims=True)
                var = ops.mean(ops.square(x - mean), axis=axes, keepdims=True)
                return self._affine((x - mean) / ops.sqrt(var + self.epsilon), rank, axes)
            if f == "batch_norm":  # inference: (x - moving_mean) / sqrt(moving_variance + epsilon) * gamma + beta
                axes = self._axes(rank)
                mean = self._broadcast(self.moving_mean, rank, axes)
                var = self._broadcast(self.moving_variance, rank, axes)
                return self._affine((x - mean) / ops.sqrt(var + self.epsilon), rank, axes)
            if f == "group_norm":  # channels split into groups, each normalized over its channels and positions
                axis = self.axis % rank
                c = int(x.shape[axis])
                groups = c if self.groups == -1 else self.groups
                moved = ops.moveaxis(x, axis, -1)
                shape = ops.shape(moved)
                grouped = ops.reshape(moved, (*shape[:-1], groups, c // groups))
                red = [a for a in range(1, rank + 1) if a != rank - 1]
                mean = ops.mean(grouped, axis=red, keepdims=True)
                var = ops.mean(ops.square(grouped - mean), axis=red, keepdims=True)
                y = ops.moveaxis(ops.reshape((grouped - mean) / ops.sqrt(var + self.epsilon), shape), -1, axis)
                return self._affine(y, rank, [axis])
            if f == "unit_norm":  # x / max(sqrt(sum(x^2)), 1e-12) over axis
                norm = ops.sqrt(ops.sum(ops.square(x), axis=self._axes(rank), keepdims=True))
                return x / ops.maximum(norm, UNIT_NORM_EPSILON)
            return activation_formula(ops, f, x)

        def compute_output_shape(self, shape):
            return shape

        def get_config(self):
            return {**super().get_config(), "formula": self.formula, "axis": self.axis, "epsilon": self.epsilon,
                    "groups": self.groups, "center": self.center, "scale": self.scale}

    _CLASSES[id(keras)] = {"AudeeReverse": AudeeReverse, "AudeeFormula": AudeeFormula}
    return _CLASSES[id(keras)]


def activation_formula(ops, name, x):
    """``keras.activations.<name>``'s documented formula on ``x``."""
    zero = ops.zeros_like(x)
    # (comparisons written so that a NaN takes the branch that returns x: NaN stays NaN)
    if name == "relu":
        return ops.where(x < 0, zero, x)
    if name == "relu6":
        return ops.where(x > 6, zero + 6, ops.where(x < 0, zero, x))
    if name == "leaky_relu":  # negative_slope 0.2
        return ops.where(x < 0, 0.2 * x, x)
    if name == "elu":
        return ops.where(x <= 0, ops.exp(x) - 1, x)
    if name == "selu":
        return SELU_SCALE * ops.where(x <= 0, SELU_ALPHA * (ops.exp(x) - 1), x)
    if name == "gelu":  # 0.5 x (1 + erf(x / sqrt(2)))
        return 0.5 * x * (1 + ops.erf(x / np.sqrt(2.0)))
    if name == "gelu_tanh":  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        return 0.5 * x * (1 + ops.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x * x * x)))
    if name == "sigmoid":
        return 1 / (1 + ops.exp(-x))
    if name == "silu":
        return x / (1 + ops.exp(-x))
    if name == "hard_sigmoid":  # relu6(x + 3) / 6
        return ops.where(x >= 3, zero + 1, ops.where(x <= -3, zero, x / 6 + 0.5))
    if name == "hard_silu":
        return x * ops.where(x >= 3, zero + 1, ops.where(x <= -3, zero, x / 6 + 0.5))
    if name == "softplus":  # log(exp(x) + 1) = max(x, 0) + log(1 + exp(-|x|))
        return ops.maximum(x, zero) + ops.log1p(ops.exp(-ops.abs(x)))
    if name == "softsign":
        return x / (ops.abs(x) + 1)
    if name == "tanh":  # (e^x - e^-x) / (e^x + e^-x) = 1 - 2 / (e^2x + 1)
        return 1 - 2 / (ops.exp(2 * x) + 1)
    if name == "mish":  # x tanh(softplus(x))
        sp = ops.maximum(x, zero) + ops.log1p(ops.exp(-ops.abs(x)))
        return x * (1 - 2 / (ops.exp(2 * sp) + 1))
    if name == "exponential":
        return ops.exp(x)
    if name == "softmax":  # exp(x - max) / sum(exp(x - max)) over the last axis
        e = ops.exp(x - ops.max(x, axis=-1, keepdims=True))
        return e / ops.sum(e, axis=-1, keepdims=True)
    if name == "log_softmax":  # x - max - log(sum(exp(x - max)))
        z = x - ops.max(x, axis=-1, keepdims=True)
        return z - ops.log(ops.sum(ops.exp(z), axis=-1, keepdims=True))
    raise ValueError(f"unknown activation formula {name!r}")


def owned_layer(keras, api, params, name):
    """An owned layer (``api`` in :data:`OWNED_LAYERS`) instantiated with ``params``."""
    problem = check_owned(api, params)
    if problem is not None:
        raise ValueError(f"{api}: {problem}")
    return owned_classes(keras)[api](**params, name=name)


def round_trip(keras, model, how):
    """``model`` (weights in) after a round trip ``how`` (:data:`ROUNDTRIPS`): the loaded model."""
    owned_classes(keras)  # registered before anything loads
    if how == "keras":
        with tempfile.TemporaryDirectory(prefix="audee-roundtrip-") as tmp:
            path = os.path.join(tmp, "model.keras")
            model.save(path)
            return keras.models.load_model(path, compile=False)
    if how == "config":
        loaded = type(model).from_config(model.get_config())
    elif how == "json":
        loaded = keras.models.model_from_json(model.to_json())
    else:
        raise ValueError(f"unknown round trip {how!r} (one of {', '.join(ROUNDTRIPS)})")
    loaded.set_weights(model.get_weights())
    return loaded
