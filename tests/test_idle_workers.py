"""Worker processes kept between pools (keep_idle_workers): a later pool that starts the same
backend with the same environment takes a kept process instead of importing its framework
again, and meets it as a new one: nothing built, its output in the new pool's log, its
answers the same.  A different environment, a kept process that died, or fresh_workers
each get a new process."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from audee.backends.pool import Pool, fresh_workers, keep_idle_workers
from audee.backends.registry import parse_backends
from audee.cases.spec import weights_key
from audee.engine.execute import Executor
from audee.cases.case import TestCase
from tests.helpers import tiny_cnn, tiny_inputs


def _run(pool: Pool) -> np.ndarray:
    """A tiny CNN's logits on jax."""
    ex = Executor(pool)
    case = TestCase("t", tiny_cnn(), {}, tiny_inputs(4, seed=1))
    ex.complete_weights(case, weight_seed=1)
    got = pool.run(case.spec, case.weights, weights_key(case.weights), case.inputs, labels=["jax"])["jax"]
    return got["logits"]


def _pool(logs) -> Pool:
    pool = Pool(parse_backends("jax"), logs, timeout=120)
    assert pool.start() == {}
    return pool


def test_a_later_pool_takes_the_kept_process_and_meets_it_as_new(tmp_path, monkeypatch):
    with keep_idle_workers(4):
        with _pool(tmp_path / "a") as first:
            pid = first.workers["jax"].proc.pid
            logits = _run(first)
            assert first.call("jax", "builds") == {"built": 1, "shared": 0}
        assert not first.workers["jax"].alive()   # the pool let it go
        os.kill(pid, 0)                            # and the process lives on, idle

        with _pool(tmp_path / "b") as second:
            w = second.workers["jax"]
            assert w.proc.pid == pid
            assert second.call("jax", "builds") == {"built": 0, "shared": 0}   # renewed: nothing built
            np.testing.assert_array_equal(_run(second), logits)
            assert second.call("jax", "builds") == {"built": 1, "shared": 0}
            assert w.versions and w.precision_state   # its hello, as a new process gives it
        log_b = (tmp_path / "b" / "worker-jax.log").read_text()
        assert f"idle pid {pid} taken over" in log_b

        monkeypatch.setenv("AUDEE_TEST_MARK", "other")   # another environment: another process
        with _pool(tmp_path / "c") as third:
            assert third.workers["jax"].proc.pid != pid
            other = third.workers["jax"].proc.pid
        monkeypatch.delenv("AUDEE_TEST_MARK")

        with _pool(tmp_path / "d") as fourth:   # the first one again, kept a second time
            assert fourth.workers["jax"].proc.pid == pid
            os.kill(pid, signal.SIGKILL)   # dies while the pool holds it: restarted as always
            fourth.workers["jax"].proc.wait()
            np.testing.assert_array_equal(_run(fourth), logits)
            assert fourth.workers["jax"].proc.pid != pid
    for gone in (pid, other):   # leaving keep_idle_workers stops what it kept
        with pytest.raises(ProcessLookupError):
            os.kill(gone, 0)


def test_a_kept_process_that_died_idle_is_replaced_by_a_new_one(tmp_path):
    with keep_idle_workers(4):
        with _pool(tmp_path / "a") as first:
            pid = first.workers["jax"].proc.pid
            logits = _run(first)
        os.kill(pid, signal.SIGKILL)
        with _pool(tmp_path / "b") as second:
            assert second.workers["jax"].proc.pid != pid
            np.testing.assert_array_equal(_run(second), logits)


def test_fresh_workers_start_and_end_their_own_processes(tmp_path):
    with keep_idle_workers(4):
        with _pool(tmp_path / "a") as first:
            pid = first.workers["jax"].proc.pid
        with fresh_workers(), _pool(tmp_path / "b") as second:
            fresh = second.workers["jax"]
            assert fresh.proc.pid != pid
            proc = fresh.proc
        assert proc.poll() is not None   # ended when its pool closed, not kept
