"""API configs: the shipped files load and match the real Keras constructors; malformed
files are refused with the file and the field named."""
from __future__ import annotations

import inspect
import json
import subprocess
import sys

import numpy as np
import pytest

from audee.apis import load_api_config, load_api_configs
from audee.errors import ConfigError, SpecError
from audee.mutation import draw_value

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
    assert len(apis) >= 42
    assert PAPER_AND_SEED_APIS <= set(apis)
    from audee.seeds import list_seeds, load_seed

    used = {layer.api for name in list_seeds() for layer in load_seed(name).spec.layers}
    assert used <= set(apis), used - set(apis)


def test_every_param_exists_in_the_real_keras_constructor():
    names = {api: list(cfg.params) for api, cfg in load_api_configs().items()}
    code = ("import json, sys, inspect, os; os.environ['KERAS_BACKEND']='jax'; import keras\n"
            "names = json.loads(sys.stdin.read()); bad = []\n"
            "for api, ps in names.items():\n"
            "    cls = getattr(keras.layers, api)\n"
            "    sig = set()\n"
            "    for k in cls.__mro__:\n"
            "        if '__init__' in k.__dict__: sig |= set(inspect.signature(k.__init__).parameters)\n"
            "    bad += [f'{api}.{p}' for p in ps if p not in sig]\n"
            "print(json.dumps(bad))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps(names), capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


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
