"""Keras 3 on TensorFlow, PyTorch and JAX: one class per framework, each with its own
compiled call (``model.predict`` costs 100+ ms a call on TF; a compiled call about 1 ms).

``make_layer`` is the extension point for plugins: override it to swap one layer's
implementation (fault injection, a patched kernel) and keep everything else.
"""
from __future__ import annotations

import os
import sys
import traceback
from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

import numpy as np

from audee.backends.base import Backend, BackendError, Phase
from audee.backends.info import BUILTIN_INFO, TENSORFLOW
from audee.backends.keras_build import BuiltModel, RoundTripError, default_layer
from audee.backends.registry import gpu_index
from audee.backends.tf_graph import graph_facts
from audee.cases.spec import LayerSpec, ModelSpec, Weights, contiguous
from audee.core.bounded import clean_text


def gpu_precision_env(device: str, precision: str) -> dict[str, str | None]:
    """Process environment for a precision mode, set before any framework import (None:
    unset).  ``NVIDIA_TF32_OVERRIDE=0`` turns TF32 off in cuBLAS and cuDNN for every
    library in the process (ONNX Runtime's CUDA provider and XLA's cuBLAS calls too); the
    ``tf32`` mode unsets it, so a user's global override cannot silently make it full."""
    if not device.startswith("cuda"):
        return {}
    full = precision == "full"
    return {"NVIDIA_TF32_OVERRIDE": "0" if full else None,
            "JAX_DEFAULT_MATMUL_PRECISION": "highest" if full else "tensorfloat32"}


def apply_precision_env(device: str, precision: str) -> None:
    """Set (or unset) :func:`gpu_precision_env`'s variables in this process."""
    for var, value in gpu_precision_env(device, precision).items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


class KerasOpCalls:
    """How a backend calls one ``keras.ops`` function of an op case (``Backend.run_op``): the
    Keras backends, and the converters that convert the call alone (``onnxruntime``,
    ``openvino``: the call traced by TensorFlow, converted, run).  ``keras`` is the Keras
    module of the framework that calls it; :meth:`call_op` is each backend's own way."""

    keras: Any
    runs_ops = True
    preload_modules: tuple[str, ...] = ("keras",)  # Keras imports the framework KERAS_BACKEND names

    def op_function(self, name: str) -> Any:
        """The function a call names (``add``, ``image.resize``, ``activations.relu``;
        :func:`audee.cases.opcase.call_function`): the worker has checked it is one a case may
        name.  Plugins override this to swap one op."""
        from audee.cases.opcase import call_function

        return call_function(self.keras, name)

    def run_op(self, call: dict[str, Any], tensors: dict[str, np.ndarray]) -> list[tuple[np.ndarray, str]]:
        ops = self.keras.ops
        dtypes = call.get("dtypes", {})

        def resolve(v: Any, top: bool = True) -> Any:
            if isinstance(v, dict) and set(v) == {"tensor"}:
                a = tensors[v["tensor"]]
                t = ops.convert_to_tensor(a)
                want = dtypes.get(v["tensor"], str(a.dtype))
                return ops.cast(t, want) if want != str(a.dtype) else t
            if isinstance(v, list):
                items = [resolve(x, False) for x in v]
                # numbers (a shape, axes) as a tuple; tensors (a list argument) as a list
                return tuple(items) if all(isinstance(x, (int, float)) for x in items) else items
            return v

        fn = self.op_function(str(call["op"]))
        out = self.call_op(fn, [resolve(a) for a in call.get("args", [])],
                           {k: resolve(v) for k, v in call.get("kwargs", {}).items()})
        return [self._op_output(o) for o in _flat(out)]

    def symbolic_refusal(self, call: dict[str, Any], tensors: dict[str, np.ndarray]) -> str | None:
        """What Keras's own symbolic call of the op (``keras.ops`` on ``KerasTensor``s of the
        case's shapes and dtypes: its shape and dtype inference) raises, or None when it
        accepts the arguments.  Keras's function, never a plugin's: the contract is Keras's."""
        keras = self.keras
        dtypes = call.get("dtypes", {})

        def symbolic(v: Any) -> Any:
            if isinstance(v, dict) and set(v) == {"tensor"}:
                a = tensors[v["tensor"]]
                return keras.KerasTensor(a.shape, dtype=dtypes.get(v["tensor"], str(a.dtype)))
            if isinstance(v, list):
                items = [symbolic(x) for x in v]
                return tuple(items) if all(isinstance(x, (int, float)) for x in items) else items
            return v

        from audee.cases.opcase import call_function

        fn = call_function(keras, str(call["op"]))
        try:
            fn(*[symbolic(a) for a in call.get("args", [])], **{k: symbolic(v) for k, v in call.get("kwargs", {}).items()})
        except Exception as exc:  # noqa: BLE001 - any refusal is the answer
            return f"{type(exc).__name__}: {exc}"[:300]
        return None

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """One op call, run the way this backend runs a model: eagerly here (torch, the eager
        modes), as a user calls ``keras.ops``; a backend that traces or compiles its model
        traces or compiles the call (the tensors its inputs, every other argument a constant:
        :func:`split_tensors`), so each mode's pair with its reference is "compiled equals
        eager" for one op as it is for a model."""
        return fn(*args, **kwargs)

    def _op_output(self, t: Any) -> tuple[np.ndarray, str]:
        keras = self.keras
        if isinstance(t, (bool, int, float)) or t is None:
            a = np.asarray(t if t is not None else np.nan)
            return a, str(a.dtype)
        if isinstance(t, np.ndarray):  # a converter's runtime answered (bfloat16 as ml_dtypes')
            return (t.astype(np.float32), "bfloat16") if t.dtype.name == "bfloat16" else (t, t.dtype.name)
        dtype = keras.backend.standardize_dtype(t.dtype)
        if dtype == "bfloat16":
            t = keras.ops.cast(t, "float32")
        return np.asarray(keras.ops.convert_to_numpy(t)), dtype


class KerasBackend(KerasOpCalls, Backend):
    """Shared part: building the Keras model; subclasses provide the compiled call.

    On a GPU each framework gets its own precision switch once it is imported
    (:meth:`set_precision`), besides the process environment of :func:`gpu_precision_env`.
    A CPU computes float32 in IEEE precision with or without switches, so none is touched
    there: CPU results stay what they were measured to be."""

    keras_backend: ClassVar[str] = ""
    #: run the layers' initializers at build; off: audee's weights replace every layer
    #: weight before a run, and initializers cost seconds per new weight shape on JAX
    init_weights: ClassVar[bool] = False
    _precision_set: bool = False

    @contextmanager
    def keeping_float64(self) -> Iterator[None]:
        """Keras' promotion keeps float64 inside it: ``backend.result_type`` maps float64 to
        float32 on every backend but TensorFlow (``BIT64_TO_BIT32_DTYPE``, "aligned with JAX's
        default"), so a float64 GroupNormalization, BatchNormalization, LayerNormalization or
        torch's matmul computes in float32 and casts back: float32 rounding in a float64
        array, which the float64 reference would take for the exact result.  The table is
        read at each call, so the switch holds for what is built and traced inside only."""
        from keras.src.backend.common import dtypes

        table = dtypes.BIT64_TO_BIT32_DTYPE
        before = table.get("float64")
        table["float64"] = "float64"
        try:
            yield
        finally:
            table["float64"] = before

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        """The environment the framework reads at import, set before Keras is imported.  A
        worker of another Keras backend starts without JAX: Keras 3.15 imports JAX in every
        backend (its Orbax checkpoint callback, behind ``except ImportError``; every other
        use of JAX outside its backend asks for the backend first), which costs a
        TensorFlow worker about 2.3 s of its 8 s start-up and a torch worker about 1 s on
        a 2-core machine, and nothing the worker computes reads it."""
        if cls.keras_backend != "jax":
            sys.modules.setdefault("jax", None)  # ``import jax`` raises ImportError; find_spec says None
        os.environ["KERAS_BACKEND"] = cls.keras_backend
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        if device == "cpu":
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            os.environ["JAX_PLATFORMS"] = "cpu"
            os.environ["KERAS_TORCH_DEVICE"] = "cpu"
        elif device.startswith("cuda"):
            os.environ["KERAS_TORCH_DEVICE"] = device
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        apply_precision_env(device, precision)

    @property
    def keras(self) -> Any:
        import keras  # noqa: PLC0415 - imported in the worker only, after prepare_process

        if not self._precision_set:
            # whole tracebacks: Keras drops its own frames from an error's traceback by
            # default, so a Keras bug raised in a layer's call ended in audee's frame that
            # called it and was counted as audee's own ("audee_raised": harness)
            keras.config.disable_traceback_filtering()
            if self.keras_backend == "tensorflow":  # TensorFlow drops its own frames too
                import tensorflow as tf  # noqa: PLC0415 - Keras has imported it already

                tf.debugging.disable_traceback_filtering()
            if self.device.startswith("cuda"):
                self.set_precision(self.precision == "tf32")
        self._precision_set = True
        return keras

    def set_precision(self, tf32: bool) -> None:
        """Turn the framework's TF32 math on or off (GPU only; called once, after import)."""

    def precision_flags(self) -> dict[str, str]:
        """The framework's own switches, read back (empty where none applies)."""
        return {}

    def unusable(self) -> str | None:
        if not self.device.startswith("cuda"):  # a CPU's failure is the call's own
            return None
        try:
            self.probe_device()
        except Exception as exc:  # noqa: BLE001 - the framework's words, whatever it raises
            return clean_text(f"the device no longer computes: {type(exc).__name__}: {exc}")
        return None

    def probe_device(self) -> None:
        """One tiny computation on this worker's GPU, synchronised: raises once a CUDA
        error has stuck to the process's context."""

    def precision_state(self) -> dict[str, str]:
        _ = self.keras  # the switches are set on import
        if not self.device.startswith("cuda"):
            return {"mode": self.precision}
        return {"mode": self.precision, **self.precision_flags(),
                "NVIDIA_TF32_OVERRIDE": os.environ.get("NVIDIA_TF32_OVERRIDE", "unset")}

    def versions(self) -> dict[str, str]:
        import importlib.metadata as md

        return {"keras": md.version("keras"), self.framework: md.version(self.framework_dist)}

    framework: ClassVar[str] = ""
    framework_dist: ClassVar[str] = ""

    def make_layer(self, layer: LayerSpec) -> Any:
        """Instantiate one spec layer as a Keras layer (plugins override this)."""
        return default_layer(self.keras, layer)

    def build(self, spec: ModelSpec) -> BuiltModel:
        built = BuiltModel(spec, self.keras, self.make_layer, init_weights=self.init_weights,
                           native=self.native_zeros)
        self.compile(built)
        return built

    def native_zeros(self, zeros: np.ndarray) -> Any:
        """A build's placeholder zeros as the array its variable is made from (numpy
        converts cheaply on most backends)."""
        return zeros

    def compile(self, built: BuiltModel) -> None:
        """Attach the compiled forward call to ``built.fn``."""
        raise NotImplementedError

    def weight_shapes(self, model: BuiltModel) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
        return model.weight_shapes()

    def declared_outputs(self, model: BuiltModel) -> list[tuple[list[int | None], str]] | None:
        return model.declared

    def set_weights(self, model: BuiltModel, weights: Weights) -> None:
        model.check_weights(weights)
        model.set_weights(weights)

    def round_trip(self, model: BuiltModel, weights: Weights) -> None:
        """The weighted model saved and loaded (:meth:`BuiltModel.round_trip`), its forward
        call compiled anew for the loaded model (the loaded variables hold the weights)."""
        round_trip_built(model, self.keras, weights)
        self.compile(model)

    @staticmethod
    def _ordered(model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [inputs[i.name] for i in model.spec.inputs]

    # ---- keras.ops calls (op-level cases): KerasOpCalls, and their gradients here --------
    def run_op_grad(self, call: dict[str, Any], tensors: dict[str, np.ndarray], seed: int
                    ) -> tuple[list[tuple[np.ndarray, str]], list[str], list[tuple[np.ndarray, str]]]:
        """One call and its vector-Jacobian product (the op level's gradient phase,
        :mod:`audee.engine.opgrad`): the call's outputs, the tensors differentiated (each floating
        tensor argument, :data:`audee.cases.opcase.GRAD_DTYPES`), and the gradient of each, the
        cotangent of output ``k`` drawn by :func:`audee.cases.opcase.cotangent` from ``seed`` (an
        integer, boolean or complex output pulls nothing back).  Called through
        :meth:`call_op`, so a compiling mode differentiates its compiled call; the framework's
        own autodiff (:meth:`vjp`).  A failure of the call is phase ``run``, of its
        differentiation phase ``gradient``."""
        from audee.cases.opcase import GRAD_DTYPES, cotangent, refs

        keras = self.keras
        ops = keras.ops
        dtypes = call.get("dtypes", {})
        native: dict[str, Any] = {}
        for n, a in tensors.items():
            t = ops.convert_to_tensor(a)
            want = dtypes.get(n, str(a.dtype))
            native[n] = ops.cast(t, want) if want != str(a.dtype) else t
        named = [n for a in [*call.get("args", []), *call.get("kwargs", {}).values()] for n in refs(a)]
        wrt = [n for n in dict.fromkeys(named) if dtypes.get(n, str(tensors[n].dtype)) in GRAD_DTYPES]
        fn = self.op_function(str(call["op"]))

        def f(*ws: Any) -> list[Any]:
            sub = {**native, **dict(zip(wrt, ws))}

            def resolve(v: Any) -> Any:
                if isinstance(v, dict) and set(v) == {"tensor"}:
                    return sub[v["tensor"]]
                if isinstance(v, list):
                    items = [resolve(x) for x in v]
                    return tuple(items) if all(isinstance(x, (int, float)) for x in items) else items
                return v

            return _flat(self.call_op(fn, [resolve(a) for a in call.get("args", [])],
                                      {k: resolve(v) for k, v in call.get("kwargs", {}).items()}))

        def cot(k: int, o: Any) -> Any:
            """Output ``k``'s cotangent as a tensor of its dtype, None when it has none."""
            if o is None or isinstance(o, (bool, int, float)):
                return None
            d = keras.backend.standardize_dtype(o.dtype)
            if d not in GRAD_DTYPES:
                return None
            c = cotangent(seed, k, tuple(o.shape))
            return ops.cast(ops.convert_to_tensor(c if d == "float64" else c.astype(np.float32)), d)

        outs, grads = self.vjp(f, [native[n] for n in wrt], cot)
        return [self._op_output(o) for o in outs], wrt, [self._op_output(g) for g in grads]

    def vjp(self, f: Any, wrt: list[Any], cot: Any) -> tuple[list[Any], list[Any]]:
        """``f(*wrt)`` (a list of outputs) and the gradient of each of ``wrt`` pulled back
        from ``cot(k, output)`` (None: output ``k`` pulls nothing); a tensor no output
        reaches gets zeros (TensorFlow and torch say None, JAX zeros).  Each framework's own."""
        raise NotImplementedError(f"{self.name}: no vector-Jacobian product")

    # the training phase (audee/backends/keras_train.py): each framework's own autodiff
    trains = True
    #: how the training step runs: ``compiled`` (tf.function, jax.jit; torch is eager either
    #: way), ``eager`` (no tf.function, no jit), ``xla`` (tf.function(jit_compile=True))
    train_mode: ClassVar[str] = "compiled"

    def train(self, model: BuiltModel, inputs: dict[str, np.ndarray], setup: dict[str, Any],
              *, layers: bool = False, input_grads: bool = False) -> dict[str, Any]:
        from audee.backends import keras_train
        from audee.train.setup import TrainSetup

        step = getattr(keras_train, f"train_{self.keras_backend}")
        return step(self, model, inputs, TrainSetup.from_json(setup), layers=layers, input_grads=input_grads,
                    mode=self.train_mode)


def split_tensors(args: list[Any], kwargs: dict[str, Any], is_tensor: Any) -> tuple[list[Any], Any]:
    """An op call's tensors (in lists too) in order, and the function that puts a traced
    stand-in for each back where it came from: ``rebuild(ts) -> (args, kwargs)``."""
    leaves: list[Any] = []

    def cut(v: Any) -> Any:
        if is_tensor(v):
            leaves.append(v)
            return _Slot(len(leaves) - 1)
        if isinstance(v, (list, tuple)):  # a named tuple (eigh's, topk's) as a plain one: read in order
            return (list if isinstance(v, list) else tuple)(cut(x) for x in v)
        return v

    def put(v: Any, ts: Any) -> Any:
        if isinstance(v, _Slot):
            return ts[v.index]
        if isinstance(v, (list, tuple)):
            return type(v)(put(x, ts) for x in v)
        return v

    shape_args, shape_kwargs = cut(list(args)), {k: cut(v) for k, v in kwargs.items()}
    return leaves, lambda ts: (put(shape_args, ts), {k: put(v, ts) for k, v in shape_kwargs.items()})


class _Slot:
    """Where tensor ``index`` of an op call goes."""

    def __init__(self, index: int):
        self.index = index


def traced_call(fn: Any, args: list[Any], kwargs: dict[str, Any], is_tensor: Any, compile: Any) -> Any:
    """``fn(*args, **kwargs)`` through a compiler: ``compile`` gets a function of the call's
    tensors alone (every other argument a constant of the trace) and returns its compiled
    version, which is called on the tensors.  A new function per call: each case has its
    own shapes and constants, so nothing compiled for one case is reused for another.

    What the trace already knows (a Python number or None the op returns, such as
    ``ndim``'s) comes back as that value, not as an output of the compiled function: a
    compiler makes its outputs tensors (``jax.jit`` a weakly typed int32), while the same
    call run eagerly returns the number, and the pair would differ in dtype alone."""
    leaves, rebuild = split_tensors(args, kwargs, is_tensor)
    traced: dict[str, Any] = {}  # the trace's Python values and where the compiled outputs go

    def call(*ts: Any) -> Any:
        a, k = rebuild(ts)
        outs, traced["rebuild"] = split_tensors([fn(*a, **k)], {}, _computed)
        return outs

    computed = compile(call)(*leaves)
    (out,), _ = traced["rebuild"](list(computed))
    return out


def _computed(v: Any) -> bool:
    """Whether an op's output is computed by the call (a tensor), not a value its trace knew."""
    return not isinstance(v, (bool, int, float, complex, str, list, tuple, type(None)))


def tf_traced_call(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, list[Any], list[Any]]:
    """``fn(*args, **kwargs)`` as a converter takes it: a ``tf.function`` of the call's tensors
    alone (input ``t<i>``, every other argument a constant of the trace) returning each output
    (nested ones flattened in order) as ``y<k>``; its input signature (the tensors' own shapes
    and dtypes) and the tensors to feed it.  Standalone: op scripts carry its text."""
    import tensorflow as tf

    leaves, rebuild = split_tensors(args, kwargs, tf.is_tensor)

    def forward(*ts: Any) -> dict[str, Any]:
        a, k = rebuild(ts)
        # a value the trace knows (ndim's Python int) as the eager call's NumPy reading of it
        # (int64), not as TensorFlow's default int32 constant: the pair would differ in dtype alone
        return {f"y{i}": tf.identity(o) if tf.is_tensor(o) else tf.constant(np.asarray(o))
                for i, o in enumerate(_flat(fn(*a, **k)))}

    sig = [tf.TensorSpec(t.shape, t.dtype, name=f"t{i}") for i, t in enumerate(leaves)]
    return tf.function(forward, input_signature=sig, autograph=False), sig, leaves


def _flat(out: Any) -> list[Any]:
    """An op's outputs in order: nested tuples and lists flattened."""
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def _forward(f: Any, ws: list[Any]) -> list[Any]:
    """The call of a gradient request: its failure is the op's (phase ``run``)."""
    try:
        return f(*ws)
    except BackendError:
        raise
    except Exception as exc:
        raise BackendError(Phase.RUN, f"{type(exc).__name__}: {exc}", traceback.format_exc()) from exc


def _gradient_failure(exc: BaseException) -> BackendError:
    """A framework that cannot differentiate the call (no gradient registered, an
    unsupported dtype in the backward pass): phase ``gradient``."""
    return BackendError(Phase.GRADIENT, f"{type(exc).__name__}: {exc}", traceback.format_exc())


class TensorflowBackend(KerasBackend):
    name = "tensorflow"
    keras_backend = "tensorflow"
    framework = "tensorflow"
    framework_dist = "tensorflow-cpu"

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        """Also the environment TensorFlow reads at its import that this mode's script sets too
        (:data:`audee.backends.info.TF_ONEDNN`: oneDNN pinned, not left to the CPU)."""
        super().prepare_process(device, precision)
        script = (BUILTIN_INFO.get(cls.name) or TENSORFLOW).script
        os.environ.update(dict(script.env if script is not None else ()))

    def versions(self) -> dict[str, str]:
        import tensorflow as tf

        return {"keras": self.keras.__version__, "tensorflow": tf.__version__}

    def precision_state(self) -> dict[str, str]:
        """Also whether TensorFlow computes with oneDNN, as TensorFlow itself reports it
        (``onednn``: it picks other kernels, with other faults, than its own)."""
        try:
            from tensorflow.python.util import _pywrap_util_port  # no public switch says it
            onednn = str(bool(_pywrap_util_port.IsMklEnabled())).lower()
        except (ImportError, AttributeError):
            onednn = "unknown"
        return {**super().precision_state(), "onednn": onednn}

    def set_precision(self, tf32: bool) -> None:
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(tf32)

    def probe_device(self) -> None:
        import tensorflow as tf

        with tf.device("/GPU:0"):  # the worker's one visible GPU, as compile() places its model
            (tf.ones([1]) + 1).numpy()

    def precision_flags(self) -> dict[str, str]:
        import tensorflow as tf

        return {"tf32": str(tf.config.experimental.tensor_float_32_execution_enabled()).lower()}

    def compile(self, built: BuiltModel) -> None:
        """The forward call as a ``tf.function`` traced once per input signature, each trace
        static in every dimension.  Not ``reduce_retracing``: there a model's second signature
        is traced with its batch dimension relaxed to None, and that graph computes another
        last bit than the static one (a SimpleRNN's logits, 4.8e-7): a model's values then
        hung on the batch sizes its worker met first (``work_ahead`` compiles for the last
        case's batch), and the exact ``roundtrip_*`` rules compared the relaxed original with
        the static trace of the loaded model: a false finding on the SimpleRNN seed after a
        case whose last run was at batch 1 (the ``batch_single`` rule)."""
        import tensorflow as tf

        model = built.model
        device = "/GPU:0" if self.device.startswith("cuda") else "/CPU:0"

        @tf.function(autograph=False)
        def fn(xs: list) -> list:
            with tf.device(device):
                return model(xs, training=False)

        built.fn = fn
        built.concrete = {}  # input signature -> the traced graph function, called directly
        built.assign_fns = {}  # (layers, dtype) -> the graph call that assigns a weight set

    #: weight sets a model takes one eager assign per variable before its sets go in one
    #: graph call (tracing that call costs about ten eager sets: a fuzzed model gets one set)
    EAGER_WEIGHT_SETS: ClassVar[int] = 2

    def set_weights(self, model: BuiltModel, weights: Weights) -> None:
        """Eager ``Variable.assign`` per variable costs about 0.3 ms of Python each: a
        LeNet-5 weight set 3 ms, three times its forward call, and a weight-level GA swaps
        one per individual.  From a model's third weight set on, Keras' own ``assign``
        runs for every variable inside one traced call."""
        model.check_weights(weights)
        model.weight_sets = getattr(model, "weight_sets", 0) + 1
        if model.weight_sets <= self.EAGER_WEIGHT_SETS:
            model.set_weights(weights)
            return
        names = [n for n in model.order if n in weights]
        values = [np.asarray(a) for n in names for a in weights[n]]
        if len({a.dtype for a in values}) != 1:
            model.set_weights(weights)  # weights of several dtypes (e.g. integer state): one eager assign each
            return
        key = (tuple(names), values[0].dtype.str)
        if key not in model.assign_fns:
            model.assign_fns[key] = self._assign_all(model, names, values[0].dtype)
        model.assign_fns[key](np.concatenate([a.ravel() for a in values]))

    @staticmethod
    def _assign_all(model: BuiltModel, names: list[str], dtype: np.dtype) -> Any:
        """One graph call that assigns every variable of ``names`` from one flat vector
        (one argument: each one costs a conversion at the call), as a concrete function:
        called directly, it skips ``tf.function``'s argument binding (0.3 ms a call)."""
        import tensorflow as tf

        variables = [v for n in names for v in model.layers[n].weights]
        shapes = [tuple(v.shape) for v in variables]
        sizes = [int(np.prod(s)) for s in shapes]

        @tf.function(autograph=False)
        def assign_all(flat: Any) -> None:
            for variable, value, shape in zip(variables, tf.split(flat, sizes), shapes):
                variable.assign(tf.reshape(value, shape))

        return assign_all.get_concrete_function(tf.TensorSpec([sum(sizes)], tf.as_dtype(dtype)))

    def compile_for(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> None:
        """Trace the tf.function for these exact shapes (as the first call would; a later
        batch size retraces as before).  TensorFlow's graph optimization still runs on
        the first call, so it is counted in ``run``."""
        import tensorflow as tf

        xs = self._ordered(model, inputs)
        try:
            sig = [tf.TensorSpec(np.shape(a), tf.as_dtype(np.asarray(a).dtype)) for a in xs]
        except TypeError:  # a dtype TensorFlow cannot name from numpy: the first call traces it
            return
        model.concrete[_signature(xs)] = model.fn.get_concrete_function(sig)

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The call traced by ``tf.function`` as the model is (a graph, Grappler's rewrites,
        TensorFlow's graph kernels): ``tensorflow-eager`` calls it eagerly, ``tensorflow-xla``
        compiles it, both judged against this one."""
        import tensorflow as tf

        return traced_call(fn, args, kwargs, tf.is_tensor, lambda f: tf.function(f, autograph=False))

    def vjp(self, f: Any, wrt: list[Any], cot: Any) -> tuple[list[Any], list[Any]]:
        """``tf.GradientTape`` around the call, ``output_gradients`` the cotangents."""
        import tensorflow as tf

        with tf.GradientTape() as tape:
            tape.watch(wrt)
            outs = _forward(f, wrt)
        pulled = [(o, c) for k, o in enumerate(outs) if (c := cot(k, o)) is not None]
        grads: list[Any] = [None] * len(wrt)
        if pulled and wrt:
            try:
                grads = list(tape.gradient([o for o, _ in pulled], wrt, output_gradients=[c for _, c in pulled]))
            except Exception as exc:
                raise _gradient_failure(exc) from exc
        return outs, [tf.zeros_like(w) if g is None else tf.convert_to_tensor(g) for g, w in zip(grads, wrt)]

    def program_facts(self, model: BuiltModel) -> dict[str, list[str]]:
        """What the graph TensorFlow traced for the model shows of how it computes each layer
        (:func:`audee.backends.tf_graph.graph_facts`: a bias Keras' ``ops.add`` put on the
        wrong axis), read once per model from its first trace; none before a trace."""
        facts = getattr(model, "program", None)
        if facts is None:
            traced = next(iter(getattr(model, "concrete", {}).values()), None)
            if traced is None:
                return {}
            facts = model.program = graph_facts(traced.graph, list(model.order))
        return facts

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The graph function traced for these inputs' signature, called directly: the
        ``tf.function`` front door binds arguments and looks up its trace cache on every
        call, 0.3 ms a call (measured on LeNet-5: 1.04 -> 0.73 ms at batch 1, 4.6 -> 4.2
        ms at batch 14, the same outputs bit for bit)."""
        xs = self._ordered(model, inputs)
        outs = model.concrete.get(_signature(xs), model.fn)(xs)
        return [np.asarray(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]


class TorchBackend(KerasBackend):
    name = "torch"
    keras_backend = "torch"
    framework = "torch"
    framework_dist = "torch"

    def versions(self) -> dict[str, str]:
        import torch

        return {"keras": self.keras.__version__, "torch": torch.__version__}

    def set_precision(self, tf32: bool) -> None:
        import torch

        share = os.environ.get("AUDEE_GPU_MEM_FRACTION")  # this worker's share of the device (pool.worker_env)
        if share and torch.cuda.is_available():  # a CPU-only torch still reports the switches below
            # an index: torch refuses a device without one, and "cuda" is the first visible GPU
            torch.cuda.set_per_process_memory_fraction(float(share), gpu_index(self.device))
        mode = "tf32" if tf32 else "ieee"
        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9: one switch per op family
            torch.backends.cuda.matmul.fp32_precision = mode
            torch.backends.cudnn.conv.fp32_precision = mode
            torch.backends.cudnn.rnn.fp32_precision = mode
        else:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32

    def probe_device(self) -> None:
        import torch

        (torch.ones(1, device=self.device) + 1).cpu()
        torch.cuda.synchronize(gpu_index(self.device))

    def precision_flags(self) -> dict[str, str]:
        import torch

        if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
            return {"matmul": torch.backends.cuda.matmul.fp32_precision,
                    "cudnn.conv": torch.backends.cudnn.conv.fp32_precision,
                    "cudnn.rnn": torch.backends.cudnn.rnn.fp32_precision}
        return {"matmul.allow_tf32": str(torch.backends.cuda.matmul.allow_tf32).lower(),
                "cudnn.allow_tf32": str(torch.backends.cudnn.allow_tf32).lower()}

    def compile(self, built: BuiltModel) -> None:
        import torch

        built.model.eval()
        built.torch_device = torch.device(self.device if self.device.startswith("cuda") else "cpu")

    def set_weights(self, model: BuiltModel, weights: Weights) -> None:
        """Keras' ``assign`` converts and checks every value anew: 0.77 ms for a LeNet-5
        weight set, a seventh of its forward call, once per individual of a weight-level
        GA.  Arrays already in their variable's dtype are copied straight into its
        parameter, as ``assign`` ends up doing; any other set goes through Keras."""
        import torch

        model.check_weights(weights)
        if not all(isinstance(a, np.ndarray) and d is not None and a.dtype == d
                   and d.kind in "biufc"  # not bfloat16: torch.from_numpy refuses it
                   for n, arrs in weights.items() for a, d in zip(arrs, model.dtypes[n])):
            model.set_weights(weights)
            return
        with torch.no_grad():
            for n, arrs in weights.items():
                for v, a in zip(model.layers[n].weights, arrs):
                    v.value.copy_(torch.from_numpy(contiguous(a)))

    def vjp(self, f: Any, wrt: list[Any], cot: Any) -> tuple[list[Any], list[Any]]:
        """``torch.autograd.grad`` of the call's outputs, ``grad_outputs`` the cotangents."""
        import torch

        ws = [w.detach().requires_grad_(True) for w in wrt]
        with torch.enable_grad():
            try:
                outs = f(*ws)
            except Exception as exc:  # noqa: BLE001 - the call alone tells whose failure it is
                _forward(f, [w.detach() for w in ws])  # fails too: the op's (phase run)
                raise _gradient_failure(exc) from exc  # autograd refuses what the call accepts
        pulled = [(o, c) for k, o in enumerate(outs)
                  if torch.is_tensor(o) and o.requires_grad and (c := cot(k, o)) is not None]
        grads: list[Any] = [None] * len(ws)
        if pulled and ws:
            try:
                grads = list(torch.autograd.grad([o for o, _ in pulled], ws, grad_outputs=[c for _, c in pulled],
                                                 allow_unused=True))
            except Exception as exc:
                raise _gradient_failure(exc) from exc
        return ([o.detach() if torch.is_tensor(o) else o for o in outs],
                [torch.zeros_like(w) if g is None else g.detach() for g, w in zip(grads, ws)])

    @contextmanager
    def flushing(self) -> Iterator[None]:
        """``torch.set_flush_denormal``: it sets the CPU's flush-to-zero and denormals-are-zero
        modes of the calling thread only, so the runs inside it compute on that one thread
        (intra-op threads keep their own modes); a CUDA device has no such switch."""
        import torch

        if self.device.startswith("cuda"):
            raise BackendError(Phase.RUN, "torch flushes subnormals on request on the CPU only")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            if not torch.set_flush_denormal(True):
                raise BackendError(Phase.RUN, "this CPU has no flush-to-zero mode torch can set")
            yield
        finally:
            torch.set_flush_denormal(False)
            torch.set_num_threads(threads)

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        import torch

        xs = [torch.from_numpy(np.ascontiguousarray(a)).to(model.torch_device) for a in self._ordered(model, inputs)]
        with torch.no_grad():
            outs = model.model(xs, training=False)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [_torch_to_numpy(o) for o in outs]


def _torch_to_numpy(t: Any) -> np.ndarray:
    """A torch tensor as numpy, bfloat16 included (``Tensor.numpy`` has no bfloat16: its
    bits are reinterpreted as ``ml_dtypes.bfloat16``, the dtype the other backends give)."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


class JaxBackend(KerasBackend):
    """JAX: ``jax.jit`` over ``stateless_call`` (op by op where Keras itself would not jit the
    model: ``BuiltModel.keras_jits``); weights are jit arguments, so swapping them costs a
    host-to-device copy and no retrace."""

    name = "jax"
    keras_backend = "jax"
    framework = "jax"
    framework_dist = "jax"

    def versions(self) -> dict[str, str]:
        import jax
        import jaxlib

        return {"keras": self.keras.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__}

    def set_precision(self, tf32: bool) -> None:
        import jax

        # dot_general and conv_general_dilated without an explicit precision (Keras passes none)
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "highest")

    def probe_device(self) -> None:
        import jax.numpy as jnp

        (jnp.ones(1) + 1).block_until_ready()  # on the default device: the GPU Keras computes on

    def precision_flags(self) -> dict[str, str]:
        import jax

        return {"default_matmul_precision": str(jax.config.jax_default_matmul_precision)}

    def compile(self, built: BuiltModel) -> None:
        import jax

        model = built.model

        def forward(tv: list, ntv: list, xs: list) -> list:
            outs, _ = model.stateless_call(tv, ntv, xs, training=False)
            return outs

        built.fn = jax.jit(forward) if built.keras_jits else forward
        built.compiled = {}  # input signature -> the executable compiled ahead of time for it
        built.tv = [v.value for v in built.trainable_variables]
        built.ntv = [v.value for v in built.non_trainable_variables]

    def native_zeros(self, zeros: np.ndarray) -> Any:
        """A device array: a variable made from numpy converts it with ``jnp.asarray``, a
        compilation per new weight shape (25 to 30 ms of a LeNet-5 variant's build)."""
        import jax

        return jax.device_put(zeros)

    def set_weights(self, model: BuiltModel, weights: Weights) -> None:
        """Weights in their variables' dtypes (what ``Variable.assign`` does on the other
        backends), so the executable compiled for the first weight set fits every later one."""
        import jax
        import jax.numpy as jnp

        model.check_weights(weights)
        names = list(weights)
        arrays = [np.asarray(a) for n in names for a in weights[n]]
        dtypes = [d for n in names for d in model.dtypes[n]]
        # one transfer for the arrays already in their variable's dtype (a GA swaps a set per
        # individual); on the CPU none: the compiled call takes numpy arrays as they are, as
        # fast as device arrays (measured: 0.35 ms a LeNet-5 call either way, bit-identical
        # outputs), and the transfer cost 0.5 ms of Python a weight set
        same = [k for k, (a, d) in enumerate(zip(arrays, dtypes)) if d is not None and a.dtype == d]
        values: list[Any] = [None] * len(arrays)
        puts = [arrays[k] for k in same] if self.device == "cpu" else jax.device_put([arrays[k] for k in same])
        for k, put in zip(same, puts):
            values[k] = put
        for k, (a, d) in enumerate(zip(arrays, dtypes)):
            if values[k] is None:
                values[k] = jnp.asarray(a, dtype=d)
        it = iter(values)
        model.tv, model.ntv = model.flat_variables({n: [next(it) for _ in weights[n]] for n in names})

    def compile_for(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> None:
        if not model.keras_jits:  # run op by op, as Keras runs it: nothing to compile
            return
        xs = self._ordered(model, inputs)
        model.compiled[_signature(xs)] = model.fn.lower(model.tv, model.ntv, xs).compile()

    def contraction_peaks(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> np.ndarray | None:
        """The jitted call's trace evaluated op by op (:func:`audee.backends.jax_trace.contraction_row_peaks`),
        for a model computing in float32 or wider (without ``jax_enable_x64`` a float64 spec
        computes in float32, which holds a float16 overflow's exact magnitude)."""
        from audee.backends.jax_trace import contraction_row_peaks

        xs = self._ordered(model, inputs)
        floats = [np.asarray(v) for v in [*model.tv, *model.ntv, *xs] if np.issubdtype(np.asarray(v).dtype, np.floating)]
        if not model.keras_jits or not xs or any(np.finfo(a.dtype).bits < 32 for a in floats):
            return None
        return contraction_row_peaks(model.fn, (model.tv, model.ntv, xs), len(xs[0]))

    def op_skips(self) -> dict[str, str]:
        """Without ``jax_enable_x64`` JAX makes every 64-bit array a 32-bit one (its documented
        default, "JAX enforces single-precision": the Sharp Bits), so a float64 or int64 call
        would compute in 32 bits by contract, not by a bug."""
        import jax

        _ = self.keras  # JAX configured as the worker configures it
        if jax.config.jax_enable_x64:
            return {}
        why = "computes {} as {} without jax_enable_x64 (JAX's documented default; the jax-x64 backend computes it)"
        return {"float64": why.format("float64", "float32"), "int64": why.format("int64", "int32")}

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The call under ``jax.jit`` as the model is (its tensors the jitted function's
        arguments): judged against ``jax-eager``, which runs it op by op."""
        import jax

        return traced_call(fn, args, kwargs, lambda v: isinstance(v, jax.Array), jax.jit)

    def vjp(self, f: Any, wrt: list[Any], cot: Any) -> tuple[list[Any], list[Any]]:
        """``jax.vjp`` of the call's floating outputs (the call first on its own: its failure
        is the op's, a failure of ``jax.vjp`` the gradient's)."""
        import jax
        import jax.numpy as jnp

        outs = _forward(f, wrt)
        cots = {k: c for k, o in enumerate(outs) if (c := cot(k, o)) is not None}
        grads: list[Any] = [None] * len(wrt)
        if cots and wrt:
            def pulled(*ws: Any) -> tuple[Any, ...]:
                got = f(*ws)
                return tuple(got[k] for k in cots)

            try:
                _, pull = jax.vjp(pulled, *wrt)
                grads = list(pull(tuple(cots.values())))
            except Exception as exc:
                raise _gradient_failure(exc) from exc
        return outs, [jnp.zeros_like(w) if g is None else g for g, w in zip(grads, wrt)]

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        xs = self._ordered(model, inputs)
        outs = model.compiled.get(_signature(xs), model.fn)(model.tv, model.ntv, xs)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [np.asarray(o) for o in outs]


def round_trip_built(model: BuiltModel, keras: Any, weights: Weights) -> None:
    """:meth:`BuiltModel.round_trip`, its failure a ``build`` failure (the rewrite refused)."""
    try:
        model.round_trip(keras, weights)
    except RoundTripError as exc:
        raise BackendError(Phase.BUILD, str(exc), traceback.format_exc()) from exc


def _signature(xs: list[np.ndarray]) -> tuple:
    return tuple((np.shape(a), str(np.asarray(a).dtype)) for a in xs)
