"""Plugin backends that misbehave on purpose, for the crash-oracle tests.

They wrap the JAX backend (the fastest framework to import) and fail only in ``run``,
so building and the hello handshake work as for a healthy backend.
"""
from __future__ import annotations

import os
import time

import numpy as np

from audee.backends.keras_backends import JaxBackend, TensorflowBackend, TorchBackend
from audee.backends.modes import JaxX64Backend, TensorflowXlaBackend
from audee.backends.onnx_backend import OnnxRuntimeBackend


class AbortingBackend(JaxBackend):
    """Calls os.abort() (SIGABRT) when a batch is run, as a native framework crash would."""

    name = "aborting"

    def run(self, model, inputs):
        os.abort()


class SleepingBackend(JaxBackend):
    """Hangs when a batch is run, as a deadlocked kernel would."""

    name = "sleeping"

    def run(self, model, inputs):
        time.sleep(3600)
        return []


class RaisingBackend(JaxBackend):
    """Raises a clean Python error when a batch is run (divergent acceptance)."""

    name = "raising"

    def run(self, model, inputs):
        raise ValueError("refusing this batch on purpose")


class StickyErrorBackend(JaxBackend):
    """Fails a run on an input above 100 as a CUDA device-side assert does: the error sticks
    to the process, whose every later build and run fails too, until it ends
    (:meth:`unusable` says why)."""

    name = "sticky"
    broken = False  # this process's state, as a CUDA context's

    def build(self, spec):
        if StickyErrorBackend.broken:
            raise RuntimeError("CUDA error: device-side assert triggered")
        return super().build(spec)

    def run(self, model, inputs):
        if StickyErrorBackend.broken or any(float(np.max(x)) > 100 for x in inputs.values()):
            StickyErrorBackend.broken = True
            raise RuntimeError("CUDA error: device-side assert triggered")
        return super().run(model, inputs)

    def unusable(self):
        return "the device no longer computes: device-side assert" if StickyErrorBackend.broken else None


class HangingBackend(JaxBackend):
    """Says so in its worker log, then hangs when a batch is run (for the cleanup tests)."""

    name = "hanging"

    def run(self, model, inputs):
        print("hanging: run started", flush=True)
        time.sleep(3600)
        return []


class NanScrubbingBackend(JaxBackend):
    """Replaces NaN/Inf in its inputs with finite numbers (``np.nan_to_num``) before
    running, as a framework that sanitizes inputs would: its outputs stay finite where a
    plain backend propagates the NaN (for the non-finite pattern tests)."""

    name = "nan-scrubbing"
    rows: slice = slice(None)  # the batch rows it scrubs

    def run(self, model, inputs):
        import numpy as np

        scrubbed = {}
        for k, v in inputs.items():
            v = np.array(v, copy=True)
            if np.issubdtype(v.dtype, np.floating):
                v[self.rows] = np.nan_to_num(v[self.rows])
            scrubbed[k] = v
        return super().run(model, scrubbed)


class FirstRowScrubbingBackend(NanScrubbingBackend):
    """Scrubs NaN/Inf from batch row 0 only: NaN on both backends, at different places."""

    name = "first-row-scrubbing"
    rows = slice(0, 1)


class DiesOnceScrubbing(NanScrubbingBackend):
    """Scrubs NaN/Inf as :class:`NanScrubbingBackend`, and its process ends (exit code 9, the
    worker's memory watchdog) at its second run: the per-layer run of a NaN diagnosis, after
    the case's own run.  A fresh process runs it."""

    name = "dies-once-scrubbing"
    runs = 0  # this process's

    def run(self, model, inputs):
        DiesOnceScrubbing.runs += 1
        if DiesOnceScrubbing.runs == 2:
            os._exit(9)
        return super().run(model, inputs)


class DiesOnFewRowsScrubbing(NanScrubbingBackend):
    """Scrubs NaN/Inf as :class:`NanScrubbingBackend`, and its process ends (exit code 9) at
    every run of fewer than 4 rows: a diagnosis's rows, however often it is asked."""

    name = "dies-on-few-rows-scrubbing"

    def run(self, model, inputs):
        if min(len(v) for v in inputs.values()) < 4:
            os._exit(9)
        return super().run(model, inputs)


class _ScalesOneLayer:
    """Mixin: the layer named ``target`` returns its output times ``factor``; the one-layer
    model of that layer carries the fault too."""

    target = "d2"
    factor = 1.01

    def make_layer(self, layer):
        made = super().make_layer(layer)
        return _scaled(made, self.factor) if layer.name == self.target else made


class DoubledDepthwiseJax(_ScalesOneLayer, JaxBackend):
    """JAX, except that the layer named ``t`` returns twice its output (in its float64 run too):
    a bfloat16 layer wrong far beyond rounding, whose float64 recomputation JAX without 64-bit
    floats and TensorFlow (a depthwise convolution of unequal strides) cannot give."""

    name = "doubled-depthwise-jax"
    target = "t"
    factor = 2.0


class ScaledLayerBackend(_ScalesOneLayer, TensorflowBackend):
    """TensorFlow, except that the layer named ``target`` returns its output times
    ``factor`` (1% off by default): a small single-layer fault that flips no label, for
    the deviation-oracle tests."""

    name = "scaled-layer"


def _scaled(made, factor: float):
    """``made`` (a Keras layer), its output multiplied by ``factor``."""

    class Scaled(type(made)):
        def call(self, *args, **kwargs):
            return super().call(*args, **kwargs) * factor

    made.__class__ = Scaled
    return made


class ScaledTTorch(_ScalesOneLayer, TorchBackend):
    """PyTorch, except that the layer named ``t`` returns its output times 1.5: a fault far
    beyond any rounding of a bfloat16 layer, which the float64 floor must leave blamed."""

    name = "scaled-t-torch"
    target = "t"
    factor = 1.5


class ScaledFc2Torch(_ScalesOneLayer, TorchBackend):
    """PyTorch, except that LeNet-5's ``fc2`` returns its output times 1.05: a 5% fault,
    beyond the TF32 tolerances (rtol 1e-2), for the GPU precision check
    (experiments/gpu_precision.py, its fault check): a pair in TF32 mode must still flag it."""

    name = "scaled-fc2-torch"
    target = "fc2"
    factor = 1.05


class HalvedDenseJax(JaxBackend):
    """JAX, except that the layer named ``d`` computes on its input halved and doubles the
    result: the same function in exact arithmetic, but its partial sums stay finite where
    plain float32 overflows (an input at overflow scale), as another framework's
    summation order could.  For the NaN oracle's conditioning rule: such a difference is
    not evidence against a backend."""

    name = "halved-dense-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "d":
            return made

        class Halved(type(made)):
            def call(self, inputs, *args, **kwargs):
                return super().call(inputs * 0.5, *args, **kwargs) * 2.0

        made.__class__ = Halved
        return made


class HalvedLinearDenseJax(JaxBackend):
    """JAX, except that the Dense layer named ``d`` computes its linear part on its input
    halved and doubles it before its bias and activation: the same function in exact
    arithmetic, whose products stay finite where plain float32's overflow beside an input
    -Inf (-Inf where plain float32 gives Inf + -Inf = NaN), as a fused multiply-add chain
    holding the -Inf first does.  For the overflow rule that judges a layer with a bias and
    an activation by its linear part."""

    name = "halved-linear-dense-jax"

    @staticmethod
    def linear(x, kernel):
        from keras import ops

        return ops.matmul(x * 0.5, kernel) * 2.0

    @staticmethod
    def activate(y, activation):
        return activation(y)

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "d" or layer.api != "Dense":
            return made
        linear, activate = self.linear, self.activate

        class Rewritten(type(made)):
            def call(self, inputs, *args, **kwargs):
                from keras import ops

                y = linear(inputs, self.kernel)
                if self.bias is not None:
                    y = ops.add(y, self.bias)
                return activate(y, self.activation)

        made.__class__ = Rewritten
        return made


class NegInfToNanLinearDenseJax(HalvedLinearDenseJax):
    """:class:`HalvedLinearDenseJax` whose linear part turns -Inf into NaN: a fault at any
    scale, which the input scaled into range still shows."""

    name = "neg-inf-to-nan-linear-dense-jax"

    @staticmethod
    def linear(x, kernel):
        from keras import ops

        y = HalvedLinearDenseJax.linear(x, kernel)
        return ops.where(ops.logical_and(ops.isinf(y), y < 0), float("nan"), y)


class NanDroppingActivationDenseJax(HalvedLinearDenseJax):
    """Plain JAX's Dense (its linear part overflows as JAX's does), whose activation, when it
    has one, gives 0 for a NaN: a fused activation's fault (TensorFlow's oneDNN convolution
    with a relu), after the linear part, which an overflow of that part cannot explain."""

    name = "nan-dropping-activation-dense-jax"

    @staticmethod
    def linear(x, kernel):
        from keras import ops

        return ops.matmul(x, kernel)

    @staticmethod
    def activate(y, activation):
        import keras
        from keras import ops

        if activation is keras.activations.linear:
            return y
        return ops.where(ops.isnan(y), 0.0, activation(y))


class NudgedDenseJax(JaxBackend):
    """JAX, except that the Dense layer named ``d`` computes on its input times
    ``1 + 1e-4``: a rounding-level difference of its linear part (far inside float32's
    tolerance) that an exponential activation just below float32's maximum carries across
    it.  For the NaN oracle's split of a layer into its linear part and its activation:
    such a difference is no evidence against a backend."""

    name = "nudged-dense-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "d" or layer.api != "Dense":
            return made

        class Nudged(type(made)):
            def call(self, inputs, *args, **kwargs):
                return super().call(inputs * (1.0 + 1e-4), *args, **kwargs)

        made.__class__ = Nudged
        return made


class FusedNanDenseJax(NudgedDenseJax):
    """:class:`NudgedDenseJax`, and the Dense layer ``d`` with an activation (not its linear
    part alone) puts NaN where the activation overflows: a fused kernel's own fault, which
    splitting the layer must not explain away."""

    name = "fused-nan-dense-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "d" or layer.api != "Dense" or layer.params.get("activation") in (None, "linear"):
            return made
        import jax.numpy as jnp

        class Fused(type(made)):
            def call(self, inputs, *args, **kwargs):
                out = super().call(inputs, *args, **kwargs)
                return jnp.where(jnp.isinf(out), jnp.nan, out)

        made.__class__ = Fused
        return made


class HugeStateNanJax(JaxBackend):
    """JAX, except that a SimpleRNN's output is NaN wherever it passes 1e12 in magnitude: a
    difference that a recurrence whose state grew to overflow scale could make by its order
    of operations (the overflow rule judges it), and a fault where the state stayed far from
    it (the rule must not)."""

    name = "huge-state-nan-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.api != "SimpleRNN":
            return made
        import jax.numpy as jnp

        class Huge(type(made)):
            def call(self, *args, **kwargs):
                out = super().call(*args, **kwargs)
                return jnp.where(jnp.abs(out) > 1e12, jnp.nan, out)

        made.__class__ = Huge
        return made


class RoundedRecurrenceJax(JaxBackend):
    """JAX, except that a SimpleRNN's cell multiplies its state by ``1 + 2^-22`` (two float32
    ulps) before the recurrent product: another correct kernel's rounding, at every step.  Over
    a long recurrence it adds up beyond tolerance; a conditioning probe that moves only the
    layer's input (zeros here: they stay zeros) sees none of it, one that moves its weights
    by rounding noise too sees as much."""

    name = "rounded-recurrence-jax"
    factor = 1.0 + 2.0 ** -22

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.api != "SimpleRNN":
            return made
        factor, cell = self.factor, made.cell

        class Rounded(type(cell)):
            def call(self, sequence, states, training=False):
                prev = states[0] if isinstance(states, (list, tuple)) else states
                return super().call(sequence, [prev * factor], training=training)

        cell.__class__ = Rounded
        return made


class FaultyRecurrenceJax(RoundedRecurrenceJax):
    """:class:`RoundedRecurrenceJax` with ``1 + 1e-4``: a fault, far beyond any rounding."""

    name = "faulty-recurrence-jax"
    factor = 1.0 + 1e-4


class ForwardSumPoolJax(JaxBackend):
    """JAX, except that an AveragePooling1D whose pool and strides are 4 sums each window first
    to last, ``((x0 + x1) + x2) + x3``, then divides by 4: one order of a float32 sum."""

    name = "forward-sum-pool-jax"
    order = (0, 1, 2, 3)
    divisor = 4.0

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.api != "AveragePooling1D":
            return made
        order, divisor = self.order, self.divisor

        class Summed(type(made)):
            def call(self, inputs):
                import jax.numpy as jnp

                w = jnp.reshape(inputs, (inputs.shape[0], inputs.shape[1] // 4, 4, inputs.shape[2]))
                total = w[:, :, order[0]]
                for i in order[1:]:
                    total = total + w[:, :, i]
                return total / divisor

        made.__class__ = Summed
        return made


class InterleavedSumPoolJax(ForwardSumPoolJax):
    """:class:`ForwardSumPoolJax` summing ``((x0 + x2) + x1) + x3``: another order."""

    name = "interleaved-sum-pool-jax"
    order = (0, 2, 1, 3)


class UndividedPoolJax(InterleavedSumPoolJax):
    """:class:`InterleavedSumPoolJax` dividing by 2: a fault at any scale."""

    name = "undivided-pool-jax"
    divisor = 2.0


class CompileRefusingBackend(JaxBackend):
    """Refuses to compile any forward call, numbering its attempts in the error: the tests
    of the work a worker does ahead of a run see which attempt a run's error came from."""

    name = "compile-refusing"
    attempts = 0

    def compile_for(self, model, inputs):
        type(self).attempts += 1
        raise ValueError(f"refusing to compile, attempt {type(self).attempts}")


class ScaledXlaConv(_ScalesOneLayer, TensorflowXlaBackend):
    """TensorFlow compiled by XLA, except that the layer named ``conv`` returns its output
    times 1.05: a fault in one op of one framework's compiled mode only (its other mode,
    the traced graph ``tensorflow``, is untouched), for the execution-mode tests."""

    name = "scaled-xla-conv"
    target = "conv"
    factor = 1.05


class GradScaledJax(JaxBackend):
    """JAX, except that the layer named ``hidden`` passes 1.01 times its gradient back (to
    its weights and its input): its forward output is exactly JAX's (``z + 0.01 * (z -
    stop_gradient(z))`` adds an exact zero), so only the training phase can tell it apart."""

    name = "grad-scaled"
    layer = "hidden"
    factor = 1.01

    def make_layer(self, layer):
        built = super().make_layer(layer)
        if layer.name != self.layer:
            return built
        ops = self.keras.ops
        call, k = built.call, self.factor - 1.0

        def scaled(*args, **kwargs):
            z = call(*args, **kwargs)
            return z + k * (z - ops.stop_gradient(z))

        object.__setattr__(built, "call", scaled)
        return built


class GradScaledFarJax(GradScaledJax):
    """:class:`GradScaledJax` whose 1.01 gradient shows only on a batch with an input beyond
    ``far`` (in absolute value) at the layer: the seed's inputs stay below it, so only a
    search that drives the inputs out finds it."""

    name = "grad-scaled-far"
    far = 12.0

    def make_layer(self, layer):
        built = JaxBackend.make_layer(self, layer)
        if layer.name != self.layer:
            return built
        ops = self.keras.ops
        call, k, far = built.call, self.factor - 1.0, self.far

        def scaled(x, *args, **kwargs):
            z = call(x, *args, **kwargs)
            beyond = ops.cast(ops.max(ops.abs(x)) > far, z.dtype)
            return z + k * beyond * (z - ops.stop_gradient(z))

        object.__setattr__(built, "call", scaled)
        return built


class CumsumOffByOneJax(JaxBackend):
    """Keras on JAX whose ``keras.ops.cumsum`` is off by one everywhere (an injected op
    bug: the op-level oracles must flag this backend alone, and its repro script must show
    it run alone, outside audee's workers)."""

    name = "jax-cumsum-bug"

    def op_function(self, name):
        fn = super().op_function(name)
        if name != "cumsum":
            return fn
        ops = self.keras.ops

        def broken(x, axis=None, dtype=None):
            out = fn(x, axis=axis, dtype=dtype)
            return ops.subtract(out, ops.cast(ops.greater(ops.abs(out), -1), out.dtype)) if ops.size(out) else out

        return broken


class Bf16MatmulJax(JaxBackend):
    """JAX, except that the Dense layer named ``target`` computes its float32 matmul on
    inputs and kernel rounded to bfloat16 (a reduced-precision fast path, as a oneDNN or
    cuBLAS default can take): the same function to bfloat16's 8 bits, for the precision
    oracle's tests (a float64 model is left exact).  ``threshold``: the fast path only
    where the input's largest |value| exceeds it (0: always)."""

    name = "bf16-matmul-jax"
    target = "d2"
    threshold = 0.0

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != self.target:
            return made
        threshold = self.threshold

        class Rounded(type(made)):
            def call(self, inputs, *args, **kwargs):
                from keras import ops

                if str(inputs.dtype) != "float32":
                    return super().call(inputs, *args, **kwargs)
                exact = ops.matmul(inputs, self.kernel)
                rounded = ops.matmul(ops.cast(ops.cast(inputs, "bfloat16"), "float32"),
                                     ops.cast(ops.cast(self.kernel, "bfloat16"), "float32"))
                y = ops.where(ops.max(ops.abs(inputs)) > threshold, rounded, exact) if threshold else rounded
                if self.use_bias:
                    y = y + self.bias
                return self.activation(y) if self.activation is not None else y

        made.__class__ = Rounded
        return made


class Bf16LargeMatmulJax(Bf16MatmulJax):
    """:class:`Bf16MatmulJax` whose fast path starts where layer ``d2``'s input exceeds 8 in
    magnitude: the seed's inputs in [0, 1) keep it exact, and a search must drive them there."""

    name = "bf16-large-matmul-jax"
    threshold = 8.0


#: what GarblingBackend says: a Latin-1 path decoded as the OS does (a lone surrogate for its
#: 0xE9), a surrogate no decoder makes, and ten megabytes of a dumped graph
GARBLED_MESSAGE = (f"cannot open {os.fsdecode(b'/data/caf' + bytes([0xE9]) + b'.bin')}: bad \ud800 byte in the graph "
                   + "node " * 2_000_000 + "end of the dump")


class GarblingBackend(JaxBackend):
    """Raises a clean error whose message is no valid UTF-8 and 10 MB long when a batch is
    run: a backend's words are data, and must not kill or bloat a run."""

    name = "garbling"

    def run(self, model, inputs):
        raise OSError(GARBLED_MESSAGE)


class _NanToValueOneLayer:
    """Mixin: the layer named ``target`` maps NaN in its output to ``value``."""

    target = "d"
    value = 0.0

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != self.target:
            return made
        value = self.value

        class NanToValue(type(made)):
            def call(self, *args, **kwargs):
                import keras

                y = super().call(*args, **kwargs)
                return keras.ops.where(keras.ops.isnan(y), keras.ops.full_like(y, value), y)

        made.__class__ = NanToValue
        return made


class NanZeroTfMode(_NanToValueOneLayer, TensorflowBackend):
    """A mode of TensorFlow (its reference: the program it runs is TensorFlow's) whose layer
    ``d`` maps NaN to 0, as a compiler dropping a NaN would: judged against ``tensorflow``."""

    name = "nan-zero-tf-mode"
    reference = "tensorflow"


class NanFiniteTfConverter(_NanToValueOneLayer, TensorflowBackend):
    """A converter-like backend of TensorFlow's model whose layer ``d`` maps NaN to 1.0, as a
    converted graph's runtime mapping NaN to a finite value would: judged against ``tensorflow``."""

    name = "nan-finite-tf-converter"
    reference = "tensorflow"
    value = 1.0


class NanZeroTfIndependent(_NanToValueOneLayer, TensorflowBackend):
    """The same fault as :class:`NanZeroTfMode` in a backend that declares no reference: an
    independent framework, judged by the majority rules only."""

    name = "nan-zero-tf-independent"


class NanFiniteOnnxOps(OnnxRuntimeBackend):
    """``onnxruntime``'s op path (the call converted by tf2onnx, run by onnxruntime) whose
    runtime maps every NaN of a float output to 1.0, as a converted graph's kernel dropping
    a NaN would: a converter of TensorFlow's program, judged against ``tensorflow``."""

    name = "nan-finite-onnx-ops"
    reference = "tensorflow"

    def call_op(self, fn, args, kwargs):
        import numpy as np

        outs = super().call_op(fn, args, kwargs)
        return [np.where(np.isnan(o), np.ones_like(o), o) if np.issubdtype(o.dtype, np.floating) else o
                for o in outs]


class SquareGradJax(JaxBackend):
    """Keras on JAX whose ``keras.ops.square`` computes the right values but a wrong
    backward pass (an injected gradient bug): 3x instead of 2x, and NaN where x is 0 (a
    0 * inf in the backward pass), for the op-gradient tests."""

    name = "jax-square-grad-bug"

    def op_function(self, name):
        fn = super().op_function(name)
        if name != "square":
            return fn
        ops = self.keras.ops

        def broken(x):
            if not self.keras.backend.is_float_dtype(x.dtype):  # integers have no gradient: left alone
                return fn(x)
            root = ops.sqrt(ops.abs(x))  # its derivative is inf at 0
            return (fn(x) + (x - ops.stop_gradient(x)) * x
                    + (root - ops.stop_gradient(root)) * ops.cast(0.0, x.dtype))

        return broken


class _ScaledDenseD(_ScalesOneLayer):
    """Mixin: the layer named ``d`` returns its output times 1.05 (5% off: beyond float32's
    tolerance, flipping no label of a one-Dense model)."""

    target = "d"
    factor = 1.05


class ScaledDenseJax(_ScaledDenseD, JaxBackend):
    """JAX with one wrong layer, for the float64 reference's odd-backend rule: with its twin
    :class:`ScaledDenseJaxTwin` two backends share one wrong value, and the majority would
    blame the one right backend."""

    name = "scaled-dense-jax"


class ScaledDenseJaxTwin(_ScaledDenseD, JaxBackend):
    """:class:`ScaledDenseJax` under another name: the second backend sharing its fault."""

    name = "scaled-dense-jax-twin"


class Float32PoolJax(JaxBackend):
    """JAX, except that the layer named ``p`` computes on its input cast to float32 and casts
    its result back to its own dtype: a float16 average pooling whose window sum stays
    finite where float16's overflows, as PyTorch's kernel keeps it; like JAX without x64, it
    gives no float64 result, so only the float64 reference can say the mean fits float16."""

    name = "float32-pool-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "p":
            return made
        import keras

        class Float32(type(made)):
            def call(self, inputs, *args, **kwargs):
                out = super().call(keras.ops.cast(inputs, "float32"), *args, **kwargs)
                return keras.ops.cast(out, inputs.dtype)

        made.__class__ = Float32
        return made


class OffsetNormJax(JaxBackend):
    """JAX, except that a LayerNormalization adds 100 to its output: a fault far beyond the
    rounding of Keras' normalization formula on one-element slices (audee.oracle.slices)."""

    name = "offset-norm-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.api != "LayerNormalization":
            return made

        class Offset(type(made)):
            def call(self, inputs):
                return super().call(inputs) + 100.0

        made.__class__ = Offset
        return made


class LastRowNanDenseJax(JaxBackend):
    """JAX, except that the Dense layer ``d`` puts a NaN in its output's last batch row: a
    backend's own NaN on a row whose input is finite, which a NaN the input holds in another
    row does not explain."""

    name = "last-row-nan-dense-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "d" or layer.api != "Dense":
            return made
        import jax.numpy as jnp

        class LastRowNan(type(made)):
            def call(self, inputs, *args, **kwargs):
                out = super().call(inputs, *args, **kwargs)
                return out.at[-1, 0].set(jnp.nan)

        made.__class__ = LastRowNan
        return made


class BatchNanJax(JaxBackend):
    """JAX, except that the layer named ``d`` gives NaN in its first row where the batch holds
    more than four rows: a kernel or a graph rewrite chosen by the batch's shape (TensorFlow's
    grappler reorders an LSTM's gelu product for 8 rows and not for 4).  A diagnosis that
    re-runs fewer rows than the case ran must not call the difference unstable."""

    name = "batch-nan-jax"

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "d":
            return made
        import jax.numpy as jnp

        class Batched(type(made)):
            def call(self, inputs, *args, **kwargs):
                out = super().call(inputs, *args, **kwargs)
                if out.shape[0] is None or out.shape[0] <= 4:
                    return out
                return out.at[0].set(jnp.nan)

        made.__class__ = Batched
        return made


class OnceNanJax(JaxBackend):
    """JAX, except that the layer named ``d`` gives NaN in its first row the first time it
    runs on a batch of more than four rows in its process, and right values after: a
    backend's difference that the same inputs do not show again (a race, a kernel picked by
    the state of the process).  Counted when the compiled program runs (a host callback), not
    when it is traced: a re-run of the same program computes again."""

    name = "once-nan-jax"
    _runs = [0]

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "d":
            return made
        import jax
        import jax.numpy as jnp

        runs = OnceNanJax._runs

        def first_time(_):
            runs[0] += 1
            return np.float32(np.nan if runs[0] == 1 else 0.0)

        class Once(type(made)):
            def call(self, inputs, *args, **kwargs):
                out = super().call(inputs, *args, **kwargs)
                if out.shape[0] is None or out.shape[0] <= 4:
                    return out
                nan = jax.pure_callback(first_time, jax.ShapeDtypeStruct((), jnp.float32), out[0, 0])
                return out.at[0].add(nan.astype(out.dtype))

        made.__class__ = Once
        return made


class _ProcessFacts:
    """Says in its hello (``versions``) which process it runs in: its pid and parent, its temp
    dir, and whether JAX computes with 64-bit types (tests/test_zygote.py)."""

    def versions(self) -> dict[str, str]:
        import tempfile

        import jax

        return {**super().versions(), "pid": str(os.getpid()), "ppid": str(os.getppid()),
                "tmp": tempfile.gettempdir(), "x64": str(bool(jax.config.jax_enable_x64))}


class ProcessFactsJax(_ProcessFacts, JaxBackend):
    name = "process-facts"


class ProcessFactsJaxX64(_ProcessFacts, JaxX64Backend):
    name = "process-facts-x64"


class SmallBatchKernelJax(_ScalesOneLayer, JaxBackend):
    """JAX, except that the layer named ``d2`` returns its output times 1.01 (a fault), and
    ``logits`` returns its output times 1.5 on a batch of fewer than 8 rows: a kernel picked
    by the size of what it computes, right at the batch the case ran (as XLA on the CPU sums
    a small float32 reduction in one sequential accumulator and a large one in a YNNPACK
    fusion).  A layer judged alone on fewer rows than the case ran would meet that kernel."""

    name = "small-batch-kernel-jax"
    target = "d2"
    factor = 1.01

    def make_layer(self, layer):
        made = super().make_layer(layer)
        if layer.name != "logits":
            return made

        class SmallBatch(type(made)):
            def call(self, inputs, *args, **kwargs):
                out = super().call(inputs, *args, **kwargs)
                return out * 1.5 if inputs.shape[0] is not None and inputs.shape[0] < 8 else out

        made.__class__ = SmallBatch
        return made
