"""``torch-onnx-ts`` (audee/backends/torch_onnx_backend.py: ``TorchOnnxTsBackend``): the Keras
model on torch exported by torch's TorchScript ONNX exporter (``dynamo=False``) and run on
onnxruntime, NNSmith's pair beside eager ``torch``.

A small CNN (the LeNet-5 seed) agrees with torch; a layer the exporter has no symbolic
function for is a limitation in the exporter's words; graph inputs the exporter prunes
(weights nothing reads at inference) are put back, so the weight feed finds them; recurrent
API-level cases draw short sequences when the run has a backend that unrolls their loop; a
finding's standalone script reproduces it without audee.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audee.backends.info import max_steps
from audee.backends.pool import Pool
from audee.backends.registry import DEFAULT_BACKENDS, parse_backends
from audee.cases.case import Kind, TestCase
from audee.cases.spec import ModelSpec
from audee.engine.execute import Executor

PAIR = "torch,torch-onnx-ts"


@pytest.fixture(scope="module")
def executor(tmp_path_factory) -> Executor:
    with Pool(parse_backends(PAIR), tmp_path_factory.mktemp("logs"), timeout=300) as pool:
        assert pool.start() == {}
        yield Executor(pool)


def one_layer(api: str, params: dict, shape: list[int]) -> ModelSpec:
    return ModelSpec.from_json({
        "name": api.lower(), "inputs": [{"name": "x", "shape": shape, "range": [0, 1]}],
        "layers": [{"name": "t", "api": api, "params": params, "inputs": ["x"]}],
        "output": "t", "logits": "t"})


def test_lenet5_at_batch_2_agrees_with_torch(executor):
    """The LeNet-5 seed with its shipped weights, two of its inputs: exported (time in
    ``convert``), run, no finding against eager torch."""
    from audee.mutation.seeds import load_seed

    seed = load_seed("lenet5")
    inputs = {k: v[:2] for k, v in seed.inputs.items()}
    case = TestCase("lenet5-b2", seed.spec, dict(seed.weights or {}), inputs)
    executor.complete_weights(case, 0)
    result = executor.run(case)
    assert all(o.ok for o in result.outcomes.values()), {k: o.failure for k, o in result.outcomes.items()}
    assert not result.verdict.findings, result.verdict.to_json()
    assert result.phases["torch-onnx-ts"].get("convert", 0) > 0, result.phases
    np.testing.assert_allclose(result.outcomes["torch-onnx-ts"].logits, result.outcomes["torch"].logits,
                               rtol=1e-4, atol=1e-5)


def clahe() -> ModelSpec:
    """Keras' ContrastLimitedAdaptiveHistogramEqualization calls ``torch.ravel``, which the
    TorchScript exporter has no symbolic function for."""
    return one_layer("ContrastLimitedAdaptiveHistogramEqualization", {"value_range": [0, 255]}, [8, 8, 3])


def test_an_op_the_exporter_has_no_symbolic_for_is_a_limitation(executor):
    """Eager torch runs CLAHE; the exporter refuses ``aten::ravel`` ("Exporting the operator
    'aten::ravel' to ONNX opset version 17 is not supported"): a divergent acceptance in the
    ``convert`` phase, its op named, classed a limitation."""
    from audee.triage.rootcause import classify
    from audee.triage.signature import case_signatures

    spec = clahe()
    x = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 3)).astype(np.float32)
    case = TestCase("clahe", spec, {}, {"x": x})
    executor.complete_weights(case, 0)
    result = executor.run(case)
    (f,) = [f for f in result.verdict.findings if f.is_failure]
    assert f.kind == Kind.DIVERGENT_ACCEPTANCE and f.backends == ["torch-onnx-ts"]
    error = f.detail.errors["torch-onnx-ts"]
    assert error.phase == "convert" and "Exporting the operator 'aten::ravel'" in error.message, error
    (sig,) = case_signatures(result.verdict, spec, {})
    assert sig.op == "ravel" and classify(sig)[0] == "limitation", sig


def test_weights_nothing_reads_are_still_fed(executor):
    """A Dropout's seed-generator state is a weight nothing reads at inference: the
    exporter drops it from the graph's inputs, and the weight feed met ``KeyError:
    'audee_w0'``.  Now the input is put back: the layer runs, an identity, as on torch."""
    x = np.random.default_rng(1).random((3, 5), dtype=np.float32)
    case = TestCase("dropout", one_layer("Dropout", {"rate": 0.5}, [5]), {}, {"x": x})
    executor.complete_weights(case, 0)
    result = executor.run(case)
    assert result.outcomes["torch-onnx-ts"].ok, result.outcomes["torch-onnx-ts"].failure
    assert not result.verdict.findings, result.verdict.to_json()
    np.testing.assert_array_equal(result.outcomes["torch-onnx-ts"].logits, x)


def test_recurrent_cases_draw_short_sequences_only_beside_a_backend_that_unrolls():
    """The run's backends decide (``BackendInfo.max_steps``): none of the default four asks,
    torch-onnx-ts asks for 4.  Capped, an LSTM's time axis is at most that long and the
    rest of the case is drawn as before; a layer with no time loop is drawn as before."""
    from audee.apis import load_api_configs
    from audee.mutation.apilevel import generate_case

    assert max_steps(DEFAULT_BACKENDS) is None
    assert max_steps(PAIR.split(",")) == max_steps(["tensorflow", "torch-onnx-ts"]) == 4
    configs = load_api_configs()
    longer = 0
    for index in range(12):
        free = generate_case("LSTM", configs, 0, index)
        short = generate_case("LSTM", configs, 0, index, max_steps=4)
        assert short.meta["shape"][0] == min(free.meta["shape"][0], 4)
        assert short.meta["shape"][1:] == free.meta["shape"][1:] and short.meta["params"] == free.meta["params"]
        longer += free.meta["shape"][0] > 4
        dense, capped = generate_case("Dense", configs, 0, index), generate_case("Dense", configs, 0, index,
                                                                                  max_steps=4)
        assert dense.spec.to_json() == capped.spec.to_json()
    assert longer > 0  # the cap did something


def test_a_refusal_script_reproduces_alone(executor, tmp_path):
    """The CLAHE refusal as a case file's record: its standalone script (torch eagerly,
    then the TorchScript exporter and onnxruntime, no audee) reproduces it."""
    from audee.repro import write_repro
    from audee.store.caserecord import CaseRecord
    from tests.test_repro import run_alone

    spec = clahe()
    x = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 3)).astype(np.float32)
    case = TestCase("clahe", spec, {}, {"x": x})
    executor.complete_weights(case, 0)
    result = executor.run(case)
    record = CaseRecord(id="clahe-v1", spec=spec.to_json(), weights=case.weights, inputs=case.inputs,
                        backends=parse_backends(PAIR), verdict=result.verdict.to_json(), versions={})
    rep = write_repro(record, tmp_path / "out", "clahe")
    got = run_alone(rep.script, tmp_path)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]


def test_a_spec_built_again_is_not_exported_again(executor):
    """A worker keeps a spec's exports (and failed exports) beyond its model cache
    (``TorchOnnxBackend.export_memo``): a spec built again after the cache let it go (as the
    repro scripts do at a run's end) runs on the graph exported before, no ``convert`` time,
    the same outputs bit for bit; a refused export is the same refusal; a one-layer case's
    layer cut out alone (a diagnosis, a repro script's candidate) takes the case's graph."""
    from audee.backends.worker import CACHE_SIZE

    x = np.random.default_rng(2).random((4, 6), dtype=np.float32)
    dense = TestCase("dense", one_layer("Dense", {"units": 3}, [6]), {}, {"x": x})
    executor.complete_weights(dense, 0)
    first = executor.run(dense)
    assert first.phases["torch-onnx-ts"].get("convert", 0) > 0, first.phases
    img = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 3)).astype(np.float32)
    refused = TestCase("clahe", clahe(), {}, {"x": img})
    executor.complete_weights(refused, 0)
    (before,) = [f for f in executor.run(refused).verdict.findings if f.is_failure]
    for units in range(4, 5 + CACHE_SIZE):  # more new specs than the worker's model cache holds
        other = TestCase(f"dense{units}", one_layer("Dense", {"units": units}, [6]), {}, {"x": x})
        executor.complete_weights(other, 0)
        executor.run(other)
    again = executor.run(dense)
    assert again.phases["torch-onnx-ts"].get("build", 0) > 0, again.phases  # the cache had let it go
    assert again.phases["torch-onnx-ts"].get("convert", 0) == 0, again.phases
    np.testing.assert_array_equal(again.outcomes["torch-onnx-ts"].logits, first.outcomes["torch-onnx-ts"].logits)
    (after,) = [f for f in executor.run(refused).verdict.findings if f.is_failure]
    assert after.to_json() == before.to_json()
    # the layer cut out alone (its input's range drawn from the data: another spec key) shares them too
    from audee.cases.spec import one_layer_model

    spec1, weights1 = one_layer_model(dense.spec, dense.weights, "t", {"x": x})
    assert spec1.key() != dense.spec.key()
    alone = executor.run(TestCase("dense-alone", spec1, weights1, {"x": x}))
    assert alone.phases["torch-onnx-ts"].get("convert", 0) == 0, alone.phases
    np.testing.assert_array_equal(alone.outcomes["torch-onnx-ts"].logits, first.outcomes["torch-onnx-ts"].logits)


MEMO_SCRIPT = """
import numpy as np
from audee.backends.torch_onnx_backend import TorchOnnxTsBackend
from audee.cases.spec import ModelSpec

TorchOnnxTsBackend.prepare_process("cpu")
backend = TorchOnnxTsBackend("cpu")

def dense(units):
    return ModelSpec.from_json({"name": "dense", "inputs": [{"name": "x", "shape": [5], "range": [0, 1]}],
                                "layers": [{"name": "t", "api": "Dense", "params": {"units": units}, "inputs": ["x"]}],
                                "output": "t", "logits": "t"})

x = {"x": np.zeros((4, 5), np.float32)}
backend.compile_for(backend.build(dense(2)), x)
for units in range(3, 103):
    backend.build(dense(units))
print("KEPT", len(backend.build(dense(2)).exports))
"""


def test_exports_outlive_a_run_of_every_api(tmp_path):
    """A spec's exports are still kept after a hundred other specs were built (a run of every
    API-level layer is 97 cases; the repro scripts at its end come back to its failing
    ones): the spec built again finds its graph.  In a process of its own: the backend
    sets ``KERAS_BACKEND`` for the process."""
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    got = subprocess.run([sys.executable, "-c", MEMO_SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "KEPT 1" in got.stdout, got.stdout[-2000:]

def test_export_memo_is_bounded_by_the_bytes_of_its_graphs(monkeypatch):
    """The memo lets the least recently used specs' graphs go once their bytes pass
    ``EXPORT_MEMO_BYTES`` (the spec in use stays, a refusal-only spec counts no bytes)."""
    from types import SimpleNamespace

    from onnx import TensorProto, helper

    from audee.backends import torch_onnx_backend as tob

    def graph(n: int):
        nodes = [helper.make_node("Identity", [f"v{k}"], [f"v{k + 1}"]) for k in range(n)]
        return helper.make_model(helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [1])]))

    size = graph(50).ByteSize()
    monkeypatch.setattr(tob, "EXPORT_MEMO_BYTES", 3 * size)
    backend = tob.TorchOnnxTsBackend("cpu")

    def export(key: str) -> None:
        om = SimpleNamespace(memo_key=key)
        om.exports, om.failed = backend.export_memo(key)
        om.exports[(2,)] = graph(50)
        backend._remember(om, om.exports[(2,)])

    for key in "abc":
        export(key)
    backend.export_memo("refused")  # no graph: no bytes
    assert list(backend._export_memo) == ["a", "b", "c", "refused"]
    backend.export_memo("a")  # used again: the most recent
    export("d")
    assert list(backend._export_memo) == ["c", "refused", "a", "d"]  # b, the least recent, let go
    assert backend._memo_total == 3 * size


# ---- the pair in one process: torch hosted by torch-onnx-ts's worker --------------------------------
def test_which_backends_share_a_process():
    """A converter hosts the Keras backend it converts when both run on the CPU at one
    precision in one environment; anything else keeps a process of its own."""
    from audee.backends.pool import hosted_pairs

    assert hosted_pairs(parse_backends(PAIR)) == {"torch": "torch-onnx-ts"}
    assert hosted_pairs(parse_backends("torch,torch-onnx,torch-onnx-ts")) == {"torch": "torch-onnx"}
    assert hosted_pairs(parse_backends("torch,torch-onnx-ts", "cuda")) == {}
    assert hosted_pairs(parse_backends("tensorflow,torch-onnx-ts")) == {}  # its Keras backend is not in the run
    assert hosted_pairs(parse_backends(DEFAULT_BACKENDS)) == {}  # tf2onnx builds its own TensorFlow model
    with Pool(parse_backends(PAIR), Path("unused"), share=False) as pool:
        assert pool.hosted == {}


def test_the_pair_shares_one_process_and_each_model_is_built_once(executor):
    """torch's requests go to torch-onnx-ts's process, and the exporter takes torch's built
    Keras model instead of building it again: a case costs one build, as a bare script's."""
    pool = executor.pool
    assert pool.workers["torch"].conn is pool.workers["torch-onnx-ts"].conn
    before = pool.call("torch-onnx-ts", "builds")
    x = np.random.default_rng(5).random((3, 7), dtype=np.float32)
    case = TestCase("dense-shared", one_layer("Dense", {"units": 2}, [7]), {}, {"x": x})
    executor.complete_weights(case, 0)
    result = executor.run(case)
    assert all(o.ok for o in result.outcomes.values()), {k: o.failure for k, o in result.outcomes.items()}
    after = pool.call("torch-onnx-ts", "builds")
    assert after["shared"] == before["shared"] + 1 and after["built"] == before["built"], (before, after)
    np.testing.assert_allclose(result.outcomes["torch-onnx-ts"].logits, result.outcomes["torch"].logits,
                               rtol=1e-5, atol=1e-6)


def test_a_death_fails_only_the_request_it_was_computing(tmp_path):
    """The shared process dies while computing the guest's request: that request is answered
    with the failure, the host's request sent after it goes again to a fresh process and is
    answered there, and the guest's next request runs on the fresh process too."""
    import os
    import signal

    from audee.backends.pool import WorkerFailure

    with Pool(parse_backends(PAIR), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        guest, host = pool.workers["torch"], pool.workers["torch-onnx-ts"]
        spec = one_layer("Dense", {"units": 2}, [3])
        inputs = {"x": np.zeros((2, 3), np.float32)}
        long = guest.submit({"op": "call", "name": "time_forward", "kwargs": {
            "spec": spec.to_json(), "key": spec.key(), "inputs": inputs, "repeats": 10_000_000}})
        build = host.submit({"op": "build", "spec": spec.to_json(), "key": spec.key()}, phase="build")
        pid = host.proc.pid
        os.kill(pid, signal.SIGKILL)
        died = guest.result(long)
        assert isinstance(died, WorkerFailure) and died.kind == "signal", died
        answered = host.result(build)
        assert isinstance(answered, dict) and "shapes" in answered, answered
        assert host.proc.pid != pid and host.restarts == 1
        again = guest.request({"op": "build", "spec": spec.to_json(), "key": spec.key()}, phase="build")
        assert isinstance(again, dict) and "shapes" in again, again


def test_rows_are_the_same_whether_the_pair_shares_a_process_or_not(tmp_path):
    """The same API-level cases (special values in their inputs, so NaN findings too) on the
    pair hosted in one process and on two processes: the same results rows, timings apart."""
    import json

    from audee.fuzz import FuzzConfig, fuzz_apis

    refs = parse_backends(PAIR)
    rows = {}
    for share in (True, False):
        out = tmp_path / f"share{int(share)}"
        with Pool(refs, out / "logs", timeout=300, share=share) as pool:
            assert pool.start() == {}
            assert bool(pool.hosted) == share
            fuzz_apis(["Dense", "Conv1D", "GlobalMaxPooling1D", "Softmax"],
                      FuzzConfig(refs, out / "run", variants=2, rng=3, special_inputs=0.5), pool=pool)
        got = [json.loads(line) for line in (out / "run" / "results.jsonl").read_text().splitlines()]
        for r in got:
            r.pop("seconds", None)
            r.pop("phases", None)
        rows[share] = sorted(got, key=lambda r: r["id"])
    assert len(rows[True]) == 8 and rows[True] == rows[False]


# ---- onnxruntime in a process of its own (audee/backends/ort_process.py) ------------------------------
def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _maps(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def test_the_exporting_worker_never_loads_onnxruntime(executor):
    """The worker that exports runs its sessions in a child process: onnxruntime's library is
    mapped there, not in the worker (where its import slows every export)."""
    x = np.random.default_rng(1).random((2, 5), dtype=np.float32)
    case = TestCase("dense-runtime", one_layer("Dense", {"units": 3}, [5]), {}, {"x": x})
    executor.complete_weights(case, 0)
    assert all(o.ok for o in executor.run(case).outcomes.values())
    worker = executor.pool.workers["torch-onnx-ts"].proc.pid
    assert "libonnxruntime" not in _maps(worker)
    assert any("libonnxruntime" in _maps(c) for c in _children(worker))


def test_a_crash_of_the_runtime_is_the_workers_crash(tmp_path):
    """onnxruntime dying by a signal in its process ends the worker by the same signal, as when
    it ran inside the worker: the case records a crash of torch-onnx-ts, torch's result stands,
    and the next case runs on a fresh worker."""
    import os
    import signal

    with Pool(parse_backends(PAIR), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        x = np.random.default_rng(2).random((2, 4), dtype=np.float32)
        first = TestCase("dense-a", one_layer("Dense", {"units": 2}, [4]), {}, {"x": x})
        ex.complete_weights(first, 0)
        assert all(o.ok for o in ex.run(first).outcomes.values())
        (runtime,) = [c for c in _children(pool.workers["torch-onnx-ts"].proc.pid) if "libonnxruntime" in _maps(c)]
        os.kill(runtime, signal.SIGSEGV)
        second = TestCase("dense-b", one_layer("Dense", {"units": 3}, [4]), {}, {"x": x})
        ex.complete_weights(second, 0)
        got = ex.run(second)
        failure = got.outcomes["torch-onnx-ts"].failure
        assert failure is not None and failure.kind == "signal" and "SIGSEGV" in failure.message, failure
        third = TestCase("dense-c", one_layer("Dense", {"units": 4}, [4]), {}, {"x": x})
        ex.complete_weights(third, 0)
        assert all(o.ok for o in ex.run(third).outcomes.values())
