"""The one small interface every backend implements (built-in or plugin).

A backend lives inside its own worker process (``audee.backends.worker``), so it may set
process-wide state such as ``KERAS_BACKEND`` in :meth:`Backend.prepare_process` before any
framework import.  Everything crossing the process boundary is numpy arrays and JSON data.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, ClassVar, Iterator

import numpy as np

from audee.core.bounded import TRACEBACK_LIMIT, clean_text
from audee.cases.spec import ModelSpec, Weights
from audee.records.findings import Phase  # noqa: F401 - where backends name their failures


#: the phases a worker times per test case, in the order a case goes through them
#: (``compile``: tracing / compiling the forward call, an ONNX Runtime session; ``convert``:
#: the ONNX export; ``build``: the Keras model itself, without the other two)
TIMED_PHASES = ("build", "convert", "weights", "compile", "run")


class PhaseClock:
    """Seconds spent per phase during one worker request: the worker times the phases it
    drives (build, weights, run), a backend adds the ones only it can see inside them
    (convert, compile) with :meth:`timed`; time inside a nested phase is not counted twice."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._stack: list[str] = []

    def reset(self) -> dict[str, float]:
        """The phases timed since the last reset (then start afresh)."""
        out, self.seconds = self.seconds, {}
        return out

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t = time.perf_counter()
        self._stack.append(phase)
        try:
            yield
        finally:
            self._stack.pop()
            dt = time.perf_counter() - t
            self.seconds[phase] = self.seconds.get(phase, 0.0) + dt
            if self._stack:  # the enclosing phase does not count this time again
                outer = self._stack[-1]
                self.seconds[outer] = self.seconds.get(outer, 0.0) - dt


class BackendError(Exception):
    """A clean, Python-level failure of a framework, tagged with the phase it happened in."""

    def __init__(self, phase: str, message: str, tb: str = ""):
        super().__init__(clean_text(message))  # a framework's words: valid, bounded text (audee.core.bounded)
        self.phase = phase
        self.tb = clean_text(tb, TRACEBACK_LIMIT)
        #: what the failing program shows of how it computes each layer (``Backend.program_facts``),
        #: where it was made before it failed: a converted graph that a runtime refuses at run
        self.facts: dict[str, list[str]] = {}


class Backend(ABC):
    """Build a spec, take weights, run batches and return every layer's output.

    Subclasses set ``name`` and implement the abstract methods.  ``device`` is ``"cpu"`` or
    ``"cuda[:N]"``; ``precision`` is one of :data:`audee.backends.registry.PRECISIONS`
    (``full``: IEEE float32; ``tf32``: the GPU's reduced-precision matmuls and
    convolutions).  A backend raises plain exceptions; the worker tags them with the phase.
    """

    name: ClassVar[str] = "backend"

    def __init__(self, device: str = "cpu", precision: str = "full"):
        self.device = device
        self.precision = precision
        self.clock = PhaseClock()  # the worker reads it after each request (results rows' ``phases``)

    #: modules a zygote (:mod:`audee.backends.zygote`) imports, after :meth:`prepare_process`,
    #: before it forks this backend's workers: the framework's import is most of a worker's
    #: start.  Only modules whose import starts no thread a fork would lose and touches no device.
    preload_modules: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        """Set process-wide environment before any framework import (called once, first)."""

    def close(self) -> None:
        """Release what the backend holds outside its own objects (a child process): a worker
        process renewed for another pool (``renew``) makes new backend objects."""

    def unusable(self) -> str | None:
        """Why this process can compute nothing more after a failed request, None while it
        can.  A GPU error can stick to the device context (a CUDA device-side assert: every
        later call of the process fails, a build too), and each later case would be blamed
        on the backend.  The worker asks after every failed request; a reason ends the
        process, and the pool starts a fresh one for the next request."""
        return None

    def precision_state(self) -> dict[str, str]:
        """The precision mode and the framework switches that implement it, as the
        framework reports them (``audee backends`` shows this; a plugin may add its own)."""
        return {"mode": self.precision}

    @abstractmethod
    def versions(self) -> dict[str, str]:
        """Framework name -> version, for reports and case files."""

    @abstractmethod
    def build(self, spec: ModelSpec) -> Any:
        """Build (and compile / convert) ``spec``; return an opaque model handle."""

    def shares_build(self, spec: ModelSpec) -> bool:
        """Whether this backend can take ``spec``'s model as built by the Keras backend it
        converts, hosted in its worker (:meth:`share_build`): a bare script builds a Keras
        model once and both runs it and converts it.  None by default."""
        return False

    def share_build(self, built: Any) -> Any:
        """This backend's model handle made from the hosted Keras backend's ``built`` model
        of a spec it shares (:meth:`shares_build`); it must only read that model."""
        raise NotImplementedError(f"{self.name} builds every model itself")

    def program_facts(self, model: Any) -> dict[str, list[str]]:
        """What the program this backend runs for ``model`` shows of how it computes each
        layer (layer name -> :data:`audee.backends.info.PROGRAM_FACTS`): a converter's graph
        tells what the Keras model does not; a backend that runs the model as written has none."""
        return {}

    def declared_outputs(self, model: Any) -> list[tuple[list[int | None], str]] | None:
        """What Keras declares each layer of ``model`` computes, in ``spec.topological_order()``:
        its symbolic output's shape (None: any length) and dtype; None for a backend that runs
        no model Keras built (a converter's graph answers to its reference's program instead)."""
        return None

    def contraction_peaks(self, model: Any, inputs: dict[str, np.ndarray]) -> np.ndarray | None:
        """Per batch row of ``inputs``, the largest magnitude a contraction inside ``model``'s
        formula stores, computed at least in float32 (:mod:`audee.backends.jax_trace`): what
        says a float16 layer's intermediate overflows by the math although its output fits.
        None from a backend that cannot trace its program op by op (the default)."""
        return None

    @abstractmethod
    def weight_shapes(self, model: Any) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
        """Layer name -> [(role, shape)] of its weights, in ``layer.get_weights()`` order;
        the role is the variable's short name ('kernel', 'bias', 'moving_mean', ...)."""

    @abstractmethod
    def set_weights(self, model: Any, weights: Weights) -> None:
        """Swap ``weights`` into a built model without rebuilding it."""

    def round_trip(self, model: Any, weights: Weights) -> None:
        """For a spec with ``roundtrip`` set (the equivalence rules ``roundtrip_*``): put
        ``weights`` into the built Keras model, save and load it that way, and run the
        loaded model from now on.  The round trip failing is a :class:`BackendError` of
        phase ``build`` (the rewrite is refused); a backend that cannot do it at all (no
        Keras model inside) raises NotImplementedError, answered as phase ``weights``: the
        oracle's harness status, no finding."""
        raise NotImplementedError(f"{self.name} cannot round-trip a Keras model")

    def compile_for(self, model: Any, inputs: dict[str, np.ndarray]) -> None:
        """Trace / compile the forward call for these inputs' shapes and dtypes ahead of
        :meth:`run` (called once per new input signature, timed as ``compile``; the
        default does nothing: a backend without ahead-of-time compilation pays it in run)."""

    def prepare(self, model: Any) -> None:
        """Work every run of a built model needs that takes no weights and no inputs (the
        ONNX export), done after the build is answered while the parent waits for the
        other backends (:meth:`audee.backends.worker.WorkerState.work_ahead`).  A failure
        here must fail the model's run again, in its own phase; the default does nothing."""

    @abstractmethod
    def run(self, model: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run one batch; return every layer's output in ``spec.topological_order()``."""

    @contextmanager
    def flushing(self) -> Iterator[None]:
        """Runs inside it flush subnormal values to zero, inputs and results, as TensorFlow's
        and XLA's CPU kernels do by design: the flush probe (:mod:`audee.engine.flush_probe`)
        asks a backend that keeps subnormals whether flushing reproduces a flushing backend's
        values.  Only a backend whose description has ``flush_switch`` is asked; one without
        a switch refuses, as a run that did not flush must never pass for one that did."""
        raise BackendError(Phase.RUN, f"{self.name} has no flush-to-zero switch")
        yield  # pragma: no cover - a generator, for the context manager

    @contextmanager
    def keeping_float64(self) -> Iterator[None]:
        """Builds and runs inside it compute float64 as float64, where the backend as users
        run it narrows some of it to float32 (a model whose spec is ``exact``: what the
        float64 reference reads).  A backend that never narrows keeps this default."""
        yield

    #: a plugin's reference: the backend whose program it compiles or converts (``"tensorflow"``
    #: for a mode of it), judged against it (docs/oracles.md, "Pairs and their references"); a
    #: built-in's is declared in :mod:`audee.backends.info`
    reference: ClassVar[str | None] = None

    #: whether :meth:`train` runs a training step (the Keras backends and their plugins);
    #: a converter or runtime runs inference only and is left out of the training phase
    trains: ClassVar[bool] = False

    def train(self, model: Any, inputs: dict[str, np.ndarray], setup: dict[str, Any],
              *, layers: bool = False, input_grads: bool = False) -> dict[str, Any]:
        """One training step of a built model from the weights :meth:`set_weights` gave it
        (``setup``: :class:`audee.train.setup.TrainSetup` as JSON): the forward pass in
        training mode, the loss, the gradients and ``setup['steps']`` optimizer updates
        (the model's weights change).  Returns ``losses``
        (one per step), ``grads`` (the first step's, layer -> one array per weight, None
        for one not trained), ``weights`` (after the first step), ``output`` (the first
        step's model output), ``targets``, and, asked for, ``input_grads`` (float inputs)
        and ``layers`` (every layer's first-step output).  A failure raises a
        :class:`BackendError` with phase ``train``, ``gradient`` or ``update``.  Only
        backends with :attr:`trains` are asked."""
        raise NotImplementedError(f"{self.name} runs inference only: training not supported")

    #: whether :meth:`run_op` calls ``keras.ops`` functions (the Keras backends and their
    #: plugins, and the converters that convert one call alone: ``litert``, ``onnxruntime``,
    #: ``openvino``, ``torch-onnx``); a backend without it runs models only and is left out of
    #: op-level cases
    runs_ops: ClassVar[bool] = False

    def run_op(self, call: dict[str, Any], tensors: dict[str, np.ndarray]) -> list[tuple[np.ndarray, str]]:
        """Call one ``keras.ops`` function: ``call`` is an op case's plain data
        (:meth:`audee.mutation.oplevel.OpCase.call`: ``op``, ``args``, ``kwargs``, ``dtypes``;
        a tensor is ``{"tensor": name}`` into ``tensors``).  Returns every output (a tuple
        or list of them flattened in order) as (numpy array, Keras dtype name); bfloat16
        comes back as float32 holding its values.  Only the backends with :attr:`runs_ops` do."""
        raise NotImplementedError(f"{self.name} runs models only: keras.ops calls not supported")

    def op_skips(self) -> dict[str, str]:
        """The tensor dtypes whose op calls this backend sits out, each with why: a dtype
        it computes in another by its own documented contract (JAX without
        ``jax_enable_x64``: float64 as float32), where comparing its result with others'
        would only show that contract.  Sent in the worker's hello."""
        return {}

    def symbolic_refusal(self, call: dict[str, Any], tensors: dict[str, np.ndarray]) -> str | None:
        """What Keras's symbolic call of the op raises (its written contract refuses the
        arguments), or None; only the Keras backends know it."""
        return None

    def training_support(self) -> str | None:
        """None when this backend trains, else the line saying why not (a results row's
        ``train.skipped``)."""
        return None if self.trains else f"{self.name}: training not supported (runs inference only)"
