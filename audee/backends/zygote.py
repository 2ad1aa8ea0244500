"""Worker processes forked from a process that has already imported their framework.

Most of a worker's start is its framework's import (TensorFlow and Keras about 6 s of CPU
on a 2-core machine, torch 5 s, JAX 3 s), and a run pays it again at every restart after a
crash, a hang or a broken device, and in every new pool.  A *zygote* is started once per
worker command and environment, when a worker starts a second time (a one-off worker costs
no zygote's memory): it does what a worker does before it serves
(:func:`audee.backends.worker.prepare`: its CPU threads, the backends' ``prepare_process``),
imports the classes' :attr:`~audee.backends.base.Backend.preload_modules`, and then only
forks.  Each fork becomes a worker with its own session, environment, working directory,
temp dir and log; it runs ``prepare`` again and serves only if the environment and the
blocked modules it leaves are the ones the zygote imported under.  A backend that sets other
import-time switches (JAX's x64) answers ``unfit`` and the pool starts it as a new process.

CPU workers only: a device context does not survive a fork; nothing here initialises one
before it, but that is not verified on a GPU.  ``AUDEE_FORK_WORKERS=0`` turns it off.

The zygote is the workers' parent: it reaps them and sends each exit status to the audee
process, whose :class:`ForkedProcess` stands for the worker where a ``subprocess.Popen``
stands for a new one.  It dies with the audee process (as a worker does), its workers die
with it, and it leaves only when its last worker has ended (:meth:`Zygote.retire`).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, OrderedDict
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Iterator, Mapping

log = logging.getLogger(__name__)

#: ``0`` starts every worker as a new process
ENABLE_ENV = "AUDEE_FORK_WORKERS"
#: variables that differ between workers of one zygote without anything reading them at
#: import: the worker's own temp dir, and pytest's name of the running test
NOT_READ_AT_IMPORT = frozenset({"TMPDIR", "PYTEST_CURRENT_TEST"})
#: zygotes an audee process holds at once (each a few hundred MB, mostly shared with its
#: workers); the least recently used one retires first
MAX_ZYGOTES = 4
#: the largest control message (a worker's whole environment)
_MESSAGE_BYTES = 1 << 20


def enabled(device: str) -> bool:
    """Whether a worker on ``device`` is forked from a zygote."""
    return device == "cpu" and os.environ.get(ENABLE_ENV, "1") != "0"


def _send(sock: socket.socket, message: dict, fds: tuple[int, ...] = ()) -> None:
    socket.send_fds(sock, [json.dumps(message).encode()], list(fds))


def _recv(sock: socket.socket) -> tuple[dict | None, list[int]]:
    """One message and the descriptors sent with it; None at the end of the stream."""
    data, fds, _, _ = socket.recv_fds(sock, _MESSAGE_BYTES, 1)
    return (json.loads(data) if data else None), fds


def _snapshot() -> tuple[dict[str, str], list[str]]:
    """What an import reads of the process: its environment, without what differs between
    workers, and the modules set to None (an import that must fail)."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_READ_AT_IMPORT}
    return env, sorted(name for name, module in sys.modules.items() if module is None)


def _same_switches(now: tuple, prepared: tuple, imported: tuple) -> bool:
    """Whether a forked child's own ``prepare`` left what the zygote's left (``prepared``): the
    same environment and the same modules blocked, besides those the zygote's imports set to
    None (inherited, not the child's doing)."""
    by_imports = set(imported[1]) - set(prepared[1])
    return now[0] == prepared[0] and set(now[1]) - by_imports == set(prepared[1])


# ---- the zygote process ------------------------------------------------------------------
def _serve_zygote(ctrl: socket.socket, target: str, device: str, precision: str, guest: str | None) -> None:
    from audee.backends.worker import prepare

    base = _snapshot()
    prepared = base
    unfit = None
    try:
        classes = prepare(target, device, precision, guest)
        prepared = _snapshot()  # the switches its imports read (JAX_ENABLE_X64, modules blocked)
        for cls in [c for c in classes if c is not None]:
            for name in cls.preload_modules:
                __import__(name)
    except BaseException as exc:  # its forks cannot serve: each starts as a new process
        unfit = f"the zygote's preload failed: {type(exc).__name__}: {exc}"
        traceback.print_exc()
    imported = _snapshot()
    print(f"audee zygote: {target} on {device} ({precision}) "
          f"{'ready' if unfit is None else unfit}", file=sys.stderr, flush=True)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    children: set[int] = set()
    retiring = False
    _send(ctrl, {"ready": True})
    while True:
        while children:  # report each ended worker's status to the audee process
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            _send(ctrl, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})
        if retiring and not children:
            return
        ready, _, _ = select.select([ctrl, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
        if ctrl not in ready:
            continue
        msg, fds = _recv(ctrl)
        if msg is None or msg.get("op") == "exit":
            return
        if msg.get("op") == "retire":
            retiring = True
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                ctrl.close()
                os.close(wake_r)
                os.close(wake_w)
                code = _become_worker(msg, fds[0], (base, prepared, imported), unfit)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
        children.add(pid)
        _send(ctrl, {"forked": pid, "serial": msg["serial"]})


def _become_worker(msg: dict, fd: int, states: tuple[tuple, tuple, tuple], unfit: str | None) -> int:
    """In the forked child: take the worker's environment, directory, session and log; run
    :func:`prepare` as a new worker would, from the process as the zygote had it before its own
    ``prepare`` (``states``: the zygote's snapshots before it, after it, and after its imports);
    serve only where it leaves what the zygote imported under, else answer ``unfit`` (the pool
    starts a new process instead).  From the zygote's prepared state, a backend that sets no
    switch would inherit another's (``jax`` forked from ``jax-x64``'s zygote computing in
    float64)."""
    base, prepared, imported = states
    from multiprocessing.connection import Connection

    from audee.backends import wire, worker

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    os.chdir(msg["cwd"])
    env = msg["env"]
    if {k: v for k, v in env.items() if k not in NOT_READ_AT_IMPORT} != base[0]:
        unfit = unfit or "its environment is not the one the zygote imported under"
    own = {name: env[name] for name in NOT_READ_AT_IMPORT if name in env}

    def environ(values: dict[str, str]) -> None:
        os.environ.clear()
        os.environ.update({**values, **own})

    environ(base[0])  # as a new worker starts: before any prepare, its own temp dir
    for name in set(prepared[1]) - set(base[1]):  # unblocked again: its prepare decides
        sys.modules.pop(name, None)
    tempfile.tempdir = None  # the worker's own TMPDIR, not the one an import may have cached
    worker._log_to(msg["log"])
    worker.die_with_parent(os.getppid())  # the zygote, which dies with the audee process
    conn = Connection(fd)
    if unfit is None:
        try:
            classes = worker.prepare(msg["target"], msg["device"], msg["precision"], msg.get("guest"))
        except Exception:  # as a new worker would say it
            classes = None
        if classes is not None and not _same_switches(_snapshot(), prepared, imported):
            unfit = "its backend sets other switches before the import than the zygote's"
        if classes is None:
            unfit = "its backend cannot be prepared here; a new process says why"
    if unfit is None:
        environ(imported[0])  # what the zygote's imports set, as they would have in this process
        for name in imported[1]:
            sys.modules.setdefault(name, None)
    if unfit is not None:
        print(f"audee worker: not forked ({unfit}); a new process takes over", file=sys.stderr, flush=True)
        wire.send(fd, {"unfit": unfit})
        return 0
    print(f"audee worker: forked from zygote pid {os.getppid()}", file=sys.stderr, flush=True)
    try:
        worker.serve(conn, msg["target"], msg["device"], msg["precision"], msg.get("guest"), classes=classes)
    except Exception as exc:
        worker.report_fatal(conn, exc)
        return 3
    return 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="audee worker zygote (started by audee, not by hand)")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--backend", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="full")
    ap.add_argument("--guest", default=None)
    ap.add_argument("--parent-pid", type=int, required=True)
    args = ap.parse_args(argv)
    from audee.backends.worker import die_with_parent

    die_with_parent(args.parent_pid)
    ctrl = socket.socket(fileno=args.fd)
    _serve_zygote(ctrl, args.backend, args.device, args.precision, args.guest)


# ---- the audee process's side ------------------------------------------------------------
@dataclass
class ForkedProcess:
    """A worker forked by a zygote, as the pool uses a ``subprocess.Popen``: its pid once the
    zygote forked it, its exit status as the zygote (its parent) reports it."""

    zygote: "Zygote"
    serial: int
    returncode: int | None = None

    @property
    def pid(self) -> int:
        return self.zygote.pid_of(self.serial)

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.serial, 0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.serial, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"worker forked by zygote pid {self.zygote.proc.pid}", timeout or 0)
        return self.returncode

    def __repr__(self) -> str:
        return f"ForkedProcess({self.describe()}, returncode={self.returncode})"

    def send_signal(self, sig: int) -> None:
        pid = self.zygote.pid_of(self.serial, wait=False)
        if pid == 0 and self.poll() is None:  # the zygote is still importing (or hangs there):
            self.zygote.close()               # it has forked nothing yet, and ends with this
            return
        if pid > 0 and self.poll() is None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL to the worker's whole session (what it started too), as the pool kills a
        new process's."""
        pid = self.zygote.pid_of(self.serial, wait=False)
        if pid > 0 and self.poll() is None:
            try:
                os.killpg(pid, signal.SIGKILL)
                return
            except (ProcessLookupError, PermissionError):
                pass
        self.send_signal(signal.SIGKILL)

    def describe(self) -> str:
        pid = self.zygote.pid_of(self.serial, wait=False)
        return f"pid {pid}" if pid else f"a fork of zygote pid {self.zygote.proc.pid}"


@dataclass(repr=False)
class Zygote:
    """A zygote process and what it has told this process: the pid of each fork, the exit
    status of each worker that ended."""

    proc: subprocess.Popen
    sock: socket.socket
    target: str
    key: tuple = ()   # the command and environment it imported under (Zygotes.key)
    fits: set[str] = field(default_factory=set)     # targets its forks served
    misfits: set[str] = field(default_factory=set)  # targets its forks could not serve
    _serial: int = 0
    _pids: dict[int, int] = field(default_factory=dict)    # fork serial -> pid
    _exits: dict[int, int] = field(default_factory=dict)   # pid -> exit status
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _closed: bool = False
    _ready: bool = False   # its imports are done: a fork of it answers at once

    @classmethod
    def start(cls, python: str, target: str, device: str, precision: str, guest: str | None,
              env: Mapping[str, str], log_path: Path) -> "Zygote":
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        hosted = ["--guest", guest] if guest is not None else []
        with open(log_path, "ab") as logf:
            logf.write(f"\n=== zygote start {time.strftime('%Y-%m-%d %H:%M:%S')} {target} on {device}\n".encode())
            logf.flush()
            proc = subprocess.Popen(
                [python, "-P", "-m", "audee.backends.zygote", "--fd", str(theirs.fileno()), "--backend", target,
                 "--device", device, "--precision", precision, "--parent-pid", str(os.getpid()), *hosted],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                env=dict(env), start_new_session=True)
        theirs.close()
        log.info("zygote for %s on %s: pid %d (log %s)", target, device, proc.pid, log_path)
        return cls(proc, ours, target)

    def alive(self) -> bool:
        return not self._closed and self.proc.poll() is None

    def ready(self) -> bool:
        """Whether its imports are done (a fork for another target is told fit or unfit at once)."""
        with self._lock:
            while not self._ready and self._pump(0):
                pass
            return self._ready

    def fork(self, target: str, device: str, precision: str, guest: str | None, env: Mapping[str, str],
             cwd: str, log_path: Path, child_fd: int) -> ForkedProcess | None:
        """Ask for a worker serving on ``child_fd``; None where the zygote is gone.  It does not
        wait: the zygote forks once its own import is done, and the worker says ``ready``."""
        with self._lock:
            self._serial += 1
            msg = {"op": "fork", "serial": self._serial, "target": target, "device": device, "precision": precision,
                   "guest": guest, "env": dict(env), "cwd": cwd, "log": str(Path(log_path).resolve())}
            try:
                _send(self.sock, msg, (child_fd,))
            except OSError:
                self._closed = True
                return None
            return ForkedProcess(self, self._serial)

    def _pump(self, timeout: float | None) -> bool:
        """Read one message from the zygote within ``timeout``; False when none came."""
        if self._closed:
            return False
        if not wait([self.sock], timeout):
            return False
        try:
            msg, fds = _recv(self.sock)
        except (OSError, ValueError):
            msg, fds = None, []
        for fd in fds:
            os.close(fd)
        if msg is None:
            self._closed = True
            return False
        if msg.get("ready"):
            self._ready = True
        elif "forked" in msg:
            self._pids[int(msg["serial"])] = int(msg["forked"])
        elif "exited" in msg:
            self._exits[int(msg["exited"])] = int(msg["code"])
        return True

    def pid_of(self, serial: int, wait: bool = True) -> int:
        """The pid of fork ``serial`` (0 where the zygote ended before forking it)."""
        with self._lock:
            while self._pump(0):
                pass
            while serial not in self._pids and wait and not self._closed:
                if not self._pump(1.0) and self.proc.poll() is not None:
                    self._closed = True
            return self._pids.get(serial, 0)

    def exit_code(self, serial: int, timeout: float | None) -> int | None:
        """The exit status of fork ``serial`` once it ended (waiting up to ``timeout``; None:
        still running).  A zygote that died took its workers with it (their parent-death
        signal): those count as killed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                while self._pump(0):
                    pass
                pid = self._pids.get(serial)
                if pid is not None and pid in self._exits:
                    return self._exits[pid]
                if self._closed or self.proc.poll() is not None:
                    self._closed = True
                    if pid is None or not os.path.exists(f"/proc/{pid}"):
                        return -signal.SIGKILL
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                if self._closed:
                    time.sleep(min(0.05, left) if left is not None else 0.05)
                else:
                    self._pump(min(0.5, left) if left is not None else 0.5)

    def retire(self) -> None:
        """No more forks: the zygote ends once its last worker has."""
        with self._lock:
            if not self._closed:
                try:
                    _send(self.sock, {"op": "retire"})
                except OSError:
                    self._closed = True

    def close(self) -> None:
        """End the zygote now (its workers end with it)."""
        with self._lock:
            self._closed = True
            try:
                self.sock.close()
            except OSError:
                pass
            if self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=2)  # it exits at the end of its stream
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()


class Zygotes:
    """This process's zygotes, by the worker command and environment they import under: at
    most :data:`MAX_ZYGOTES`, the least recently used retired first (it ends when its last
    worker does).  A command's first worker starts as a new process; a zygote is made when
    it starts again (a restart, another pool), and any ready zygote of the same environment
    is tried first (a plugin of a built-in backend forks from the built-in's)."""

    def __init__(self, size: int = MAX_ZYGOTES, eager: bool = False):
        self.size = size
        self.eager = eager   # a zygote at a command's first start too (:func:`zygote_registry`)
        self._zygotes: OrderedDict[tuple, list[Zygote]] = OrderedDict()
        self._never: set[tuple] = set()   # (key, target): its own zygote could not serve it
        self._starts: Counter[tuple] = Counter()   # (key, target): workers started new so far
        self._lock = threading.Lock()

    @staticmethod
    def key(python: str, device: str, precision: str, guest: str | None, env: Mapping[str, str]) -> tuple:
        return (python, device, precision, guest,
                tuple(sorted((k, v) for k, v in env.items() if k not in NOT_READ_AT_IMPORT)))

    def spawn(self, *, python: str, target: str, device: str, precision: str, guest: str | None,
              env: Mapping[str, str], base_env: Mapping[str, str], cwd: str, log_path: Path,
              child_fd: int) -> ForkedProcess | None:
        """A worker forked for ``target`` (``env``: its environment, ``base_env``: the same
        without what differs between workers); None: start a new process instead."""
        key = self.key(python, device, precision, guest, base_env)
        if (key, target) in self._never:
            return None
        with self._lock:
            zygotes = [z for z in self._zygotes.get(key, []) if z.alive()]
            # another target's zygote only once it is ready: a fork that turns out unfit
            # there is told so at once, not after that zygote's import
            chosen = next((z for z in zygotes if target in z.fits or z.target == target), None) or next(
                (z for z in zygotes if target not in z.misfits and z.ready()), None)
            if chosen is None:
                self._starts[(key, target)] += 1
                if self._starts[(key, target)] == 1 and not self.eager:  # a one-off worker costs no zygote
                    return None
                name = Path(log_path).name   # beside the worker's log, named as it is: worker-<label>.log
                try:
                    chosen = Zygote.start(python, target, device, precision, guest, base_env,
                                          Path(log_path).with_name(f"zygote-{name.removeprefix('worker-')}"))
                    chosen.key = key
                except OSError as exc:
                    log.info("zygote for %s: not started (%s)", target, exc)
                    return None
                zygotes.append(chosen)
            self._zygotes[key] = zygotes
            self._zygotes.move_to_end(key)
            self._trim()
        return chosen.fork(target, device, precision, guest, env, cwd, log_path, child_fd)

    def unfit(self, proc: ForkedProcess, target: str) -> None:
        """A fork of ``proc``'s zygote could not serve ``target``."""
        zygote = proc.zygote
        zygote.misfits.add(target)
        if zygote.target == target:
            self._never.add((zygote.key, target))

    def served(self, proc: ForkedProcess, target: str) -> None:
        proc.zygote.fits.add(target)

    def _trim(self) -> None:
        while sum(len(z) for z in self._zygotes.values()) > self.size:
            key, zygotes = next(iter(self._zygotes.items()))
            zygotes.pop(0).retire()
            if not zygotes:
                del self._zygotes[key]

    def close(self) -> None:
        with self._lock:
            for zygotes in self._zygotes.values():
                for z in zygotes:
                    z.close()
            self._zygotes.clear()


_ZYGOTES: Zygotes | None = None


def zygotes() -> Zygotes:
    """This process's zygotes (made at the first fork; closed at exit)."""
    global _ZYGOTES
    if _ZYGOTES is None:
        import atexit

        _ZYGOTES = Zygotes()
        atexit.register(lambda: _ZYGOTES.close() if _ZYGOTES is not None else None)
    return _ZYGOTES


@contextmanager
def zygote_registry(size: int = MAX_ZYGOTES, eager: bool = False) -> Iterator[Zygotes]:
    """While inside, workers fork from zygotes of a registry of their own, closed on leaving.
    ``eager``: a worker's first start makes its zygote too, for a process that starts
    hundreds of workers on a few frameworks and plugins of them (the test suite), where most
    commands start once and another of the same framework forks from the same zygote;
    ``size``: how many it keeps."""
    global _ZYGOTES
    outer, _ZYGOTES = _ZYGOTES, Zygotes(size, eager=eager)
    try:
        yield _ZYGOTES
    finally:
        inner, _ZYGOTES = _ZYGOTES, outer
        inner.close()


def _forget_in_child() -> None:
    """A process forked from this one (a multiprocessing child) starts its own zygotes: the
    sockets it inherited answer this one."""
    global _ZYGOTES
    _ZYGOTES = None


os.register_at_fork(after_in_child=_forget_in_child)


if __name__ == "__main__":
    main()
