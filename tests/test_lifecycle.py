"""Backend workers never outlive audee, and every way audee ends cleans up: a parent killed
by SIGKILL or SIGTERM takes its (busy) workers with it; SIGTERM to a command unwinds it
like Ctrl-C (temp dirs removed, workers killed, exit 143); timeouts must be positive."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
HANG = "tests.plugins:HangingBackend"


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie no one reaps has still exited


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _workers(marker: str, zygotes: bool = False) -> list[int]:
    """Worker processes whose environment at start carries ``marker`` (each test's own
    TMPDIR): started as ``audee.backends.worker``, or forked by a zygote (whose command line
    and start environment they keep); ``zygotes``: the zygotes themselves."""
    procs = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
            env = (d / "environ").read_bytes()
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if marker.encode() in env and not _gone(int(d.name)):
            procs[int(d.name)] = (cmd, ppid)
    forked = {pid for pid, (cmd, _) in procs.items() if b"audee.backends.zygote" in cmd}  # zygotes, their forks
    zygote = {pid for pid in forked if procs[pid][1] not in forked}
    if zygotes:
        return sorted(zygote)
    return sorted(pid for pid, (cmd, _) in procs.items() if b"audee.backends.worker" in cmd or pid in forked - zygote)


def _wait_for(pred, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


PARENT = """
import sys
from pathlib import Path
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.engine.execute import Executor
from tests.helpers import tiny_cnn, tiny_inputs

with Pool(parse_backends(sys.argv[2]), Path(sys.argv[1]), timeout=600) as pool:
    assert pool.start() == {}
    (worker,) = pool.workers.values()
    ex = Executor(pool)
    case = TestCase("t", tiny_cnn(), {}, tiny_inputs(2))
    ex.complete_weights(case, 0)
    print(worker.proc.pid, flush=True)
    ex.run(case)  # hangs in the backend's run
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_busy_worker_dies_with_its_parent(tmp_path, sig):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), HANG], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    try:
        pid = int(parent.stdout.readline())
        log = next(tmp_path.glob("worker-*.log"))
        _wait_for(lambda: "hanging: run started" in log.read_text(), 120, "the worker to hang in run()")
        assert not _gone(pid)
        parent.send_signal(sig)
        parent.wait(timeout=30)
        assert _wait_gone(pid, 5), f"worker {pid} outlived its parent (killed by {sig.name})"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


WATCHED = """
import ctypes, sys
import audee.backends.worker as worker

def no_prctl(*args, **kwargs):
    raise OSError("no prctl here")

ctypes.CDLL = no_prctl          # as on a system without PR_SET_PDEATHSIG: the watchdog alone
worker.WATCH_INTERVAL = 0.1
worker.die_with_parent(int(sys.argv[1]))
print("watching", flush=True)
while True:                      # the main thread busy in a long computation
    pass
"""

MIDDLE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "watching"
print(child.pid, flush=True)
time.sleep(600)
"""


def test_the_watchdog_ends_a_worker_whose_parent_is_gone(tmp_path):
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, WATCHED], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        pid = int(middle.stdout.readline())
        assert not _gone(pid)
        middle.kill()
        middle.wait()
        assert _wait_gone(pid, 5)
    finally:
        if middle.poll() is None:
            middle.kill()
            middle.wait()


def _hanging_case(path: Path) -> Path:
    from audee.store import save_case

    spec = {"name": "flat", "inputs": [{"name": "x", "shape": [5]}],
            "layers": [{"name": "logits", "api": "ReLU", "params": {}, "inputs": ["x"]},
                       {"name": "softmax", "api": "Softmax", "params": {}, "inputs": ["logits"]}],
            "output": "softmax", "logits": "logits"}
    return save_case(path, {"id": "hang", "spec": spec, "weights": {},
                            "inputs": {"x": np.random.default_rng(0).random((2, 5), dtype=np.float32)},
                            "backends": [{"label": HANG, "target": HANG, "device": "cpu"}],
                            "verdict": {"findings": []}, "versions": {}})


@pytest.mark.parametrize("command", ["reproduce", "localize", "fuzz", "campaign"])
def test_sigterm_cleans_up_temp_dirs_and_workers(tmp_path, command):
    tmp = tmp_path / "tmp"  # the command's TMPDIR, also the mark of its workers
    tmp.mkdir()
    if command == "reproduce":
        args = ["reproduce", str(_hanging_case(tmp_path / "hang.pkl")), "--backends", HANG, "--timeout", "600"]
    elif command == "localize":
        args = ["localize", str(_hanging_case(tmp_path / "hang.pkl")), "--backends", f"jax,{HANG}",
                "--timeout", "600"]
    elif command == "fuzz":
        args = ["fuzz", "--seed", "lenet5", "--backends", HANG, "--variants", "1", "--timeout", "600",
                "--out", str(tmp_path / "o"), "--no-progress"]
    else:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(f"name: hang\ndefaults: {{variants: 1, batch: 2, timeout: 600}}\nruns:\n"
                       f"  - seeds: [lenet5]\n    backends: [['{HANG}']]\n")
        args = ["campaign", str(cfg), "--out", str(tmp_path / "o"), "--no-progress"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    p = subprocess.Popen([sys.executable, "-m", "audee", *args], cwd=ROOT, env={**env, "TMPDIR": str(tmp)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def hanging() -> bool:
            assert p.poll() is None, p.communicate()[1][-2000:]
            return any("hanging: run started" in f.read_text(errors="replace")
                       for f in list(tmp.rglob("worker-*.log")) + list(tmp_path.glob("o/**/worker-*.log")))

        _wait_for(hanging, 180, "the worker to hang in run()")
        workers = _workers(str(tmp))
        assert workers
        if command in ("reproduce", "localize"):
            ours = [d.name for d in tmp.iterdir() if not d.name.startswith("audee-worker-")]  # workers' TMPDIRs
            assert [name.startswith(f"audee-{command[:5]}") for name in ours] == [True]
        assert len(list(tmp.glob("audee-worker-*"))) == len(workers)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        assert p.returncode == 143, err[-2000:]
        if command in ("fuzz", "campaign"):  # their log outlives them: the busy worker got no grace period
            logs = "".join(f.read_text(errors="replace") for f in (tmp_path / "o").rglob("audee.log"))
            assert "audee is terminating, killed without waiting" in logs, logs[-2000:]
        assert "Traceback" not in err, err[-2000:]
        assert list(tmp.iterdir()) == []  # the audee-repro-* (audee-localize-*) temp dir is gone
        assert all(_wait_gone(w, 5) for w in workers) and _workers(str(tmp)) == []
        _wait_for(lambda: _workers(str(tmp), zygotes=True) == [], 5, "the zygotes to end")  # the workers' source
        if command in ("fuzz", "campaign"):  # the lock went with the process: a rerun may start at once
            from audee.store.lock import dir_lock

            out = tmp_path / "o"
            with dir_lock(out if command == "fuzz" else out / "units" / "lenet5--tests.plugins.HangingBackend--r0"):
                pass
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_non_positive_timeout_is_refused():
    from audee.backends.pool import Pool, Worker
    from audee.backends.registry import parse_backends

    refs = parse_backends("jax")
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            Pool(refs, Path("unused"), timeout=bad)
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            Worker(refs[0], Path("unused"), timeout=bad)
    pool = Pool(refs, Path("unused"), timeout=5)
    with pytest.raises(ValueError):
        pool.set_timeout(0)


def test_a_sigterm_during_the_exit_handlers_prints_no_traceback(tmp_path):
    """A parent stopping a process that is already ending (a campaign's slot process as it
    flushes its logs) must not turn the exit handlers into a traceback on the user's stderr."""
    flag = tmp_path / "sent"
    code = f"""
import atexit, os, sys, time
def flushing():   # registered first, so it runs after audee's own exit handler (as logging's does)
    print("in-exit", flush=True)
    for _ in range(6000):
        if os.path.exists({str(flag)!r}):
            break
        time.sleep(0.01)
    print("handler-done", flush=True)
atexit.register(flushing)
from audee.core import signals
signals.install(announce=False)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "in-exit"
    p.send_signal(signal.SIGTERM)
    flag.write_text("x")
    out, err = p.communicate(timeout=120)
    assert "handler-done" in out and "Traceback" not in err and p.returncode == 0, (p.returncode, err)


def test_a_sigterm_while_the_interpreter_joins_threads_prints_no_traceback(tmp_path):
    """The interpreter joins the threads left running (a queue's feeder) before it runs the
    exit handlers: a parent stopping an audee command that has returned (a campaign's slot
    process after its last unit) must not print a traceback there either."""
    flag = tmp_path / "sent"
    code = f"""
import os, sys, threading, time
from audee import cli
def lingering():   # a thread the interpreter joins at exit, after main returned
    while threading.main_thread().is_alive():
        time.sleep(0.01)
    print("joining", flush=True)
    for _ in range(6000):
        if os.path.exists({str(flag)!r}):
            break
        time.sleep(0.01)
threading.Thread(target=lingering).start()
sys.exit(cli.main(["seeds"]))
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=ROOT)
    lines = iter(p.stdout.readline, "")
    assert any(line.strip() == "joining" for line in lines)
    p.send_signal(signal.SIGTERM)
    flag.write_text("x")
    out, err = p.communicate(timeout=120)
    assert "Traceback" not in err and p.returncode == 0, (p.returncode, err)
