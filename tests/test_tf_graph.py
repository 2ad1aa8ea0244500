"""What TensorFlow's traced graph shows of each layer (audee.backends.tf_graph).

Keras' TensorFlow ``ops.add`` squeezes a bias to one axis and guesses ``bias_add``'s data
format from which of axis 1 or the last axis has its length: where the guess is not the
bias's broadcast axis, TensorFlow computes another function than torch and JAX (findings
row 20).  The graph says so; a deviation then carries the fact and the known entry matches
it by the graph, whatever the layer.  TensorFlow traces the graphs; the last test runs one
case on TensorFlow, torch and JAX.
"""
from __future__ import annotations

import numpy as np

from audee.backends.tf_graph import bias_axis, layer_of


def test_a_bias_adds_along_its_one_long_axis_aligned_from_the_right():
    assert bias_axis(4, (1, 4, 1, 1)) == 1          # a channels_first convolution's bias
    assert bias_axis(4, (2, 1)) == 2                # a (heads, 1) value bias of (batch, pos, heads, 1)
    assert bias_axis(3, (5,)) == 2
    assert bias_axis(4, (2, 3)) is None and bias_axis(2, (1, 1, 4)) is None
    assert layer_of("functional_1/t_mha_1/value_1/BiasAdd", ["t_mha", "t_m"]) == "t_mha"
    assert layer_of("functional_1/other/BiasAdd", ["t_mha"]) is None


def _traced(model, shape):
    import tensorflow as tf

    fn = tf.function(lambda x: model(x, training=False), autograph=False)
    return fn.get_concrete_function(tf.TensorSpec((None, *shape), tf.float32)).graph


def test_the_graph_names_each_layer_whose_bias_went_on_the_wrong_axis():
    from audee.backends.keras_backends import TensorflowBackend
    from audee.backends.tf_graph import graph_facts

    keras = TensorflowBackend().keras
    x = keras.Input((2, 3))
    mha = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2, value_dim=1, name="t_mha")(x, x)
    fine = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2, value_dim=2, name="t_fine")(x, x)
    img = keras.layers.Reshape((1, 2, 3))(x)                                                   # C, H, W
    wrong = keras.layers.Conv2D(3, 1, data_format="channels_first", name="t_conv_last")(img)   # W == filters
    right = keras.layers.Conv2D(4, 1, data_format="channels_first", name="t_conv")(img)
    dense = keras.layers.Dense(3, name="t_dense")(x)
    model = keras.Model(x, [mha, fine, wrong, right, dense])
    facts = graph_facts(_traced(model, (2, 3)), ["t_mha", "t_fine", "t_conv_last", "t_conv", "t_dense"])
    assert facts == {"t_mha": ["bias_add_misplaced", "bias_add_nchw"], "t_conv_last": ["bias_add_misplaced"],
                     "t_conv": ["bias_add_nchw"]}          # NCHW: tf2onnx's Add along the last axis (row 7)


def test_a_deviation_on_the_misplaced_bias_is_found_before_by_the_graph(tmp_path):
    """A MultiHeadAttention with as many query positions as heads and a value_dim of 1 (the
    api-cpu campaign, rng 2872): TensorFlow alone out of tolerance, its program's fact on the
    layer, and the known entry of findings row 20 matches, though it lists no attention layer."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import Kind, TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import signatures_of

    spec = ModelSpec.from_json({
        "name": "mha", "inputs": [{"name": "x", "shape": [2, 3], "range": [-1, 1]}],
        "layers": [{"name": "t_mha", "api": "MultiHeadAttention",
                    "params": {"num_heads": 2, "key_dim": 1, "value_dim": 1}, "inputs": ["x", "x"]}],
        "output": "t_mha", "logits": "t_mha"})
    x = {"x": np.random.default_rng(0).uniform(-1, 1, (4, 2, 3)).astype(np.float32)}
    case = TestCase("mha-value-dim-1", spec, {}, x)
    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        ex.complete_weights(case, weight_seed=0)
        bias = [w for w in case.weights["t_mha"] if w.shape == (2, 1)]   # the query, key and value biases
        for w in bias:
            w[...] = [[1.0], [-1.0]]                  # a value bias that differs per head
        result = ex.run(case)
    devs = [f for f in result.verdict.findings if f.kind == Kind.DEVIATION]
    assert devs and all(f.detail.odd == ["tensorflow"] for f in devs), [f.detail.odd for f in devs]
    assert devs[0].detail.program["tensorflow"] == {"t_mha": ["bias_add_misplaced", "bias_add_nchw"]}
    (sig,) = signatures_of(devs[0], spec)
    assert "program:bias_add_misplaced" in sig.context
    assert match_known(sig, load_known_issues()).id == "keras-tf-add-bias-layout-guess"


def test_a_pair_deviation_with_no_odd_side_carries_its_backends_program_facts():
    """TensorFlow and onnxruntime (which converts TensorFlow's graph) against torch and JAX: no
    side is named, so the pair's own backends' facts are the evidence, and a channels_first
    Conv1DTranspose whose bias TensorFlow put on the length axis is findings row 20, not
    tf2onnx's uncropped output, whose rule would otherwise claim it (the api-cpu campaign,
    rng 2883's known-match check)."""
    from dataclasses import replace

    from audee.cases.case import Finding, Kind
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import signatures_of

    spec = {"layers": [{"name": "t_ct", "api": "Conv1DTranspose",
                        "params": {"filters": 2, "kernel_size": 1, "data_format": "channels_first"}, "inputs": ["x"]}]}
    f = Finding(Kind.DEVIATION, ["tensorflow", "onnxruntime"], {
        "pair": "tensorflow|onnxruntime", "tensor": "logits", "first_layer": "t_ct", "own_layers": ["t_ct"], "odd": [],
        "program": {"tensorflow": {"t_ct": ["bias_add_misplaced"]}}})
    (sig,) = signatures_of(f, spec, {"api": "Conv1DTranspose"})
    assert "program:bias_add_misplaced" in sig.context
    assert match_known(sig, load_known_issues()).id == "keras-tf-add-bias-layout-guess"
    # the layer's drawn data_format, as an API case's signature carries it: without TensorFlow's fact the
    # uncropped-output rule claims the pair, with it that rule stands aside
    drawn = replace(sig, params=(("data_format", "'channels_first'"),))
    assert match_known(drawn, load_known_issues()).id == "keras-tf-add-bias-layout-guess"
    bare = replace(drawn, context=())
    assert match_known(bare, load_known_issues()).id == "tf2onnx-convtranspose-output-padding"


def test_an_inconsistency_of_another_shape_carries_the_programs_nchw_bias_add():
    """A MultiHeadAttention under mixed_float16 whose value bias TensorFlow's graph adds with an
    NCHW BiasAdd: tf2onnx adds it along the last axis and onnxruntime's output has another shape
    ((24, 3, 5) against (8, 3, 5)), an inconsistency with onnxruntime odd and no deviation to
    pin a layer.  The layer the case was made around carries the program's fact, and the root
    is findings row 7, not onnxruntime's float16 entry, whose rule names only the policy (the
    api-cpu campaign, rng 2897's known-match check)."""
    from audee.cases.case import Finding, Kind
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import signatures_of

    spec = {"layers": [{"name": "t_mha", "api": "MultiHeadAttention",
                        "params": {"num_heads": 3, "key_dim": 2, "value_dim": 1, "dtype": "mixed_float16"},
                        "inputs": ["x", "x"]}]}
    f = Finding(Kind.INCONSISTENCY, ["tensorflow", "onnxruntime"], {
        "pair": "tensorflow|onnxruntime", "inputs": [0], "n_flips": 8, "odd": ["onnxruntime"],
        "shape_mismatch": {"tensorflow": [8, 3, 5], "onnxruntime": [24, 3, 5]},
        "program": {"onnxruntime": {"t_mha": ["bias_add_nchw"]}}})
    (sig,) = signatures_of(f, spec, {"api": "MultiHeadAttention", "dtype": "mixed_float16"})
    assert "program:bias_add_nchw" in sig.context and "policy:mixed_float16" in sig.context
    assert match_known(sig, load_known_issues()).id == "tf2onnx-biasadd-nchw-nonconst"


def test_onnxruntime_named_odd_on_a_graph_whose_bias_was_already_misplaced_is_kerass_guess():
    """A channels_first DepthwiseConv1D whose length equals its channels: TensorFlow's graph
    already adds the bias on the wrong axis, onnxruntime runs that graph, and the layer's
    float64 result, off which both are, names onnxruntime odd in its pair with JAX (the
    api-cpu campaign, rng 2948).  Its program carries the NCHW BiasAdd and the misplaced bias:
    Keras' guess (findings row 20), not tf2onnx's non-constant bias (row 7), which needs a bias
    TensorFlow placed right."""
    from audee.cases.case import Finding, Kind
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import signatures_of

    spec = {"layers": [{"name": "t_dw", "api": "DepthwiseConv1D",
                        "params": {"kernel_size": 1, "data_format": "channels_first"}, "inputs": ["x"]}]}

    def known(facts):
        f = Finding(Kind.DEVIATION, ["jax", "onnxruntime"], {
            "pair": "jax|onnxruntime", "score": 40.0, "max_abs": 2.0, "odd": ["onnxruntime"],
            "own_layers": ["t_dw"], "program": {"onnxruntime": {"t_dw": facts}}})
        (sig,) = signatures_of(f, spec, {"api": "DepthwiseConv1D"})
        return match_known(sig, load_known_issues()).id
    assert known(["bias_add_misplaced", "bias_add_nchw"]) == "keras-tf-add-bias-layout-guess"
    assert known(["bias_add_nchw"]) == "tf2onnx-biasadd-nchw-nonconst"


def test_the_converted_graph_carries_the_misplaced_bias_of_the_graph_it_was_given(tmp_path):
    """A channels_first DepthwiseConv2D whose width equals its channels: Keras' guess puts
    TensorFlow's bias on the width axis, and onnxruntime, running tf2onnx's conversion of that
    graph, computes the same, two against torch and JAX with no side named (the api-cpu
    campaign, rng 2889).  Its program facts hold the given graph's, so its pairs with
    torch and JAX are findings row 20 too, not a new root of their own."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import Kind, TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import signatures_of

    spec = ModelSpec.from_json({
        "name": "conv", "inputs": [{"name": "x", "shape": [3, 2, 3], "range": [-1, 1]}],
        "layers": [{"name": "t_conv", "api": "DepthwiseConv2D",
                    "params": {"kernel_size": 1, "data_format": "channels_first"}, "inputs": ["x"]}],
        "output": "t_conv", "logits": "t_conv"})
    x = {"x": np.random.default_rng(0).uniform(-1, 1, (4, 3, 2, 3)).astype(np.float32)}
    case = TestCase("conv-last-equals-channels", spec, {}, x)
    with Pool(parse_backends("tensorflow,torch,jax,onnxruntime"), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        ex.complete_weights(case, weight_seed=0)
        case.weights["t_conv"][1][...] = [1.0, -1.0, 2.0]         # a bias that differs per channel
        result = ex.run(case)
    devs = {f.detail.pair: f for f in result.verdict.findings if f.kind == Kind.DEVIATION}
    assert set(devs) == {"tensorflow|torch", "tensorflow|jax", "torch|onnxruntime", "jax|onnxruntime"}, set(devs)
    conv = devs["torch|onnxruntime"]
    assert conv.detail.program["onnxruntime"] == {"t_conv": ["bias_add_misplaced"]}
    for f in (conv, devs["jax|onnxruntime"]):
        (sig,) = signatures_of(f, spec)
        assert match_known(sig, load_known_issues()).id == "keras-tf-add-bias-layout-guess", sig


def test_a_runtime_refusing_the_converted_graph_keeps_its_program_facts(tmp_path):
    """A GroupQueryAttention whose query length equals its query heads and head_dim 1: Keras'
    TensorFlow ``ops.add`` adds the (4, 1) query bias as an NCHW BiasAdd, tf2onnx makes it an Add
    along the last axis, and onnxruntime's next MatMul fails on the broadcast shape at run.  The
    failure keeps the graph's facts, and the refusal is findings row 7, not a new root (the
    api-cpu campaign, rng 2900)."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import Kind, TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import signatures_of

    spec = ModelSpec.from_json({
        "name": "gqa", "inputs": [{"name": "q", "shape": [4, 16]}, {"name": "v", "shape": [4, 16]}],
        "layers": [{"name": "t_gqa", "api": "GroupQueryAttention",
                    "params": {"head_dim": 1, "num_query_heads": 4, "num_key_value_heads": 1}, "inputs": ["q", "v"]}],
        "output": "t_gqa", "logits": "t_gqa"})
    rng = np.random.default_rng(0)
    case = TestCase("gqa-query-bias-nchw", spec, {},
                    {k: rng.normal(size=(2, 4, 16)).astype(np.float32) for k in ("q", "v")})
    with Pool(parse_backends("tensorflow,onnxruntime"), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        ex.complete_weights(case, weight_seed=0)
        result = ex.run(case)
    (f,) = [f for f in result.verdict.findings if f.kind == Kind.DIVERGENT_ACCEPTANCE]
    assert list(f.detail.errors) == ["onnxruntime"] and f.detail.errors["onnxruntime"].phase == "run"
    assert "bias_add_nchw" in f.detail.program["onnxruntime"]["t_gqa"]
    (sig,) = signatures_of(f, spec, {"api": "GroupQueryAttention"})
    assert "program:bias_add_nchw" in sig.context
    assert match_known(sig, load_known_issues()).id == "tf2onnx-biasadd-nchw-nonconst"


def test_a_reshape_the_transpose_optimizer_made_after_a_square_is_the_squares_layers_fact():
    """tf2onnx's optimizer names a Transpose it makes ``Transpose__<n>`` and keeps the name
    when it turns it into a Reshape; one reading a ``Mul(t, t)`` is what its same-input branch
    leaves (findings row 98).  The Reshape has no layer scope: the fact is the square's
    layer's.  A Reshape after a product of two tensors, or a layer's own Reshape, is not it."""
    import onnx
    from onnx import TensorProto, helper

    from audee.backends.onnx_backend import graph_facts

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 8])
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="f/t_dot_1/Square_1"),
             helper.make_node("Reshape", ["sq", "shape"], ["r"], name="Transpose__46"),
             helper.make_node("Mul", ["x", "y"], ["xy"], name="f/t_mul_1/mul"),
             helper.make_node("Reshape", ["xy", "shape"], ["r2"], name="Transpose__47"),
             helper.make_node("Mul", ["y", "y"], ["sq2"], name="f/t_sq_1/Square"),
             helper.make_node("Reshape", ["sq2", "shape"], ["r3"], name="f/t_sq_1/Reshape")]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("x", "y")]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("r", "r2", "r3")]
    proto = helper.make_model(helper.make_graph(nodes, "g", io, outs, [shape]))
    onnx.checker.check_model(proto)
    assert graph_facts(proto, ["t_dot", "t_mul", "t_sq"]) == {"t_dot": ["transpose_reshaped_after_square"]}
