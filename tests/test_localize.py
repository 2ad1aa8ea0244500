"""Localization on the real frameworks: a fast subset of the ground-truth corpus, and the
`python -m audee.localize` command on case files."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from audee.core.errors import ConfigError
from localize.scorer import load_corpus, run_entry, summarize
from audee.localize import LocalizeConfig
from tests.helpers import run_audee

FAST = ["lenet5-conv2-relu", "lenet5-conv1-relu-torch", "lenet5-bias-fault-not-triggered"]  # the rest: make localize-bench


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    entries = {e.id: e for e in load_corpus()}
    out = []
    for name in FAST:
        out.append(run_entry(entries[name], tmp_path_factory.mktemp(name), LocalizeConfig()))
    return out


def test_fast_corpus_subset_is_localized_exactly(rows):
    s = summarize(rows)
    assert s["top1_precision"] == 1.0 and s["top1_recall"] == 1.0, rows
    assert s["candidates_per_case"] <= 1.5
    assert s["control_false_positives"] == 0


@pytest.mark.slow
def test_the_top_candidates_repro_script_runs_standalone_and_reproduces(tmp_path):
    # a real bug, no fault plugin: TensorFlow's CPU kernels refuse a dilated transposed convolution
    entry = {e.id: e for e in load_corpus()}["lenet5-convtranspose-dilation-reject-tf"]
    row = run_entry(entry, tmp_path, LocalizeConfig(), repro=True)
    assert row["correct"], row
    rep = row["repro"]
    assert rep["written"] and rep["script"].endswith(".py"), rep
    assert rep["rc"] == 0 and rep["line"].startswith("REPRODUCED"), rep
    assert summarize([row])["repro_reproduced"] == 1


def test_corpus_file_is_schema_checked(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("cases:\n  - id: x\n    seed: lenet5\n    fault: a:B\n    truth: {layer: conv1}\n")
    with pytest.raises(ConfigError, match=r"c.yaml: cases\[0\]: a case needs truth: \{layer, param\}"):
        load_corpus(bad)
    bad.write_text("cases:\n  - id: x\n    seed: lenet5\n    truth: {layer: conv1, param: padding}\n")
    with pytest.raises(ConfigError, match=r"cases\[0\]: a case needs a fault or backends"):
        load_corpus(bad)
    bad.write_text("cases:\n  - id: x\n    seed: lenet5\n    colour: red\n")
    with pytest.raises(ConfigError, match=r"cases\[0\].colour: unknown key"):
        load_corpus(bad)


def _localize(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audee.localize", *args], capture_output=True, text=True,
                          timeout=600)


FAULT = "localize.faults:LstmHardSigmoid"


@pytest.fixture(scope="module")
def lstm_case(tmp_path_factory) -> Path:
    """A real inconsistency case file: the LSTM gate fault against TensorFlow."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.fuzz import case_record
    from audee.mutation.seeds import load_seed
    from audee.store import save_case

    tmp = tmp_path_factory.mktemp("lstm")
    seed = load_seed("lstm")
    with Pool(parse_backends("tensorflow,localize.faults:LstmHardSigmoid"), tmp) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        case = TestCase("lstm-gates", seed.spec, dict(seed.weights), {k: v[:64] for k, v in seed.inputs.items()})
        result = ex.run(case)
        assert result.verdict.failed
        return save_case(tmp / "case.pkl", case_record(result, pool, {"seed": "lstm"}))


@pytest.mark.slow  # a full localization of an LSTM case; the ranking rules run in tests/test_localize_rules.py
def test_python_m_audee_localize_names_layer_and_parameter(lstm_case):
    r = _localize(str(lstm_case), "--allow-plugin", FAULT)  # a case file cannot choose a plugin by itself
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert "change rate" in r.stdout and "* lstm (LSTM) recurrent_activation" in r.stdout
    assert "CRADLE" in r.stdout
    assert "candidates (top " in r.stdout and "share " in r.stdout  # the top candidates with their evidence
    j = _localize(str(lstm_case), "--json", "--top-k", "2", "--allow-plugin", FAULT)
    report = json.loads(j.stdout)
    assert report["sources"][0]["layer"] == "lstm" and report["sources"][0]["param"] == "recurrent_activation"
    top = report["candidates"][0]
    assert top["param"] == "recurrent_activation" and top["named"] and 0 < top["evidence"]["share"] <= 1
    assert all(t["verdict"] in ("removed", "fails", "crash", "nan", "unbuildable")
               for rnd in report["rounds"] for t in rnd["trials"])


def test_a_case_that_no_longer_reproduces_has_its_own_exit_code(lstm_case):
    # no fault: the pair agrees (in this process, on the suite's kept workers)
    r = run_audee(["localize", str(lstm_case), "--backends", "tensorflow,jax"])
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    assert "does NOT reproduce" in r.stdout


def test_foreign_or_malformed_case_files_are_refused(tmp_path):
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps({"format": "audee.case/1", "x": Path("/")}))
    r = _localize(str(evil))
    assert r.returncode == 2 and "refusing to load pathlib" in r.stderr and r.stderr.count("\n") == 1
    junk = tmp_path / "junk.pkl"
    junk.write_text("hello")
    r = _localize(str(junk))
    assert r.returncode == 2 and "not an audee case file" in r.stderr
