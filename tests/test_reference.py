"""Precision against a float64 reference (issue 28, audee/reference, audee/oracle/precision.py):
the culprit rule and the precision kind on their own, then a plugin backend that computes one
Dense layer's matmul through bfloat16, on the real frameworks: flagged ``precision``, named
the culprit of its deviations, localized to that layer, reproduced from its case file."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Finding, Kind, TestCase
from audee.equivalence.rules import rules_named, widened
from audee.engine.execute import Executor
from audee.oracle.precision import culprit, mark_culprits, precision_findings
from audee.reference.run import Reference, candidates, reduced, reference_refs
from audee.settings import PRECISION_FACTOR, FuzzSettings
from tests.test_deviation import mlp

ROUNDED = "tests.plugins:Bf16MatmulJax"  # JAX, layer d2's matmul on bfloat16-rounded operands


def _score(score: float) -> dict:
    return {"score": score, "tensor": "logits", "max_abs": 0.0, "max_rel": 0.0, "n_out": int(score > 1), "n": 4,
            "rows": [0] if score > 1 else [], "dtype": "float32", "tolerance": {"rtol": 1e-3, "atol": 1e-5}}


# ---- the rules (no framework) ---------------------------------------------------------------------
def test_the_culprit_is_the_backend_out_of_tolerance_where_another_stays_within():
    assert culprit(["a", "b"], {"a": 5.0, "b": 0.01, "c": 0.02}) == ["a"]
    assert culprit(["a", "b"], {"a": 5.0, "b": 3.0, "c": 0.02}) == ["a", "b"]   # both wrong, c is right
    assert culprit(["a", "b"], {"a": 5.0, "b": 3.0}) == []                      # every backend out: can't tell
    assert culprit(["a", "b"], {"a": 0.5, "b": 0.01}) == []                     # none out
    found = [Finding(Kind.DEVIATION, ["a", "b"], {"pair": "a|b"}), Finding(Kind.NAN, ["a"], {})]
    mark_culprits(found, {"a": 5.0, "b": 0.01})
    assert found[0].detail.culprit == ["a"] and found[0].detail.reference_errors == {"a": 5.0, "b": 0.01}
    assert found[1].detail.to_json().get("culprit") is None


def test_precision_needs_out_of_tolerance_and_many_times_the_best():
    f, = precision_findings({"a": _score(5.0), "b": _score(0.01), "c": _score(0.02)}, PRECISION_FACTOR, "b")
    assert f.kind == Kind.PRECISION and f.backends == ["a"] and f.detail.best == "b"
    assert f.detail.factor == pytest.approx(500) and f.detail.reference == "b"
    # equally wrong backends (an ill-conditioned case): nobody is flagged
    assert precision_findings({"a": _score(5.0), "b": _score(2.0)}, PRECISION_FACTOR, "b") == []
    # within tolerance, however many times the best: no finding
    assert precision_findings({"a": _score(0.9), "b": _score(1e-6)}, PRECISION_FACTOR, "b") == []
    # one backend alone has nothing to be compared with
    assert precision_findings({"a": _score(5.0)}, PRECISION_FACTOR, "a") == []
    # the factor is a setting
    assert len(precision_findings({"a": _score(5.0), "b": _score(1.0)}, 4.0, "b")) == 1
    assert FuzzSettings(reference="float64", precision_factor=3).precision_factor == 3
    from pydantic import ValidationError

    for bad in ({"reference": "float128"}, {"reference_backend": "nonsense"}, {"precision_factor": 0.5},
                {"reference": "float64", "phase": "train"}):
        with pytest.raises(ValidationError):
            FuzzSettings(**bad)


def test_the_reference_model_is_the_float64_rules_model_and_its_candidates_are_keras_backends():
    spec = mlp()
    weights = {"d1": [np.ones((8, 16), np.float32), np.zeros(16, np.float32)]}
    wide, ww = widened(spec, weights, "float64")
    rule = rules_named(("float64",))[0].apply(spec, weights)
    assert wide.to_json() == rule.spec.to_json() and ww["d1"][0].dtype == np.float64  # one way to widen
    assert all(ls.params["dtype"] == "float64" for ls in wide.layers) and wide.inputs[0].dtype == "float64"
    labels = ["onnxruntime", "jax", "torch@cuda", ROUNDED, "tensorflow"]
    assert candidates(labels) == ["jax-x64", "torch@cuda", "tensorflow"]   # JAX's float64: its x64 twin
    assert candidates(labels, "tensorflow") == ["tensorflow", "jax-x64", "torch@cuda"]
    assert not reduced(spec) and reduced(widened(spec, {}, "float16")[0])


# ---- real frameworks ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    refs = parse_backends(f"tensorflow,jax,{ROUNDED}")
    with Pool(refs, tmp_path_factory.mktemp("logs"), timeout=300, reference=reference_refs(refs)) as p:
        assert p.start() == {} and p.labels == [r.label for r in refs]   # jax-x64 computes, runs no case
        yield p


@pytest.fixture(scope="module")
def rounded_case(pool):
    ex = Executor(pool, reference=Reference())
    case = TestCase("mlp-bf16", mlp(), {}, {"x": np.random.default_rng(1).random((16, 8), dtype=np.float32)})
    ex.complete_weights(case, 3)
    return ex.run(case)


def test_a_bfloat16_matmul_is_a_precision_finding_its_culprit_and_its_layer(rounded_case):
    from audee.fuzz import result_row
    from audee.records.rows import parse_row

    result = rounded_case
    ref = result.reference
    assert ref.backend == "tensorflow" and ref.dtype == "float64" and not ref.disputed
    assert not ref.refused and ref.checks["jax-x64"] < 1   # JAX's float64 (x64 in its own worker) cross-checks
    assert ref.errors[ROUNDED] > 1 and ref.errors["tensorflow"] < 0.01 and ref.errors["jax"] < 0.01
    assert "jax-x64" not in ref.errors and "jax-x64" not in result.outcomes   # the run's backends are judged
    prec = [f for f in result.verdict.findings if f.kind == Kind.PRECISION]
    assert [f.backends for f in prec] == [[ROUNDED]]
    d = prec[0].detail
    assert d.reference == "tensorflow" and d.factor > PRECISION_FACTOR and d.best in ("tensorflow", "jax")
    assert d.first_layer == "d2" and d.layer == "d2"                  # d1 is exact; d2 loses it alone
    assert d.layer_errors["d1"] < 1 < d.layer_errors["d2"] and d.own["d2"].score > 1
    assert d.odd == [ROUNDED] and ref.layers[ROUNDED]["d2"] > 1
    devs = [f for f in result.verdict.findings if f.kind == Kind.DEVIATION]
    assert devs and all(f.detail.culprit == [ROUNDED] for f in devs)  # the reference names the wrong one
    from audee.triage.signature import case_signatures

    sigs = case_signatures(result.verdict, result.case.spec)
    assert {s.odd for s in sigs} == {(ROUNDED,)}
    assert any(s.kind == Kind.PRECISION and s.layer == "Dense" for s in sigs)
    row = parse_row(result_row(result, {"seed": "mlp"}).model_dump(mode="json", exclude_unset=True))
    assert row.reference.backend == "tensorflow" and row.reference.errors[ROUNDED] > 1 and "precision" in row.kinds


@pytest.mark.slow  # re-runs and localizes the case (about 15 s)
def test_the_case_file_reruns_and_localizes_it(pool, rounded_case, tmp_path):
    from audee.fuzz import case_record
    from audee.localize.run import localize_case, render
    from audee.repro.rerun import Reproduction
    from audee.store.caserecord import CaseRecord

    path = case_record(rounded_case, pool, {"seed": "mlp"}).to_file(tmp_path / "c.pkl")
    record = CaseRecord.from_file(path)
    assert Reference.recorded(record.meta) == Reference("tensorflow", PRECISION_FACTOR)
    again = Executor(pool, reference=Reference.recorded(record.meta)).run(record.test_case())
    assert Reproduction(record, record.verdict_obj(), again).holds
    assert Kind.PRECISION in again.verdict.kinds()
    report = localize_case(path, pool=pool, allowed_plugins=[ROUNDED])
    assert report.kind == Kind.PRECISION and report.backends == [ROUNDED] and report.reproduced
    assert report.rounds[0].layer == "d2" and "first layer out of tolerance on the float64" in render(report)


@pytest.mark.slow
def test_the_seven_seeds_on_the_four_backends_give_no_precision_finding():
    """The unmutated seeds on the four default backends against the float64 reference: every
    backend within tolerance (measured: the largest error 0.10, MobileNet-V2's output), so no
    ``precision`` finding and no culprit; TensorFlow computes the reference, torch
    cross-checks it, JAX (no x64) answers float32."""
    import tempfile
    from pathlib import Path

    from audee.mutation.seeds import list_seeds, load_seed, with_inputs

    with tempfile.TemporaryDirectory() as tmp, Pool(parse_backends("tensorflow,torch,jax,onnxruntime"),
                                                    Path(tmp)) as pool:
        pool.start_or_fail()
        ex = Executor(pool, reference=Reference())
        for name in list_seeds():
            seed = with_inputs(load_seed(name))
            case = TestCase(name, seed.spec, dict(seed.weights or {}), {k: v[:32] for k, v in seed.inputs.items()})
            ex.complete_weights(case, seed.weight_seed)
            result = ex.run(case)
            ref = result.reference
            assert Kind.PRECISION not in result.verdict.kinds(), (name, result.verdict.to_json())
            assert ref.backend == "tensorflow" and not ref.disputed and "torch" in ref.checks, (name, ref.to_json())
            assert set(ref.errors) == {"tensorflow", "torch", "jax", "onnxruntime"}, (name, ref.to_json())
            assert max(ref.errors.values()) < 0.5, (name, ref.to_json())


def test_the_precision_fitness_is_the_largest_error_against_the_reference():
    from audee.fitness import precision_fitness

    ref = np.array([[1.0, 2.0, 3.0], [1.0, -1.0, 0.5]])
    close = (ref * (1 + 1e-6)).astype(np.float32)
    off = ref.astype(np.float32).copy()
    off[1, 0] += 0.03                                            # 3% of the row's scale off: score ~29
    values, who = precision_fitness({"a": close, "b": off}, ref)
    assert values[0] < 0.01 and who[1] == "b" and values[1] == pytest.approx(0.03 / (1e-5 + 1e-3 * 1.03), rel=1e-3)
    scaled, _ = precision_fitness({"a": close * 1e3, "b": off * 1e3}, ref * 1e3)
    np.testing.assert_allclose(scaled, values, rtol=5e-2)       # normalized: inflating inputs cannot raise it


@pytest.mark.slow  # a GA run (about 45 s on two busy cores)
def test_the_ga_finds_a_large_input_bfloat16_path_from_a_clean_seed(tmp_path):
    """A plugin whose Dense d2 rounds through bfloat16 only when its input exceeds 8 in
    magnitude: on the seed input (d1's outputs below 2.1) every backend is within tolerance;
    the GA with the precision fitness drives the input there and stops at the finding."""
    from audee.search.engine import FIRST_FINDING, Search
    from audee.settings import SearchSettings

    large = "tests.plugins:Bf16LargeMatmulJax"
    with Pool(parse_backends(f"tensorflow,jax,{large}"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        case = TestCase("mlp", mlp(), {}, {"x": np.random.default_rng(1).random((1, 8), dtype=np.float32)})
        ex = Executor(p, reference=Reference())
        ex.complete_weights(case, 3)
        plain = ex.run(case)
        assert not plain.verdict.failed and max(plain.reference.errors.values()) < 0.01
        found = []
        cfg = SearchSettings(level="input", fitness="precision", max_iter=40, budget_s=300, stop_at_first=True)
        out = Search(ex, case, cfg, p.labels, lambda r: (found.append(r), r.case.id)[1], "ga").run()
        assert out.stopped == FIRST_FINDING and out.best_fitness > 1, out.to_json()
        prec = [f for r in found for f in r.verdict.findings if f.kind == Kind.PRECISION]
        assert prec and prec[0].backends == [large] and prec[0].detail.layer == "d2"


def test_a_cross_check_disputes_the_reference_only_when_nobody_corroborates_it():
    from audee.records.reference import ReferenceRun
    from audee.reference.run import disputed

    # torch's float64 run carries its float32 bug: jax and onnxruntime corroborate TensorFlow's reference
    same_bug = ReferenceRun(backend="tensorflow", checks={"torch": 640.0},
                            errors={"tensorflow": 4e-5, "jax": 4e-5, "onnxruntime": 4e-5, "torch": 640.0})
    assert not disputed(same_bug)
    # an ill-conditioned case: every backend out, the two float64 runs apart
    chaotic = ReferenceRun(backend="tensorflow", checks={"torch": 1.4},
                           errors={"tensorflow": 1.2, "jax": 3.6, "onnxruntime": 2.0, "torch": 1.4})
    assert disputed(chaotic)
    # the reference backend's own float32 run does not corroborate it
    assert disputed(ReferenceRun(backend="tensorflow", checks={"torch": 5.0}, errors={"tensorflow": 0.0, "torch": 5.0}))
    assert not disputed(ReferenceRun(backend="tensorflow", checks={"torch": 0.5}, errors={"tensorflow": 3.0}))
