"""Parent side of the workers: start, talk to, time out and restart backend processes.

A worker that dies (signal, abort, OOM kill) or does not answer within the request
timeout is recorded as a :class:`WorkerFailure` and restarted on its next request: a
crashing framework never takes the run down.

A converter whose description says it ``hosts`` a Keras backend of the same run (both on
the CPU, same precision and environment: :func:`hosted_pairs`) shares one process with it:
the guest's label is a :class:`GuestWorker`, a view onto its host's process with requests
of its own.  Each request still gets its own answer, so a crash is still the request's
that was computing; the ones after it go again to a fresh process.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from audee.backends import wire, zygote
from audee.backends.info import base_name, describe, note_plugin_reference
from audee.backends.registry import BackendRef, gpu_index
from audee.backends.worker import MEMORY_EXIT, RESTART
from audee.cases.case import MEMORY_CAP
from audee.core.cpus import task_cpus, threads_per_worker
from audee.core.bounded import TRACEBACK_LIMIT, clean_text
from audee.core.errors import BackendUnavailable
from audee.settings import MAX_TIMEOUT_S, TIMEOUT_S
from audee.cases.spec import ModelSpec, Weights

log = logging.getLogger(__name__)


@dataclass
class WorkerFailure:
    """A backend request that produced no normal answer.

    kind: ``error`` (a clean exception in the framework), ``signal`` (killed by a signal,
    e.g. SIGABRT or SIGSEGV), ``exit`` (the process exited), ``timeout`` (no answer in time).
    """

    kind: str
    phase: str
    message: str
    traceback: str = ""
    log_tail: str = ""
    facts: dict[str, list[str]] = field(default_factory=dict)  # the failing program's (BackendError.facts)

    def __post_init__(self) -> None:
        # where a backend's words enter audee: made valid, bounded text once (a lone surrogate
        # or 10 MB here would fail or bloat every hash, row and report downstream)
        self.message = clean_text(self.message)
        self.traceback = clean_text(self.traceback, TRACEBACK_LIMIT)
        self.log_tail = clean_text(self.log_tail, TRACEBACK_LIMIT)

    @property
    def hard(self) -> bool:
        return self.kind != "error"

    @property
    def line(self) -> str:
        """The last line of the message (the exception itself, not its traceback): what a
        one-line error or a table shows; the rest stays in the worker's log."""
        return (self.message.strip().splitlines() or [self.kind])[-1]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "phase": self.phase, "message": self.message,
                "traceback": self.traceback, "log_tail": self.log_tail}


@dataclass
class Worker:
    ref: BackendRef
    log_dir: Path
    timeout: float = TIMEOUT_S
    start_timeout: float = 180.0
    threads: int = 0   # CPU threads the framework may use (0: its own default)
    gpu_fraction: float | None = None   # share of its GPU's memory (None: a CPU worker, no limit set)
    proc: "subprocess.Popen | zygote.ForkedProcess | None" = None
    conn: Connection | None = None
    versions: dict[str, str] = field(default_factory=dict)
    executable: str = ""   # the interpreter the worker runs under, as it reported it
    _refused: str | None = None  # why its environment cannot run it (missing_in_env): no process started
    precision_state: dict[str, str] = field(default_factory=dict)  # the worker's mode and framework switches
    restarts: int = 0
    guest: BackendRef | None = None  # a backend hosted in this worker's process (GuestWorker)
    _sent_weights: dict[str, str] = field(default_factory=dict)
    _sent_specs: set[str] = field(default_factory=set)
    _runs: dict[int, dict] = field(default_factory=dict)  # run tickets -> the run in full
    # requests sent and not yet answered, in the order the worker answers them (ticket -> request)
    _outstanding: "OrderedDict[int, _Request]" = field(default_factory=OrderedDict)
    _answers: dict[int, Any] = field(default_factory=dict)  # answered, not yet taken by result()
    _tickets: int = 0
    _last_ticket: int = 0
    _generation: int = 0   # the worker process requests go to (one more per start)
    _last_answer: float = 0.0
    _started: float = 0.0
    _busy: bool = False   # computing (or importing its framework): stop() kills instead of waiting
    # the process's own TMPDIR: what a framework leaves in its temp dir (torch inductor's
    # torchinductor_<user>, a .keras model's extracted assets) goes with the process
    tmp: Path | None = None
    _key: tuple | None = None   # what its process was started with (IdleWorkers)
    _adopted: bool = False   # its process was taken from IdleWorkers, not started

    def __post_init__(self) -> None:
        _check_timeout(self.timeout, "timeout")
        _check_timeout(self.start_timeout, "start_timeout")

    @property
    def label(self) -> str:
        return self.ref.label

    @property
    def log_path(self) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.label)
        return self.log_dir / f"worker-{safe}.log"

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self, idle: bool = True, fork: bool = True) -> None:
        """Spawn the process; the framework import continues in the background.  ``idle``:
        or take one :func:`keep_idle_workers` kept; ``fork``: or fork it from a zygote that
        imported the framework already (:mod:`audee.backends.zygote`)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = worker_env(self.ref, os.environ, self.threads, self.gpu_fraction)
        python = self.ref.python or sys.executable
        self._refused = missing_in_env(self.ref, env) if self.ref.python else None
        if self._refused is not None:  # nothing to start: wait_ready says so in one line
            log.info("worker %s: %s", self.label, self._refused)
            self.proc = self.conn = None
            self._started = time.monotonic()
            return
        self._drop_tmp()  # a dead process's leftovers
        key = _idle_key(self, env, python)  # before the process's own TMPDIR is set
        base_env = dict(env)
        self._adopted = idle and self._adopt(key)
        if self._adopted:
            return
        parent_sock, child_sock = socket.socketpair()
        for sock in (parent_sock, child_sock):
            _widen(sock)
        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=f"audee-worker-{self.log_path.stem[len('worker-'):]}-"))
            env["TMPDIR"] = str(self.tmp)
        except OSError as exc:  # no usable temp dir: the framework meets the same one and says so
            log.info("worker %s: no temp dir of its own (%s); it shares TMPDIR", self.label, exc)
        logf = open(self.log_path, "ab")
        self._log_start(logf, f" in environment {self.ref.env} ({python})" if self.ref.env else "")
        guest = self.guest.target if self.guest is not None else None
        self.proc = None
        if fork and zygote.enabled(self.ref.device):
            logf.flush()
            try:
                self.proc = zygote.zygotes().spawn(
                    python=python, target=self.ref.target, device=self.ref.device, precision=self.ref.precision,
                    guest=guest, env=env, base_env=base_env, cwd=os.getcwd(), log_path=self.log_path,
                    child_fd=child_sock.fileno())
            except OSError as exc:  # no zygote to fork from: a new process, as without one
                log.warning("worker %s: not forked (%s); starting a new process", self.label, exc)
        if self.proc is None:
            hosted = ["--guest", guest] if guest is not None else []
            self.proc = subprocess.Popen(
                [python, "-P", "-m", "audee.backends.worker", "--fd", str(child_sock.fileno()),
                 "--backend", self.ref.target, "--device", self.ref.device,
                 "--precision", self.ref.precision, "--parent-pid", str(os.getpid()), *hosted],
                pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                env=env, start_new_session=True)
        logf.close()
        log.info("worker %s: started %s on %s, %s (log %s)%s", self.label, self.ref.target, self.ref.device,
                 _describe(self.proc), self.log_path, f"; hosts {self.guest.label}" if self.guest is not None else "")
        child_sock.close()
        self.conn = Connection(parent_sock.detach())
        self._key = key
        self._begin()

    def _log_start(self, logf: Any, how: str) -> None:
        logf.write(f"\n=== start {time.strftime('%Y-%m-%d %H:%M:%S')} {self.ref.target} on {self.ref.device} "
                   f"({self.ref.precision} precision){how}\n".encode())
        logf.flush()

    def _begin(self) -> None:
        """A process (new or taken from :class:`IdleWorkers`) starts answering this worker."""
        self._sent_weights.clear()
        self._sent_specs.clear()
        self._generation += 1
        self._started = time.monotonic()
        self._busy = True

    def _adopt(self, key: tuple) -> bool:
        """Take an idle process started with the same command and environment, if
        :func:`keep_idle_workers` keeps them: it writes to this worker's log from now on and
        drops everything it built (``renew``), then answers ``ready`` and ``hello`` as a new
        one does, without importing its framework again."""
        idle = _IDLE.take(key) if _IDLE is not None else None
        if idle is None:
            return False
        with open(self.log_path, "ab") as logf:
            self._log_start(logf, f": idle pid {idle.proc.pid} taken over")
        try:
            wire.send(idle.conn.fileno(), {"op": "renew", "log": str(self.log_path.resolve())})
        except OSError:
            idle.kill()
            return False
        log.info("worker %s: took over idle pid %d (log %s)", self.label, idle.proc.pid, self.log_path)
        self.proc, self.conn, self.tmp, self._key = idle.proc, idle.conn, idle.tmp, key
        self._begin()
        return True

    def wait_ready(self) -> WorkerFailure | None:
        """Block until the worker imported its framework and answered ``hello``; a kept
        process that fails to (it died while idle) is replaced by a new one."""
        failure = self._wait_ready()
        if failure is not None and self._adopted:
            log.info("worker %s: the idle process taken over failed (%s); starting a new one", self.label, failure.line)
            self.kill()
            self.start(idle=False)
            failure = self._wait_ready()
        return failure

    def _wait_ready(self) -> WorkerFailure | None:
        if self._refused is not None:
            return WorkerFailure("error", "start", self._refused)
        left = self.start_timeout - (time.monotonic() - self._started)
        got = self._recv(max(left, 0.1), phase="start")
        if isinstance(got, WorkerFailure):
            return got
        if "fatal" in got:
            self.kill()
            return WorkerFailure("error", "start", got["fatal"], got.get("traceback", ""), self.log_tail())
        if "unfit" in got:  # a fork that cannot serve this backend: a new process does
            log.info("worker %s: not forked (%s); starting a new process", self.label, got["unfit"])
            if isinstance(self.proc, zygote.ForkedProcess):
                zygote.zygotes().unfit(self.proc, self.ref.target)
            self.kill()
            self.start(idle=False)   # a zygote of its own, or a new process
            return self._wait_ready()
        if isinstance(self.proc, zygote.ForkedProcess):
            zygote.zygotes().served(self.proc, self.ref.target)
        try:  # straight to the fresh process: requests waiting to be sent again go after it
            wire.send(self.conn.fileno(), {"op": "hello"})
        except OSError:
            pass  # the death shows up in _recv
        hello = self._recv(self.start_timeout, phase="start")
        if isinstance(hello, WorkerFailure):
            return hello
        return self._hello(hello)

    def _hello(self, hello: dict) -> WorkerFailure | None:
        """Take what the worker's backend says of itself (its answer to ``hello``)."""
        if "error" in hello:
            return WorkerFailure("error", "start", hello["error"]["message"], hello["error"]["traceback"])
        self.versions = hello["versions"]
        self.executable = str(hello.get("executable") or "")
        self.runs_ops = bool(hello.get("runs_ops", False))  # keras.ops calls (op-level cases)
        self.op_grads = bool(hello.get("op_grads", self.runs_ops))  # and their vector-Jacobian products
        self.traces = bool(hello.get("traces", False))  # reads its formula's intermediates (contraction_peaks)
        self.op_skips = {str(k): str(v) for k, v in dict(hello.get("op_skips") or {}).items()}  # dtype -> why
        note_plugin_reference(self.ref.target, hello.get("reference"))  # a plugin's, as its worker declares it
        self.precision_state = hello.get("precision", {"mode": self.ref.precision})
        log.info("worker %s: ready after %.1f s (%s)", self.label, time.monotonic() - self.started,
                 ", ".join(f"{k} {v}" for k, v in self.versions.items()))
        return None

    @property
    def started(self) -> float:
        """When its process started (monotonic clock)."""
        return self._started

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure(self) -> WorkerFailure | None:
        if self.alive():
            return None
        if self.proc is not None:
            self.restarts += 1
            log.info("worker %s: restarting (restart %d)", self.label, self.restarts)
        self.start()
        return self.wait_ready()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            log.info("worker %s: killing %s", self.label, _describe(self.proc))
            if isinstance(self.proc, zygote.ForkedProcess):
                self.proc.kill()  # its session, as below
            else:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self.proc.kill()
            self.proc.wait()
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self._drop_tmp()

    def _drop_tmp(self) -> None:
        """Remove the process's temp dir once no process uses it."""
        if self.tmp is not None and (self.proc is None or self.proc.poll() is not None):
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def stop(self) -> None:
        """Ask an idle worker to exit (10 s grace), else kill it: a busy one, or any when
        audee is being terminated, is killed at once."""
        from audee.core.signals import terminating

        if (_IDLE is not None and self.alive() and self.conn is not None and not self._busy and not self._outstanding
                and self._key is not None and not terminating()):
            _IDLE.keep(self._key, Worker(self.ref, self.log_dir, proc=self.proc, conn=self.conn, tmp=self.tmp))
            log.info("worker %s: pid %d kept idle for the next pool", self.label, self.proc.pid)
            self.proc = self.conn = self.tmp = None
            return
        if self.alive() and self.conn is not None and not self._busy and not terminating():
            try:
                wire.send(self.conn.fileno(), {"op": "exit"})
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        elif self.alive():  # the log says so: no grace was waited for
            log.info("worker %s: %s, killed without waiting", self.label,
                     "audee is terminating" if terminating() else "busy")
        self.kill()

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - n))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    # ---- requests ----------------------------------------------------------------------------
    def submit(self, msg: dict, *, phase: str = "run", timeout: float | None = None,
               resend: dict | None = None, pickled: wire.Frames | None = None) -> int:
        """Send a request without waiting (so several workers compute at once, and a worker
        may hold the next request while it computes this one); the ticket its answer is
        taken with (:meth:`result`).  ``resend``: the request in full, for a worker
        started again before answering it (a run that left out a spec or weights sent before);
        ``pickled``: ``msg`` already pickled (:func:`pickled`), when several workers get it."""
        self._last_ticket = ticket = self._enqueue(msg, phase, timeout or self.timeout, resend, pickled)
        return ticket

    def _enqueue(self, msg: dict, phase: str, timeout: float, resend: dict | None = None,
                 pickled: wire.Frames | None = None) -> int:
        """Send ``msg`` to the process as a new request (a guest's too); its ticket."""
        if self._outstanding:
            pickled = pickled if pickled is not None else wire.dumps(msg)
            if pickled.nbytes > SAFE_SEND_BYTES:
                self._drain()
        self._tickets += 1
        ticket = self._tickets
        # with requests outstanding the worker may have died computing them: result() finds
        # out which, answers it with the failure and sends the rest (this one too) again
        failure = None if self._outstanding else self.ensure()
        if failure is not None:
            self._answers[ticket] = failure
            return ticket
        self._outstanding[ticket] = _Request(msg if resend is None else resend, phase, timeout)
        self._send(msg, self._outstanding[ticket], pickled)
        return ticket

    def _drain(self) -> None:
        """Read the answers to every request sent (each kept for its own :meth:`result`).
        Before a message larger than a socket buffer: a worker computing an earlier request
        writes its answer while the parent writes the new message, and when both are
        larger than the buffers each side blocks in its write, waiting for the other to
        read (a training step's diagnosis of VGG-16 sent 60 MB of weights to a worker
        answering the next, pipelined case with 120 MB of gradients and weights)."""
        if self._outstanding:
            last = next(reversed(self._outstanding))
            self._answers[last] = self.result(last)

    def _send(self, msg: dict, request: "_Request", pickled: wire.Frames | None = None) -> None:
        request.sent = time.monotonic()
        request.generation = self._generation
        if self.conn is None:
            return  # killed: result() sends it again to a fresh worker
        try:
            self._busy = True
            wire.send(self.conn.fileno(), msg if pickled is None else pickled)  # pickled once for several workers
        except OSError:
            pass  # the death shows up in result()

    def result(self, ticket: int | None = None) -> dict | WorkerFailure:
        """The answer to ``ticket`` (default: the last request sent).  Answers come in the
        order requests were sent; earlier ones read on the way are kept for their own
        ``result``.  A worker that dies answers the request it was computing with the
        failure; the requests sent after it go again, in order, to a fresh worker."""
        ticket = self._last_ticket if ticket is None else ticket
        while ticket not in self._answers:
            if not self._outstanding:
                raise RuntimeError(f"result({ticket}) without submit()")
            head, request = next(iter(self._outstanding.items()))
            if self.conn is None or request.generation != self._generation:
                self._send_again()  # sent to a worker that died before answering it
                continue
            deadline = max(request.sent, self._last_answer) + request.timeout
            got = self._recv(max(deadline - time.monotonic(), 0.0), phase=request.phase)
            del self._outstanding[head]
            self._last_answer = time.monotonic()
            self._answers[head] = got
        self._busy = bool(self._outstanding)
        return self._answers.pop(ticket)

    def _send_again(self) -> None:
        """The requests a dead worker had not answered, to a fresh one, in order."""
        failure = self.ensure()
        for ticket, request in list(self._outstanding.items()):
            if failure is not None:
                del self._outstanding[ticket]
                self._answers[ticket] = failure
            else:
                self._send(request.msg, request)

    def request(self, msg: dict, *, phase: str = "run", timeout: float | None = None) -> dict | WorkerFailure:
        return self.result(self.submit(msg, phase=phase, timeout=timeout))

    def _recv(self, timeout: float, *, phase: str) -> dict | WorkerFailure:
        try:
            ready = self.conn.poll(timeout)
        except OSError:
            ready = True
        if not ready:
            log.info("worker %s: no answer within %.0f s (%s); killing it", self.label, timeout, phase)
            self.kill()
            return WorkerFailure("timeout", phase, f"no answer within {timeout:.0f}s; worker killed",
                                 log_tail=self.log_tail())
        try:
            got = wire.recv(self.conn.fileno())
        except (EOFError, OSError):
            return self._death(phase)
        self._busy = False
        if isinstance(got, dict) and got.get(RESTART):  # it answered, then ended itself (Backend.unusable)
            log.warning("worker %s: %s; a fresh process takes its next request", self.label, str(got.pop(RESTART)))
            self.kill()  # requests sent after this one go again to the fresh process (result)
        return got

    def _death(self, phase: str) -> WorkerFailure:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        tail = self.log_tail()
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
            log.info("worker %s: killed by %s (%s)", self.label, sig, phase)
            return WorkerFailure("signal", phase, f"worker killed by {sig}", log_tail=tail)
        log.info("worker %s: exited with code %s (%s)", self.label, code, phase)
        why = f": {MEMORY_CAP}" if code == MEMORY_EXIT else ""  # the worker's watchdog ended it (worker.py)
        return WorkerFailure("exit", phase, f"worker exited with code {code}{why}", log_tail=tail)

    # ---- test-case helpers -------------------------------------------------------------------
    def submit_run(self, spec: ModelSpec, key: str, weights: Weights, wkey: str,
                   inputs: dict[str, Any], layers: bool | list[str] = False, keep: str | None = None,
                   shared: dict[tuple[bool, bool], wire.Frames] | None = None, flush: bool = False) -> int:
        """Send a run of ``spec``: its spec and weights only when this worker does not hold them.
        ``shared``: the request as pickled for the other workers of this run, by what it
        carries (spec, weights): workers holding the same get the same bytes, pickled once
        (a GA generation's batch, sent to every backend).  ``flush``: run with subnormals
        flushed to zero (``Backend.flushing``)."""
        alive = self.alive()
        send = self._sent_weights.get(key) != wkey or not alive
        msg = {"op": "run", "spec": None if (alive and key in self._sent_specs) else spec.to_json(), "key": key,
               "weights_key": wkey, "weights": weights if send else None, "inputs": inputs, "layers": layers,
               "keep": keep, **({"flush": True} if flush else {})}
        full = {**msg, "spec": spec.to_json(), "weights": weights}
        payload = None
        if shared is not None:
            carries = (msg["spec"] is not None, msg["weights"] is not None)
            payload = shared.get(carries)
            if payload is None:
                payload = shared[carries] = pickled(msg)
        # taken as sent until answered: the next run of this spec, submitted before, sends nothing again
        self._sent_weights[key] = wkey
        self._sent_specs.add(key)
        ticket = self.submit(msg, resend=full, pickled=payload)
        self._runs[ticket] = full
        return ticket

    def result_run(self, ticket: int | None = None) -> dict | WorkerFailure:
        ticket = self._last_ticket if ticket is None else ticket
        full = self._runs.pop(ticket)
        got = self.result(ticket)
        key, wkey = full["key"], full["weights_key"]
        if isinstance(got, dict) and (got.get("need_weights") or got.get("need_spec")):
            # the worker evicted the model (or restarted): send everything again
            got = self.result(self.submit(full))
        if isinstance(got, dict) and "error" not in got:
            self._sent_weights[key] = wkey
            self._sent_specs.add(key)
        elif isinstance(got, WorkerFailure) or "error" in got:
            self._sent_weights.pop(key, None)
            self._sent_specs.discard(key)
        return got


@dataclass
class _Request:
    """A request sent to a worker and not yet answered."""

    msg: dict            # as sent again to a fresh worker (complete)
    phase: str
    timeout: float
    sent: float = 0.0
    generation: int = 0


class GuestWorker:
    """A backend hosted in another backend's worker process (:func:`hosted_pairs`): the
    requests and bookkeeping of its own label (its time limit, what it was sent, its last
    ticket), the process, its socket, its restarts and its log its host's.  Its requests
    carry ``guest``, so the process hands them to the guest backend."""

    def __init__(self, ref: BackendRef, host: Worker, timeout: float = TIMEOUT_S):
        _check_timeout(timeout, "timeout")
        self.ref, self.host, self.timeout = ref, host, timeout
        self.versions: dict[str, str] = {}
        self.executable = ""
        self.precision_state: dict[str, str] = {}
        self._sent_weights: dict[str, str] = {}
        self._sent_specs: set[str] = set()
        self._runs: dict[int, dict] = {}
        self._last_ticket = 0
        self._generation = host._generation

    label = Worker.label
    _hello = Worker._hello
    submit_run = Worker.submit_run
    result_run = Worker.result_run
    request = Worker.request

    @property
    def threads(self) -> int:
        return self.host.threads

    @property
    def started(self) -> float:
        return self.host.started

    @property
    def restarts(self) -> int:
        return self.host.restarts

    @property
    def conn(self) -> Connection | None:
        return self.host.conn

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.host.proc

    @property
    def log_path(self) -> Path:
        return self.host.log_path

    def log_tail(self, n: int = 4000) -> str:
        return self.host.log_tail(n)

    def start(self) -> None:
        """Nothing: the host's process starts it."""

    def wait_ready(self) -> WorkerFailure | None:
        """The guest backend's ``hello``, once its host has answered its own."""
        hello = self.result(self.submit({"op": "hello"}, phase="start", timeout=self.host.start_timeout))
        return hello if isinstance(hello, WorkerFailure) else self._hello(hello)

    def alive(self) -> bool:
        """Whether the host's process is up; a new process holds nothing the guest was sent."""
        if self._generation != self.host._generation:
            self._generation = self.host._generation
            self._sent_weights.clear()
            self._sent_specs.clear()
        return self.host.alive()

    def ensure(self) -> WorkerFailure | None:
        return self.host.ensure()

    def kill(self) -> None:
        self.host.kill()

    def stop(self) -> None:
        """Nothing: the host stops the process."""

    def submit(self, msg: dict, *, phase: str = "run", timeout: float | None = None,
               resend: dict | None = None, pickled: wire.Frames | None = None) -> int:
        """As :meth:`Worker.submit`, the request marked as the guest's (so never the bytes
        pickled for other workers)."""
        self.alive()
        full = None if resend is None else {**resend, "guest": True}
        self._last_ticket = self.host._enqueue({**msg, "guest": True}, phase, timeout or self.timeout, full)
        return self._last_ticket

    def result(self, ticket: int | None = None) -> dict | WorkerFailure:
        return self.host.result(self._last_ticket if ticket is None else ticket)


class IdleWorkers:
    """Worker processes kept between pools, by what they were started with.  A process that
    opens pool after pool (the test suite: each test its own pool on the same frameworks)
    spends most of its time importing frameworks; a kept process is renewed instead (its
    models and state dropped, its output sent to the new log), which a new one would
    compute no differently.  At most ``size`` are kept, the oldest stopped first."""

    def __init__(self, size: int, ignore_env: Iterable[str] = ()):
        self.size = size
        self.ignore_env = frozenset(ignore_env)
        self._idle: OrderedDict[tuple, Worker] = OrderedDict()  # a holder of each kept process
        self._serial = 0

    def keep(self, key: tuple, idle: Worker) -> None:
        self._serial += 1
        self._idle[(key, self._serial)] = idle
        while len(self._idle) > self.size:
            self._idle.popitem(last=False)[1].kill()

    def take(self, key: tuple) -> Worker | None:
        """The newest idle process started as ``key`` that is still alive, else None."""
        for k in reversed([k for k in self._idle if k[0] == key]):
            idle = self._idle.pop(k)
            if idle.alive():
                return idle
            idle.kill()
        return None

    def close(self) -> None:
        while self._idle:
            self._idle.popitem(last=False)[1].kill()


_IDLE: IdleWorkers | None = None


@contextmanager
def keep_idle_workers(size: int = 6, ignore_env: Iterable[str] = ()) -> Iterator[IdleWorkers]:
    """While inside, a stopped worker's process is kept for the next pool that starts the
    same backend with the same command and environment (``ignore_env``: variables that
    change between pools without changing what a worker computes); all are stopped on leaving."""
    global _IDLE
    outer, _IDLE = _IDLE, IdleWorkers(size, ignore_env)
    try:
        yield _IDLE
    finally:
        idle, _IDLE = _IDLE, outer
        idle.close()


@contextmanager
def fresh_workers() -> Iterator[None]:
    """Every worker started inside starts a new process and ends it when stopped: for what
    watches a process's own life (its temp dir, its pid, its restarts)."""
    global _IDLE
    outer, _IDLE = _IDLE, None
    try:
        yield
    finally:
        _IDLE = outer


def _describe(proc: "subprocess.Popen | zygote.ForkedProcess") -> str:
    """The process for a log line (a fork not yet made has no pid)."""
    return proc.describe() if isinstance(proc, zygote.ForkedProcess) else f"pid {proc.pid}"


def _idle_key(worker: "Worker", env: Mapping[str, str], python: str) -> tuple:
    """What a worker process was started with: its command and its environment."""
    ignore = _IDLE.ignore_env if _IDLE is not None else frozenset()
    guest = worker.guest.target if worker.guest is not None else None
    return (python, worker.ref.target, worker.ref.device, worker.ref.precision, guest, os.getcwd(),
            tuple(sorted((k, v) for k, v in env.items() if k not in ignore)))


def hosted_pairs(refs: Iterable[BackendRef]) -> dict[str, str]:
    """Guest label -> host label: each backend whose description ``hosts`` a Keras backend
    (:attr:`audee.backends.info.BackendInfo.hosts`) that runs in the same run, both built-in,
    on the CPU, at the same precision and in the same environment, hosts it (one guest each)."""
    refs = list(refs)
    out: dict[str, str] = {}
    for host in refs:
        info = describe(host.label)
        if not info.builtin or info.hosts is None or host.target != info.target or host.device != "cpu":
            continue
        for guest in refs:
            g = describe(guest.label)
            if (base_name(guest.label) == info.hosts and g.builtin and guest.target == g.target
                    and guest.device == "cpu" and guest.precision == host.precision and guest.env == host.env
                    and guest.python == host.python and guest.label not in out
                    and guest.label not in out.values() and host.label not in out):
                out[guest.label] = host.label
                break
    return out


def worker_processes(refs: Iterable[BackendRef]) -> int:
    """How many processes a pool of ``refs`` computes in: one per backend, but one for a host
    and its guest (:func:`hosted_pairs`), which compute in turn."""
    refs = list(refs)
    return len(refs) - len(hosted_pairs(refs))


def failed_start_line(failed: Mapping[str, WorkerFailure]) -> str:
    """The one message for workers that could not start: each backend with the last line
    of its error (tracebacks stay in the workers' logs)."""
    return "backend worker failed to start (" + "; ".join(f"{k}: {f.line}" for k, f in failed.items()) + ")"


class Pool:
    """All backends of a run, each in its own worker; requests go out to all at once."""

    def __init__(self, refs: list[BackendRef], log_dir: Path, *, timeout: float = TIMEOUT_S,
                 start_timeout: float = 180.0, threads: int | None = None, sets: int = 1,
                 shards_per_gpu: int = 1, cpus: int | None = None, reference: list[BackendRef] = (),
                 share: bool = True):
        """``threads`` per worker defaults to the task's CPUs (:func:`audee.core.cpus.task_cpus`:
        affinity, SLURM_CPUS_PER_TASK, cgroup quota; or ``cpus``) shared out among every
        worker computing at once: these backends times ``sets`` (pools running side by side
        in this task, e.g. a shard's parallel units), since frameworks that each spin a
        thread per core slow each other down (measured: 2x at batch 32 on 2 cores).  A GPU
        worker's memory share: :func:`gpu_fractions` (``sets`` and ``shards_per_gpu``
        other pools of this shape on the same device).  ``reference``: workers started
        beside the run's that no case runs on, only the float64 reference
        (:func:`audee.reference.run.reference_refs`): a backend the run does not test.
        ``share``: a converter hosts the Keras backend it converts in its own process where
        it can (:func:`hosted_pairs`); the threads per worker are counted as if each had its
        own process, so what each computes stays the same."""
        _check_timeout(timeout, "timeout")
        _check_timeout(start_timeout, "start_timeout")
        every = list(refs) + [r for r in reference if r.label not in {x.label for x in refs}]
        if threads is None:
            threads = threads_per_worker(task_cpus() if cpus is None else cpus, len(every) * max(1, sets))
        fractions = gpu_fractions(every, sets * shards_per_gpu)
        self.workers: dict[str, Worker | GuestWorker] = {
            r.label: Worker(r, Path(log_dir), timeout, start_timeout, threads, fractions[r.label]) for r in every}
        self.hosted = hosted_pairs(every) if share else {}
        for guest, host in self.hosted.items():
            worker = self.workers[host]
            assert isinstance(worker, Worker)
            worker.guest = self.workers[guest].ref
            self.workers[guest] = GuestWorker(self.workers[guest].ref, worker, timeout)
        self._run_labels = [r.label for r in refs]

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def labels(self) -> list[str]:
        """The run's backends, those every case runs on (not the reference's own workers)."""
        return list(self._run_labels)

    @property
    def refs(self) -> list[BackendRef]:
        """The run's backends as named (what a case file records it ran on)."""
        return [self.workers[label].ref for label in self._run_labels]

    @property
    def processes(self) -> dict[str, Worker]:
        """Label -> worker of each process the pool runs (a guest's requests go to its host's):
        what a benchmark reads CPU seconds from, each process once."""
        return {label: w for label, w in self.workers.items() if isinstance(w, Worker)}

    @property
    def precisions(self) -> dict[str, str]:
        """Each backend's precision mode (what the oracles judge its pairs with)."""
        return {label: w.ref.precision for label, w in self.workers.items()}

    def start(self) -> dict[str, WorkerFailure]:
        """Start every worker in parallel; return the ones that could not start (a guest
        whose host could not: the host's failure)."""
        for w in self.workers.values():
            w.start()
        failed = {}
        hosts_first = sorted(self.workers.items(), key=lambda kv: isinstance(kv[1], GuestWorker))
        for label, w in hosts_first:
            host = self.hosted.get(label)
            f = failed[host] if host in failed else w.wait_ready()
            if f is not None:  # the log file's record; the console gets the caller's one line (start_or_fail)
                log.info("worker %s could not start: %s", label, f.line)
                failed[label] = f
        return failed

    def close(self) -> None:
        for w in self.workers.values():
            w.stop()

    def start_or_fail(self, *, logs: Path | None = None, source: str | None = None,
                      field: str | None = None) -> "Pool":
        """Start every worker, or stop them all and raise :class:`BackendUnavailable`:
        every command (fuzz, campaign, reproduce, localize, repro, a ``.keras`` import)
        fails a start here, with one line (:func:`failed_start_line`, ``logs`` named for
        the tracebacks) and one exit code (``ExitCode.BACKEND_UNAVAILABLE``, 4): nothing is
        fuzzed or judged on backends that are not there."""
        try:
            failed = self.start()
        except BaseException:  # stopped while starting (a slot's SIGTERM): no process, no temp dir left behind
            self.close()
            raise
        if failed:
            self.close()
            raise BackendUnavailable(failed_start_line(failed) + (f"; see {logs}" if logs is not None else ""),
                                     source=source, field=field)
        return self

    def set_timeout(self, seconds: float) -> None:
        """Per-request limit for every worker (a shared pool serves units with their own)."""
        _check_timeout(seconds, "timeout")
        for w in self.workers.values():
            w.timeout = seconds

    def versions(self) -> dict[str, dict[str, str]]:
        return {label: w.versions for label, w in self.workers.items()}

    def build(self, spec: ModelSpec, labels: list[str] | None = None, *,
              ahead: bool = True) -> dict[str, dict | WorkerFailure]:
        """``spec`` built on ``labels`` (default: every backend); ``ahead=False``: no forward
        call compiled ahead of the first run (a training step compiles its own)."""
        key = spec.key()
        labels = labels or self.labels
        msg = {"op": "build", "spec": spec.to_json(), "key": key, **({} if ahead else {"ahead": False})}
        for label in labels:
            self.workers[label].submit(msg, phase="build")
        out = {label: _as_failure(self.workers[label].result(), "build") for label in labels}
        for label, got in out.items():
            if isinstance(got, dict):
                self.workers[label]._sent_specs.add(key)
        return out

    def run(self, spec: ModelSpec, weights: Weights, wkey: str, inputs: dict[str, Any],
            labels: list[str] | None = None, layers: bool | list[str] = False,
            keep: str | None = None, flush: bool = False) -> dict[str, dict | WorkerFailure]:
        """Run one batch on several backends at once.  ``keep`` tags the run so its layer
        outputs can be fetched later with ``call(label, 'kept_layers', tag=..., rows=...)``;
        ``flush``: with subnormals flushed to zero (``Backend.flushing``)."""
        return self.collect_run(self.submit_run(spec, weights, wkey, inputs, labels, layers, keep, flush))

    def submit_run(self, spec: ModelSpec, weights: Weights, wkey: str, inputs: dict[str, Any],
                   labels: list[str] | None = None, layers: bool | list[str] = False,
                   keep: str | None = None, flush: bool = False) -> dict[str, int]:
        """:meth:`run` without waiting: each backend's ticket for :meth:`collect_run`.  Other
        requests may go out meanwhile (the next test case's builds): each worker answers in
        order, and each answer reaches the request it belongs to."""
        key = spec.key()
        shared: dict[tuple[bool, bool], wire.Frames] = {}
        return {label: self.workers[label].submit_run(spec, key, weights, wkey, inputs, layers, keep, shared, flush)
                for label in labels or self.labels}

    def collect_run(self, tickets: dict[str, int]) -> dict[str, dict | WorkerFailure]:
        return {label: _as_failure(self.workers[label].result_run(t), "run") for label, t in tickets.items()}

    @property
    def op_labels(self) -> list[str]:
        """The backends that call ``keras.ops`` functions (``Backend.runs_ops``), as started."""
        return [label for label in self.labels if getattr(self.workers[label], "runs_ops", False)]

    @property
    def trace_labels(self) -> list[str]:
        """The backends that evaluate a model's formula op by op (``Backend.contraction_peaks``: JAX)."""
        return [label for label in self.labels if getattr(self.workers[label], "traces", False)]

    @property
    def op_grad_labels(self) -> list[str]:
        """The backends that differentiate a ``keras.ops`` call (the op level's gradient
        phase): the Keras backends; a converter converts a call's forward pass only."""
        return [label for label in self.op_labels if getattr(self.workers[label], "op_grads", True)]

    def submit_op(self, call: dict[str, Any], tensors: dict[str, Any], labels: list[str] | None = None) -> dict[str, int]:
        """Send one ``keras.ops`` call (an op-level case) to every backend that
        runs ops (or ``labels``) without waiting: each backend's ticket for
        :meth:`collect_op`.  No build, no weights."""
        msg = {"op": "run_op", "call": call, "tensors": tensors}
        shared = pickled(msg)
        return {label: self.workers[label].submit(msg, pickled=shared) for label in labels or self.op_labels}

    def submit_op_grad(self, call: dict[str, Any], tensors: dict[str, Any], seed: int,
                       labels: list[str] | None = None) -> dict[str, int]:
        """As :meth:`submit_op`, the call's vector-Jacobian product too (its cotangents drawn
        from ``seed``, :func:`audee.cases.opcase.cotangent`), on the backends that
        differentiate a call (:attr:`op_grad_labels`); answers taken by :meth:`collect_op`."""
        msg = {"op": "run_op_grad", "call": call, "tensors": tensors, "seed": int(seed)}
        shared = pickled(msg)
        return {label: self.workers[label].submit(msg, pickled=shared) for label in labels or self.op_grad_labels}

    def collect_op(self, tickets: dict[str, int]) -> dict[str, dict | WorkerFailure]:
        return {label: _as_failure(self.workers[label].result(t), "run") for label, t in tickets.items()}

    def as_answered(self, labels: Iterable[str]) -> Iterator[str]:
        """``labels`` (workers each waiting on a request of the caller's), each once, in the
        order their workers answer: the caller takes each answer (``result``,
        ``result_run``) and can use it while the others still compute.  A dead worker comes
        at once (its ``result`` says so); when none answers within the time limit, the
        first comes, and its ``result`` enforces its own deadline."""
        pending = list(labels)
        while len(pending) > 1:
            conns: dict[Any, list[str]] = {}  # a host and its guest share one (its answers come in order)
            for label in pending:
                conns.setdefault(self.workers[label].conn, []).append(label)
            if None in conns:
                label = conns[None][0]
            else:
                ready = wait(list(conns), timeout=max(self.workers[label].timeout for label in pending))
                label = conns[ready[0]][0] if ready else pending[0]
            pending.remove(label)
            yield label
        yield from pending

    def call_many(self, labels: list[str], name: str, **kwargs: Any) -> dict[str, Any]:
        """The same worker operation on several backends at once."""
        for label in labels:
            self.workers[label].submit({"op": "call", "name": name, "kwargs": kwargs})
        out = {}
        for label in labels:
            got = _as_failure(self.workers[label].result(), "run")
            if isinstance(got, WorkerFailure):
                raise RuntimeError(f"{label}: {got.message}\n{got.traceback}")
            out[label] = got["value"]
        return out

    def call(self, label: str, name: str, **kwargs: Any) -> Any:
        got = self.workers[label].request({"op": "call", "name": name, "kwargs": kwargs})
        got = _as_failure(got, "run")
        if isinstance(got, WorkerFailure):
            raise RuntimeError(f"{label}: {got.message}\n{got.traceback}")
        return got["value"]


def pickled(msg: dict) -> wire.Frames:
    """``msg`` as it is sent (:func:`audee.backends.wire.dumps`): a request several
    workers get (a GA generation's weight sets, megabytes) is pickled once."""
    return wire.dumps(msg)


#: each socket's send buffer: a request or answer of a few megabytes (a weight-level GA
#: generation's weight sets) is written in one go instead of waiting, 200 KB at a time,
#: for the worker to read it: the four sends of a LeNet-5 generation went from 17 to 7 ms
#: (the kernel caps the size at net.core.wmem_max without a word)
SOCKET_BUFFER = 4 << 20
#: a request this small is written into the socket's buffer whatever the worker is doing (the
#: kernel's default buffer, where wmem_max caps SOCKET_BUFFER, holds 208 KB); a larger one waits
#: for the worker's outstanding answers first (:meth:`Worker._drain`)
SAFE_SEND_BYTES = 128 << 10


def _widen(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
    except OSError:
        pass  # the default buffer works, only slower


def _check_timeout(seconds: float, name: str) -> None:
    """A limit of 0 (or less) would count every request as hung, one beyond
    ``MAX_TIMEOUT_S`` (or NaN) cannot be waited for: refuse both."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"{name} must be a positive number of seconds, at most {MAX_TIMEOUT_S:g}, got {seconds!r}")


def _as_failure(reply: dict | WorkerFailure, phase: str) -> dict | WorkerFailure:
    if isinstance(reply, dict) and "error" in reply:
        e = reply["error"]
        facts = e.get("facts") if isinstance(e.get("facts"), dict) else {}
        return WorkerFailure("error", e.get("phase", phase), e["message"], e.get("traceback", ""), facts=facts)
    return reply


GPU_MEM_FRACTION = "AUDEE_GPU_MEM_FRACTION"   # set by the user: every GPU worker's share, as given


def gpu_fractions(refs: list[BackendRef], copies: int = 1) -> dict[str, float | None]:
    """Each backend's share of its GPU's memory (None on a CPU): 1 / (GPU workers on that
    device on this node), counting this pool's workers on the device times ``copies`` (pools
    of this shape running at once on the node: a shard's parallel units times the shards
    sharing the GPU).  Frameworks otherwise take what they like (JAX preallocates 75% of
    the device, TensorFlow all of it), and the second worker on the device fails to start."""
    per_device: dict[int, int] = {}
    for r in refs:
        gpu = gpu_index(r.device)
        if gpu is not None:
            per_device[gpu] = per_device.get(gpu, 0) + 1
    out: dict[str, float | None] = {}
    for r in refs:
        gpu = gpu_index(r.device)
        out[r.label] = None if gpu is None else 1.0 / (per_device[gpu] * max(1, copies))
    return out


def worker_env(ref: BackendRef, base: Mapping[str, str], threads: int = 0,
               gpu_fraction: float | None = None) -> dict[str, str]:
    """The environment a worker starts with: ``base`` plus its PYTHONPATH, its CPU threads
    (``AUDEE_THREADS``, read by the worker before any framework import) and, on a GPU, the
    memory limits that keep several workers within one device: JAX no preallocation and
    ``XLA_PYTHON_CLIENT_MEM_FRACTION``, TensorFlow ``TF_FORCE_GPU_ALLOW_GROWTH``, torch
    ``AUDEE_GPU_MEM_FRACTION`` (the worker passes it to
    ``torch.cuda.set_per_process_memory_fraction``).  A fraction the user set in
    ``AUDEE_GPU_MEM_FRACTION`` is kept as given."""
    env = dict(base)
    env["PYTHONPATH"] = worker_pythonpath(ref.target, env.get("PYTHONPATH", ""), other_env=ref.python is not None)
    env.setdefault("PYTHONUNBUFFERED", "1")
    if threads > 0:
        env["AUDEE_THREADS"] = str(threads)
    if gpu_fraction is not None:
        share = env.get(GPU_MEM_FRACTION) or f"{gpu_fraction:.4f}"
        env[GPU_MEM_FRACTION] = share
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = share
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    return env


def worker_pythonpath(target: str, current: str, other_env: bool = False) -> str:
    """PYTHONPATH for a worker (started with ``python -P``: no script or current directory
    in front of ``sys.path``, so a module in the current directory cannot shadow anything).
    The current directory is added, after the existing entries, only for a plugin target
    the user named (built-ins never need it); the directory audee itself was imported
    from is added when it is on this process's path (a source checkout run in place), and
    first for a worker in another environment (``other_env``): audee runs there from this
    checkout, without being installed, and never as another copy installed there."""
    from audee.backends.registry import BUILTIN

    parts = [p for p in current.split(os.pathsep) if p]
    import audee

    root = str(Path(audee.__file__).resolve().parent.parent)
    here = {str(Path(p or os.getcwd()).resolve()) for p in sys.path}
    if other_env:
        parts = [root] + [p for p in parts if p != root]
    elif root in here and root not in parts:
        parts.append(root)
    if target not in BUILTIN.values() and os.getcwd() not in parts:
        parts.append(os.getcwd())
    return os.pathsep.join(parts)


#: the packages audee's worker imports beside its framework (``audee.backends.worker`` and
#: what it imports: ``tests/test_envs.py`` holds this list to the modules it loads)
WORKER_NEEDS = ("numpy", "pydantic", "yaml")
#: the oldest Python audee runs on (setup.cfg's python_requires)
MIN_PYTHON = (3, 11)
#: what the probe of another environment runs (``python -P -c``): the modules of its
#: arguments it cannot find, and its Python version, as one JSON line
_PROBE = ("import importlib.util, json, sys\n"
          "missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\n"
          "print(json.dumps({'missing': missing, 'python': list(sys.version_info[:2])}))")
_PROBED: dict[tuple[str, tuple[str, ...]], str | None] = {}


def env_needs(ref: BackendRef) -> tuple[str, ...]:
    """The modules a worker of ``ref`` needs in its environment: audee's (:data:`WORKER_NEEDS`),
    Keras, and the packages its description names (a plugin: audee's and Keras)."""
    from audee.backends.info import describe

    return tuple(dict.fromkeys((*WORKER_NEEDS, "keras", *describe(ref.label).modules)))


def missing_in_env(ref: BackendRef, env: Mapping[str, str]) -> str | None:
    """Why ``ref``'s environment cannot run its worker, in one line (it lacks a package audee
    or the backend imports, its Python is older than audee's, its interpreter does not run),
    or None.  Probed once per interpreter and package list (``env``: the worker's environment
    variables, PYTHONPATH included: audee comes from this checkout)."""
    needs = env_needs(ref)
    key = (str(ref.python), needs)
    if key not in _PROBED:
        _PROBED[key] = _probe(str(ref.python), ref.env or "?", needs, env)
    return _PROBED[key]


def _probe(python: str, name: str, needs: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    import json

    where = f"environment {name!r} ({python})"
    try:
        got = subprocess.run([python, "-P", "-c", _PROBE, *needs], env=dict(env), capture_output=True,
                             timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{where} does not run: {exc}"
    try:
        answer = json.loads(got.stdout.decode(errors="replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = clean_text(got.stderr.decode(errors="replace")).strip().splitlines()
        return f"{where} does not run Python's probe (exit {got.returncode}): {tail[-1] if tail else 'no output'}"
    if tuple(answer.get("python", ())) < MIN_PYTHON:
        have = ".".join(str(v) for v in answer.get("python", ()))
        return f"{where} runs Python {have}; audee's worker needs {'.'.join(map(str, MIN_PYTHON))} or later"
    missing = [str(m) for m in answer.get("missing", [])]
    if missing:
        return f"{where} lacks {', '.join(missing)}: install them there (audee itself comes from this checkout)"
    return None
