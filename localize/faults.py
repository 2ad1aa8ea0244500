"""Injected faults for the localization ground-truth corpus.

Each class is one backend (Keras 3 on TensorFlow, PyTorch or JAX) with one layer
parameter's behaviour changed, through the ``make_layer`` extension point
(docs/backends.md).  A fault is written once in Keras ops (a mixin) and bound to a
backend by a one-line subclass, so the same fault runs on any of the three.  Every fault
is keyed on one parameter value, so a correct localization names that (layer, parameter)
and the replacement values that make the layer behave again; some are also maskable by
another parameter (a 1-wide kernel, a pool window with no overhang), visible only with
negative inputs or non-zero biases, make NaN, reject a valid value, or kill the
worker process (a hard crash).
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from audee.backends.keras_backends import JaxBackend, TensorflowBackend, TorchBackend
from audee.cases.spec import LayerSpec


class _Mixin:
    """A fault in Keras ops: ``faulty`` builds the altered layer for ``api``."""

    api: str = ""

    def make_layer(self, layer: LayerSpec) -> Any:
        if layer.api != self.api:
            return super().make_layer(layer)  # type: ignore[misc]
        return self.faulty(self.keras, layer)  # type: ignore[attr-defined]

    def faulty(self, keras: Any, layer: LayerSpec) -> Any:
        raise NotImplementedError


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


# ---- faults written once, bound to torch and jax below ------------------------------------------
def _pads(x: Any, kernel: tuple, strides: tuple, dilation: tuple) -> list[list[int]]:
    pads = [[0, 0]]
    for axis in (1, 2):
        total = _same_pad(int(x.shape[axis]), kernel[axis - 1], strides[axis - 1], dilation[axis - 1])
        pads.append([total // 2, total - total // 2])
    return pads + [[0, 0]]


class _ConvSameReflect(_Mixin):
    """Conv2D, padding='same': the border is padded by reflection instead of zeros (a
    1-wide kernel needs no padding and masks it)."""

    api = "Conv2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.Conv2D):
            def call(self, x):
                if self.padding != "same":
                    return super().call(x)
                pads = _pads(x, self.kernel_size, self.strides, self.dilation_rate)
                if any(sum(p) for p in pads):
                    x = keras.ops.pad(x, pads, mode="reflect")
                y = keras.ops.conv(x, self.kernel, strides=self.strides, padding="valid",
                                   dilation_rate=self.dilation_rate)
                if self.use_bias:
                    y = y + self.bias
                return self.activation(y) if self.activation is not None else y

        return Layer(**layer.params, name=layer.name)


class _ConvDilationIgnored(_Mixin):
    """Conv2D, dilation_rate > 1 with padding='same': computed undilated (a 1-wide kernel masks it)."""

    api = "Conv2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.Conv2D):
            def call(self, x):
                if max(self.dilation_rate) == 1 or self.padding != "same":
                    return super().call(x)
                y = keras.ops.conv(x, self.kernel, strides=self.strides, padding="same", dilation_rate=1)
                if self.use_bias:
                    y = y + self.bias
                return self.activation(y) if self.activation is not None else y

        return Layer(**layer.params, name=layer.name)


class _ConvReluAsElu(_Mixin):
    api = "Conv2D"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("activation") == "relu":
            params["activation"] = "elu"
        return keras.layers.Conv2D(**params, name=layer.name)


class _SoftmaxAxisRows(_Mixin):
    """Softmax, axis=-1 on a rank-4 input: normalized over axis 1 (an immutable parameter)."""

    api = "Softmax"

    def faulty(self, keras, layer):
        class Layer(keras.layers.Softmax):
            def call(self, x, mask=None):
                if self.axis == -1 and len(x.shape) == 4:
                    return keras.ops.softmax(x, axis=1)
                return super().call(x)

        return Layer(**layer.params, name=layer.name)


class _SoftmaxNoMaxShift(_Mixin):
    """Softmax, axis=-1: exp without subtracting the row maximum; large logits give inf/inf = NaN."""

    api = "Softmax"

    def faulty(self, keras, layer):
        class Layer(keras.layers.Softmax):
            def call(self, x, mask=None):
                if self.axis != -1:
                    return super().call(x)
                e = keras.ops.exp(x)
                return e / keras.ops.sum(e, axis=-1, keepdims=True)

        return Layer(**layer.params, name=layer.name)


class _FlattenChannelsFirst(_Mixin):
    """Flatten, data_format channels_last (the default): flattened in channels_first order
    (a parameter outside the mutation space)."""

    api = "Flatten"

    def faulty(self, keras, layer):
        class Layer(keras.layers.Flatten):
            def call(self, x):
                if self.data_format != "channels_last" or len(x.shape) != 4:
                    return super().call(x)
                x = keras.ops.transpose(x, (0, 3, 1, 2))
                return keras.ops.reshape(x, (-1, int(np.prod(x.shape[1:]))))

        return Layer(**layer.params, name=layer.name)


class _UpSamplingBilinearAsNearest(_Mixin):
    """UpSampling2D, interpolation='bilinear': computed as nearest (size 1 masks it)."""

    api = "UpSampling2D"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("interpolation") == "bilinear":
            params["interpolation"] = "nearest"
        return keras.layers.UpSampling2D(**params, name=layer.name)


class _UpSamplingRejectsBilinear(_Mixin):
    """UpSampling2D, interpolation='bilinear': refused at construction (divergent acceptance)."""

    api = "UpSampling2D"

    def faulty(self, keras, layer):
        if layer.params.get("interpolation") == "bilinear":
            raise ValueError("UpSampling2D: interpolation 'bilinear' is not supported")
        return keras.layers.UpSampling2D(**layer.params, name=layer.name)


class _MaxPoolRejectsSameOverlap(_Mixin):
    """MaxPooling2D, padding='same' with strides other than the pool size: refused at
    construction (divergent acceptance)."""

    api = "MaxPooling2D"

    def faulty(self, keras, layer):
        p = layer.params
        if p.get("padding") == "same" and p.get("strides") not in (None, p.get("pool_size", 2)):
            raise ValueError("MaxPooling2D: padding 'same' needs strides equal to pool_size")
        return keras.layers.MaxPooling2D(**p, name=layer.name)


class _ZeroPaddingBottomRight(_Mixin):
    """ZeroPadding2D: all padding added at the bottom and right."""

    api = "ZeroPadding2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.ZeroPadding2D):
            def call(self, x):
                (t, b), (le, r) = self.padding
                return keras.ops.pad(x, [[0, 0], [0, t + b], [0, le + r], [0, 0]])

        return Layer(**layer.params, name=layer.name)


class _CroppingTopLeft(_Mixin):
    """Cropping2D: all cropping taken from the top and left."""

    api = "Cropping2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.Cropping2D):
            def call(self, x):
                (t, b), (le, r) = self.cropping
                return x[:, t + b:, le + r:, :]

        return Layer(**layer.params, name=layer.name)


class _LayerNormEpsilonFloor(_Mixin):
    """LayerNormalization: an epsilon below 0.01 is silently replaced by 1.0."""

    api = "LayerNormalization"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("epsilon", 1e-3) < 0.01:
            params["epsilon"] = 1.0
        return keras.layers.LayerNormalization(**params, name=layer.name)


class _DenseSigmoidAsHard(_Mixin):
    """Dense, activation='sigmoid': computed as hard_sigmoid."""

    api = "Dense"

    def faulty(self, keras, layer):
        params = dict(layer.params)
        if params.get("activation") == "sigmoid":
            params["activation"] = "hard_sigmoid"
        return keras.layers.Dense(**params, name=layer.name)


class _EluAlphaSqrt(_Mixin):
    """ELU, alpha other than 1.0: the negative part picks up sqrt(x) - sqrt(x): NaN for
    every negative input, exact for the rest."""

    api = "ELU"

    def faulty(self, keras, layer):
        class Layer(keras.layers.ELU):
            def call(self, x):
                if self.alpha == 1.0:
                    return super().call(x)
                neg = self.alpha * (keras.ops.exp(x) - 1.0) + keras.ops.sqrt(x) - keras.ops.sqrt(x)
                return keras.ops.where(x > 0, x, neg)

        return Layer(**layer.params, name=layer.name)


class _ActivationGeluSigmoid(_Mixin):
    """Activation('gelu'): computed as x * sigmoid(1.702 x), the "quick gelu"
    approximation (up to 0.02 off the exact erf form: a deviation well beyond float32
    tolerance, which the tanh approximation, 5e-4 off, was not)."""

    api = "Activation"

    def faulty(self, keras, layer):
        if layer.params.get("activation") == "gelu":
            return keras.layers.Activation(lambda v: v * keras.ops.sigmoid(1.702 * v), name=layer.name)
        return keras.layers.Activation(**layer.params, name=layer.name)


def _asymmetric(padding: Any) -> bool:
    """ZeroPadding2D's padding pads some dimension unequally before and after."""
    return isinstance(padding, (list, tuple)) and any(
        isinstance(p, (list, tuple)) and len(p) == 2 and p[0] != p[1] for p in padding)


class _ZeroPaddingAsymmetricCrash(_Mixin):
    """ZeroPadding2D with unequal padding before and after a dimension: the process dies
    (exit 139, as on a segfault) while the layer is built: a hard crash on one backend."""

    api = "ZeroPadding2D"

    def faulty(self, keras, layer):
        if _asymmetric(layer.params.get("padding", 1)):
            os._exit(139)
        return keras.layers.ZeroPadding2D(**layer.params, name=layer.name)


class _UpSamplingLargeFactorCrash(_Mixin):
    """UpSampling2D with a factor above 2: the process aborts (exit 134) when the layer
    is called: a hard crash at run."""

    api = "UpSampling2D"

    def faulty(self, keras, layer):
        class Layer(keras.layers.UpSampling2D):
            def call(self, x):
                if max(self.size) > 2:
                    os._exit(134)
                return super().call(x)

        return Layer(**layer.params, name=layer.name)


class _ConvRejectsGroups(_Mixin):
    """Conv2D, groups > 1: refused at construction (a divergent acceptance)."""

    api = "Conv2D"

    def faulty(self, keras, layer):
        groups = layer.params.get("groups", 1)
        if groups is not None and int(groups) > 1:
            raise ValueError(f"Conv2D: grouped convolution (groups={groups}) is not supported")
        return keras.layers.Conv2D(**layer.params, name=layer.name)


class _ReluThresholdIgnored(_Mixin):
    """ReLU, threshold > 0: the threshold is ignored."""

    api = "ReLU"

    def faulty(self, keras, layer):
        return keras.layers.ReLU(**{**layer.params, "threshold": 0.0}, name=layer.name)


class ConvSameReflectTorch(_ConvSameReflect, TorchBackend):
    name = "fault-conv-reflect-torch"


class ConvSameReflectJax(_ConvSameReflect, JaxBackend):
    name = "fault-conv-reflect-jax"


class ConvDilationIgnoredJax(_ConvDilationIgnored, JaxBackend):
    name = "fault-conv-dilation-jax"


class ConvReluAsEluTorch(_ConvReluAsElu, TorchBackend):
    name = "fault-conv-relu-torch"


class SoftmaxAxisRowsTorch(_SoftmaxAxisRows, TorchBackend):
    name = "fault-softmax-axis-torch"


class SoftmaxNoMaxShiftJax(_SoftmaxNoMaxShift, JaxBackend):
    name = "fault-softmax-exp-jax"


class FlattenChannelsFirstTorch(_FlattenChannelsFirst, TorchBackend):
    name = "fault-flatten-order-torch"


class UpSamplingBilinearAsNearestJax(_UpSamplingBilinearAsNearest, JaxBackend):
    name = "fault-upsampling-jax"


class UpSamplingRejectsBilinearTorch(_UpSamplingRejectsBilinear, TorchBackend):
    name = "fault-upsampling-reject-torch"


class MaxPoolRejectsSameOverlapJax(_MaxPoolRejectsSameOverlap, JaxBackend):
    name = "fault-maxpool-reject-jax"


class ZeroPaddingBottomRightTorch(_ZeroPaddingBottomRight, TorchBackend):
    name = "fault-zeropad-torch"


class CroppingTopLeftJax(_CroppingTopLeft, JaxBackend):
    name = "fault-crop-jax"


class LayerNormEpsilonFloorJax(_LayerNormEpsilonFloor, JaxBackend):
    name = "fault-layernorm-eps-jax"


class DenseSigmoidAsHardJax(_DenseSigmoidAsHard, JaxBackend):
    name = "fault-dense-sigmoid-jax"


class EluAlphaSqrtTorch(_EluAlphaSqrt, TorchBackend):
    name = "fault-elu-nan-torch"


class ActivationGeluSigmoidTorch(_ActivationGeluSigmoid, TorchBackend):
    name = "fault-gelu-sigmoid-torch"


class ZeroPaddingAsymmetricCrashTorch(_ZeroPaddingAsymmetricCrash, TorchBackend):
    name = "fault-zeropad-crash-torch"


class UpSamplingLargeFactorCrashJax(_UpSamplingLargeFactorCrash, JaxBackend):
    name = "fault-upsampling-crash-jax"


class ConvRejectsGroupsJax(_ConvRejectsGroups, JaxBackend):
    name = "fault-conv-groups-reject-jax"


class ReluThresholdIgnoredTorch(_ReluThresholdIgnored, TorchBackend):
    name = "fault-relu-threshold-torch"


# ---- the TensorFlow faults above, on torch and jax ------------------------------------------------
class _Rebind(_Mixin):
    """A TensorFlow fault's ``faulty`` reused on another backend."""

    source: type = _Fault

    def faulty(self, keras, layer):
        return self.source.faulty(self, keras, layer)


class MaxPoolPadsZeroJax(_Rebind, JaxBackend):
    name, api, source = "fault-maxpool-pad-jax", "MaxPooling2D", MaxPoolPadsZero


class AvgPoolCountsPaddingTorch(_Rebind, TorchBackend):
    name, api, source = "fault-avgpool-pad-torch", "AveragePooling2D", AvgPoolCountsPadding


class DenseDropsBiasJax(_Rebind, JaxBackend):
    name, api, source = "fault-dense-bias-jax", "Dense", DenseDropsBias


class ReluMaxValueOffJax(_Rebind, JaxBackend):
    name, api, source = "fault-relu-max-jax", "ReLU", ReluMaxValueOff


class LeakyReluSlopeTorch(_Rebind, TorchBackend):
    name, api, source = "fault-leakyrelu-slope-torch", "LeakyReLU", LeakyReluSlope


class ActivationEluAlphaJax(_Rebind, JaxBackend):
    name, api, source = "fault-elu-alpha-jax", "ELU", ActivationEluAlpha


class BatchNormEpsilonFloorTorch(_Rebind, TorchBackend):
    name, api, source = "fault-bn-epsilon-torch", "BatchNormalization", BatchNormEpsilonFloor


class DepthwiseMultiplierOrderTorch(_Rebind, TorchBackend):
    name, api, source = "fault-depthwise-order-torch", "DepthwiseConv2D", DepthwiseMultiplierOrder


# ---- several faults in one backend (one worker serves a whole test module) ----------------------
class _Several(_Mixin):
    """Several faults, each on its own API."""

    faults: tuple[type, ...] = ()

    def make_layer(self, layer: LayerSpec) -> Any:
        for fault in self.faults:
            if fault.api == layer.api:
                return fault.faulty(self, self.keras, layer)
        return super(_Mixin, self).make_layer(layer)


class RuleFaultsTorch(_Several, TorchBackend):
    """The faults the ranking-rule tests use: a maskable padding fault (Conv2D), an
    immutable-parameter fault (Softmax axis), a NaN fault (ELU alpha), a rejected valid
    value (UpSampling2D bilinear) and a hard crash (ZeroPadding2D asymmetric)."""

    name = "fault-rules-torch"
    faults = (_ConvSameReflect, _SoftmaxAxisRows, _EluAlphaSqrt, _UpSamplingRejectsBilinear,
              _ZeroPaddingAsymmetricCrash)
