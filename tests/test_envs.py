"""A backend in another environment (``torch@prev``: another Python interpreter) and version
pairs judged as regression pairs (audee.backends.registry, audee.oracle.regression).

The rules run on plain data first.  Then, on real versions: ``.venv-prev`` (``make
env-prev``: the previous Keras minor beside .venv's TensorFlow, torch and JAX) runs a torch
worker beside the default one.  Two results changed between Keras 3.14 and 3.15 on torch
(keras/src/backend/torch/numpy.py: ``median`` returned the lower middle value of an
even-length reduction, now their mean; keras/src/activations/activations.py: ``relu`` with a
threshold multiplied by a 0/1 mask, so -inf became NaN, now selects 0): each is flagged as a
``regression`` naming the newer release.  Without the environment those tests skip with a
line saying so (and fail under ``CI=true``, where ``.ci/run`` builds it).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.backends.pool import WORKER_NEEDS, Pool
from audee.backends.registry import (BackendRef, backend_label, default_env_label, env_of, parse_backends, parse_envs,
                                     split_label)
from audee.cases.case import Finding, Kind, Outcome, TestCase, Verdict
from audee.core.errors import AudeeError, BackendUnavailable, CaseFileError, ConfigError
from audee.oracle.odd import mark_odd
from audee.oracle.pairs import in_contract, release, version_component, version_pair, version_sides
from audee.oracle.regression import regression_findings
from audee.settings import CampaignSettings, check_backend_name, validate_settings
from audee.store import CaseRecord
from audee.triage.rootcause import classify
from audee.triage.signature import case_signatures
from tests.helpers import tiny_cnn

ROOT = Path(__file__).resolve().parent.parent
PREV = Path(os.environ.get("AUDEE_PREV_PYTHON") or ROOT / ".venv-prev" / "bin" / "python")
TORCH = "audee.backends.keras_backends:TorchBackend"
NEW = {"keras": "3.15.1", "torch": "2.13.0+cpu"}
OLD = {"keras": "3.14.1", "torch": "2.13.0+cpu"}
VERSIONS = {"torch": NEW, "torch@prev": OLD, "tensorflow": {"keras": "3.15.1", "tensorflow": "2.21.0"}}


# ---- labels and environments ---------------------------------------------------------------------
def test_a_label_names_its_environment_before_its_device():
    assert split_label("torch@prev") == ("torch", "prev", "")
    assert split_label("torch@cuda:0:tf32") == ("torch", None, "cuda:0:tf32")
    assert split_label("jax@prev@cuda:tf32") == ("jax", "prev", "cuda:tf32")
    assert backend_label("jax", "cuda", "tf32", "prev") == "jax@prev@cuda:tf32"
    assert backend_label("torch", "cpu", env="prev") == "torch@prev"
    assert default_env_label("jax@prev@cuda") == "jax@cuda" and default_env_label("torch") is None
    assert env_of("torch@prev") == "prev" and env_of("torch@cuda") is None


def test_backends_in_an_environment_run_under_its_interpreter():
    envs = parse_envs([f"prev={sys.executable}"])
    refs = parse_backends("torch,torch@prev,jax@prev@cuda", envs=envs)
    assert [r.label for r in refs] == ["torch", "torch@prev", "jax@prev@cuda"]
    assert refs[0].python is None and refs[1].python == refs[2].python == os.path.abspath(sys.executable)
    assert (refs[1].env, refs[1].target, refs[2].device) == ("prev", TORCH, "cuda")
    # config.json: an environment and its interpreter only where there is one (older run dirs resume)
    assert refs[0].to_json() == {"label": "torch", "target": TORCH, "device": "cpu", "precision": "full"}
    assert refs[1].to_json()["python"] == os.path.abspath(sys.executable)


@pytest.mark.parametrize("given, words", [
    (["nope=/no/such/python"], "--env: environment 'nope': /no/such/python is not an executable file"),
    (["cuda=/bin/sh"], "--env: 'cuda' cannot name an environment"),
    (["prev"], "--env: expected NAME=/path/to/python, got 'prev'"),
    ([f"prev={sys.executable}", f"prev={sys.executable}"], "--env: environment 'prev' declared twice"),
])
def test_a_bad_environment_is_one_line(given, words):
    with pytest.raises(AudeeError) as e:
        parse_envs(given)
    assert str(e.value).startswith(words) and "\n" not in str(e.value)


def test_an_undeclared_environment_is_one_line():
    with pytest.raises(AudeeError) as e:
        parse_backends("torch,torch@next", envs=parse_envs([f"prev={sys.executable}"]))
    assert str(e.value) == ("--backends: unknown device or environment 'next' in 'torch@next' (devices: cpu, cuda, "
                            "cuda:N; environments declared: prev): to run it in an environment, give "
                            "--env next=/path/to/python (or envs: in a campaign file)")


def test_a_campaign_declares_its_environments(tmp_path):
    run = {"ops": ["median"], "backends": [["torch", "torch@prev"]]}
    ok = validate_settings(CampaignSettings, {"name": "v", "runs": [run], "envs": {"prev": sys.executable}})
    assert ok.envs == {"prev": os.path.abspath(sys.executable)}
    assert check_backend_name("torch@prev@cuda:tf32") == "torch@prev@cuda:tf32"
    with pytest.raises(ConfigError) as e:
        validate_settings(CampaignSettings, {"name": "v", "runs": [run]}, "c.yaml")
    assert str(e.value) == ("c.yaml: runs[0].backends[0][1]: unknown device or environment 'prev' in 'torch@prev' "
                            "(devices: cpu, cuda, cuda:N; environments: those envs: declares, none)")
    with pytest.raises(ConfigError) as e:
        validate_settings(CampaignSettings, {"name": "v", "runs": [run], "envs": {"prev": str(tmp_path)}}, "c.yaml")
    assert str(e.value).startswith(f"c.yaml: envs.prev: environment 'prev': {tmp_path} is not an executable file")
    from audee.campaign import load_campaign
    from audee.campaign.runner import unit_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({"name": "v", "runs": [run], "envs": {"prev": sys.executable}}))
    unit = load_campaign(cfg).units[0]
    fuzz_cfg, _ = unit_config(unit, tmp_path / "u")
    assert [(r.label, r.python) for r in fuzz_cfg.backends] == [("torch", None),
                                                                ("torch@prev", os.path.abspath(sys.executable))]


# ---- the version pair --------------------------------------------------------------------------
def test_the_older_release_is_the_reference_of_a_version_pair():
    assert version_pair("torch", "torch@prev") and version_pair("jax@cuda", "jax@next@cuda")
    assert not version_pair("torch", "jax@prev") and not version_pair("torch@cuda", "torch@prev")
    assert release("2.13.0+cpu") == (2, 13, 0) and release("nightly") is None
    assert version_sides("torch", "torch@prev", VERSIONS) == ("torch@prev", "torch")
    assert version_sides("torch@prev", "torch", VERSIONS) == ("torch@prev", "torch")
    assert version_component("torch@prev", "torch", VERSIONS) == "keras 3.15.1 vs 3.14.1 on torch"
    both_ways = {"torch": {"keras": "3.15.1", "torch": "2.12.0"}, "torch@prev": OLD}
    assert version_sides("torch", "torch@prev", both_ways) is None          # keras newer here, torch there
    assert version_sides("torch", "torch@prev", {"torch": NEW, "torch@prev": NEW}) is None  # nothing differs
    # NaN/Inf inputs are in the contract of a release judged against the older one
    assert in_contract(["torch"], ["torch", "torch@prev"]) and not in_contract(["torch"], ["torch", "jax"])


def _dev(a: str, b: str, **detail) -> Finding:
    return Finding(Kind.DEVIATION, [a, b], {"pair": f"{a}|{b}", "score": 9.0, "tensor": "output",
                                            "own_layers": ["conv"], **detail})


def test_a_version_pairs_deviation_becomes_a_regression_of_the_newer_release():
    cross = _dev("tensorflow", "torch@prev")
    found = regression_findings([_dev("torch", "torch@prev"), cross], VERSIONS)
    assert [f.kind for f in found] == [Kind.DEVIATION, Kind.REGRESSION] and found[0] is cross
    r = found[1]
    assert r.backends == ["torch@prev", "torch"] and r.detail.newer == "torch" and r.detail.odd == ["torch"]
    assert r.detail.component == "keras 3.15.1 vs 3.14.1 on torch"
    assert r.detail.changed == {"keras": ["3.14.1", "3.15.1"]}
    assert (r.detail.seen, r.detail.layer, r.detail.score, r.detail.tensor) == (["deviation"], "conv", 9.0, "output")
    assert r.detail.evidence[0]["kind"] == "deviation" and r.detail.evidence[0]["detail"]["pair"] == "torch|torch@prev"
    # not a failure (rounding no layer shows alone), or no version pair: nothing changes
    acc = Finding(Kind.DEVIATION_ACCUMULATED, ["torch", "torch@prev"], {"pair": "torch|torch@prev"})
    assert regression_findings([acc], VERSIONS) == [acc]
    assert regression_findings([cross], {"tensorflow": {}, "torch@prev": OLD}) == [cross]


def test_every_kind_of_difference_between_the_releases_is_one_regression():
    ok = {"accepted": ["torch"], "errors": {"torch@prev": {"phase": "run", "message": "IndexError: out of range"}}}
    refused = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch@prev"], ok)
    found = regression_findings([refused], VERSIONS)
    assert [f.kind for f in found] == [Kind.REGRESSION]  # the pair's alone: folded in
    assert (found[0].detail.message, found[0].detail.phase, found[0].detail.seen) == \
        ("IndexError: out of range", "run", ["divergent_acceptance"])
    # a NaN pattern a third backend shares stays beside the regression: it speaks of all three
    nan = Finding(Kind.NAN, ["tensorflow", "torch", "torch@prev"],
                  {"patterns": {"tensorflow|torch": {"elements": 1}, "torch|torch@prev": {"elements": 1}}})
    found = regression_findings([nan], VERSIONS)
    assert [f.kind for f in found] == [Kind.NAN, Kind.REGRESSION] and found[1].detail.seen == ["nan"]
    cleared = Finding(Kind.NAN, ["torch", "torch@prev"], {"patterns": {"torch|torch@prev": {"cleared": "rounding"}}})
    assert regression_findings([cleared], VERSIONS) == [cleared]
    # one side crashed, the other ran: a regression beside the crash; both crashed: none
    crash = Finding(Kind.HARD_CRASH, ["torch"], {"how": "signal", "phase": "run", "message": "SIGSEGV"})
    assert [f.kind for f in regression_findings([crash], VERSIONS)] == [Kind.HARD_CRASH, Kind.REGRESSION]
    both = [crash, Finding(Kind.HARD_CRASH, ["torch@prev"], {"how": "signal"})]
    assert regression_findings(both, VERSIONS) == both
    # versions that do not order the pair: both named, no odd one
    unordered = regression_findings([_dev("torch", "torch@prev")], {"torch": NEW, "torch@prev": NEW})[0]
    assert unordered.backends == ["torch", "torch@prev"]
    assert unordered.detail.odd == [] and unordered.detail.newer is None


def test_the_odd_marking_names_the_newer_release_and_the_signature_the_version_pair():
    r = regression_findings([_dev("torch", "torch@prev")], VERSIONS)[0]
    r.detail.odd = None
    mark_odd([Outcome("torch"), Outcome("torch@prev")], [r])
    assert (r.detail.odd, r.detail.odd_rule) == (["torch"], "the newer release, judged against the older")
    spec = tiny_cnn()
    sig, = case_signatures(Verdict([r]), spec, {})
    assert sig.kind == "regression" and sig.odd == ("torch",) and sig.component == "keras 3.15.1 vs 3.14.1 on torch"
    assert sig.key() == "regression | Conv2D | - | torch | - | keras 3.15.1 vs 3.14.1 on torch"
    assert classify(sig) == ("bug", "no rule clears it")
    # NaN/Inf in the input: the newer release must still compute what the older computed
    r.detail.input_nonfinite = True
    sig, = case_signatures(Verdict([r]), spec, {})
    assert "nonfinite_input" in sig.context and classify(sig)[0] == "bug"


# ---- case files ------------------------------------------------------------------------------------
def _record(tmp_path: Path) -> Path:
    refs = [BackendRef("torch", TORCH, "cpu"), BackendRef("torch@prev", TORCH, "cpu", env="prev", python="/x/python")]
    verdict = Verdict(regression_findings([_dev("torch", "torch@prev")], VERSIONS))
    rec = CaseRecord(id="op-median-v00001", spec={}, weights={}, inputs={"x": np.ones((2, 4), np.float32)},
                     backends=refs, verdict=verdict.to_json(), versions={"torch": NEW, "torch@prev": OLD},
                     op={"op": "median", "args": [{"tensor": "x"}], "kwargs": {"axis": 1}, "dtypes": {"x": "float32"}})
    return rec.to_file(tmp_path / "c.pkl")


def test_a_case_file_records_the_environment_by_name_never_its_interpreter(tmp_path):
    path = _record(tmp_path)
    rec = CaseRecord.from_file(path)
    assert rec.to_dict()["backends"][1] == {"label": "torch@prev", "target": TORCH, "device": "cpu",
                                            "precision": "full", "env": "prev"}
    assert rec.backends[1].python is None and rec.versions["torch@prev"] == OLD
    with pytest.raises(CaseFileError) as e:
        rec.backend_refs()
    assert str(e.value) == (f"{path}: backends[1].env: 'torch@prev' ran in the environment 'prev', and a case file "
                            "may not choose an interpreter: rerun with --env prev=/path/to/python (or pick backends "
                            "with --backends)")
    refs = rec.backend_refs(envs={"prev": sys.executable})
    assert [(r.label, r.python) for r in refs] == [("torch", None), ("torch@prev", sys.executable)]
    # a label that does not say its environment is refused
    d = rec.to_dict()
    d["backends"][1]["label"] = "torch"
    with pytest.raises(CaseFileError, match=r"backends\[1\]\.label: expected 'torch@prev'"):
        CaseRecord.from_dict(d, source="c.pkl")
    # no standalone script: it would run both releases under one interpreter
    from audee.repro import check_one_interpreter, pick_finding

    with pytest.raises(AudeeError, match="a regression finding between environments .* cannot be in a standalone"):
        check_one_interpreter(rec, pick_finding(rec))


def test_a_bug_report_of_a_regression_names_the_version_pair_and_each_sides_versions(tmp_path):
    from audee.records import ResultRow
    from audee.report.bugreports import write_bug_reports
    from audee.triage.known import unique_bugs
    from audee.triage.rootcause import root_causes

    path = _record(tmp_path)
    rec = CaseRecord.from_file(path)
    sigs = case_signatures(rec.verdict_obj(), rec.spec, {"seed": "op:median", "api": "median"})
    row = ResultRow(id=rec.id, status="fail", kinds=["regression"], backends={"torch": "ok", "torch@prev": "ok"},
                    case_file=str(path), signatures=[s.to_json() for s in sigs])
    root, = root_causes(unique_bugs([row], []))
    assert (root.klass, root.component, root.odd) == ("bug", "keras 3.15.1 vs 3.14.1 on torch", ("torch",))
    text = write_bug_reports([root], tmp_path)[root.root].read_text()
    assert text.startswith("# median computes differently under keras 3.15.1 vs 3.14.1 on torch\n")
    assert "- torch: keras 3.15.1, torch 2.13.0+cpu\n- torch@prev: keras 3.14.1, torch 2.13.0+cpu\n" in text
    assert "- torch computes what torch@prev computes differently (keras 3.15.1 vs 3.14.1 on torch): seen as " \
           "deviation" in text


# ---- the worker in another environment ---------------------------------------------------------
def test_the_worker_needs_what_the_probe_checks():
    """What audee's worker imports beside its framework is what an environment is probed for."""
    code = ("import sys; before = set(sys.modules); import audee.backends.worker; "
            "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
            "print(' '.join(sorted(m for m in new if m not in sys.stdlib_module_names and not m.startswith('_'))))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    got = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=120)
    third = set(got.stdout.split()) - {"audee", "cython_runtime"}
    pydantic_own = {"pydantic_core", "annotated_types", "typing_extensions", "typing_inspection"}
    assert third - pydantic_own == set(WORKER_NEEDS), got.stderr[-2000:]


def test_an_environment_without_what_the_worker_needs_says_so_in_one_line(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    refs = parse_backends("torch@bare", envs=parse_envs([f"bare={bare / 'bin' / 'python'}"]))
    with pytest.raises(BackendUnavailable) as e, Pool(refs, tmp_path / "logs") as pool:
        pool.start_or_fail()
    assert str(e.value) == (f"backend worker failed to start (torch@bare: environment 'bare' ({bare}/bin/python) "
                            "lacks numpy, pydantic, yaml, keras, torch: install them there (audee itself comes from "
                            "this checkout))")


# ---- on real versions: .venv-prev --------------------------------------------------------------------
def _prev_or_skip() -> str:
    if PREV.is_file():
        return str(PREV)
    reason = f"no second environment at {PREV}: `make env-prev` builds it (the previous Keras beside .venv's)"
    if os.environ.get("CI") == "true":  # .ci/run builds it: its absence is a failure there
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def versions_pool(tmp_path_factory):
    prev = _prev_or_skip()
    refs = parse_backends("torch,torch@prev", envs=parse_envs([f"prev={prev}"]))
    with Pool(refs, tmp_path_factory.mktemp("logs")) as pool:
        yield pool.start_or_fail()


def test_the_worker_runs_under_the_other_interpreter_and_reports_its_versions(versions_pool):
    workers = versions_pool.workers
    assert workers["torch@prev"].executable == str(PREV) and workers["torch"].executable == sys.executable
    versions = versions_pool.versions()
    assert release(versions["torch@prev"]["keras"]) < release(versions["torch"]["keras"])
    assert versions["torch@prev"]["torch"] == versions["torch"]["torch"]  # the same torch: only Keras differs
    # audee is not installed there: its worker imports it from this checkout
    alone = subprocess.run([str(PREV), "-P", "-c", "import audee"], capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert alone.returncode != 0 and "No module named 'audee'" in alone.stderr


def test_median_changed_in_keras_3_15_is_a_regression_of_the_newer_release(versions_pool):
    from audee.cases.opcase import OpCase
    from audee.engine.opexec import OpExecutor

    even = np.array([[1, 2, 3, 4], [4, 3, 9, 1]], np.float32)  # 3.14 on torch: 2, 3 (the lower middle); 3.15: 2.5, 3.5
    got = OpExecutor(versions_pool).run(OpCase("median", [{"tensor": "x"}], {"axis": 1}, {"x": even},
                                               {"x": "float32"}, id="op-median-v00000"))
    assert [f.kind for f in got.verdict.findings] == [Kind.REGRESSION]  # the pair's deviation folded in
    r = got.verdict.findings[0].detail
    v = versions_pool.versions()
    assert (r.older, r.newer, r.odd, r.seen) == ("torch@prev", "torch", ["torch"], ["deviation"])
    assert r.component == f"keras {v['torch']['keras']} vs {v['torch@prev']['keras']} on torch"
    assert (r.layer, r.tensor, r.max_abs) == ("median", "out0", 0.5)
    odd = np.array([[1, 2, 3], [4, 3, 9]], np.float32)  # an odd length: both releases agree
    same = OpExecutor(versions_pool).run(OpCase("median", [{"tensor": "x"}], {"axis": 1}, {"x": odd},
                                                {"x": "float32"}, id="op-median-v00001"))
    assert same.verdict.findings == []


def test_relu_with_a_threshold_changed_in_keras_3_15_is_a_regression_seen_as_a_nan(versions_pool):
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.fuzz import result_row

    spec = ModelSpec.from_json({"name": "relu", "inputs": [{"name": "x", "shape": [3]}],
                                "layers": [{"name": "relu", "api": "ReLU", "params": {"threshold": 0.5},
                                            "inputs": ["x"]}], "output": "relu", "logits": "relu"})
    x = {"x": np.array([[-np.inf, 1, 2], [0.1, 3, -1]], np.float32)}  # 3.14: -inf * 0 = NaN; 3.15: 0
    got = Executor(versions_pool).run(TestCase("relu-v00000", spec, {}, x))
    assert [f.kind for f in got.verdict.findings] == [Kind.REGRESSION]
    r = got.verdict.findings[0]
    assert (r.backends, r.detail.seen, r.detail.layer, r.detail.input_nonfinite) == \
        (["torch@prev", "torch"], ["nan"], "relu", True)
    row = result_row(got, {"seed": "relu"})
    assert row.regression_pairs == ["torch@prev|torch"] and row.versions == versions_pool.versions()
    sig, = [s for s in row.signatures]
    assert (sig["kind"], sig["odd"], sig["layer"]) == ("regression", ["torch"], "ReLU")
    assert sig["component"].startswith("keras ") and sig["component"].endswith(" on torch")


@pytest.mark.slow  # two more pools of workers (fuzz, then reproduce): about a minute and a half on 2 cores
def test_fuzz_and_reproduce_in_two_environments_from_the_command_line(tmp_path):
    prev = _prev_or_skip()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = tmp_path / "run"
    fuzz = subprocess.run([sys.executable, "-m", "audee", "fuzz", "--op", "median", "--backends", "torch,torch@prev",
                           "--env", f"prev={prev}", "--variants", "8", "--out", str(out), "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert fuzz.returncode == 0, fuzz.stderr[-3000:]
    assert "regression" in fuzz.stdout and " on torch" in fuzz.stdout
    config = json.loads((out / "config.json").read_text())
    assert config["backends"][1]["env"] == "prev" and config["backends"][1]["python"] == prev
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    failing = [r for r in rows if "regression" in r["kinds"]]
    assert failing and all(r["regression_pairs"] == ["torch@prev|torch"] for r in failing)
    case = out / failing[0]["case_file"]
    again = subprocess.run([sys.executable, "-m", "audee", "reproduce", str(case), "--env", f"prev={prev}"],
                           capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0 and "verdict holds" in again.stdout, again.stdout + again.stderr[-2000:]
    refused = subprocess.run([sys.executable, "-m", "audee", "reproduce", str(case)], capture_output=True, text=True,
                             env=env, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].endswith("rerun with --env prev=/path/to/python (or pick backends "
                                                            "with --backends)")


def test_a_regression_is_localized_to_its_layer_and_parameter(versions_pool, tmp_path):
    """ReLU(threshold) among other layers: Keras 3.14 on torch turns -inf into NaN there, 3.15
    into 0.  Localization names the ReLU layer; the -inf in its input is the trigger (sanitized,
    both releases agree) and the threshold the one parameter that removes it (its default 0
    takes the plain relu path in both releases), as a NaN between two frameworks is localized."""
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.fuzz import case_record
    from audee.localize.run import localize_case, render
    from audee.store.caserecord import save_case

    spec = ModelSpec.from_json({"name": "relu-among", "inputs": [{"name": "x", "shape": [6]}], "layers": [
        {"name": "reshape", "api": "Reshape", "params": {"target_shape": [2, 3]}, "inputs": ["x"]},
        {"name": "relu", "api": "ReLU", "params": {"threshold": 0.5}, "inputs": ["reshape"]},
        {"name": "flatten", "api": "Flatten", "params": {}, "inputs": ["relu"]},
        {"name": "dense", "api": "Dense", "params": {"units": 2}, "inputs": ["flatten"]}],
        "output": "dense", "logits": "dense"})
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6)).astype(np.float32)
    x[1, 2] = -np.inf
    ex = Executor(versions_pool)
    case = TestCase("relu-among-v00000", spec, {}, {"x": x})
    ex.complete_weights(case, 0)
    got = ex.run(case)
    assert Kind.REGRESSION in got.verdict.kinds(), got.verdict.to_json()
    path = save_case(tmp_path / "case.pkl", case_record(got, versions_pool, {"seed": "relu-among"}))
    report = localize_case(path, pool=versions_pool)
    text = render(report)
    assert report.reproduced and report.kind == Kind.REGRESSION, text
    assert report.backends == ["torch@prev", "torch"], text
    assert report.rounds[0].layer == "relu", text
    v = versions_pool.versions()
    assert report.note.startswith(f"torch computes differently from torch@prev (keras {v['torch']['keras']} vs "
                                  f"{v['torch@prev']['keras']} on torch), seen as nan; the layer it names: relu"), text
    assert "round 1: the layer whose two releases differ alone, on the older release's input -> relu" in text
    assert report.trigger is not None and report.trigger.layer == "relu", text
    params = {c.param: c for c in report.rounds[0].candidates}
    assert set(params) == {"<input>", "threshold"}, text
    threshold = params["threshold"]
    assert threshold.removing == [0.0] and threshold.default_removes is True and threshold.old == 0.5, text
    assert "relu alone, original parameters: fails" in text and "try relu.threshold: 0.5 -> 0.0: removed" in text


def test_a_documented_change_between_releases_is_its_own_class_not_a_regression_bug(tmp_path):
    """keras-team/keras#23013 (Keras 3.15: torch median of an even-length reduction averages the
    two middle values) is in the shipped list as class `documented`: a median regression of a
    version pair crossing Keras 3.15.0 matches it; one that does not cross it, or another op, does not."""
    from audee.records import ResultRow
    from audee.triage.known import load_known_issues, load_triage_file, match_known, unique_bugs
    from audee.triage.rootcause import root_causes

    path = _record(tmp_path)
    rec = CaseRecord.from_file(path)
    sig, = case_signatures(rec.verdict_obj(), rec.spec, {"seed": "op:median", "api": "median"})
    row = ResultRow(id=rec.id, status="fail", kinds=["regression"], backends={"torch": "ok", "torch@prev": "ok"},
                    case_file=str(path), signatures=[sig.to_json()])
    root, = root_causes(unique_bugs([row], load_known_issues()))
    assert (root.klass, root.status, root.known_id) == ("documented", "known upstream",
                                                         "keras-torch-median-even-length")
    assert root.known_where == "https://github.com/keras-team/keras/pull/23013"
    known = load_known_issues()
    within = sig.__class__(**{**sig.__dict__, "component": "keras 3.15.1 vs 3.15.0 on torch"})
    assert match_known(within, known) is None                       # both sides already have the change
    other = sig.__class__(**{**sig.__dict__, "api": "mean", "layer": "mean"})
    assert match_known(other, known) is None
    # a documented entry must say which release made the change, for regressions only
    bad = tmp_path / "k.yaml"
    bad.write_text("issues:\n  - id: x\n    title: t\n    link: https://e.org/1\n    class: documented\n"
                   "    match: {kind: regression, api: median}\n")
    with pytest.raises(ConfigError) as e:
        load_triage_file(bad)
    assert str(e.value) == (f"{bad}: issues[0].match: a `documented` entry matches regressions only, each rule "
                            "with `kind: regression` and `changed` (the release that documents the change)")
