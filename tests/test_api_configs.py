"""API configs: the shipped files load and match the real Keras constructors; malformed
files are refused with the file and the field named."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.apis import load_api_config, load_api_configs
from audee.apis.coverage import EXEMPT
from audee.core.errors import ConfigError, SpecError
from audee.mutation import draw_value

REPO = Path(__file__).resolve().parents[1]
PAPER_AND_SEED_APIS = {
    "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "DepthwiseConv2D", "SeparableConv2D", "Dense",
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
    "GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D", "GlobalAveragePooling1D",
    "GlobalAveragePooling2D", "GlobalAveragePooling3D", "BatchNormalization", "LayerNormalization", "Dropout",
    "Activation", "ReLU", "LeakyReLU", "ELU", "PReLU", "Softmax", "ZeroPadding2D", "Cropping2D", "UpSampling2D",
    "Flatten", "Reshape", "Embedding", "SimpleRNN", "LSTM", "GRU", "Bidirectional", "Add", "Concatenate", "Multiply",
}


def test_shipped_configs_cover_the_paper_and_the_seeds():
    apis = load_api_configs()
    assert len(apis) >= 90
    assert PAPER_AND_SEED_APIS <= set(apis)
    from audee.mutation.seeds import list_seeds, load_seed

    used = {layer.api for name in list_seeds() for layer in load_seed(name).spec.layers}
    assert used <= set(apis), used - set(apis)


# One keras import for every coverage question: the shipped configs, a trimmed copy of
# Conv2D (to see the check fail), and the Keras layers with no config.
COVERAGE_SCRIPT = """
import json, sys
from audee.apis import load_api_configs
from audee.apis.coverage import coverage_rows, excluded_layers, keras_layer_names, render_coverage, uncovered_layers
shipped = load_api_configs()
trimmed = load_api_configs(sys.argv[1])
rows = coverage_rows(shipped)
print(json.dumps({"rows": rows, "trimmed": coverage_rows(trimmed), "layers": keras_layer_names(),
                  "excluded": excluded_layers(), "uncovered": uncovered_layers(shipped),
                  "text": render_coverage(rows, uncovered_layers(shipped))}))
"""


@pytest.fixture(scope="module")
def coverage(tmp_path_factory):
    import yaml

    from audee.core.paths import api_configs_dir

    trimmed = tmp_path_factory.mktemp("trimmed")
    conv = yaml.safe_load((api_configs_dir() / "Conv2D.yaml").read_text())
    del conv["params"]["groups"]  # a computation-changing parameter left out without skip
    conv["params"]["dilation_rate"] = {"skip": "not drawn in this test", "type": "int"}
    (trimmed / "Conv2D.yaml").write_text(yaml.safe_dump(conv))
    out = subprocess.run([sys.executable, "-c", COVERAGE_SCRIPT, str(trimmed)], capture_output=True, text=True,
                         env={**os.environ, "KERAS_BACKEND": "jax"}, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_computation_changing_parameter_is_configured_or_skipped(coverage):
    bad = [f"{r['api']}.{r['param']}: {r['status']}" for r in coverage["rows"]
           if r["status"] in ("missing", "not_in_keras")]
    assert bad == [], "\n" + coverage["text"]
    skipped = [r for r in coverage["rows"] if r["status"] == "skipped"]
    assert skipped and all(r["reason"] for r in skipped)
    assert {r["reason"] for r in coverage["rows"] if r["param"] == "dtype"} == {EXEMPT["dtype"]}
    assert coverage["text"].splitlines()[-1].startswith(f"{len(load_api_configs())} APIs,")


def test_coverage_fails_on_a_parameter_left_out_without_skip(coverage):
    status = {r["param"]: (r["status"], r["reason"]) for r in coverage["trimmed"]}
    assert status["groups"][0] == "missing"
    assert status["dilation_rate"] == ("skipped", "not drawn in this test")
    assert status["kernel_initializer"][0] == "exempt" and status["filters"][0] == "configured"


def test_every_keras_layer_is_configured_or_excluded_in_the_readme(coverage):
    assert coverage["uncovered"] == [], "configure these or list them in api_configs/README.md"
    layers, configured = set(coverage["layers"]), set(load_api_configs())
    stale = sorted(set(coverage["excluded"]) - layers)
    assert stale == [], f"README excludes layers Keras does not have: {stale}"
    both = sorted(set(coverage["excluded"]) & configured)
    assert both == [], f"both configured and excluded: {both}"
    assert configured <= layers, configured - layers  # aliases (MaxPool2D...) are not separate configs
    assert all(coverage["excluded"].values())


def _smoke(*args: str, timeout: int = 600) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "tests.api_smoke", *args], capture_output=True, text=True,
                         env={**os.environ, "KERAS_BACKEND": "jax"}, cwd=REPO, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _assert_each_api_runs_once(rows: list[dict]) -> None:
    ran = {r["api"] for r in rows if r["error"] is None}
    failing = [(r["api"], r["params"], r["error"]) for r in rows if r["error"] is not None]
    for triple in failing:
        print(triple)
    never = sorted({r["api"] for r in rows} - ran)
    assert never == [], f"no drawn parameter set builds and runs: {never}"


SMOKE_SUBSET = ["Conv2D", "ZeroPadding2D", "Dense", "BatchNormalization", "Softmax"]  # cheap in eager JAX


def test_a_subset_of_apis_builds_and_runs_with_drawn_parameters():
    rows = _smoke("draws", "4", *SMOKE_SUBSET)
    assert {r["api"] for r in rows} == set(SMOKE_SUBSET) and len(rows) == 4 * len(SMOKE_SUBSET)
    _assert_each_api_runs_once(rows)


@pytest.mark.slow
def test_every_api_builds_and_runs_with_drawn_parameters():
    rows = _smoke("draws", "5", timeout=1800)
    assert {r["api"] for r in rows} == set(load_api_configs())
    _assert_each_api_runs_once(rows)


@pytest.mark.slow
def test_every_listed_value_builds_and_runs_on_its_own():
    rows = _smoke("values", timeout=3000)
    bad = [(r["api"], r["params"], r["error"]) for r in rows if r["error"] is not None]
    assert bad == [], "\n".join(map(str, bad))


def test_every_draw_is_json_data_of_the_right_kind():
    rng = np.random.default_rng(0)
    for api, cfg in load_api_configs().items():
        for p in cfg.params.values():
            if p.type == "layer" or not p.mutable:
                continue
            for _ in range(20):
                v = draw_value(p, rng, invalid=False)
                json.dumps(v)
                assert p.type_ok(v), (api, p.name, v)
            if p.invalid:
                v = draw_value(p, rng, invalid=True)
                assert p.is_invalid_value(v) or p.is_invalid_value(v[0] if isinstance(v, list) else v)


@pytest.mark.parametrize("body, field", [
    ("api: Conv2D\ncategory: conv\nparams:\n  filters: {type: integer}\n", "params.filters.type"),
    ("api: Conv2D\ncategory: conv\nparams:\n  filters: {type: int, range: [5, 1]}\n", "params.filters.range"),
    ("api: Conv2D\ncategory: conv\nparams:\n  filters: {type: int, range: [1, 5], color: red}\n",
     "params.filters.color"),
    ("api: Conv3D\ncategory: conv\nparams: {}\n", "api"),
    ("api: Conv2D\ncategory: convolution\nparams: {}\n", "category"),
    ("api: Conv2D\ncategory: conv\nparams:\n  padding: {type: str}\n", "params.padding.values"),
    ("api: Conv2D\ncategory: conv\nids: filters\nparams: {}\n", "ids"),
])
def test_malformed_config_names_file_and_field(tmp_path, body, field):
    path = tmp_path / "Conv2D.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_api_config(path)
    assert str(err.value).startswith(f"{path}: {field}:"), str(err.value)


def test_yaml_syntax_error_is_one_line_with_line_number(tmp_path):
    path = tmp_path / "Dense.yaml"
    path.write_text("api: Dense\ncategory: core\nparams:\n  units: {type: int, range: [1, 2]\n")
    with pytest.raises(ConfigError, match=r"Dense.yaml: not valid YAML at line \d"):
        load_api_config(path)


def test_malformed_file_in_a_directory_stops_the_load(tmp_path):
    (tmp_path / "Dense.yaml").write_text("api: Dense\ncategory: core\nparams:\n  units: {type: int, range: [a, 2]}\n")
    with pytest.raises(ConfigError, match=r"Dense.yaml: params.units.range"):
        load_api_configs(tmp_path)


def test_check_params_accepts_invalid_draws_but_not_wrong_types():
    conv = load_api_configs()["Conv2D"]
    conv.check_params({"kernel_size": 0, "padding": None, "strides": [1, 2]}, source="s", where="layers[c].params")
    with pytest.raises(SpecError, match=r"layers\[c\].params.kernel_size"):
        conv.check_params({"kernel_size": "big"}, source="s", where="layers[c].params")


@pytest.mark.parametrize("body, field", [
    ("api: Conv2D\ncategory: conv\nparams:\n  groups: {type: int, skip: ''}\n", "params.groups.skip"),
    ("api: Conv2D\ncategory: conv\nparams:\n  groups: {type: int, skip: why, mutable: true}\n",
     "params.groups.mutable"),
    ("api: Conv2D\ncategory: conv\nparams:\n  padding: {type: str, values: [[valid, same]]}\n",
     "params.padding.values[0]"),
    ("api: Conv2D\ncategory: conv\nparams:\n  padding: {type: int, values: [[1, [2]]]}\n",
     "params.padding.values[0]"),
    ("api: Conv2D\ncategory: conv\nrank: 4\nranks: [3, 4]\nparams: {}\n", "ranks"),
    ("api: Conv2D\ncategory: conv\nranks: [4, 4]\nparams: {}\n", "ranks"),
    ("api: Conv2D\ncategory: conv\nranks: 4\nparams: {}\n", "ranks"),
    ("api: Conv2D\ncategory: conv\nparams:\n  groups: {type: int, range: [1, 2], rank_offset: -1}\n",
     "params.groups.rank_offset"),   # a layer parameter's only
    ("api: Conv2D\ncategory: conv\nparams:\n  layer: {type: layer, apis: [Dense], rank_offset: one}\n",
     "params.layer.rank_offset"),
    ("api: Conv2D\ncategory: conv\nnormalizes: axis\nparams:\n  groups: {type: int}\n", "normalizes"),  # no such param
    ("api: Conv2D\ncategory: conv\nnormalizes: [axis]\nparams:\n  axis: {type: int}\n", "normalizes"),
])
def test_malformed_new_keys_name_file_and_field(tmp_path, body, field):
    path = tmp_path / "Conv2D.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_api_config(path)
    assert str(err.value).startswith(f"{path}: {field}:"), str(err.value)


def test_ranks_skip_and_per_side_values(tmp_path):
    path = tmp_path / "ZeroPadding2D.yaml"
    path.write_text("api: ZeroPadding2D\ncategory: reshape\nranks: [4]\nparams:\n"
                    "  padding: {type: int, dims: 2, range: [0, 3], values: [[[1, 2], [0, 3]]], invalid: [-1]}\n"
                    "  data_format: {skip: 'not drawn here'}\n")
    cfg = load_api_config(path)
    assert cfg.ranks == [4] and cfg.rank == 4
    pad, fmt = cfg.params["padding"], cfg.params["data_format"]
    assert pad.type_ok([[0, 1], [2, 2]]) and pad.type_ok([1, 2]) and pad.type_ok(3)
    assert not pad.type_ok([[0, 1], [2]]) and not pad.type_ok([1, 2, 3]) and not pad.type_ok([[0, 1.5], [2, 2]])
    assert fmt.skip == "not drawn here" and not fmt.mutable and fmt.type_ok("anything")
    rng = np.random.default_rng(0)
    draws = [draw_value(pad, rng, invalid=False) for _ in range(200)]
    assert [[1, 2], [0, 3]] in draws and all(pad.type_ok(v) for v in draws)
    shipped = load_api_configs()
    assert shipped["Dense"].ranks == [2, 3, 4] and shipped["Dense"].rank is None
    assert shipped["Conv2D"].ranks == [4] and shipped["Conv2D"].rank == 4


def test_skipped_parameters_are_never_drawn_by_network_mutation():
    from audee.mutation.network import mutate_spec
    from audee.cases.spec import InputSpec, LayerSpec, ModelSpec

    apis = load_api_configs()
    assert apis["Dense"].params["lora_rank"].skip
    spec = ModelSpec("m", [InputSpec("x", [8], "float32")],
                     [LayerSpec("d", "Dense", {"units": 4}, ["x"]), LayerSpec("e", "Embedding", {"input_dim": 9,
                      "output_dim": 4}, ["x"])], output="d")
    touched = {(m.layer, m.param) for i in range(200)
               for m in mutate_spec(spec, apis, np.random.default_rng([0, i]), invalid_prob=0.5, index=i).mutations}
    skipped = {(ls.name, n) for ls in spec.layers for n, p in apis[ls.api].params.items() if p.skip}
    assert touched and not touched & skipped


def test_apis_coverage_command_reports_no_gap():
    """`audee apis --coverage` end to end: the shipped configs leave no parameter or Keras
    layer unexplained (exit 0); the JSON names every parameter's status."""
    import json
    import subprocess
    import sys

    got = subprocess.run([sys.executable, "-m", "audee", "apis", "--coverage", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
    data = json.loads(got.stdout)
    assert data["uncovered_layers"] == []
    statuses = {r["status"] for r in data["parameters"]}
    assert statuses <= {"configured", "skipped", "exempt"} and "configured" in statuses
    apis = {r["api"] for r in data["parameters"]}
    assert len(apis) >= 90


@pytest.mark.skipif(bool(os.environ.get("AUDEE_API_CONFIGS")), reason="AUDEE_API_CONFIGS points elsewhere")
def test_the_package_reads_the_top_level_api_configs_folder():
    """api_configs/ at the top of the repository is the source of truth: the package's
    audee/data/api_configs is a link to it (a wheel carries copies: tests/test_wheel.py)."""
    from audee.core.paths import api_configs_dir

    assert (REPO / "audee" / "data" / "api_configs").is_symlink()
    assert api_configs_dir().resolve() == (REPO / "api_configs").resolve()
    assert set(load_api_configs()) == {p.stem for p in (REPO / "api_configs").glob("*.yaml")}


def test_layers_taking_token_ids_get_int_ids_below_their_bound():
    """CategoryEncoding (ids: num_tokens) and Embedding (ids: input_dim) are fed int32 ids in
    [0, bound) by the API-level generator, not float data that casts to negative ids."""
    from audee.mutation.apilevel import generate_case

    configs = load_api_configs()
    for api, bound in (("CategoryEncoding", "num_tokens"), ("Embedding", "input_dim")):
        assert configs[api].ids == bound
        for i in range(6):
            case = generate_case(api, configs, 0, i, invalid_prob=0.0, dtypes={"float32": 1.0})
            (x,) = case.inputs.values()
            high = case.meta["params"][bound]
            assert x.dtype == np.int32 and x.min() >= 0 and x.max() < high, (api, i, high)


def test_an_rgb_layer_gets_its_channel_count_on_the_axis_its_data_format_names(tmp_path):
    """``channels: 3`` (a color augmentation reads RGB): every drawn input has 3 channels,
    last, or first under channels_first; the other axes are drawn as for any layer."""
    from audee.mutation.apilevel import generate_case

    (tmp_path / "RandomSharpness.yaml").write_text(
        "api: RandomSharpness\ncategory: preprocessing\nrank: 4\ntraining: true\nchannels: 3\nparams:\n"
        "  factor: {type: float, values: [0.5]}\n"
        "  data_format: {type: str, values: [channels_last, channels_first]}\n")
    configs = load_api_configs(tmp_path)
    seen = set()
    for i in range(12):
        case = generate_case("RandomSharpness", configs, 0, i, invalid_prob=0.0, dtypes={"float32": 1.0})
        first = case.meta["data_format"] == "channels_first"
        shape = tuple(case.meta["shape"])
        assert (shape[0] if first else shape[-1]) == 3, (i, case.meta["data_format"], shape)
        seen.add((first, shape[1:] if first else shape[:-1]))
    assert {f for f, _ in seen} == {True, False} and len(seen) > 2, seen
    (tmp_path / "RandomSharpness.yaml").write_text(
        "api: RandomSharpness\ncategory: preprocessing\nrank: 4\nchannels: 0\nparams: {}\n")
    with pytest.raises(ConfigError) as err:
        load_api_config(tmp_path / "RandomSharpness.yaml")
    assert str(err.value).startswith(f"{tmp_path / 'RandomSharpness.yaml'}: channels:"), str(err.value)


NEW_LAYER_SCRIPT = """
import contextlib, io, json, os
os.environ["KERAS_BACKEND"] = "jax"
import keras
from audee.apis.coverage import keras_layer_names
from audee.cli import main

def run():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["apis", "--coverage", "--json"])
    return {"code": int(code), "data": json.loads(out.getvalue())}

today = run()
layers = keras_layer_names()

class BrandNewLayer(keras.layers.Layer):
    def call(self, x):
        return x

keras.layers.BrandNewLayer = BrandNewLayer  # a layer a newer Keras would add
print(json.dumps({"today": today, "layers": layers, "new": run()}))
"""


def test_apis_coverage_names_each_keras_layer_without_a_config_with_its_reason():
    """`audee apis --coverage` accounts for every `keras.layers` layer: configured, or listed
    with its reason (`api_configs/README.md`, "Excluded layers"); a layer Keras gains without
    either is named as uncovered and the command exits with COVERAGE_GAP."""
    from audee.core.exitcodes import ExitCode

    got = subprocess.run([sys.executable, "-c", NEW_LAYER_SCRIPT], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "KERAS_BACKEND": "jax"}, timeout=300)
    assert got.returncode == 0, got.stderr[-3000:]
    out = json.loads(got.stdout.strip().splitlines()[-1])
    today, new = out["today"], out["new"]
    assert today["code"] == int(ExitCode.OK) and today["data"]["uncovered_layers"] == []
    reasons = {name: reason for reason, names in today["data"]["excluded_layers"].items() for name in names}
    configured = set(load_api_configs())
    assert all(reasons.values())
    unaccounted = [n for n in out["layers"] if n not in configured and n not in reasons]
    assert unaccounted == []
    for gained in ("AutoContrast", "ContrastLimitedAdaptiveHistogramEqualization", "MelSpectrogram",
                   "STFTSpectrogram"):
        assert gained in configured and gained not in reasons
    assert new["code"] == int(ExitCode.COVERAGE_GAP) and new["data"]["uncovered_layers"] == ["BrandNewLayer"]
