"""Change rates on a DAG and CRADLE's rule (pure arithmetic, no framework)."""
import math

from audee.localize.rates import EPS, change_rates, cradle_flags
from audee.cases.spec import ModelSpec

SPEC = ModelSpec.from_json({
    "name": "dag", "inputs": [{"name": "x", "shape": [4]}],
    "layers": [
        {"name": "a", "api": "Dense", "params": {"units": 4}, "inputs": ["x"]},
        {"name": "b", "api": "Dense", "params": {"units": 4}, "inputs": ["a"]},
        {"name": "c", "api": "Dense", "params": {"units": 4}, "inputs": ["x"]},
        {"name": "m", "api": "Add", "params": {}, "inputs": ["b", "c"]},
    ], "output": "m"})


def test_rate_uses_the_largest_predecessor_distance():
    d = {"a": 1e-7, "b": 1e-3, "c": 2e-3, "m": 4e-3}
    r = change_rates(SPEC, d)
    assert math.isclose(r["a"], 1e-7 / EPS)              # fed by the model input: d_pre = 0
    assert math.isclose(r["b"], (1e-3 - 1e-7) / (1e-7 + EPS))
    assert math.isclose(r["m"], (4e-3 - 2e-3) / (2e-3 + EPS))  # max over b and c


def test_infinite_distance_is_blamed_on_the_first_layer_only():
    r = change_rates(SPEC, {"a": float("inf"), "b": float("inf"), "c": 0.0, "m": float("inf")})
    assert r["a"] == float("inf") and r["b"] == 0.0 and r["m"] == 0.0


def test_cradle_flags_the_top_quartile():
    flags = cradle_flags({"a": 1.0, "b": 5000.0, "c": 2.0, "m": 0.5})
    assert flags == ["b"]


def test_the_same_infinity_on_both_backends_is_no_distance():
    import numpy as np

    from audee.oracle.distance import layer_distance, per_input_distance

    a = np.array([[np.inf, 1.0], [2.0, -np.inf]])
    assert layer_distance(a, a.copy()) == 0.0
    assert per_input_distance(a, np.array([[np.inf, 1.0], [2.0, np.inf]])).tolist() == [0.0, float("inf")]
