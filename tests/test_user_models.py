"""A user's own model may hold any Keras layer, in `audee fuzz` and campaigns alike: a layer
without an API config runs as it is (never mutated, said once in the log and by
`audee apis --coverage --seed`), inputs are generated when none are given, and a
campaign checks every seed before its first unit (real frameworks, tiny models).

Keras is never imported in the test process: the .keras models are made by a subprocess.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from audee.apis import load_api_configs
from audee.apis.coverage import unconfigured
from audee.apis.keras_layers import known_layers
from audee.core.errors import AudeeError, SpecError
from audee.mutation.network import mutate_spec
from audee.mutation.seeds import GENERATED_ROWS, generate_inputs, import_keras_seed, load_seed, read_seed, with_inputs
from audee.cases.spec import ModelSpec, validate
from audee.store import ResultsTable
from tests.helpers import run_audee

ROOT = Path(__file__).resolve().parent.parent
# Real Keras 3.15 layers with no API config (hashing and lookup preprocessing: their reason in
# api_configs/README.md), which a user's spec may still hold: they run as given, unmutated (a float
# image in, integer bins or indices out).
UNCONFIGURED = "Hashing"
BRIGHTNESS_SPEC = {"name": "clahe", "inputs": [{"name": "img", "shape": [16, 16, 3], "range": [0, 255]}],
              "layers": [{"name": "clahe", "api": UNCONFIGURED, "inputs": ["img"],
                          "params": {"num_bins": 8, "salt": 3}}],
              "output": "clahe"}
OTHER = "IntegerLookup"  # another layer without a config
CONTRAST_SPEC = {"name": "mel", "inputs": [{"name": "img", "shape": [16, 16, 3]}],
            "layers": [{"name": "mel", "api": OTHER, "inputs": ["img"],
                        "params": {"vocabulary": [1, 2, 3]}}],
            "output": "mel"}

MAKE_MODELS = textwrap.dedent("""
    import json, os, sys
    import keras
    from audee.apis.keras_layers import aliases_from, layer_names_from
    L = keras.layers
    out = sys.argv[1]
    x = keras.Input((16, 16, 3), name="img")
    y = L.ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 255), tile_grid_size=(2, 2), name="clahe")(x)
    keras.Model(x, y, name="clahe_model").save(os.path.join(out, "clahe.keras"))
    v = keras.Input((8,), name="v")
    y = L.Rescaling(0.5, dtype="float64", name="half")(v)
    y = L.Hashing(num_bins=4, dtype="int32", name="hash")(L.Discretization(bin_boundaries=[0.0], name="disc")(y))
    keras.Model(v, y, name="dtypes").save(os.path.join(out, "dtypes.keras"))
    json.dump({"keras": keras.__version__, "layers": layer_names_from(keras), "aliases": aliases_from(keras)},
              open(os.path.join(out, "layers.json"), "w"))
""")


def _audee(*args: str) -> subprocess.CompletedProcess:
    """In this process, on the suite's kept workers (:func:`tests.helpers.run_audee`)."""
    return run_audee(list(args), cwd=ROOT)


def _spec_dir(root: Path, body: dict) -> Path:
    d = root / body["name"]
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.json").write_text(json.dumps(body))
    return d / "spec.json"


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("user_models")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", MAKE_MODELS, str(out)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_any_keras_layer_validates_and_an_unknown_name_is_one_line(tmp_path):
    apis = load_api_configs()
    assert UNCONFIGURED not in apis and OTHER not in apis and {UNCONFIGURED, OTHER} <= known_layers()
    for body in (BRIGHTNESS_SPEC, CONTRAST_SPEC):
        validate(ModelSpec.from_json(body), source="spec.json", apis=apis)
    bad = json.loads(json.dumps(CONTRAST_SPEC).replace(OTHER, OTHER + "t"))
    with pytest.raises(SpecError) as err:
        validate(ModelSpec.from_json(bad), source="my/spec.json", apis=apis)
    assert str(err.value).startswith(f"my/spec.json: layers[mel].api: unknown API '{OTHER}t'")
    assert "\n" not in str(err.value)


def test_unconfigured_layers_are_never_mutated():
    apis = load_api_configs()
    body = json.loads(json.dumps(BRIGHTNESS_SPEC))
    body["layers"].append({"name": "conv", "api": "Conv2D", "params": {"filters": 2, "kernel_size": 3},
                           "inputs": ["clahe"]})
    body["output"] = "conv"
    spec = ModelSpec.from_json(body)
    assert unconfigured(spec, apis) == {UNCONFIGURED: ["clahe"]}
    changed = set()
    for i in range(30):
        v = mutate_spec(spec, apis, np.random.default_rng([0, i]), invalid_prob=0.5, index=i)
        assert v.spec.layer("clahe").params == spec.layer("clahe").params
        changed |= {m.layer for m in v.mutations}
    assert changed == {"conv"}   # the configured layer is mutated, the other never


def test_generated_inputs_are_deterministic_and_in_range(tmp_path):
    spec = ModelSpec.from_json({
        "name": "ids", "inputs": [{"name": "tok", "shape": [5], "dtype": "int32"},
                                  {"name": "n", "shape": [3], "dtype": "int64"},
                                  {"name": "img", "shape": [2, 2, 1], "range": [0, 255]},
                                  {"name": "z", "shape": [4]}],
        "layers": [{"name": "emb", "api": "Embedding", "params": {"input_dim": 7, "output_dim": 2}, "inputs": ["tok"]},
                   {"name": "f", "api": "Flatten", "inputs": ["emb"]}],
        "output": "f"})
    a, how = generate_inputs(spec)
    b, _ = generate_inputs(spec)
    assert all(np.array_equal(a[k], b[k]) for k in a) and a["tok"].shape == (GENERATED_ROWS, 5)
    assert a["tok"].dtype == np.int32 and 0 <= a["tok"].min() and a["tok"].max() == 6   # the Embedding's ids
    assert a["n"].max() == 9 and 0 <= a["img"].min() and a["img"].max() < 255           # [0, 10); the range
    assert how["generated"]["z"] == "standard normal" and abs(float(a["z"].mean())) < 0.2
    # a spec file with an inputs.npz beside it takes those; --inputs wins over both
    path = _spec_dir(tmp_path, spec.to_json())
    assert load_seed(str(path)).spec.meta["inputs"]["rows"] == GENERATED_ROWS
    np.savez(path.parent / "inputs.npz", **{k: v[:3] for k, v in a.items()})
    seed = load_seed(str(path))
    assert seed.inputs["tok"].shape[0] == 3 and seed.spec.meta["inputs"] == {"file": str(path.parent / "inputs.npz")}
    np.savez(tmp_path / "other.npz", **{k: v[:2] for k, v in a.items()})
    assert with_inputs(seed, str(tmp_path / "other.npz")).inputs["z"].shape == (2, 4)


def test_given_inputs_are_read_before_any_are_generated_and_huge_generated_ones_are_refused(tmp_path):
    """A spec whose input is [1000000000] would need hundreds of GiB of generated rows: the inputs
    the user gives are read instead, and without them the spec is refused in one line
    naming the shape field, before anything is drawn."""
    path = _spec_dir(tmp_path, {"name": "huge", "inputs": [{"name": "x", "shape": [1_000_000_000]}],
                                "layers": [{"name": "r", "api": "ReLU", "inputs": ["x"]}], "output": "r"})
    assert read_seed(str(path)).inputs == {}  # nothing generated yet
    with pytest.raises(AudeeError) as err:
        load_seed(str(path))
    assert str(err.value).startswith(f"{path}: inputs[0].shape: {GENERATED_ROWS} generated rows of input 'x'")
    assert "GiB" in str(err.value) and "\n" not in str(err.value)
    given = tmp_path / "given.npz"
    np.savez(given, x=np.zeros((2, 3), np.float32))
    with pytest.raises(AudeeError, match=r"given.npz: x: shape \[2, 3\] does not fit"):
        load_seed(str(path), inputs=str(given))  # the user's file is what is read (and checked)
    for extra, want in (([], f"{path}: inputs[0].shape: "), (["--inputs", str(given)], f"{given}: x: shape")):
        got = _audee("fuzz", "--seed", str(path), "--backends", "jax", *extra, "--out", str(tmp_path / "o"),
                     "--no-progress")
        assert got.returncode == 2 and want in got.stderr and len(got.stderr.strip().splitlines()) == 1, got.stderr


def test_the_stored_layer_list_is_the_installed_keras(models):
    stored = json.loads((ROOT / "audee" / "apis" / "keras_layers.json").read_text())
    assert stored == json.loads((models / "layers.json").read_text()), \
        "run python -m audee.apis.keras_layers to regenerate audee/apis/keras_layers.json"


def test_user_spec_without_config_fuzzes_to_a_verdict(tmp_path):
    spec = _spec_dir(tmp_path, BRIGHTNESS_SPEC)
    cov = _audee("apis", "--coverage", "--seed", str(spec))
    assert cov.returncode == 0 and f"{UNCONFIGURED:<28} unmutated" in cov.stdout, cov.stdout + cov.stderr
    out = tmp_path / "out"
    got = _audee("fuzz", "--seed", str(spec), "--backends", "tensorflow,torch,jax,onnxruntime", "--variants", "1",
                 "--batch", "4", "--out", str(out), "--no-progress")
    assert got.returncode == 0, got.stderr[-3000:]
    rows = list(ResultsTable(out / "results.jsonl").rows())
    assert [r["id"] for r in rows] == ["clahe-seed", "clahe-v00000"]
    assert all(r["status"] in ("pass", "fail") and len(r["backends"]) == 4 for r in rows)
    variant = json.loads((out / "variants" / "clahe-v00000.json").read_text())
    assert variant["layers"][0]["params"] == BRIGHTNESS_SPEC["layers"][0]["params"]   # run as it is
    assert variant["meta"]["inputs"]["generated"] == {"img": "uniform in [0, 255)"}  # recorded in every case
    log = (out / "logs" / "audee.log").read_text()
    assert log.count(f"{UNCONFIGURED} has no API config: layer clahe runs unmutated") == 1


def test_keras_model_without_config_fuzzes_and_keeps_dtypes(models, tmp_path):
    out = tmp_path / "out"
    got = _audee("fuzz", "--seed", str(models / "clahe.keras"), "--backends", "tensorflow,torch", "--variants", "1",
                 "--batch", "4", "--out", str(out), "--no-progress")
    assert got.returncode == 0, got.stderr[-3000:]
    rows = list(ResultsTable(out / "results.jsonl").rows())
    assert len(rows) == 2 and all(r["status"] in ("pass", "fail") for r in rows)
    seed = import_keras_seed(models / "dtypes.keras", tmp_path / "logs")
    assert {layer.name: layer.params.get("dtype") for layer in seed.spec.layers} == {
        "half": "float64", "disc": None, "hash": "int32"}


def test_campaign_over_two_user_specs_runs_without_unit_error(tmp_path):
    specs = [_spec_dir(tmp_path, BRIGHTNESS_SPEC), _spec_dir(tmp_path, CONTRAST_SPEC)]
    cfg = tmp_path / "users.yaml"
    cfg.write_text(f"name: users\ndefaults: {{variants: 1, batch: 4}}\nruns:\n  - seeds: [{specs[0]}, {specs[1]}]\n"
                   "    backends: [[tensorflow, torch]]\n")
    got = _audee("campaign", str(cfg), "--out", str(tmp_path / "out"), "--no-progress")
    assert got.returncode == 0, got.stderr[-3000:]
    units = sorted((tmp_path / "out" / "units").iterdir())
    assert len(units) == 2
    for u in units:
        done = json.loads((u / "DONE.json").read_text())
        assert done["test_cases"] == 2 and "error" not in done, done
    # the campaign's closing lines: root causes over its units, counted per class
    assert "  root causes " in got.stdout and "    bug " in got.stdout and "    limitation " in got.stdout, got.stdout
    # a bad seed stops the campaign before any unit: one line naming the file and the field
    bad = json.loads(json.dumps(CONTRAST_SPEC).replace(OTHER, "NoSuchLayer"))
    bad["name"] = "bad"
    cfg.write_text(cfg.read_text().replace(str(specs[1]), str(_spec_dir(tmp_path, bad))))
    got = _audee("campaign", str(cfg), "--out", str(tmp_path / "out2"), "--no-progress")
    assert got.returncode == 2 and not (tmp_path / "out2" / "units").exists()
    assert f"{cfg}: runs[0].seeds[1]: " in got.stderr and "unknown API 'NoSuchLayer'" in got.stderr, got.stderr


def test_layers_whose_parameters_are_code_are_refused(tmp_path):
    """Any Keras layer may run, but none whose parameters are code or a file of code: a
    spec (or a case file's spec) must not choose code to run."""
    apis = load_api_configs()
    for api, params in (("TFSMLayer", {"filepath": str(tmp_path / "saved"), "call_endpoint": "serve"}),
                        ("Lambda", {"function": "print"})):
        body = {"name": "code", "inputs": [{"name": "x", "shape": [4]}],
                "layers": [{"name": "c", "api": api, "params": params, "inputs": ["x"]}], "output": "c"}
        with pytest.raises(SpecError) as err:
            validate(ModelSpec.from_json(body, source="s.json"), source="s.json", apis=apis)
        assert str(err.value).startswith(f"s.json: layers[c].api: {api} runs code") and "\n" not in str(err.value)
    nested = {"name": "code", "inputs": [{"name": "x", "shape": [3, 4]}],
              "layers": [{"name": "t", "api": "TimeDistributed", "params": {"layer": {"api": "Lambda", "params": {}}},
                          "inputs": ["x"]}], "output": "t"}
    with pytest.raises(SpecError) as err:
        ModelSpec.from_json(nested, source="s.json")   # refused when parsed, API configs or not
    assert "layers[t].params.layer.api: Lambda runs code" in str(err.value)


@pytest.mark.parametrize("params, path", [
    ({"layer": {"api": "TimeDistributed", "params": {"layer": {"api": "Lambda", "params": {}}}}},
     "layers[b].params.layer.params.layer.api"),                       # a wrapper's wrapper's layer
    ({"layer": {"api": "LSTM", "params": {"units": 2}},
      "backward_layer": {"api": "LSTM", "params": {"units": 2, "cell": {"api": "JaxLayer", "params": {}}}}},
     "layers[b].params.backward_layer.params.cell.api"),
    ({"layer": {"api": "LSTM", "params": {"units": 2, "cells": [{"api": "Dense"}, {"api": "TorchModuleWrapper"}]}}},
     "layers[b].params.layer.params.cells[1].api"),                    # inside a list
    ({"layer": {"api": "LSTM", "params": {"units": 2, "x": {"deep": [{"class_name": "Lambda", "config": {}}]}}}},
     "layers[b].params.layer.params.x.deep[0].class_name"),            # a Keras serialized config, deep down
])
def test_code_layers_nested_at_any_depth_are_refused_naming_their_path(params, path):
    body = {"name": "code", "inputs": [{"name": "x", "shape": [3, 4]}],
            "layers": [{"name": "b", "api": "Bidirectional", "params": params, "inputs": ["x"]}], "output": "b"}
    with pytest.raises(SpecError) as err:
        ModelSpec.from_json(body, source="s.json")
    assert str(err.value).startswith(f"s.json: {path}: ") and "runs code" in str(err.value), str(err.value)
    assert "\n" not in str(err.value)
