"""onnxruntime in a process of its own, beside a worker that exports graphs for it.

Importing onnxruntime's pybind11 extension makes torch's TorchScript exporter slower in the
same process: the exporter walks each traced graph node by node through torch's bindings
from Python, and those calls cost more once onnxruntime's extension is loaded (ConvLSTM3D
0.84 -> 1.05 CPU-s an export, LSTM 0.156 -> 0.218; ``experiments/bench_ort_import.py``).  The
torch exporters' backends (``torch-onnx``, ``torch-onnx-ts``) therefore never import it:
their sessions are made and run here (:class:`RuntimeProcess`, started by the worker at its
first session, one per worker), graphs and arrays sent over a socket pair with the workers'
own framing (:mod:`audee.backends.wire`).

What a session says stays what it said in the worker: a refusal comes back as an exception
of the same class name and message (the signature reads ``Fail: [ONNXRuntimeError] ...``);
a crash or an exit of this process ends the worker the same way (the same signal, the same
exit code), so the parent records what it recorded when onnxruntime ran inside the worker;
a hang is the worker's hang (the parent kills the worker's process group, this one in it).
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import traceback
from typing import Any

import numpy as np

from audee.backends import wire


# ---- the runtime's side ----------------------------------------------------------------------------
def ort_to_numpy(value: Any) -> np.ndarray:
    """An onnxruntime ``OrtValue`` (on the CPU) as numpy, bfloat16 included (``OrtValue.numpy``
    has no numpy type for it: its bytes are copied and read as ``ml_dtypes.bfloat16``)."""
    if value.data_type() != "tensor(bfloat16)":
        return value.numpy()
    import ctypes

    import ml_dtypes

    shape, size = tuple(value.shape()), value.tensor_size_in_bytes()
    if size == 0:
        return np.zeros(shape, ml_dtypes.bfloat16)
    raw = ctypes.string_at(value.data_ptr(), size)
    return np.frombuffer(raw, dtype=ml_dtypes.bfloat16).reshape(shape).copy()


def numpy_to_ort(array: np.ndarray) -> Any:
    """``array`` as an ``OrtValue``; a bfloat16 one (``ml_dtypes``) by its bits, typed bfloat16."""
    import onnxruntime as ort

    if array.dtype.name == "bfloat16":
        from onnx import TensorProto

        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(array)


def session_options() -> Any:
    """The options every onnxruntime session of a worker is made with: errors only in its
    log, and the worker's CPU threads (``AUDEE_THREADS``) for its intra-op pool."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if os.environ.get("AUDEE_THREADS"):
        opts.intra_op_num_threads = int(os.environ["AUDEE_THREADS"])
        opts.inter_op_num_threads = 1
    return opts


def serve(fd: int) -> None:
    """Answer ``session`` and ``run`` requests (each may name sessions the worker let go)
    until the worker closes the socket."""
    sessions: dict[int, Any] = {}
    while True:
        try:
            msg = wire.recv(fd)
        except (EOFError, OSError):
            return
        for sid in msg.get("drop", ()):  # sessions the worker let go since its last request
            sessions.pop(sid, None)
        try:
            op = msg["op"]
            if op == "session":
                import onnxruntime as ort

                sessions[msg["id"]] = ort.InferenceSession(msg["model"], session_options(), providers=msg["providers"])
                reply: dict[str, Any] = {"ok": True}
            elif op == "run":
                session = sessions[msg["id"]]
                values = session.run_with_ort_values(msg["names"], {k: numpy_to_ort(np.ascontiguousarray(v))
                                                                    for k, v in msg["feed"].items()})
                reply = {"outputs": [ort_to_numpy(v) for v in values]}
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # noqa: BLE001 - the runtime's words go back to the worker as they were
            reply = {"error": type(exc).__name__, "message": str(exc), "traceback": traceback.format_exc()}
        wire.send(fd, reply)


def main() -> None:
    from audee.backends.worker import die_with_parent

    fd, parent = int(sys.argv[1]), int(sys.argv[2])
    die_with_parent(parent)  # gone with its worker; the same memory cap as a worker's
    serve(fd)


# ---- the worker's side -----------------------------------------------------------------------------
def runtime_version() -> str:
    """onnxruntime's version, read without importing it (the reason for this module)."""
    import importlib.metadata as md

    return md.version("onnxruntime")


class RuntimeRefusal(Exception):
    """Base of the exceptions a session's refusal comes back as (named as onnxruntime named it)."""


_CLASSES: dict[str, type] = {}


def _raised(reply: dict) -> Exception:
    """The runtime's exception, as a class of the same name (its message unchanged)."""
    name = str(reply["error"])
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (RuntimeRefusal,), {"__module__": "onnxruntime"})
    exc = cls(reply["message"])
    exc.runtime_traceback = reply.get("traceback", "")  # type: ignore[attr-defined]
    return exc


def _raise_where_raised(exc: Exception) -> None:
    """Raise ``exc`` from a frame named after the innermost frame of the runtime's own
    traceback (its file and line): a traceback taken in the worker then ends where onnxruntime
    raised, as when it ran in the worker, and not in this module (whose frames would make the
    failure look like audee's own: ``triage.signature._audee_raised``)."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', getattr(exc, "runtime_traceback", ""))
    where, line = frames[-1] if frames else ("<onnxruntime>", "1")
    line = min(max(int(line), 1), 100_000)  # a frame's line, bounded: the blank lines that put the raise there
    exec(compile("\n" * (line - 1) + "raise exc", where, "exec"), {"exc": exc})


class RuntimeProcess:
    """The worker's onnxruntime process, started at the first session (see the module)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.fd = -1
        self._ids = 0
        self.dropped: list[int] = []  # sessions let go, dropped with the next request (no I/O in __del__)

    def _start(self) -> None:
        parent_sock, child_sock = socket.socketpair()
        self.proc = subprocess.Popen([sys.executable, "-P", "-m", "audee.backends.ort_process",
                                      str(child_sock.fileno()), str(os.getpid())],
                                     pass_fds=(child_sock.fileno(),), stdin=subprocess.DEVNULL)
        child_sock.close()
        self.fd = parent_sock.detach()

    def request(self, msg: dict) -> dict:
        """``msg``'s answer; the runtime's death ends this worker the same way."""
        if self.proc is None:
            self._start()
        if self.dropped:
            msg, self.dropped = {**msg, "drop": self.dropped}, []
        try:
            wire.send(self.fd, msg)
            reply = wire.recv(self.fd)
        except (EOFError, OSError):
            self._die_as_it_died()
        if "error" in reply:
            _raise_where_raised(_raised(reply))
        return reply

    def close(self) -> None:
        """End the runtime process (a new one starts at the next session)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            os.close(self.fd)
            self.proc, self.fd = None, -1

    def _die_as_it_died(self) -> None:
        """The runtime crashed or exited: so does the worker, with its signal or exit code
        (what the parent records when onnxruntime runs inside the worker)."""
        assert self.proc is not None
        code = self.proc.wait()
        sys.stderr.write(f"audee worker: its onnxruntime process ended ({code})\n")
        sys.stderr.flush()
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code if code > 0 else 1)

    def session(self, model: bytes, providers: list[Any]) -> "RemoteSession":
        self._ids += 1
        self.request({"op": "session", "id": self._ids, "model": model, "providers": providers})
        return RemoteSession(self, self._ids)


class RemoteSession:
    """A session in the worker's onnxruntime process, run with numpy arrays (bfloat16 too)."""

    def __init__(self, runtime: RuntimeProcess, sid: int):
        self.runtime, self.sid = runtime, sid

    def run_arrays(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.runtime.request({"op": "run", "id": self.sid, "names": names, "feed": feed})["outputs"]

    def __del__(self) -> None:
        runtime = getattr(self, "runtime", None)
        if runtime is not None:
            runtime.dropped.append(self.sid)


if __name__ == "__main__":
    main()
