"""Issue 13 on the real frameworks: phase timings in results rows, and the model /
compiled-call caches never answering for a spec or input shape they were not made for
(one pool of the four built-in backends for the module).  Builds without initializer
work against the old builds: tests/test_lazy_init.py."""
from __future__ import annotations

import json

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.engine.execute import Executor
from audee.fuzz import FuzzConfig, fuzz_apis, summarize
from audee.cases.spec import ModelSpec
from audee.report import load_campaign_dir
from audee.report.write import phase_table
from audee.store import ResultsTable
from audee.store.results import phase_lines

from tests.helpers import tiny_inputs

BUILTIN = ["tensorflow", "torch", "jax", "onnxruntime"]


def spec_of(activation: str = "relu", units: int = 5) -> ModelSpec:
    """Conv + BatchNorm + Dense: kernels, biases and the four BatchNorm variables (two of
    them non-trainable) all have to arrive, in their slots."""
    return ModelSpec.from_json({
        "name": "phases",
        "inputs": [{"name": "image", "shape": [12, 12, 1], "range": [0, 1]}],
        "layers": [
            {"name": "conv", "api": "Conv2D", "params": {"filters": 4, "kernel_size": 3, "activation": activation},
             "inputs": ["image"]},
            {"name": "bn", "api": "BatchNormalization", "params": {}, "inputs": ["conv"]},
            {"name": "pool", "api": "MaxPooling2D", "params": {"pool_size": 2}, "inputs": ["bn"]},
            {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["pool"]},
            {"name": "logits", "api": "Dense", "params": {"units": units, "kernel_initializer": "orthogonal"},
             "inputs": ["flat"]},
            {"name": "softmax", "api": "Softmax", "params": {}, "inputs": ["logits"]},
        ],
        "output": "softmax", "logits": "logits"})


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends(",".join(BUILTIN)), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield p


def case_of(ex: Executor, spec: ModelSpec, weight_seed: int, n: int = 6) -> TestCase:
    case = TestCase(f"c{weight_seed}", spec, {}, tiny_inputs(n, seed=weight_seed))
    ex.complete_weights(case, weight_seed)
    return case


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def test_a_changed_spec_or_batch_is_never_answered_from_the_cache(pool):
    """Two specs of the same weight shapes (only an activation differs), then the first
    again, then other batch sizes: each answer is the one its own spec gives."""
    ex = Executor(pool, diagnose=False)
    a, b = spec_of("relu"), spec_of("tanh")
    assert a.key() != b.key()
    case_a = case_of(ex, a, 3)
    case_b = TestCase("b", b, case_a.weights, case_a.inputs)
    first = ex.run(case_a).outcomes
    other = ex.run(case_b).outcomes
    again = ex.run(case_a).outcomes
    for label in pool.labels:
        assert first[label].ok and other[label].ok, (first[label].failure, other[label].failure)
        assert not np.array_equal(first[label].logits, other[label].logits), label
        assert _bits(first[label].logits) == _bits(again[label].logits), label
    # a new batch size compiles anew; the old one still answers as before
    small = TestCase("a4", a, case_a.weights, {k: v[:4] for k, v in case_a.inputs.items()})
    got_small = ex.run(small).outcomes
    back = ex.run(case_a).outcomes
    for label in pool.labels:
        assert got_small[label].logits.shape[0] == 4
        np.testing.assert_allclose(got_small[label].logits, first[label].logits[:4], rtol=1e-5, atol=1e-6)
        assert _bits(back[label].logits) == _bits(first[label].logits), label


def test_results_rows_carry_phase_timings(pool, tmp_path):
    """A real API-level run: every backend's phases in every row, the phases a backend goes
    through present (the ones that take time positive), the summary's per-backend table over the same rows."""
    out = tmp_path / "run"
    cfg = FuzzConfig(pool_refs(pool), out, variants=3, rng=0, batch=4)
    fuzz_apis(["Dense"], cfg, pool=pool)
    rows = list(ResultsTable(out / "results.jsonl").rows())
    assert len(rows) == 3
    for r in rows:
        phases = r["phases"]
        assert json.loads(json.dumps(phases)) == phases
        for label, status in r["backends"].items():
            if status != "ok":
                continue
            ph = phases[label]
            assert set(ph) <= {"build", "convert", "weights", "compile", "run"}, ph
            assert all(np.isfinite(s) and s >= 0 for s in ph.values()), ph
            # rows keep 0.1 ms: setting a tiny Dense's weights may round to 0.0, but it is charged
            assert "weights" in ph and ph["run"] > 0, (label, ph)
            if label.startswith("onnxruntime"):
                assert ph["convert"] > 0 and ph["compile"] > 0, (label, ph)
            if label.startswith("jax"):
                assert ph["compile"] > 0, (label, ph)
        # each case's build is charged to it once: a new spec per case here
        assert any(ph.get("build", 0) > 0 for ph in phases.values()), phases
    summary = summarize(out)["phases"]
    assert set(summary) == set(pool.labels)
    for label, s in summary.items():
        assert s["cases"] == 3
        assert s["mean_total_s"] == pytest.approx(sum(s["mean_s"].values()), abs=1e-3)
    lines = phase_lines(summary)
    assert len(lines) == 1 + len(pool.labels) and all(label in "".join(lines) for label in pool.labels)
    table = phase_table(load_campaign_dir(out).cases)  # audee report's table, from the same rows
    assert sorted(table["backend"]) == sorted(pool.labels) and (table["cases"] == 3).all()
    for _, t in table.iterrows():
        assert t["total"] == pytest.approx(summary[t["backend"]]["mean_total_s"])


def pool_refs(pool: Pool) -> list:
    return [w.ref for w in pool.workers.values()]


def test_a_weight_level_generation_in_one_request_judges_as_one_request_per_individual(pool):
    """``run_many`` (the generation in one request per backend) against the per-individual
    path it falls back to: the same fitness, pair and suspects for every individual."""
    from audee.search.encoding import Encoding
    from audee.search.evaluate import PopulationEvaluator
    from audee.settings import TIE_MARGIN

    ex = Executor(pool, diagnose=False)
    spec = spec_of()
    case = case_of(ex, spec, 5, n=1)
    enc = Encoding("weight", case.inputs, case.weights, spec.inputs)
    ev = PopulationEvaluator(pool, spec, enc, fitness="inconsistency", labels=pool.labels, tie_margin=TIE_MARGIN)
    base = enc.encode()
    rng = np.random.default_rng(0)
    population = [base + rng.normal(0.0, 0.05, base.shape) for _ in range(3)]
    batched = ev.evaluate(population)
    single = [ev._judge(ev._run(enc.inputs_of(g), enc.weights_of(g), f"one-{i}", f"one-{i}"), 1)[0]
              for i, g in enumerate(population)]
    assert len({e.fitness for e in batched}) == 3  # three different individuals
    for a, b in zip(batched, single):
        assert (a.fitness, a.pair, a.suspect) == (b.fitness, b.pair, b.suspect)
