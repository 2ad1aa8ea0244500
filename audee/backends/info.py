"""One description per backend: every fact about a backend that audee's judgement, reports
and scripts need, declared once beside its name.

A backend's class (``audee/backends/*``) is what runs in a worker; the facts here are what
the parent process reads without importing any framework: which component a failure is
blamed on and where its bugs are filed, which packages' versions a report prints and a
standalone script needs, what it can run (models, training steps, ``keras.ops`` calls), its
explicit "unsupported" words, how its errors name the op that failed, whether its CPU
kernels flush subnormals to zero, which Keras backend's model it runs or converts, and the
lines it contributes to a standalone script (:class:`ScriptCode`: as NNSmith's backends emit
their own import, compile and run lines, so no script template names a backend).

A plugin backend (``package.module:ClassName``) is described by :func:`describe` with the
defaults of :class:`BackendInfo`: its name is its component, it is filed nowhere in
particular, it flushes nothing and names no op.  Plain data, no framework import: the
judgement modules (``signature``, ``rootcause``, ``report``) read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable


@dataclass(frozen=True)
class OpName:
    """One way a backend's errors name the op, kernel or layer that failed: a regex whose
    first group is the op.  ``rank`` orders every backend's patterns as one list (lower is
    tried first): a converter's or runtime's named node is more telling than a loose
    ``Kernel: `` prefix, whichever backend's error it is."""

    pattern: str
    rank: int


@dataclass(frozen=True)
class ScriptCode:
    """A backend's own lines in a standalone model script (``audee.repro.scaffold`` writes
    them in; the script imports numpy and the frameworks only, so this is text, not code
    audee runs).

    ``run`` is the body of ``run(keras, model, spec, xs, at)``: ``model`` is the built Keras
    model with its weights, ``spec`` the script's model as JSON (``inputs``, ``layers``),
    ``xs`` the inputs in order; it converts and runs the model, keeps ``at["phase"]``
    (``convert``, ``run``) true for an error's report, and returns every layer's output.
    ``helpers`` are whole functions ``run`` calls, written once however many backends share
    them; ``gpu`` the body of ``gpu(full)``, run after ``import keras`` on a GPU device
    (``full``: float32 math, else TF32); ``env`` is set before Keras is imported.

    ``op`` is the body of ``call_op(fn, args, kwargs)`` in a standalone op script
    (:mod:`audee.repro.ops`): one ``keras.ops`` function called the way the backend calls it
    (``Backend.call_op``), None for eagerly; ``op_carries`` the audee functions it calls
    (``module:name``, each after what it needs), whose text the script carries verbatim: the
    worker and the script run one owner's code."""

    run: str
    helpers: tuple[str, ...] = ()
    gpu: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    op: str | None = None
    op_carries: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackendInfo:
    """What audee knows about one backend without running it (module docstring)."""

    name: str                             # as named on the command line: "openvino"
    target: str = ""                      # "module:Class" (a plugin: its name is its target)
    label: str = ""                       # for people: what runs
    keras_backend: str | None = None      # the Keras backend whose model it runs or converts
    component: str = ""                   # blamed for its own failures ("" -> its name)
    blamed_first: bool = False            # failing beside others, the failure is its (the others take its graph)
    trackers: tuple[str, ...] = ()        # where its bugs are filed, the first searched first
    converter: str | None = None          # the converter whose graph it runs: a component of its own
    converter_trackers: tuple[str, ...] = ()  # where the converter's bugs are filed
    runtime: str | None = None            # the runtime blamed where its own error words appear
    runtime_errors: str | None = None     # regex: words only the runtime's own errors carry
    #: (fault, regex): what a refusal of a converted graph says is wrong with it, first match;
    #: each makes the refusal the converter's (:data:`ONNX_GRAPH_FAULTS`)
    graph_faults: tuple[tuple[str, str], ...] = ()
    error_words: str | None = None        # regex: words only this framework's errors carry
    version_keys: tuple[str, ...] = ()    # packages whose versions its worker records (a report prints them)
    packages: tuple[str, ...] = ()        # pip distributions a standalone script needs to run it
    models: bool = True                   # runs models (every backend does)
    trains: bool = False                  # runs a training step (``Backend.trains``)
    runs_ops: bool = False                # calls ``keras.ops`` functions (``Backend.runs_ops``)
    unsupported: tuple[str, ...] = ()     # regexes: its explicit "this is not supported" words
    op_names: tuple[OpName, ...] = ()     # how its errors name the failing op
    query_noise: tuple[str, ...] = ()     # words every error of it carries: no use in a tracker search
    flushes_subnormals: bool = False      # its CPU kernels flush subnormals to zero by design
    #: it keeps subnormals and can flush them on request (``Backend.flushing``): the flush
    #: probe's runner (:mod:`audee.engine.flush_probe`)
    flush_switch: bool = False
    reference: str | None = None          # the backend whose program it compiles or converts (judged against it)
    #: the longest sequence an API-level recurrent case draws when it runs (None: any): its
    #: converter unrolls the time loop, so its cost grows with the sequence
    max_steps: int | None = None
    #: the Keras backend a worker of it hosts when both run on the CPU in one run: one process,
    #: each Keras model built once and both run and converted (``Backend.share_build``)
    hosts: str | None = None
    script: ScriptCode | None = None      # its lines in a standalone model script (None: it has none)
    builtin: bool = field(default=False)  # described here (not a plugin's defaults)

    @property
    def blamed(self) -> str:
        """The component its own failures are blamed on."""
        return self.component or self.name

    @property
    def modules(self) -> tuple[str, ...]:
        """The modules a script imports to run it (its packages as Python names), whose
        versions the script prints."""
        return tuple(p.replace("-", "_") for p in self.packages)


# ---- each backend's lines in a standalone model script (ScriptCode) ---------------------------------
_TF_GPU = """import tensorflow as tf
tf.config.experimental.enable_tensor_float_32_execution(not full)"""
_TORCH_GPU = """import torch
if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9
    for switch in (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn):
        switch.fp32_precision = "ieee" if full else "tf32"
else:
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = not full"""
#: an op call's lines (ScriptCode.op) as each backend's ``call_op`` runs it, and what they call
_TRACED = ("audee.backends.keras_backends:split_tensors", "audee.backends.keras_backends:_Slot",
           "audee.backends.keras_backends:_computed", "audee.backends.keras_backends:traced_call")
_TF_OP_GRAPH = """import tensorflow as tf  # traced by tf.function, as the model is
return traced_call(fn, args, kwargs, tf.is_tensor, lambda f: tf.function(f, autograph=False))"""
_TF_OP_XLA = """import tensorflow as tf  # compiled by XLA
return traced_call(fn, args, kwargs, tf.is_tensor, lambda f: tf.function(f, autograph=False, jit_compile=True))"""
_TORCH_OP_COMPILE = """import torch  # under torch.compile (Inductor)
with torch.no_grad():
    return traced_call(fn, args, kwargs, torch.is_tensor, lambda f: torch.compile(f, dynamic=False))"""
_JAX_OP_JIT = """import jax  # jitted
return traced_call(fn, args, kwargs, lambda v: isinstance(v, jax.Array), jax.jit)"""
_JAX_OP_EAGER = """import jax  # op by op
with jax.disable_jit():
    return fn(*args, **kwargs)"""
#: TensorFlow turns oneDNN on by default only on CPUs it finds AVX-512 VNNI/BF16 or AMX on; on others (an
#: AVX2 AMD EPYC) its own Eigen kernels compute, with faults of their own (a strided 1-wide max pooling
#: sampling from offset 1, findings row 29's).  Its backends pin oneDNN on, so a case computes alike on every
#: x86 machine, in the worker and in its script (read at TensorFlow's import); tensorflow-noonednn pins it off.
TF_ONEDNN = (("TF_ENABLE_ONEDNN_OPTS", "1"),)
TF_NO_ONEDNN = ((TF_ONEDNN[0][0], "0"),)
_TF_GRAPH = ScriptCode("""# a traced graph
import tensorflow as tf
at["phase"] = "run"
return tf.function(lambda xs: model(xs, training=False), autograph=False)(xs)""", gpu=_TF_GPU, op=_TF_OP_GRAPH,
                       op_carries=_TRACED, env=TF_ONEDNN)
_JAX_ARGS = ("args = ([v.value for v in model.trainable_variables], "
             "[v.value for v in model.non_trainable_variables], xs)")
_JAX_JIT = ScriptCode(f"""# jitted, as deployed (op by op where Keras' predict would not jit the model)
import jax
from keras.src.trainers.trainer import model_supports_jit
at["phase"] = "run"
{_JAX_ARGS}
compiled = jax.jit if model_supports_jit(model) else (lambda f: f)
return compiled(lambda tv, ntv, xs: model.stateless_call(tv, ntv, xs, training=False)[0])(*args)""", op=_JAX_OP_JIT,
                      op_carries=_TRACED)
_TORCH_EAGER = ScriptCode("""# eagerly
import torch
at["phase"] = "run"
with torch.no_grad():
    return model([keras.ops.convert_to_tensor(x) for x in xs], training=False)""", gpu=_TORCH_GPU)
#: tf2onnx from the TensorFlow backend, as audee converts: one export with the weights as graph
#: inputs, then the weights written into the graph as constants (as audee bakes them)
_TF2ONNX = '''def tf2onnx_graph(keras, model, spec, xs, at):
    """tf2onnx's ONNX graph of the TensorFlow backend's model, the weights baked in as
    constants; its feed and its output names."""
    import onnx
    import tensorflow as tf
    import tf2onnx
    at["phase"] = "convert"
    ws = list(model.trainable_variables) + list(model.non_trainable_variables)
    n_x, n_tv = len(spec["inputs"]), len(model.trainable_variables)
    sig = [tf.TensorSpec((None, *i["shape"]), i["dtype"], name=i["name"]) for i in spec["inputs"]]
    sig += [tf.TensorSpec(v.shape, v.dtype, name=f"audee_w{k}") for k, v in enumerate(ws)]

    def call(*args):  # the weights as graph inputs, as audee converts (one export, any weights)
        ys = model.stateless_call(list(args[n_x:n_x + n_tv]), list(args[n_x + n_tv:]), list(args[:n_x]),
                                  training=False)[0]
        return {f"y{k}": tf.identity(y) for k, y in enumerate(ys if isinstance(ys, (list, tuple)) else [ys])}

    fn = tf.function(call, input_signature=sig, autograph=False)
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=15)
    # then written into the graph as constants (as audee bakes them), with the tensors
    # the traced call captured (tf2onnx lists those as graph inputs too)
    values = {f"audee_w{k}": keras.ops.convert_to_numpy(v.value) for k, v in enumerate(ws)}
    values.update({inner.name: np.asarray(outer.numpy()) for outer, inner
                   in fn.get_concrete_function().graph.captures if outer.dtype.name != "resource"})
    baked = [g for g in proto.graph.input if g.name in values]
    proto.graph.initializer.extend(onnx.numpy_helper.from_array(
        values[g.name].astype(onnx.helper.tensor_dtype_to_np_dtype(g.type.tensor_type.elem_type)), g.name)
        for g in baked)
    kept = [g for g in proto.graph.input if g.name not in values]
    del proto.graph.input[:]
    proto.graph.input.extend(kept)
    feed = {i["name"]: x for i, x in zip(spec["inputs"], xs)}
    return proto, feed, [f"y{k}" for k in range(len(spec["layers"]))]'''
#: an op call as a converter takes it: its tensors the inputs, its outputs flattened
_CALL_ALONE = (*_TRACED[:2], "audee.backends.keras_backends:_flat")
#: an op call converted by tf2onnx as ``onnxruntime``'s worker converts it (``OnnxRuntimeBackend.call_op``)
_TF2ONNX_OP = (*_CALL_ALONE, "audee.backends.keras_backends:tf_traced_call",
               "audee.backends.onnx_backend:check_graph_dtypes", "audee.backends.onnx_backend:tf2onnx_call")
#: an ONNX Runtime session's outputs of a torch export, bfloat16 included
_ORT_OUTPUTS = '''def ort_outputs(session, names, spec, xs):
    """The session's outputs ``names`` for the inputs ``xs``; a bfloat16 one (onnxruntime has
    no numpy type for it) from its bytes, read by torch."""
    import ctypes
    import onnxruntime as ort
    import torch
    feed = {i["name"]: ort.OrtValue.ortvalue_from_numpy(x) for i, x in zip(spec["inputs"], xs)}

    def fetch(v):
        if v.data_type() != "tensor(bfloat16)":
            return v.numpy()
        raw = bytearray(ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes()))
        flat = torch.frombuffer(raw, dtype=torch.bfloat16) if raw else torch.zeros(0, dtype=torch.bfloat16)
        return flat.reshape(v.shape())

    return [fetch(v) for v in session.run_with_ort_values(names, feed)]'''
_ORT_SCRIPT = ScriptCode("""# tf2onnx from the TensorFlow backend, then an ONNX Runtime session
proto, feed, names = tf2onnx_graph(keras, model, spec, xs, at)
import onnxruntime as ort
session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
at["phase"] = "run"
return session.run(names, feed)""", helpers=(_TF2ONNX,), op="""import onnxruntime as ort  # the call traced, converted by tf2onnx, run by ONNX Runtime
proto, feed, names = tf2onnx_call(fn, args, kwargs, {})
session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
return session.run(names, feed)""", op_carries=_TF2ONNX_OP)


# ---- shared facts: the Keras layer, ONNX, each framework -----------------------------------------
#: Keras's own refusal, whichever framework runs it
_KERAS_UNSUPPORTED = (r"when using the \w+ backend",)
_KERAS_OPS = (OpName(r"when calling (\w+)\.call\(\)", 160),)   # the Keras layer whose call raised
#: the ONNX checker and type and shape inference, in every ONNX runtime
_ONNX_OPS = (
    OpName(r"No Op registered for (\w+)", 10),                  # an op the converter left unconverted
    OpName(r"\(op_type:(\w+), node name", 60),                  # the ONNX checker: (op_type:Mul, node name: ...)
    OpName(r"of operator \((\w+)\)", 70),                       # ONNX type check
    OpName(r"of Optype \((\w+)\)", 80),                         # ONNX type constraint at load
    OpName(r"\bOp \((\w+)\)", 90),                              # ONNX shape inference: Node (...) Op (Add)
    OpName(r"In Node, \([^,()]*, (\w+),", 100),                 # ONNX graph check
)
_TF2ONNX_TRACKERS = ("onnx/tensorflow-onnx",)
#: what a converted program's graph shows of how it computes a layer, a fact a finding carries
#: for the layer (``Backend.program_facts``) and a known issue may match (``program``), where
#: the same Keras layer reaches different kernels of a runtime and only one of them has the bug:
#: ``select_as_arithmetic``: the converter lowered a float select (``tf.where``) to
#: ``Cast(c) * x + Cast(!c) * y``, so a NaN or Inf in the branch not taken leaks as 0 * NaN
#: (tf2onnx, onnx/tensorflow-onnx#1988);
#: ``max_as_reduce_max`` / ``max_as_max_pool``: the layer's maximum runs as an ONNX
#: ``ReduceMax``, or as a ``MaxPool`` / ``GlobalMaxPool`` (tf2onnx makes a channels_first
#: global max pooling a GlobalMaxPool, a channels_last one a ReduceMax, unless a transpose
#: before it folds in): onnxruntime's two kernels drop a NaN at different positions
#: ``bias_add_misplaced``: TensorFlow's own graph adds a bias along another axis than
#: broadcasting would (Keras' TensorFlow ``ops.add`` guessing ``bias_add``'s data format:
#: :func:`audee.backends.tf_graph.misplaced_bias_add`)
#: ``bias_add_nchw``: TensorFlow's graph adds the layer's bias with a ``BiasAdd`` of data format
#: NCHW (a channels_first convolution; Keras' ``ops.add`` guessing channels first for a value
#: bias of a MultiHeadAttention), which tf2onnx converts, its bias being a graph input and not
#: a constant, into an ``Add`` along the last axis (findings row 7): a converted program
#: showing it differs from its reference for that reason, whatever the layer
#: ``transpose_reshaped_after_square``: the converter's transpose optimizer moved a Transpose
#: below a ``Mul(t, t)`` (a square) and then replaced it by a ``Reshape`` (it moves only size-1
#: axes), built from the shapes recorded before the move (tf2onnx's ``_mul_handler``,
#: findings row 98): a runtime refusing a shape downstream of it refuses that Reshape's
#: stale shape, whichever node trips over it
SELECT_AS_ARITHMETIC = "select_as_arithmetic"
MAX_AS_REDUCE_MAX = "max_as_reduce_max"
MAX_AS_MAX_POOL = "max_as_max_pool"
BIAS_ADD_MISPLACED = "bias_add_misplaced"
BIAS_ADD_NCHW = "bias_add_nchw"
TRANSPOSE_RESHAPED_AFTER_SQUARE = "transpose_reshaped_after_square"
PROGRAM_FACTS = (SELECT_AS_ARITHMETIC, MAX_AS_REDUCE_MAX, MAX_AS_MAX_POOL, BIAS_ADD_MISPLACED, BIAS_ADD_NCHW,
                 TRANSPOSE_RESHAPED_AFTER_SQUARE)

#: what a runtime's refusal of a converted ONNX graph says is wrong with the graph, first match
#: first: an op the converter left unconverted, operand types, shapes, any other invalid graph.
#: Each is the converter's bug (its graph breaks ONNX's rules where the model it converted ran),
#: and each is one fault whatever the words: one node refused at load (shape inference:
#: "Incompatible dimensions") and at run (a broadcast its shapes do not allow) is one fault
ONNX_GRAPH_FAULTS = (
    ("a missing op", r"No Op registered"),
    ("operand types", r"Type Error|inconsistent type|bound to different types"),
    ("shapes", r"ShapeInferenceError|Incompatible dimensions|BroadcastIterator|Attempting to broadcast"),
    ("an invalid graph", r"INVALID_GRAPH"),
)

#: the TorchScript ONNX exporter's refusal of an aten op it has no symbolic function for
_TS_NO_SYMBOLIC = r"Exporting the operator '(?:\w+::)?(\w+)' to ONNX opset version \d+ is not supported"


def _converted(info: BackendInfo) -> BackendInfo:
    """A converter's or runtime's description: the Keras backend whose model it converts is
    its reference (the model before conversion is the program it must keep)."""
    return replace(info, reference=info.keras_backend)


TENSORFLOW = BackendInfo(
    name="tensorflow", target="audee.backends.keras_backends:TensorflowBackend",
    label="Keras 3 on TensorFlow, a traced graph", keras_backend="tensorflow", blamed_first=True,
    trackers=("tensorflow/tensorflow", "keras-team/keras"),
    error_words=(r"Graph execution error|OpKernel|InvalidArgumentError|UnimplementedError|"
                 r"Exception encountered when calling|tensorflow"),
    version_keys=("keras", "tensorflow"), packages=("tensorflow",), trains=True, runs_ops=True,
    unsupported=(*_KERAS_UNSUPPORTED, r"No OpKernel was registered", r"UnimplementedError",
                 r"Could not find device for node[\s\S]*?All kernels registered for op"),  # eager: no dtype kernel
    op_names=(OpName(r"No OpKernel was registered to support Op '(\w+)'", 20),  # no kernel for these attrs
              OpName(r"\b([A-Z]\w*?)(?:Op)?: ", 120),                          # a kernel: Conv3DBackpropInputOp: ...
              OpName(r"The (\w+) op currently", 130),                          # CPU kernel limits
              OpName(r"\{\{node (?:[^{}]*/)?([A-Z]\w*)\}\}", 140),             # a graph node: .../MaxPool3D
              *_KERAS_OPS),
    flushes_subnormals=True, script=_TF_GRAPH, builtin=True)
TORCH = BackendInfo(
    name="torch", target="audee.backends.keras_backends:TorchBackend", label="Keras 3 on PyTorch, eagerly",
    keras_backend="torch", trackers=("keras-team/keras", "pytorch/pytorch"), version_keys=("keras", "torch"),
    packages=("torch",), trains=True, runs_ops=True, unsupported=_KERAS_UNSUPPORTED, op_names=_KERAS_OPS,
    flush_switch=True, script=_TORCH_EAGER, builtin=True)
JAX = BackendInfo(
    name="jax", target="audee.backends.keras_backends:JaxBackend", label="Keras 3 on JAX, jitted",
    keras_backend="jax", trackers=("keras-team/keras", "jax-ml/jax"), version_keys=("keras", "jax", "jaxlib"),
    packages=("jax",), trains=True, runs_ops=True,
    # jax.jit traces with abstract values: an op whose output shape or control flow depends on
    # the values (nonzero, unique, ...) cannot be jitted, by jit's documented contract
    unsupported=(*_KERAS_UNSUPPORTED, r"ConcretizationTypeError|NonConcreteBooleanIndexError|"
                 r"Tracer(?:Bool|Integer|Array)ConversionError"),
    op_names=(OpName(r"supported by (?!(?:the|a|an)\b)(\w+)", 150),  # ... is not supported by dot_general
              *_KERAS_OPS),
    # jax.jit compiles the program users write op by op: jitted JAX is judged against it
    reference="jax-eager", flushes_subnormals=True, script=_JAX_JIT, builtin=True)  # jax-ml/jax#16200
ONNXRUNTIME = _converted(BackendInfo(
    name="onnxruntime", target="audee.backends.onnx_backend:OnnxRuntimeBackend",
    label="TensorFlow's Keras model converted by tf2onnx, run by ONNX Runtime", keras_backend="tensorflow",
    trackers=("microsoft/onnxruntime", "onnx/tensorflow-onnx"),  # a converted graph: either may be at fault
    converter="tf2onnx", converter_trackers=_TF2ONNX_TRACKERS, runtime="onnxruntime",
    runtime_errors=r"ONNXRuntimeError",
    graph_faults=ONNX_GRAPH_FAULTS,
    version_keys=("keras", "tensorflow", "onnx", "onnxruntime", "tf2onnx"),
    packages=("tensorflow", "tf2onnx", "onnxruntime"),
    unsupported=(r"No Op registered for",
                 r"NOT_IMPLEMENTED : Could not find an implementation for"),  # no kernel for the op and type
    op_names=(*_ONNX_OPS, OpName(r"running (\w+) node", 110)),  # a kernel at run
    runs_ops=True,  # the call converted alone (OnnxRuntimeBackend.call_op)
    query_noise=("onnxruntime",), script=_ORT_SCRIPT, builtin=True))


def _mode(base: BackendInfo, name: str, cls: str, label: str, **changes: object) -> BackendInfo:
    """Another execution mode of a framework: the framework's facts, its own name, class and
    label; the framework is its reference (the same program, run another way) unless
    ``changes`` say otherwise.  ``cls``: a class of ``audee/backends/modes.py`` by name, or a
    mode in a module of its own as ``module:Class``."""
    changes.setdefault("reference", base.name)
    changes.setdefault("flush_switch", False)  # a compiled or exported mode's kernels: not asked to flush
    target = cls if ":" in cls else f"audee.backends.modes:{cls}"
    return replace(base, name=name, target=target, label=label, blamed_first=False, **changes)



#: every built-in backend, in the order ``--backends`` lists them
BUILTIN_INFO: dict[str, BackendInfo] = {i.name: i for i in (
    TENSORFLOW, TORCH, JAX, ONNXRUNTIME,
    replace(ONNXRUNTIME, name="onnxruntime-fed", target="audee.backends.onnx_backend:OnnxRuntimeFedBackend",
            label="as onnxruntime, the weights fed as graph inputs on every call"),
    # the other execution mode of each framework
    _mode(TENSORFLOW, "tensorflow-eager", "TensorflowEagerBackend", "Keras 3 on TensorFlow, eagerly",
          script=ScriptCode("""# eagerly
import tensorflow as tf  # noqa: F401 - started as the other modes start it
at["phase"] = "run"
return model(xs, training=False)""", gpu=_TF_GPU, env=TF_ONEDNN)),
    _mode(TENSORFLOW, "tensorflow-xla", "TensorflowXlaBackend", "Keras 3 on TensorFlow, compiled by XLA",
          trackers=("tensorflow/tensorflow", "openxla/xla"), script=ScriptCode("""# a traced graph compiled by XLA
import tensorflow as tf
at["phase"] = "run"
return tf.function(lambda xs: model(xs, training=False), autograph=False, jit_compile=True)(xs)""", gpu=_TF_GPU,
                                                                          op=_TF_OP_XLA, op_carries=_TRACED,
                                                                          env=TF_ONEDNN)),
    _mode(TENSORFLOW, "tensorflow-noonednn", "TensorflowNoOneDnnBackend",
          "Keras 3 on TensorFlow, a traced graph on TensorFlow's own CPU kernels (oneDNN off)",
          script=replace(_TF_GRAPH, env=TF_NO_ONEDNN)),  # read at import
    _mode(TORCH, "torch-compile", "TorchCompileBackend", "Keras 3 on PyTorch under torch.compile",
          trackers=("pytorch/pytorch", "keras-team/keras"), script=ScriptCode("""# under torch.compile
import torch
at["phase"] = "run"
with torch.no_grad():
    return torch.compile(model, dynamic=False)([keras.ops.convert_to_tensor(x) for x in xs], training=False)""",
                                                                                gpu=_TORCH_GPU, op=_TORCH_OP_COMPILE,
                                                                                op_carries=_TRACED)),
    _mode(JAX, "jax-eager", "JaxEagerBackend", "Keras 3 on JAX, op by op", reference=None,
          trackers=("jax-ml/jax", "keras-team/keras"), script=ScriptCode(f"""# op by op
import jax
at["phase"] = "run"
{_JAX_ARGS}
with jax.disable_jit():
    return model.stateless_call(*args, training=False)[0]""", op=_JAX_OP_EAGER)),
    # JAX with 64-bit types (jax_enable_x64): the float64 reference's JAX worker (registry.FLOAT64_TWIN)
    _mode(JAX, "jax-x64", "JaxX64Backend", "Keras 3 on JAX, jitted, with 64-bit types (jax_enable_x64)",
          reference=None,  # another precision: no program of its own to match
          script=replace(_JAX_JIT, env=(("JAX_ENABLE_X64", "1"),))),  # read at JAX's import
    # more converters and runtimes
    _converted(BackendInfo(
        name="openvino", target="audee.backends.openvino_backend:OpenVinoBackend",
        label="TensorFlow's Keras model converted by tf2onnx, run by OpenVINO's CPU plugin",
        keras_backend="tensorflow",
        trackers=("openvinotoolkit/openvino", "onnx/tensorflow-onnx"),  # tf2onnx's graph: either may be at fault
        converter="tf2onnx", converter_trackers=_TF2ONNX_TRACKERS, graph_faults=ONNX_GRAPH_FAULTS,
        version_keys=("keras", "tensorflow", "tf2onnx", "onnx", "openvino"),
        packages=("tensorflow", "tf2onnx", "openvino"),
        unsupported=(r"No conversion rule found for operations",),  # its ONNX frontend has no translator
        op_names=(*_ONNX_OPS,
                  OpName(r"No conversion rule found for operations: (\w+)", 40),  # its ONNX frontend
                  OpName(r"Failed operations detailed log: -- (\w+)-\d+", 50)),   # ConvTranspose-15 with ...
        script=ScriptCode("""# tf2onnx from the TensorFlow backend, then OpenVINO's CPU plugin in float32
proto, feed, names = tf2onnx_graph(keras, model, spec, xs, at)
import openvino as ov
core = ov.Core()  # float32: no bfloat16 inference on CPUs that have it
compiled = core.compile_model(core.read_model(proto.SerializeToString()), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
at["phase"] = "run"
got = compiled(feed)
ports = {n: port for port in compiled.outputs for n in port.get_names()}
return [np.asarray(got[ports[n]]) for n in names]""", helpers=(_TF2ONNX,),
                          op="""import openvino as ov  # the call traced, converted by tf2onnx, run by OpenVINO in float32
proto, feed, names = tf2onnx_call(fn, args, kwargs, {})
core = ov.Core()
compiled = core.compile_model(core.read_model(proto.SerializeToString()), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
got = compiled(feed)
ports = {n: port for port in compiled.outputs for n in port.get_names()}
return [np.asarray(got[ports[n]]) for n in names]""", op_carries=_TF2ONNX_OP),
        runs_ops=True,  # the call converted alone, as onnxruntime's (its class inherits it)
        builtin=True)),
    _converted(BackendInfo(
        name="torch-onnx", target="audee.backends.torch_onnx_backend:TorchOnnxBackend",
        label="torch's Keras model exported by torch.onnx (dynamo), run by ONNX Runtime", keras_backend="torch",
        trackers=("pytorch/pytorch", "microsoft/onnxscript", "microsoft/onnxruntime"),
        converter="torch.onnx", converter_trackers=("pytorch/pytorch", "microsoft/onnxscript"),
        version_keys=("keras", "torch", "onnxscript", "onnx", "onnxruntime"),
        packages=("torch", "onnxscript", "onnx", "onnxruntime"),
        unsupported=ONNXRUNTIME.unsupported, op_names=ONNXRUNTIME.op_names, query_noise=("onnxruntime",),
        script=ScriptCode("""# torch.onnx.export(dynamo=True), opset 18, then an ONNX Runtime session
import onnxruntime as ort
import torch
at["phase"] = "convert"

class Call(torch.nn.Module):
    def forward(self, *args):
        ys = model(list(args), training=False)
        return tuple(ys) if isinstance(ys, (list, tuple)) else (ys,)

names = [f"y{k}" for k in range(len(spec["layers"]))]
program = torch.onnx.export(Call(), tuple(torch.from_numpy(x) for x in xs), dynamo=True, opset_version=18,
                            input_names=[i["name"] for i in spec["inputs"]], output_names=names)
session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
at["phase"] = "run"
return ort_outputs(session, names, spec, xs)""", helpers=(_ORT_OUTPUTS,), gpu=_TORCH_GPU,
                          op="""import onnxruntime as ort  # the call on torch exported by torch.onnx (dynamo), run by ONNX Runtime
proto, feed, names = torch_onnx_call(fn, args, kwargs, {})
session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
values = session.run_with_ort_values(names, {k: numpy_to_ort(_torch_to_numpy(t)) for k, t in feed.items()})
return [ort_to_numpy(v) for v in values]""",
                          op_carries=(*_CALL_ALONE, "audee.backends.keras_backends:_torch_to_numpy",
                                      "audee.backends.ort_process:numpy_to_ort",
                                      "audee.backends.ort_process:ort_to_numpy",
                                      "audee.backends.torch_onnx_backend:torch_onnx_call")),
        runs_ops=True,  # the call exported alone (TorchOnnxBackend.graph_of_call)
        hosts="torch", builtin=True)),
    _converted(BackendInfo(
        name="torch-onnx-ts", target="audee.backends.torch_onnx_backend:TorchOnnxTsBackend",
        label="torch's Keras model exported by torch.onnx's TorchScript exporter, run by ONNX Runtime",
        keras_backend="torch", trackers=("pytorch/pytorch", "microsoft/onnxruntime"),
        converter="torch.onnx-ts", converter_trackers=("pytorch/pytorch",),
        version_keys=("keras", "torch", "onnx", "onnxruntime"), packages=("torch", "onnx", "onnxruntime"),
        # the exporter's own refusals: no symbolic function for an aten op, or one for some of its uses
        unsupported=(*ONNXRUNTIME.unsupported, _TS_NO_SYMBOLIC, r"Unsupported: ONNX export of",
                     r"does not currently support"),
        op_names=(*ONNXRUNTIME.op_names, OpName(_TS_NO_SYMBOLIC, 35), OpName(r"ONNX export of operator (\w+)", 36)),
        query_noise=("onnxruntime",),
        # the tracer unrolls Keras' Python loop over time steps: a recurrent case's graph grows with its sequence
        max_steps=4, hosts="torch", script=ScriptCode("""# torch.onnx.export(dynamo=False): the TorchScript exporter, then an ONNX Runtime session
import io
import warnings
import onnxruntime as ort
import torch
at["phase"] = "convert"

class Call(torch.nn.Module):
    def forward(self, *args):
        ys = model(list(args), training=False)
        return tuple(ys) if isinstance(ys, (list, tuple)) else (ys,)

names = [f"y{k}" for k in range(len(spec["layers"]))]
buffer = io.BytesIO()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the legacy exporter's deprecation
    torch.onnx.export(Call(), tuple(torch.from_numpy(x) for x in xs), buffer, dynamo=False, opset_version=17,
                      input_names=[i["name"] for i in spec["inputs"]], output_names=names)
session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
at["phase"] = "run"
return ort_outputs(session, names, spec, xs)""", helpers=(_ORT_OUTPUTS,), gpu=_TORCH_GPU),
        builtin=True)),
    _converted(BackendInfo(
        name="litert", target="audee.backends.litert_backend:LiteRtBackend",
        label="TensorFlow's Keras model converted by the TFLite converter, run by the LiteRT interpreter",
        keras_backend="tensorflow", trackers=("google-ai-edge/LiteRT", "tensorflow/tensorflow"),
        version_keys=("keras", "tensorflow", "ai-edge-litert"), packages=("tensorflow", "ai-edge-litert"),
        trains=True, runs_ops=True,  # as its class declares (it inherits TensorflowBackend's)
        unsupported=(r"neither a custom op nor a flex op",),  # the converter: no builtin op (Flex is off)
        op_names=(OpName(r"'tf\.(\w+)' op is neither a custom op", 30),),  # the converter: no builtin for a TF op
        script=ScriptCode("""# the TFLite converter (builtin ops only), then the LiteRT interpreter
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
at["phase"] = "convert"
tv = [tf.constant(v.value) for v in model.trainable_variables]  # the weights as constants
ntv = [tf.constant(v.value) for v in model.non_trainable_variables]

def call(*args):
    ys = model.stateless_call(tv, ntv, list(args), training=False)[0]
    return {f"y{k}": tf.identity(y) for k, y in enumerate(ys if isinstance(ys, (list, tuple)) else [ys])}

sig = [tf.TensorSpec(np.shape(x), tf.as_dtype(np.asarray(x).dtype), name=i["name"])
       for x, i in zip(xs, spec["inputs"])]
concrete = tf.function(call, input_signature=sig, autograph=False).get_concrete_function()
converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], tf.Module())
converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
interpreter = Interpreter(model_content=converter.convert())
runner = interpreter.get_signature_runner()
at["phase"] = "run"
got = runner(**{i["name"]: np.ascontiguousarray(x) for i, x in zip(spec["inputs"], xs)})
return [np.asarray(got[f"y{k}"]) for k in range(len(got))]""",
                          op="return tflite_call(fn, args, kwargs, {})  # converted, run by LiteRT",
                          op_carries=(*_CALL_ALONE, "audee.backends.keras_backends:tf_traced_call",
                                      "audee.backends.litert_backend:tflite_call")),
        builtin=True)),
)}


def max_steps(labels: Iterable[str]) -> int | None:
    """The longest sequence a recurrent API-level case draws on these backends (labels): the
    least any of them asks for, None when none does."""
    got = [describe(label).max_steps for label in labels]
    return min((n for n in got if n is not None), default=None)


def base_name(backend: str) -> str:
    """A result label's backend name: ``torch@cuda:tf32`` -> ``torch``."""
    return str(backend).partition("@")[0]


def describe(backend: str) -> BackendInfo:
    """The description of a backend by name or result label (``torch@cuda``); a plugin
    (or a name no built-in has) gets the defaults, its name as its target and component."""
    name = base_name(backend)
    info = BUILTIN_INFO.get(name)
    return info if info is not None else BackendInfo(name=name, target=name, label=name)


#: plugin target -> the backend it compiles or converts, as its worker declared it at start
_PLUGIN_REFERENCES: dict[str, str] = {}


def note_plugin_reference(target: str, reference: object) -> None:
    """Record what a started plugin worker declared as its reference (its class's
    ``reference``); built-ins are described in :data:`BUILTIN_INFO`."""
    if all(i.target != target for i in BUILTIN_INFO.values()) and isinstance(reference, str) and reference in BUILTIN_INFO:
        _PLUGIN_REFERENCES[target] = reference


def _plugin_reference(target: str) -> str | None:
    """A plugin's reference, as a worker this process started declared it.  Judging never
    imports: a plugin label read from a row or a case file must not choose code to run, so a
    plugin no worker here declared is judged as an independent framework."""
    return _PLUGIN_REFERENCES.get(target)


def reference_of(backend: str) -> str | None:
    """The label of the backend ``backend`` (a name or result label) is judged against, on
    the same placement: ``tensorflow-xla@cuda`` -> ``tensorflow@cuda``; None for a backend
    that compiles or converts no other (an independent framework)."""
    name, at, place = str(backend).partition("@")
    info = BUILTIN_INFO.get(name)
    ref = info.reference if info is not None else (_plugin_reference(name) if ":" in name else None)
    return ref + at + place if ref else None


def program_of(backend: str) -> str:
    """The Keras framework whose program ``backend`` runs: its own (``jax-x64`` and
    ``jax-eager`` JAX's), the one it converts (onnxruntime TensorFlow's), else its name.  Two
    backends of one program share its faults that no dtype or execution mode makes."""
    return describe(backend).keras_backend or reference_of(backend) or base_name(backend)


def keras_frameworks() -> tuple[str, ...]:
    """The built-in backends that are a Keras framework as it is (``tensorflow``, ``torch``,
    ``jax``): their own Keras backend, no converter, no other mode."""
    return tuple(n for n, i in BUILTIN_INFO.items() if i.keras_backend == n)


def trackers_of(component: str) -> tuple[str, ...]:
    """Where a component's bugs are filed: a backend's trackers, or a converter's (whose
    graph some backends run); empty for a component no description names."""
    if component in BUILTIN_INFO:
        return BUILTIN_INFO[component].trackers
    return next((i.converter_trackers for i in BUILTIN_INFO.values() if i.converter == component), ())


def first_blamed() -> str:
    """The backend blamed when a failure is no single backend's (several odd, or none)."""
    return next(i.blamed for i in BUILTIN_INFO.values() if i.blamed_first)


def _union(items: object) -> tuple:
    return tuple(dict.fromkeys(items))  # type: ignore[call-overload]


def all_unsupported() -> tuple[str, ...]:
    """Every built-in backend's explicit "unsupported" patterns, each once."""
    return _union(p for i in BUILTIN_INFO.values() for p in i.unsupported)


def all_op_names() -> tuple[str, ...]:
    """Every built-in backend's op-naming patterns, each once, most telling first (by rank)."""
    named = _union(o for i in BUILTIN_INFO.values() for o in i.op_names)
    return tuple(o.pattern for o in sorted(named, key=lambda o: o.rank))


def all_version_keys() -> tuple[str, ...]:
    """The packages whose versions a report prints, each once, in the backends' order."""
    return _union(k for i in BUILTIN_INFO.values() for k in i.version_keys)


def all_query_noise() -> tuple[str, ...]:
    """Words of built-in backends' errors that say nothing in a tracker search."""
    return _union(w for i in BUILTIN_INFO.values() for w in i.query_noise)
