"""``litert``: the Keras model on TensorFlow, converted by the TFLite converter and run by
the LiteRT interpreter (``ai-edge-litert``), in float32 (no quantization, no delegate).

The converter lowers TensorFlow's graph to TFLite's builtin ops (fusing, folding and
rewriting on the way) and the interpreter runs its own kernels: both are code paths no
other backend shares.  Their failures stay apart: the converter's are ``convert``'s, the
interpreter's (allocating or invoking) are ``run``'s.  A model that needs an op outside
TFLite's builtins is refused by the converter with an explicit "not supported" message
(a limitation, audee/triage/rootcause.py), not run through the TensorFlow (Flex) fallback.

Weights are constants of a converted model, as on a device: the model is converted once
per weight set and input signature (a fuzzed case has one weight set; a weight-level
search pays a conversion per individual).

An op case goes the same way (:func:`tflite_call`): the ``keras.ops`` call traced with its
tensors as the inputs, converted, run by the interpreter; judged against ``tensorflow``'s
traced call of it, the program before conversion.
"""
from __future__ import annotations

import traceback
from typing import Any

import numpy as np

from audee.backends.base import BackendError, Phase
from audee.backends.keras_backends import TensorflowBackend, tf_traced_call
from audee.backends.keras_build import BuiltModel
from audee.cases.spec import Weights


def tflite_call(fn: Any, args: list[Any], kwargs: dict[str, Any], at: dict[str, str]) -> list[Any]:
    """``fn(*args, **kwargs)`` converted by the TFLite converter (builtin ops only) and run by
    the LiteRT interpreter: the call traced with its tensors as the inputs
    (:func:`tf_traced_call`), its outputs flattened in order.  ``at["phase"]`` says where it is
    (``convert``, ``run``) for a failure's phase.  Standalone: op scripts carry its text."""
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    at["phase"] = "convert"
    function, _, leaves = tf_traced_call(fn, args, kwargs)
    concrete = function.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], tf.Module())
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    interpreter = Interpreter(model_content=converter.convert())
    at["phase"] = "run"
    got = interpreter.get_signature_runner()(**{f"t{i}": np.asarray(t) for i, t in enumerate(leaves)})
    return [np.asarray(got[f"y{i}"]) for i in range(len(got))]


class LiteRtBackend(TensorflowBackend):
    name = "litert"

    def versions(self) -> dict[str, str]:
        import importlib.metadata as md

        return {**super().versions(), "ai-edge-litert": md.version("ai-edge-litert")}

    def declared_outputs(self, model: BuiltModel) -> None:
        """None: LiteRT runs the converter's flatbuffer, not the Keras model, so Keras'
        declarations are not its contract (its graph answers to TensorFlow's program)."""
        return None

    def compile(self, built: BuiltModel) -> None:
        built.interpreters = {}  # input signature -> (interpreter, its signature runner, output keys)
        built.assign_fns = {}

    def set_weights(self, model: BuiltModel, weights: Weights) -> None:
        model.check_weights(weights)
        model.set_weights(weights)
        model.interpreters = {}  # constants changed: convert again

    def compile_for(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> None:
        """Convert for these inputs' shapes and dtypes and make the interpreter (timed as
        ``convert`` and ``compile``)."""
        self._runner(model, self._ordered(model, inputs))

    def _runner(self, model: BuiltModel, xs: list[np.ndarray]) -> Any:
        key = tuple((np.shape(a), str(np.asarray(a).dtype)) for a in xs)
        if key not in model.interpreters:
            model.interpreters[key] = self._convert(model, xs)
        return model.interpreters[key]

    def _convert(self, model: BuiltModel, xs: list[np.ndarray]) -> Any:
        import tensorflow as tf
        from ai_edge_litert.interpreter import Interpreter

        keras_model, order, spec = model.model, model.order, model.spec
        # the weights as constants of the traced call: the converter takes variables at their
        # initial values (audee's placeholders), not at the values assigned since
        tv = [tf.constant(v.value) for v in model.trainable_variables]
        ntv = [tf.constant(v.value) for v in model.non_trainable_variables]

        def forward(*args: Any) -> dict[str, Any]:
            outs, _ = keras_model.stateless_call(tv, ntv, list(args), training=False)
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            return {f"y{k}": tf.identity(o) for k, o in enumerate(outs)}  # TFLite output names: y<layer index>

        sig = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype), name=i.name)
               for a, i in zip(xs, spec.inputs)]
        try:
            with self.clock.timed("convert"):
                fn = tf.function(forward, input_signature=sig, autograph=False)
                concrete = fn.get_concrete_function()
                converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], tf.Module())
                converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
                flat = converter.convert()
        except Exception as exc:
            raise BackendError(Phase.CONVERT, f"{type(exc).__name__}: {exc}", traceback.format_exc()) from exc
        with self.clock.timed("compile"):
            interpreter = Interpreter(model_content=flat)
            runner = interpreter.get_signature_runner()
        # the interpreter is kept with its runner: the runner alone does not keep it alive, and
        # a collected interpreter's buffers are read as garbage
        return interpreter, runner, [f"y{k}" for k in range(len(order))]

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The op converted and run as a model is (:func:`tflite_call`); a converter failure is
        phase ``convert``, the interpreter's ``run``."""
        at = {"phase": Phase.CONVERT}
        try:
            with self.clock.timed("convert"):
                return tflite_call(fn, args, kwargs, at)
        except Exception as exc:
            phase = Phase.CONVERT if at["phase"] == "convert" else Phase.RUN
            raise BackendError(phase, f"{type(exc).__name__}: {exc}", traceback.format_exc()) from exc

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        xs = self._ordered(model, inputs)
        _, runner, keys = self._runner(model, xs)
        got = runner(**{i.name: np.ascontiguousarray(a) for i, a in zip(model.spec.inputs, xs)})
        return [np.asarray(got[k]) for k in keys]
