"""Injected faults for the localization ground-truth corpus.

Each class is TensorFlow (Keras 3) with one layer parameter's behaviour changed, through
the ``make_layer`` extension point (docs/backends.md).  Every fault is keyed on one
parameter value, so a correct localization names that (layer, parameter) and the
replacement values that make the layer behave again.
"""
from __future__ import annotations

from typing import Any

from audee.backends.keras_backends import TensorflowBackend
from audee.spec import LayerSpec


class _Fault(TensorflowBackend):
    api: str = ""

    def make_layer(self, layer: LayerSpec) -> Any:
        if layer.api != self.api:
            return super().make_layer(layer)
        return self.faulty(self.keras, layer)

    def faulty(self, keras: Any, layer: LayerSpec) -> Any:
        raise NotImplementedError


def _same_pad(size: int, k: int, s: int, d: int) -> int:
    out = -(-size // s)
    return max((out - 1) * s + (k - 1) * d + 1 - size, 0)


class ConvReluAsElu(_Fault):
    """Conv2D, activation='relu': computed as elu (negative outputs leak)."""

    name, api = "fault-conv-relu", "Conv2D"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("activation") == "relu":
            params["activation"] = "elu"
        return keras.layers.Conv2D(**params, name=layer.name)


class BatchNormEpsilonFloor(_Fault):
    """BatchNormalization: an epsilon below 0.01 is silently replaced by 1.0."""

    name, api = "fault-bn-epsilon", "BatchNormalization"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("epsilon", 1e-3) < 0.01:
            params["epsilon"] = 1.0
        return keras.layers.BatchNormalization(**params, name=layer.name)


class AvgPoolCountsPadding(_Fault):
    """AveragePooling2D, padding='same': zero padding is counted in the average."""

    name, api = "fault-avgpool-pad", "AveragePooling2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.AveragePooling2D):
            def call(self, x):
                if self.padding != "same":
                    return super().call(x)
                pads = [[0, 0]]
                for axis in (1, 2):
                    total = _same_pad(int(x.shape[axis]), self.pool_size[axis - 1], self.strides[axis - 1], 1)
                    pads.append([total // 2, total - total // 2])
                pads.append([0, 0])
                x = keras.ops.pad(x, pads)
                return keras.ops.average_pool(x, self.pool_size, self.strides, padding="valid")

        return Layer(**layer.params, name=layer.name)


class LeakyReluSlope(_Fault):
    """LeakyReLU: any negative_slope other than 0.3 is computed as 0.3."""

    name, api = "fault-leakyrelu-slope", "LeakyReLU"

    def faulty(self, keras, layer):
        return keras.layers.LeakyReLU(**{**layer.params, "negative_slope": 0.3}, name=layer.name)


class DenseDropsBias(_Fault):
    """Dense, use_bias=True: the bias is added to the pre-activation only on the first unit."""

    name, api = "fault-dense-bias", "Dense"

    def faulty(self, keras, layer):
        class Layer(keras.layers.Dense):
            def call(self, x, training=None):
                y = keras.ops.matmul(x, self.kernel)
                if self.use_bias:
                    mask = keras.ops.one_hot(0, self.units)
                    y = y + self.bias * mask
                return self.activation(y) if self.activation is not None else y

        return Layer(**layer.params, name=layer.name)


class _GatesHardSigmoid(_Fault):
    """A recurrent layer with recurrent_activation='sigmoid' (the default): its gates use
    hard_sigmoid instead."""

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("recurrent_activation", "sigmoid") == "sigmoid":
            params["recurrent_activation"] = "hard_sigmoid"
        return getattr(keras.layers, self.api)(**params, name=layer.name)


class LstmHardSigmoid(_GatesHardSigmoid):
    """LSTM, recurrent_activation='sigmoid': the gates use hard_sigmoid instead."""

    name, api = "fault-lstm-gates", "LSTM"


class GruHardSigmoid(_GatesHardSigmoid):
    """GRU, recurrent_activation='sigmoid': the gates use hard_sigmoid instead."""

    name, api = "fault-gru-gates", "GRU"


class ReluMaxValueOff(_Fault):
    """ReLU with a max_value: clips at max_value + 0.5."""

    name, api = "fault-relu-max", "ReLU"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("max_value") is not None:
            params["max_value"] = params["max_value"] + 0.5
        return keras.layers.ReLU(**params, name=layer.name)


class MaxPoolPadsZero(_Fault):
    """MaxPooling2D, padding='same': pads with zeros instead of -inf."""

    name, api = "fault-maxpool-pad", "MaxPooling2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.MaxPooling2D):
            def call(self, x):
                if self.padding != "same":
                    return super().call(x)
                pads = [[0, 0]]
                for axis in (1, 2):
                    total = _same_pad(int(x.shape[axis]), self.pool_size[axis - 1], self.strides[axis - 1], 1)
                    pads.append([total // 2, total - total // 2])
                pads.append([0, 0])
                return keras.ops.max_pool(keras.ops.pad(x, pads), self.pool_size, self.strides, padding="valid")

        return Layer(**layer.params, name=layer.name)


class SimpleRnnActivation(_Fault):
    """SimpleRNN, activation='tanh': computed with a steeper tanh(1.5 x)."""

    name, api = "fault-simplernn-tanh", "SimpleRNN"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("activation", "tanh") == "tanh":
            params["activation"] = lambda v: keras.ops.tanh(1.5 * v)
        return keras.layers.SimpleRNN(**params, name=layer.name)


class ActivationEluAlpha(_Fault):
    """ELU: alpha other than 1.0 is ignored (computed as 1.0)."""

    name, api = "fault-elu-alpha", "ELU"

    def faulty(self, keras, layer):
        return keras.layers.ELU(**{**layer.params, "alpha": 1.0}, name=layer.name)


class DepthwiseMultiplierOrder(_Fault):
    """DepthwiseConv2D, depth_multiplier > 1: output channels come out grouped by
    multiplier instead of by input channel."""

    name, api = "fault-depthwise-order", "DepthwiseConv2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.DepthwiseConv2D):
            def call(self, x):
                y = super().call(x)
                m = self.depth_multiplier
                if m == 1:
                    return y
                c = int(x.shape[-1])
                y = keras.ops.reshape(y, (-1, int(y.shape[1]), int(y.shape[2]), c, m))
                y = keras.ops.transpose(y, (0, 1, 2, 4, 3))
                return keras.ops.reshape(y, (-1, int(y.shape[1]), int(y.shape[2]), c * m))

        return Layer(**layer.params, name=layer.name)
