"""One place for each decision, settings passed down whole, every search saying why it stopped.

* the case's main failure and "the verdict still holds" are each one function
  (:mod:`audee.oracle.verdicts`), which reproduce, localize and repro call;
* the standalone repro script's copy of the judging logic (it may not import audee) gives
  the package's answers on the same arrays;
* the fuzz and search settings are frozen; the search plan is one pydantic model whose
  errors are the CLI's one-line ``--flag: message``;
* a real GA search (TensorFlow, a tiny CNN, tiny budgets) records why it stopped in its
  ``searches.jsonl`` row and its trace: ``budget``, ``max_iter``, ``first_finding``,
  ``interrupted`` (and an interrupted search runs again on resume).
"""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from audee.cases.case import Finding, Kind, TestCase, Verdict
from audee.core.errors import AudeeError
from audee.settings import FuzzSettings, SearchPlan, SearchSettings
from audee.oracle.verdicts import MAIN_FAILURE_ORDER, finding_holds, main_failure, verdict_holds
from tests.test_repro import gelu_record, load_module

ROOT = Path(__file__).resolve().parents[1]


def F(kind: str, *backends: str, **detail) -> Finding:
    return Finding(kind, list(backends), dict(detail))


# ---- the case's main failure ---------------------------------------------------------------------
def test_main_failure_follows_one_order():
    dev, flip = F(Kind.DEVIATION, "tensorflow", "jax"), F(Kind.INCONSISTENCY, "tensorflow", "jax")
    crash, nan = F(Kind.HARD_CRASH, "torch"), F(Kind.NAN, "jax")
    rejected = F(Kind.CONSISTENT_REJECTION, "tensorflow", "jax")
    assert main_failure([dev, crash, flip, nan]) is flip       # a label flip first (it also deviates)
    assert main_failure([dev, crash, nan]) is nan
    assert main_failure([dev, crash]) is crash
    assert main_failure([dev, rejected]) is dev
    assert main_failure([rejected]) is None and main_failure([]) is None
    assert main_failure([flip, dev, F(Kind.DEVIATION, "torch", "jax")], pair=["jax", "torch"]).backends == \
        ["torch", "jax"]
    assert MAIN_FAILURE_ORDER[0] == Kind.INCONSISTENCY and set(MAIN_FAILURE_ORDER) == set(Kind.FAILURES)


def test_repro_writes_its_script_for_the_main_failure():
    from audee.repro import pick_finding

    rec = gelu_record(backends="tensorflow,jax")
    rec.verdict = {"status": "fail", "findings": [
        {"kind": "deviation", "backends": ["tensorflow", "jax"], "detail": {"pair": "tensorflow|jax"}},
        {"kind": "inconsistency", "backends": ["tensorflow", "jax"], "detail": {"pair": "tensorflow|jax"}}]}
    got = pick_finding(rec)
    assert got.kind == Kind.INCONSISTENCY == main_failure(rec.verdict_obj().findings).kind
    assert pick_finding(rec, 0).kind == Kind.DEVIATION       # an explicit index still wins


# ---- the verdict still holds ----------------------------------------------------------------------
def test_a_failure_holds_on_the_same_kind_and_backends():
    flip = F(Kind.INCONSISTENCY, "tensorflow", "jax")
    assert finding_holds(flip, [F(Kind.INCONSISTENCY, "jax", "tensorflow")])
    assert not finding_holds(flip, [F(Kind.INCONSISTENCY, "tensorflow", "torch")])
    assert not finding_holds(flip, [F(Kind.DEVIATION, "tensorflow", "jax")])
    nan = F(Kind.NAN, "tensorflow", "jax")   # NaN: on any backend it names
    assert finding_holds(nan, [F(Kind.NAN, "jax")]) and finding_holds(nan, [F(Kind.NAN, "jax", "torch")])
    assert not finding_holds(nan, [F(Kind.NAN, "torch")])


def test_a_verdict_holds_when_every_recorded_failure_does():
    rec = Verdict([F(Kind.INCONSISTENCY, "tensorflow", "jax"), F(Kind.CONSISTENT_REJECTION, "torch")])
    assert verdict_holds(rec, Verdict([F(Kind.INCONSISTENCY, "jax", "tensorflow"), F(Kind.NAN, "torch")]))
    assert not verdict_holds(rec, Verdict([]))
    assert verdict_holds(Verdict([F(Kind.CONSISTENT_REJECTION, "torch")]), Verdict([]))  # no failure recorded
    two = Verdict([F(Kind.HARD_CRASH, "torch"), F(Kind.NAN, "jax")])
    assert not verdict_holds(two, Verdict([F(Kind.HARD_CRASH, "torch")]))


def test_reproduce_says_what_the_rule_says():
    from audee.engine.execute import Result
    from audee.repro.rerun import Reproduction

    case = TestCase("c", None, {}, {})
    recorded = Verdict([F(Kind.NAN, "tensorflow", "jax")])
    for now in (Verdict([F(Kind.NAN, "jax")]), Verdict([F(Kind.NAN, "torch")]), Verdict([])):
        assert Reproduction(None, recorded, Result(case, now, {})).holds == verdict_holds(recorded, now)


def test_no_command_keeps_its_own_rule():
    """reproduce, localize and repro ask audee.oracle.verdicts; none compares signatures or ranks
    kinds itself."""
    for rel in ("audee/repro/rerun.py", "audee/localize/run.py", "audee/repro/__init__.py"):
        text = (ROOT / rel).read_text()
        assert "signatures() <=" not in text and "PRIORITY" not in text and "KINDS = (" not in text, rel
        assert "from audee.oracle.verdicts import" in text, rel
    assert "verdict_holds(" in (ROOT / "audee/repro/rerun.py").read_text()
    run = (ROOT / "audee/localize/run.py").read_text()
    assert "main_failure(" in run and "verdict_holds(" in run
    repro = (ROOT / "audee/repro/__init__.py").read_text()
    assert "main_failure(" in repro and "finding_holds(" in repro


# ---- the repro script's copy of the judging logic -------------------------------------------------
@pytest.fixture(scope="module")
def script(tmp_path_factory):
    """A written repro script, imported (its judging functions; nothing runs)."""
    from audee.repro import write_repro

    return load_module(write_repro(gelu_record(), tmp_path_factory.mktemp("script"), "gelu").script)


def _pairs(seed: int):
    """Output pairs that exercise every branch of the rules: flips, ties, NaN/Inf rows,
    a single output, an empty output, large values, reduced precision."""
    r = np.random.default_rng(seed)
    for shape in ((64, 10), (16, 1), (8, 0), (32, 3, 2)):
        a = r.standard_normal(shape).astype("float32")
        b = (a + r.normal(0, 0.05, shape)).astype("float32")
        if a.size:
            a.reshape(shape[0], -1)[1] = a.reshape(shape[0], -1)[1, 0]     # a row of ties
            b.reshape(shape[0], -1)[2, 0] = np.nan
            a.reshape(shape[0], -1)[3, -1] = np.inf
            b.reshape(shape[0], -1)[4] *= 1e30
            b.reshape(shape[0], -1)[5] = b.reshape(shape[0], -1)[5, ::-1]   # a label flip
        yield a, b
        with np.errstate(over="ignore"):  # 1e30 is inf in float16: one more non-finite row
            yield a.astype("float16"), b.astype("float16")
            yield a, b.astype("float16")


@pytest.mark.parametrize("seed", range(5))
def test_the_scripts_label_flips_are_the_packages(script, seed):
    from audee.oracle.deviation import pair_compute, relative_tie_margin
    from audee.oracle.labels import label_flips

    for a, b in _pairs(seed):
        for modes in (("full", "full"), ("tf32", "full")):
            compute = pair_compute(*modes)
            rel = relative_tie_margin(a, b, None, compute)
            script.CASE["precisions"] = {"a": modes[0], "b": modes[1]}
            assert script.relative_tie_margin(a, b, compute) == rel, (a.dtype, b.dtype, compute)
            for margin in (0.0, 1e-5, 0.05):
                want = np.flatnonzero(label_flips(a, b, margin, rel).flips).tolist()
                assert script.label_flips(a, b, margin, rel).tolist() == want, (a.shape, a.dtype, margin, rel)


@pytest.mark.parametrize("seed", range(5))
def test_the_scripts_normalized_error_is_the_packages(script, seed):
    from audee.oracle.deviation import finite_rows, normalized_error

    for a, b in _pairs(seed):
        if not a.size or a.dtype != b.dtype:
            continue
        for rtol, atol in ((1e-3, 1e-5), (1e-2, 0.0), (0.0, 1e-3)):
            err, rows = script.normalized_error(a, b, rtol, atol)
            keep = np.flatnonzero(finite_rows(a, b))
            assert rows.tolist() == keep.tolist()
            want = normalized_error(a[keep], b[keep], (rtol, atol))
            assert np.allclose(err, want, rtol=1e-12, atol=0), (a.shape, rtol, atol)
            assert ((err > 1).sum(axis=1) > 0).tolist() == ((want > 1).sum(axis=1) > 0).tolist()


def test_the_scripts_nonfinite_layers_are_the_workers(script):
    from audee.backends.worker import _nonfinite

    order = [s["name"] for s in script.MODEL["layers"]]
    r = np.random.default_rng(0)
    for trial in range(20):
        outs = [r.standard_normal((4, 3)).astype("float32") for _ in order]
        for k in r.choice(len(order), size=trial % len(order), replace=False):
            outs[k][r.integers(4), r.integers(3)] = [np.nan, np.inf, -np.inf][trial % 3]
        names = [n for n, _ in script.nonfinite(dict(zip(order, outs)))]
        assert names == _nonfinite(order, outs)[0]


# ---- settings passed down whole -------------------------------------------------------------------
def test_settings_are_frozen():
    from audee.fuzz import FuzzConfig

    cfg = FuzzConfig([], "/tmp/out", variants=3)
    plan = SearchPlan(SearchSettings(level="input"), ["ga"], 2)
    for obj, name, value in ((FuzzSettings(), "tie_margin", 0.5), (cfg, "variants", 4),
                             (SearchSettings(), "budget_s", 1.0), (plan, "on_consistent", 3),
                             (plan.config, "level", "weight")):
        with pytest.raises(ValidationError, match="frozen"):
            setattr(obj, name, value)
    assert plan.config.model_copy(update={"search": "random"}).search == "random"   # a copy, not a change


def test_fuzz_reads_the_judging_settings_in_one_place():
    """The tie margin and tolerances travel inside the settings object, in its judging
    section: the levels read them once (``judging``) for every level's runner and the case
    files alike."""
    from audee.fuzz import FuzzConfig, judging

    texts = [p.read_text() for p in [ROOT / "audee/fuzz.py", *sorted((ROOT / "audee/levels").rglob("*.py"))]]
    assert sum(t.count("cfg.judging.tie_margin") for t in texts) == 1       # the judging section, read once
    assert sum(t.count("cfg.judging.tolerances") for t in texts) == 1
    assert not any("cfg.tie_margin" in t or "cfg.tolerances()" in t for t in texts)   # not by its flat alias
    cfg = FuzzConfig([], "/tmp/out", tie_margin=0.25, float32_rtol=0.5)
    assert judging(cfg) == {"tie_margin": 0.25, "tolerances": cfg.tolerances()}
    assert judging(cfg)["tolerances"]["float32"]["rtol"] == 0.5


# ---- the search plan: one model, one-line errors ----------------------------------------------------
@pytest.mark.parametrize("settings, plan, backends, line", [
    ({"fitness": "nan"}, {}, ["tensorflow"], "--level: --fitness needs --level (input, weight or input-weight)"),
    ({}, {"searches": "ga"}, ["tensorflow"], "--level: --search needs --level"),
    ({}, {"on_consistent": 2}, ["tensorflow"], "--level: --ga-on-consistent needs --level"),
    ({"level": "input"}, {}, ["tensorflow"],
     "--backends: the inconsistency fitness needs two or more backends (or use --fitness nan)"),
    ({"level": "input", "fitness": "nan", "nan_backend": "jax"}, {}, ["tensorflow"],
     "--nan-backend: 'jax' is not among --backends"),
    ({"level": "input"}, {"searches": "ga,annealing"}, ["tensorflow", "jax"],
     "--search: expected ga, random or ga,random, got 'ga,annealing'"),
    ({"level": "input"}, {"on_consistent": 0}, ["tensorflow", "jax"], "--ga-on-consistent: must be >= 1, got 0"),
    ({"level": "input"}, {"input_index": -1}, ["tensorflow", "jax"], "--input-index: must be >= 0, got -1"),
    ({"level": "input", "parents": 30}, {}, ["tensorflow", "jax"], "--parents: must be between 1 and population"),
])
def test_search_plan_errors_are_one_line_naming_the_flag(settings, plan, backends, line):
    with pytest.raises(AudeeError) as exc:
        SearchPlan.from_options({}, settings, plan, backends)
    assert str(exc.value).startswith(line) and "\n" not in str(exc.value)


def test_search_plan_from_flags_and_from_a_campaign_are_the_same_model():
    plan = SearchPlan.from_options({"population": 8}, {"level": "weight"},
                                   {"searches": "ga,random", "on_consistent": 2}, ["tensorflow", "jax"], rng=3)
    assert (plan.searches, plan.on_consistent, plan.input_index) == (["ga", "random"], 2, None)
    assert (plan.config.level, plan.config.population, plan.config.rng) == ("weight", 8, 3)
    assert SearchPlan.from_options({}, {}, {}, ["tensorflow"]) is None           # no --level: no search
    same = SearchPlan(plan.config, ["ga", "random"], 2)                            # a campaign unit's form
    assert same == plan and same.to_json() == plan.to_json()
    with pytest.raises(ValidationError):
        SearchPlan(plan.config, [], 1)


def test_search_plan_errors_through_the_cli(tmp_path):
    r = subprocess.run([sys.executable, "-m", "audee", "fuzz", "--level", "input", "--backends", "tensorflow,jax",
                        "--ga-on-consistent", "0", "--out", str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and r.stderr == "audee: error: --ga-on-consistent: must be >= 1, got 0\n", r.stderr
    cfg = tmp_path / "s.yaml"
    cfg.write_text("level: input\npopulation: 0\n")
    r = subprocess.run([sys.executable, "-m", "audee", "fuzz", "--search-config", str(cfg), "--backends",
                        "tensorflow,jax", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "population: must be >= 1, got 0" in r.stderr


# ---- every search says why it stopped (a real GA on TensorFlow) -------------------------------------
@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends("tensorflow"), tmp_path_factory.mktemp("logs")) as pool:
        assert pool.start() == {}
        yield Executor(pool)


def _search(ex, out: Path, save=None, **settings):
    """One GA search run through the search stage (rows, traces); its searches.jsonl rows."""
    from audee.search.runner import Target, run_searches
    from audee.store import ResultsTable, RunStore
    from tests.helpers import tiny_cnn, tiny_inputs

    case = TestCase("tiny", tiny_cnn(), {}, tiny_inputs(1))
    ex.complete_weights(case, 0)
    target = Target("tiny-seed", case.spec, case.weights, {"seed": "tiny"})
    plan = SearchPlan(SearchSettings(**{"fitness": "nan", "population": 4, "parents": 2, **settings}), ["ga"])
    saved = save or (lambda result, extra: result.case.id)
    run_searches(ex, [target], case.inputs, plan, RunStore(out), saved)
    return list(ResultsTable(out / "searches.jsonl").rows())


def _trace(out: Path, row: dict) -> dict:
    return json.loads((out / "traces" / f"{row['id']}.json").read_text())


def test_a_search_records_budget_and_max_iter(ex, tmp_path):
    (row,) = _search(ex, tmp_path / "b", level="input", budget_s=0.001)
    assert row["stopped"] == "budget" and row["generations"] == 1
    assert _trace(tmp_path / "b", row)["stopped"] == "budget"
    (row,) = _search(ex, tmp_path / "m", level="input", budget_s=120, max_iter=2)
    assert row["stopped"] == "max_iter" and row["generations"] == 2
    assert _trace(tmp_path / "m", row)["stopped"] == "max_iter"


# as tests/test_search.py's weight-level NaN search: it reaches NaN well within 200 generations
NAN_SEARCH = dict(level="weight", population=8, parents=3, relative_scale=1.0, max_iter=200, budget_s=120,
                  stop_at_first=True, rng=0)


def test_a_search_records_its_first_finding_and_an_interrupt(ex, tmp_path):
    """An interrupt (here from the saving callback, as Ctrl-C would land) writes the row and
    trace, stopped ``interrupted``, and goes on; a resumed run searches again."""
    from audee.search.runner import finished_ids
    from audee.store import ResultsTable, RunStore

    out = tmp_path / "i"

    def interrupted(result, extra):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _search(ex, out, interrupted, **NAN_SEARCH)
    (row,) = list(ResultsTable(out / "searches.jsonl").rows())
    assert row["stopped"] == "interrupted" and row["generations"] >= 0
    assert _trace(out, row)["stopped"] == "interrupted"
    assert finished_ids(RunStore(out).search_runs()) == set()
    rows = _search(ex, out, **NAN_SEARCH)                        # resumed: run again, to its first finding
    assert [r["stopped"] for r in rows] == ["interrupted", "first_finding"] and rows[1]["failures"]
    assert _trace(out, rows[1])["stopped"] == "first_finding"
    assert finished_ids(RunStore(out).search_runs()) == {rows[1]["id"]}
    assert _search(ex, out, **NAN_SEARCH) == rows                 # resumed again: nothing left to do


def test_the_stop_reasons_are_the_engines():
    from audee.search import engine

    assert engine.STOP_REASONS == ("budget", "max_iter", "first_finding", "interrupted")
    assert "stopped" in inspect.signature(engine.SearchOutcome).parameters
