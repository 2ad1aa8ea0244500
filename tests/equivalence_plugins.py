"""Plugin backends for the equivalence oracle's tests (issue 27): each breaks what one rule
checks, the rest of the backend JAX's own.

``ShiftedSameConvJax`` is JAX (the fastest framework to import), except that a ``Conv2D``
with ``padding="same"`` pads one pixel too many before and one too few after each spatial
axis: its output is shifted by one pixel, as a same-padding computed off by one would be.
Every other layer, and a ``Conv2D`` with ``padding="valid"``, is JAX's own, so the padding
rule's equivalent model (``ZeroPadding2D`` then a valid ``Conv2D``) computes the right
answer on the same backend and the two differ.
"""
from __future__ import annotations

from typing import Any

from audee.backends.keras_backends import JaxBackend
from audee.equivalence.rules import same_padding


class ShiftedSameConvJax(JaxBackend):
    name = "shifted-same-conv-jax"

    def make_layer(self, layer: Any) -> Any:
        made = super().make_layer(layer)
        if layer.api != "Conv2D" or str(layer.params.get("padding", "valid")).lower() != "same" \
                or layer.params.get("data_format", "channels_last") != "channels_last":
            return made
        keras = self.keras

        class ShiftedSame(type(made)):
            def call(self, inputs: Any) -> Any:
                pads = [[0, 0]]
                for axis, (k, s, d) in enumerate(zip(self.kernel_size, self.strides, self.dilation_rate)):
                    before, after = same_padding(int(inputs.shape[1 + axis]), k, s, d)
                    shift = 1 if after > 0 else 0
                    pads.append([before + shift, after - shift])
                pads.append([0, 0])
                x = keras.ops.pad(inputs, pads)
                y = keras.ops.conv(x, self.kernel, strides=list(self.strides), padding="valid",
                                   dilation_rate=self.dilation_rate, data_format=self.data_format)
                if self.use_bias:
                    y = y + self.bias
                return self.activation(y) if self.activation is not None else y

        made.__class__ = ShiftedSame
        return made


class LossyRoundTripJax(JaxBackend):
    """JAX, except that a ``Dense`` layer loaded from a ``.keras`` file loses its kernel (it
    keeps the initializer's values; the bias loads): a saving bug of the kind a layer's own
    ``load_own_variables`` makes.  ``get_config``/``from_config`` and ``to_json`` with
    ``set_weights`` carry every weight, so only the ``roundtrip_keras`` rule sees it."""

    name = "lossy-roundtrip-jax"

    def make_layer(self, layer: Any) -> Any:
        made = super().make_layer(layer)
        if layer.api != "Dense":
            return made
        made.__class__ = lossy_dense(self.keras)
        return made


_LOSSY: dict[int, type] = {}


def lossy_dense(keras: Any) -> type:
    """The registered ``Dense`` whose ``load_own_variables`` drops the kernel (made once)."""
    if id(keras) not in _LOSSY:
        @keras.saving.register_keras_serializable(package="audee_tests")
        class LossyDense(keras.layers.Dense):
            def load_own_variables(self, store: Any) -> None:
                self.bias.assign(store["1"])

        _LOSSY[id(keras)] = LossyDense
    return _LOSSY[id(keras)]


class WrongEpsilonLayerNormJax(JaxBackend):
    """JAX, except that ``LayerNormalization`` adds 1.0 to the variance instead of its
    ``epsilon``: only the ``formula`` rule (the documented formula beside it) sees it."""

    name = "wrong-epsilon-layernorm-jax"

    def make_layer(self, layer: Any) -> Any:
        made = super().make_layer(layer)
        if layer.api == "LayerNormalization":
            made.epsilon = 1.0
        return made


class IgnoredGoBackwardsJax(JaxBackend):
    """JAX, except that an RNN with ``go_backwards=True`` runs forwards: only the
    ``go_backwards`` rule (the flipped RNN on the reversed sequence) sees it."""

    name = "ignored-go-backwards-jax"

    def make_layer(self, layer: Any) -> Any:
        if layer.api in ("SimpleRNN", "LSTM", "GRU") and layer.params.get("go_backwards"):
            layer = type(layer)(layer.name, layer.api, dict(layer.params, go_backwards=False), list(layer.inputs))
        return super().make_layer(layer)


class BatchLeakDenseJax(JaxBackend):
    """JAX, except that a ``Dense`` layer adds a tenth of the sum of its outputs over the
    rows before each row, and a twentieth of their batch mean: a row's output depends on
    the other rows of the batch (as a kernel reading a neighbour's row would), which both
    batch rules see.  The layer is a registered class: a round trip keeps it."""

    name = "batch-leak-dense-jax"

    def make_layer(self, layer: Any) -> Any:
        made = super().make_layer(layer)
        if layer.api == "Dense":
            made.__class__ = leaky_dense(self.keras)
        return made


_LEAKY: dict[int, type] = {}


def leaky_dense(keras: Any) -> type:
    """The registered ``Dense`` whose rows leak into each other (made once)."""
    if id(keras) not in _LEAKY:
        ops = keras.ops

        @keras.saving.register_keras_serializable(package="audee_tests")
        class LeakyDense(keras.layers.Dense):
            def call(self, inputs: Any, training: Any = None) -> Any:
                y = super().call(inputs, training=training)
                return y + 0.1 * (ops.cumsum(y, axis=0) - y) + 0.05 * ops.mean(y, axis=0, keepdims=True)

        _LEAKY[id(keras)] = LeakyDense
    return _LEAKY[id(keras)]
