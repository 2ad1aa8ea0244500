"""Workers on the real frameworks: crashes and hangs are recorded, the run goes on."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.engine.execute import Executor
from audee.cases.spec import ModelSpec, weights_key
from audee.cases.weights import adapt_weights
from tests.helpers import tiny_cnn, tiny_inputs

ABORT = "tests.plugins:AbortingBackend"
SLEEP = "tests.plugins:SleepingBackend"
RAISE = "tests.plugins:RaisingBackend"


def _case(ex: Executor, i: int) -> TestCase:
    case = TestCase(f"t{i}", tiny_cnn(), {}, tiny_inputs(4, seed=i))
    ex.complete_weights(case, weight_seed=i)
    return case


def _by_kind(result, kind):
    return [f for f in result.verdict.findings if f.kind == kind]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends(f"jax,{ABORT},{SLEEP},{RAISE}"), tmp_path_factory.mktemp("logs"), timeout=8) as p:
        assert p.start() == {}
        yield p


def test_abort_and_hang_are_hard_crashes_and_the_run_continues(pool):
    """Both cases are sent before either is judged, as the fuzz loop does: a worker that
    dies on the first gets the second again once restarted, and every answer reaches its
    own case."""
    ex = Executor(pool)
    cases = [_case(ex, i) for i in range(2)]
    submitted = [ex.submit(case) for case in cases]  # the second waits in each worker behind the first
    for case, sub in zip(cases, submitted):
        result = ex.finish(sub)
        alone = pool.run(case.spec, case.weights, weights_key(case.weights), case.inputs, labels=["jax"])["jax"]
        np.testing.assert_array_equal(result.outcomes["jax"].logits, alone["logits"])
        hard = {f.backends[0]: f.detail for f in _by_kind(result, Kind.HARD_CRASH)}
        assert hard[ABORT].how == "signal" and "SIGABRT" in hard[ABORT].message
        assert hard[ABORT].phase == "run"
        assert hard[SLEEP].how == "timeout"
        assert result.outcomes["jax"].ok and result.outcomes["jax"].logits.shape == (4, 5)
        assert result.verdict.failed
        # a clean error while others ran is divergent acceptance, not a hard crash
        (div,) = _by_kind(result, Kind.DIVERGENT_ACCEPTANCE)
        assert div.backends == [RAISE] and "refusing this batch" in div.detail.errors[RAISE].message
    assert pool.workers[ABORT].restarts >= 1 and pool.workers[SLEEP].restarts >= 1


def test_answers_are_taken_in_the_order_workers_give_them(pool):
    """``Pool.as_answered``: every backend once, the ones that answer (or die) first, a
    hung one last, its own time limit still enforced."""
    ex = Executor(pool)
    case = _case(ex, 5)
    tickets = pool.submit_run(case.spec, case.weights, weights_key(case.weights), case.inputs,
                              labels=[SLEEP, "jax", ABORT, RAISE])
    order, got = [], {}
    for label in pool.as_answered(tickets):
        order.append(label)
        got.update(pool.collect_run({label: tickets[label]}))
    assert sorted(order) == sorted(tickets) and order[-1] == SLEEP, order
    assert got[SLEEP].kind == "timeout" and got[ABORT].kind == "signal" and got[RAISE].kind == "error"
    assert got["jax"]["logits"].shape == (4, 5)


def test_every_backend_rejecting_is_consistent_rejection(tmp_path):
    spec = tiny_cnn()
    spec.layers[0].params["kernel_size"] = 0  # invalid: every framework must refuse it
    with Pool(parse_backends("jax,tensorflow"), tmp_path, timeout=60) as p:
        assert p.start() == {}
        ex = Executor(p)
        result = ex.run(TestCase("bad", spec, {}, tiny_inputs(2)))
    kinds = result.verdict.kinds()
    assert kinds == [Kind.CONSISTENT_REJECTION], result.verdict.to_json()
    assert result.verdict.status == "rejected" and not result.verdict.failed


def test_weights_swap_without_rebuild_changes_outputs(pool):
    ex = Executor(pool)
    case = _case(ex, 0)
    first = pool.run(case.spec, case.weights, "w0", case.inputs, labels=["jax"])["jax"]
    doubled = {k: [a * 2 for a in v] for k, v in case.weights.items()}
    second = pool.run(case.spec, doubled, "w1", case.inputs, labels=["jax"])["jax"]
    again = pool.run(case.spec, case.weights, "w0", case.inputs, labels=["jax"])["jax"]
    assert not np.allclose(first["logits"], second["logits"])
    np.testing.assert_array_equal(first["logits"], again["logits"])


def test_a_worker_that_evicted_a_model_gets_its_spec_again(pool):
    from audee.backends.worker import CACHE_SIZE

    ex = Executor(pool)
    first = _case(ex, 0)
    before = pool.run(first.spec, first.weights, "e0", first.inputs, labels=["jax"])["jax"]
    for units in range(6, 7 + CACHE_SIZE):  # fill the worker's model cache with other specs
        spec = tiny_cnn()
        spec.layer("logits").params["units"] = units
        case = TestCase(f"u{units}", spec, {}, tiny_inputs(2))
        ex.complete_weights(case, 0)
        pool.run(spec, case.weights, f"u{units}", case.inputs, labels=["jax"])
    after = pool.run(first.spec, first.weights, "e0", first.inputs, labels=["jax"])["jax"]
    np.testing.assert_array_equal(before["logits"], after["logits"])


@pytest.fixture(scope="module")
def every_backend(tmp_path_factory):
    """The shipped backends, healthy, in one pool (started once: four frameworks' imports)."""
    with Pool(parse_backends("tensorflow,torch,jax,onnxruntime,onnxruntime-fed"), tmp_path_factory.mktemp("every"),
              timeout=120) as p:
        assert p.start() == {}
        yield p


def test_a_single_layer_model_runs_on_every_backend(every_backend):
    """Localization builds one-layer models: the outputs list has one entry."""
    spec = ModelSpec.from_json({"name": "one", "inputs": [{"name": "x", "shape": [6, 6, 2]}],
                                "layers": [{"name": "c", "api": "Conv2D", "params": {"filters": 3, "kernel_size": 3},
                                            "inputs": ["x"]}], "output": "c"})
    ex = Executor(every_backend)
    case = TestCase("one", spec, {}, {"x": np.random.default_rng(0).random((2, 6, 6, 2), dtype=np.float32)})
    ex.complete_weights(case, 0)
    result = ex.run(case)
    assert all(o.ok for o in result.outcomes.values()), {b: o.failure for b, o in result.outcomes.items()}
    assert not result.verdict.failed


def test_work_done_ahead_of_a_run_fails_the_run_as_its_own(tmp_path):
    """After answering a build, a worker compiles the model for the last run's input
    shapes before the run asks; a compile that fails there is the run's failure (phase
    run), raised again at the run, not tried a second time; a guess that misses the run's
    shapes costs one more compile."""
    refusing = "tests.plugins:CompileRefusingBackend"

    def other(units: int, batch: int) -> TestCase:
        spec = tiny_cnn(f"u{units}")
        spec.layer("logits").params["units"] = units
        case = TestCase(f"t{units}", spec, {}, tiny_inputs(batch, seed=units))
        ex.complete_weights(case, weight_seed=units)  # the build: the worker compiles ahead once answered
        return case

    with Pool(parse_backends(f"jax,{refusing}"), tmp_path, timeout=120) as p:
        assert p.start() == {}
        ex = Executor(p)
        failures = [ex.run(_case(ex, 0)).outcomes[refusing].failure]  # no run before: compiled at the run
        same = ex.run(other(7, 4))   # compiled ahead for batch 4 (attempt 2); the run meets that failure
        failures.append(same.outcomes[refusing].failure)
        failures.append(ex.run(other(8, 2)).outcomes[refusing].failure)  # ahead for 4 (3), the run's 2 (4)
    assert [f.phase for f in failures] == ["run"] * 3 and all(f.kind == "error" for f in failures)
    assert ["attempt 1" in failures[0].message, "attempt 2" in failures[1].message,
            "attempt 4" in failures[2].message] == [True] * 3, [f.message for f in failures]
    assert same.outcomes["jax"].ok


def test_weight_sets_swapped_in_one_call_give_the_same_outputs(every_backend):
    """TensorFlow takes a model's later weight sets in one traced call, JAX in one
    transfer, PyTorch as copies straight into its parameters, onnxruntime-fed as feeds (a
    weight-level GA swaps a set per individual): the outputs must be bit-identical to the
    same weights set the first, plain way, on a fresh model; the same set as float64
    arrays (PyTorch: through Keras' ``assign``, which rounds them) gives them too.  In
    float32 and float16 (onnxruntime's baked sessions too)."""
    def spec(name: str, dtype: str) -> ModelSpec:
        s = tiny_cnn(f"{name}-{dtype}")
        for layer in s.layers:
            layer.params["dtype"] = dtype
        return s

    p = every_backend
    labels = p.labels
    ex = Executor(p)
    for dtype in ("float32", "float16"):
        x = {k: v.astype(dtype) for k, v in tiny_inputs(4).items()}
        swapped, fresh = spec("swapped", dtype), spec("fresh", dtype)
        shapes = ex.shapes(swapped)
        sets = [adapt_weights({}, shapes, k) for k in range(4)]
        for k, w in enumerate(sets):  # the last set goes the fast way on TensorFlow
            got = p.run(swapped, w, f"w{k}", x)
        want = p.run(fresh, sets[-1], "w3", x)
        wide = p.run(swapped, {n: [a.astype(np.float64) for a in arrs] for n, arrs in sets[-1].items()}, "w64", x)
        for label in labels:
            assert str(got[label]["logits"].dtype) == dtype
            np.testing.assert_array_equal(got[label]["logits"], want[label]["logits"], err_msg=f"{label} {dtype}")
            np.testing.assert_array_equal(wide[label]["logits"], want[label]["logits"], err_msg=f"{label} {dtype}")


def test_a_large_request_behind_a_large_answer_is_sent_without_deadlock(tmp_path):
    """A request pipelined behind one whose answer is larger than the socket's buffers (a
    wide layer's outputs) while it is itself larger (a new weight set): each side would
    block writing, waiting for the other to read.  The worker's answers are read first."""
    import threading

    spec = ModelSpec.from_json({"name": "wide", "inputs": [{"name": "x", "shape": [1024]}],
                                "layers": [{"name": "d", "api": "Dense", "params": {"units": 4096},
                                            "inputs": ["x"]}], "output": "d"})
    rng = np.random.default_rng(0)
    x = {"x": rng.standard_normal((1024, 1024)).astype(np.float32)}
    kernel = rng.standard_normal((1024, 4096)).astype(np.float32)
    sets = [{"d": [kernel.copy(), np.full(4096, k, np.float32)]}
            for k in range(2)]  # 16 MB each, answers of 32 MB (the layer's output and the logits)
    with Pool(parse_backends("torch"), tmp_path, timeout=120) as pool:
        pool.start_or_fail()
        worker, got = pool.workers["torch"], {}

        def both() -> None:
            tickets = [worker.submit_run(spec, spec.key(), w, weights_key(w), x, layers=True) for w in sets]
            got.update({k: worker.result(t) for k, t in enumerate(tickets)})

        thread = threading.Thread(target=both, daemon=True)
        thread.start()
        thread.join(120)
        assert not thread.is_alive(), "the parent and the worker each wait for the other to read"
        assert sorted(got) == [0, 1] and all(isinstance(r, dict) and "logits" in r for r in got.values())
        np.testing.assert_allclose(got[1]["logits"] - got[0]["logits"], 1.0, atol=1e-3)


STICKY = "tests.plugins:StickyErrorBackend"


def test_a_failure_that_breaks_the_process_gives_the_next_case_a_fresh_one(tmp_path):
    """A CUDA device-side assert sticks to its process: every later build and run there
    fails.  Kept, that worker would fail each later case of its slot, and the report would
    count them as the backend's bug.  The worker says so with its answer and ends; the
    cases sent behind it (pipelined, as the fuzz loop sends them) go to a fresh process."""
    with Pool(parse_backends(f"jax,{STICKY}"), tmp_path, timeout=60) as p:
        assert p.start() == {}
        first_pid = p.workers[STICKY].proc.pid
        ex = Executor(p)
        cases = [_case(ex, i) for i in range(3)]
        cases[0].inputs["image"][0, 0, 0, 0] = 1e3  # the input the device asserts on
        results = [ex.finish(sub) for sub in [ex.submit(case) for case in cases]]
        (div,) = _by_kind(results[0], Kind.DIVERGENT_ACCEPTANCE)
        assert div.backends == [STICKY] and "device-side assert" in div.detail.errors[STICKY].message
        for result in results[1:]:
            assert not result.verdict.failed, result.verdict.findings
            np.testing.assert_allclose(result.outcomes[STICKY].logits, result.outcomes["jax"].logits, rtol=1e-6)
        assert p.workers[STICKY].restarts == 1 and p.workers[STICKY].proc.pid != first_pid
        assert p.workers["jax"].restarts == 0
        assert "ending this process: the device no longer computes" in p.workers[STICKY].log_path.read_text()


def test_a_worker_of_another_keras_backend_starts_without_jax(tmp_path):
    """Keras 3.15 imports JAX in every backend (its Orbax checkpoint callback), 1 to 2.5 s
    of a TensorFlow or torch worker's start-up.  Those workers keep JAX out, and still
    build and run; a JAX worker has it.  Read from each process's mapped libraries."""
    from pathlib import Path

    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path, timeout=120) as p:
        assert p.start() == {}
        ex = Executor(p)
        result = ex.finish(ex.submit(_case(ex, 0)))
        assert not result.verdict.failed and all(o.ok for o in result.outcomes.values())

        def maps_jaxlib(label: str) -> bool:
            return "jaxlib" in Path(f"/proc/{p.workers[label].proc.pid}/maps").read_text()

        assert (maps_jaxlib("tensorflow"), maps_jaxlib("torch"), maps_jaxlib("jax")) == (False, False, True)
