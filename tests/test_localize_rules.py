"""The ranking rule (audee/localize/evidence.py) on real frameworks: a maskable fault, an
immutable parameter, a NaN, a divergent acceptance and a hard crash, each injected into torch by
localize.faults:RuleFaultsTorch and localized against jax; plus the rule's arithmetic."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.localize import LocalizeConfig
from audee.localize.evidence import Candidate, rank
from audee.localize.localizer import sanitized
from audee.localize.onelayer import param_spaces
from audee.localize.signatures import TABLE
from audee.cases.spec import LayerSpec, ModelSpec

FAULT = "localize.faults:RuleFaultsTorch"


def _spec(extra: list[dict], conv: dict | None = None) -> ModelSpec:
    """8x8x2 image -> conv -> extra layers -> flatten -> logits."""
    layers = [{"name": "conv", "api": "Conv2D", "inputs": ["image"],
               "params": {"filters": 3, "kernel_size": 3, "padding": "valid", **(conv or {})}}]
    prev = "conv"
    for lay in extra:
        layers.append({**lay, "inputs": [prev]})
        prev = lay["name"]
    layers += [{"name": "flat", "api": "Flatten", "params": {}, "inputs": [prev]},
               {"name": "logits", "api": "Dense", "params": {"units": 4}, "inputs": ["flat"], "fixed": ["units"]}]
    return ModelSpec.from_json({"name": "rules", "inputs": [{"name": "image", "shape": [8, 8, 2], "range": [-1, 1]}],
                                "layers": layers, "output": "logits", "logits": "logits"})


@pytest.fixture(scope="module")
def localize(tmp_path_factory):
    """Localize a spec's failure between jax and the faulty torch on one shared pool."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.fuzz import case_record
    from audee.localize.run import localize_case
    from audee.store import save_case

    tmp = tmp_path_factory.mktemp("rules")
    with Pool(parse_backends(f"jax,{FAULT}"), tmp) as pool:
        assert pool.start() == {}

        def run(name: str, spec: ModelSpec):
            ex = Executor(pool)
            x = np.random.default_rng(0).uniform(-1, 1, (8, 8, 8, 2)).astype(np.float32)
            case = TestCase(name, spec, {}, {"image": x})
            ex.complete_weights(case, 0)
            result = ex.run(case)
            assert result.verdict.failed, result.verdict.to_json()
            path = save_case(tmp / f"{name}.pkl", case_record(result, pool, {"seed": name}))
            return localize_case(path, LocalizeConfig(ga_iter=2), pool=pool)

        yield run


def _top(report) -> tuple[str, str] | None:
    return (report.sources[0].layer, report.sources[0].param) if report.sources else None


def test_a_masking_parameter_loses_to_the_cause(localize):
    # padding='same' is padded by reflection on torch; kernel_size 1 needs no padding and
    # makes both backends agree, exactly as fixing the padding does
    report = localize("mask", _spec([], conv={"padding": "same"}))
    assert _top(report) == ("conv", "padding"), report.to_json()["candidates"]
    by = {c.param: c for c in report.candidates}
    assert by["kernel_size"].removing == [1] and by["kernel_size"].failing  # it does remove it...
    assert not by["kernel_size"].named and by["kernel_size"].score < by["padding"].score  # ...but loses
    assert by["padding"].evidence.default == 1.0  # the Keras default 'valid' removes it
    assert len(report.sources) == 1


def test_an_immutable_parameter_is_a_candidate(localize):
    # Softmax's axis was `mutable: false` when this test was written (never mutated, found through the
    # constructor's signature); its config draws it now, so the config is where the candidate comes from
    report = localize("axis", _spec([{"name": "sm", "api": "Softmax", "params": {}}]))
    assert _top(report) == ("sm", "axis"), report.to_json()["candidates"]
    assert report.candidates[0].origin == "config"


def test_a_nan_fault_localizes_to_its_parameter(localize):
    report = localize("nan", _spec([{"name": "elu", "api": "ELU", "params": {"alpha": 0.5}}]))
    assert report.kind == "nan"
    assert report.rounds[0].layer == "elu"
    assert _top(report) == ("elu", "alpha") and report.sources[0].new == 1.0  # the default removes it
    assert report.trigger is None


def test_a_divergent_acceptance_names_the_rejected_parameter_and_its_error(localize):
    report = localize("reject", _spec([{"name": "up", "api": "UpSampling2D",
                                        "params": {"size": 2, "interpolation": "bilinear"}}]))
    assert report.kind == "divergent_acceptance"
    assert _top(report) == ("up", "interpolation"), report.to_json()["candidates"]
    assert "not supported" in (report.error or "")
    by = {c.param: c for c in report.candidates}
    assert "size" not in by  # no size makes torch accept it


@pytest.mark.slow  # every trial that keeps the trigger restarts the torch worker (80 s on 2 cores)
def test_a_hard_crash_names_the_parameter_that_makes_it_go_away(localize):
    # torch's worker dies (exit 139) building a ZeroPadding2D padded unequally before and after
    report = localize("crash", _spec([{"name": "zp", "api": "ZeroPadding2D", "params": {"padding": [[0, 1], [1, 1]]}}]))
    assert report.kind == "hard_crash" and report.rounds[0].layer == "zp"
    assert _top(report) == ("zp", "padding"), report.to_json()["candidates"]
    assert report.error == "worker exited with code <n>"  # the normalized error: the exit, its code masked
    by = {c.param: c for c in report.candidates}
    assert "data_format" not in by  # the crash stays whatever the data format


# ---- the rule's pieces, no framework ----------------------------------------------------------------
def test_rank_prefers_the_parameter_most_of_whose_values_remove_the_failure():
    cause = Candidate("c", "Conv2D", "padding", "same", "config", removing=["valid"], default="valid",
                      default_removes=True, contexts=3, toggles=3, best_rate=0.006, order=3)
    masker = Candidate("c", "Conv2D", "kernel_size", 3, "config", removing=[1], failing=[2, 4, 5],
                       contexts=3, toggles=3, best_rate=0.0, order=1)
    ranked = rank([masker, cause])
    assert [c.param for c in ranked] == ["padding", "kernel_size"]  # not the lower rate, not file order
    assert ranked[0].named and not ranked[1].named


def test_rank_names_candidates_the_evidence_cannot_tell_apart():
    a = Candidate("p", "MaxPooling2D", "padding", "same", "config", removing=["valid"], default="valid",
                  default_removes=True, contexts=2, toggles=2, order=2)
    b = Candidate("p", "MaxPooling2D", "pool_size", 3, "config", removing=[[2, 2], 1], default=[2, 2],
                  default_removes=True, contexts=2, toggles=2, order=0)
    c = Candidate("p", "MaxPooling2D", "strides", 2, "config", removing=[None], failing=[1, 3],
                  contexts=2, toggles=0, order=1)
    ranked = rank([a, b, c])
    assert [x.named for x in ranked] == [True, True, False]
    assert ranked[0].param == "pool_size"  # a tie on score: more removing values first


def test_every_constructor_parameter_is_a_candidate_with_alternatives():
    from audee.apis import load_api_configs

    apis = load_api_configs()
    spaces = {p.name: p for p in param_spaces(LayerSpec("s", "Softmax", {}, ["x"]), apis["Softmax"])}
    assert spaces["axis"].current == -1 and spaces["axis"].values and -1 not in spaces["axis"].values
    flat = {p.name: p for p in param_spaces(LayerSpec("f", "Flatten", {}, ["x"]), apis["Flatten"])}
    # unset data_format is channels_last: the one alternative is channels_first, from Flatten's config
    # (a parameter its config draws comes from the config; one the config pins, from the signature)
    assert flat["data_format"].values == ["channels_first"] and flat["data_format"].origin == "config"
    dense = {p.name: p for p in param_spaces(LayerSpec("d", "Dense", {"units": 2}, ["x"]), apis["Dense"])}
    assert dense["units"].origin == "config" and dense["lora_rank"].origin == "signature"
    pool = {p.name: p for p in param_spaces(LayerSpec("p", "MaxPooling2D", {"padding": "same"}, ["x"]),
                                            apis["MaxPooling2D"])}
    assert pool["padding"].values[0] == "valid" and pool["padding"].default == "valid"  # the default first


def test_sanitizing_makes_special_values_ordinary():
    x = np.array([[np.nan, np.inf, -0.0, 1e-42, 1e30, 0.5]], dtype=np.float32)
    clean, what = sanitized({"x": x})
    assert np.isfinite(clean["x"]).all() and not np.signbit(clean["x"]).any()
    assert len(what) == 4
    assert sanitized({"x": np.ones((2, 3), np.float32)})[1] == []


def test_the_stored_keras_defaults_match_the_installed_keras():
    code = ("import json, os; os.environ['KERAS_BACKEND'] = 'numpy'\n"
            "from audee.localize.signatures import build_table\n"
            f"print(json.dumps(build_table(list(json.load(open({str(TABLE)!r}))))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == json.loads(TABLE.read_text()), \
        "rerun: python -m audee.localize.signatures"


def test_a_bfloat16_layer_input_is_sanitized_too():
    """A layer behind a bfloat16 layer is fed an ml_dtypes bfloat16 array, which NumPy calls void:
    its NaN and Inf are made ordinary as a float32's are, not passed through as non-floats."""
    import ml_dtypes
    import numpy as np

    from audee.localize.localizer import sanitized

    x = np.array([[1.0, np.nan, np.inf]], np.float32).astype(ml_dtypes.bfloat16)
    out, what = sanitized({"x": x})
    assert np.isfinite(out["x"].astype(np.float32)).all() and what and "2 NaN/Inf" in what[0]
