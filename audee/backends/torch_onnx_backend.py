"""``torch-onnx``: the Keras model on the torch backend, exported by PyTorch's own ONNX
exporter (``torch.onnx.export(..., dynamo=True)``: ``torch.export``, then onnxscript's
translation and optimizer), run in onnxruntime.

A second, independent path into ONNX beside tf2onnx: the same Keras layers, another
framework's ops, another converter, the same runtime.  As for ``onnxruntime``, the stateless
call is exported with every weight as a graph input (the batch axis marked dynamic), so a
new weight set is baked in as constants and a new session, never a new export.

The export waits for the first input (:meth:`TorchOnnxBackend.compile_for`, which the worker
calls once per input signature, ahead of the run when it can guess the inputs): it traces
on zeros of the inputs' own shapes.  ``torch.export`` keeps the batch axis dynamic only
where nothing in the model depends on its size; where something does (Keras' recurrent
layers, an activity regularizer dividing by the batch size) it specializes the axis
silently, and the graph takes that one batch size ("Got invalid dimensions for input ...
Expected: 2" when it was traced on a placeholder batch of 2).  So a graph is kept per input
shapes it was exported for, and a new one is exported only for inputs none of them takes:
once per model when the batch stays dynamic, once per batch size when it does not; never
per weight set.

onnxruntime's Python ``run`` has no numpy type for a bfloat16 output ("No corresponding
Numpy type for Tensor Type. bfloat16"); the outputs are read as ``OrtValue`` objects and a
bfloat16 one reinterpreted as ``ml_dtypes.bfloat16``, the dtype the Keras backends give.
"""
from __future__ import annotations

import traceback
from collections import OrderedDict
from typing import Any

import numpy as np

from audee.backends.base import BackendError, Phase
from audee.backends.keras_backends import TorchBackend, _flat, _torch_to_numpy, apply_precision_env, split_tensors
from audee.backends.keras_build import BuiltModel
from audee.backends.onnx_backend import OnnxModel, OnnxRuntimeBackend, graph_input_dtypes
from audee.backends.ort_process import RemoteSession, RuntimeProcess, runtime_version
from audee.cases.spec import ModelSpec, Weights

Shapes = tuple  # one shape (batch first) per model input, in spec order
#: specs whose exports a worker keeps beyond its model cache (:meth:`TorchOnnxBackend.export_memo`)
EXPORT_MEMO = 4096
#: and the bytes of their graphs at most: a one-layer case's graph is 2 KB (median of the
#: API-level cases), an unrolled ConvLSTM3D 240 KB (weights are inputs, not in the graph)
EXPORT_MEMO_BYTES = 32 << 20


class TorchOnnxModel(OnnxModel):
    """An :class:`OnnxModel` whose graph is exported per input shapes: ``proto`` is the graph
    the session runs, exported for ``shapes``; ``exports`` every graph made, by the shapes
    it was traced on (one serves all batch sizes when its batch axis stayed dynamic)."""

    def __init__(self, built: BuiltModel, weight_inputs: list[str], conversion: tuple):
        super().__init__(built, weight_inputs, conversion)
        self.shapes: Shapes | None = None
        self.exports: dict[Shapes, Any] = {}
        self.failed: dict[Shapes, BackendError] = {}  # an export that failed fails again at once
        self.pending: Weights | None = None  # a weight set that came before the first export
        self.weighted = False  # a weight set came (before it, a session would run placeholder weights)
        self.memo_key: str | None = None  # its exports' key in the worker's memo (export_key), None if not kept


def accepts(proto: Any, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Whether ``proto``'s graph inputs take inputs of these shapes (a symbolic dim takes any size)."""
    for graph_input in proto.graph.input:
        shape = shapes.get(graph_input.name)
        if shape is None:
            continue
        dims = graph_input.type.tensor_type.shape.dim
        if len(dims) != len(shape):
            return False
        if any(d.HasField("dim_value") and d.dim_value != n for d, n in zip(dims, shape)):
            return False
    return True


def torch_onnx_call(fn: Any, args: list[Any], kwargs: dict[str, Any], at: dict[str, str],
                    opset: int = 18) -> tuple[Any, dict[str, Any], list[str]]:
    """``fn(*args, **kwargs)`` as ``torch-onnx`` exports a model: the call on the torch backend
    inside a ``torch.nn.Module`` whose inputs are its tensors (:func:`split_tensors`, every
    other argument a constant), exported by ``torch.onnx.export(dynamo=True)``.  The ONNX
    graph, its feed (``t<i>``: the graph inputs the export kept, as torch tensors) and its
    output names, the outputs flattened in order.  ``at["phase"]`` is ``convert``.
    Standalone: op scripts carry its text."""
    import torch

    at["phase"] = "convert"
    leaves, rebuild = split_tensors(args, kwargs, torch.is_tensor)

    class Call(torch.nn.Module):
        def forward(self, *ts: Any) -> tuple:
            a, k = rebuild(ts)
            return tuple(_flat(fn(*a, **k)))

    names = [f"t{i}" for i in range(len(leaves))]
    program = torch.onnx.export(Call().eval(), tuple(leaves), dynamo=True, opset_version=opset,
                                input_names=names, verbose=False)
    proto = program.model_proto
    kept = {i.name for i in proto.graph.input}  # an input the call reads only the shape of is dropped
    return proto, {n: t for n, t in zip(names, leaves) if n in kept}, [o.name for o in proto.graph.output]


class TorchOnnxBackend(OnnxRuntimeBackend):
    name = "torch-onnx"
    converter = "torch.onnx"
    opset = 18  # the dynamo exporter's lowest
    dtype_map = "torch.onnx writes {want} as ONNX {got}"
    dtype_source = "the Keras model"

    def source_dtypes(self, om: OnnxModel) -> dict[str, str]:
        """The Keras model's symbolic output dtypes: the export traces torch eagerly, with no
        graph of its own to read them from."""
        return {name: str(t.dtype) for name, t in zip(om.built.order, om.built.model.outputs)}

    def given_facts(self, om: OnnxModel, order: list[str]) -> dict[str, list[str]]:
        """None: the program it was given is torch's eager one, no TensorFlow graph."""
        return {}

    def __init__(self, device: str = "cpu", precision: str = "full"):
        super().__init__(device, precision)
        self.keras_side = TorchBackend("cpu")  # the export traces on the CPU
        # onnxruntime in a process of its own: imported here, it slows every later export (ort_process)
        self.runtime = RuntimeProcess()
        self._export_memo: OrderedDict[str, tuple[dict[Shapes, Any], dict[Shapes, BackendError]]] = OrderedDict()
        self._memo_bytes: dict[str, int] = {}  # memo key -> bytes of its graphs
        self._memo_total = 0  # their sum

    def close(self) -> None:
        self.runtime.close()

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        TorchBackend.prepare_process("cpu")
        apply_precision_env(device, precision)

    def versions(self) -> dict[str, str]:
        import onnx
        import onnxscript

        return {**self.keras_side.versions(), "onnxscript": onnxscript.__version__, "onnx": onnx.__version__,
                "onnxruntime": runtime_version()}

    def session(self, proto: Any) -> RemoteSession:
        """``proto`` compiled by onnxruntime in this worker's runtime process (:mod:`ort_process`)."""
        return self.runtime.session(proto.SerializeToString(), self.providers)

    def variable_value(self, variable: Any) -> np.ndarray:
        """As numpy, bfloat16 included (``convert_to_numpy`` has no numpy type for torch's bfloat16)."""
        from audee.backends.keras_backends import _torch_to_numpy

        return _torch_to_numpy(variable.value)

    def graph_of_call(self, fn: Any, args: list[Any], kwargs: dict[str, Any], at: dict[str, str]
                      ) -> tuple[Any, dict[str, Any], list[str]]:
        """The call exported by torch's dynamo exporter (:func:`torch_onnx_call`)."""
        return torch_onnx_call(fn, args, kwargs, at, self.opset)

    def run_graph(self, session: Any, names: list[str], feed: dict[str, Any]) -> list[np.ndarray]:
        """Fed and read as ``OrtValue`` objects in the runtime process (onnxruntime's numpy API
        has no bfloat16)."""
        return session.run_arrays(names, {k: _torch_to_numpy(t) for k, t in feed.items()})

    def output_names(self, om: OnnxModel) -> list[str]:
        """``audee_y<k>`` for layer k: the exporter names its own values after the modules
        that make them (``conv2d_1``), and a graph output named after a layer collided with
        one of those ("Duplicate definition of name" on ResNet-20, MobileNet-V2, VGG-16)."""
        return [f"audee_y{k}" for k in range(len(om.built.order))]

    def build(self, spec: ModelSpec) -> TorchOnnxModel:
        keras = self.keras_side.keras
        built = BuiltModel(spec, keras, self.make_layer, init_weights=self.init_weights)
        if spec.roundtrip:  # a round trip exports the loaded model, a wrap of its own
            return self.wrap(built)
        return self._memoized(self.wrap(built))

    def share_build(self, built: BuiltModel) -> TorchOnnxModel:
        """As onnxruntime's, the exports kept for the spec taken too (:meth:`export_memo`)."""
        om = super().share_build(built)
        assert isinstance(om, TorchOnnxModel)
        return self._memoized(om)

    def _memoized(self, om: TorchOnnxModel) -> TorchOnnxModel:
        """``om`` with the exports kept for its spec (:meth:`export_memo`)."""
        om.memo_key = export_key(om.built.spec)
        om.exports, om.failed = self.export_memo(om.memo_key)
        return om

    def export_memo(self, key: str) -> tuple[dict[Shapes, Any], dict[Shapes, BackendError]]:
        """The graphs exported for the spec of content key ``key`` and the exports that failed,
        per input shapes, kept for the last :data:`EXPORT_MEMO` specs across the worker's
        model cache: a spec built again (the repro scripts at a run's end, a case whose
        model the cache let go, a one-layer case's layer cut out alone: :func:`export_key`)
        takes them instead of exporting again.  Sound because the
        graph depends on the spec and the shapes alone: the weights are graph inputs and the
        trace runs on zeros and the built values (a weight set waits for the export).

        Bounded by :data:`EXPORT_MEMO` specs and :data:`EXPORT_MEMO_BYTES` of graphs rather
        than by the few specs a run's end comes back to: at 64 specs the repro pass after a
        run of every API (97 cases) exported its recurrent cases again, 0.4-0.6 CPU-s each."""
        memo = self._export_memo
        got = memo.pop(key, None) or ({}, {})
        memo[key] = got
        self._evict(key)
        return got

    def _remember(self, om: TorchOnnxModel, proto: Any) -> None:
        """Count a new export of ``om`` against the memo's bytes (if its exports are the memo's)."""
        key = om.memo_key
        if key is not None and self._export_memo.get(key, (None,))[0] is om.exports:
            size = proto.ByteSize()
            self._memo_bytes[key] = self._memo_bytes.get(key, 0) + size
            self._memo_total += size
            self._evict(key)

    def _evict(self, keep: str) -> None:
        """Drop the least recently used specs' exports until the memo is within its bounds
        (``keep``, the one in use, stays)."""
        memo = self._export_memo
        while len(memo) > 1 and (len(memo) > EXPORT_MEMO or self._memo_total > EXPORT_MEMO_BYTES):
            oldest = next(iter(memo))
            if oldest == keep:
                memo.move_to_end(keep)
                oldest = next(iter(memo))
            memo.pop(oldest)
            self._memo_total -= self._memo_bytes.pop(oldest, 0)

    def wrap(self, built: BuiltModel) -> TorchOnnxModel:
        variables = list(built.model.trainable_variables) + list(built.model.non_trainable_variables)
        return TorchOnnxModel(built, [f"audee_w{k}" for k in range(len(variables))], (None, None, variables))

    # ---- the export, per input shapes -----------------------------------------------------------
    def prepare(self, model: TorchOnnxModel) -> None:
        """Nothing: the export needs the inputs' shapes, and waits for :meth:`compile_for`
        (which the worker calls ahead of the run, on the last run's shapes, when it can)."""

    def compile_for(self, model: TorchOnnxModel, inputs: dict[str, np.ndarray]) -> None:
        """The graph for these inputs' shapes: the one in use, another kept one that takes
        them, else a new export (a failure is ``convert``'s, kept per shapes)."""
        self.graph_for(model, inputs)

    def graph_for(self, om: TorchOnnxModel, inputs: dict[str, np.ndarray]) -> TorchOnnxModel:
        names = [i.name for i in om.built.spec.inputs]
        shapes: Shapes = tuple(tuple(int(n) for n in np.shape(inputs[name])) for name in names)
        if om.proto is not None and (om.shapes == shapes or accepts(om.proto, dict(zip(names, shapes)))):
            return om
        for traced, proto in om.exports.items():
            if accepts(proto, dict(zip(names, shapes))):
                self._use(om, proto, traced)
                return om
        if shapes in om.failed:
            raise om.failed[shapes]
        try:
            with self.clock.timed("convert"):
                proto = self.export(om, shapes)
            graph_outputs = [o.name for o in proto.graph.output]
            if sorted(graph_outputs) != sorted(self.output_names(om)):
                raise RuntimeError(f"{self.converter} produced outputs {graph_outputs}, "
                                   f"expected {self.output_names(om)}")
        except Exception as exc:
            om.failed[shapes] = BackendError(Phase.CONVERT, f"{type(exc).__name__}: {exc}", traceback.format_exc())
            raise om.failed[shapes] from exc
        om.exports[shapes] = proto
        self._remember(om, proto)
        self._use(om, proto, shapes)
        return om

    def _use(self, om: TorchOnnxModel, proto: Any, shapes: Shapes) -> None:
        """Make ``proto`` the graph the session runs, with the weights set so far.  Its first
        session is made now if weights came (onnxruntime refusing the graph is a conversion
        failure), else by the first weight set or run: an export ahead of the run (the
        worker's guess) makes none for placeholder weights."""
        first = om.proto is None
        om.proto, om.shapes, om.dtypes, om.session = proto, shapes, graph_input_dtypes(proto), None
        if first:  # the weight feed starts from the built values (seed-generator states keep theirs)
            om.feed = {name: om.cast(name, value)
                       for name, value in zip(om.weight_inputs, om.start_values(self.variable_value))}
            if om.pending is not None:
                self._feed_weights(om, om.pending)
                om.pending = None
        if om.weighted:
            self._first_session(om)

    def converted(self, om: OnnxModel) -> OnnxModel:
        """``om`` with a graph: only :meth:`compile_for` exports (it knows the inputs' shapes)."""
        if om.proto is None:
            raise RuntimeError("torch-onnx exports for the inputs' shapes: compile_for comes before a run")
        return om

    def export(self, om: OnnxModel, shapes: Shapes | None = None) -> Any:
        """``torch.onnx.export`` of the stateless call, inputs then weights, on zeros of the
        inputs' ``shapes``, the batch axis marked dynamic (``torch.export`` may still
        specialize it: see the module's docstring; a batch of 1 is always specialized)."""
        import torch

        spec = om.built.spec
        module, xs, ws, shapes = stateless_export_args(om, shapes)
        n_x = len(spec.inputs)
        dynamic = all(len(s) > 0 and s[0] >= 2 for s in shapes)
        batch = torch.export.Dim("batch")
        dynamic_shapes = ((tuple([{0: batch}] * n_x + [None] * len(ws)),) if dynamic else None)
        program = torch.onnx.export(module, tuple(xs + ws), dynamo=True, opset_version=self.opset,
                                    input_names=[i.name for i in spec.inputs] + om.weight_inputs,
                                    output_names=self.output_names(om), dynamic_shapes=dynamic_shapes,
                                    verbose=False)
        return program.model_proto

    # ---- weights and runs -------------------------------------------------------------------------
    def _feed_weights(self, om: OnnxModel, weights: Weights) -> None:
        n_tv = len(om.built.trainable_variables)
        for lname, slots in om.built.slots.items():
            for (trainable, idx), arr in zip(slots, weights.get(lname, [])):
                k = idx if trainable else n_tv + idx
                om.feed[f"audee_w{k}"] = om.cast(f"audee_w{k}", arr)

    def set_weights(self, model: TorchOnnxModel, weights: Weights) -> None:
        """Before the first export the weights wait for it (the first session is made there);
        after, as for ``onnxruntime``: the feed, and a new session with them baked in."""
        if model.proto is None:
            model.built.check_weights(weights)
            model.pending, model.weighted = weights, True
            return
        model.weighted = True
        super().set_weights(model, weights)

    def run(self, model: TorchOnnxModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.graph_for(model, inputs)  # the worker's compile_for made it; a bare call (a benchmark) may not have
        if model.session is None:  # no weights came yet (built values), or onnxruntime refused the graph: again
            self._first_session(model)
        feed = {i.name: model.cast(i.name, inputs[i.name]) for i in model.built.spec.inputs}
        if not self.bake_weights:
            feed.update(model.feed)
        return model.session.run_arrays(self.output_names(model), feed)


class TorchOnnxTsBackend(TorchOnnxBackend):
    """``torch-onnx-ts``: the same Keras-on-torch model exported by torch's TorchScript
    exporter (``torch.onnx.export(..., dynamo=False)``: the model traced once by
    ``torch.jit``, each op translated by its symbolic function), run in onnxruntime.

    NNSmith's pair (eager torch against this exporter on onnxruntime), and one to two orders
    of magnitude cheaper than ``torch.export`` plus onnxscript (0.02-0.07 s a one-layer model
    against 0.9-4.5 s).  Each exporter has bugs of its own, so both are kept.  What differs
    from ``torch-onnx`` is only the export: weights as graph inputs, the graphs kept per
    input shapes, the sessions and bfloat16 outputs are its.  The tracer records the batch
    size where the model reads it as a Python number, so a graph may still take one batch
    size: the graphs kept per shapes serve that as they do for ``torch.export``.

    The tracer unrolls Python loops: Keras' recurrent layers on torch loop over time steps
    in Python, so their graph grows with the sequence (0.4 s for 16 LSTM steps, 0.13 s for
    4); API-level cases that run on this backend draw short sequences
    (``BackendInfo.max_steps``)."""

    name = "torch-onnx-ts"
    converter = "torch.onnx-ts"  # the TorchScript exporter: a component of its own beside the dynamo one
    opset = 17  # the TorchScript exporter's default on this stack
    runs_ops = False  # models only: an op call is exported by torch-onnx's dynamo path (graph_of_call), not this one

    def versions(self) -> dict[str, str]:
        import onnx

        return {**self.keras_side.versions(), "onnx": onnx.__version__, "onnxruntime": runtime_version()}

    def export(self, om: OnnxModel, shapes: Shapes | None = None) -> Any:
        """``torch.onnx.export(dynamo=False)`` of the stateless call, inputs then weights,
        traced on zeros of the inputs' ``shapes``, the batch axis marked dynamic."""
        import io
        import warnings

        import onnx
        import torch

        module, xs, ws, shapes = stateless_export_args(om, shapes)
        names = [i.name for i in om.built.spec.inputs]
        dynamic = {name: {0: "batch"} for name, s in zip(names, shapes) if len(s) > 0}
        buffer = io.BytesIO()
        with warnings.catch_warnings():  # the legacy exporter's deprecation and the tracer's warnings, per model
            warnings.simplefilter("ignore")
            torch.onnx.export(module, tuple(xs + ws), buffer, dynamo=False, opset_version=self.opset,
                              input_names=names + om.weight_inputs, output_names=self.output_names(om),
                              dynamic_axes=dynamic, verbose=False)
        proto = onnx.load_from_string(buffer.getvalue())
        restore_pruned_inputs(proto, dict(zip(names + om.weight_inputs, xs + ws)), set(dynamic))
        return proto


def export_key(spec: ModelSpec) -> str:
    """What a spec's export depends on, hashed: its content key (:meth:`ModelSpec.key`)
    without the inputs' value ranges, which only draw data and never reach the build, so a
    one-layer case and its layer cut out alone (:func:`audee.cases.spec.one_layer_spec`,
    its input's range drawn from the data) share their exports."""
    return spec.key(ranges=False)


def stateless_export_args(om: OnnxModel, shapes: Shapes | None) -> tuple[Any, list[Any], list[Any], Shapes]:
    """What both torch exporters trace: the model's stateless call as a module of its inputs
    then its weights (one export serves every weight set), zeros of the inputs' ``shapes``
    (a batch of 2 unless given), the weights' current values, and the shapes used."""
    import torch

    built = om.built
    model, spec = built.model, built.spec
    n_x, n_tv = len(spec.inputs), len(built.trainable_variables)
    shapes = shapes or tuple((2, *i.shape) for i in spec.inputs)

    class Stateless(torch.nn.Module):
        def forward(self, *args: Any) -> tuple:
            outs, _ = model.stateless_call(list(args[n_x:n_x + n_tv]), list(args[n_x + n_tv:]),
                                           list(args[:n_x]), training=False)
            return tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)

    xs = [torch.zeros(shape, dtype=getattr(torch, i.dtype)) for i, shape in zip(spec.inputs, shapes)]
    return Stateless(), xs, [v.value.detach() for v in om.conversion[2]], shapes


def restore_pruned_inputs(proto: Any, tensors: dict[str, Any], batched: set[str]) -> None:
    """Put back the graph inputs the TorchScript exporter dropped because nothing reads them
    (a weight at inference, a seed generator's state, a mask a layer ignores), typed and
    shaped as the tensors it traced on: the feed, the weight baking and ``accepts`` name
    every model input and weight whatever the graph reads (``batched``: those whose first
    axis is the batch, left symbolic)."""
    import ml_dtypes  # noqa: F401  (numpy's name for bfloat16)
    from onnx import helper

    kept = {i.name for i in proto.graph.input}
    for name, tensor in tensors.items():
        if name not in kept:
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(str(tensor.dtype).removeprefix("torch.")))
            shape: list[Any] = list(tensor.shape)
            if name in batched and shape:
                shape[0] = "batch"
            proto.graph.input.append(helper.make_tensor_value_info(name, elem, shape))
