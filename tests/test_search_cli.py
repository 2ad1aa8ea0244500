"""The search stage through `audee fuzz`, on the real frameworks."""
from __future__ import annotations

import pytest

import json
import sys

import numpy as np

from audee.store import ResultsTable, load_case
from tests.helpers import run_audee

AUDEE = [sys.executable, "-m", "audee"]


def _run(args, timeout=600):
    """In this process, on the suite's kept workers (:func:`tests.helpers.run_audee`)."""
    return run_audee(args)


def test_nan_fitness_finds_a_nan_on_lenet5_tensorflow_and_it_reproduces(tmp_path):
    """At weight level: the inputs stay the seed's, so the NaN is made inside the model.  (At
    input level the GA reaches NaN on LeNet-5 only by growing the inputs to overflow scale,
    which the NaN oracle counts as propagation, not a failure: docs/oracles.md.)"""
    out = tmp_path / "nan"
    r = _run(["fuzz", "--seed", "lenet5", "--backends", "tensorflow", "--level", "weight", "--fitness", "nan",
              "--relative-scale", "0.5", "--max-iter", "150", "--stop-at-first", "--budget", "300s",
              "--out", str(out), "--no-progress"])
    assert r.returncode == 0, r.stderr[-3000:]
    (search,) = list(ResultsTable(out / "searches.jsonl").rows())
    assert search["failures"] and search["generations"] <= 150 and search["first_failure_s"] is not None
    trace = json.loads((out / "traces" / f"{search['id']}.json").read_text())["trace"]
    assert len(trace) == search["generations"] and trace[-1]["failures"] >= 1
    assert trace[0]["best"] < trace[-1]["best"]                    # the spread was amplified
    case = load_case(out / "cases" / f"{search['failures'][0]}.pkl")
    assert np.isfinite(case["inputs"]["image"]).all()            # the NaN comes from inside the model
    assert case["verdict"]["findings"][0]["kind"] == "nan"
    rep = _run(["reproduce", str(out / "cases" / f"{search['failures'][0]}.pkl")])
    assert rep.returncode == 0 and "verdict holds" in rep.stdout


@pytest.mark.slow  # two searches per variant with a wall-clock budget each
def test_ga_and_random_on_consistent_variants_with_equal_budgets(tmp_path):
    out = tmp_path / "flow"
    r = _run(["fuzz", "--seed", "lstm", "--backends", "tensorflow,jax", "--variants", "3", "--ga-on-consistent", "2",
              "--level", "input-weight", "--search", "ga,random", "--budget", "4s", "--max-iter", "1000",
              "--batch", "8", "--out", str(out), "--no-progress"])
    assert r.returncode == 0, r.stderr[-3000:]
    rows = list(ResultsTable(out / "searches.jsonl").rows())
    passed = [x["id"] for x in ResultsTable(out / "results.jsonl").rows()
              if x["status"] == "pass" and x["variant"] >= 0][:2]
    assert sorted({x["target"] for x in rows}) == sorted(passed)
    assert sorted(x["search"] for x in rows) == sorted(["ga", "random"] * len(passed))
    for x in rows:  # each spent its budget (1000 generations are out of reach in 4 s), whatever the host's speed
        assert x["evaluations"] > 0 and x["stopped"] == "budget", x
    assert "search ga" in r.stdout and "search random" in r.stdout
    again = _run(["fuzz", "--seed", "lstm", "--backends", "tensorflow,jax", "--variants", "3", "--ga-on-consistent",
                  "2", "--level", "input-weight", "--search", "ga,random", "--budget", "4s", "--max-iter", "1000",
                  "--batch", "8", "--out", str(out), "--no-progress"])
    assert again.returncode == 0 and len(list(ResultsTable(out / "searches.jsonl").rows())) == len(rows)  # resumed


def test_search_flags_need_a_level_and_two_backends_for_inconsistency(tmp_path):
    r = _run(["fuzz", "--fitness", "nan", "--out", str(tmp_path)])
    assert r.returncode == 2 and "--fitness needs --level" in r.stderr
    r = _run(["fuzz", "--level", "input", "--backends", "tensorflow", "--out", str(tmp_path)])
    assert r.returncode == 2 and "needs two or more backends" in r.stderr


def test_the_budget_ends_a_search_without_a_generation_cap(tmp_path):
    """No --max-iter: the search runs until --budget is spent (it used to stop after 50
    generations, a few seconds into a 120 s budget)."""
    out = tmp_path / "budget"
    r = _run(["fuzz", "--seed", "lenet5", "--backends", "tensorflow", "--level", "input", "--fitness", "nan",
              "--population", "4", "--parents", "2", "--budget", "3s", "--out", str(out), "--no-progress"])
    assert r.returncode == 0, r.stderr[-3000:]
    (search,) = list(ResultsTable(out / "searches.jsonl").rows())
    assert search["stopped"] == "budget", search  # the budget ended it, not a generation cap
