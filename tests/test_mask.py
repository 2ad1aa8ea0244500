"""``mask`` as a layer call argument (issue 29, part 2): a spec layer called with
``m != 0`` of an integer model input.  Spec checks, the 0/1 data a mask input is fed
(generated, special values, the search), everything that rebuilds a layer alone or
renames it, and, on the real frameworks, an LSTM with padded sequences: alike on
TensorFlow, PyTorch, JAX and onnxruntime, in inference and in the training phase, and
equal to the LSTM run on each row's unpadded prefix."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from audee.apis import load_api_configs
from audee.apis.call_args import MASK_LAYERS, MASK_LEFT_OUT, draw_masks, mask_shape
from audee.equivalence.rules import apply_rule
from audee.core.errors import SpecError
from audee.mutation import special
from audee.mutation.apilevel import generate_case
from audee.cases.pack import pack_specs
from audee.search.encoding import Encoding
from audee.mutation.seeds import generate_inputs
from audee.cases.spec import ModelSpec, one_layer_spec
from tests.helpers import installed_keras, run_audee

STEPS, FEATURES, UNITS = 6, 3, 4
LENGTHS = [6, 4, 1, 0, 3, 6, 2, 5]     # each row's unpadded length (0: a fully masked row)


def _lstm(call: dict | None = None, mask_shape_: list[int] | None = None, mask_dtype: str = "int32",
          api: str = "LSTM", params: dict | None = None) -> dict:
    return {"name": "masked", "inputs": [{"name": "x", "shape": [STEPS, FEATURES]},
                                         {"name": "m", "shape": mask_shape_ or [STEPS], "dtype": mask_dtype}],
            "layers": [{"name": "rnn", "api": api, "params": {"units": UNITS} if params is None else params,
                        "inputs": ["x"], "call": {"mask": "m"} if call is None else call},
                       {"name": "out", "api": "Dense", "params": {"units": 2}, "inputs": ["rnn"]}],
            "output": "out"}


# ---- the spec ------------------------------------------------------------------------------------------
def test_a_mask_is_call_data_naming_an_integer_input_and_travels_with_the_layer():
    spec = ModelSpec.from_json(_lstm())
    rnn = spec.layer("rnn")
    assert rnn.mask == "m" and rnn.reads == ["x", "m"] and spec.mask_inputs() == {"m": ["LSTM"]}
    assert ModelSpec.loads(spec.dumps()).layer("rnn").call == {"mask": "m"}
    # a layer alone is fed its mask's input too, under the same name and dtype
    alone = one_layer_spec(spec, "rnn", {"x": np.zeros((2, STEPS, FEATURES), np.float32),
                                         "m": np.ones((2, STEPS), np.int32)})
    assert [(i.name, i.dtype) for i in alone.inputs] == [("x", "float32"), ("m", "int32")]
    assert alone.layers[0].call == {"mask": "m"}
    # a pack renames the mask's input with the rest of its case
    packed = pack_specs([spec, spec]).spec
    second = [ls for ls in packed.layers if ls.api == "LSTM"][1]
    assert second.call["mask"] in packed.input_names and second.call["mask"] != "m"
    assert second.call["mask"].endswith("m") and second.inputs[0].endswith("x")
    # the RNN rewrite keeps how the layer is called
    rw = apply_rule("rnn_unroll", spec, {})
    assert rw is not None and rw.spec.layer("rnn").call == {"mask": "m"} and rw.spec.layer("rnn").params["unroll"]


@pytest.mark.parametrize("spec, field, message", [
    (_lstm({"mask": "nope"}), "layers[rnn].call.mask", "'nope' is no model input"),
    (_lstm({"mask": "rnn"}), "layers[rnn].call.mask", "'rnn' is a layer, not a model input"),
    (_lstm(mask_dtype="float32"), "layers[rnn].call.mask", "input 'm' is float32: a mask is made from an integer"),
    (_lstm(mask_shape_=[STEPS, 1]), "layers[rnn].call.mask", "input 'm' has shape [6, 1], LSTM's mask for input"),
    (_lstm({"mask": 3}), "layers[rnn].call.mask", "expected the name of an integer model input"),
    (_lstm(api="Dense", params={"units": 2}), "layers[rnn].call.mask", "Dense's call takes no mask"),
    (_lstm(api="Attention", params={}), "layers[rnn].call.mask", "takes a list of masks"),
])
def test_a_bad_mask_is_one_line_naming_the_file_and_field(spec, field, message):
    with pytest.raises(SpecError) as err:
        ModelSpec.loads(json.dumps(spec), source="model.json")
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"model.json: {field}: ") and message in line, line


def test_mask_shapes_per_layer():
    assert mask_shape("LSTM", {}, (6, 3)) == (6,)
    assert mask_shape("ConvLSTM2D", {}, (5, 4, 4, 2)) == (5,)
    assert mask_shape("GlobalAveragePooling1D", {"data_format": "channels_first"}, (3, 7)) == (7,)
    assert mask_shape("BatchNormalization", {}, (5, 4, 2)) == (5, 4)
    assert mask_shape("Softmax", {}, (5, 4)) == (5, 4)
    assert not set(MASK_LAYERS) & set(MASK_LEFT_OUT)


# ---- its data -----------------------------------------------------------------------------------------
def test_mask_rows_are_padded_sequences_and_never_empty_where_that_is_undefined():
    rows = draw_masks((400, 7), np.random.default_rng(0))
    assert set(np.unique(rows)) == {0, 1}
    lengths = rows.sum(1)
    assert all((r[:n] == 1).all() and (r[n:] == 0).all() for r, n in zip(rows, lengths))  # ones, then zeros
    assert 0.05 < (lengths == 0).mean() < 0.2 and 0.4 < ((lengths > 0) & (lengths < 7)).mean() < 0.8
    pooled = draw_masks((400, 7), np.random.default_rng(0), apis=["GlobalAveragePooling1D"])
    assert pooled.sum(1).min() >= 1                                       # the mean over no steps: NaN
    inputs, how = generate_inputs(ModelSpec.from_json(_lstm()), rows=64)
    assert set(np.unique(inputs["m"])) == {0, 1} and "mask rows" in how["generated"]["m"]


def test_special_values_and_the_search_keep_a_mask_0_or_1():
    spec = ModelSpec.from_json(_lstm())
    inputs, _ = generate_inputs(spec, rows=32)
    hit, done = special.inject(inputs, spec.inputs, np.random.default_rng(0), 1.0, masks=spec.mask_inputs())
    assert {d["input"] for d in done} == {"x"} and (hit["m"] == inputs["m"]).all()
    enc = Encoding("input", inputs, {}, spec.inputs, special=True, masks=spec.mask_inputs())
    genes = enc.encode() + np.random.default_rng(1).standard_cauchy(enc.size) * 5
    got = enc.inputs_of(enc.repair(genes))
    assert set(np.unique(got["m"])) <= {0, 1} and got["m"].dtype == np.int32


def test_api_level_cases_draw_a_mask_from_their_own_stream():
    apis = load_api_configs()
    plain = [generate_case("LSTM", apis, 0, i, invalid_prob=0.0) for i in range(8)]
    masked = [generate_case("LSTM", apis, 0, i, invalid_prob=0.0, call_mask=1.0) for i in range(8)]
    for p, m in zip(plain, masked):
        layer = m.spec.layer(m.spec.output)
        assert layer.call["mask"] == "t_lstm_mask" and m.meta["call"]["mask"] == [m.meta["shape"][0]]
        assert [i.name for i in m.spec.inputs] == [i.name for i in p.spec.inputs] + ["t_lstm_mask"]
        assert all((m.inputs[k] == p.inputs[k]).all() for k in p.inputs)  # every other draw as it was
        assert set(np.unique(m.inputs["t_lstm_mask"])) <= {0, 1}
        ModelSpec.from_json(m.spec.to_json())                             # a valid spec
    some = [generate_case("GRU", apis, 0, i, invalid_prob=0.0, call_mask=0.3) for i in range(40)]
    assert 4 <= sum("mask" in c.spec.layer(c.spec.output).call for c in some) <= 20
    dense = generate_case("Dense", apis, 0, 0, call_mask=1.0)            # a call that takes no mask
    assert all(not ls.call.get("mask") for ls in dense.spec.layers)


@pytest.mark.slow
def test_the_mask_layer_lists_are_the_installed_keras():
    assert installed_keras("mask_layers_from") == sorted({*MASK_LAYERS, *MASK_LEFT_OUT})


# ---- on the real frameworks ------------------------------------------------------------------------------
KERAS = ["tensorflow", "torch", "jax"]


def _pool(labels: list[str], logs: Path):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends(",".join(labels)), logs) as p:
        p.start_or_fail()
        yield p


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """The Keras backends (the default suite: one pool start for the module)."""
    yield from _pool(KERAS, tmp_path_factory.mktemp("logs"))


@pytest.fixture(scope="module")
def onnx_pool(tmp_path_factory):
    """onnxruntime behind tf2onnx, apart: its worker imports TensorFlow and tf2onnx."""
    yield from _pool(["onnxruntime"], tmp_path_factory.mktemp("logs"))


def _padded_case(ex):
    """The masked LSTM on padded rows: the padding is large garbage, so a layer reading it
    could not pass; rows 0 and 4 carry the same steps, one cut at 6 and one at 3."""
    from audee.cases.case import TestCase

    d = _lstm()
    d["layers"], d["output"] = d["layers"][:1], "rnn"  # the LSTM's own output
    spec = ModelSpec.from_json(d)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((len(LENGTHS), STEPS, FEATURES)).astype(np.float32)
    m = np.zeros((len(LENGTHS), STEPS), np.int32)
    for r, n in enumerate(LENGTHS):
        m[r, :n] = 1
        x[r, n:] = 50.0 * rng.standard_normal((STEPS - n, FEATURES))
    x[4] = x[0]
    case = TestCase("masked-lstm", spec, {}, {"x": x, "m": m})
    ex.complete_weights(case, 3)
    return case


def _lstm_prefix(x: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
    """Keras' LSTM (sigmoid gates, tanh) on the steps given, in float64: the last state."""
    kernel, recurrent, bias = (w.astype(np.float64) for w in weights)
    h = c = np.zeros(UNITS)
    for t in range(x.shape[0]):
        z = x[t] @ kernel + h @ recurrent + bias
        i, f, g, o = np.split(z, 4)
        sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
    return h


@pytest.mark.parametrize("which", ["pool", pytest.param("onnx_pool", marks=pytest.mark.slow)])
def test_a_padded_lstm_agrees_everywhere_and_equals_the_lstm_on_each_unpadded_prefix(request, which):
    from audee.engine.execute import Executor

    labels = KERAS if which == "pool" else ["onnxruntime"]
    ex = Executor(request.getfixturevalue(which))
    case = _padded_case(ex)
    result = ex.run(case)
    assert not result.verdict.failed, result.verdict.to_json()
    assert sorted(result.outcomes) == sorted(labels)
    want = np.stack([_lstm_prefix(case.inputs["x"][r, :n], case.weights["rnn"]) for r, n in enumerate(LENGTHS)])
    assert np.abs(want[3]).max() == 0                                      # a fully masked row: the zero state
    assert np.abs(want[0] - want[4]).max() > 1e-3                          # the mask changes the answer
    for label in labels:
        got = np.asarray(result.outcomes[label].output, np.float64)
        assert np.abs(got - want).max() < 1e-5, (label, np.abs(got - want).max())


def test_a_padded_lstm_trains_alike_on_every_keras_backend(pool):
    from audee.engine.train import TrainExecutor
    from audee.train.setup import TrainSetup

    ex = TrainExecutor(pool)
    ex._support = {label: (None if label in KERAS else "left out by the test") for label in pool.labels}
    case = _padded_case(ex)
    case.meta["train"] = TrainSetup("mean_squared_error", "sgd", steps=2, target_seed=1).to_json()
    result = ex.run(case)
    assert not result.verdict.failed, result.verdict.to_json()
    assert sorted(result.train["losses"]) == sorted(KERAS)
    assert len({round(v[-1], 5) for v in result.train["losses"].values()}) == 1
    assert max(result.pairs[p]["gradient"] for p in result.pairs) < 1e-3


@pytest.mark.slow
def test_fuzz_api_with_masks_writes_rows(tmp_path):
    out = tmp_path / "o"
    got = run_audee(["fuzz", "--api", "LSTM", "--variants", "6", "--call-mask", "1", "--backends", "jax,torch",
                     "--no-progress", "--out", str(out)])  # in this process, on the suite's kept workers
    assert got.returncode in (0, 1), got.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == [f"api-LSTM-v{i:05d}" for i in range(6)]
    assert all(["LSTM", "call.mask", "true"] in r["exercised"] for r in rows)
    assert all(json.loads((out / "variants" / f"{r['id']}.json").read_text())["layers"][-1]["call"]["mask"]
               for r in rows)


def test_a_fully_masked_row_is_the_same_on_every_keras_backend(pool):
    """What EMPTY_UNDEFINED says: GlobalAveragePooling1D averages a fully masked row over
    no steps, NaN alike everywhere (a weak NaN, not a strong one); the other rows are the
    mean over their unmasked steps."""
    from audee.cases.case import Kind, TestCase
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({"name": "gap", "inputs": [{"name": "x", "shape": [STEPS, FEATURES]},
                                                          {"name": "m", "shape": [STEPS], "dtype": "int32"}],
                                "layers": [{"name": "gap", "api": "GlobalAveragePooling1D", "params": {},
                                            "inputs": ["x"], "call": {"mask": "m"}}], "output": "gap"})
    x = np.random.default_rng(2).standard_normal((len(LENGTHS), STEPS, FEATURES)).astype(np.float32)
    m = (np.arange(STEPS)[None, :] < np.array(LENGTHS)[:, None]).astype(np.int32)
    result = Executor(pool).run(TestCase("gap", spec, {}, {"x": x, "m": m}))
    assert [f.kind for f in result.verdict.findings] == [Kind.NAN] and not result.verdict.findings[0].detail.strong
    for label in KERAS:
        got = np.asarray(result.outcomes[label].output)
        assert np.isnan(got[3]).all() and np.isfinite(np.delete(got, 3, 0)).all()
        want = np.stack([x[r, :n].mean(0) for r, n in enumerate(LENGTHS) if n])
        assert np.abs(np.delete(got, 3, 0) - want).max() < 1e-5


def test_a_keras_bug_raised_in_a_layer_call_is_a_bug_not_audees_own_error(pool):
    """Keras on PyTorch raises in its unrolled, reversed, masked RNN (findings row 25).  The
    workers keep whole tracebacks — Keras and TensorFlow filter their own frames out by
    default, which left audee's calling frame innermost: counted as audee's own error
    (class harness) instead of the framework's bug."""
    from audee.cases.case import Kind, TestCase
    from audee.engine.execute import Executor
    from audee.triage.rootcause import classify
    from audee.triage.signature import case_signatures

    spec = ModelSpec.from_json(_lstm(params={"units": UNITS, "go_backwards": True, "unroll": True}))
    ex = Executor(pool)
    case = TestCase("backwards-unrolled", spec, {}, {"x": np.ones((2, STEPS, FEATURES), np.float32),
                                                     "m": np.array([[1] * STEPS, [1] * (STEPS - 1) + [0]], np.int32)})
    ex.complete_weights(case, 1)
    result = ex.run(case)
    (f,) = [f for f in result.verdict.findings if f.kind == Kind.DIVERGENT_ACCEPTANCE]
    assert f.backends == ["torch"] and "has no attribute 'shape'" in f.detail.errors["torch"].message
    assert "keras/src/backend/torch/rnn.py" in f.detail.errors["torch"].traceback.rsplit('File "', 1)[-1]
    (sig,) = [s for s in case_signatures(result.verdict, spec, case.meta) if s.kind == Kind.DIVERGENT_ACCEPTANCE]
    assert "audee_raised" not in sig.context and classify(sig)[0] == "bug", (sig.context, classify(sig))
