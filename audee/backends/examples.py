"""Worked plugin examples (see docs/backends.md): built-in backends with one layer altered.

Run one beside the original to see audee flag the difference::

    audee fuzz --seed lenet5 --backends tensorflow,audee.backends.examples:DenseWithoutBiasTF \
        --variants 0 --out runs/plugin-demo
"""
from __future__ import annotations

from typing import Any

from audee.backends.keras_backends import TensorflowBackend
from audee.cases.spec import LayerSpec


class DenseWithoutBiasTF(TensorflowBackend):
    """TensorFlow, except that every Dense layer silently drops its bias."""

    name = "tensorflow-dense-nobias"

    def make_layer(self, layer: LayerSpec) -> Any:
        if layer.api != "Dense":
            return super().make_layer(layer)
        keras = self.keras

        class DenseNoBias(keras.layers.Dense):
            def call(self, inputs: Any, training: Any = None) -> Any:
                y = keras.ops.matmul(inputs, self.kernel)
                return self.activation(y) if self.activation is not None else y

        return DenseNoBias(**layer.params, name=layer.name)
