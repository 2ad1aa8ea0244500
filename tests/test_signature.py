"""Bug signatures (audee.triage.signature): error normalization, where the blame comes from, and
one root cause in many variants collapsing into one signature.  No frameworks needed."""
from __future__ import annotations

from audee.cases.case import Finding, Kind
from audee.localize.localizer import Report, Source
from audee.triage.signature import Signature, normalize_error, signatures_of

ERFC = ('InvalidGraph: [ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. In Node, '
        '("{layer}/Gelu/Erfc", Erfc, "", -1) : ("{layer}/Gelu/mul_1:0": tensor(float),) -> '
        '("{layer}/Gelu/Erfc:0",) , Error No Op registered for Erfc with domain_version of {opset}')

SPEC = {"name": "m", "layers": [
    {"name": "conv1", "api": "Conv2D", "params": {"filters": 6, "activation": "relu"}, "inputs": ["x"]},
    {"name": "fc1", "api": "Dense", "params": {"units": 120, "activation": "relu"}, "inputs": ["conv1"]},
    {"name": "fc2", "api": "Dense", "params": {"units": 84}, "inputs": ["fc1"]},
]}


def _mut(layer, param, new, old=None, invalid=False):
    return {"layer": layer, "param": param, "old": old, "new": new, "invalid": invalid}


def _divergent(message, backend="onnxruntime", phase="convert"):
    return Finding(Kind.DIVERGENT_ACCEPTANCE, [backend],
                   {"accepted": ["tensorflow"], "errors": {backend: {"phase": phase, "message": message}}})


def test_error_normalization_drops_what_varies():
    a = normalize_error(ERFC.format(layer="fc1_1", opset=15), ["fc1", "conv1"])
    b = normalize_error(ERFC.format(layer="conv2d_3", opset=17), ["fc1"])
    assert a == b
    assert a.startswith("InvalidGraph: [ONNXRuntimeError]")
    assert "No Op registered for Erfc" in a and "15" not in a and "fc1" not in a
    n = normalize_error("RuntimeError: bad shape (2, 3) vs [4, 5] at 0x7f3a2b in /usr/lib/python3/x/y.py:12 "
                        "for layer conv1 (tensor dense_12)", ["conv1"])
    assert n == "RuntimeError: bad shape <shape> vs <shape> at <hex> in <path> for layer <layer> (tensor <name>)"
    # a nested layer's graph node keeps the op it computes, as a top-level layer's does (a
    # SpectralNormalization's wrapped convolution: rng 2845); a file path stays a path
    nested = normalize_error("(op_type:Add, node name: t_sn/t_sn_layer_1/BiasAdd): Incompatible dimensions", ["t_sn"])
    assert nested == "(op_type:Add, node name: <layer><path>/BiasAdd): Incompatible dimensions"
    assert normalize_error("Node (t_conv/BiasAdd) Op (Add)", ["t_conv"]) == "Node (<layer>/BiasAdd) Op (Add)"


def test_an_embedded_traceback_is_dropped_for_the_words_after_it():
    msg = ("InvalidArgumentError: Graph execution error:\n\nDetected at node functional_1/up_1/conv_transpose "
           "defined at (most recent call last):\n  File \"<frozen runpy>\", line 198, in _run_module_as_main\n\n"
           "  File \"/x/y/z.py\", line 88, in _run_code\n      exec(code)\n\nCurrent CPU implementations do not "
           "yet support dilation rates larger than 1.\n\t [[{{node functional_1/up_1/conv_transpose}}]] "
           "[Op:__inference_fn_1272]")
    got = normalize_error(msg, ["up"])
    assert "do not yet support dilation rates larger than <n>" in got and "most recent call" not in got
    assert got == normalize_error(msg.replace("1272", "99"), ["up"])  # traced function names vary


def test_gelu_on_different_layers_and_variants_is_one_signature():
    """fc1 with gelu among other mutations, and conv1 with gelu alone: one bug."""
    one = signatures_of(_divergent(ERFC.format(layer="fc1_1", opset=15)), SPEC,
                        {"mutations": [_mut("fc1", "activation", "gelu", "relu"), _mut("fc1", "use_bias", False),
                                       _mut("fc2", "units", 222, 84), _mut("fc2", "activation", "softplus")]})
    two = signatures_of(_divergent(ERFC.format(layer="conv1_1", opset=15)), SPEC,
                        {"mutations": [_mut("conv1", "activation", "gelu", "relu"), _mut("conv1", "filters", 9, 6)]})
    assert len(one) == len(two) == 1
    assert one[0] == two[0] and one[0].key() == two[0].key() and one[0].slug() == two[0].slug()
    s = one[0]
    assert (s.kind, s.api, s.params, s.backends, s.phase) == (
        Kind.DIVERGENT_ACCEPTANCE, "activations.gelu", (("activation", "'gelu'"),), ("onnxruntime",), "convert")
    assert s.slug().startswith("divergent_acceptance-gelu-onnxruntime-") and len(s.slug()) < 80
    assert Signature.from_json(s.to_json()) == s


def test_different_exception_types_differ():
    muts = {"mutations": [_mut("fc1", "units", -5, 120, invalid=True)]}
    a = signatures_of(_divergent("ValueError: invalid units=-5", phase="build"), SPEC, muts)[0]
    b = signatures_of(_divergent("TypeError: invalid units=-5", phase="build"), SPEC, muts)[0]
    assert a.error != b.error and a.key() != b.key() and a.slug() != b.slug()
    assert a.error.startswith("ValueError:") and b.error.startswith("TypeError:")
    # the invalid value is the prime suspect; numbers are kept by sign
    assert (a.api, a.params) == ("Dense", (("units", "-int"),))
    c = signatures_of(_divergent("ValueError: invalid units=-3", phase="build"), SPEC,
                      {"mutations": [_mut("fc1", "units", -3, 120, invalid=True), _mut("fc2", "units", 7)]})[0]
    assert c == a


def test_signature_from_mutation_record_vs_localization():
    finding = Finding(Kind.INCONSISTENCY, ["tensorflow", "torch"], {"pair": "torch|tensorflow"})
    meta = {"mutations": [_mut("fc2", "units", 40, 84)]}
    from_record = signatures_of(finding, SPEC, meta)[0]
    assert (from_record.api, from_record.params, from_record.backends) == (
        "Dense", (("units", "+int"),), ("tensorflow", "torch"))
    report = Report("c", Kind.INCONSISTENCY, ["torch", "tensorflow"],
                    sources=[Source("conv1", "Conv2D", "padding", "same", "valid", Kind.INCONSISTENCY)])
    from_loc = signatures_of(finding, SPEC, meta, localization=report)[0]
    assert (from_loc.api, from_loc.params) == ("Conv2D", (("padding", "'same'"),))
    # the RQ2 stage's summary works as well as the report
    doc = {"localized": [{"layer": "conv1", "api": "Conv2D", "param": "padding", "old": "same", "new": "valid"}]}
    assert signatures_of(finding, SPEC, meta, localization=doc)[0] == from_loc


def test_signature_from_deviation_and_nan_detail():
    meta = {"mutations": [_mut("fc1", "units", 50, 120), _mut("fc2", "units", 10, 84)]}
    dev = Finding(Kind.DEVIATION, ["tensorflow", "jax"],
                  {"pair": "tensorflow|jax", "own_layers": ["fc1", "fc2"], "first_layer": "conv1",
                   "score": 3.0, "max_abs": 0.1, "max_rel": 0.01})
    s = signatures_of(dev, SPEC, meta)[0]
    assert (s.kind, s.api, s.params, s.backends) == ("deviation", "Dense", (("units", "+int"),), ("jax", "tensorflow"))
    s2 = signatures_of(Finding(Kind.DEVIATION, ["tensorflow", "jax"],
                               {"pair": "tensorflow|jax", "own_layers": [], "first_layer": "conv1"}), SPEC, meta)[0]
    assert (s2.api, s2.params) == ("Conv2D", ())  # conv1 was not mutated: its API alone
    nan = Finding(Kind.NAN, ["torch"], {"first_layer": {"torch": "fc2"}, "strong": True})
    s3 = signatures_of(nan, SPEC, meta)[0]
    assert (s3.kind, s3.api, s3.params, s3.backends, s3.error) == ("nan", "Dense", (("units", "+int"),), ("torch",), None)
    # a pattern difference: blamed where the patterns first differ, not where a NaN the input
    # carried first showed on the failing backend
    moved = Finding(Kind.NAN, ["tensorflow", "torch"],
                    {"first_layer": {"torch": "conv1"}, "strong": True,
                     "patterns": {"tensorflow|torch": {"first_layer": "fc2"}}})
    assert signatures_of(moved, SPEC, meta)[0].api == "Dense"


def test_a_training_nan_from_a_nonfinite_input_is_undefined_and_one_from_finite_input_a_bug():
    from audee.triage.rootcause import classify

    meta = {"mutations": [_mut("fc1", "units", 50, 120)]}
    detail = {"nonfinite": {"torch": ["grad:fc1/0"]}, "first": {"torch": "grad:fc1/0"}, "differ": ["grad:fc1/0"],
              "finite_backends": ["jax"], "strong": True, "layer": "fc1"}
    fed = signatures_of(Finding(Kind.TRAIN_NAN, ["torch"], {**detail, "input_nonfinite": True}), SPEC, meta)[0]
    own = signatures_of(Finding(Kind.TRAIN_NAN, ["torch"], {**detail, "input_nonfinite": False}), SPEC, meta)[0]
    assert (fed.api, fed.layer, fed.context) == ("Dense", "Dense", ("nonfinite_input",))
    assert classify(fed)[0] == "undefined" and classify(own)[0] == "bug" and own.context == ()
    special = signatures_of(Finding(Kind.TRAIN_DEVIATION, ["torch", "jax"], {"pair": "torch|jax", "layer": "fc1"}),
                            SPEC, {**meta, "special_inputs": [{"input": "x", "row": 0, "kind": "inf"}]})[0]
    assert special.context == ("nonfinite_input",) and classify(special)[0] == "undefined"


def test_a_training_step_refusing_ids_out_of_range_is_undefined_as_a_forward_pass_is():
    """The train-cpu campaign's gru-v00000: token rows out of range; TensorFlow's Embedding
    gather and torch's ``index out of range in self`` refuse them in phase ``train``, JAX
    clamps.  Only phase ``run`` looked at the inputs, so torch's refusal (its message names
    no layer) was a "new bug" on the mutated ReLU.  A failure in any phase that computes on
    the values is judged with the inputs' facts; a build or convert failure is not."""
    from audee.triage.rootcause import classify

    meta = {"mutations": [_mut("fc1", "units", 50, 120)],
            "special_inputs": [{"input": "x", "row": 3, "kind": "out_of_range"}]}
    for phase in ("run", "train", "gradient", "update"):
        f = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {"accepted": ["jax"], "errors": {
            "torch": {"phase": phase, "message": "IndexError: index out of range in self"}}})
        (s,) = signatures_of(f, SPEC, meta)
        assert "ids_out_of_range" in s.context and classify(s)[0] == "undefined", (phase, s.context)
    built = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {"accepted": ["jax"], "errors": {
        "torch": {"phase": "build", "message": "ValueError: bad units"}}})
    assert "ids_out_of_range" not in signatures_of(built, SPEC, meta)[0].context


def test_non_failures_have_no_signature():
    rej = Finding(Kind.CONSISTENT_REJECTION, ["a", "b"], {"errors": {}})
    assert signatures_of(rej, SPEC, {}) == []


def test_root_causes_join_parameter_classes_and_name_the_odd_backend_out():
    from audee.triage.known import unique_bugs
    from audee.triage.rootcause import root_causes

    from audee.records import ResultRow

    def row(i, sig):
        return ResultRow(id=f"c{i}", status="fail", kinds=[sig.kind], backends={"a": "ok"}, signatures=[sig.to_json()])

    dev = [Signature(Kind.DEVIATION, "CategoryEncoding", (("output_mode", cls),), ("jax", other), odd=("jax",))
           for other, cls in (("onnxruntime", "'count'"), ("tensorflow", "'count'"), ("torch", "'one_hot'"))]
    neg = "ValueError: Negative dimension size caused by subtracting <n> from <n>"
    rej = [Signature(Kind.DIVERGENT_ACCEPTANCE, "AdaptiveMaxPooling2D", (("data_format", cls),), (b,), phase, neg,
                     component="tensorflow")
           for cls, b, phase in (("None", "tensorflow", "run"), ("'channels_first'", "onnxruntime", "convert"))]
    other = Signature(Kind.DIVERGENT_ACCEPTANCE, "AdaptiveMaxPooling2D", (), ("torch",), "run", "IndexError: x")
    bugs = unique_bugs([row(i, s) for i, s in enumerate(dev + rej + [other])], [])
    assert len(bugs) == 5  # the deviations of one odd backend share a key where the parameter class does
    roots = {(g.kind, g.error): g for g in root_causes(bugs)}
    assert len(roots) == 3
    d = roots[(Kind.DEVIATION, None)]
    assert d.signatures == 2 and d.odd == ("jax",) and d.cases == 3
    r = roots[(Kind.DIVERGENT_ACCEPTANCE, neg)]
    assert r.signatures == 2 and r.backends == ("onnxruntime", "tensorflow") and r.component == "tensorflow"


def test_three_backends_each_apart_on_one_layer_are_one_disagreement_not_three():
    """The train-cpu campaign's api-Conv2D-v00002: tensorflow, torch and jax each differ from
    each on one layer (no majority, no reference), which made three "new bugs", one per pair.
    One case, one layer, no odd backend: one signature naming all three.  A pair with an odd
    backend, or another layer, stays its own."""
    from audee.triage.rootcause import root_key
    from audee.triage.signature import case_signatures

    def dev(a, b, layer="conv1"):
        return Finding(Kind.TRAIN_DEVIATION, [a, b], {"pair": f"{a}|{b}", "layer": layer}).to_json()

    verdict = {"findings": [dev("tensorflow", "torch"), dev("jax", "tensorflow"), dev("jax", "torch")]}
    (s,) = case_signatures(verdict, SPEC, {})
    assert s.backends == ("jax", "tensorflow", "torch") and not s.odd and "jax,tensorflow,torch" in root_key(s)
    apart = {"findings": [dev("tensorflow", "torch"), dev("jax", "tensorflow", layer="fc1")]}
    assert len(case_signatures(apart, SPEC, {})) == 2


def test_a_nan_pair_cleared_by_conditioning_does_not_place_the_difference():
    """TensorFlow's NaN pattern departs at fc1 from torch's and JAX's; its pair with onnxruntime
    also differs at conv2, by one element at the overflow boundary that conditioning cleared.
    The signature pins fc1, where the standing pairs differ, not conv2."""
    spec = {"layers": [{"name": "conv2", "api": "Conv2D", "params": {}, "inputs": ["x"]},
                       {"name": "fc1", "api": "Dense", "params": {}, "inputs": ["conv2"]}]}
    f = Finding(Kind.NAN, ["jax", "onnxruntime", "tensorflow", "torch"], {
        "strong": True, "odd": ["tensorflow"], "input_overflow_scale": True,
        "first_layer": {b: "conv2" for b in ("jax", "onnxruntime", "tensorflow", "torch")},
        "patterns": {"tensorflow|torch": {"first_layer": "fc1"}, "tensorflow|jax": {"first_layer": "fc1"},
                     "tensorflow|onnxruntime": {"first_layer": "conv2", "cleared": "overflow"}}})
    (sig,) = signatures_of(f, spec, {})
    assert sig.layer == "Dense"


def test_a_layer_a_structural_mutation_inserted_is_signed_with_all_its_parameters():
    """An inserted (or swapped-in) layer's record is its API alone, but every parameter was drawn
    with it, as an API-level case's: the signature carries them, so a known entry that names one
    (padding, interpolation) can match (the api-cpu campaign, rng 2832: an inserted
    AveragePooling3D with uneven SAME padding, an UpSampling2D swapped in for a Flatten)."""
    spec = {"name": "m", "layers": [
        {"name": "conv1", "api": "Conv2D", "params": {"filters": 6}, "inputs": ["x"]},
        {"name": "ins_up", "api": "UpSampling2D", "params": {"size": 2, "interpolation": "bicubic"},
         "inputs": ["conv1"]},
        {"name": "fc1", "api": "Dense", "params": {"units": 120, "activation": "relu"}, "inputs": ["ins_up"]}]}
    meta = {"mutations": [_mut("ins_up", "api", "UpSampling2D")]}
    dev = Finding(Kind.DEVIATION, ["tensorflow", "torch"],
                  {"pair": "tensorflow|torch", "own_layers": ["ins_up"], "first_layer": "ins_up"})
    s = signatures_of(dev, spec, meta)[0]
    assert (s.api, s.params) == ("UpSampling2D", (("interpolation", "'bicubic'"), ("size", "+int")))
    # a parameter mutation of a seed layer still names that parameter alone
    meta2 = {"mutations": [_mut("fc1", "units", 50, 120)]}
    dev2 = Finding(Kind.DEVIATION, ["tensorflow", "torch"],
                   {"pair": "tensorflow|torch", "own_layers": ["fc1"], "first_layer": "fc1"})
    assert signatures_of(dev2, spec, meta2)[0].params == (("units", "+int"),)


def test_a_wrapped_layer_is_signed_with_its_api_and_parameters():
    """TimeDistributed(LayerNormalization(axis=1)): the wrapped layer's parameters are drawn as
    mutations of ``t_td.layer``.  The signature blames the wrapped API with them, beside the
    wrapper's own, so a known cause of LayerNormalization is known through the wrapper (the
    api-cpu campaign, rng 2838: keras-torch-fused-norm-axis-silent announced as new)."""
    from audee.triage.known import load_known_issues, match_known

    spec = {"name": "m", "layers": [{"name": "t_td", "api": "TimeDistributed", "inputs": ["x0"], "params": {
        "layer": {"api": "LayerNormalization", "params": {"axis": 1, "epsilon": 0.001}}}}]}
    meta = {"api": "TimeDistributed", "mutations": [
        _mut("t_td", "layer", "LayerNormalization"), _mut("t_td.layer", "axis", 1),
        _mut("t_td.layer", "epsilon", 0.001)]}
    dev = Finding(Kind.DEVIATION, ["tensorflow", "torch"], {"pair": "tensorflow|torch", "odd": ["torch"],
                                                            "own_layers": ["t_td"], "first_layer": "t_td"})
    (s,) = signatures_of(dev, spec, meta)
    assert s.api == "LayerNormalization+TimeDistributed" and s.layer == "TimeDistributed"
    assert s.params == (("axis", "+int"), ("epsilon", "+float"), ("layer", "'LayerNormalization'"))
    known = match_known(s, load_known_issues())
    assert known is not None and known.id == "keras-torch-fused-norm-axis-silent"


def test_an_inconsistency_is_blamed_on_the_layer_its_pairs_deviation_pins():
    """TimeDistributed(LayerNormalization(axis=1)) on torch flips labels beside its deviation
    (the api-cpu campaign, rng 2845): the flip is that layer's difference, signed with its
    drawn parameters as the deviation is, so the same known cause matches both."""
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import case_signatures

    spec = {"name": "m", "layers": [{"name": "t_td", "api": "TimeDistributed", "inputs": ["x0"], "params": {
        "layer": {"api": "LayerNormalization", "params": {"axis": 1, "epsilon": 0.05}}}}]}
    meta = {"api": "TimeDistributed", "mutations": [
        _mut("t_td", "layer", "LayerNormalization"), _mut("t_td.layer", "axis", 1),
        _mut("t_td.layer", "epsilon", 0.05)]}
    dev = {"kind": Kind.DEVIATION, "backends": ["tensorflow", "torch"],
           "detail": {"pair": "tensorflow|torch", "odd": ["torch"], "own_layers": ["t_td"], "first_layer": "t_td"}}
    flip = {"kind": Kind.INCONSISTENCY, "backends": ["tensorflow", "torch"],
            "detail": {"pair": "tensorflow|torch", "odd": ["torch"]}}
    sigs = case_signatures({"findings": [dev, flip]}, spec, meta)
    (inc,) = [s for s in sigs if s.kind == "inconsistency"]
    assert ("axis", "+int") in inc.params and inc.api == "LayerNormalization+TimeDistributed"
    assert match_known(inc, load_known_issues()).id == "keras-torch-fused-norm-axis-silent"


def test_a_nan_signature_records_which_way_the_odd_backend_differs():
    """onnxruntime odd with fewer non-finite output values than every other backend (a float16
    body run in float32: the api-cpu campaign, rng 2847) or more (a select lowered to arithmetic):
    two causes on one layer, told apart by the fact; counts that overlap record neither."""
    spec = {"layers": [{"name": "rnn", "api": "ConvLSTM2D", "params": {}, "inputs": ["x"]}]}
    four = ["jax", "onnxruntime", "tensorflow", "torch"]

    def sig(counts):
        f = Finding(Kind.NAN, four, {"strong": True, "odd": ["onnxruntime"], "first_layer": {b: "rnn" for b in four},
                                     "patterns": {"onnxruntime|tensorflow": {"first_layer": "rnn"}},
                                     "counts": counts})
        return signatures_of(f, spec, {})[0].context

    def count(nan, inf=0):
        return {"nan": nan, "+inf": inf, "-inf": 0}

    fewer = sig({"onnxruntime": count(0, 3), "tensorflow": count(11, 3), "torch": count(11, 3), "jax": count(11, 3)})
    assert "odd_fewer_nonfinite" in fewer and "odd_more_nonfinite" not in fewer
    more = sig({"onnxruntime": count(56), "tensorflow": count(16), "torch": count(16), "jax": count(20)})
    assert "odd_more_nonfinite" in more and "odd_fewer_nonfinite" not in more
    overlap = sig({"onnxruntime": count(16), "tensorflow": count(16), "torch": count(20), "jax": count(20)})
    assert not {"odd_fewer_nonfinite", "odd_more_nonfinite"} & set(overlap)
    # a backend entirely finite has no count in records made before every backend was counted
    # (onnxruntime finite where TensorFlow and JAX hold NaN: the api-cpu campaign, rng 2873)
    finite = sig({"tensorflow": count(55), "torch": count(55), "jax": count(55)})
    assert "odd_fewer_nonfinite" in finite
    alone = sig({"onnxruntime": count(10)})
    assert "odd_more_nonfinite" in alone


def test_with_no_odd_backend_a_conversion_is_told_against_its_reference():
    """JAX and onnxruntime with the same Infs against TensorFlow and torch, no side named (the
    api-cpu campaign, rng 2893: XLA's and grappler's float16 reciprocal): onnxruntime holds more
    than the TensorFlow program it converted, which onnxruntime's float16 entry (a float16
    overflow kept finite, fewer) must not claim; fewer, it may."""
    from dataclasses import replace

    from audee.triage.known import load_known_issues, match_known

    spec = {"layers": [{"name": "n", "api": "Normalization", "params": {"dtype": "float16"}, "inputs": ["x"]}]}
    four = ["jax", "onnxruntime", "tensorflow", "torch"]

    def sig(counts, backends=four):
        f = Finding(Kind.NAN, backends, {"strong": True, "odd": [], "first_layer": {b: "n" for b in backends},
                                         "patterns": {"jax|tensorflow": {"first_layer": "n"}}, "counts": counts})
        return signatures_of(f, spec, {})[0]

    def count(inf):
        return {"nan": 0, "+inf": inf, "-inf": 0}

    more = sig({"jax": count(4), "onnxruntime": count(4), "tensorflow": count(0), "torch": count(0)})
    assert "judged_more_nonfinite" in more.context and not {"odd_more_nonfinite", "odd_fewer_nonfinite"} & set(
        more.context)
    fewer = sig({"jax": count(4), "onnxruntime": count(0), "tensorflow": count(4), "torch": count(0)})
    assert "judged_fewer_nonfinite" in fewer.context
    # on a layer no other entry claims, the direction alone decides onnxruntime's float16 entry
    issues = load_known_issues()
    hit = match_known(replace(more, api="Dense", layer="Dense"), issues)
    assert hit is None or hit.id != "ort-fp16-cast-roundtrip-elided"
    assert match_known(replace(fewer, api="Dense", layer="Dense"), issues).id == "ort-fp16-cast-roundtrip-elided"
    assert not {"judged_more_nonfinite", "judged_fewer_nonfinite"} & set(
        sig({"jax": count(4), "tensorflow": count(0), "torch": count(0)}, four[:1] + four[2:]).context)  # no conversion


def test_an_undecided_pair_is_read_from_each_side_by_a_known_mechanism():
    """A masked Bidirectional(LSTM) with a gelu recurrent activation that only TensorFlow and JAX
    ran (torch and onnxruntime refused it): the oracle names no odd backend between two
    independent frameworks, and TensorFlow holds more NaN (the api-cpu campaign, rng 3022:
    grappler's reordered o * gelu(z), findings row 90).  The side with more is recorded, and the
    entry that says TensorFlow adds NaN there claims the pair; where JAX holds more it does not,
    and a pair of a converter and its reference is never read so (it is judged)."""
    from audee.triage.known import load_known_issues, match_known

    spec = {"layers": [{"name": "b", "api": "Bidirectional",
                        "params": {"layer": {"api": "LSTM", "params": {"recurrent_activation": "gelu"}}},
                        "inputs": ["x"]}]}
    muts = [{"layer": "b", "param": "recurrent_activation", "old": None, "new": "gelu"}]

    def sig(counts):
        backends = sorted(counts)
        f = Finding(Kind.NAN, backends, {"strong": True, "odd": [], "first_layer": {b: "b" for b in backends},
                                         "patterns": {"|".join(backends): {"first_layer": "b"}}, "counts": counts})
        return signatures_of(f, spec, {"mutations": muts})[0]

    issues = load_known_issues()
    tf_more = sig({"tensorflow": {"nan": 589, "+inf": 7, "-inf": 4}, "jax": {"nan": 558, "+inf": 12, "-inf": 10}})
    assert "pair_more_nonfinite:tensorflow" in tf_more.context and not tf_more.odd
    assert match_known(tf_more, issues).id == "tf-grappler-gelu-mul-overflow-nan"
    jax_more = sig({"tensorflow": {"nan": 558, "+inf": 0, "-inf": 0}, "jax": {"nan": 600, "+inf": 0, "-inf": 0}})
    assert "pair_more_nonfinite:jax" in jax_more.context
    hit = match_known(jax_more, issues)
    assert hit is None or hit.id != "tf-grappler-gelu-mul-overflow-nan"
    judged = sig({"tensorflow": {"nan": 600, "+inf": 0, "-inf": 0}, "onnxruntime": {"nan": 558, "+inf": 0, "-inf": 0}})
    assert not any(c.startswith("pair_more_nonfinite:") for c in judged.context)


def test_an_odd_converter_named_against_its_reference_alone_says_so():
    """The oracle names onnxruntime odd "judged against its reference tensorflow" when every pair
    that stood is a converter and its reference (the independent frameworks' pairs cleared as an
    overflow's order: rng 3023): the signature records ``judged_only``; an odd backend named by a
    majority does not."""
    spec = {"layers": [{"name": "c", "api": "ConvLSTM3D", "params": {}, "inputs": ["x"]}]}
    four = ["jax", "onnxruntime", "tensorflow", "torch"]
    counts = {b: {"nan": 5, "+inf": 2 + (b == "onnxruntime"), "-inf": 0} for b in four}

    def sig(rule):
        f = Finding(Kind.NAN, four, {"strong": True, "odd": ["onnxruntime"], "odd_rule": rule,
                                     "first_layer": {b: "c" for b in four},
                                     "patterns": {"onnxruntime|tensorflow": {"first_layer": "c"}}, "counts": counts})
        return signatures_of(f, spec, {})[0]

    assert "judged_only" in sig("judged against its reference tensorflow (pairs cleared or forced left out)").context
    assert "judged_only" not in sig("strict majority").context


def test_every_backend_that_ran_is_counted():
    import numpy as np

    from audee.cases.case import Outcome
    from audee.oracle.nan import nan_findings

    out = [Outcome(b, logits=np.asarray(v, np.float32), output=np.asarray(v, np.float32),
                   nonfinite=[] if np.isfinite(v).all() else ["logits"])
           for b, v in (("a", [[1.0, 2.0]]), ("b", [[np.nan, 2.0]]), ("c", [[np.nan, 2.0]]))]
    (f,) = nan_findings(out, {"x": np.ones((1, 2), np.float32)})
    assert f.detail.counts["a"] == {"nan": 0, "+inf": 0, "-inf": 0} and f.detail.counts["b"]["nan"] == 1


def test_a_majority_named_side_on_float64_is_read_from_the_outvoted_side_and_its_flips_follow():
    """A bfloat16 DepthwiseConv2D (a unit-width output after a width stride of 3) that oneDNN
    computes as garbage on TensorFlow and torch alike, who outvote JAX, right (the api-cpu
    campaign, rng 3033): in bfloat16 the odd rule lets no float64 evidence overrule the majority,
    but where JAX, named odd, is within a float64 result and TensorFlow within none, the pair is
    read from TensorFlow's side too, and the known oneDNN entry claims it, its label flips with
    it.  JAX off float64 too, or TensorFlow on it: no reading, and the pair stays JAX's."""
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import case_signatures

    spec = {"layers": [{"name": "c", "api": "DepthwiseConv2D", "params": {"dtype": "bfloat16", "strides": [2, 3]},
                        "inputs": ["x"]}]}

    def findings(within):
        dev = Finding(Kind.DEVIATION, ["tensorflow", "jax"], {
            "pair": "tensorflow|jax", "tensor": "logits", "score": 23.9, "max_abs": 5.1, "max_rel": 1.25,
            "n_out": 329, "n": 720, "dtype": "bfloat16", "first_layer": "c", "own_layers": ["c"],
            "odd": ["jax"], "float64_within": within})
        flips = Finding(Kind.INCONSISTENCY, ["tensorflow", "jax"], {
            "pair": "tensorflow|jax", "distance": 1.2, "n_flips": 5, "odd": ["jax"], "layer_distances": {"c": 1.1}})
        return {"findings": [dev.to_json(), flips.to_json()]}

    issues = load_known_issues()
    sigs = case_signatures(findings({"tensorflow": [], "jax": ["torch"]}), spec, {})
    assert {s.kind for s in sigs} == {"deviation", "inconsistency"}
    assert all("outvoted_on_float64:tensorflow" in s.context and s.odd == ("jax",) for s in sigs)
    assert {match_known(s, issues).id for s in sigs} == {"onednn-bf16-conv-strided-unit-width"}
    for within in ({"tensorflow": ["torch"], "jax": ["torch"]}, {"tensorflow": [], "jax": []}):
        sigs = case_signatures(findings(within), spec, {})
        assert not any(c.startswith("outvoted_on_float64:") for s in sigs for c in s.context)
        assert {match_known(s, issues) for s in sigs} == {None}


def test_an_undecided_deviation_pair_is_read_from_the_side_off_float64_and_its_flips_follow():
    """A bfloat16 Conv2D (kernel 4, strides 3, VALID: a unit-width output) that TensorFlow's oneDNN
    computes as garbage, torch too, JAX right (the api-cpu campaign, rng 3026): the oracle names no
    odd side of TensorFlow-JAX, but JAX is within TensorFlow's float64 recomputation and TensorFlow
    within none; that side is read as odd, off float64, and the known oneDNN entry claims the pair,
    its label flips with it (one root).  Both within, or neither: no reading."""
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import case_signatures

    spec = {"layers": [{"name": "c", "api": "Conv2D", "params": {"dtype": "bfloat16", "strides": 3},
                        "inputs": ["x"]}]}

    def findings(within):
        dev = Finding(Kind.DEVIATION, ["tensorflow", "jax"], {
            "pair": "tensorflow|jax", "tensor": "logits", "score": 30.7, "max_abs": 13.1, "max_rel": 1.6,
            "n_out": 547, "n": 1000, "dtype": "bfloat16", "first_layer": "c", "own_layers": ["c"],
            "odd": [], "float64_within": within})
        flips = Finding(Kind.INCONSISTENCY, ["tensorflow", "jax"], {
            "pair": "tensorflow|jax", "distance": 1.44, "n_flips": 6, "odd": [],
            "layer_distances": {"c": 1.43}})
        return {"findings": [dev.to_json(), flips.to_json()]}

    issues = load_known_issues()
    sigs = case_signatures(findings({"tensorflow": [], "jax": ["tensorflow"]}), spec, {})
    assert {s.kind for s in sigs} == {"deviation", "inconsistency"}
    assert all("pair_off_float64:tensorflow" in s.context and not s.odd for s in sigs)
    assert {match_known(s, issues).id for s in sigs} == {"onednn-bf16-conv-strided-unit-width"}
    for within in ({"tensorflow": ["tensorflow"], "jax": ["tensorflow"]}, {"tensorflow": [], "jax": []}):
        sigs = case_signatures(findings(within), spec, {})
        assert not any(c.startswith("pair_off_float64:") for s in sigs for c in s.context)
