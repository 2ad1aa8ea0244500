"""Plugin backends for the equivalence oracle's tests (issue 27).

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
