"""ONNX-bridged backend: Keras (TF backend) -> tf2onnx -> onnxruntime CPU provider.

Export happens once per spec, at its first weight set or run (a build answers with the
weight shapes alone, so the conversion overlaps the other workers' compilation).  The
exported graph takes every weight as a *graph input* (a stateless Keras call traced by
tf2onnx), so a new weight set never needs a re-export:

* ``onnxruntime`` bakes the weights back into initializers (a protobuf edit plus a new
  session, no re-export), so ORT's constant folding and fusions run as they would on a
  deployed model;
* ``onnxruntime-fed`` feeds the weights as inputs on every call: the fastest for
  weight-level search, but it skips ORT's constant-weight optimizations.

Finding on this stack: Keras' JAX-backend ONNX export emits a 4-D MaxPool that
onnxruntime rejects, so the TF-backend path (tf2onnx, opset 15) is used.

Dtypes: every weight and input is cast to its graph input's element type (a float16
model's weights arrive as float32 from ``audee.cases.weights`` or a seed; onnxruntime takes no
implicit cast).  tf2onnx 1.17 maps TensorFlow's bfloat16 to ONNX float16
(``tf2onnx.tf_utils.TF_TO_ONNX_DTYPE``), so a converted graph can compute a layer in
another precision than the Keras model; such a graph is refused at convert
(:func:`check_output_dtypes`) instead of being run as if it were the model.
"""
from __future__ import annotations

import logging
import os
import re
import traceback
from typing import Any, ClassVar

import numpy as np

from audee.backends.base import Backend, BackendError, Phase
from audee.backends.info import (MAX_AS_MAX_POOL, MAX_AS_REDUCE_MAX, SELECT_AS_ARITHMETIC,
                                TRANSPOSE_RESHAPED_AFTER_SQUARE)
from audee.backends.keras_backends import (KerasOpCalls, TensorflowBackend, apply_precision_env,
                                            round_trip_built, tf_traced_call)
from audee.backends.keras_build import BuiltModel
from audee.backends.ort_process import session_options
from audee.backends.tf_graph import graph_facts as tf_graph_facts, layer_of
from audee.cases.spec import ModelSpec, Weights, contiguous


log = logging.getLogger(__name__)


class OnnxModel:
    """A built Keras model and, once converted (:meth:`OnnxRuntimeBackend.converted`), its
    ONNX graph with weights as graph inputs, the weight feed and the session."""

    def __init__(self, built: BuiltModel, weight_inputs: list[str], conversion: tuple):
        self.built = built
        self.proto: Any = None  # ModelProto with weights as graph inputs
        self.weight_inputs = weight_inputs
        self.conversion = conversion  # (tf.function, its input signature, the variables it takes)
        self.convert_error: BackendError | None = None  # a conversion that failed fails again at once
        self.dtypes: dict[str, np.dtype] = {}  # graph input name -> numpy dtype it takes
        self.feed: dict[str, np.ndarray] = {}
        self.session: Any = None
        self.facts: dict[str, list[str]] = {}  # layer name -> what its converted graph shows (graph_facts)
        #: its variables' values when it was taken from the hosted Keras backend's build
        #: (:meth:`OnnxRuntimeBackend.share_build`): the weight feed starts from them, whatever
        #: that backend's runs did to the variables since (a seed generator's state)
        self.built_values: list[np.ndarray] | None = None

    def start_values(self, read: Any) -> list[np.ndarray]:
        """The values the weight feed starts from: its variables' built values (``read``:
        a variable's current value as numpy)."""
        return self.built_values if self.built_values is not None else [read(v) for v in self.conversion[2]]

    def cast(self, name: str, array: Any) -> np.ndarray:
        """``array`` in the element type graph input ``name`` takes (round to nearest even,
        as every Keras backend casts a float32 value into a float16 variable)."""
        return contiguous(np.asarray(array).astype(self.dtypes[name], copy=False))


def graph_input_dtypes(proto: Any) -> dict[str, np.dtype]:
    """Graph input name -> the numpy dtype of its ONNX element type (bfloat16 via ml_dtypes)."""
    from onnx.helper import tensor_dtype_to_np_dtype

    return {i.name: np.dtype(tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)) for i in proto.graph.input}


def check_graph_dtypes(proto: Any, want: dict[str, str], kind: str, source: str,
                       maps: str = "tf2onnx maps TensorFlow's {want} to ONNX {got}") -> None:
    """Refuse a converted graph that computes a named tensor (an input or output of
    ``proto``) in another dtype than its source does (``want``: name -> dtype): it would
    compute another program (tf2onnx writes TensorFlow's bfloat16 tensors as ONNX float16).
    ``kind`` and ``source`` name the tensor and the program for the message, ``maps`` the
    converter's mapping of the two dtypes that differ.  Standalone: op scripts carry its text."""
    from onnx.helper import tensor_dtype_to_np_dtype

    got = {v.name: str(np.dtype(tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type)))
           for v in [*proto.graph.input, *proto.graph.output]}
    for name, dtype in want.items():  # the first that differs
        if name in got and got[name] != dtype:
            raise TypeError(f"the converted graph computes {kind} {name!r} in {got[name]}, {source} in "
                            f"{dtype} ({maps.format(want=dtype, got=got[name])})")


def check_output_dtypes(proto: Any, want: dict[str, str], source: str, maps: str) -> None:
    """Refuse a converted graph whose layer outputs are not in the dtypes the program it was
    converted from computes them in (``want``, :meth:`OnnxRuntimeBackend.source_dtypes`): it
    would compute another model (tf2onnx writes bfloat16 tensors as float16)."""
    check_graph_dtypes(proto, want, "layer", source, maps)


def bake_captured_constants(proto: Any, concrete: Any) -> None:
    """Turn the graph inputs tf2onnx made of captured tensors back into initializers.

    A Keras layer may hold constants as plain tensors (``Normalization(mean=..., variance=...)``
    keeps them so); the traced function captures them, and tf2onnx 1.17's ``from_function``
    lists every non-resource input of the concrete function, captures included, as a graph
    input.  Left so, the model needs inputs nobody feeds ("Required inputs ... are missing
    from input feed"): a failure of the bridge, not of onnxruntime.  Their values are
    known at trace time, so they are written into the graph as the constants they are."""
    import onnx

    captured = {inner.name: outer for outer, inner in concrete.graph.captures if outer.dtype.name != "resource"}
    kept = []
    for graph_input in proto.graph.input:
        outer = captured.get(graph_input.name)
        if outer is None:
            kept.append(graph_input)
        else:
            proto.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(outer.numpy()), graph_input.name))
    del proto.graph.input[:]
    proto.graph.input.extend(kept)


#: tf2onnx's switch for copying the graph before each optimizer pass (``tf2onnx.constants``)
TF2ONNX_CATCH_ERRORS = "TF2ONNX_CATCH_ERRORS"


def convert_function(fn: Any, signature: list[Any], opset: int) -> Any:
    """``tf2onnx.convert.from_function``'s ONNX model, without its graph copies.

    By default tf2onnx deep-copies the whole graph before each of its optimizer passes, so
    that a pass that raises is skipped (with a warning) instead of failing the conversion:
    a third of the conversion's CPU time on LeNet-5 variants (0.26 -> 0.18 s a model,
    ``experiments/results/throughput.md``).  Here the passes run on the graph itself, and
    only when one of them raises is the model converted again the default way, so the
    result is tf2onnx's own either way (same nodes, attributes and onnxruntime outputs on
    31 LeNet-5 variants; ``tests/test_onnx_bridge.py``).

    tf2onnx 1.17 reads the switch wrongly (it compares the variable's *name* to "TRUE",
    ``tf2onnx/convert.py``), so any value turns the copies off; "FALSE" says what is meant
    under either reading."""
    import tf2onnx

    before = os.environ.get(TF2ONNX_CATCH_ERRORS)
    os.environ[TF2ONNX_CATCH_ERRORS] = "FALSE"
    try:
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=signature, opset=opset)
        return proto
    except Exception as exc:
        if not _raised_in_optimizer(exc):
            raise
    finally:
        if before is None:
            os.environ.pop(TF2ONNX_CATCH_ERRORS, None)
        else:
            os.environ[TF2ONNX_CATCH_ERRORS] = before
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=signature, opset=opset)  # passes skipped as by default
    return proto


def tf2onnx_call(fn: Any, args: list[Any], kwargs: dict[str, Any], at: dict[str, str], opset: int = 15,
                 convert: Any = None) -> tuple[Any, dict[str, Any], list[str]]:
    """``fn(*args, **kwargs)`` as ``onnxruntime`` converts a model: traced by TensorFlow with
    its tensors as the inputs (:func:`tf_traced_call`), converted by tf2onnx (``opset``).  The
    ONNX graph, its feed (``t<i>``) and its output names (``y<k>``, the outputs flattened in
    order); a graph computing a tensor in another dtype than TensorFlow's is refused
    (:func:`check_graph_dtypes`).  ``at["phase"]`` is ``convert`` throughout; ``convert``:
    tf2onnx's ``from_function`` unless given (the worker's :func:`convert_function`, the same
    graph without its copies).  Standalone: op scripts carry its text."""
    import tf2onnx

    at["phase"] = "convert"
    function, sig, leaves = tf_traced_call(fn, args, kwargs)
    if convert is None:
        proto, _ = tf2onnx.convert.from_function(function, input_signature=sig, opset=opset)
    else:
        proto = convert(function, sig, opset)
    outputs = function.get_concrete_function().structured_outputs
    names = [f"y{k}" for k in range(len(outputs))]
    want = {**{s.name: s.dtype.name for s in sig}, **{n: outputs[n].dtype.name for n in names}}
    check_graph_dtypes(proto, want, "tensor", "the traced call")
    # copies: a tensor's numpy view is read-only, and OpenVINO refuses to be fed one
    return proto, {s.name: np.array(t) for s, t in zip(sig, leaves)}, names


def graph_facts(proto: Any, layers: list[str]) -> dict[str, list[str]]:
    """Per Keras layer (by name), what its converted graph shows (:data:`PROGRAM_FACTS`):
    ``select_as_arithmetic`` where a TensorFlow select of the layer (a node named ``Select`` or
    ``SelectV2``) became an ``Add`` of two ``Mul`` (tf2onnx's lowering of a float ``tf.where``);
    ``max_as_reduce_max`` / ``max_as_max_pool`` where the layer has a ``ReduceMax`` node, or a
    ``MaxPool`` / ``GlobalMaxPool`` one (one Keras max pooling reaches either, by its layout);
    ``transpose_reshaped_after_square`` where a ``Reshape`` the transpose optimizer made of a
    Transpose (named ``Transpose__<n>``) reads the layer's square (a ``Mul`` of one input by
    itself): the layer of the square, the Reshape having no scope of its own.
    A node belongs to the layer its name's scope names (``t_relu_1/SelectV2``: ``t_relu``), or
    else to the layer of the node whose body holds it: a recurrent layer that is not unrolled
    becomes a ``Loop`` whose body computes the cell, activations and masks included."""
    out: dict[str, list[str]] = {}
    _graph_facts(proto.graph, layers, None, out)
    return out


def _graph_facts(graph: Any, layers: list[str], owner: str | None, out: dict[str, list[str]]) -> None:
    """:func:`graph_facts` of one graph, and of the subgraphs its nodes hold (``Loop``, ``Scan``,
    ``If`` bodies), into ``out``; ``owner``: the layer of the node that holds ``graph``."""
    made_by = {o: n for n in graph.node for o in n.output}
    producers = {o: n.op_type for o, n in made_by.items()}
    for n in graph.node:
        layer = layer_of(n.name, layers) or owner
        fact = _OP_FACTS.get(n.op_type)
        if n.op_type == "Add" and _SELECT.fullmatch(n.name.rsplit("/", 1)[-1]) \
                and n.input and all(producers.get(i) == "Mul" for i in n.input):
            fact = SELECT_AS_ARITHMETIC
        square = made_by.get(n.input[0]) if n.op_type == "Reshape" and n.input else None
        if _MOVED_TRANSPOSE.fullmatch(n.name.rsplit("/", 1)[-1]) and square is not None \
                and square.op_type == "Mul" and len(square.input) == 2 and square.input[0] == square.input[1]:
            fact, layer = TRANSPOSE_RESHAPED_AFTER_SQUARE, layer_of(square.name, layers) or owner
        if fact is not None and layer is not None and fact not in out.setdefault(layer, []):
            out[layer].append(fact)
        for attr in n.attribute:
            for body in [attr.g] if attr.HasField("g") else list(attr.graphs):
                _graph_facts(body, layers, layer, out)


def _merged(*facts: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per layer, the facts of every mapping, each once, in order."""
    out: dict[str, list[str]] = {}
    for f in facts:
        for layer, got in f.items():
            out.setdefault(layer, []).extend(x for x in got if x not in out[layer])
    return out


#: the ONNX ops whose presence in a layer's graph is a fact of its own (:func:`graph_facts`)
_OP_FACTS = {"ReduceMax": MAX_AS_REDUCE_MAX, "MaxPool": MAX_AS_MAX_POOL, "GlobalMaxPool": MAX_AS_MAX_POOL}

#: the last scope of a TensorFlow select node's name
_SELECT = re.compile(r"Select(?:V2)?")
#: the name tf2onnx's transpose optimizer gives a Transpose it makes (and keeps when it turns
#: the Transpose into a Reshape)
_MOVED_TRANSPOSE = re.compile(r"Transpose__\d+")


def onnx_checker_error(proto: Any) -> str | None:
    """The ONNX checker's first complaint about ``proto`` (full check: types and shapes
    inferred node by node, ``strict_mode``), or None for a valid graph; one line."""
    import onnx

    if proto is None:
        return None
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as exc:  # ValidationError, InferenceError
        return " ".join(str(exc).split())[:600]
    return None


def _raised_in_optimizer(exc: BaseException) -> bool:
    """Whether ``exc`` came out of one of tf2onnx's optimizer passes."""
    tb = exc.__traceback__
    while tb is not None:
        if f"tf2onnx{os.sep}optimizer{os.sep}" in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def baked_proto(om: OnnxModel) -> Any:
    """``om``'s graph with its current weight feed written in as initializers (a deployed
    model's constants: what a runtime's constant folding and fusions expect)."""
    import onnx

    proto = onnx.ModelProto()
    proto.CopyFrom(om.proto)
    g = proto.graph
    baked = set(om.weight_inputs)
    kept = [i for i in g.input if i.name not in baked]
    del g.input[:]
    g.input.extend(kept)
    for name in om.weight_inputs:
        g.initializer.append(onnx.numpy_helper.from_array(om.feed[name], name))
    return proto


class OnnxRuntimeBackend(KerasOpCalls, Backend):
    """The model converted by tf2onnx and run by onnxruntime (the module's docstring).  An op
    case goes the same way (:meth:`call_op`): the call converted alone and run."""

    name = "onnxruntime"
    opset: ClassVar[int] = 15
    bake_weights: ClassVar[bool] = True
    init_weights: ClassVar[bool] = False  # as KerasBackend.init_weights

    def __init__(self, device: str = "cpu", precision: str = "full"):
        super().__init__(device, precision)
        self.keras_side = TensorflowBackend("cpu")  # conversion always traces on CPU

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        TensorflowBackend.prepare_process("cpu")
        apply_precision_env(device, precision)

    @property
    def providers(self) -> list[Any]:
        if self.device.startswith("cuda"):
            _, _, index = self.device.partition(":")
            cuda = {"device_id": index or "0", "use_tf32": "1" if self.precision == "tf32" else "0"}
            return [("CUDAExecutionProvider", cuda), "CPUExecutionProvider"]
        return ["CPUExecutionProvider"]

    def precision_state(self) -> dict[str, str]:
        if not self.device.startswith("cuda"):
            return {"mode": self.precision}
        return {"mode": self.precision, "cuda.use_tf32": "1" if self.precision == "tf32" else "0"}

    def versions(self) -> dict[str, str]:
        import onnx
        import onnxruntime
        import tf2onnx

        return {**self.keras_side.versions(), "tf2onnx": tf2onnx.__version__, "onnx": onnx.__version__,
                "onnxruntime": onnxruntime.__version__}

    def make_layer(self, layer: Any) -> Any:
        return self.keras_side.make_layer(layer)

    def build(self, spec: ModelSpec) -> OnnxModel:
        built = BuiltModel(spec, self.keras_side.keras, self.make_layer, init_weights=self.init_weights)
        return self.wrap(built)

    def shares_build(self, spec: ModelSpec) -> bool:
        """Every spec but a round trip's (it converts the model it loads): the conversion
        traces the Keras model's stateless call and reads its variables, never writes them,
        so the hosted Keras backend's model (built the same way) serves."""
        return not spec.roundtrip

    def share_build(self, built: BuiltModel) -> OnnxModel:
        om = self.wrap(built)
        om.built_values = [self.variable_value(v) for v in om.conversion[2]]
        return om

    def round_trip(self, model: OnnxModel, weights: Weights) -> None:
        """The Keras model saved and loaded with its weights in (:meth:`BuiltModel.round_trip`),
        then the loaded model converted and given the weights it loaded."""
        round_trip_built(model.built, self.keras_side.keras, weights)
        fresh = self.wrap(model.built)
        model.__dict__.update(fresh.__dict__)
        self.set_weights(model, model.built.get_weights())

    def wrap(self, built: BuiltModel) -> OnnxModel:
        """A built Keras model ready for its conversion (made at the first weight set or run)."""
        import tensorflow as tf

        spec = built.spec
        model = built.model
        tvars, ntvars = model.trainable_variables, model.non_trainable_variables
        n_tv = len(tvars)
        x_sig = [tf.TensorSpec((None, *i.shape), i.dtype, name=i.name) for i in spec.inputs]
        w_sig = [tf.TensorSpec(v.shape, v.dtype, name=f"audee_w{k}") for k, v in enumerate(tvars + ntvars)]
        n_x = len(x_sig)
        order = built.order

        def forward(*args: Any) -> dict:
            xs, ws = list(args[:n_x]), list(args[n_x:])
            outs, _ = model.stateless_call(ws[:n_tv], ws[n_tv:], xs, training=False)
            outs = outs if isinstance(outs, (list, tuple)) else [outs]  # a one-layer model
            return {name: tf.identity(o) for name, o in zip(order, outs)}

        fn = tf.function(forward, input_signature=x_sig + w_sig, autograph=False)
        # The conversion waits for the first weight set or run: a build request answers with
        # the weight shapes at once, so this worker converts while the others compile and
        # run, instead of every worker waiting for the slowest build.
        return OnnxModel(built, [s.name for s in w_sig], (fn, x_sig + w_sig, tvars + ntvars))

    def converted(self, om: OnnxModel) -> OnnxModel:
        """``om`` with its graph (converted now if not yet): any failure is ``convert``'s."""
        if om.proto is not None:
            return om
        if om.convert_error is not None:
            raise om.convert_error
        order = self.output_names(om)
        try:
            with self.clock.timed("convert"):
                proto = self.export(om)
            graph_outputs = [o.name for o in proto.graph.output]
            if sorted(graph_outputs) != sorted(order):
                raise RuntimeError(f"{self.converter} produced outputs {graph_outputs}, expected {order}")
            om.proto, om.dtypes = proto, graph_input_dtypes(proto)
            om.facts = _merged(graph_facts(proto, order), self.given_facts(om, order))
            # Seed-generator states and other non-layer variables keep their built values.
            om.feed = {name: om.cast(name, value)
                       for name, value in zip(om.weight_inputs, om.start_values(self.variable_value))}
            if not self.bake_weights:
                self._session(om)  # onnxruntime's own refusal first (a bfloat16 Conv has no kernel)
                self.check_dtypes(om)
            # baked: the first session is made with the first real weight set (set_weights) and
            # both checks run there, still as convert: a session for placeholder weights is waste
        except Exception as exc:
            message = self.refusal(om.proto, exc) if om.proto is not None else f"{type(exc).__name__}: {exc}"
            om.proto = om.session = None
            om.convert_error = BackendError(Phase.CONVERT, message, traceback.format_exc())
            raise om.convert_error from exc
        return om

    def source_dtypes(self, om: OnnxModel) -> dict[str, str]:
        """Each layer output's dtype in the program tf2onnx converted, the Keras model's traced
        TensorFlow function: what the model computes, not Keras' symbolic output dtype (a
        layer may declare one and compute another on every backend, CategoryEncoding's count
        under mixed_float16 declaring float16 and computing float32, which tf2onnx copies)."""
        outputs = om.conversion[0].get_concrete_function().structured_outputs
        return {name: t.dtype.name for name, t in outputs.items()}

    #: how the converter's dtype map reads in a refusal (:func:`check_graph_dtypes`)
    dtype_map: ClassVar[str] = "tf2onnx maps TensorFlow's {want} to ONNX {got}"
    #: the program :meth:`source_dtypes` reads, as a refusal names it
    dtype_source: ClassVar[str] = "the Keras model traced by TensorFlow"  # no apostrophe: the normalizer reads quoted text as a name

    def check_dtypes(self, om: OnnxModel) -> None:
        """Refuse ``om``'s graph where it computes a layer in another dtype than its source."""
        check_output_dtypes(om.proto, self.source_dtypes(om), self.dtype_source, self.dtype_map)

    def variable_value(self, variable: Any) -> np.ndarray:
        """A Keras variable's current value as numpy (the weight feed's start)."""
        return self.keras_side.keras.ops.convert_to_numpy(variable.value)

    def output_names(self, om: OnnxModel) -> list[str]:
        """The graph's output names, one per layer in topological order (tf2onnx: the layer names)."""
        return list(om.built.order)

    #: what makes the ONNX graph (named in errors)
    converter: ClassVar[str] = "tf2onnx"

    def export(self, om: OnnxModel) -> Any:
        """The ONNX graph of ``om``'s Keras model, weights as graph inputs: tf2onnx on the
        traced stateless call, captured constants written back in."""
        fn, sig, _ = om.conversion
        proto = convert_function(fn, sig, self.opset)
        bake_captured_constants(proto, fn.get_concrete_function(*fn.input_signature))
        return proto

    def given_facts(self, om: OnnxModel, order: list[str]) -> dict[str, list[str]]:
        """What the program the converter was given shows of each layer: TensorFlow's traced
        graph (:func:`audee.backends.tf_graph.graph_facts`).  The converted program computes
        what it was given, so a bias Keras' ``ops.add`` put on the wrong axis there is on
        the wrong axis here too, and this runtime agrees with TensorFlow against torch and
        JAX for TensorFlow's reason (the api-cpu campaign, rng 2889)."""
        fn = om.conversion[0]
        try:
            return tf_graph_facts(fn.get_concrete_function(*fn.input_signature).graph, order)
        except Exception:  # noqa: BLE001 - no fact of the given program: the converted graph's own stand
            log.debug("reading the traced graph's facts", exc_info=True)
            return {}

    def prepare(self, model: OnnxModel) -> None:
        """The export (a failure is kept: the run raises it again as ``convert``'s)."""
        self.converted(model)

    def _session(self, om: OnnxModel) -> None:
        with self.clock.timed("compile"):  # ORT's graph optimizations, fusions, kernel choice
            self._new_session(om)

    def _first_session(self, om: OnnxModel) -> None:
        """The model's first session: onnxruntime refusing the graph (no kernel for a
        dtype, an invalid graph) is a conversion failure, whichever request makes it."""
        try:
            self._session(om)  # onnxruntime's own refusal first (a bfloat16 Conv has no kernel)
            self.check_dtypes(om)
        except Exception as exc:
            # no session kept: the next request on this model meets the same refusal (a
            # session left from a refused graph ran it, unchecked, on a second request)
            om.session = None
            raise BackendError(Phase.CONVERT, self.refusal(om.proto, exc), traceback.format_exc()) from exc

    def refusal(self, proto: Any, exc: BaseException) -> str:
        """The message of a runtime's refusal of the converted graph, led by the ONNX
        checker's verdict when the checker rejects the graph too: then the graph is invalid
        ONNX and the converter's bug, not the runtime's (a runtime whose frontend refuses a
        graph that mixes float16 and bfloat16 operands is right to; ``audee.triage.signature``
        names the converter as the failing component)."""
        own = f"{type(exc).__name__}: {exc}"
        invalid = onnx_checker_error(proto)
        if invalid is None:
            return own
        return f"{self.converter} produced an invalid ONNX graph (onnx.checker: {invalid}); {self.name} refused it: {own}"

    def _new_session(self, om: OnnxModel) -> None:
        om.session = self.session(baked_proto(om) if self.bake_weights else om.proto)

    def session(self, proto: Any) -> Any:
        """The runtime's compiled ``proto``, run as ``session.run(output names, feed)``."""
        import onnxruntime as ort

        return ort.InferenceSession(proto.SerializeToString(), session_options(), providers=self.providers)

    def program_facts(self, model: OnnxModel) -> dict[str, list[str]]:
        return model.facts

    def weight_shapes(self, model: OnnxModel) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
        return model.built.weight_shapes()

    def set_weights(self, model: OnnxModel, weights: Weights) -> None:
        model.built.check_weights(weights)
        self.converted(model)
        n_tv = len(model.built.trainable_variables)
        for lname, slots in model.built.slots.items():
            for (trainable, idx), arr in zip(slots, weights.get(lname, [])):
                k = idx if trainable else n_tv + idx
                model.feed[f"audee_w{k}"] = model.cast(f"audee_w{k}", arr)
        if self.bake_weights:
            if model.session is None:
                self._first_session(model)
            else:
                self._session(model)

    def run(self, model: OnnxModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        if model.session is None:  # run before any weight set (a benchmark's bare call): built values
            self._first_session(self.converted(model))
        feed = {i.name: model.cast(i.name, inputs[i.name]) for i in model.built.spec.inputs}
        if not self.bake_weights:
            feed.update(model.feed)
        return model.session.run(self.output_names(model), feed)


    # ---- keras.ops calls (op-level cases): the call converted alone, as a model is ------------
    @property
    def keras(self) -> Any:
        """The Keras of the framework that traces the call (TensorFlow's, as for models)."""
        return self.keras_side.keras

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The op call converted alone (:meth:`graph_of_call`: traced by TensorFlow and converted
        by tf2onnx, :func:`tf2onnx_call`), its graph compiled and run by this backend's runtime
        (:meth:`session`, :meth:`run_graph`), its outputs in order.  As for a model: tf2onnx's failure and the runtime refusing the graph are phase
        ``convert`` (:meth:`refusal`), the runtime's failure at run phase ``run``."""
        at = {"phase": "convert"}
        proto = None
        try:
            with self.clock.timed("convert"):
                proto, feed, names = self.graph_of_call(fn, args, kwargs, at)
            with self.clock.timed("compile"):
                session = self.session(proto)
            at["phase"] = "run"
            return self.run_graph(session, names, feed)
        except Exception as exc:
            if at["phase"] == "run":
                raise BackendError(Phase.RUN, f"{type(exc).__name__}: {exc}", traceback.format_exc()) from exc
            message = self.refusal(proto, exc) if proto is not None else f"{type(exc).__name__}: {exc}"
            raise BackendError(Phase.CONVERT, message, traceback.format_exc()) from exc


    def graph_of_call(self, fn: Any, args: list[Any], kwargs: dict[str, Any], at: dict[str, str]
                      ) -> tuple[Any, dict[str, Any], list[str]]:
        """The converter's ONNX graph of one call, its feed and its output names."""
        return tf2onnx_call(fn, args, kwargs, at, self.opset, convert_function)

    def run_graph(self, session: Any, names: list[str], feed: dict[str, Any]) -> list[np.ndarray]:
        """The call's graph run by :meth:`session` on its feed."""
        return session.run(names, feed)


class OnnxRuntimeFedBackend(OnnxRuntimeBackend):
    """Weights fed as graph inputs on every call (no session rebuild on a weight swap)."""

    name = "onnxruntime-fed"
    bake_weights = False
