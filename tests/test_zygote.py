"""Workers forked from a zygote (audee/backends/zygote.py): a worker started again (a new
pool, a restart) is a fork of a process that imported its framework once, and meets the
pool as a new process does: its own temp dir and log, the same answers as a process
started new.  A backend that sets other switches before the import gets a process of its own."""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.backends.zygote import ENABLE_ENV, zygote_registry
from audee.cases.case import TestCase
from audee.cases.spec import weights_key
from audee.engine.execute import Executor
from tests.helpers import tiny_cnn, tiny_inputs

FACTS = "tests.plugins:ProcessFactsJax"
FACTS_X64 = "tests.plugins:ProcessFactsJaxX64"

pytestmark = pytest.mark.fresh_workers   # each pool's worker a process of its own, not a kept one


@pytest.fixture(autouse=True)
def _default_zygotes() -> Iterator[None]:
    """audee's own registry, not the suite's eager one (tests/conftest.py)."""
    with zygote_registry():
        yield


def _start(target: str, logs) -> tuple[Pool, dict[str, str], np.ndarray]:
    """A pool of ``target`` alone: its hello's process facts and a tiny CNN's logits."""
    pool = Pool(parse_backends(target), logs, timeout=120)
    assert pool.start() == {}
    ex = Executor(pool)
    case = TestCase("t", tiny_cnn(), {}, tiny_inputs(4, seed=1))
    ex.complete_weights(case, weight_seed=1)
    got = pool.run(case.spec, case.weights, weights_key(case.weights), case.inputs, labels=[target])[target]
    return pool, pool.workers[target].versions, got["logits"]


def test_a_worker_started_again_is_forked_and_answers_as_a_new_process(tmp_path, monkeypatch):
    first, facts1, logits1 = _start(FACTS, tmp_path / "a")
    tmp1 = first.workers[FACTS].tmp
    first.close()
    assert facts1["ppid"] == str(os.getpid())   # its first start: a new process, no zygote made
    second, facts2, logits2 = _start(FACTS, tmp_path / "b")
    with second:
        w = second.workers[FACTS]
        zygote = facts2["ppid"]
        assert zygote != str(os.getpid())   # started again: a fork of a zygote
        assert facts2["pid"] != facts1["pid"] and facts2["pid"] == str(w.proc.pid)
        assert facts2["tmp"] == str(w.tmp) != str(tmp1)                    # its own temp dir
        assert "forked from zygote pid" in (tmp_path / "b" / w.log_path.name).read_text()
        os.kill(w.proc.pid, 9)   # a crash: the restart is another fork of the same zygote
        ex = Executor(second)
        case = TestCase("t", tiny_cnn(), {}, tiny_inputs(4, seed=1))
        ex.complete_weights(case, weight_seed=1)
        second.run(case.spec, case.weights, weights_key(case.weights), case.inputs, labels=[FACTS])
        assert w.restarts == 1 and w.versions["ppid"] == zygote and w.versions["pid"] != facts2["pid"]
    assert not os.path.exists(tmp1)
    monkeypatch.setenv(ENABLE_ENV, "0")   # off: a process started new, as before
    fresh, facts3, logits3 = _start(FACTS, tmp_path / "c")
    with fresh:
        assert facts3["ppid"] == str(os.getpid())
    np.testing.assert_array_equal(logits1, logits2)
    np.testing.assert_array_equal(logits1, logits3)


def test_a_backend_that_sets_other_import_switches_gets_a_process_of_its_own(tmp_path):
    _start(FACTS, tmp_path / "a0")[0].close()
    plain, facts, _ = _start(FACTS, tmp_path / "a")   # started again: a zygote, JAX imported without x64
    with plain:
        assert facts["x64"] == "False" and facts["ppid"] != str(os.getpid())
        x64, facts_x64, _ = _start(FACTS_X64, tmp_path / "b")
        with x64:
            assert facts_x64["x64"] == "True" and facts_x64["ppid"] == str(os.getpid())   # a new process
            log = (tmp_path / "b" / x64.workers[FACTS_X64].log_path.name).read_text()
            assert "not forked (its backend sets other switches before the import" in log
        again, facts_again, _ = _start(FACTS_X64, tmp_path / "c")   # next time, a zygote of its own
        with again:
            assert facts_again["x64"] == "True" and facts_again["ppid"] not in (facts["ppid"], str(os.getpid()))


def test_a_backend_that_sets_no_switch_is_not_forked_from_a_zygote_that_set_one(tmp_path):
    """The reverse: a zygote made for jax-x64 imported JAX with x64 on; plain JAX starting next
    (any ready zygote of its environment is tried) must not inherit it.  Its ``prepare`` runs
    from the zygote's state before the zygote's own, sets no x64, and so answers ``unfit``:
    the worker computes without x64."""
    with zygote_registry(eager=True):   # a zygote at a command's first start, as in the suite
        x64, facts_x64, _ = _start(FACTS_X64, tmp_path / "a")
        with x64:
            assert facts_x64["x64"] == "True"
            plain, facts, _ = _start(FACTS, tmp_path / "b")
            with plain:
                assert facts["x64"] == "False", facts
                log = (tmp_path / "b" / plain.workers[FACTS].log_path.name).read_text()
                assert "not forked (its backend sets other switches before the import" in log, log[-2000:]
