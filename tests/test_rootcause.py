"""Root causes and classes (audee.triage.rootcause), and known-issue matching as a maintainer
counts: rules without a framework first, then real TensorFlow + onnxruntime runs where
riders and the carrying layer must not split one converter failure."""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Finding, Kind
from audee.report.bugreports import search_queries
from audee.triage.known import KnownIssue, load_known_issues, match_known, unique_bugs
from audee.records import ResultRow
from audee.triage.rootcause import class_counts, classify, root_causes, root_key, shared_component, template
from audee.triage.signature import Signature, op_of, signatures_of
from tests.helpers import run_audee

SPEC = {"layers": [{"name": "deconv", "api": "Conv3DTranspose", "params": {"activation": "relu"}},
                   {"name": "dense", "api": "Dense", "params": {"units": 4}}]}
SIZE = ("InvalidArgumentError: Graph execution error: Conv3DBackpropInputOp: Size of out_backprop doesn't match "
        "computed: actual = 4, computed = 3 spatial_dim: 1 input: 5 filter: 2 output: 4 stride: 1 dilation: 1 "
        "[[{{node functional_1/deconv_1/conv3d_transpose}}]] [Op:__inference_forward_123]")


def _divergent(message: str, failing: str = "tensorflow", phase: str = "run", traceback: str = "") -> Finding:
    return Finding(Kind.DIVERGENT_ACCEPTANCE, [failing],
                   {"accepted": ["torch", "jax"],
                    "errors": {failing: {"phase": phase, "message": message, "traceback": traceback}}})


def _row(case_id: str, signatures: list[dict]) -> ResultRow:
    return ResultRow(id=case_id, status="fail", kinds=[], backends={"a": "ok"}, signatures=signatures)


def _rows(*sigs: list[Signature]) -> list[ResultRow]:
    return [_row(f"c{i}", [s.to_json() for s in group]) for i, group in enumerate(sigs)]


def test_a_rider_activation_does_not_split_a_root_cause():
    rows = []
    for act in ("relu", "selu", "sparse_plus"):
        meta = {"api": "Conv3DTranspose", "mutations": [
            {"layer": "deconv", "param": "activation", "old": None, "new": act}]}
        rows.append(signatures_of(_divergent(SIZE), SPEC, meta))
    bugs = unique_bugs(_rows(*rows), [])
    assert len({b.key for b in bugs}) == 3            # signatures keep the rider ...
    (root,) = root_causes(bugs)                           # ... the root cause does not
    assert root.op == "Conv3DBackpropInput" and root.component == "tensorflow" and root.cases == 3
    assert root.klass == "bug" and root.signatures == 3


def test_ops_are_read_from_framework_and_converter_errors():
    assert op_of(SIZE) == "Conv3DBackpropInput"
    assert op_of("InvalidGraph: [ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. In Node, "
                 "('x', Erfc, '', -1) : () -> () , Error No Op registered for Erfc with domain_version of 15") == "Erfc"
    assert op_of("Fail: [ONNXRuntimeError] : 1 : FAIL : Node (dense/BiasAdd) Op (Add) [ShapeInferenceError] "
                 "Incompatible dimensions") == "Add"
    assert op_of("UnimplementedError: Graph execution error: The Conv2D op currently only supports the NHWC "
                 "tensor format on the CPU.") == "Conv2D"
    assert op_of("TypeError: Exception encountered when calling CategoryEncoding.call(). Value passed") \
        == "CategoryEncoding"
    assert op_of("InvalidArgumentError: Value for attr 'T' of bool is not in the list of allowed values: int8 ; "
                 "NodeDef: {{node Invert}}; Op<name=Invert; signature=x:T -> y:T>") == "Invert"
    assert op_of("ValueError: something plain went wrong") is None


def test_pairwise_findings_of_one_odd_backend_are_one_signature_and_one_root():
    sigs = [signatures_of(Finding(Kind.DEVIATION, ["jax", other], {"pair": f"jax|{other}", "own_layers": ["dense"],
                                                                      "odd": ["jax"]}), SPEC, {})
            for other in ("onnxruntime", "tensorflow", "torch")]
    bugs = unique_bugs(_rows(*sigs), [])
    assert len(bugs) == 1 and bugs[0].cases == 3 and "jax" in bugs[0].slug
    (root,) = root_causes(bugs)
    assert root.odd == ("jax",) and root.api == "Dense" and root.kind == "deviation"
    # two backends: the oracle cannot tell, the pair names the root
    two = signatures_of(Finding(Kind.DEVIATION, ["jax", "torch"], {"pair": "jax|torch", "own_layers": ["dense"],
                                                                   "odd": []}), SPEC, {})
    assert root_key(two[0]).startswith("numeric | ?jax,torch | Dense")


def test_a_pair_folds_into_the_root_of_the_odd_backend_it_holds():
    def deviation(pair: tuple[str, str], odd: list[str]) -> list[Signature]:
        return signatures_of(Finding(Kind.DEVIATION, list(pair), {"pair": "|".join(pair), "own_layers": ["dense"],
                                                                 "odd": odd}), SPEC, {})
    odd = deviation(("tensorflow", "torch"), ["torch"])
    pairs = [deviation(("jax", "torch"), []), deviation(("tensorflow", "torch"), [])]
    bugs = unique_bugs(_rows(odd, *pairs), [])
    assert len({root_key(b.signature) for b in bugs}) == 3           # three signatures, three keys ...
    (root,) = root_causes(bugs)                                          # ... one fix
    assert root.odd == ("torch",) and root.signatures == 3 and root.cases == 3
    # a pair without the odd root of its layer, or another layer's pair, stays its own
    other = signatures_of(Finding(Kind.DEVIATION, ["jax", "tensorflow"], {"pair": "jax|tensorflow",
                                                                          "own_layers": ["dense"], "odd": []}),
                          SPEC, {})
    assert len(root_causes(unique_bugs(_rows(odd, other), []))) == 2
    # two odd roots the pair could belong to: it cannot tell, it stays
    jax_odd = deviation(("jax", "tensorflow"), ["jax"])
    assert len(root_causes(unique_bugs(_rows(odd, jax_odd, pairs[0]), []))) == 3
    # the odd root a known issue matched: the pairs fold into it as into a new one (a pair is not
    # announced new because its odd backend's root became known)
    entry = KnownIssue.model_validate({"id": "torch-dense", "title": "t", "status": "found before", "row": 1,
                                       "match": {"kind": "deviation", "odd": ["torch"], "api": "Dense"}})
    (root,) = root_causes(unique_bugs(_rows(odd, *pairs), [entry]))
    assert root.status == "found before" and root.cases == 3


def test_an_inconsistency_joins_its_pairs_deviation():
    verdict = {"findings": [
        {"kind": Kind.DEVIATION, "backends": ["jax", "torch"],
         "detail": {"pair": "jax|torch", "own_layers": ["dense"], "odd": ["jax"]}},
        {"kind": Kind.INCONSISTENCY, "backends": ["jax", "torch"], "detail": {"pair": "jax|torch", "odd": ["jax"]}}]}
    from audee.triage.signature import case_signatures

    sigs = case_signatures(verdict, SPEC, {"mutations": [{"layer": "deconv", "param": "activation", "new": "selu"}]})
    assert len(sigs) == 2 and len({root_key(s) for s in sigs}) == 1


@pytest.mark.parametrize("message, klass", [
    ("InvalidGraph: [ONNXRuntimeError] : 10 : INVALID_GRAPH : In Node, ('b', Bucketize, '', -1) : () -> () , "
     "Error No Op registered for Bucketize with domain_version of 15", "limitation"),
    ("UnimplementedError: Graph execution error: The Conv2D op currently only supports the NHWC tensor format",
     "limitation"),
    ("InvalidArgumentError: No OpKernel was registered to support Op 'MaxPool3D' used by {{node m}} with these "
     "attrs: [T=DT_HALF]", "limitation"),
    ("NotFoundError: Could not find device for node: {{node Reciprocal}} = Reciprocal[T=DT_INT32]\nAll kernels "
     "registered for op Reciprocal:\n  device='CPU'; T in [DT_FLOAT]", "limitation"),   # TF eager: no kernel
    ("InvalidArgumentError: Graph execution error: Current CPU implementation does not yet support dilation rates "
     "larger than 1. [[{{node t_conv3dtranspose_1/conv_transpose}}]]", "limitation"),  # the api-cpu campaign, rng 2817
    (SIZE, "bug"),
])
def test_explicit_unsupported_errors_are_limitations(message, klass):
    (sig,) = signatures_of(_divergent(message, "onnxruntime" if "ONNX" in message else "tensorflow"), SPEC, {})
    assert classify(sig)[0] == klass


def test_undefined_inputs_and_the_harness_are_classed_apart():
    meta = {"mutations": [{"layer": "dense", "param": "units", "new": -2, "invalid": True}]}
    (sig,) = signatures_of(_divergent(SIZE), SPEC, meta)
    assert classify(sig) == ("undefined", "a crafty invalid value of units")
    nan = Finding(Kind.NAN, ["onnxruntime", "torch", "jax"],
                  {"strong": True, "input_nonfinite": True, "odd": ["onnxruntime"], "first_layer": {},
                   "patterns": {"jax|onnxruntime": {"first_layer": "dense"}}})
    (s,) = signatures_of(nan, SPEC, {"special_inputs": {"nan": 3}})
    assert classify(s)[0] == "undefined"
    (root,) = root_causes(unique_bugs(_rows([s]), []))
    assert root.silent == "onnxruntime"                # one backend silently different: said so
    frame = 'Traceback (most recent call last):\n  File "/x/site-packages/audee/backends/onnx_backend.py", line 9\n'
    (h,) = signatures_of(_divergent("ValueError: glue", "onnxruntime", "convert", frame), SPEC, {})
    assert classify(h)[0] == "harness"


def test_agreed_nonfinite_values_are_no_bug_signature():
    agreed = Finding(Kind.NAN, ["jax", "torch"], {"strong": False, "agreed": True, "first_layer": {"jax": "dense"}})
    assert signatures_of(agreed, SPEC, {}) == []
    # the one backend that ran (every other refused the case): nothing to compare, as agreed
    # (an exponential recurrence overflowing in float64 too, the api-cpu campaign rng 2813)
    alone = Finding(Kind.NAN, ["tensorflow"], {"strong": False, "agreed": False, "ran": 1,
                                               "first_layer": {"tensorflow": "dense"}})
    assert signatures_of(alone, SPEC, {}) == []
    two = Finding(Kind.NAN, ["tensorflow"], {"strong": False, "agreed": False, "ran": 2,
                                             "first_layer": {"tensorflow": "dense"}})
    assert len(signatures_of(two, SPEC, {})) == 1     # one of two that ran: the other is finite


def test_a_known_class_overrides_the_rules_and_counts_per_class():
    issue = KnownIssue.model_validate({"id": "size", "title": "t", "link": "https://x.org/1", "class": "limitation",
                                       "match": {"error": "Size of out_backprop"}})
    (sig,) = signatures_of(_divergent(SIZE), SPEC, {})
    assert match_known(sig, [issue]) is issue and classify(sig, issue) == ("limitation", "known issue size")
    roots = root_causes(unique_bugs(_rows([sig]), [issue]))
    assert class_counts(roots)["limitation"] == {"root_causes": 1, "new": 0, "known": 1, "found before": 0,
                                                 "known upstream": 1, "fixed upstream": 0}


def test_known_matching_reads_the_whole_error_aliases_and_the_odd_backend():
    long = "ValueError: " + "padding words " * 60 + "\nmore\nlines\nEmbedding.call(). index out of range in self"
    (sig,) = signatures_of(_divergent(long, "torch"), SPEC, {})
    assert "index out of range" not in (sig.error or "") and "index out of range" in sig.error_full
    assert match_known(sig, load_known_issues()).id == "keras-embedding-out-of-range-raise"
    # an entry about Embedding matches ReversibleEmbedding (a subclass)
    rev = Signature(Kind.NAN, "ReversibleEmbedding", (), ("jax", "torch"), odd=("jax",), layer="ReversibleEmbedding")
    assert match_known(rev, load_known_issues()).id == "keras-embedding-out-of-range-jax-nan"
    # an entry about TensorFlow dropping NaN does not take a finding where onnxruntime is odd
    pool = Signature(Kind.NAN, "MaxPooling2D", (), ("onnxruntime", "tensorflow", "torch"), odd=("onnxruntime",))
    assert match_known(pool, load_known_issues()) is None
    assert match_known(Signature(Kind.NAN, "MaxPooling2D", (), ("tensorflow", "torch"), odd=("tensorflow",)),
                       load_known_issues()).id == "tf-maxpool-drops-nan"


def test_templates_fold_node_names_and_type_lists():
    a = "InvalidGraph: In Node, (<name>, Loop, <name>, <n>) : (<name>: tensor(int64),<name>: tensor(float16),) -> x"
    b = "InvalidGraph: In Node, (<name>, Loop, <name>, <n>) : (<name>: tensor(int64),<name>: tensor(float),<name>: " \
        "tensor(float),) -> x"
    assert template(a) == template(b)


def test_old_rows_without_root_fields_still_read():
    old = {"kind": "deviation", "api": "Dense", "params": [], "backends": ["jax", "torch"], "phase": None,
           "error": None, "key": "x", "slug": "y"}
    (root,) = root_causes(unique_bugs([_row("c0", [old])], []))
    assert root.klass == "bug" and root.odd == () and root.api == "Dense"


# ---- on TensorFlow and onnxruntime ---------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends("tensorflow,onnxruntime"), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield p


def _one_layer(pool, api: str, params: dict, shape: list[int], meta: dict) -> ResultRow:
    """A one-layer model of ``api`` run on the pool; its results row (signatures included)."""
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.fuzz import result_row
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({"name": "one", "inputs": [{"name": "x", "shape": shape}],
                                "layers": [{"name": "layer", "api": api, "params": params, "inputs": ["x"]},
                                           {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["layer"]}],
                                "output": "flat", "logits": "flat"})
    x = {"x": np.random.default_rng(0).normal(size=[4, *shape]).astype(np.float32)}
    case = TestCase(f"{api}-{params.get('activation')}", spec, {}, x, meta)
    ex = Executor(pool)
    ex.complete_weights(case, weight_seed=0)
    return result_row(ex.run(case), {}, meta=meta)


def _act(layer_params: dict, act: str, api: str) -> dict:
    return {"api": api, "mutations": [{"layer": "layer", "param": "activation", "old": None, "new": act}],
            **({} if not layer_params else {})}


def test_one_converter_failure_is_one_root_cause_whatever_rides_along_or_carries_it(pool):
    # tf2onnx's BiasAdd(NCHW) with a non-constant bias (findings/tf2onnx_biasadd_nchw_nonconst.py), met
    # with two rider activations: onnxruntime trips over its Add at run (a broadcast its shapes refuse) ...
    conv = {"filters": 3, "kernel_size": 2, "data_format": "channels_first", "use_bias": True}
    riders = [_one_layer(pool, "Conv1DTranspose", {**conv, "activation": a}, [3, 4], _act(conv, a, "Conv1DTranspose"))
              for a in ("relu", "selu")]
    # ... and at load, where the ONNX checker's shape inference refuses the same Add
    load = _one_layer(pool, "Conv1D", {**conv, "activation": "relu"}, [3, 6], _act(conv, "relu", "Conv1D"))
    # gelu (tf2onnx leaves TensorFlow's Erfc unconverted), carried by a Dense and by a Conv2D
    gelu = [_one_layer(pool, "Dense", {"units": 3, "activation": "gelu"}, [5], _act({}, "gelu", "Dense")),
            _one_layer(pool, "Conv2D", {"filters": 2, "kernel_size": 2, "activation": "gelu"}, [4, 4, 1],
                       _act({}, "gelu", "Conv2D"))]
    for row in riders + [load] + gelu:
        assert row.status == "fail" and row.backends["tensorflow"] == "ok", row
        assert row.backends["onnxruntime"] != "ok", row
    assert {riders[0].backends["onnxruntime"], load.backends["onnxruntime"]} == {"error:run", "error:convert"}
    (root,) = root_causes(unique_bugs(riders + [load], []))   # one node's two faces: one root, the converter's
    assert root.cases == 3 and root.component == "tf2onnx" and root.op == "Add" and root.klass == "bug"
    assert search_queries(root)[0].startswith("repo:onnx/tensorflow-onnx ")   # reported where tf2onnx is fixed
    (g,) = root_causes(unique_bugs(gelu, []))
    assert g.op == "Erfc" and g.component == "tf2onnx" and g.cases == 2
    assert g.klass == "limitation"                     # an op the converter does not support
    known = root_causes(unique_bugs(gelu, load_known_issues()))
    assert known[0].known_id == "tf2onnx-gelu-erfc"


def test_a_triaged_finding_is_found_before_and_a_new_bug_gets_an_upstream_ready_report(tmp_path):
    """A real run: tf2onnx's BiasAdd(NCHW) with a non-constant bias, caught by onnxruntime at
    run (findings row 7).  With the shipped list it is `found before` (its row and script), not
    new: the summary leads with "new bugs: 0 (found before: 1, ...)" and no bug report is
    written.  Without the list the same run (resumed) calls it new, and `audee report` writes
    bugs/<root>.md with a title, the versions, the repro script inline, expected and actual,
    and a search query, and links it from bugs.md and roots.md."""
    import json
    import sys

    from audee.report import load_campaign_dir, write_report

    spec = {"name": "nchw", "inputs": [{"name": "x", "shape": [3, 4]}],
            "layers": [{"name": "deconv", "api": "Conv1DTranspose", "inputs": ["x"],
                        "params": {"filters": 3, "kernel_size": 2, "data_format": "channels_first", "use_bias": True}},
                       {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["deconv"]}],
            "output": "flat", "logits": "flat"}
    (tmp_path / "nchw.json").write_text(json.dumps(spec))
    np.savez(tmp_path / "x.npz", x=np.random.default_rng(0).normal(size=(8, 3, 4)).astype(np.float32))
    out = tmp_path / "run"
    fuzz = [sys.executable, "-m", "audee", "fuzz", "--seed", str(tmp_path / "nchw.json"), "--inputs",
            str(tmp_path / "x.npz"), "--backends", "tensorflow,onnxruntime", "--batch", "8",
            "--no-progress", "--variants", "0", "--out", str(out)]
    run = run_audee(fuzz)  # in this process, on the suite's kept workers
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[1] == "  new bugs: 0 (found before: 1, known upstream: 0, fixed upstream: 0)", run.stdout
    assert "bug             1  (new: 0, found before: 1, known upstream: 0, fixed upstream: 0)" in run.stdout
    assert "bug        FOUND divergent_acceptance" in run.stdout
    assert ("found before: tf2onnx-biasadd-nchw-nonconst, findings row 7, findings/tf2onnx_biasadd_nchw_nonconst.py"
            in run.stdout), run.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["new_bugs"] == 0 and summary["classes"]["bug"]["found before"] == 1
    (root,) = summary["roots"]
    assert (root["status"], root["known_id"]) == ("found before", "tf2onnx-biasadd-nchw-nonconst")
    write_report(load_campaign_dir(out), tmp_path / "known-report")
    assert not (tmp_path / "known-report" / "bugs").exists()  # a report per new root only
    roots_md = (tmp_path / "known-report" / "roots.md").read_text()
    assert roots_md.split("\n")[2].startswith("**new bugs: 0 (found before: 1, known upstream: 0, fixed upstream: 0)**")
    assert "| bug | found before | - | tf2onnx-biasadd-nchw-nonconst |" in roots_md

    empty = tmp_path / "empty.yaml"
    empty.write_text("issues: []\n")
    run = run_audee(fuzz + ["--no-shipped-known-issues", "--known-issues", str(empty)])
    assert run.returncode == 0, run.stderr[-3000:]
    assert "0 test cases run now, 1 resumed" in run.stdout
    assert "new bugs: 1 (found before: 0, known upstream: 0, fixed upstream: 0)" in run.stdout, run.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["new_bugs"] == 1 and summary["classes"]["bug"]["root_causes"] == 1
    write_report(load_campaign_dir(out), tmp_path / "report", known=[])
    (report,) = (tmp_path / "report" / "bugs").glob("*.md")
    text = report.read_text()
    assert text.startswith("# [tf2onnx] Add (Conv1DTranspose):"), text[:200]   # onnxruntime trips over tf2onnx's Add
    for part in ("## Versions", "- keras 3.", "- onnxruntime ", "## Expected and actual",
                 "- expected: every backend computes a result, as tensorflow do", "```python",
                 "import", "## Already reported?", "repo:"):
        assert part in text, part
    assert f"bugs/{report.name}" in (tmp_path / "report" / "bugs.md").read_text()
    assert f"bugs/{report.name}" in (tmp_path / "report" / "roots.md").read_text()


def test_input_facts_are_read_on_the_rows_a_finding_names():
    special = {"special_inputs": [{"input": "x", "row": 3, "kind": "nan"}, {"input": "t", "row": 5, "kind": "negative"}]}
    on_nan_row = Finding(Kind.DEVIATION, ["jax", "tensorflow"],
                         {"pair": "jax|tensorflow", "own_layers": ["dense"], "rows": [3], "odd": []})
    elsewhere = Finding(Kind.DEVIATION, ["jax", "tensorflow"],
                        {"pair": "jax|tensorflow", "own_layers": ["dense"], "rows": [0, 1], "odd": []})
    (a,), (b,) = signatures_of(on_nan_row, SPEC, special), signatures_of(elsewhere, SPEC, special)
    assert classify(a)[0] == "undefined" and "nonfinite_input" in a.context
    assert classify(b)[0] == "bug" and not b.context
    ids = Finding(Kind.INCONSISTENCY, ["jax", "torch"], {"pair": "jax|torch", "inputs": [5], "odd": []})
    (c,) = signatures_of(ids, SPEC, special)
    assert classify(c) == ("undefined", "ids out of range")
    # a crash at run is undefined for ids out of range anywhere in the batch, not for a NaN row
    (d,) = signatures_of(_divergent(SIZE), SPEC, {"special_inputs": special["special_inputs"][:1]})
    assert classify(d)[0] == "bug"


def test_a_value_no_integer_holds_cast_to_an_index_is_undefined():
    """CLAHE casts each pixel to an int32 histogram bin before it clips to value_range: a
    near-max pixel is an undefined cast, a different bin per backend (the api-cpu campaign,
    rng 2837).  Only on the rows the deviation names, only for a layer that casts values to
    indices (AutoContrast on the same input is a real XLA bug: findings row 82), and not for a
    converted program judged against its reference (it must compute what it was given)."""
    def case(api, params):
        return {"name": "m", "inputs": [{"name": "x0", "shape": [4, 8, 8, 1], "dtype": "float32"}],
                "layers": [{"name": "t", "api": api, "params": params, "inputs": ["x0"]}]}

    clahe = case("ContrastLimitedAdaptiveHistogramEqualization", {"value_range": [-3.0, 3.0]})
    meta = {"special_inputs": [{"input": "x0", "row": 3, "kind": "near_max"}]}

    def dev(rows, odd=(), pair="jax|tensorflow"):
        return Finding(Kind.DEVIATION, pair.split("|"), {"pair": pair, "own_layers": ["t"], "rows": rows,
                                                         "odd": list(odd)})

    (a,) = signatures_of(dev([3], ["jax"]), clahe, meta)
    assert "index_overflow" in a.context and classify(a)[0] == "undefined"
    (b,) = signatures_of(dev([0, 1], ["jax"]), clahe, meta)
    assert classify(b)[0] == "bug"
    (c,) = signatures_of(dev([3], ["jax"]), case("AutoContrast", {"value_range": [0.0, 1.0]}), meta)
    assert "index_overflow" not in c.context and classify(c)[0] == "bug"
    (d,) = signatures_of(dev([3], ["onnxruntime"], "onnxruntime|tensorflow"), clahe, meta)
    assert "index_overflow" in d.context and classify(d)[0] == "bug"


def test_a_label_flip_within_tolerance_is_the_harness():
    from audee.triage.signature import case_signatures

    flip = {"kind": Kind.INCONSISTENCY, "backends": ["jax", "torch"], "detail": {"pair": "jax|torch", "odd": []}}
    (alone,) = case_signatures({"findings": [flip]}, SPEC, {})
    assert classify(alone) == ("harness", "labels flip on values within the deviation tolerance (a near-tie)")
    dev = {"kind": Kind.DEVIATION, "backends": ["jax", "torch"],
           "detail": {"pair": "jax|torch", "own_layers": ["dense"], "odd": []}}
    sigs = case_signatures({"findings": [dev, flip]}, SPEC, {})
    assert [classify(s)[0] for s in sigs] == ["bug", "bug"]
    # a distance made infinite by another row, non-finite on one side only (the NaN oracle's), leaves the
    # flipping row (finite on both) a near-tie all the same (rng 2989: GroupQueryAttention near 40000)
    inf = {**flip, "detail": {**flip["detail"], "distance": float("inf")}}
    (far,) = case_signatures({"findings": [inf]}, SPEC, {})
    assert classify(far)[0] == "harness"


def test_only_the_kind_of_nonfinite_value_differing_is_the_overflow_boundary():
    from audee.oracle.nan import overflow_boundary

    fed = {"x": np.ones((1, 3), np.float32)}
    kinds = {"a": np.array([[np.nan, 1.0, np.inf]], np.float32), "b": np.array([[np.inf, 1.0, np.nan]], np.float32)}
    assert overflow_boundary(fed, kinds, {}, "float16")
    finite = {"a": np.array([[np.nan, 1.0]], np.float32), "b": np.array([[2.0, 1.0]], np.float32)}
    assert not overflow_boundary(fed, finite, {}, "float32")   # a NaN where the other is finite stands


def test_a_label_flip_between_outputs_of_different_shapes_is_no_near_tie():
    from audee.triage.signature import case_signatures

    flip = {"kind": Kind.INCONSISTENCY, "backends": ["onnxruntime", "torch"],
            "detail": {"pair": "torch|onnxruntime", "distance": float("inf"), "odd": ["onnxruntime"],
                       "shape_mismatch": {"torch": [8, 14, 19], "onnxruntime": [8, 14, 18]}}}
    special = {"special_inputs": [{"input": "x", "row": 0, "kind": "-inf"}]}
    flip["detail"]["inputs"] = [0, 1]
    (sig,) = case_signatures({"findings": [flip]}, SPEC, special)
    assert "within_tolerance" not in sig.context and classify(sig)[0] == "bug"  # nor an input's fault


def test_runtimes_refusing_one_invalid_converted_graph_are_one_converter_root_cause():
    """onnxruntime and OpenVINO both refuse tf2onnx's bfloat16 graph, each in its own words;
    the ONNX checker's complaint leads both messages (OnnxRuntimeBackend.refusal): one
    root cause, tf2onnx's, the known tensorflow-onnx#2337, not two runtime bugs."""
    checker = ("tf2onnx produced an invalid ONNX graph (onnx.checker: [ShapeInferenceError] (op_type:Mul, node name: "
               "elu_1/mul): B has inconsistent type tensor(bfloat16)); ")
    words = {"onnxruntime": "Fail: [ONNXRuntimeError] : 1 : FAIL : Type Error: Type parameter (T) of Optype (Mul) "
                            "bound to different types (tensor(float16) and tensor(bfloat16) in node (elu_1/mul).",
             "openvino": "RuntimeError: FrontEnd API failed with OpConversionFailure: Arguments do not have the "
                         "same element type (arg0 element type: f16, arg1 element type: bf16)"}
    spec = {"layers": [{"name": "elu", "api": "Rescaling", "params": {"dtype": "bfloat16"}}]}
    sigs = {b: signatures_of(_divergent(checker + f"{b} refused it: " + w, b, "convert"), spec, {})[0]
            for b, w in words.items()}
    assert {s.component for s in sigs.values()} == {"tf2onnx"} and {s.op for s in sigs.values()} == {"Mul"}
    assert root_key(sigs["onnxruntime"]) == root_key(sigs["openvino"])
    known = load_known_issues()
    assert {match_known(s, known).id for s in sigs.values()} == {"tf2onnx-bfloat16-mixed-types"}
    # without the checker's verdict the runtime's refusal stays the runtime's
    plain = signatures_of(_divergent(words["openvino"], "openvino", "convert"), spec, {})[0]
    assert plain.component == "openvino"


def test_signatures_matching_known_issues_at_one_link_are_one_root_cause():
    """Two entries reaching one upstream issue (the Keras bug seen as TensorFlow's refusal and
    as LiteRT's) count as one root cause; without the entries they are two."""
    link = "https://github.com/keras-team/keras/issues/15666"
    issues = [KnownIssue.model_validate({"id": i, "title": "t", "link": link, "match": {"error": e}})
              for i, e in (("a", "Size of out_backprop"), ("b", "computed_input_height"))]
    tf = signatures_of(_divergent(SIZE), SPEC, {})[0]
    lite = signatures_of(_divergent("RuntimeError: computed_input_height != SizeOfDimension(input, 1) (15 != 16)",
                                    "litert"), SPEC, {})[0]
    rows = _rows([tf], [lite])
    assert len(root_causes(unique_bugs(rows, []))) == 2
    (root,) = root_causes(unique_bugs(rows, issues))
    assert root.status == "known upstream" and root.cases == 2


def test_flush_to_zero_on_subnormal_rows_is_undefined_unless_a_flushing_backend_is_odd_alone():
    """TensorFlow's and JAX's CPU kernels flush subnormals by design, torch and onnxruntime
    keep them: a difference where torch stands alone, or TensorFlow against onnxruntime, on
    rows carrying subnormal or tiny values is that choice; JAX off against TensorFlow (which
    flushes too) is not."""
    def deviation(odd: str, rows: list[int]) -> Signature:
        f = Finding(Kind.DEVIATION, sorted({"tensorflow", odd}), {"pair": "|".join(sorted({"tensorflow", odd})),
                                                                "own_layers": ["dense"], "odd": [odd],
                                                                "rows": rows})
        meta = {"special_inputs": [{"input": "x", "row": 1, "kind": "subnormal"},
                                   {"input": "x", "row": 3, "kind": "tiny"}]}
        (sig,) = signatures_of(f, SPEC, meta)
        return sig
    assert classify(deviation("torch", [1, 3]))[0] == "undefined"
    assert "flush" in classify(deviation("torch", [1]))[1]
    assert classify(deviation("jax", [1, 3]))[0] == "bug"            # JAX alone: not TF's flushing too
    assert classify(deviation("torch", [1, 2]))[0] == "bug"          # row 2 carries none: not the flush alone
    converted = Finding(Kind.DEVIATION, ["onnxruntime", "tensorflow"], {  # TensorFlow flushes, its graph run does not
        "pair": "onnxruntime|tensorflow", "own_layers": ["dense"], "odd": ["tensorflow"], "rows": [1, 3]})
    (sig,) = signatures_of(converted, SPEC, {"special_inputs": [{"input": "x", "row": 1, "kind": "subnormal"},
                                                                {"input": "x", "row": 3, "kind": "tiny"}]})
    assert classify(sig)[0] == "undefined"
    crash = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {"accepted": ["tensorflow", "jax"], "errors": {
        "torch": {"phase": "run", "message": "RuntimeError: something broke"}}})
    tiny = {"seed": "op:inv", "api": "inv", "special_inputs": [{"input": "x", "row": 0, "kind": "tiny"}]}
    (sig,) = signatures_of(crash, {"layers": []}, tiny)
    assert classify(sig)[0] == "bug"                                 # a crash is no flushed value


def test_two_flushing_backends_differ_by_the_flush_where_the_flush_probe_reproduces_the_odd_one():
    """TensorFlow odd against JAX (both flush) on tiny rows stays a bug (JAX's closed-form
    determinant underflows in IEEE arithmetic) unless the flush probe put a flushed run of a
    backend that keeps subnormals on TensorFlow's values and not on JAX's (TensorFlow's STFT of
    a row near 1e-36; the api-cpu campaign, rng 2929)."""
    meta = {"special_inputs": [{"input": "x", "row": 2, "kind": "tiny"}]}

    def verdict(like: list[str] | None) -> str:
        f = Finding(Kind.DEVIATION, ["jax", "tensorflow"], {"pair": "jax|tensorflow", "own_layers": ["dense"],
                                                            "odd": ["tensorflow"], "rows": [2], "flush_like": like})
        (sig,) = signatures_of(f, SPEC, meta)
        return classify(sig)[0]
    assert verdict(None) == "bug"                                    # not probed
    assert verdict([]) == "bug"                                      # the flushed run is on neither side
    assert verdict(["tensorflow"]) == "undefined"
    assert verdict(["jax", "tensorflow"]) == "bug"                   # on both sides: it tells nothing
    assert verdict(["jax"]) == "bug"                                 # the flush gives the other side's values


def test_an_op_refusing_a_nan_input_is_undefined_a_model_refusing_is_not():
    """An op's tensors are its whole input: linalg.eigh raising on a NaN where the others
    return NaN answers the value (undefined); a model's crash raises for the model."""
    crash = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {"accepted": ["tensorflow", "jax"], "errors": {
        "torch": {"phase": "run", "message": "RuntimeError: linalg.eigh: The algorithm failed to converge"}}})
    nan_row = {"special_inputs": [{"input": "x", "row": 0, "kind": "nan"}]}
    (op_sig,) = signatures_of(crash, {"layers": []}, {"seed": "op:eigh", "api": "eigh", **nan_row})
    assert classify(op_sig) == ("undefined", "NaN/Inf in the input")
    (model_sig,) = signatures_of(crash, SPEC, nan_row)
    assert classify(model_sig)[0] == "bug"


def test_the_argument_values_keras_echoes_do_not_split_a_root_nor_name_an_op():
    """Keras ends a refusal with ``Received: interpolation=lanczos3.``: one refusal whatever
    the value, and "Received" is no op."""
    def refusal(value: str) -> Signature:
        f = _divergent(f"ValueError: Resizing with Lanczos interpolation is not supported by the PyTorch backend. "
                       f"Received: interpolation={value}.", failing="torch")
        (sig,) = signatures_of(f, {"layers": []}, {"seed": "op:image.resize", "api": "image.resize"})
        return sig
    a, b = refusal("lanczos3"), refusal("lanczos5")
    assert a.op is None and root_key(a) == root_key(b)


# ---- one case, one root; inputs outside the contract; the component that must fix it ---------------
#: TensorFlow, torch and JAX refusing one UnitNormalization(axis=[1, -1]) on a rank-2 input, each in its
#: own words, while the graph tf2onnx made of TensorFlow's model ran (recorded by `audee fuzz`)
DUPLICATE_AXIS = {
    "tensorflow": "InvalidArgumentError: Graph execution error:\n\nDetected at node audee_model_1/t_unitnormalization_1/"
                  "Sum defined at (most recent call last):\n  File \"/x/keras/src/backend/tensorflow/numpy.py\", line "
                  "3668, in sum\n\nInvalid reduction arguments: Axes contains duplicate dimension: 1\n\t [[{{node "
                  "audee_model_1/t_unitnormalization_1/Sum}}]] [Op:__inference_fn_11]",
    "torch": "RuntimeError: dim 1 appears multiple times in the list of dims",
    "jax": "ValueError: duplicate value in 'axis': (1, -1)"}


def _duplicate_axis_case() -> tuple[object, dict]:
    """The API-level case the generator draws with ``axis=[1, -1]`` on a rank-2 input, and its row's meta."""
    from audee.apis import load_api_configs
    from audee.mutation.apilevel import generate_case

    got = generate_case("UnitNormalization", load_api_configs(), 0, 38, invalid_prob=0.0)
    assert got.meta["rank"] == 2 and got.spec.layer("t_unitnormalization").params["axis"] == [1, -1]
    return got, {"seed": "api:UnitNormalization", "api": "UnitNormalization",
                 "mutations": [m.to_json() for m in got.mutations]}


def test_backends_refusing_one_case_in_their_own_words_are_one_root():
    """Three frameworks refusing one case at one layer, three messages: one root cause (the
    case's), whether or not the generator knew the input was outside the contract."""
    refused = Finding(Kind.DIVERGENT_ACCEPTANCE, sorted(DUPLICATE_AXIS), {
        "accepted": ["onnxruntime"], "odd": ["onnxruntime"],
        "errors": {b: {"phase": "run", "message": m} for b, m in DUPLICATE_AXIS.items()}})
    got, meta = _duplicate_axis_case()
    for meta in (meta, {"api": "UnitNormalization"}):   # tagged by the generator, and as a bare case
        sigs = signatures_of(refused, got.spec, meta)
        rejections = [s for s in sigs if s.backends != ("onnxruntime",)]
        assert len({s.key() for s in rejections}) == 3        # each backend's words stay its own signature ...
        roots = root_causes(unique_bugs(_rows(sigs), []))
        (root,) = [r for r in roots if r.component != "tf2onnx"]   # ... one root: the case's
        assert root.signatures == 3 and root.api == "UnitNormalization" and root.component == "keras"
        assert root.backends == ("jax", "tensorflow", "torch")
    # who must fix a shared refusal: Keras for several frameworks, the framework for its own graph's converter
    assert (shared_component(["jax", "torch"]), shared_component(["onnxruntime", "tensorflow"])) == ("keras", "tensorflow")
    # two runtimes of one converter's graph refusing alike: the converter's
    assert shared_component(["onnxruntime", "openvino"]) == "tf2onnx"
    # a harness failure beside them stays the harness's
    frame = 'Traceback (most recent call last):\n  File "/x/site-packages/audee/backends/worker.py", line 9\n'
    glue = Finding(Kind.DIVERGENT_ACCEPTANCE, ["jax", "torch"], {"accepted": ["tensorflow"], "errors": {
        "jax": {"phase": "run", "message": DUPLICATE_AXIS["jax"]},
        "torch": {"phase": "run", "message": "ValueError: glue", "traceback": frame}}})
    assert len(root_causes(unique_bugs(_rows(signatures_of(glue, got.spec, meta)), []))) == 2


def test_a_duplicate_axis_is_undefined_for_the_backends_and_for_the_converter_that_accepts_it():
    """The generator marks ``axis=[1, -1]`` on a rank-2 input outside the contract: the
    frameworks' refusals are ``undefined`` (onnxruntime named as the silent one), and so is
    tf2onnx's graph computing what TensorFlow refused: lenient on an argument no backend
    documents, it has no defined result to get wrong (onnxruntime reduces over the axis once,
    the intended result, by a hand check).  The same converter computing what its reference
    refuses on an argument inside the contract stays its bug, filed on its tracker."""
    refused = Finding(Kind.DIVERGENT_ACCEPTANCE, sorted(DUPLICATE_AXIS), {
        "accepted": ["onnxruntime"], "odd": ["onnxruntime"],
        "errors": {b: {"phase": "run", "message": m} for b, m in DUPLICATE_AXIS.items()}})
    got, meta = _duplicate_axis_case()
    (mark,) = [m for m in meta["mutations"] if m.get("invalid")]
    assert (mark["param"], mark["why"]) == ("axis", "axis names one axis twice")
    roots = root_causes(unique_bugs(_rows(signatures_of(refused, got.spec, meta)), []))
    assert {r.klass for r in roots} == {"undefined"} and len(roots) == 2
    shared = next(r for r in roots if r.component != "tf2onnx")
    assert shared.class_reason == "outside the contract: axis names one axis twice"
    assert shared.silent == "onnxruntime" and shared.signatures == 3
    lenient = next(r for r in roots if r.component == "tf2onnx")
    assert lenient.backends == ("onnxruntime",) and "accepts what its reference" in lenient.class_reason
    bare = {"seed": "api:UnitNormalization", "api": "UnitNormalization"}   # no generator mark: the converter's bug
    (bug,) = [r for r in root_causes(unique_bugs(_rows(signatures_of(refused, got.spec, bare)), []))
              if r.component == "tf2onnx"]
    assert bug.klass == "bug" and bug.api == "UnitNormalization"
    assert search_queries(bug)[0].startswith("repo:onnx/tensorflow-onnx ")
    # no converter's bug where an independent framework ran the case too, or where the reference
    # only said it cannot (an explicit "unsupported" is no verdict on the input)
    torch_ran = Finding(Kind.DIVERGENT_ACCEPTANCE, ["jax", "tensorflow"], {
        "accepted": ["onnxruntime", "torch"], "errors": {
            b: {"phase": "run", "message": DUPLICATE_AXIS[b]} for b in ("jax", "tensorflow")}})
    cannot = _divergent("UnimplementedError: Graph execution error: The Conv2D op currently only supports the NHWC "
                        "tensor format on the CPU.")
    cannot.detail.accepted[:] = ["onnxruntime"]
    jax_ran = Finding(Kind.DIVERGENT_ACCEPTANCE, ["tensorflow", "torch"], {   # jitted JAX: its reference not run
        "accepted": ["jax", "onnxruntime"], "errors": {
            b: {"phase": "run", "message": DUPLICATE_AXIS[b]} for b in ("tensorflow", "torch")}})
    for f in (torch_ran, jax_ran, cannot):
        assert all(s.component != "tf2onnx" for s in signatures_of(f, got.spec, meta))


def test_the_converters_two_faces_of_one_node_are_one_root_blamed_on_the_converter():
    """tf2onnx's BiasAdd(NCHW) Add refused by onnxruntime at load (shape inference) and, on
    another case, at run (a broadcast its shapes do not allow), as the api-cpu campaign
    recorded them: one root, tf2onnx's, not a converter root and a runtime root."""
    load = ("Fail: [ONNXRuntimeError] : 1 : FAIL : Node (t_conv3dtranspose_1/BiasAdd) Op (Add) [ShapeInferenceError] "
            "Incompatible dimensions")
    run = ("Fail: [ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Add node. "
           "Name:'t_conv1dtranspose_1/BiasAdd' Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/math/"
           "element_wise_ops.h:563 void onnxruntime::BroadcastIterator::Init(ptrdiff_t, ptrdiff_t) axis == 1 || "
           "axis == largest was false. Attempting to broadcast an axis by a dimension other than 1. 20 by 58")
    spec = {"layers": [{"name": "t_conv1dtranspose", "api": "Conv1DTranspose", "params": {}},
                       {"name": "t_conv3dtranspose", "api": "Conv3DTranspose", "params": {}}]}
    (a,) = signatures_of(_divergent(load, "onnxruntime", "convert"), spec, {"api": "Conv3DTranspose"})
    (b,) = signatures_of(_divergent(run, "onnxruntime", "run"), spec, {"api": "Conv1DTranspose"})
    assert a.component == b.component == "tf2onnx" and a.op == b.op == "Add"
    (root,) = root_causes(unique_bugs(_rows([a], [b]), []))
    assert root.component == "tf2onnx" and root.cases == 2 and root.klass == "bug"
    # a runtime's failure on a graph it loaded, for no fault of the graph's, stays the runtime's
    (own,) = signatures_of(_divergent("Fail: [ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code "
                                      "returned while running Gemm node. bad alloc", "onnxruntime"), spec, {})
    assert own.component == "onnxruntime" and root_key(own) != root_key(b)


def test_a_duplicate_axis_run_on_tensorflow_and_onnxruntime(pool):
    """The generator's duplicate-axis case run for real: TensorFlow refuses it, the graph tf2onnx
    made of the same model computes something; both are undefined (the argument is outside
    the contract), onnxruntime named as the silent one."""
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.fuzz import result_row

    got, meta = _duplicate_axis_case()
    case = TestCase(got.spec.name, got.spec, {}, got.inputs, meta)
    ex = Executor(pool)
    ex.complete_weights(case, weight_seed=0)
    row = result_row(ex.run(case), {}, meta=meta)
    assert row.backends == {"tensorflow": "error:run", "onnxruntime": "ok"}, row
    roots = {r.component: r for r in root_causes(unique_bugs([row], []))}
    assert {r.klass for r in roots.values()} == {"undefined"} and set(roots) == {"tensorflow", "tf2onnx"}
    assert roots["tensorflow"].silent == "onnxruntime" and roots["tf2onnx"].kind == "divergent_acceptance"


def test_a_signal_shorter_than_the_stft_padding_is_outside_the_contract():
    """MelSpectrogram pads the signal by ``fft_length // 2`` on each side by reflection: on a
    shorter signal TensorFlow and torch refuse while JAX's padding reflects twice and runs.
    The generator marks such a draw (the config's ``min_length``), so the divergence is
    ``undefined``; a long enough signal is not marked."""
    from audee.apis import load_api_configs
    from audee.mutation.apilevel import generate_case

    apis = load_api_configs()
    short = generate_case("MelSpectrogram", apis, 0, 0, invalid_prob=0.0)
    assert short.meta["shape"][0] <= short.spec.layer("t_melspectrogram").params["fft_length"] // 2
    (mark,) = [m for m in short.mutations if m.invalid]
    assert mark.param == "fft_length" and "reflect padding" in mark.why
    long = next(c for c in (generate_case("MelSpectrogram", apis, 0, i, invalid_prob=0.0) for i in range(1, 40))
                if c.meta["shape"][0] > c.spec.layer("t_melspectrogram").params["fft_length"] // 2)
    assert not any(m.invalid for m in long.mutations)
    refused = Finding(Kind.DIVERGENT_ACCEPTANCE, ["tensorflow", "torch"], {"accepted": ["jax"], "odd": ["jax"], "errors": {
        "tensorflow": {"phase": "run", "message": "InvalidArgumentError: paddings must be less than the dimension size: "
                                                  "8, 8 not less than 5 [Op:MirrorPad]"},
        "torch": {"phase": "run", "message": "RuntimeError: Argument #4: Padding size should be less than the "
                                             "corresponding input dimension, but got: padding (8, 8) at dimension 1"}}})
    meta = {"api": "MelSpectrogram", "mutations": [m.to_json() for m in short.mutations]}
    (root,) = root_causes(unique_bugs(_rows(signatures_of(refused, short.spec, meta)), []))
    assert root.klass == "undefined" and "reflect padding" in root.class_reason and root.silent == "jax"


def test_a_layer_refusing_a_nan_it_casts_to_an_index_is_undefined():
    """CLAHE casts pixels to int32 to index its histogram: a NaN becomes INT_MIN and torch's
    index_select refuses it.  Its config's ``value_indices`` says the layer turns values into
    indices, so the refusal answers the input's NaN (undefined) as an op's would; on finite
    input, or at a layer without the mark, a model's refusal stays a bug."""
    spec = {"layers": [{"name": "t_clahe", "api": "ContrastLimitedAdaptiveHistogramEqualization", "params": {},
                        "inputs": ["x"]}]}
    crash = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {"accepted": ["tensorflow"], "errors": {
        "torch": {"phase": "run", "message": "IndexError: index out of range in self"}}})
    meta = {"api": "ContrastLimitedAdaptiveHistogramEqualization"}
    nan_row = {"special_inputs": [{"input": "x", "row": 0, "kind": "nan"}]}
    (with_nan,) = signatures_of(crash, spec, {**meta, **nan_row})
    assert classify(with_nan) == ("undefined", "NaN/Inf in the input")
    (finite,) = signatures_of(crash, spec, meta)
    assert classify(finite)[0] == "bug"
    (other,) = signatures_of(crash, SPEC, nan_row)
    assert classify(other)[0] == "bug"


def test_a_nan_pattern_first_differing_where_the_layer_was_fed_nonfinite_values_is_undefined():
    """An Inf made upstream on every backend alike (a float16 pooling overflowing), then spread
    differently by the next layer (an identity bicubic resize's zero weights times Inf, which
    JAX skips): the difference is in carrying a non-finite value the layer was given, as for
    a NaN in the model's input.  Where a backend's feeding layer was finite, the layer made
    the NaN itself: a bug."""
    spec = {"layers": [{"name": "pool", "api": "AveragePooling2D", "params": {}, "inputs": ["x"]},
                       {"name": "up", "api": "UpSampling2D", "params": {"interpolation": "bicubic"},
                        "inputs": ["pool"]}]}

    def nan(layers: dict[str, list[str]]) -> Signature:
        f = Finding(Kind.NAN, ["jax", "tensorflow", "torch"], {
            "strong": True, "odd": ["jax"], "first_layer": {b: v[0] for b, v in layers.items()}, "layers": layers,
            "patterns": {"jax|tensorflow": {"first_layer": "up"}, "jax|torch": {"first_layer": "up"}}})
        (s,) = signatures_of(f, spec, {"api": "UpSampling2D"})
        return s
    fed = nan({b: ["pool", "up"] for b in ("jax", "tensorflow", "torch")})
    assert classify(fed) == ("undefined", "NaN/Inf in the input")
    made = nan({"jax": ["pool", "up"], "tensorflow": ["up"], "torch": ["pool", "up"]})
    assert classify(made)[0] == "bug"


#: a 1-sample signal MelSpectrogram refused by TensorFlow and torch for its reflect pad and by onnxruntime for
#: tf2onnx's missing RFFT, while JAX ran it (the api-cpu campaign, rng 2812, api-MelSpectrogram-v00000)
SHORT_SIGNAL = {
    "tensorflow": ("run", "InvalidArgumentError: Graph execution error: paddings must be less than the dimension "
                          "size: 1 not less than 1 [[{{node audee_model_1/t_melspectrogram_1/MirrorPad}}]] "
                          "[Op:__inference_fn_11]"),
    "torch": ("run", "RuntimeError: Argument #4: Padding size should be less than the corresponding input dimension, "
                     "but got: padding (1, 1) at dimension 1 of input [1, 1]"),
    "onnxruntime": ("convert", "tf2onnx produced an invalid ONNX graph (onnx.checker: No Op registered for RFFT with "
                               "domain_version of 18\n\n==> Context: Bad node spec for node. Name: "
                               "t_melspectrogram/stft/RFFT OpType: RFFT); onnxruntime refused it: InvalidGraph")}


def test_a_merged_root_takes_the_known_entry_one_of_its_refusals_matches(tmp_path):
    """Backends refusing one case at one layer are one root ("refused alike"); an entry that
    knows one backend's words names that root, every refusal of it, not only its own words.
    A backend's explicit "unsupported" (tf2onnx's missing RFFT) is its limitation whatever
    the input: its entry stays its own and does not name the others' refusal."""
    refused = Finding(Kind.DIVERGENT_ACCEPTANCE, sorted(SHORT_SIGNAL), {
        "accepted": ["jax"], "odd": ["jax"],
        "errors": {b: {"phase": phase, "message": m} for b, (phase, m) in SHORT_SIGNAL.items()}})
    spec = {"layers": [{"name": "t_melspectrogram", "api": "MelSpectrogram", "params": {"fft_length": 2}}]}
    rows = _rows(signatures_of(refused, spec, {"api": "MelSpectrogram"}))
    shipped = load_known_issues()
    by_status = {r.status: r for r in root_causes(unique_bugs(rows, shipped))}
    assert by_status["known upstream"].known_id == "tf2onnx-rfft-real-imag"
    assert by_status["known upstream"].backends == ("onnxruntime",)
    assert by_status["new"].backends == ("tensorflow", "torch")   # the RFFT's entry does not follow
    own = tmp_path / "mine.yaml"
    own.write_text("issues:\n  - id: stft-reflect-pad-short-signal\n    title: a signal shorter than the reflect pad\n"
                   "    link: https://example.org/issues/1\n    class: undefined\n"
                   "    match: {kind: divergent_acceptance, backends: [torch], error: 'Padding size should be less'}\n")
    issues = shipped + load_known_issues([own], shipped=False)
    roots = root_causes(unique_bugs(rows, issues))
    assert [r.status for r in roots] == ["known upstream", "known upstream"], roots
    (pad,) = [r for r in roots if r.known_id == "stft-reflect-pad-short-signal"]
    assert pad.backends == ("tensorflow", "torch") and pad.signatures == 2 and pad.klass == "undefined"
    tf = next(m for m in pad.members if m.backends == ("tensorflow",))
    assert tf.known_id == "stft-reflect-pad-short-signal" and "another backend's refusal" in tf.class_reason
    # the same words in a case no other backend refused are not merged: the entry knows torch's words only
    alone = Finding(Kind.DIVERGENT_ACCEPTANCE, ["tensorflow"], {"accepted": ["jax", "torch"], "errors": {
        "tensorflow": {"phase": "run", "message": SHORT_SIGNAL["tensorflow"][1]}}})
    (single,) = unique_bugs(_rows(signatures_of(alone, spec, {"api": "MelSpectrogram"})), issues)
    assert single.known_id is None and single.status == "new"


def test_a_converted_graph_selecting_by_arithmetic_names_the_known_lowering(pool):
    """Softmax over two axes guards an infinite maximum with where(is_finite(max), max, 0);
    tf2onnx lowers that select to Cast * x + Cast * y, so one +Inf turns the slice NaN on
    onnxruntime where TensorFlow gives 0 and NaN at the Inf.  The converted graph shows the
    lowering for that layer (``program:select_as_arithmetic``), and the NaN root is the known
    tf2onnx issue by that fact, not by a list of layers; a layer without a select shows none."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.fuzz import result_row

    def run(layer: dict) -> ResultRow:
        spec = ModelSpec.from_json({"name": "one", "inputs": [{"name": "x", "shape": [4, 5]}],
                                    "layers": [{"name": "t_layer", "inputs": ["x"], **layer}],
                                    "output": "t_layer", "logits": "t_layer"})
        x = np.random.default_rng(0).normal(size=[2, 4, 5]).astype(np.float32)
        x[0, 1, 0] = np.inf
        case = TestCase("select", spec, {}, {"x": x}, {"api": layer["api"]})
        ex = Executor(pool)
        ex.complete_weights(case, weight_seed=0)
        return result_row(ex.run(case), {}, meta=case.meta)

    row = run({"api": "Softmax", "params": {"axis": [-2, -1]}})
    (sig,) = [Signature.from_json(s) for s in row.signatures if s["kind"] == "nan"]
    # the same graph's ReduceMax (the logsumexp's maximum) is a fact too, no entry's on Softmax
    assert sig.odd == ("onnxruntime",) and sig.program == ("max_as_reduce_max", "select_as_arithmetic")
    (bug,) = unique_bugs([row], load_known_issues())
    assert bug.known_id == "tf2onnx-select-mul-nan"
    dense = run({"api": "Dense", "params": {"units": 3}})
    assert not any("program:" in c for s in dense.signatures for c in s["context"])


def test_a_converted_programs_fact_explains_only_the_odd_backends_running_that_program():
    """A NaN that TensorFlow's and JAX's max pooling drop, kept by torch and by onnxruntime,
    whose converted graph lowers a select 3 layers on (the api-cpu campaign, rng 2974): the
    lowering is a fact of TensorFlow's program, which torch, odd too, does not run, so it
    cannot be the finding's cause; with onnxruntime odd alone, or beside TensorFlow (whose
    program it runs), it is."""
    from audee.triage.signature import _program_context

    program = {"onnxruntime": {"t_mha": ["select_as_arithmetic"]}}
    nonfinite = {"onnxruntime": ["t_pool", "t_mha"], "torch": ["t_pool", "t_mha"], "tensorflow": [], "jax": []}
    backends = ["jax", "onnxruntime", "tensorflow", "torch"]
    departs = {"jax|torch": "t_pool", "onnxruntime|tensorflow": "t_pool"}

    def facts(odd: list[str]) -> list[str]:
        return _program_context(program, "t_pool", odd, nonfinite, backends, departs, one_program=True)

    # not the pair's fact: kept as onnxruntime's own, for the rest a known entry of torch's would leave
    assert facts(["onnxruntime", "torch"]) == ["program@onnxruntime:select_as_arithmetic"]
    assert facts(["onnxruntime"]) == ["program:select_as_arithmetic"]
    assert facts(["onnxruntime", "tensorflow"]) == ["program:select_as_arithmetic"]
    assert _program_context(program, "t_pool", ["onnxruntime", "torch"], nonfinite, backends,
                            departs) == ["program:select_as_arithmetic"]  # not a NaN finding's odd set: read whole


def test_a_max_pooling_names_the_onnx_kernel_it_became(pool):
    """GlobalMaxPooling1D with one NaN in a row of 6: tf2onnx makes the channels_last layer an
    ONNX ReduceMax and the channels_first one a GlobalMaxPool, two onnxruntime kernels that
    drop a NaN at different positions (ReduceMax keeps it only first, GlobalMaxPool only at
    position 3).  Each finding carries the op its graph runs (``program:max_as_reduce_max`` /
    ``program:max_as_max_pool``), and the root is the known issue of that kernel, not of the
    layer (the api-cpu campaign, rng 2821: a channels_first layer matched to ReduceMax's)."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.fuzz import result_row

    def nan_signature(data_format: str, shape: list[int], at: tuple[int, int, int]) -> Signature:
        spec = ModelSpec.from_json({"name": data_format, "inputs": [{"name": "x", "shape": shape}],
                                    "layers": [{"name": "t_pool", "inputs": ["x"], "api": "GlobalMaxPooling1D",
                                                "params": {"data_format": data_format}}],
                                    "output": "t_pool", "logits": "t_pool"})
        x = np.random.default_rng(0).normal(size=[2, *shape]).astype(np.float32)
        x[at] = np.nan
        case = TestCase(data_format, spec, {}, {"x": x}, {"api": "GlobalMaxPooling1D"})
        ex = Executor(pool)
        ex.complete_weights(case, weight_seed=0)
        row = result_row(ex.run(case), {}, meta=case.meta)
        (sig,) = [Signature.from_json(s) for s in row.signatures if s["kind"] == "nan"]
        assert sig.odd == ("onnxruntime",), sig
        return sig

    issues = load_known_issues()
    last = nan_signature("channels_last", [6, 4], (0, 1, 0))      # steps on axis 1: NaN second in its row
    assert last.program == ("max_as_reduce_max",)
    assert match_known(last, issues).id == "ort-reducemax-nan"
    first = nan_signature("channels_first", [4, 6], (0, 0, 0))    # steps on axis 2: NaN first in its row
    assert first.program == ("max_as_max_pool",)
    assert match_known(first, issues).id == "ort-maxpool-nan"
    # a record made before the fact was kept (no program fact) is neither kernel's
    bare = Signature(first.kind, first.api, first.params, first.backends, layer=first.layer, odd=first.odd)
    assert match_known(bare, issues) is None


def test_a_select_lowered_inside_a_recurrent_layers_loop_is_a_fact_of_that_layer(pool):
    """A SimpleRNN that is not unrolled converts to an ONNX Loop whose body holds the cell: its
    sparsemax ends with where(support, cumsum, 0), which tf2onnx lowers to Cast * x + Cast * y
    there, so +-Inf logits give onnxruntime a NaN row where TensorFlow keeps the Inf (the api-cpu
    campaign, rng 2859).  The fact is read from the body too, and the root is the known lowering."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.fuzz import result_row

    spec = ModelSpec.from_json({"name": "rnn", "inputs": [{"name": "x", "shape": [1, 5]}],
                                "layers": [{"name": "t_rnn", "inputs": ["x"], "api": "SimpleRNN",
                                            "params": {"units": 6, "activation": "sparsemax", "use_bias": False,
                                                       "unroll": False}}],
                                "output": "t_rnn", "logits": "t_rnn"})
    x = np.random.default_rng(0).normal(size=[2, 1, 5]).astype(np.float32)
    x[0, 0, 0] = -np.inf
    case = TestCase("rnn", spec, {}, {"x": x}, {"api": "SimpleRNN"})
    ex = Executor(pool)
    ex.complete_weights(case, weight_seed=0)
    row = result_row(ex.run(case), {}, meta=case.meta)
    (sig,) = [Signature.from_json(s) for s in row.signatures if s["kind"] == "nan"]
    assert sig.odd == ("onnxruntime",) and "select_as_arithmetic" in sig.program, sig
    (bug,) = unique_bugs([row], load_known_issues())
    assert bug.known_id == "tf2onnx-select-mul-nan"


def test_a_converter_accepting_a_crafty_invalid_argument_is_undefined_too():
    """``axis=[1, 1]`` is a crafty invalid value of UnitNormalization's config: TensorFlow,
    torch and JAX refuse it, onnxruntime runs tf2onnx's graph and reduces over the axis once
    (the intended result, by a hand check of the rng 2815 campaign).  Lenient on an argument
    the contract excludes, the converter has no wrong result: undefined, as the refusals are."""
    refused = Finding(Kind.DIVERGENT_ACCEPTANCE, sorted(DUPLICATE_AXIS), {
        "accepted": ["onnxruntime"], "odd": ["onnxruntime"],
        "errors": {b: {"phase": "run", "message": m} for b, m in DUPLICATE_AXIS.items()}})
    spec = {"layers": [{"name": "t_unitnormalization", "api": "UnitNormalization", "params": {"axis": [1, 1]},
                        "inputs": ["x"]}]}
    meta = {"api": "UnitNormalization", "mutations": [
        {"layer": "t_unitnormalization", "param": "axis", "old": None, "new": [1, 1], "invalid": True}]}
    roots = root_causes(unique_bugs(_rows(signatures_of(refused, spec, meta)), []))
    assert {r.klass for r in roots} == {"undefined"}
    (lenient,) = [r for r in roots if r.component == "tf2onnx"]
    assert lenient.class_reason.startswith("outside the contract: a crafty invalid value of axis")


def test_a_label_flip_on_a_pair_whose_deviation_was_cleared_is_no_bug():
    """TensorFlow and JAX flip a label after a LayerNormalization fed values of a large mean and
    a tiny spread: the deviation diagnosis cleared the pair (the layer is ill-conditioned:
    ``deviation_accumulated``), so the flip is that rounding seen through argmax, no backend's
    bug; where a deviation of the pair stands, the flip keeps its signature."""
    from audee.triage.signature import case_signatures

    flip = {"kind": "inconsistency", "backends": ["tensorflow", "jax"],
            "detail": {"pair": "tensorflow|jax", "distance": 0.0066, "odd": ["tensorflow"]}}
    cleared = {"kind": "deviation_accumulated", "backends": ["tensorflow", "jax"],
               "detail": {"pair": "tensorflow|jax", "first_layer": "norm", "own_layers": [],
                          "ill_conditioned": ["norm"]}}
    standing = {"kind": "deviation", "backends": ["tensorflow", "jax"],
                "detail": {"pair": "tensorflow|jax", "first_layer": "norm", "own_layers": ["norm"]}}
    spec = {"layers": [{"name": "norm", "api": "LayerNormalization", "params": {}, "inputs": ["x"]}]}
    meta = {"api": "LayerNormalization"}
    assert case_signatures({"findings": [flip, cleared]}, spec, meta) == []
    kinds = sorted(s.kind for s in case_signatures({"findings": [flip, standing]}, spec, meta))
    assert kinds == ["deviation", "inconsistency"]


def test_a_select_lowered_on_the_odd_backends_nan_path_is_its_fact():
    """vgg16 with one NaN: the patterns first differ at a max pooling (TensorFlow drops the
    NaN), but onnxruntime's NaN reaches the output through a thresholded ReLU whose select
    tf2onnx lowered to Mul/Add, non-finite on onnxruntime alone.  The fact of that layer, on
    the odd backend's own NaN path, is the signature's; a fact of a layer where every backend
    is non-finite, or of another backend, is not."""
    layers = {"onnxruntime": ["pool", "relu_6", "flatten"], "tensorflow": [], "torch": ["pool"]}
    f = Finding(Kind.NAN, ["onnxruntime", "tensorflow", "torch"], {
        "strong": True, "odd": ["onnxruntime"], "input_nonfinite": True, "layers": layers,
        "first_layer": {"onnxruntime": "pool", "torch": "pool"},
        "patterns": {"onnxruntime|tensorflow": {"first_layer": "pool"}, "onnxruntime|torch": {"first_layer": "relu_6"}},
        "program": {"onnxruntime": {"relu_6": ["select_as_arithmetic"]}}})
    spec = {"layers": [{"name": "pool", "api": "MaxPooling2D", "params": {}, "inputs": ["x"]},
                       {"name": "relu_6", "api": "ReLU", "params": {"threshold": 0.6}, "inputs": ["pool"]},
                       {"name": "flatten", "api": "Flatten", "params": {}, "inputs": ["relu_6"]}]}
    (sig,) = signatures_of(f, spec, {})
    assert sig.layer == "MaxPooling2D" and sig.program == ("select_as_arithmetic",)
    assert match_known(sig, load_known_issues()).id == "tf2onnx-select-mul-nan"
    f.detail.program = {"tensorflow": {"relu_6": ["select_as_arithmetic"]}}
    (other,) = signatures_of(f, spec, {})
    assert other.program == ()



def test_where_the_odd_backend_departs_and_where_its_nan_runs_on_the_direction_tells_the_cause():
    """vgg16 with NaN (the api-cpu campaign, rngs 2844 and 2868): onnxruntime departs from
    torch and JAX at a max pooling tf2onnx made a MaxPool, which drops some NaN, and its NaN
    run on to a thresholded ReLU whose select tf2onnx lowered to arithmetic.  Both facts show;
    which one made the output differ is the direction: onnxruntime alone non-finite at the
    output (the others' ReLU turned the NaN into 0) is the leaking select, as the hand check
    of rng 2868 found; onnxruntime with fewer non-finite values than the others is its MaxPool
    dropping what they carry on."""
    layers = {"onnxruntime": ["pool", "relu_12"], "tensorflow": [], "torch": ["pool", "relu_12", "flatten"],
              "jax": ["pool", "relu_12", "flatten"]}
    spec = {"layers": [{"name": "pool", "api": "MaxPooling2D", "params": {}, "inputs": ["x"]},
                       {"name": "relu_12", "api": "ReLU", "params": {"threshold": 0.6}, "inputs": ["pool"]},
                       {"name": "flatten", "api": "Flatten", "params": {}, "inputs": ["relu_12"]}]}

    def signature(counts: dict[str, int]) -> Signature:
        f = Finding(Kind.NAN, ["jax", "onnxruntime", "tensorflow", "torch"], {
            "strong": True, "odd": ["onnxruntime"], "input_nonfinite": True, "layers": layers,
            "counts": {b: {"nan": n, "+inf": 0, "-inf": 0} for b, n in counts.items()},
            "patterns": {"onnxruntime|torch": {"first_layer": "pool"}, "jax|onnxruntime": {"first_layer": "pool"},
                         "onnxruntime|tensorflow": {"first_layer": "pool"}},
            "program": {"onnxruntime": {"pool": ["max_as_max_pool"], "relu_12": ["select_as_arithmetic"]}}})
        (sig,) = signatures_of(f, spec, {})
        assert sig.program == ("max_as_max_pool", "select_as_arithmetic")
        return sig

    issues = load_known_issues()
    leaks = signature({"onnxruntime": 10, "tensorflow": 0, "torch": 0, "jax": 0})
    assert match_known(leaks, issues).id == "tf2onnx-select-mul-nan"
    drops = signature({"onnxruntime": 1, "tensorflow": 4, "torch": 6, "jax": 6})
    assert match_known(drops, issues).id == "ort-maxpool-nan"


def test_a_root_is_shown_by_a_case_of_its_own_class():
    from dataclasses import replace

    """Two cases of one root, the first outside the contract (subnormal rows torch alone
    keeps), the second a bug: the root is a bug and its first case and script are the bug's,
    not the undefined one's (the api-cpu campaign, rng 2897: an AutoContrast root shown by
    its flush-to-zero case)."""
    def deviation(rows: list[int], special: list[dict]) -> Signature:
        f = Finding(Kind.DEVIATION, ["tensorflow", "torch"], {"pair": "tensorflow|torch", "own_layers": ["deconv"],
                                                              "odd": ["torch"], "rows": rows})
        (sig,) = signatures_of(f, SPEC, {"special_inputs": special})
        return sig
    flushed = deviation([1], [{"input": "x", "row": 1, "kind": "subnormal"}])
    plain = deviation([0], [])
    assert classify(flushed)[0] == "undefined" and classify(plain)[0] == "bug"
    assert flushed.key() == plain.key()                  # one bug, two cases: the plain one tells
    (root,) = root_causes(unique_bugs(_rows([flushed], [plain]), []))
    assert root.klass == "bug" and root.first_case == "c1" and root.cases == 2
    drawn = replace(plain, params=(("activation", "selu"),))  # two bugs of one root: the bug's shows it
    assert drawn.key() != flushed.key()
    (root,) = root_causes(unique_bugs(_rows([flushed], [drawn]), []))
    assert root.klass == "bug" and root.first_case == "c1" and root.signatures == 2


def test_backends_refusing_a_case_whose_equivalent_runs_are_one_root_with_one_entry():
    """RMSNormalization(axis=1) refused by every backend, each in its own words, while the axis
    rule's equivalent runs on each (one ``original_rejected`` finding per backend): one root,
    the case's, which takes the entry JAX's words match (findings row 110), not one new root
    per message."""
    from audee.triage.signature import case_signatures

    spec = {"layers": [{"name": "n", "api": "RMSNormalization", "params": {"axis": 1}, "inputs": ["x0"]}]}
    words = {"jax": "ValueError: Incompatible shapes for broadcasting: shapes=[(8, 4, 5), (4,)]",
             "tensorflow": "ValueError: Dimensions must be equal, but are 5 and 4 for '{{node n_1/Mul_1}}'",
             "onnxruntime": "ValueError: Dimensions must be equal, but are 5 and 4 for '{{node n_1/Mul_1}}'"}
    verdict = {"findings": [Finding(Kind.EQUIVALENCE, [b], {
        "rule": "axis", "backend": b, "reason": "original_rejected", "phase": "run", "message": m,
        "rewritten": ["n"], "first_layer": "n", "layer": "n"}).to_json() for b, m in words.items()]}
    sigs = case_signatures(verdict, spec, {"api": "RMSNormalization"})
    assert len(sigs) == 3 and len({root_key(s) for s in sigs}) == 1
    (root,) = root_causes(unique_bugs(_rows(sigs), load_known_issues()))
    assert (root.known_id, root.klass, root.signatures) == ("keras-rmsnorm-scale-last-axis", "bug", 3)
    alone = case_signatures({"findings": verdict["findings"][1:2]}, spec, {"api": "RMSNormalization"})
    assert match_known(alone[0], load_known_issues()) is None   # TensorFlow's words alone: no entry knows them
    # torch refusing the same case for its own fused-kernel path (findings row 76), its words first: it keeps
    # its entry, and the others follow JAX's, the case's cause (rng 2988)
    torch = Finding(Kind.EQUIVALENCE, ["torch"], {
        "rule": "axis", "backend": "torch", "reason": "original_rejected", "phase": "run", "layer": "n",
        "message": "RuntimeError: Given normalized_shape=[4], expected input with shape [*, 4], but got input of "
                   "size[8, 4, 5]", "rewritten": ["n"], "first_layer": "n"}).to_json()
    both = case_signatures({"findings": [torch, *verdict["findings"]]}, spec, {"api": "RMSNormalization"})
    got = {r.known_id: r.signatures for r in root_causes(unique_bugs(_rows(both), load_known_issues()))}
    assert got == {"keras-rmsnorm-scale-last-axis": 3, "keras-torch-fused-norm-axis": 1}, got


def test_backends_refusing_the_equivalent_of_a_case_that_runs_are_one_root_counting_each_case_once():
    """MultiHeadAttention(attention_axes=[1], sliding_window=2) runs on every backend, and the axis
    rule's equivalent (the attention over the axis before the features, the inputs permuted) is
    refused by each in its own words (Keras builds the window from axis 1: findings row 112): one
    root, the rewrite's side, apart from a refusal of the case itself, and two such cases are two
    cases, not eight (one per backend's signature)."""
    from audee.triage.signature import case_signatures

    spec = {"layers": [{"name": "m", "api": "MultiHeadAttention", "params": {"num_heads": 2, "key_dim": 4,
                                                                             "attention_axes": [1],
                                                                             "sliding_window": 2},
                        "inputs": ["x0", "x1"]}]}
    words = {b: f"ValueError: The `mask` must be broadcastable to `inputs`. Received: inputs.shape={shape}"
             for b, shape in (("jax", "(8, 3, 2, 5, 5)"), ("tensorflow", "(8, 3, 2, 5, 5)"),
                              ("torch", "torch.Size([8, 3, 2, 5, 5])"), ("tf2onnx", "(8, 3, 2, 5, 5)"))}

    def verdict(reason: str) -> dict:
        return {"findings": [Finding(Kind.EQUIVALENCE, [b], {
            "rule": "axis", "backend": b, "reason": reason, "phase": "run", "message": m, "rewritten": ["m"],
            "first_layer": "m", "layer": "m"}).to_json() for b, m in words.items()]}

    meta = {"api": "MultiHeadAttention"}
    sigs = case_signatures(verdict("rejected"), spec, meta)
    assert len(sigs) == 4 and len({root_key(s) for s in sigs}) == 1
    assert "the equivalent refused alike where the case runs" in root_key(sigs[0])
    assert root_key(case_signatures(verdict("original_rejected"), spec, meta)[0]) != root_key(sigs[0])
    (root,) = root_causes(unique_bugs(_rows(sigs, sigs), load_known_issues()))
    assert (root.known_id, root.signatures, root.cases) == ("keras-mha-window-mask-axis-1", 4, 2)


def test_a_batch_rules_failures_are_one_root_per_backend_and_cause_whichever_layer_met_it():
    """The batch of zero rows (``batch_empty``) runs the case's own model: a backend refusing it in
    one set of words is one code path whichever layer reached it (Keras' torch ``max`` refusing
    any tensor without elements, from GlobalMaxPooling1D to 3D), and a layer returning its input
    as it came is one (TensorFlow's oneDNN convolutions, Conv1D to SeparableConv2D, the api-cpu
    campaign, rng 3042: 66 new roots before, of about a dozen causes).  Other words, another
    backend, or a layer computing another wrong shape stay apart."""
    from audee.triage.signature import RETURNS_INPUT, case_signatures

    def sig(b: str, api: str, **detail) -> object:
        spec = {"layers": [{"name": "l", "api": api, "params": {}, "inputs": ["x0"]}]}
        f = Finding(Kind.EQUIVALENCE, [b], {"rule": "batch_empty", "backend": b, "rewritten": ["l"], "layer": "l",
                                            **detail}).to_json()
        (s,) = case_signatures({"findings": [f]}, spec, {"api": api})
        return s

    refused = {"reason": "rejected", "phase": "run", "message": "ValueError: Cannot compute the max of an empty tensor."}
    one = {root_key(sig("torch", api, **refused)) for api in ("GlobalMaxPooling1D", "GlobalMaxPooling3D")}
    assert len(one) == 1
    assert root_key(sig("tensorflow", "GlobalMaxPooling1D", **refused)) not in one
    other = {**refused, "message": "RuntimeError: stack expects a non-empty TensorList"}
    assert root_key(sig("torch", "RandomRotation", **other)) not in one

    def shaped(api: str, rewrite: list[int], **more) -> object:
        return sig("tensorflow", api, reason="shape", shapes={"original": [0, 6, 5], "rewrite": rewrite,
                                                              "input": [0, 8, 2]}, **more)

    conv1, sep = shaped("Conv1D", [0, 8, 2]), shaped("SeparableConv1D", [0, 8, 2])
    assert RETURNS_INPUT in conv1.context and root_key(conv1) == root_key(sep)
    # a later layer refusing what the convolution returned, pinned on the convolution: the same root
    cascade = sig("tensorflow", "Conv1D", reason="rejected", phase="run",
                  message="InvalidArgumentError: Incompatible shapes: [0,8,2] vs. [1,1,5]",
                  shapes={"original": [0, 6, 5], "rewrite": [0, 8, 2], "input": [0, 8, 2]})
    assert root_key(cascade) == root_key(conv1)
    wrong = shaped("Conv1D", [0, 7, 5])
    assert RETURNS_INPUT not in wrong.context and root_key(wrong) != root_key(conv1)
    assert root_key(wrong) != root_key(shaped("DepthwiseConv1D", [0, 7, 5]))  # by its layer, as any rule


def test_a_rule_failing_alike_on_every_backend_is_one_root_of_the_code_they_share():
    """MultiHeadAttention(attention_axes=[1], sliding_window=4) over an axis whose neighbour has
    length 1: the axis rule's equivalent, over axis 2 of the permuted inputs, builds its window
    from that length-1 axis and drops it, and every backend computes the same wrong values (the
    api-cpu campaign, rng 3010: one equivalence finding per backend, none odd).  One case, one
    root, Keras': not four new roots, one per backend.  A backend failing alone (another case)
    is a root of its own."""
    from audee.triage.signature import case_signatures

    spec = {"layers": [{"name": "m", "api": "MultiHeadAttention", "params": {"num_heads": 2, "key_dim": 4,
                                                                             "attention_axes": [1],
                                                                             "sliding_window": 4},
                        "inputs": ["x0", "x1"]}]}
    meta = {"api": "MultiHeadAttention"}

    def verdict(backends):
        return {"findings": [Finding(Kind.EQUIVALENCE, [b], {
            "rule": "axis", "backend": b, "reason": "values", "rewritten": ["m"], "first_layer": "m", "layer": "m",
            "score": 1179.0, "odd": []}).to_json() for b in backends]}

    four = case_signatures(verdict(["jax", "onnxruntime", "tensorflow", "torch"]), spec, meta)
    assert len(four) == 4 and len({root_key(s) for s in four}) == 1
    assert "fails alike on keras" in root_key(four[0])
    (root,) = root_causes(unique_bugs(_rows(four), []))
    assert (root.klass, root.signatures, root.cases, root.component) == ("bug", 4, 1, "keras")
    assert root.backends == ("jax", "onnxruntime", "tensorflow", "torch")
    alone = case_signatures(verdict(["jax"]), spec, meta)
    assert root_key(alone[0]) != root_key(four[0])
    # TensorFlow and the runtime running its graph fail alike: TensorFlow's program, not Keras'
    pair = case_signatures(verdict(["onnxruntime", "tensorflow"]), spec, meta)
    assert len({root_key(s) for s in pair}) == 1 and "fails alike on tensorflow" in root_key(pair[0])


def test_a_jax_normalization_deviation_on_a_large_offset_row_is_xlas_order_of_summation():
    """GroupNormalization on a row with a large common offset and a small spread (special kind
    ``offset``, or the batch's ``batch_offset``): JAX's multi-axis float32 mean is one sequential
    sum (rng 2990), which the layer divides by the spread.  The signature records the fact
    (``offset_input``) on the rows the finding names, and the known entry asks for it: the same
    deviation on a plain row stays unmatched."""
    spec = {"layers": [{"name": "g", "api": "GroupNormalization", "params": {"groups": 1}, "inputs": ["x0"]}]}
    finding = Finding(Kind.DEVIATION, ["tensorflow", "jax"], {"pair": "tensorflow|jax", "own_layers": ["g"],
                                                              "odd": [], "rows": [4]})
    known = load_known_issues()
    for special, fact in (([{"input": "x0", "row": 4, "kind": "offset"}], True),
                          ([{"input": "x0", "row": None, "kind": "batch_offset", "rows": 7}], True),
                          ([{"input": "x0", "row": 2, "kind": "offset"}], False),   # another row
                          ([], False)):
        (sig,) = signatures_of(finding, spec, {"api": "GroupNormalization", "special_inputs": special})
        assert ("offset_input" in sig.context) == fact, special
        issue = match_known(sig, known)
        assert (issue.id if issue else None) == ("xla-cpu-sequential-reduction-offset" if fact else None), special


def test_cases_refused_alike_at_one_layer_for_different_reasons_are_different_roots():
    """Two cases of one layer, each refused by TensorFlow and tf2onnx in their own words: one
    (an output padding oneDNN cannot run) matches an entry, the other (a float16 sparsemax's
    tf.range) no entry knows.  Each case is one root (its backends' words together), and the
    second does not follow the first's entry because it was refused at the same layer by the
    same backends (the api-cpu campaign, rng 2992)."""
    from audee.triage.signature import case_signatures

    spec = {"layers": [{"name": "t", "api": "Conv3DTranspose", "params": {"filters": 4, "kernel_size": 4}}]}

    def refused(message: str) -> list[Signature]:
        verdict = {"findings": [Finding(Kind.DIVERGENT_ACCEPTANCE, ["onnxruntime", "tensorflow"], {
            "accepted": ["jax", "torch"], "errors": {b: {"phase": "run" if b == "tensorflow" else "convert",
                                                         "message": message} for b in ("onnxruntime", "tensorflow")}
        }).to_json()]}
        return case_signatures(verdict, spec, {"api": "Conv3DTranspose"})

    onednn = refused("AbortedError: Graph execution error: could not create a primitive descriptor for the "
                     "convolution backward data primitive [[{{node t_1/conv_transpose}}]]")
    rng = refused("NotFoundError: Could not find device for node: {{node Range}} = Range[Tidx=DT_HALF] "
                  "All kernels registered for op Range: Unsupported dtype19")
    assert len({root_key(s) for s in onednn}) == 1 and root_key(onednn[0]) != root_key(rng[0])
    roots = {r.known_id: r.cases for r in root_causes(unique_bugs(_rows(onednn, rng), load_known_issues()))}
    assert roots == {"keras-tf-conv-transpose-same-output-padding": 1, None: 1}, roots


def test_a_refusal_follows_the_entry_its_own_case_matches_not_another_case_refused_alike(tmp_path):
    """Cases refused alike in the same words at one layer can have different causes: each
    backend's refusal that no entry knows takes the entry another backend's refusal of *its
    own case* matches (RMSNormalization's axis=[1, -1] and axis=1, both refused with
    "Incompatible shapes for broadcasting", took the first case's entry on every backend:
    the api-cpu campaign, rng 3001)."""
    words = {"jax": "ValueError: Incompatible shapes for broadcasting: shapes=[(8, 4, 16), (16, 4)]",
             "tensorflow": "InvalidArgumentError: Dimensions must be equal, but are 16 and 4"}
    spec = {"layers": [{"name": "t_rms", "api": "RMSNormalization", "params": {}}]}
    rows = []
    for i, axis in enumerate(([1, -1], 1)):
        refused = Finding(Kind.DIVERGENT_ACCEPTANCE, ["jax", "tensorflow"], {
            "accepted": ["torch"], "errors": {b: {"phase": "run", "message": m} for b, m in words.items()}})
        meta = {"api": "RMSNormalization", "mutations": [
            {"layer": "t_rms", "param": "axis", "old": None, "new": axis, "invalid": False}]}
        rows.append(_row(f"c{i}", [s.to_json() for s in signatures_of(refused, spec, meta)]))
    own = tmp_path / "mine.yaml"
    own.write_text(
        "issues:\n"
        "  - id: mixed-sign\n    title: a\n    link: https://example.org/issues/1\n"
        "    match: {kind: divergent_acceptance, backends: [jax], params: {axis: [[1, -1]]}}\n"
        "  - id: one-axis\n    title: b\n    link: https://example.org/issues/2\n"
        "    match: {kind: divergent_acceptance, backends: [jax], params: {axis: 1}}\n")
    bugs = unique_bugs(rows, load_known_issues([own], shipped=False))
    tf = {b.first_case: b.known_id for b in bugs if b.signature.backends == ("tensorflow",)}
    assert tf == {"c0": "mixed-sign", "c1": "one-axis"}, [(b.key, b.known_id) for b in bugs]


def test_an_odd_backend_its_entry_does_not_name_is_a_cause_of_its_own(tmp_path):
    """One case may show two causes: TensorFlow's max pooling and onnxruntime's both drop a
    NaN where torch and JAX keep it (the api-cpu campaign, rng 3003). An entry about
    TensorFlow explains TensorFlow: onnxruntime takes the entry about it, and where there is
    none it is a new bug, not a case of TensorFlow's entry; an entry whose rule names no
    backend explains them all."""
    both = Signature("nan", "MaxPooling2D", (), ("jax", "onnxruntime", "tensorflow", "torch"), None, None,
                     ("onnxruntime", "tensorflow"), "pool")
    rows = _rows([both])
    tf = "  - id: tf-drop\n    title: a\n    link: https://example.org/issues/1\n" \
         "    match: {kind: nan, api: MaxPooling2D, odd: [tensorflow]}\n"
    ort = "  - id: ort-drop\n    title: b\n    link: https://example.org/issues/2\n" \
          "    match: {kind: nan, api: MaxPooling2D, odd: [onnxruntime]}\n"

    def bugs_with(entries: str) -> dict[tuple[str, ...], str | None]:
        own = tmp_path / "mine.yaml"
        own.write_text("issues:\n" + entries)
        return {b.signature.odd: b.known_id for b in unique_bugs(rows, load_known_issues([own], shipped=False))}

    assert bugs_with(tf + ort) == {("onnxruntime", "tensorflow"): "tf-drop", ("onnxruntime",): "ort-drop"}
    assert bugs_with(tf) == {("onnxruntime", "tensorflow"): "tf-drop", ("onnxruntime",): None}
    everyone = "  - id: any-drop\n    title: c\n    link: https://example.org/issues/3\n" \
               "    match: {kind: nan, api: MaxPooling2D}\n"
    assert bugs_with(everyone) == {("onnxruntime", "tensorflow"): "any-drop"}
    (new,) = [r for r in root_causes(unique_bugs(rows, [])) if r.status == "new"]   # no entry: one cause, as before
    assert new.odd == ("onnxruntime", "tensorflow")


def test_cases_of_one_signature_key_that_different_entries_match_are_different_bugs():
    """A signature's key holds no policy nor facts, which entries may match on: a float32
    case of one oneDNN bug beside bfloat16 cases of another (rng 3012) is its own bug, and
    a case no entry matches is new, not counted under the first case's entry."""
    def sig(policy: str) -> Signature:
        return Signature("deviation", "Dense", backends=("tensorflow", "torch"), odd=("tensorflow",),
                         layer="Dense", context=(f"policy:{policy}",))

    bf16 = KnownIssue.model_validate({"id": "bf16", "title": "t", "link": "https://x.org/1",
                                      "match": {"kind": "deviation", "api": "Dense", "policy": "bfloat16"}})
    f16 = KnownIssue.model_validate({"id": "f16", "title": "t", "link": "https://x.org/2",
                                     "match": {"kind": "deviation", "api": "Dense", "policy": "float16"}})
    assert len({s.key() for s in (sig("bfloat16"), sig("float16"), sig("float32"))}) == 1
    bugs = unique_bugs(_rows([sig("bfloat16")], [sig("bfloat16")], [sig("float16")], [sig("float32")]), [bf16, f16])
    assert sorted((b.known_id or "new", b.cases, b.case_ids) for b in bugs) == [
        ("bf16", 2, ("c0", "c1")), ("f16", 1, ("c2",)), ("new", 1, ("c3",))]
    assert bugs[0].status == "new" and bugs[0].first_case == "c3"
    assert sum(r.cases for r in root_causes(bugs)) == 4


def test_a_converters_program_fact_the_whole_odd_set_lacks_is_its_own_when_split():
    """A GlobalMaxPooling3D over a NaN that JAX (YNNPACK's reduce) and onnxruntime (its ReduceMax)
    both drop (the api-cpu campaign, rng 3025): the program fact is onnxruntime's alone, so the
    signature keeps it apart (``program@onnxruntime:``); JAX's entry explains JAX, and the rest,
    onnxruntime, is onnxruntime's ReduceMax entry, one known root with its other cases, not new."""
    spec = {"layers": [{"name": "g", "api": "GlobalMaxPooling3D", "params": {}, "inputs": ["x"]}]}
    four = ["jax", "onnxruntime", "tensorflow", "torch"]
    counts = {b: {"nan": int(b in ("tensorflow", "torch")), "+inf": 0, "-inf": 0} for b in four}
    f = Finding(Kind.NAN, four, {"strong": True, "odd": ["jax", "onnxruntime"], "counts": counts,
                                 "first_layer": {"tensorflow": "g", "torch": "g"},
                                 "layers": {"tensorflow": ["g"], "torch": ["g"]},
                                 "patterns": {"jax|tensorflow": {"first_layer": "g"}},
                                 "program": {"onnxruntime": {"g": ["max_as_reduce_max"]}}})
    (sig,) = signatures_of(f, spec, {"special_inputs": [{"input": "x", "row": 0, "kind": "nan"}]})
    assert "program@onnxruntime:max_as_reduce_max" in sig.context and not sig.program
    roots = root_causes(unique_bugs(_rows([sig]), load_known_issues()))
    assert sorted(str(r.known_id) for r in roots) == ["ort-reducemax-nan", "xla-cpu-ynn-reduce-nan"]


def test_one_draw_of_a_layer_indexing_by_value_refusing_a_nan_is_undefined():
    """RandAugment's Equalization casts pixels to histogram indices (its config's
    ``value_indices``): on an input holding -inf, TensorFlow refused the image_channels rule's
    equivalent (a gather index out of range) and ran the original, whose draws took another path
    (the api-cpu campaign, rng 3025).  The refusal answers the -inf, as a refusal across backends
    does: undefined, not a bug; on a finite input it stays a bug."""
    from audee.triage.signature import case_signatures

    spec = {"layers": [{"name": "t", "api": "RandAugment", "params": {"data_format": "channels_first"},
                        "inputs": ["x0"]}]}
    words = ("InvalidArgumentError: Graph execution error: indices[0,1] = -2147483648 is not in [0, 256) "
             "[[{{node t__eq_1/GatherV2_5}}]]")
    verdict = {"findings": [Finding(Kind.EQUIVALENCE, ["tensorflow"], {
        "rule": "image_channels", "backend": "tensorflow", "reason": "rejected", "phase": "run", "message": words,
        "rewritten": ["t"], "first_layer": "t", "layer": "t"}).to_json()]}
    special = {"api": "RandAugment", "special_inputs": [{"input": "x0", "row": 6, "kind": "-inf"}]}
    (sig,) = case_signatures(verdict, spec, special)
    assert "nonfinite_input" in sig.context and classify(sig)[0] == "undefined"
    (finite,) = case_signatures(verdict, spec, {"api": "RandAugment"})
    assert classify(finite)[0] == "bug"
