"""Many small models per build (issue 32): packing is plain data (names, weights, inputs
in and out), and a packed run gives every case the result it gets alone: the same rows and
case files as an unpacked fuzz run, and a crash or a converter's rejection inside a pack
found by bisection and pinned on its own case."""
from __future__ import annotations

import json
import logging
import re

import numpy as np
import pytest

from audee.cases.case import Kind, TestCase
from audee.cases.pack import members_named, pack, pack_specs
from audee.cases.spec import ModelSpec

BOOM = "tests.pack_plugins:AbortOnBoom"


def _spec(name: str, layers: list[dict], output: str, inputs: dict[str, list[int]] | None = None,
          logits: str | None = None) -> ModelSpec:
    return ModelSpec.from_json({"name": name, "inputs": [{"name": k, "shape": v} for k, v in
                                                         (inputs or {"x": [5]}).items()],
                                "layers": layers, "output": output, **({"logits": logits} if logits else {})})


def _dense(name: str, units: int, layer: str = "d", dtype: str = "float32") -> ModelSpec:
    return _spec(name, [{"name": layer, "api": "Dense", "params": {"units": units, "dtype": dtype},
                         "inputs": ["x"]}], layer)


def _softmaxed(name: str) -> ModelSpec:
    return _spec(name, [{"name": "d", "api": "Dense", "params": {"units": 4}, "inputs": ["x"]},
                        {"name": "s", "api": "Softmax", "params": {}, "inputs": ["d"]}], "s", logits="d")


def _added(name: str) -> ModelSpec:
    return _spec(name, [{"name": "a", "api": "Add", "params": {}, "inputs": ["x", "y"]}], "a",
                 inputs={"x": [3], "y": [3]})


def _case(spec: ModelSpec, batch: int = 4, seed: int = 0) -> TestCase:
    rng = np.random.default_rng(seed)
    inputs = {i.name: rng.standard_normal((batch, *i.shape)).astype(np.float32) for i in spec.inputs}
    return TestCase(spec.name, spec, {}, inputs)


# ---- the data (no framework) ---------------------------------------------------------------------------
def test_a_pack_prefixes_every_name_and_unpacks_each_case_as_its_own():
    a, b = _case(_softmaxed("a")), _case(_added("b"), seed=1)
    a.weights = {"d": [np.ones((5, 4), np.float32), np.zeros(4, np.float32)]}
    p = pack([a, b])
    spec = ModelSpec.from_json(p.case.spec.to_json())     # a valid spec: names unique, references known
    assert spec.input_names == ["k0_x", "k1_x", "k1_y"] and spec.layer_names() == ["k0_d", "k0_s", "k1_a"]
    assert spec.layer("k1_a").inputs == ["k1_x", "k1_y"] and spec.output == "k0_s" and spec.logits == "k0_d"
    assert set(p.case.weights) == {"k0_d"} and p.case.weights["k0_d"][0] is a.weights["d"][0]
    assert set(p.case.inputs) == {"k0_x", "k1_x", "k1_y"} and p.case.inputs["k1_y"] is b.inputs["y"]
    assert p.wanted == ["k0_s", "k0_d", "k1_a"]
    assert spec.topological_order() == ["k0_d", "k1_a", "k0_s"]      # each case keeps its own order
    out = {n: np.full((4, 1), k, np.float32) for k, n in enumerate(p.wanted)}
    got = p.unpack({"layers": out, "nonfinite": ["k1_a", "k0_s"], "nonfinite_rows": {"k1_a": [2], "k0_s": [0]},
                    "run_s": 1.0, "logits": None, "output": None})
    assert got[0]["output"] is out["k0_s"] and got[0]["logits"] is out["k0_d"] and got[0]["nonfinite"] == ["s"]
    assert got[1]["output"] is got[1]["logits"] is out["k1_a"] and got[1]["nonfinite_rows"] == {"a": [2]}
    assert got[0]["run_s"] == got[1]["run_s"] == 0.5
    shapes = pack_specs([a.spec, b.spec]).member_shapes({"k0_d": [("kernel", (5, 4)), ("bias", (4,))]})
    assert shapes == [{"d": [("kernel", (5, 4)), ("bias", (4,))]}, {}]


def test_a_pack_of_one_is_the_case_itself_and_batches_do_not_mix():
    a = _case(_dense("a", 3))
    p = pack([a])
    assert p.case is a and p.case.spec.key() == a.spec.key() and p.unpack({"x": 1}) == [{"x": 1}]
    with pytest.raises(ValueError, match="batch"):
        pack([a, _case(_dense("b", 3), batch=5)])
    assert pack([a, _case(_dense("a", 3))]).case.spec.key() != a.spec.key()


def test_an_error_naming_a_packed_node_points_at_its_case():
    onnx = ('InvalidGraph: In Node, ("k2_t_conv2d_1/PartitionedCall", PartitionedCall, "", -1) : '
            '("k2_a0_permute": tensor(float),"audee_w24": tensor(float))')
    assert members_named(onnx, 4) == [2]
    assert members_named("the converted graph computes layer 'k0_d' in float16", 4) == [0]
    assert members_named("block_k1_x k12_y k3", 4) == []    # no prefix inside a name, none out of the pack


# ---- on real frameworks: jax, onnxruntime (tf2onnx) and a backend that aborts on one case -------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends(f"jax,onnxruntime,{BOOM}"), tmp_path_factory.mktemp("logs"), timeout=120) as p:
        assert p.start() == {}
        yield p


def _rows(out) -> dict[str, dict]:
    """The rows of a run's results.jsonl, timings dropped."""
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["id"]: {k: v for k, v in r.items() if k not in ("seconds", "phases")} for r in rows}


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
    return a == b


def test_packed_and_unpacked_api_runs_write_the_same_rows_and_case_files(pool, tmp_path, caplog):
    """The same workers serve both runs: a Keras message listing a Python set's values
    orders it by the worker's hash seed, so two pools may word one error two ways."""
    from audee.fuzz import FuzzConfig, fuzz_apis
    from audee.store.caserecord import CaseRecord

    refs = [w.ref for w in pool.workers.values()]
    runs = {}
    for k in (1, 4):
        cfg = FuzzConfig(refs, tmp_path / f"k{k}", variants=6, batch=4, invalid_prob=0.2, pack=k,
                         dtypes="float32:0.8,bfloat16:0.2")    # bfloat16: onnxruntime refuses it whole
        with caplog.at_level(logging.INFO, logger="audee.engine.packed"):
            stats = fuzz_apis(["Dense", "Conv2D", "Add"], cfg, pool=pool)
        assert stats.run == 18
        runs[k] = _rows(tmp_path / f"k{k}")
    packed = re.search(r"packs of 4: cases (\d+), packed (\d+)", caplog.text)
    assert packed and packed.group(1) == "18" and int(packed.group(2)) >= 6, caplog.text[-2000:]
    assert runs[1].keys() == runs[4].keys() and len(runs[1]) == 18
    assert {i: r for i, r in runs[4].items() if r != runs[1][i]} == {}
    assert not any("pack_only" in r for r in runs[4].values())
    files = [r["case_file"] for r in runs[1].values() if r.get("case_file")]
    for name in files:
        a, b = (CaseRecord.from_file(tmp_path / f"k{k}" / name).to_dict() for k in (1, 4))
        a.pop("created"), b.pop("created")
        assert _same(a, b), name


def test_a_crash_and_a_converter_rejection_are_pinned_on_their_own_cases(pool):
    from audee.engine.execute import Executor
    from audee.engine.packed import PackRunner

    specs = [_dense("c0", 3), _dense("c1", 2, layer="boom"), _dense("c2", 4, dtype="bfloat16"),
             _softmaxed("c3"), _dense("c4", 6)]

    def make(planner, items):
        for spec in items:
            case = _case(spec, seed=int(spec.name[1:]))
            planner.complete_weights(case, weight_seed=int(spec.name[1:]))
            yield case, {"seed": "test"}        # one group: no dtype or invalid flag to tell them apart

    ex = Executor(pool)
    runner = PackRunner(ex, 8)
    results = list(runner.run(specs, make))
    assert [r.case.id for r, _ in results] == ["c0", "c1", "c2", "c3", "c4"]
    assert runner.counts["guided"] >= 1 and runner.counts["one_by_one"] >= 1   # bisection ran on both
    by_id = {r.case.id: r for r, _ in results}
    crash, rejected = by_id["c1"].outcomes, by_id["c2"].outcomes
    assert crash[BOOM].failure.kind == "signal" and crash["jax"].ok and crash["onnxruntime"].ok
    assert Kind.HARD_CRASH in by_id["c1"].verdict.kinds()
    assert rejected["onnxruntime"].failure.phase == "convert" and rejected["jax"].ok and rejected[BOOM].ok
    assert "tf2onnx maps" in rejected["onnxruntime"].failure.message
    assert Kind.DIVERGENT_ACCEPTANCE in by_id["c2"].verdict.kinds()
    assert all(not extra.get("pack_only") for _, extra in results)
    for cid in ("c0", "c2", "c3", "c4"):        # what each gets alone (c1's crash was confirmed alone already)
        got = by_id[cid]
        alone = ex.run(got.case)
        assert got.verdict.to_json() == alone.verdict.to_json() and got.pairs == alone.pairs, cid
        for label, o in alone.outcomes.items():
            mine = got.outcomes[label]
            assert mine.ok == o.ok and (o.ok or (mine.failure.kind, mine.failure.phase, mine.failure.message)
                                        == (o.failure.kind, o.failure.phase, o.failure.message)), (cid, label)
            assert _same(mine.logits, o.logits) and _same(mine.output, o.output) and mine.nonfinite == o.nonfinite
    # a graph onnxruntime refused stays refused on the model's next weight set (no unchecked session)
    again = ex.run(by_id["c2"].case).outcomes["onnxruntime"]
    assert not again.ok and again.failure.phase == "convert"
