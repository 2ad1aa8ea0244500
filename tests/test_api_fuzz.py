"""API-level fuzzing (`audee fuzz --api`): deterministic generation, every configured API
buildable on a real backend, the command end to end (rows, summary, resume, bad names)
and campaigns naming ``apis:``."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from audee.apis import load_api_configs
from audee.campaign import load_campaign
from audee.core.errors import ConfigError
from audee.mutation.apilevel import api_ranks, case_id, generate_case
from audee.store import ResultsTable
from tests.helpers import run_audee

APIS = load_api_configs()
FEW = ["Dense", "Conv2D", "Add", "Concatenate", "Bidirectional", "Embedding", "Permute", "Reshape"]


def _audee(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """In this process, on the suite's kept workers (:func:`tests.helpers.run_audee`)."""
    return run_audee(list(args))


# ---- generation (no framework) ----------------------------------------------------------------------
def test_a_case_depends_only_on_rng_api_and_index():
    for api in FEW:
        a, b = generate_case(api, APIS, 3, 7), generate_case(api, APIS, 3, 7)
        assert a.spec.to_json() == b.spec.to_json() and a.meta == b.meta
        assert a.inputs.keys() == b.inputs.keys()
        assert all(np.array_equal(a.inputs[k], b.inputs[k]) for k in a.inputs)
        assert a.spec.name == case_id(api, 7) == f"api-{api}-v00007"
    cases = [generate_case("Conv2D", APIS, 3, i).spec.dumps() for i in range(8)]
    assert len(set(cases)) == 8                                   # cases differ from each other
    assert generate_case("Conv2D", APIS, 4, 0).spec.dumps() != cases[0]  # and with the rng


def test_draws_cover_ranks_dtypes_adapters_and_respect_the_config():
    seen_ranks, dtypes, adapters = set(), set(), set()
    for i in range(40):
        g = generate_case("Dense", APIS, 0, i)
        seen_ranks.add(g.meta["rank"])
        dtypes.add(g.meta["dtype"])
        adapters.update(g.meta["adapters"])
        target = g.spec.layer(g.spec.output)
        assert target.api == "Dense" and all(ls.params["dtype"] == g.meta["dtype"] for ls in g.spec.layers)
        assert g.inputs["x0"].shape[0] == 8 and g.inputs["x0"].dtype == np.float32
    assert seen_ranks == set(api_ranks(APIS["Dense"])) and len(seen_ranks) > 1
    assert dtypes == {"float32", "float16", "bfloat16", "mixed_float16"}
    assert adapters                                               # some cases come behind an adapter
    only16 = {generate_case("Conv2D", APIS, 0, i, dtypes={"float16": 1.0}).meta["dtype"] for i in range(10)}
    assert only16 == {"float16"}
    for i in range(10):
        g = generate_case("Conv2D", APIS, 0, i)
        shape = g.spec.inputs[0].shape if not g.meta["adapters"] else None
        if shape is not None:
            assert len(shape) == 3                                # rank 4 with the batch axis
    emb = [generate_case("Embedding", APIS, 0, i, invalid_prob=0.0) for i in range(10)]
    for g in emb:
        x = g.inputs["x0"]
        assert x.dtype == np.int32 and 0 <= x.min() and x.max() < g.spec.layer("t_embedding").params["input_dim"]
    merges = [generate_case("Subtract", APIS, 0, i) for i in range(5)]
    assert all(len(g.spec.layer("t_subtract").inputs) == 2 for g in merges)
    bi = generate_case("Bidirectional", APIS, 0, 0, invalid_prob=0.0).spec.layer("t_bidirectional").params["layer"]
    assert bi["api"] in APIS["Bidirectional"].params["layer"].apis


def test_invalid_values_one_at_most_and_never_redrawn():
    calls = []

    def never_builds(spec):
        calls.append(spec.name)
        return "ValueError: no"

    for i in range(10):
        g = generate_case("Conv2D", APIS, 1, i, invalid_prob=1.0, validate=never_builds, max_redraws=3)
        bad = [m for m in g.mutations if m.invalid]
        assert len(bad) == 1 and g.meta["invalid_param"]["param"] == bad[0].param
        pcfg = APIS["Conv2D"].params[bad[0].param]
        values = bad[0].new if isinstance(bad[0].new, list) else [bad[0].new]  # draw_value may repeat per dim
        assert all(pcfg.is_invalid_value(v) for v in values), bad[0]
        assert g.meta["redraws"] == 0                            # an invalid draw is never redrawn
    assert calls == []
    g = generate_case("Conv2D", APIS, 1, 0, invalid_prob=0.0, validate=never_builds, max_redraws=3)
    assert g.meta["redraws"] == 3 and g.meta["build_error"] == "ValueError: no" and not g.invalid
    assert len(calls) == 4                                       # the first draw and 3 redraws
    for g in (generate_case("Dense", APIS, 1, i, invalid_prob=0.0) for i in range(10)):
        assert not g.invalid and g.meta["invalid_param"] is None


def test_a_valid_axis_list_the_drawn_rank_names_twice_is_marked_outside_the_contract():
    """``axis=[1, -1]`` is a valid draw for a rank-3 input and names axis 1 twice on a rank-2
    one: the case record marks it invalid, says why, and the case is never redrawn."""
    calls = []

    def never_builds(spec):
        calls.append(spec.name)
        return "ValueError: no"

    seen = set()
    for api in ("UnitNormalization", "LayerNormalization", "RMSNormalization"):
        lname = f"t_{api.lower()}"
        for i in range(40):
            g = generate_case(api, APIS, 0, i, invalid_prob=0.0, validate=never_builds, max_redraws=1)
            axis = g.spec.layer(lname).params.get("axis")
            twice = isinstance(axis, list) and len({a % g.meta["rank"] for a in axis}) < len(axis)
            marks = [m for m in g.mutations if m.invalid]
            assert [(m.param, m.why) for m in marks] == ([("axis", "axis names one axis twice")] if twice else [])
            assert g.invalid == twice and ("build_error" in g.meta) != twice   # a marked draw is never validated
            assert g.spec.meta["mutations"] == [m.to_json() for m in g.mutations]
            seen.add((twice, g.meta["rank"] if axis == [1, -1] else None))
    assert (True, 2) in seen and (False, 3) in seen    # [1, -1] marked at rank 2 only
    g = generate_case("UnitNormalization", APIS, 0, 38, invalid_prob=0.0)
    assert [m.to_json() for m in g.mutations if m.invalid] == [
        {"layer": "t_unitnormalization", "param": "axis", "old": None, "new": [1, -1], "invalid": True,
         "why": "axis names one axis twice"}]


def test_a_wrapped_layers_axis_is_checked_at_the_rank_the_wrapped_layer_sees():
    """Inside TimeDistributed the wrapped layer sees the input without its time axis
    (``rank_offset: -1``): ``axis=[1, -1]`` drawn for a wrapped LayerNormalization on a rank-3
    input names axis 1 twice there, and is marked outside the contract on the inner layer;
    the same axis on a rank-4 input (rank 3 inside) is not."""
    from audee.mutation.apilevel import _layer_at

    seen = set()
    for i in range(200):
        g = generate_case("TimeDistributed", APIS, 2822, i, invalid_prob=0.0)
        inner = g.spec.layer("t_timedistributed").params["layer"]
        axis = inner["params"].get("axis") if inner["api"] == "LayerNormalization" else None
        if not isinstance(axis, list):
            continue
        rank = g.meta["rank"] - 1
        twice = len({a % rank for a in axis}) < len(axis)
        marks = [(m.layer, m.param, m.why) for m in g.mutations if m.invalid]
        assert marks == ([("t_timedistributed.layer", "axis", "axis names one axis twice")] if twice else []), marks
        seen.add((twice, g.meta["rank"]))
    assert (True, 3) in seen and (False, 4) in seen
    td = APIS["TimeDistributed"]
    params = {"layer": {"api": "LayerNormalization", "params": {}}}
    assert _layer_at("t_td.layer", "t_td", td, params, 4, APIS) == (APIS["LayerNormalization"], 3)
    assert _layer_at("t_td", "t_td", td, params, 4, APIS) == (td, 4)
    assert _layer_at("other", "t_td", td, params, 4, APIS) is None


# ---- on a real backend (one jax worker for the module) ---------------------------------------------
@pytest.fixture(scope="module")
def jax_executor(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    pool = Pool(parse_backends("jax"), tmp_path_factory.mktemp("logs"), timeout=120, threads=1)
    assert pool.start() == {}
    yield Executor(pool)
    pool.close()


def _builds(ex, api: str) -> None:
    from audee.cases.case import TestCase
    from audee.fuzz import _unbuildable
    from audee.mutation.apilevel import cast_weights

    failures = []
    for index in range(3):  # a case may run into a real framework limit (float16 on the CPU...): the next one
        g = generate_case(api, APIS, 0, index, invalid_prob=0.0, validate=_unbuildable(ex), max_redraws=8)
        assert "build_error" not in g.meta, f"{api}: {g.meta['build_error']}"
        case = TestCase(g.spec.name, g.spec, {}, g.inputs)
        ex.complete_weights(case, 1)
        case.weights = cast_weights(case.weights, g.meta["dtype"])
        result = ex.run(case)
        if result.outcomes["jax"].ok:
            return
        failures.append((g.meta["dtype"], result.outcomes["jax"].failure.message[:200]))
    raise AssertionError(f"{api}: no case of 3 runs on jax: {failures}")


@pytest.mark.parametrize("api", ["Dense", "Conv2D", "Add", "Bidirectional", "Embedding"])
def test_a_few_apis_build_and_run_on_jax(jax_executor, api):
    _builds(jax_executor, api)


@pytest.mark.slow
def test_every_configured_api_builds_and_runs_on_jax(jax_executor):
    for api in sorted(APIS):  # whatever is configured: the set grows with the configs
        _builds(jax_executor, api)


# ---- the command ---------------------------------------------------------------------------------------
FUZZ = ["fuzz", "--api", "Dense,Conv2D", "--backends", "jax,torch", "--batch", "4", "--invalid-prob", "0.3",
        "--no-progress"]


@pytest.fixture(scope="module")
def api_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("apirun") / "o"
    r = _audee(*FUZZ, "--variants", "3", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    return out, r.stdout


def test_fuzz_api_end_to_end(api_run):
    out, stdout = api_run
    rows = list(ResultsTable(out / "results.jsonl").rows())
    assert sorted(r["id"] for r in rows) == sorted(f"api-{a}-v{i:05d}" for a in ("Dense", "Conv2D") for i in range(3))
    for r in rows:
        assert r["api"] in ("Dense", "Conv2D") and r["dtype"] and r["input_shapes"] and "params" in r
        assert set(r["backends"]) == {"jax", "torch"}
        assert (out / "variants" / f"{r['id']}.json").is_file()
        if r["status"] == "fail":
            assert (out / r["case_file"]).is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["test_cases"] == 6
    assert {a: s["cases"] for a, s in summary["by_api"].items()} == {"Conv2D": 3, "Dense": 3}
    assert "6 test cases run now, 0 resumed" in stdout and "per API" in stdout and "Conv2D" in stdout
    assert json.loads((out / "config.json").read_text())["apis"] == ["Dense", "Conv2D"]


def test_fuzz_api_resumes_and_runs_only_new_cases(api_run, tmp_path):
    out = shutil.copytree(api_run[0], tmp_path / "o")
    before = {r["id"]: r for r in ResultsTable(out / "results.jsonl").rows()}
    r = _audee(*FUZZ, "--variants", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "2 test cases run now, 6 resumed" in r.stdout
    rows = list(ResultsTable(out / "results.jsonl").rows())
    assert len(rows) == len({x["id"] for x in rows}) == 8
    assert all(before[x["id"]] == x for x in rows if x["id"] in before)


def test_bad_api_name_is_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "o"
    r = _audee("fuzz", "--api", "Dense,Conv9D", "--out", str(out), timeout=120)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "--api" in r.stderr and "Conv9D" in r.stderr
    assert not out.exists()
    r = _audee("fuzz", "--api", "Dense", "--seed", "lenet5", "--out", str(out), timeout=120)
    assert r.returncode == 2 and "not allowed with" in r.stderr and not out.exists()
    r = _audee("fuzz", "--api", "Dense", "--dtypes", "float32,float8", "--out", str(out), timeout=120)
    assert r.returncode == 2 and "--dtypes" in r.stderr and "float8" in r.stderr and not out.exists()


# ---- campaigns ------------------------------------------------------------------------------------------
CAMPAIGN = """name: apis
defaults: {variants: 2, batch: 4}
runs:
  - apis: [Dense, Conv2D]
    backends: [[jax, torch]]
  - apis: all
    api_group: 4
    backends: [[tensorflow, onnxruntime]]
    rngs: [0, 1]
"""


def test_campaign_with_apis_lists_its_units(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CAMPAIGN)
    camp = load_campaign(cfg)
    groups = -(-len(APIS) // 4)
    assert len(camp.units) == 2 + 2 * groups
    assert "api-Dense--jax+torch--r0" in [u.id for u in camp.units]
    grouped = [u for u in camp.units if u.backends == ("tensorflow", "onnxruntime")]
    assert sorted(a for u in grouped if u.settings["rng"] == 0 for a in u.apis) == sorted(APIS)
    r = _audee("campaign", str(cfg), "--out", str(tmp_path / "o"), "--list-units", timeout=120)
    assert r.returncode == 0 and r.stdout.split() == [u.id for u in camp.units]


@pytest.mark.parametrize("body, field", [
    ("  - apis: [Dense]\n    seeds: [lenet5]\n    backends: [[jax]]\n", "runs[0].seeds"),
    ("  - apis: [Dense]\n    backends: [[jax]]\n    search: {level: input}\n", "runs[0].search"),
    ("  - apis: [Dense, Nope]\n    backends: [[jax]]\n", "runs[0].apis[1]"),
    ("  - seeds: [lenet5]\n    api_group: 2\n    backends: [[jax]]\n", "runs[0].api_group"),
    ("  - apis: [Dense]\n    dtypes: float32:x\n    backends: [[jax]]\n", "runs[0].dtypes"),
])
def test_bad_api_campaign_fields_are_named(tmp_path, body, field):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: bad\nruns:\n" + body)
    with pytest.raises(ConfigError) as err:
        load_campaign(cfg)
    assert f"{field}:" in str(err.value) and "\n" not in str(err.value)
