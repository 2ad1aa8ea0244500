import json

import numpy as np
import pytest

from audee.core.errors import SpecError
from audee.cases.spec import ModelSpec, load_weights, save_weights, weights_key
from tests.helpers import tiny_cnn

RESNET_LIKE = {
    "name": "skip",
    "inputs": [{"name": "x", "shape": [8, 8, 3]}],
    "layers": [
        {"name": "a", "api": "Conv2D", "params": {"filters": 3, "kernel_size": 3, "padding": "same"}, "inputs": ["x"]},
        {"name": "add", "api": "Add", "params": {}, "inputs": ["a", "x"]},
        {"name": "gap", "api": "GlobalAveragePooling2D", "params": {}, "inputs": ["add"]},
        {"name": "out", "api": "Dense", "params": {"units": 2}, "inputs": ["gap"]},
    ],
    "output": "out",
}


def test_json_round_trip_keeps_everything():
    spec = tiny_cnn()
    again = ModelSpec.loads(json.dumps(spec.to_json()))
    assert again.to_json() == spec.to_json()
    assert again.key() == spec.key()
    assert again.logits_layer == "logits"


def test_dag_with_skip_connection_orders_inputs_first():
    spec = ModelSpec.from_json(RESNET_LIKE)
    order = spec.topological_order()
    assert order.index("a") < order.index("add") < order.index("gap")
    assert spec.predecessors("add") == ["a"]


@pytest.mark.parametrize("mutate, field, words", [
    (lambda d: d["layers"][1].update(inputs=["a", "nope"]), "layers[add].inputs", "unknown input name 'nope'"),
    (lambda d: d["layers"][0].update(inputs=["add"]), "layers", "cycle"),
    (lambda d: d.update(output="missing"), "output", "unknown layer"),
    (lambda d: d["layers"][0].update(params={"filters": object()}), "layers[a].params.filters", "JSON data"),
    (lambda d: d["inputs"][0].update(shape=[8, 0, 3]), "inputs[0].shape", "positive ints"),
    (lambda d: d["layers"][2].update(name="a"), "layers[a]", "duplicate"),
])
def test_validation_names_the_field(mutate, field, words):
    data = json.loads(json.dumps(RESNET_LIKE))
    mutate(data)
    with pytest.raises(SpecError) as err:
        ModelSpec.from_json(data, source="m.json")
    assert f"m.json: {field}" in str(err.value)
    assert words in str(err.value)


def test_unknown_api_and_wrong_type_with_api_configs():
    from audee.apis import load_api_configs

    apis = load_api_configs()
    from audee.cases.spec import validate

    spec = ModelSpec.from_json(RESNET_LIKE)
    spec.layers[0].api = "Conv9D"
    with pytest.raises(SpecError, match=r"layers\[a\]\.api: unknown API 'Conv9D'"):
        validate(spec, apis=apis)
    spec.layers[0].api = "Conv2D"
    spec.layers[0].params["filters"] = "many"
    with pytest.raises(SpecError, match=r"layers\[a\]\.params"):
        validate(spec, apis=apis)


def test_not_json_is_one_line_error():
    with pytest.raises(SpecError, match="bad.json: not valid JSON"):
        ModelSpec.loads("{", source="bad.json")


def test_weights_npz_round_trip(tmp_path):
    w = {"conv": [np.ones((3, 3, 1, 4), np.float32), np.zeros(4, np.float32)], "logits": [np.eye(3, dtype=np.float32)]}
    save_weights(w, tmp_path / "w.npz")
    back = load_weights(tmp_path / "w.npz")
    assert weights_key(back) == weights_key(w)
    w["conv"][1][0] = 1.0
    assert weights_key(back) != weights_key(w)


def test_adapt_weights_keeps_what_still_fits_and_never_shifts_roles():
    from audee.cases.weights import adapt_weights

    gamma, beta = np.full(4, 2.0, np.float32), np.full(4, 0.5, np.float32)
    mean, var = np.full(4, -1.0, np.float32), np.full(4, 3.0, np.float32)
    base = {"bn": [gamma, beta, mean, var], "conv": [np.ones((3, 3, 1, 4), np.float32), np.ones(4, np.float32)]}
    # scale=False: 3 arrays left; reusing by position would make the variance -1 (NaN in sqrt)
    out = adapt_weights(base, {"bn": [("beta", (4,)), ("moving_mean", (4,)), ("moving_variance", (4,))],
                               "conv": [("kernel", (2, 2, 1, 4)), ("bias", (4,))]}, seed=0)
    assert (out["bn"][2] > 0).all() and out["bn"][2] is not mean
    assert out["conv"][1] is base["conv"][1] and out["conv"][0].shape == (2, 2, 1, 4)  # bias kept, kernel new


def test_weights_with_a_zero_sized_axis_are_drawn_empty():
    """A layer built with ``units=0`` has empty kernels: drawn empty, not a division by zero
    that ended the whole run; the other layers' weights are drawn as without them."""
    from audee.cases.weights import adapt_weights

    shapes = {"rnn": [("kernel", (0, 0)), ("recurrent_kernel", (0, 0)), ("bias", (0,))],
              "dw": [("depthwise_kernel", (0, 3, 2, 1))], "dense": [("kernel", (4, 2))]}
    out = adapt_weights({}, shapes, seed=0)
    assert [a.shape for a in out["rnn"]] == [(0, 0), (0, 0), (0,)] and out["dw"][0].shape == (0, 3, 2, 1)
    alone = adapt_weights({}, {"dense": [("kernel", (4, 2))]}, seed=0)
    np.testing.assert_array_equal(out["dense"][0], alone["dense"][0])
