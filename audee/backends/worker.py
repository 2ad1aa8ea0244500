"""The worker process: one backend, one framework, alive across test cases.

Started by :class:`audee.backends.pool.Worker` as ``python -m audee.backends.worker``; it
talks over an inherited socket with pickled dicts.  Built models are cached per spec key
(LRU), and weights are swapped in place when the weights key changes.  Clean Python
exceptions are answered as errors; anything harder (a signal, an abort, a hang) kills the
process and the parent records it.

A converter's worker may also host the Keras backend whose model it converts (``--guest``,
:attr:`audee.backends.info.BackendInfo.hosts`): requests marked ``guest`` go to that
backend's own state, and the converter takes the guest's built model instead of building
the same Keras model again (:meth:`Backend.share_build`), so a pair like NNSmith's (eager
torch against its exported graph) builds each model once, as a bare script would.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from contextlib import nullcontext
from collections import OrderedDict
from multiprocessing.connection import Connection
from typing import Any, ContextManager

import numpy as np

from audee.backends import wire
from audee.backends.base import Backend, BackendError, Phase
from audee.backends.registry import load_class
from audee.cases.case import MEMORY_CAP
from audee.core.bounded import clean_text
from audee.core.errors import AudeeError
from audee.cases.spec import ModelSpec
from audee.core.floats import holds_nonfinite

CACHE_SIZE = 6
KEEP_SIZE = 64  # outputs kept for a later per-layer look (search profiles the best individual)


class _Entry:
    def __init__(self, spec: ModelSpec, model: Any):
        self.spec = spec
        self.model = model
        self.weights_key: str | None = None
        self.order = spec.topological_order()
        self.signatures: set[tuple] = set()  # input shapes/dtypes the forward call is compiled for
        self.compile_errors: dict[tuple, BackendError] = {}  # signature -> its compile's failure, raised again
        self.ran = False  # run or trained once: its variables may no longer hold their built values


def input_signature(inputs: dict[str, np.ndarray]) -> tuple:
    """What a compiled forward call is specialized on: each input's name, shape and dtype."""
    return tuple(sorted((k, tuple(np.shape(v)), str(np.asarray(v).dtype)) for k, v in inputs.items()))


class WorkerState:
    def __init__(self, backend: Backend, sibling: "WorkerState | None" = None):
        self.backend = backend
        self.sibling = sibling  # the guest backend's state, whose built models this one may take
        self.builds = {"built": 0, "shared": 0}  # models this backend built, and took from its guest
        self.cache: OrderedDict[str, _Entry] = OrderedDict()
        self.kept: OrderedDict[str, dict[str, np.ndarray]] = OrderedDict()
        self.ahead: _Entry | None = None  # a model just built: its run's work is done ahead (work_ahead)
        self.last_inputs: dict[str, tuple[tuple[int, ...], str]] = {}  # the last run's inputs: shape, dtype
        self.carried: dict[str, float] = {}  # phases timed ahead, reported with the next answer

    def entry(self, spec_json: dict | None, key: str) -> _Entry:
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        if spec_json is None:
            raise _NeedSpec(key)
        spec = ModelSpec.from_json(spec_json)
        try:
            with self.backend.clock.timed("build"):
                model = self._shared(spec, spec_json, key)
                if model is None:
                    model = self.backend.build(spec)
                    self.builds["built"] += 1
                else:
                    self.builds["shared"] += 1
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Phase.BUILD, _msg(exc), traceback.format_exc()) from exc
        entry = _Entry(spec, model)
        self.cache[key] = entry
        while len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)
        return entry

    def _shared(self, spec: ModelSpec, spec_json: dict, key: str) -> Any:
        """The model made from the guest's build of ``spec`` (None: no guest, or this
        backend builds such a spec itself).  The guest's failure to build is its own: this
        backend then builds alone, so each answers with its own error."""
        if self.sibling is None or not self.backend.shares_build(spec):
            return None
        held = self.sibling.cache.get(key)
        if held is not None and held.ran:  # a model its runs may have changed (a seed state): a build of its own
            return None
        try:
            built = self.sibling.entry(spec_json, key).model
        except Exception:  # noqa: BLE001 - the guest's own failure, met again at its own request
            return None
        return self.backend.share_build(built)

    def handle(self, msg: dict) -> dict:
        """Answer one request; a build or run reply carries ``phases``: the seconds it
        spent per phase (:data:`audee.backends.base.TIMED_PHASES`), the results rows' timings."""
        op = msg["op"]
        self.backend.clock.reset()
        if op == "hello":
            versions = {str(k): str(v) for k, v in self.backend.versions().items()}  # TorchVersion -> str
            precision = {str(k): str(v) for k, v in self.backend.precision_state().items()}
            return {"versions": versions, "precision": precision, "pid": os.getpid(), "executable": sys.executable,
                    "name": type(self.backend).name, "runs_ops": bool(self.backend.runs_ops),
                    # a converter converts a call but differentiates none: left out of the gradient phase
                    "op_grads": bool(self.backend.runs_ops and hasattr(self.backend, "run_op_grad")),
                    "traces": type(self.backend).contraction_peaks is not Backend.contraction_peaks,
                    "op_skips": dict(self.backend.op_skips()) if self.backend.runs_ops else {},
                    "reference": getattr(type(self.backend), "reference", None)}
        if op == "build":
            t = time.perf_counter()
            with self.computing(msg):
                e = self.entry(msg["spec"], msg["key"])
            self.ahead = e if msg.get("ahead", True) else None  # a training step compiles its own call
            return {"shapes": self.backend.weight_shapes(e.model), "build_s": time.perf_counter() - t,
                    "phases": self.backend.clock.reset()}
        if op == "run":
            carried, self.carried = self.carried, {}
            with self.computing(msg):
                reply = self.run(msg)
            reply["phases"] = _added(carried, self.backend.clock.reset())
            return reply
        if op == "train":  # the training phase (audee.train): one training step, see train()
            carried, self.carried = self.carried, {}
            reply = self.train(msg)
            reply["phases"] = _added(carried, self.backend.clock.reset())
            return reply
        if op == "run_op":  # an op-level case: one keras.ops call, see run_op()
            return self.run_op(msg)
        if op == "run_op_grad":  # an op case's gradient phase: the call and its vector-Jacobian product
            return self.run_op_grad(msg)
        if op == "call":  # plugin-specific or maintenance operations
            return {"value": getattr(self, "op_" + msg["name"])(**msg.get("kwargs", {}))}
        raise ValueError(f"unknown op {op!r}")

    def computing(self, msg: dict) -> ContextManager[None]:
        """How a build or run request's model computes: float64 kept as float64 for an
        ``exact`` spec (:meth:`audee.backends.base.Backend.keeping_float64`), as users run
        it otherwise.  A run naming a cached model by key alone reads the cached spec."""
        spec = msg.get("spec")
        if spec is not None:
            exact = bool(spec.get("exact"))
        else:
            cached = self.cache.get(msg.get("key", ""))
            exact = cached is not None and cached.spec.exact
        return self.backend.keeping_float64() if exact else nullcontext()

    def run(self, msg: dict) -> dict:
        try:
            e = self.entry(msg.get("spec"), msg["key"])
        except _NeedSpec:
            return {"need_spec": True}  # evicted: the parent sends the spec again
        if e.weights_key != msg["weights_key"]:
            if msg.get("weights") is None:
                return {"need_weights": True}
            try:
                with self.backend.clock.timed("weights"):
                    if e.spec.roundtrip:  # saved and loaded with its weights in, inside this worker
                        self.backend.round_trip(e.model, msg["weights"])
                    else:
                        self.backend.set_weights(e.model, msg["weights"])
            except BackendError:
                raise  # a backend that knows better (ONNX: a first session refused at convert)
            except Exception as exc:
                raise BackendError(Phase.WEIGHTS, _msg(exc), traceback.format_exc()) from exc
            e.weights_key = msg["weights_key"]
        self.last_inputs = {k: (tuple(np.shape(v)), str(np.asarray(v).dtype)) for k, v in msg["inputs"].items()}
        self.compile_for(e, msg["inputs"])
        t = time.perf_counter()
        e.ran = True
        try:
            with self.backend.clock.timed("run"), (self.backend.flushing() if msg.get("flush") else nullcontext()):
                outs = self.backend.run(e.model, msg["inputs"])
        except BackendError as exc:
            exc.facts = self._facts(e.model)
            raise
        except Exception as exc:
            err = BackendError(Phase.RUN, _msg(exc), traceback.format_exc())
            err.facts = self._facts(e.model)
            raise err from exc
        run_s = time.perf_counter() - t
        if len(outs) != len(e.order):
            raise BackendError(Phase.RUN, f"backend returned {len(outs)} outputs for {len(e.order)} layers")
        spec = e.spec
        if msg.get("keep"):
            self.kept[msg["keep"]] = dict(zip(e.order, outs))
            while len(self.kept) > KEEP_SIZE:
                self.kept.popitem(last=False)
        nonfinite, rows = _nonfinite(e.order, outs)
        reply: dict[str, Any] = {
            "logits": outs[e.order.index(spec.logits_layer)],
            "output": outs[e.order.index(spec.output)],
            "nonfinite": nonfinite,
            "nonfinite_rows": rows,
            "run_s": run_s,
        }
        declared = self.backend.declared_outputs(e.model)
        if declared is not None:  # each layer against Keras' declaration of it (audee.oracle.declared)
            reply["declared"] = _undeclared(e.order, declared, outs)
        facts = self._facts(e.model)
        if facts:  # what a converted program shows of how it computes a layer (onnx_backend.graph_facts)
            reply["facts"] = facts
        want = msg.get("layers")
        if want:
            names = e.order if want is True else [n for n in e.order if n in set(want)]
            reply["layers"] = {n: outs[e.order.index(n)] for n in names}
        return reply

    def _facts(self, model: Any) -> dict[str, list[str]]:
        """The program facts of ``model`` (``Backend.program_facts``), {} where it has none to
        give (a graph never converted): a run's failure keeps them as a run's result does."""
        try:
            return dict(self.backend.program_facts(model) or {})
        except Exception:  # noqa: BLE001 - facts are evidence, never a reason to fail a run
            return {}

    def run_op(self, msg: dict) -> dict:
        """One ``keras.ops`` call (``Backend.run_op``): the op must be a configured one (the
        closed set of ``api_configs/ops/``: a case names data, never code).  Its outputs
        and their Keras dtypes; a failure is phase ``run``."""
        from audee.cases.opcase import callable_names

        call = msg["call"]
        if str(call.get("op")) not in callable_names():
            raise BackendError(Phase.RUN, f"refused: {call.get('op')!r} is not a configured keras.ops function")
        spec = self.backend.symbolic_refusal(call, msg["tensors"])  # Keras's contract, before the call
        t = time.perf_counter()
        try:
            with self.backend.clock.timed("run"), \
                    self.backend.keeping_float64() if call.get("exact") else nullcontext():
                outs = self.backend.run_op(call, msg["tensors"])
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Phase.RUN, _msg(exc), traceback.format_exc()) from exc
        size = sum(int(np.asarray(a).nbytes) for a, _ in outs)
        if size > MAX_OP_OUTPUT_BYTES:  # a huge integer made a huge result: never shipped to the parent
            raise BackendError(Phase.RUN, f"the op's outputs hold {size} bytes, {MEMORY_CAP} "
                                          f"({MAX_OP_OUTPUT_BYTES >> 20} MiB passed back)")
        return {"outputs": [a for a, _ in outs], "dtypes": [d for _, d in outs], "run_s": time.perf_counter() - t,
                "phases": self.backend.clock.reset(), **({"spec_refuses": spec} if spec else {})}

    def run_op_grad(self, msg: dict) -> dict:
        """One configured call and its vector-Jacobian product (``KerasBackend.run_op_grad``,
        the cotangents drawn from ``msg["seed"]``): its outputs, the tensors differentiated
        and their gradients, each with its Keras dtype.  The closed set, Keras's symbolic
        check and the size cap of :meth:`run_op`; a failure of the call is phase ``run``,
        of its differentiation ``gradient``."""
        from audee.cases.opcase import callable_names

        call = msg["call"]
        if str(call.get("op")) not in callable_names():
            raise BackendError(Phase.RUN, f"refused: {call.get('op')!r} is not a configured keras.ops function")
        if not hasattr(self.backend, "run_op_grad"):
            raise BackendError(Phase.GRADIENT, f"{type(self.backend).name}: no vector-Jacobian product of a call")
        spec = self.backend.symbolic_refusal(call, msg["tensors"])
        t = time.perf_counter()
        try:
            with self.backend.clock.timed("run"):
                outs, wrt, grads = self.backend.run_op_grad(call, msg["tensors"], int(msg["seed"]))
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Phase.GRADIENT, _msg(exc), traceback.format_exc()) from exc
        size = sum(int(np.asarray(a).nbytes) for a, _ in [*outs, *grads])
        if size > MAX_OP_OUTPUT_BYTES:
            raise BackendError(Phase.RUN, f"the op's outputs and gradients hold {size} bytes, {MEMORY_CAP} "
                                          f"({MAX_OP_OUTPUT_BYTES >> 20} MiB passed back)")
        return {"outputs": [a for a, _ in outs], "dtypes": [d for _, d in outs], "wrt": list(wrt),
                "grads": [a for a, _ in grads], "grad_dtypes": [d for _, d in grads],
                "run_s": time.perf_counter() - t, "phases": self.backend.clock.reset(),
                **({"spec_refuses": spec} if spec else {})}

    def train(self, msg: dict) -> dict:
        """One training step (``Backend.train``) of the spec ``msg`` carries, from the
        weights it carries (always sent: training changes the model's variables, so the
        entry's weights are marked unknown afterwards and the next run sets its own).  A
        backend that does not train answers ``unsupported`` with its reason, building nothing."""
        why = self.backend.training_support()
        if why is not None:
            return {"unsupported": why}
        e = self.entry(msg["spec"], msg["key"])
        e.weights_key = None
        e.ran = True
        try:
            with self.backend.clock.timed("weights"):
                self.backend.set_weights(e.model, msg["weights"])
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Phase.WEIGHTS, _msg(exc), traceback.format_exc()) from exc
        try:
            with self.backend.clock.timed("run"):
                return self.backend.train(e.model, msg["inputs"], msg["setup"], layers=bool(msg.get("layers")),
                                          input_grads=bool(msg.get("input_grads")))
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(Phase.TRAIN, _msg(exc), traceback.format_exc()) from exc

    def op_training_support(self) -> str | None:
        """None when this worker's backend trains, else why not (``Backend.training_support``)."""
        return self.backend.training_support()

    def compile_for(self, e: _Entry, inputs: dict[str, np.ndarray]) -> None:
        """Compile ``e``'s forward call for a new input signature, once (a failure there is
        the framework refusing to run the model: phase ``run``, as it was before compiling
        was split out of the first call; it is raised again, not compiled again)."""
        sig = input_signature(inputs)
        if sig in e.signatures:
            return
        if sig in e.compile_errors:
            raise e.compile_errors[sig]
        try:
            with self.backend.clock.timed("compile"):
                self.backend.compile_for(e.model, inputs)
        except BackendError as exc:  # a backend that knows the phase (a converter run per signature: convert)
            e.compile_errors[sig] = exc
            raise
        except Exception as exc:
            e.compile_errors[sig] = BackendError(Phase.RUN, _msg(exc), traceback.format_exc())
            raise e.compile_errors[sig] from exc
        e.signatures.add(sig)

    def work_ahead(self) -> None:
        """After a build is answered, the parent waits for the other backends' builds (and
        their runs of the case before): meanwhile this worker does what the coming run of
        the model will need: the ONNX export and the forward call compiled for the inputs
        the last run had (same batch and dtypes; a guess that misses costs one more
        compile at the run).  Failures are kept for the run to meet in its own phase; the
        seconds go into the run's answer."""
        e, self.ahead = self.ahead, None
        if e is None:
            return
        self.backend.clock.reset()
        try:
            with self.backend.keeping_float64() if e.spec.exact else nullcontext():
                self.backend.prepare(e.model)
                guess = self.likely_inputs(e.spec)
                if guess is not None:
                    self.compile_for(e, guess)
        except Exception:  # noqa: BLE001 - kept by the backend or by compile_errors, met again at the run
            pass
        self.carried = _added(self.carried, self.backend.clock.reset())

    def likely_inputs(self, spec: ModelSpec) -> dict[str, np.ndarray] | None:
        """Zero inputs shaped as the last run's were (its batch size; the dtype it gave an
        input of that name and shape, else the spec's), None before any run."""
        if not self.last_inputs:
            return None
        batch = next(iter(self.last_inputs.values()))[0][:1]
        out = {}
        for i in spec.inputs:
            shape = (*batch, *i.shape)
            last = self.last_inputs.get(i.name)
            out[i.name] = np.zeros(shape, last[1] if last is not None and last[0] == shape else i.dtype)
        return out

    def op_run_many(self, spec: dict, key: str, items: list[dict]) -> list[dict]:
        """Several runs of one spec in one request (a weight-level GA generation: one
        weight set and input per individual), each answered as a ``run`` request would
        be, a clean failure as its ``error``; the parent pays one round trip, not one per
        individual.  A worker that dies on an item fails the whole request (the parent
        then runs the items one by one)."""
        out: list[dict] = []
        with self.computing({"spec": spec, "key": key}):  # the precision search's reference lane is exact
            self.entry(spec, key)
            for item in items:
                try:
                    out.append(self.run({**item, "key": key, "spec": None}))
                except BackendError as exc:
                    out.append({"error": {"phase": exc.phase, "message": str(exc), "traceback": exc.tb}})
        return out

    def op_contraction_peaks(self, key: str, inputs: dict) -> np.ndarray | None:
        """A model this worker built and ran (by ``key``): per batch row of ``inputs``, the
        largest magnitude a contraction of its formula stores (``Backend.contraction_peaks``);
        None when it was evicted, or the backend cannot say."""
        e = self.cache.get(key)
        if e is None or not e.ran:
            return None
        with self.computing({"key": key}):
            return self.backend.contraction_peaks(e.model, inputs)

    def op_kept_layers(self, tag: str, rows: list[int]) -> dict[str, np.ndarray] | None:
        """Every layer's output for some rows of a kept run (None if it was evicted)."""
        kept = self.kept.get(tag)
        return None if kept is None else {k: v[rows] for k, v in kept.items()}

    def op_builds(self) -> dict[str, int]:
        """How many models this backend built itself and how many it took from its guest's
        builds (a benchmark's and a test's check that a hosted pair builds each model once)."""
        return dict(self.builds)

    def op_time_forward(self, spec: dict, key: str, inputs: dict, repeats: int) -> list[float]:
        """Seconds per bare compiled forward call of an already-built, weighted model,
        timed inside this process: no IPC, no oracle (the benchmarks' reference)."""
        e = self.entry(spec, key)
        self.compile_for(e, inputs)
        e.ran = True
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            self.backend.run(e.model, inputs)
            times.append(time.perf_counter() - t)
        return times

    def op_import_keras(self, path: str) -> dict:
        from audee.backends.keras_import import import_keras_model

        try:
            spec, weights = import_keras_model(path)
        except AudeeError as exc:  # bad user input: its one-line message goes back as is
            return {"refused": clean_text(str(exc))}
        return {"spec": spec.to_json(), "weights": weights}


class _NeedSpec(Exception):
    """A run named a spec this worker no longer holds and did not send it."""


def _nonfinite(order: list[str], outs: list[np.ndarray]) -> tuple[list[str], dict[str, list[int]]]:
    """Layers with NaN/Inf (topological order) and, per such layer, the batch rows hit:
    a batched population needs to know which individual went non-finite."""
    names, rows = [], {}
    for name, o in zip(order, outs):
        if holds_nonfinite(o):  # bfloat16 too
            names.append(name)
            bad = ~np.isfinite(o.reshape(o.shape[0], -1)).all(axis=1) if o.ndim else np.array([True])
            rows[name] = np.flatnonzero(bad).tolist()
    return names, rows


def _undeclared(order: list[str], declared: list[tuple[list[int | None], str]],
                outs: list[np.ndarray]) -> dict[str, list[list[Any]]]:
    """Each layer whose output differs in shape or dtype from Keras' declaration of it (a
    declared length None takes any), as ``[declared, computed]``, each ``[shape, dtype]``."""
    off: dict[str, list[list[Any]]] = {}
    for name, (shape, dtype), o in zip(order, declared, outs):
        got, got_dtype = [int(d) for d in np.shape(o)], str(np.asarray(o).dtype)
        fits = len(got) == len(shape) and all(d is None or d == g for d, g in zip(shape, got))
        if not fits or got_dtype != dtype:
            off[name] = [[list(shape), dtype], [got, got_dtype]]
    return off


def _msg(exc: BaseException) -> str:
    """An exception as the one message the parent gets: valid, bounded text whatever the
    framework put in it (:func:`audee.core.bounded.clean_text`)."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - an exception whose __str__ itself raises
        text = f"{type(exc).__name__}: <its message could not be read>"
    return clean_text(text)


def limit_threads(n: int) -> None:
    """Cap every framework's CPU thread pools before it is imported."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ[var] = str(n)
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    flags = os.environ.get("XLA_FLAGS", "").split()
    ours = [f"--xla_cpu_multi_thread_eigen={'true' if n > 1 else 'false'}", f"intra_op_parallelism_threads={n}"]
    os.environ["XLA_FLAGS"] = " ".join(flags + [f for f in ours if f not in flags])  # twice: as once (a fork)


def prepare(target: str, device: str, precision: str = "full",
            guest: str | None = None) -> tuple[type[Backend], type[Backend] | None]:
    """What a worker process does before any framework import: cap its CPU threads, load
    its backend classes and let each set the process-wide switches it reads at import
    (:meth:`Backend.prepare_process`).  A zygote does the same before it imports and forks."""
    if os.environ.get("AUDEE_THREADS"):
        limit_threads(int(os.environ["AUDEE_THREADS"]))
    cls = load_class(target)
    cls.prepare_process(device, precision)
    guest_cls = None
    if guest is not None:
        guest_cls = load_class(guest)
        guest_cls.prepare_process(device, precision)
    return cls, guest_cls


def serve(conn: Connection, target: str, device: str, precision: str = "full", guest: str | None = None,
          classes: tuple[type[Backend], type[Backend] | None] | None = None) -> None:
    """Answer requests until told to exit; ``guest``: a second backend's target hosted in
    this process (requests marked ``guest`` are its), whose builds this backend shares.
    ``classes``: what :func:`prepare` returned, where it already ran (a forked worker)."""
    cls, guest_cls = classes if classes is not None else prepare(target, device, precision, guest)

    def fresh() -> tuple[WorkerState, WorkerState | None]:
        """The backends' state as a start leaves it: new backend objects, nothing built or kept."""
        hosted = WorkerState(guest_cls(device, precision)) if guest_cls is not None else None
        return WorkerState(cls(device, precision), hosted), hosted

    state, guest_state = fresh()
    fd = conn.fileno()
    wire.send(fd, {"ready": True})
    while True:
        try:
            msg = wire.recv(fd)
        except (EOFError, OSError):
            return
        if msg.get("op") == "exit":
            return
        if msg.get("op") == "renew":  # a new pool takes this process (IdleWorkers): as if started again
            _log_to(msg["log"])
            for ended in (state, guest_state):
                if ended is not None:
                    ended.backend.close()
            state, guest_state = fresh()
            wire.send(fd, {"ready": True})
            continue
        to = guest_state if msg.get("guest") and guest_state is not None else state
        try:
            reply = to.handle(msg)
        except BackendError as exc:
            reply = {"error": {"phase": exc.phase, "message": str(exc), "traceback": exc.tb or traceback.format_exc(),
                               **({"facts": exc.facts} if exc.facts else {})}}
        except Exception as exc:  # a bug in the request or the backend wrapper
            reply = {"error": {"phase": Phase.BUILD if msg.get("op") == "build" else Phase.RUN,
                               "message": _msg(exc), "traceback": traceback.format_exc()}}
        broken = to.backend.unusable() if _failed(reply) else None
        if broken is not None:  # the parent starts a fresh process for the next request
            reply = {**reply, RESTART: broken}
            print(f"audee worker: ending this process: {broken}", file=sys.stderr, flush=True)
        wire.send(fd, reply)
        if broken is not None:
            return
        to.work_ahead()


#: a reply's key saying the process ends after it (:meth:`Backend.unusable`'s reason)
RESTART = "restart"


def _failed(reply: dict) -> bool:
    """A reply that answers with an error: its own, or one of a batch's items'."""
    if "error" in reply:
        return True
    value = reply.get("value")
    return isinstance(value, list) and any(isinstance(v, dict) and "error" in v for v in value)


def _log_to(path: str) -> None:
    """Send this process's stdout and stderr (the framework's own lines too) to ``path``."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _added(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """Phase seconds of ``a`` and ``b`` summed."""
    return {k: a.get(k, 0.0) + b.get(k, 0.0) for k in {**a, **b}}


PR_SET_PDEATHSIG = 1
WATCH_INTERVAL = 0.5  # seconds between the watchdog's looks at the parent
#: the most an op case's outputs may hold: a call fed a huge integer (bincount, arange, eye)
#: may build gigabytes, which the parent must never receive (it would take the run down)
MAX_OP_OUTPUT_BYTES = 256 << 20
#: the share of the machine's memory one worker may hold before it ends itself (exit
#: MEMORY_EXIT), so that one runaway allocation costs one worker, never the machine or the run
MEMORY_SHARE = 0.5
MEMORY_EXIT = 9


#: an explicit cap in MiB (a SLURM job sets it to fit its --mem share per worker)
MEMORY_ENV = "AUDEE_WORKER_MEMORY_MB"
CGROUP_MAX = "/sys/fs/cgroup/memory.max"   # the job's limit under cgroup v2 (SLURM, containers)


def memory_cap() -> int | None:
    """Bytes of resident memory a worker may hold: ``$AUDEE_WORKER_MEMORY_MB`` MiB, else
    ``MEMORY_SHARE`` of the machine's memory or of the cgroup's limit, the smaller; None
    where neither can be read."""
    if os.environ.get(MEMORY_ENV):
        return int(float(os.environ[MEMORY_ENV]) * (1 << 20))
    sizes = []
    try:
        sizes.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    try:
        with open(CGROUP_MAX) as f:
            sizes.append(int(f.read().strip()))  # "max" (no limit) is no int
    except (OSError, ValueError):
        pass
    return int(min(sizes) * MEMORY_SHARE) if sizes else None


def resident_bytes() -> int:
    """This process's resident memory (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def die_with_parent(parent: int) -> None:
    """A worker never outlives the audee process that started it (killed by SIGKILL, OOM,
    a SLURM cancel): the kernel sends SIGKILL when the parent dies (Linux prctl
    PR_SET_PDEATHSIG), and a watchdog thread exits the process when the parent is gone,
    for systems without prctl.  The main thread may be stuck in a long framework call.
    The same watchdog ends the worker when it holds more than :func:`memory_cap`: the
    machine's OOM killer would pick any process, the run's own included."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog alone
    if os.getppid() != parent:  # it died before the prctl took effect
        os._exit(1)

    cap = memory_cap()

    def watch() -> None:
        while True:
            time.sleep(WATCH_INTERVAL)
            if os.getppid() != parent:
                os._exit(1)
            held = resident_bytes()
            if cap and held > cap:  # a runaway allocation: this worker ends, the run goes on
                sys.stderr.write(f"audee worker: {held >> 20} MiB resident, {MEMORY_CAP} ({cap >> 20} MiB, "
                                 f"{MEMORY_SHARE:.0%} of the machine): exiting\n")
                sys.stderr.flush()
                os._exit(MEMORY_EXIT)

    threading.Thread(target=watch, name="audee-parent-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="audee backend worker (started by audee, not by hand)")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="full")
    ap.add_argument("--guest", default=None, help="a second backend's target hosted in this process")
    ap.add_argument("--parent-pid", type=int, default=None, help="exit when this process is gone")
    args = ap.parse_args(argv)
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    conn = Connection(args.fd)
    try:
        serve(conn, args.backend, args.device, args.precision, args.guest)
    except Exception as exc:
        report_fatal(conn, exc)
        sys.exit(3)


def report_fatal(conn: Connection, exc: Exception) -> None:
    """Tell the parent why this worker cannot serve (its start fails with this line)."""
    # an AudeeError (a plugin class that cannot be loaded) is already the line to show
    fatal = clean_text(str(exc)) if isinstance(exc, AudeeError) else _msg(exc)
    try:
        wire.send(conn.fileno(), {"fatal": fatal, "traceback": traceback.format_exc()})
    except OSError:
        pass


if __name__ == "__main__":
    main()
