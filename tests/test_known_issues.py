"""Known issues (audee.triage.known): the shipped list's schema, one-line errors for bad lists,
matching rules, and a real run where onnxruntime's gelu/Erfc rejection is reported as known."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audee.core.errors import ConfigError
from audee.triage.known import load_known_file, load_known_issues, match_known, shipped_file
from audee.cases.case import Finding, Kind
from audee.triage.signature import ODD_FEWER_NONFINITE, Signature, signatures_of
from tests.helpers import run_audee

GELU = Signature("divergent_acceptance", "activations.gelu", (("activation", "'gelu'"),), ("onnxruntime",),
                 "convert", "InvalidGraph: [ONNXRuntimeError] : <n> : INVALID_GRAPH : ... Error No Op registered "
                        "for Erfc with domain_version of <n>")


def _write(tmp_path: Path, text: str, name: str = "k.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_shipped_list_loads_and_knows_gelu_erfc():
    issues = load_known_issues()
    assert shipped_file().is_file() and issues
    hit = match_known(GELU, issues)
    assert hit is not None and hit.id == "tf2onnx-gelu-erfc" and hit.link.startswith("https://github.com/onnx/")
    assert match_known(Signature("divergent_acceptance", None, (), ("torch",), "run", "ValueError: x"), issues) is None


@pytest.mark.parametrize("body, field", [
    ("issues:\n  - id: a\n    title: t\n    link: https://x.org/1\n    match: {kind: nan}\n    colour: red\n",
     "issues[0].colour: unknown setting"),
    ("issues:\n  - id: a\n    title: t\n    link: https://x.org/1\n    match: {kind: crash}\n",
     "issues[0].match.kind: unknown finding kind 'crash'"),
    ("issues:\n  - id: a\n    title: t\n    link: https://x.org/1\n    match: {error: '(unclosed'}\n",
     "issues[0].match.error: not a regular expression"),
    ("issues:\n  - id: a\n    title: t\n    link: https://x.org/1\n    match: {}\n",
     "issues[0].match: give at least one of"),
    ("issues:\n  - id: a\n    title: t\n    match: {kind: nan}\n", "issues[0].link: required"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: {kind: nan}}\n"
     "  - {id: a, title: u, link: 'https://x.org/2', match: {kind: nan}}\n", "issues[1].id: duplicate id 'a'"),
    ("- just a list\n", "expected a mapping"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', class: bugg, match: {kind: nan}}\n",
     "issues[0].class: unknown class 'bugg'"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: {kind: nan, policy: [float16, fp8]}}\n",
     "issues[0].match.policy: unknown dtype policy 'fp8'"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: [{kind: nan}, {mask: sometimes}]}\n",
     "issues[0].match[1].mask: expected true or false"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: {kind: nan, program: where_as_mul}}\n",
     "issues[0].match.program: unknown program fact 'where_as_mul'"),
])
def test_schema_errors_are_one_line_naming_file_and_field(tmp_path, body, field):
    p = _write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_known_file(p)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{p}: ") and field in text, text


def test_every_given_criterion_must_match(tmp_path):
    p = _write(tmp_path, """issues:
  - id: mine
    title: gelu everywhere on onnxruntime
    link: https://example.org/issues/1
    match:
      kind: divergent_acceptance
      api: activations.gelu
      params: {activation: gelu}
      backends: [onnxruntime]
      phase: convert
      error: 'registered for Erfc'
""")
    issues = load_known_issues([p], shipped=False)
    assert match_known(GELU, issues).id == "mine"
    from dataclasses import replace
    for changed in (replace(GELU, kind="hard_crash"), replace(GELU, api="Dense"), replace(GELU, params=()),
                    replace(GELU, backends=("torch",)), replace(GELU, phase="run"), replace(GELU, error="x")):
        assert match_known(changed, issues) is None, changed
    # numbers match by sign, as signatures keep them; backends as a subset
    q = _write(tmp_path, "issues:\n  - {id: u, title: t, link: 'https://x.org/1', "
                         "match: {params: {units: 3}, backends: [torch]}}\n", "q.yaml")
    units = Signature("nan", "Dense", (("units", "+int"),), ("tensorflow", "torch"))
    assert match_known(units, load_known_issues([q], shipped=False)).id == "u"
    # the same id in two lists is refused, naming the second
    with pytest.raises(ConfigError, match="already defined"):
        load_known_issues([p, p], shipped=False)


# ---- a real run: rng 6's variant 8 draws gelu (see tests/test_fuzz_cli.py) ----------------------
FUZZ = [sys.executable, "-m", "audee", "fuzz", "--seed", "lenet5", "--backends", "tensorflow,onnxruntime",
        "--batch", "8", "--invalid-prob", "0.3", "--no-progress", "--variants", "9", "--rng", "6"]


def _gelu_seed(tmp_path: Path) -> list[str]:
    """A small CNN whose convolution uses gelu: onnxruntime refuses its converted graph (the
    shipped tf2onnx-gelu-erfc issue) on the seed case itself, whatever mutation draws."""
    import numpy as np

    from tests.helpers import tiny_cnn, tiny_inputs

    spec = tiny_cnn("gelunet").to_json()
    spec["layers"][0]["params"]["activation"] = "gelu"
    (tmp_path / "gelunet.json").write_text(json.dumps(spec))
    np.savez(tmp_path / "gelunet_x.npz", **tiny_inputs(8))
    return [sys.executable, "-m", "audee", "fuzz", "--seed", str(tmp_path / "gelunet.json"), "--inputs",
            str(tmp_path / "gelunet_x.npz"), "--backends", "tensorflow,onnxruntime", "--batch", "8",
            "--no-progress", "--variants", "0"]


def test_a_known_signature_is_reported_as_known(tmp_path):
    out = tmp_path / "run"
    # (no equivalent models: the batch of zero rows meets TensorFlow's oneDNN convolution, findings row 128)
    fuzz = _gelu_seed(tmp_path) + ["--equivalence", "none"]
    first = run_audee(fuzz + ["--out", str(out)])  # in this process, on the suite's kept workers
    assert first.returncode == 0, first.stderr[-3000:]
    lines = first.stdout.splitlines()
    assert lines[1] == "  new bugs: 0 (found before: 0, known upstream: 0, fixed upstream: 0)", first.stdout
    assert "root causes          1  (from 1 bug signatures" in lines[2], first.stdout  # root causes next
    assert "limitation      1  (new: 0, found before: 0, known upstream: 1, fixed upstream: 0)" in first.stdout
    assert "limitation KNOWN divergent_acceptance tf2onnx        Erfc" in first.stdout
    assert "known upstream: tf2onnx-gelu-erfc, https://github.com/onnx/tensorflow-onnx/issues/2347" in first.stdout
    assert "first case: gelunet-seed" in first.stdout
    bugs = json.loads((out / "summary.json").read_text())["bugs"]
    assert len(bugs) == 1
    b = bugs[0]
    assert (b["status"], b["known_id"], b["kind"], b["backends"], b["cases"], b["first_case"]) == (
        "known upstream", "tf2onnx-gelu-erfc", "divergent_acceptance", ["onnxruntime"], 1, "gelunet-seed")
    assert b["case_file"].endswith("cases/gelunet-seed.pkl") and Path(b["case_file"]).is_file()

    # with an empty known list the same bug is new (a resumed run: nothing is re-run)
    empty = _write(tmp_path, "issues: []\n", "empty.yaml")
    second = run_audee(fuzz + ["--out", str(out), "--no-shipped-known-issues", "--known-issues", str(empty)])
    assert second.returncode == 0, second.stderr[-3000:]
    assert "0 test cases run now, 1 resumed" in second.stdout
    assert "limitation      1  (new: 1, found before: 0, known upstream: 0, fixed upstream: 0)" in second.stdout
    assert "limitation NEW   divergent_acceptance" in second.stdout
    b2 = json.loads((out / "summary.json").read_text())["bugs"][0]
    assert (b2["status"], b2["known_id"], b2["key"]) == ("new", None, b["key"])

    # the report: the unique-bug table first, known with its id and link
    from audee.report import load_campaign_dir, write_report

    write_report(load_campaign_dir(out), tmp_path / "report")
    index = (tmp_path / "report" / "index.md").read_text()
    assert index.index("## Root causes by class") < index.index("## Bug signatures") < index.index("## Table 1")
    assert "1 root causes ([list](roots.md)): 0 bug (0 new); 0 harness (0 new); 1 limitation (0 new)" in index
    bugs_md = (tmp_path / "report" / "bugs.md").read_text()
    assert "| limitation | known upstream | tf2onnx-gelu-erfc | divergent_acceptance | onnxruntime |" in bugs_md
    assert "domain_version of &lt;n&gt;" in bugs_md  # placeholders survive Markdown
    assert "(../run/cases/gelunet-seed.pkl)" in bugs_md


def test_a_bad_known_issues_file_stops_fuzz_before_it_runs(tmp_path):
    bad = _write(tmp_path, "issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: {kind: oops}}\n")
    got = subprocess.run(FUZZ + ["--out", str(tmp_path / "o"), "--known-issues", str(bad)],
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 2
    from audee.cases.case import Kind  # every failure kind, whoever added it

    assert got.stderr.strip() == (f"audee: error: {bad}: issues[0].match.kind: unknown finding kind 'oops' "
                                  f"(known: {', '.join(Kind.FAILURES)})")
    assert not (tmp_path / "o").exists()


def test_tensorflow_max_pooling_dropping_nan_is_known(tmp_path):
    """A real run: a NaN in a pooling window, TensorFlow against JAX.  The NaN oracle blames
    MaxPooling2D and the shipped list knows it (tensorflow/tensorflow#2501); a pattern
    difference without TensorFlow is not matched (ONNX Runtime's own MaxPool, unreported)."""
    import numpy as np

    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.triage.signature import case_signatures
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "pool", "inputs": [{"name": "x", "shape": [4, 4, 1], "range": [0, 1]}],
        "layers": [{"name": "pool", "api": "MaxPooling2D", "params": {"pool_size": 2}, "inputs": ["x"]},
                   {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["pool"]},
                   {"name": "logits", "api": "Dense", "params": {"units": 3}, "inputs": ["flat"]},
                   {"name": "out", "api": "Softmax", "params": {}, "inputs": ["logits"]}],
        "output": "out", "logits": "logits"})
    x = np.random.default_rng(0).random((2, 4, 4, 1), dtype=np.float32)
    x[0, 0, 1, 0] = np.nan  # not first in its window
    with Pool(parse_backends("tensorflow,jax"), tmp_path) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        case = TestCase("c", spec, {}, {"x": x})
        ex.complete_weights(case, 0)
        result = ex.run(case)
    sigs = case_signatures(result.verdict, spec, {})
    assert [(s.kind, s.api) for s in sigs] == [("nan", "MaxPooling2D")]
    assert match_known(sigs[0], load_known_issues()).id == "tf-maxpool-drops-nan"
    assert match_known(Signature("nan", "MaxPooling2D", (), ("onnxruntime", "torch")), load_known_issues()) is None


def test_a_converter_odd_only_against_a_reference_known_wrong_is_the_references_known_bug():
    """The compilers campaign (rng 2811): MaxPooling1D over a window [NaN, 1.5]; TensorFlow
    drops the NaN (its known bug), the TFLite interpreter keeps it, so the pair rule names
    litert odd against tensorflow.  The cause is TensorFlow's kernel, one known root, not a
    new LiteRT bug; where the reference is not one the entry names, nothing changes."""
    issues = load_known_issues()
    litert = Signature("nan", "MaxPooling1D", (), ("litert", "onnxruntime", "openvino", "tensorflow"),
                       odd=("litert",))
    assert match_known(litert, issues).id == "tf-maxpool-drops-nan"
    jax_jit = Signature("nan", "MaxPooling1D", (), ("jax", "jax-eager"), odd=("jax",))  # judged against jax-eager
    assert match_known(jax_jit, issues) is None
    both = Signature("nan", "MaxPooling1D", (), ("litert", "tensorflow", "torch"), odd=("litert", "torch"))
    assert match_known(both, issues) is None  # torch is independent: no reference explains it


def test_torch_normalizing_the_wrong_axis_silently_is_known(tmp_path):
    """A real run: RMSNormalization(axis=1) on a (B, 5, 1, 5) input, torch against JAX.  The
    deviation oracle blames the layer on its own input, and the shipped list knows it
    (keras-team/keras#23510); the same layer over the last axis gives no finding at all."""
    import numpy as np

    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.triage.signature import case_signatures
    from audee.cases.spec import ModelSpec

    def spec(axis):
        return ModelSpec.from_json({
            "name": f"rms{axis}", "inputs": [{"name": "x", "shape": [5, 1, 5], "range": [-1, 1]}],
            "layers": [{"name": "norm", "api": "RMSNormalization", "params": {"axis": axis}, "inputs": ["x"]}],
            "output": "norm", "logits": "norm"})

    x = np.random.default_rng(0).normal(size=(3, 5, 1, 5)).astype(np.float32)
    with Pool(parse_backends("torch,jax"), tmp_path) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        results = {}
        for axis in (1, -1):
            case = TestCase(f"c{axis}", spec(axis), {}, {"x": x})
            ex.complete_weights(case, 0)
            results[axis] = ex.run(case)
    assert results[-1].verdict.findings == []
    sigs = [s for s in case_signatures(results[1].verdict, spec(1), {}) if s.kind == "deviation"]
    assert sigs and all(s.api == "RMSNormalization" for s in sigs)
    assert match_known(sigs[0], load_known_issues()).id == "keras-torch-fused-norm-axis-silent"


def test_training_campaign_root_causes_are_known():
    """Three root causes the train-cpu campaign reported as new or harness, as its rows signed
    them (experiments/results/train_cpu_campaign): JAX's float16 dot_product_attention under
    jit (was 'harness': JAX's filtered traceback ended in audee's frame), and two forward-pass
    differences the training phase meets as a train_deviation (torch's bicubic kernel, torch's
    RMSNormalization over a non-trailing axis)."""
    from audee.triage.rootcause import classify

    issues = load_known_issues()
    gqa = Signature("divergent_acceptance", "GroupQueryAttention", (("head_dim", "+int"),), ("jax",), "train",
                    "ValueError: The precision <name> is not supported by dot_general on CPU",
                    layer="GroupQueryAttention", op="dot_general", component="jax",
                    error_full="ValueError: The precision <name> is not supported by dot_general on CPU")
    hit = match_known(gqa, issues)
    assert hit is not None and hit.id == "jax-dot-product-attention-fp16-cpu-jit"
    assert classify(gqa, hit)[0] == "bug"
    resize = Signature("train_deviation", "Resizing", (("height", "+int"), ("interpolation", "'bicubic'")),
                       ("tensorflow", "torch"), odd=("torch",), layer="Resizing")
    assert match_known(resize, issues).id == "torch-bicubic-kernel"
    rms = Signature("train_deviation", "RMSNormalization", (("axis", "+int"), ("epsilon", "+float")),
                    ("tensorflow", "torch"), odd=("torch",), layer="RMSNormalization")
    assert match_known(rms, issues).id == "keras-torch-fused-norm-axis-silent"
    shrink = Signature("train_nan", "ConvLSTM1D+activations.hard_shrink+activations.soft_shrink",
                       (("activation", "'hard_shrink'"),), ("jax", "tensorflow", "torch"), odd=("torch",),
                       layer="ConvLSTM1D")
    hit = match_known(shrink, issues)
    assert hit is not None and hit.id == "keras-shrink-nan-torch" and classify(shrink, hit)[0] == "undefined"
    # the other attention error of the same class on another backend is not this issue
    assert match_known(Signature("divergent_acceptance", "GroupQueryAttention", (), ("torch",), "train",
                                 "ValueError: The precision <name> is not supported by dot_general on CPU",
                                 error_full="ValueError: The precision <name> is not supported by dot_general on CPU"),
                       issues) is None


def test_a_gather_out_of_range_in_the_update_phase_is_not_an_embedding_id_out_of_range(tmp_path):
    """The train-cpu campaign's simplernn-v00001: TensorFlow's optimizer on an Embedding's
    sparse gradient with repeated ids gathers out of range in phase `update` (findings row 23),
    which the run called known issue keras-embedding-out-of-range-raise (same GatherV2 text).
    That entry now names the phases an id reaches, and the update phase's crash is row 23's own
    entry (found before); a phase list is checked like one phase."""
    issues = load_known_issues()
    text = ("InvalidArgumentError: {{function_node __wrapped__GatherV2_device_/job:localhost/<name>/<name>/device:<name>}}"
            " indices<shape> = <n> is not in [<n>) [Op:GatherV2] name:")

    def sig(phase):
        return Signature("divergent_acceptance", "LSTM", (), ("tensorflow",), phase, text, error_full=text)

    assert match_known(sig("run"), issues).id == "keras-embedding-out-of-range-raise"
    assert match_known(sig("update"), issues).id == "keras-tf-sparse-optimizer-duplicate-ids"
    p = _write(tmp_path, "issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: {phase: [run, updat]}}\n")
    with pytest.raises(ConfigError) as err:
        load_known_file(p)
    assert "issues[0].match.phase" in str(err.value) and "'updat'" in str(err.value)


def test_op_level_root_causes_found_upstream_are_known():
    """Three op-level findings of `audee fuzz --op all` (findings rows 33, 40, 44), signed as the
    run signed them, are the upstream issues they are; the same op refused on another backend
    is not, and another op's rejection is its own entry (row 44's i0: found before)."""
    issues = load_known_issues()
    ss = ("InvalidArgumentError: {{function_node __wrapped__UpperBound_device_/job:localhost/<name>/<name>/"
          "device:<name>}} Leading dim_size of both tensors must match. [Op:UpperBound]")
    searchsorted = Signature("divergent_acceptance", "searchsorted", (("side", "'right'"),), ("tensorflow",), "run",
                             ss, layer="searchsorted", error_full=ss)
    assert match_known(searchsorted, issues).id == "keras-tf-searchsorted-nd-values"
    rc = ("NotFoundError: Could not find device for node: {{node Reciprocal}} = Reciprocal[T=DT_INT32] All kernels "
          "registered for op Reciprocal: device=<name>; T in [DT_FLOAT, DT_DOUBLE]")
    reciprocal = Signature("divergent_acceptance", "reciprocal", (), ("tensorflow",), "run", rc, layer="reciprocal",
                           error_full=rc)
    hit = match_known(reciprocal, issues)
    assert hit.id == "tf-reciprocal-int-cpu-kernel" and hit.klass == "limitation"
    size = Signature("deviation", "size", (), ("tensorflow", "torch"), odd=("tensorflow",), layer="size")
    assert match_known(size, issues).id == "keras-size-dtype"
    bessel = rc.replace("Reciprocal", "BesselI0").replace("DT_INT32", "DT_BFLOAT16")
    i0 = match_known(Signature("divergent_acceptance", "i0", (), ("tensorflow",), "run", bessel, layer="i0",
                               error_full=bessel), issues)
    assert (i0.id, i0.status) == ("tf-no-bessel-i0-bfloat16-kernel", "found before")  # row 44's other half
    assert match_known(Signature("divergent_acceptance", "searchsorted", (), ("torch",), "run", ss,
                                 layer="searchsorted", error_full=ss), issues) is None


def test_api_campaign_duplicates_match_the_entries_of_their_cause():
    """The api-cpu campaign (rng 2811) reported as new four roots whose known entries matched
    one face of their cause only, signed as the run signed them: tf2onnx's select-to-Mul
    lowering behind sparse_plus and an RNN's mask select (not only hard_shrink), the silent
    broadcast of tf2onnx's NCHW BiasAdd, the float16 face of its Resize on CenterCrop, and the
    ONNX checker's wording of a half-converted ConvTranspose with a bias.  A signature of
    another cause is still not matched."""
    issues = load_known_issues()

    def hit(sig: Signature) -> str | None:
        issue = match_known(sig, issues)
        return issue.id if issue else None

    four = ("jax", "onnxruntime", "tensorflow", "torch")
    birnn = Signature("nan", "Bidirectional", (("call.mask", "'t_bidirectional_mask'"), ("layer", "'GRU'"),
                                               ("merge_mode", "'ave'")), four, odd=("onnxruntime",),
                      layer="Bidirectional")
    convlstm = Signature("nan", "ConvLSTM3D+activations.relu+activations.sparse_plus",
                         (("activation", "'sparse_plus'"), ("call.mask", "'t_convlstm3d_mask'"),
                          ("recurrent_activation", "'relu'")), ("onnxruntime", "tensorflow", "torch"),
                         odd=("onnxruntime",), layer="ConvLSTM3D")
    simplernn = Signature("nan", "SimpleRNN+activations.sparse_plus",
                          (("activation", "'sparse_plus'"), ("go_backwards", "True")), four, odd=("onnxruntime",),
                          layer="SimpleRNN")
    for sig in (birnn, convlstm, simplernn):
        assert hit(sig) == "tf2onnx-select-mul-nan", sig
    from dataclasses import replace

    assert hit(replace(birnn, params=(("layer", "'GRU'"), ("merge_mode", "'ave'")))) is None  # no mask: no select
    assert hit(replace(simplernn, odd=("torch",))) is None  # another backend's NaN is not tf2onnx's

    sep = Signature("inconsistency", "SeparableConv1D+activations.silu",
                    (("activation", "'silu'"), ("data_format", "'channels_first'"), ("padding", "'valid'")),
                    ("onnxruntime", "tensorflow"), odd=("onnxruntime",), layer="SeparableConv1D")
    assert hit(sep) == "tf2onnx-biasadd-nchw-nonconst"
    assert hit(replace(sep, params=(("activation", "'silu'"), ("data_format", "'channels_last'")))) is None
    # a transposed convolution's channels_first difference stays its own entry's (one element short)
    assert hit(replace(sep, api="Conv1DTranspose+activations.squareplus", layer="Conv1DTranspose")) == \
        "tf2onnx-convtranspose-output-padding"

    crop_text = ("Fail: [ONNXRuntimeError] : <n> : FAIL : Type Error: Type (tensor(float)) of output arg (y0) of "
                 "node (Resize__13) does not match expected type (tensor(float16)).")
    crop = Signature("divergent_acceptance", "CenterCrop", (("data_format", "'channels_first'"),), ("onnxruntime",),
                     "convert", crop_text, layer="CenterCrop", error_full=crop_text)
    assert hit(crop) == "tf2onnx-resize-float64-dtype"
    assert hit(replace(crop, api="Dense", layer="Dense")) is None

    ct_text = ("tf2onnx produced an invalid ONNX graph (onnx.checker: Node(<layer>/BiasAdd) with schema(::<name>) has "
               "input size <n> not in range [min=<n>, max=<n>]. ==> Context: Bad node spec for node. Name: "
               "<layer>/BiasAdd OpType: ConvTranspose); onnxruntime refused it: InvalidGraph: [ONNXRuntimeError]")
    convt = Signature("divergent_acceptance", "Conv2DTranspose+activations.gelu",
                      (("output_padding", "[0, 0]"), ("padding", "'same'"), ("use_bias", "True")), ("onnxruntime",),
                      "convert", ct_text, layer="Conv2DTranspose", error_full=ct_text)
    assert hit(convt) == "keras-tf-conv-transpose-same-output-padding"
    other = ct_text.replace("OpType: ConvTranspose", "OpType: Conv")
    assert hit(replace(convt, api="Conv2D", layer="Conv2D", error=other, error_full=other)) is None


def test_api_campaign_new_roots_are_found_before_or_known_upstream():
    """The session's new roots, signed as the campaigns signed them: each is its findings row
    (found before) or its upstream report; the same error on another backend or layer is not."""
    from dataclasses import replace

    issues = load_known_issues()

    def hit(sig: Signature):
        return match_known(sig, issues)

    mha_text = "TypeError: cannot reshape array of shape <shape> (size <n>) into shape <shape> (size <n>)"
    mha = Signature("divergent_acceptance", "MultiHeadAttention", (), ("jax",), "run", mha_text,
                    layer="MultiHeadAttention", error_full=mha_text)
    assert (hit(mha).id, hit(mha).status, hit(mha).row) == ("keras-jax-mha-sliding-window-value-dim", "found before",
                                                            78)
    assert hit(replace(mha, backends=("torch",))) is None
    clahe = Signature("deviation", "ContrastLimitedAdaptiveHistogramEqualization",
                      (("clip_limit", "+float"), ("tile_grid_size", "[+int, +int]")), ("tensorflow", "torch"),
                      odd=("torch",), layer="ContrastLimitedAdaptiveHistogramEqualization")
    assert hit(clahe).id == "keras-torch-clahe-int-histogram"
    assert hit(replace(clahe, odd=("jax",))) is None
    pool_text = "RuntimeError: input image (T: <n> H: <n> W: <n>) smaller than kernel size (kT: <n> kH: <n> kW: <n>)"
    pool = Signature("divergent_acceptance", "AveragePooling3D", (("padding", "'same'"),), ("torch",), "run",
                     pool_text, layer="AveragePooling3D", error_full=pool_text)
    assert hit(pool).id == "torch-avg-pool3d-padding-kernel-check"
    noonednn = Signature("deviation", "Conv3D+activations.tanh", (("padding", "'same'"), ("strides", "+int")),
                         ("tensorflow", "tensorflow-noonednn"), odd=("tensorflow-noonednn",), layer="Conv3D")
    assert hit(noonednn).id == "tf-conv3d-same-negative-padding"  # row 29's Eigen kernel, oneDNN off
    assert hit(replace(noonednn, api="Conv2D", layer="Conv2D")) is None

    rfft_text = ("tf2onnx produced an invalid ONNX graph (onnx.checker: No Op registered for RFFT with domain_version "
                 "of <n> ==> Context: Bad node spec for node. Name: <layer><path> OpType: RFFT)")
    mel = Signature("divergent_acceptance", "MelSpectrogram", (("fft_length", "+int"),), ("onnxruntime",), "convert",
                    rfft_text, layer="MelSpectrogram", error_full=rfft_text)
    assert (hit(mel).id, hit(mel).status, hit(mel).klass) == ("tf2onnx-rfft-real-imag", "known upstream", "limitation")
    assert hit(mel).link == "https://github.com/onnx/tensorflow-onnx/issues/2274"
    pad_text = ("InvalidArgumentError: Graph execution error: paddings must be no greater than the dimension size: "
                "<n> greater than <n> [[{{node <name>/<layer>/MirrorPad}}]] [Op:<fn>]")
    pad = Signature("divergent_acceptance", "ContrastLimitedAdaptiveHistogramEqualization", (), ("tensorflow",), "run",
                    pad_text, layer="ContrastLimitedAdaptiveHistogramEqualization", error_full=pad_text)
    # TensorFlow's documented MirrorPad bound, whichever layer pads (JAX runs it right: rng 2896's hand check)
    assert (hit(pad).id, hit(pad).klass) == ("tf-mirror-pad-wider-than-dimension", "limitation")
    from audee.triage.rootcause import classify
    assert classify(pad, hit(pad))[0] == "limitation"
    assert hit(replace(pad, error="InvalidArgumentError: something else", error_full="something else")) is None
    cast = next(i for i in issues if i.id == "ort-fp16-cast-roundtrip-elided")
    assert cast.link == "https://github.com/microsoft/onnxruntime/issues/8787"


def test_torch_moments_negative_variance_is_found_before_where_moments_decide():
    """The api-cpu campaign (rng 2812): a GroupNormalization on torch apart from TensorFlow, the
    torch backend's moments giving a negative variance (findings row 81).  A BatchNormalization
    in inference reads its moving statistics: not this bug."""
    issues = load_known_issues()
    group = Signature("inconsistency", "GroupNormalization", (), ("tensorflow", "torch"), odd=("torch",))
    assert match_known(group, issues).id == "keras-torch-moments-negative-variance"
    trained = Signature("train_nan", "BatchNormalization", (), ("jax", "torch"), odd=("torch",))
    assert match_known(trained, issues).id == "keras-torch-moments-negative-variance"
    inference = Signature("deviation", "BatchNormalization", (), ("tensorflow", "torch"), odd=("torch",))
    hit = match_known(inference, issues)
    assert hit is None or hit.id != "keras-torch-moments-negative-variance"


# ---- how the failing layer ran: its dtype policy, a mask ----------------------------------------
#: an API-level case as the generator writes it: an adapter Dense, then the API's layer (policy per case)
def _policy_spec(policy: str, mask: bool = False) -> dict:
    layer = {"name": "t_softmax", "api": "Softmax", "params": {"axis": 1, "dtype": policy}, "inputs": ["a0_dense"]}
    if mask:
        layer["call"] = {"mask": "t_softmax_mask"}
    return {"layers": [{"name": "a0_dense", "api": "Dense", "params": {"units": 54, "dtype": policy},
                        "inputs": ["x0"]}, layer]}


def _ort_nan(layer: str, ort: int, others: int) -> object:
    """onnxruntime's NaN/Inf pattern apart from torch's and JAX's from ``layer`` on (its counts)."""
    from audee.cases.case import Finding, Kind

    return Finding(Kind.NAN, ["jax", "onnxruntime", "torch"], {
        "strong": True, "odd": ["onnxruntime"], "first_layer": {b: layer for b in ("jax", "onnxruntime", "torch")},
        "patterns": {"torch|onnxruntime": {"first_layer": layer}, "jax|onnxruntime": {"first_layer": layer}},
        "counts": {"torch": {"nan": others}, "jax": {"nan": others}, "onnxruntime": {"nan": ort}}})


def test_onnxruntime_keeping_a_float16_overflow_finite_is_known_by_the_policy():
    """onnxruntime computes a float16 MatMul in float32 and drops the cast pair
    (microsoft/onnxruntime#8787): its NaN pattern under a float16 policy is that entry's (the
    api-cpu campaign, rng 2812: a Dense under float16 fed ~221000).  The same difference under
    float32 is not, and a float32 case's signature has no policy fact (its identity is as before;
    its context says onnxruntime kept finite more than the others did)."""
    from audee.triage.signature import signatures_of

    issues = load_known_issues()
    for policy in ("float16", "mixed_float16"):
        (sig,) = signatures_of(_ort_nan("a0_dense", 308, 378), _policy_spec(policy), {"api": "Softmax"})
        assert (sig.policy, f"policy:{policy}" in sig.context) == (policy, True)
        assert match_known(sig, issues).id == "ort-fp16-cast-roundtrip-elided", sig
    (plain,) = signatures_of(_ort_nan("a0_dense", 308, 378), _policy_spec("float32"), {"api": "Softmax"})
    assert plain.policy == "float32" and plain.context == ("odd_fewer_nonfinite",)  # no policy fact
    assert match_known(plain, issues) is None
    (bf16,) = signatures_of(_ort_nan("a0_dense", 308, 378), _policy_spec("bfloat16"), {"api": "Softmax"})
    assert match_known(bf16, issues) is None  # bfloat16 has float32's range: no overflow to elide
    # where no layer is pinned, the case's policy (an API-level case's meta); an op case's dtype is no policy
    bare = _ort_nan("elsewhere", 1, 2)
    (sig,) = signatures_of(bare, _policy_spec("float32"), {"api": "Softmax", "dtype": "mixed_float16"})
    assert sig.policy == "mixed_float16"
    (op,) = signatures_of(bare, None, {"api": "add", "dtype": "float16", "seed": "op:add"})
    assert op.policy == "float32"


def test_a_mask_applied_by_a_select_is_known_on_any_layer_called_with_one():
    """tf2onnx lowers a float tf.where to Mul/Add (onnx/tensorflow-onnx#1988): Keras' Softmax
    called with a mask (where(mask, x, -1e9), where(mask, y, 0)) turns an Inf at a masked-out
    position into a NaN row on onnxruntime (the api-cpu campaign, rng 2812), as an RNN's mask
    does: any layer called with a mask, not a list of layers.  Unmasked, or another backend
    odd, it is not that entry's."""
    from dataclasses import replace

    from audee.triage.signature import signatures_of

    issues = load_known_issues()
    (sig,) = signatures_of(_ort_nan("t_softmax", 4, 0), _policy_spec("float32", mask=True), {"api": "Softmax"})
    assert sig.masked and "masked" in sig.context
    assert match_known(sig, issues).id == "tf2onnx-select-mul-nan"
    (unmasked,) = signatures_of(_ort_nan("t_softmax", 4, 0), _policy_spec("float32"), {"api": "Softmax"})
    assert not unmasked.masked and match_known(unmasked, issues) is None
    assert unmasked.key() == sig.key()  # a fact, not part of the signature's identity
    # a refusal that names no layer: the mask of the layer an API-level case was made around
    refused = Finding(Kind.DIVERGENT_ACCEPTANCE, ["jax"], {"accepted": ["torch"], "errors": {
        "jax": {"phase": "run", "message": "ValueError: Incompatible shapes for broadcasting"}}})
    (named_none,) = signatures_of(refused, _policy_spec("float32", mask=True), {"api": "Softmax"})
    assert named_none.masked
    assert not signatures_of(refused, _policy_spec("float32"), {"api": "Softmax"})[0].masked
    assert match_known(replace(sig, odd=("torch",)), issues) is None
    # where the exact result overflows too (an exploding state, unmasked: rng 2985), the order decides: not it
    assert match_known(replace(sig, context=(*sig.context, "overflow_boundary")), issues) is None
    # a row signed before the fact: the API level's record of the mask among the parameters
    old = Signature("nan", "GRU", (("call.mask", "'t_gru_mask'"),), ("onnxruntime", "tensorflow", "torch"),
                    odd=("onnxruntime",), layer="GRU")
    assert old.masked and match_known(old, issues).id == "tf2onnx-select-mul-nan"


def test_what_the_rng_2813_triage_learned_is_known():
    """The api-cpu campaign (rng 2813), checked by hand: a ReLU layer with a threshold selects
    with where (tf2onnx's Mul/Add lowering leaks its NaN on onnxruntime), and a channels_first
    Conv1DTranspose that tf2onnx never crops shows as extra non-finite positions on onnxruntime.
    A ReLU NaN odd on torch, or a channels_last Conv1DTranspose, is neither entry's."""
    issues = load_known_issues()
    relu = Signature("nan", "ReLU", (), ("jax", "onnxruntime", "tensorflow", "torch"), odd=("onnxruntime",),
                     layer="ReLU")
    assert match_known(relu, issues).id == "tf2onnx-select-mul-nan"
    assert match_known(Signature("nan", "ReLU", (), relu.backends, odd=("torch",), layer="ReLU"), issues) is None
    crop = Signature("nan", "Conv1DTranspose", (("data_format", "'channels_first'"),), relu.backends,
                     odd=("onnxruntime",), layer="Conv1DTranspose")
    assert match_known(crop, issues).id == "tf2onnx-convtranspose-output-padding"
    last = Signature("nan", "Conv1DTranspose", (("data_format", "'channels_last'"),), relu.backends,
                     odd=("onnxruntime",), layer="Conv1DTranspose")
    assert match_known(last, issues) is None


def test_tensorflows_fused_relu_dropping_nan_is_found_before():
    """The api-cpu campaign (rng 2813), checked by hand: lenet5-v00004's NaN, finite on TensorFlow
    alone, is TensorFlow's oneDNN fusion of a Dense/Conv bias and relu (findings row 86).  Its
    signature blames the first non-finite layer (Conv2D) and carries no parameter, so the entry
    names the layers that fuse; Conv1D does not fuse, and another backend odd is not this bug."""
    issues = load_known_issues()
    backends = ("jax", "onnxruntime", "tensorflow", "torch")
    for api in ("Conv2D", "Dense", "SeparableConv2D"):
        hit = match_known(Signature("nan", api, (), backends, odd=("tensorflow",), layer=api), issues)
        assert (hit.id, hit.status, hit.row) == ("tf-onednn-fused-relu-nan", "found before", 86), api
    assert match_known(Signature("nan", "Conv1D", (), backends, odd=("tensorflow",), layer="Conv1D"), issues) is None
    assert match_known(Signature("nan", "Conv2D", (), backends, odd=("torch",), layer="Conv2D"), issues) is None


def test_tf2onnx_atan2_on_infinite_pairs_is_found_before():
    """The api-cpu campaign (rng 2816): STFTSpectrogram(mode="angle") with an Inf, NaN on
    onnxruntime alone, is tf2onnx's Atan2 rewrite (findings row 87); another mode is not."""
    from dataclasses import replace

    issues = load_known_issues()
    backends = ("jax", "onnxruntime", "tensorflow", "torch")
    angle = Signature("nan", "STFTSpectrogram", (("mode", "'angle'"),), backends, odd=("onnxruntime",),
                      layer="STFTSpectrogram")
    hit = match_known(angle, issues)
    assert hit.id == "tf2onnx-atan2-inf" and hit.status == "found before" and hit.row == 87
    log = Signature("nan", "STFTSpectrogram", (("mode", "'log'"),), backends, odd=("onnxruntime",),
                    layer="STFTSpectrogram")
    assert match_known(log, issues) is None
    # a deviation with no odd backend (TensorFlow and JAX flushing subnormal products, onnxruntime
    # on torch's result: the rng 2908 hand check) is not the rewrite; onnxruntime odd is
    flat = replace(angle, kind="deviation", odd=(), context=("subnormal_input",))
    hit = match_known(flat, issues)
    assert hit is None or hit.id != "tf2onnx-atan2-inf"
    assert match_known(replace(flat, odd=("onnxruntime",)), issues).id == "tf2onnx-atan2-inf"


def test_what_the_rng_2817_triage_learned_is_known():
    """TensorFlow's CPU Conv3DTranspose refuses a dilation in the 3-D kernel's words ("does not
    yet support"), the known limitation's; onnxruntime's float32 chain under a float16 policy
    shows as a deviation too (UnitNormalization: 0.5 where the others overflow to 0); a float32
    onnxruntime deviation is not that entry's."""
    issues = load_known_issues()
    (dil,) = signatures_of(Finding(Kind.DIVERGENT_ACCEPTANCE, ["tensorflow"], {"accepted": ["torch", "jax"], "errors": {
        "tensorflow": {"phase": "run", "message": "InvalidArgumentError: Graph execution error: Current CPU "
                       "implementation does not yet support dilation rates larger than 1."}}}), {"layers": []},
        {"api": "Conv3DTranspose"})
    assert match_known(dil, issues).id == "tf-cpu-conv-transpose-dilation"
    dev = Signature("deviation", "UnitNormalization", (), ("onnxruntime", "tensorflow"), odd=("onnxruntime",),
                    layer="UnitNormalization", context=("policy:float16",))
    assert match_known(dev, issues).id == "ort-fp16-cast-roundtrip-elided"
    assert match_known(Signature("deviation", "UnitNormalization", (), ("onnxruntime", "tensorflow"),
                                 odd=("onnxruntime",), layer="UnitNormalization"), issues) is None


def test_the_rng_2818_new_bugs_are_found_before():
    """The api-cpu campaign (rng 2818) met two new bugs, now findings rows 88 and 89: tf2onnx's
    one_hot graph refused by onnxruntime, and TimeDistributed skipping its inner layer's check
    (torch and JAX failing on what TensorFlow runs)."""
    issues = load_known_issues()
    onehot = Signature("divergent_acceptance", "CategoryEncoding", (), ("onnxruntime",), "convert",
                       "tf2onnx produced an invalid ONNX graph (onnx.checker: Node(<layer>/one_hot) with schema(::<name>) "
                       "has input size <n> not in range [min=<n>, max=<n>]. ==> Context: Bad node spec for node. Name: "
                       "<layer>/one_hot OpType: OneHot)", layer="CategoryEncoding", component="tf2onnx")
    assert match_known(onehot, issues).id == "tf2onnx-onehot-rank2-dtype"
    for b, error in (("jax", "ValueError: operands could not be broadcast together with shapes <shape>"),
                     ("torch", "ValueError: The <name> argument must be a tuple of <n> integers. Received "
                               "pool_size=<shape>")):
        sig = Signature("divergent_acceptance", "TimeDistributed", (), (b,), "run", error, layer="TimeDistributed")
        assert match_known(sig, issues).id == "keras-timedistributed-skips-input-spec"


def test_torchs_half_adaptive_avgpool3d_overflow_is_known_upstream():
    """The api-cpu campaign (rng 2819): torch's CPU adaptive_avg_pool3d sums a float16 window in
    float16 (pytorch/pytorch#140696), +inf where JAX is finite; under float32 it is not that."""
    issues = load_known_issues()
    half = Signature("nan", "AdaptiveAveragePooling3D", (), ("jax", "torch"), odd=("torch",),
                     layer="AdaptiveAveragePooling3D", context=("policy:mixed_float16",))
    assert match_known(half, issues).id == "torch-cpu-adaptive-avgpool3d-half-accum"
    full = Signature("nan", "AdaptiveAveragePooling3D", (), ("jax", "torch"), odd=("torch",),
                     layer="AdaptiveAveragePooling3D")
    assert match_known(full, issues) is None


def test_what_the_rng_2821_triage_learned_is_known():
    """The hand check of the api-cpu campaign at rng 2821: tf2onnx's bfloat16 entry knows its
    one mapping (bfloat16 -> float16), not any dtype pair audee's check names (a float16 ->
    float32 refusal was audee's own false alarm); TensorFlow's 3-D convolutions refusing
    channels_first say NDHWC, the same CPU limitation as NHWC."""
    issues = load_known_issues()
    refused = "TypeError: the converted graph computes layer <layer> in {got}, the Keras model in {want} " \
              "(tf2onnx maps TensorFlow's {want} to ONNX {got})"
    bf16 = Signature("divergent_acceptance", "Conv1D", (), ("onnxruntime",), "convert",
                     refused.format(want="bfloat16", got="float16"))
    assert match_known(bf16, issues).id == "tf2onnx-bfloat16-as-float16"
    other = Signature("divergent_acceptance", "CategoryEncoding", (), ("onnxruntime",), "convert",
                      refused.format(want="float16", got="float32"))
    assert match_known(other, issues) is None
    for words in ("The Conv2D op currently only supports the NHWC tensor format on the CPU",
                  "Conv3DBackpropInputOpV2 only supports NDHWC on the CPU"):
        sig = Signature("divergent_acceptance", "Conv3DTranspose", (), ("tensorflow",), "run",
                        f"UnimplementedError: Graph execution error: {words}")
        assert match_known(sig, issues).id == "tf-cpu-nchw-unsupported", words


def test_a_converter_following_its_reference_into_a_bias_bug_is_the_reference_s():
    """A channels_first convolution whose last axis equals its filters: Keras on TensorFlow
    adds the bias along the last axis, tf2onnx converts that graph, and onnxruntime agrees
    with TensorFlow against torch and JAX (no side named odd: rng 2822).  That is Keras'
    bias-layout guess, not tf2onnx's non-constant bias, whose silent face (a broadcast
    shape where the last axis is 1) has onnxruntime odd, transposed convolutions included
    (rng 2826's Conv3DTranspose)."""
    from dataclasses import replace

    issues = load_known_issues()

    def hit(sig: Signature) -> str | None:
        issue = match_known(sig, issues)
        return issue.id if issue else None

    four = ("jax", "onnxruntime", "tensorflow", "torch")
    params = (("activation", "'hard_shrink'"), ("data_format", "'channels_first'"), ("use_bias", "True"))
    guess = Signature("deviation", "SeparableConv2D+activations.hard_shrink", params, four, layer="SeparableConv2D")
    assert hit(guess) == "keras-tf-add-bias-layout-guess"
    assert hit(replace(guess, odd=("tensorflow",))) == "keras-tf-add-bias-layout-guess"
    assert hit(replace(guess, odd=("onnxruntime",))) == "tf2onnx-biasadd-nchw-nonconst"
    conv3dt = Signature("inconsistency", "Conv3DTranspose+activations.sparse_plus",
                        (("activation", "'sparse_plus'"), ("data_format", "'channels_first'")),
                        ("onnxruntime", "tensorflow"), odd=("onnxruntime",), layer="Conv3DTranspose")
    assert hit(conv3dt) == "tf2onnx-biasadd-nchw-nonconst"
    assert hit(replace(conv3dt, params=(("data_format", "'channels_last'"),))) is None
    assert hit(replace(conv3dt, odd=("torch",), backends=("onnxruntime", "tensorflow", "torch"))) is None


def test_an_odd_criterion_needs_the_oracle_to_name_the_backend():
    """``odd`` holds only where the oracle named those backends odd; ``backends`` also where
    it named none (then every backend of the finding is named)."""
    from audee.triage.known import KnownMatch

    both = Signature("deviation", "Dense", (), ("onnxruntime", "tensorflow"), layer="Dense")
    assert KnownMatch(backends=["onnxruntime"]).matches(both)
    assert not KnownMatch(odd=["onnxruntime"]).matches(both)
    from dataclasses import replace

    assert KnownMatch(odd=["onnxruntime"]).matches(replace(both, odd=("onnxruntime",)))
    assert not KnownMatch(odd=["onnxruntime"]).matches(replace(both, odd=("tensorflow",)))


def test_jax_s_convlstm_mask_has_a_silent_face_and_fused_relu_is_relu_s_only():
    """Signed as the api-cpu campaign signed them (rng 2829): a channels_first ConvLSTM2D whose
    height equals the batch, called with a mask, deviates and has a NaN pattern of its own on
    JAX alone (Keras' JAX RNN loop masks the wrong state axes, silently here); a Conv3D with a
    softmax, TensorFlow odd on an Inf input, is not oneDNN's fused Relu, whose rules name relu
    or relu6 for the API level and a seed's own activation (a signature without one), but
    oneDNN's Softmax of an infinite row."""
    from dataclasses import replace

    issues = load_known_issues()

    def hit(sig: Signature) -> str | None:
        issue = match_known(sig, issues)
        return issue.id if issue else None

    four = ("jax", "onnxruntime", "tensorflow", "torch")
    params = (("activation", "'silu'"), ("call.mask", "'t_convlstm2d_mask'"), ("data_format", "'channels_first'"),
              ("padding", "'valid'"), ("recurrent_activation", "'hard_shrink'"))
    dev = Signature("deviation", "ConvLSTM2D+activations.hard_shrink+activations.silu", params, ("jax", "tensorflow"),
                    odd=("jax",), layer="ConvLSTM2D")
    nan = replace(dev, kind="nan", backends=four, context=("masked",))
    for sig in (dev, replace(dev, kind="inconsistency"), nan):
        assert hit(sig) == "keras-jax-convlstm-mask", sig
    unmasked = tuple(p for p in params if p[0] != "call.mask")
    assert hit(replace(dev, params=unmasked)) is None       # no mask: not this bug
    assert hit(replace(dev, odd=("tensorflow",))) is None    # another backend's difference

    conv = (("activation", "'softmax'"), ("data_format", "'channels_first'"), ("padding", "'same'"))
    softmax = Signature("nan", "Conv3D+activations.softmax", conv, ("jax", "tensorflow", "torch"),
                        odd=("tensorflow",), layer="Conv3D", context=("nonfinite_input", "odd_fewer_nonfinite"))
    assert hit(softmax) == "tf-onednn-softmax-inf"
    relu = replace(softmax, api="Conv3D+activations.relu", params=(("activation", "'relu'"),) + conv[1:])
    assert hit(relu) == "tf-onednn-fused-relu-nan"
    assert hit(replace(relu, params=(("activation", "'relu6'"),) + conv[1:])) == "tf-onednn-fused-relu-nan"
    seed = Signature("nan", "Conv2D", (), four, odd=("tensorflow",), layer="Conv2D")  # lenet5's conv, no mutation
    assert hit(seed) == "tf-onednn-fused-relu-nan"


def test_a_params_list_is_any_of_its_values_and_unset_wants_the_parameter_absent():
    from audee.triage.known import KnownMatch

    sig = Signature("nan", "Dense", (("activation", "'relu'"), ("units", "+int")), ("tensorflow",), layer="Dense")
    assert KnownMatch(params={"activation": ["relu6", "relu"]}).matches(sig)
    assert not KnownMatch(params={"activation": ["gelu", "silu"]}).matches(sig)
    assert KnownMatch(params={"units": 7}).matches(sig)
    assert not KnownMatch(unset=["activation"]).matches(sig)
    assert KnownMatch(unset=["use_bias"]).matches(sig)


def test_torch_s_layer_normalization_off_its_fused_kernel_is_the_moments_bug():
    """LayerNormalization(axis=[1, -1]) on torch: Keras sorts the axes before normalising the
    negative one, so they are not consecutive and the layer takes ops.moments, whose torch
    variance goes negative for a large mean and a small spread (rng 2831: NaN on torch alone)."""
    from dataclasses import replace

    issues = load_known_issues()

    def hit(sig: Signature) -> str | None:
        issue = match_known(sig, issues)
        return issue.id if issue else None

    params = (("axis", "[+int, -int]"), ("center", "True"), ("epsilon", "+float"), ("scale", "False"))
    nan = Signature("nan", "LayerNormalization", params, ("jax", "onnxruntime", "tensorflow", "torch"),
                    odd=("torch",), layer="LayerNormalization")
    assert hit(nan) == "keras-torch-moments-negative-variance"
    assert hit(replace(nan, odd=("jax",))) is None
    assert hit(replace(nan, odd=())) is None  # nobody named odd: not torch's alone


def test_jax_s_large_max_reductions_dropping_nan_are_xla_s_ynnpack_fusion():
    """JAX alone finite where the others keep a NaN, on a max pooling or a max: XLA's CPU
    YNNPACK reduce fusion (findings row 91, rng 2830), a bug even on a NaN input; another
    backend odd, or JAX odd on another layer, is not it."""
    from dataclasses import replace

    issues = load_known_issues()
    four = ("jax", "onnxruntime", "tensorflow", "torch")
    sig = Signature("nan", "GlobalMaxPooling1D", (), four, odd=("jax",), layer="GlobalMaxPooling1D",
                    context=("nonfinite_input",))
    issue = match_known(sig, issues)
    assert issue is not None and (issue.id, issue.status, issue.klass) == ("xla-cpu-ynn-reduce-nan", "found before", "bug")
    assert match_known(replace(sig, api="MaxPooling2D", layer="MaxPooling2D"), issues).id == "xla-cpu-ynn-reduce-nan"
    other = match_known(replace(sig, odd=("onnxruntime",)), issues)
    assert other is None or other.id != "xla-cpu-ynn-reduce-nan"
    assert match_known(replace(sig, api="Dense", layer="Dense"), issues) is None
    jit = replace(sig, backends=("jax", "jax-eager"))  # judged against its eager run, the same kernel on both
    assert match_known(jit, issues) is None


def _known_id(sig: Signature) -> str | None:
    issue = match_known(sig, load_known_issues())
    return issue.id if issue else None


def test_torch_layer_normalization_over_axes_not_continuous_is_moments_negative_variance():
    """Signed as the api-cpu campaign signed it (rng 2831): LayerNormalization(axis=[1, -1]) on
    rows near 2579, NaN on torch alone.  Keras sorts the axes to [-1, 1], not continuous, so
    torch normalizes by moments (the unclamped variance), not by F.layer_norm; an axis of one
    sign is the fused kernel's (keras-torch-fused-norm-axis-silent)."""
    from dataclasses import replace

    four = ("jax", "onnxruntime", "tensorflow", "torch")
    params = (("axis", "[+int, -int]"), ("center", "True"), ("epsilon", "+float"), ("scale", "False"))
    nan = Signature("nan", "LayerNormalization", params, four, odd=("torch",), layer="LayerNormalization")
    for sig in (nan, replace(nan, kind="deviation", backends=("tensorflow", "torch")),
                replace(nan, kind="inconsistency"), replace(nan, params=(("axis", "[-int, +int]"),) + params[1:]),
                replace(nan, api="layer_normalization", layer="layer_normalization")):
        assert _known_id(sig) == "keras-torch-moments-negative-variance", sig
    assert _known_id(replace(nan, odd=("jax",))) is None                      # another backend apart
    assert _known_id(replace(nan, api="RMSNormalization", layer="RMSNormalization")) is None  # a mean of squares
    one_sign = replace(nan, kind="deviation", params=(("axis", "+int"),) + params[1:])
    assert _known_id(one_sign) == "keras-torch-fused-norm-axis-silent"
    assert _known_id(replace(one_sign, params=(("axis", "[-int, -int]"),))) == "keras-torch-fused-norm-axis-silent"
    assert _known_id(replace(one_sign, params=())) == "keras-torch-fused-norm-axis-silent"   # a seed's own axis
    mixed = replace(one_sign, odd=(), params=(("axis", "[+int, -int]"),))
    assert _known_id(mixed) is None     # moments, but the oracle named no odd backend: not this rule either


def test_litert_reduce_max_dropping_nan_is_known_on_the_global_max_poolings():
    """GlobalMaxPooling{1,2,3}D is ops.max, a REDUCE_MAX on LiteRT, which returns the largest
    finite value where TensorFlow returns NaN; onnxruntime's own max kernels are other entries."""
    from dataclasses import replace

    sig = Signature("nan", "GlobalMaxPooling2D", (("data_format", "'channels_last'"),), ("litert", "tensorflow"),
                    odd=("litert",), layer="GlobalMaxPooling2D")
    for api in ("GlobalMaxPooling1D", "GlobalMaxPooling2D", "GlobalMaxPooling3D"):
        assert _known_id(replace(sig, api=api, layer=api)) == "litert-minmax-drops-nan"
    assert _known_id(replace(sig, api="GlobalAveragePooling2D", layer="GlobalAveragePooling2D")) is None
    assert _known_id(replace(sig, backends=("openvino", "tensorflow"), odd=("openvino",))) is None


def test_the_ops_and_the_layers_that_share_a_known_kernel_share_its_entry():
    """The op-level faces of three layer entries, each the same backend function: ops.hard_shrink /
    soft_shrink (torch's F.hardshrink keeps NaN), ops.image.resize bicubic on torch (a = -0.75) and
    bilinear under XLA (tf2xla's ResizeBilinear); another interpolation or backend is not them."""
    from dataclasses import replace

    shrink = Signature("nan", "hard_shrink", (("threshold", "+float"),), ("jax", "tensorflow", "torch"),
                       odd=("torch",), layer="hard_shrink")
    assert _known_id(shrink) == "keras-shrink-nan-torch"
    assert _known_id(replace(shrink, api="soft_shrink", layer="soft_shrink")) == "keras-shrink-nan-torch"
    assert _known_id(replace(shrink, api="tanh_shrink", layer="tanh_shrink")) is None
    assert _known_id(replace(shrink, backends=("jax", "tensorflow"), odd=("jax",))) is None

    resize = Signature("deviation", "image.resize", (("antialias", "False"), ("interpolation", "'bicubic'")),
                       ("jax", "tensorflow", "torch"), odd=("torch",), layer="image.resize")
    assert _known_id(resize) == "torch-bicubic-kernel"
    assert _known_id(replace(resize, params=(("interpolation", "'bilinear'"),))) is None
    xla = replace(resize, params=(("interpolation", "'bilinear'"),), backends=("tensorflow", "tensorflow-xla"),
                  odd=("tensorflow-xla",))
    assert _known_id(xla) == "tf-xla-resize-bilinear"
    assert _known_id(replace(xla, kind="nan")) == "tf-xla-resize-bilinear-nan"
    assert _known_id(replace(xla, params=(("interpolation", "'nearest'"),))) is None
    assert _known_id(replace(xla, backends=("torch", "torch-compile"), odd=("torch-compile",))) is None


def test_onnxruntime_max_kernels_dropping_nan_are_known_under_torch_onnx_too():
    """Signed as the compilers campaign signed them (rng 2811): torch.onnx exports Keras' torch
    max poolings as MaxPool and its global max poolings (torch.amax) as ReduceMax, onnxruntime's
    kernels that drop NaN, so torch-onnx is finite where torch is NaN.  No graph facts come from
    that exporter, so the layer names the kernel; another layer, or torch-compile odd, is not it."""
    from dataclasses import replace

    three = ("torch", "torch-compile", "torch-onnx")
    gmp = Signature("nan", "GlobalMaxPooling2D", (("data_format", "'channels_last'"), ("keepdims", "False")), three,
                    odd=("torch-onnx",), layer="GlobalMaxPooling2D", context=("nonfinite_input",))
    assert _known_id(gmp) == "ort-reducemax-nan"
    pool = Signature("nan", "MaxPooling1D", (), three, odd=("torch-onnx",), layer="MaxPooling1D",
                     context=("nonfinite_input",))
    assert _known_id(pool) == "ort-maxpool-nan"
    wrapped = replace(pool, api="TimeDistributed", layer="TimeDistributed", params=(("layer", "'MaxPooling2D'"),))
    assert _known_id(wrapped) == "ort-maxpool-nan"
    assert _known_id(replace(wrapped, params=(("layer", "'Conv2D'"),))) is None
    assert _known_id(replace(pool, odd=("torch-compile",))) is None
    assert _known_id(replace(gmp, api="GlobalAveragePooling2D", layer="GlobalAveragePooling2D")) is None


def test_eager_onednn_max_pool_sigfpe_is_known_on_every_adaptive_max_pooling():
    """The compilers campaign (rng 2811): AdaptiveMaxPooling1D(output_size=1) kills the
    tensorflow-eager worker with SIGFPE, oneDNN's eager MaxPool on a window wider than the input
    (the 2-D kernel behind tf.nn.pool of one or two dims, as the 3-D one); average pooling is not it."""
    from dataclasses import replace

    text = "signal: worker killed by SIGFPE"
    sig = Signature("hard_crash", "AdaptiveMaxPooling1D", (("data_format", "'channels_last'"),), ("tensorflow-eager",),
                    "run", text, odd=("tensorflow-eager",), layer="AdaptiveMaxPooling1D", error_full=text)
    for api in ("AdaptiveMaxPooling1D", "AdaptiveMaxPooling2D", "AdaptiveMaxPooling3D"):
        assert _known_id(replace(sig, api=api, layer=api)) == "tf-onednn-maxpool3d-fpe"
    assert _known_id(replace(sig, api="AdaptiveAveragePooling1D", layer="AdaptiveAveragePooling1D")) is None
    assert _known_id(replace(sig, backends=("tensorflow",), odd=("tensorflow",))) is None


def test_a_facts_criterion_needs_the_signature_to_record_them_and_onnxruntime_maxpool_has_a_deviation_face():
    """Both sides dropping a NaN, differently (TensorFlow's max pooling keeps a window's largest
    finite value, onnxruntime's MaxPool may lose it: rng 2832) is a deviation of onnxruntime on a
    NaN input; on a finite input the entry does not claim it."""
    from dataclasses import replace

    from audee.triage.known import KnownMatch

    issues = load_known_issues()
    params = (("data_format", "'channels_last'"), ("padding", "'same'"), ("pool_size", "+int"), ("strides", "+int"))
    dev = Signature("deviation", "MaxPooling2D", params, ("onnxruntime", "tensorflow"), odd=("onnxruntime",),
                    layer="MaxPooling2D", context=("nonfinite_input",))
    assert match_known(dev, issues).id == "ort-maxpool-nan"
    finite = match_known(replace(dev, context=()), issues)
    assert finite is None or finite.id != "ort-maxpool-nan"
    assert KnownMatch(facts=["masked", "nonfinite_input"]).matches(replace(dev, context=("nonfinite_input", "masked")))
    assert not KnownMatch(facts=["masked"]).matches(dev)


def test_a_graph_missing_an_op_and_mixing_half_types_is_the_missing_op_first():
    """A bfloat16 celu converted by tf2onnx: the ONNX checker's first complaint is the missing
    Expm1 (any dtype meets it), onnxruntime's the mixed float16/bfloat16 types (rng 2831, 2833):
    the root is the first, a converter limitation."""
    text = ("tf2onnx produced an invalid ONNX graph (onnx.checker: No Op registered for Expm1 with domain_version "
            "of <n> ==> Context: Bad node spec for node. Name: <layer>/Expm1 OpType: Expm1); onnxruntime refused "
            "it: Fail: [ONNXRuntimeError] : <n> : FAIL : Type Error: Type parameter (T) of Optype (Max) bound to "
            "different types (tensor(float16) and tensor(bfloat16) in node (<layer>/Max).")
    sig = Signature("divergent_acceptance", "SeparableConv2D+activations.celu", (), ("onnxruntime",), "convert",
                    text, layer="SeparableConv2D", error_full=text)
    issues = load_known_issues()
    assert match_known(sig, issues).id == "tf2onnx-expm1"
    mixed = text.split("onnxruntime refused it: ")[1]
    assert match_known(Signature("divergent_acceptance", "Conv3D", (), ("onnxruntime",), "convert", mixed,
                                 layer="Conv3D", error_full=mixed), issues).id == "tf2onnx-bfloat16-mixed-types"


def test_torch_bicubic_kernel_is_not_the_cause_of_an_antialiased_resize():
    """torch's antialiased bicubic uses a = -0.5 as TensorFlow and JAX do, so a torch deviation of
    Resizing(antialias=True) is not the kernel entry's: the rng 2840 check found torch's
    antialiased resize to width 1 repeating row 0 (findings row 92) claimed by it."""
    issues = load_known_issues()
    params = (("crop_to_aspect_ratio", "True"), ("height", "+int"), ("interpolation", "'bicubic'"),
              ("width", "+int"))
    sig = Signature("deviation", "Resizing", tuple(sorted(params + (("antialias", "True"),))), ("tensorflow", "torch"),
                    odd=("torch",), layer="Resizing")
    assert match_known(sig, issues).id == "torch-interpolate-antialias-width1"
    plain = Signature("deviation", "Resizing", tuple(sorted(params + (("antialias", "False"),))), ("tensorflow", "torch"),
                      odd=("torch",), layer="Resizing")
    assert match_known(plain, issues).id == "torch-bicubic-kernel"
    up = Signature("deviation", "UpSampling2D", (("interpolation", "'bicubic'"), ("size", "+int")),
                   ("tensorflow", "torch"), odd=("torch",), layer="UpSampling2D")
    assert match_known(up, issues).id == "torch-bicubic-kernel"    # no antialias parameter: the kernel


def test_tensorflow_odd_bicubic_resize_is_its_coefficient_table():
    """TensorFlow's CPU ResizeBicubic reads Keys' weights from a table of offsets rounded to 1/1024
    (findings row 102), about 1e-3 of the range off the exact cubic JAX and onnxruntime compute: a
    TensorFlow-odd bicubic deviation (the api-cpu campaign, rngs 2837 and 2874) is that limitation;
    a torch-odd one stays torch's kernel (a = -0.75), and a bilinear one is neither."""
    from dataclasses import replace
    from audee.triage.rootcause import classify

    issues = load_known_issues()
    params = (("antialias", "False"), ("height", "+int"), ("interpolation", "'bicubic'"), ("width", "+int"))
    tf_odd = Signature("deviation", "Resizing", params, ("jax", "onnxruntime", "tensorflow"), odd=("tensorflow",),
                       layer="Resizing")
    hit = match_known(tf_odd, issues)
    assert hit is not None and hit.id == "tf-resize-bicubic-coefficient-table" and hit.row == 102
    assert hit.klass == "limitation" and classify(tf_odd, hit)[0] == "limitation"
    up = Signature("train_deviation", "UpSampling2D", (("interpolation", "'bicubic'"), ("size", "+int")),
                   ("jax", "tensorflow"), odd=("tensorflow",), layer="UpSampling2D")
    assert _known_id(up) == "tf-resize-bicubic-coefficient-table"      # no antialias parameter
    torch_odd = replace(tf_odd, backends=("jax", "tensorflow", "torch"), odd=("torch",))
    assert match_known(torch_odd, issues).id == "torch-bicubic-kernel"
    both = replace(tf_odd, backends=("jax", "tensorflow", "torch"), odd=("tensorflow", "torch"))
    assert match_known(both, issues).id == "torch-bicubic-kernel"    # torch's kernel is the larger difference
    bilinear = replace(tf_odd, params=tuple(sorted(params[:2] + (("interpolation", "'bilinear'"), params[3]))))
    assert _known_id(bilinear) != "tf-resize-bicubic-coefficient-table"
    antialiased = replace(tf_odd, params=(("antialias", "True"),) + params[1:])
    assert _known_id(antialiased) != "tf-resize-bicubic-coefficient-table"  # scale_and_translate, no table
    assert _known_id(replace(tf_odd, odd=())) != "tf-resize-bicubic-coefficient-table"


def test_timedistributed_skipping_the_input_check_is_known_by_jaxs_reduce_window_words_too():
    """A channels_first MaxPooling1D handed a 4-D slice: JAX's lax.reduce_window refuses the
    window's rank, not a broadcast (the api-cpu campaign, rng 2843)."""
    words = ("TypeError: reduce_window got the wrong number of window_dimensions for operand: got operand "
             "shape <shape> with window_dimensions <shape>.")
    sig = Signature("divergent_acceptance", "MaxPooling1D+TimeDistributed", (("layer", "'MaxPooling1D'"),),
                    ("jax",), phase="run", error=words, layer="TimeDistributed", error_full=words)
    assert match_known(sig, load_known_issues()).id == "keras-timedistributed-skips-input-spec"


def test_keras_bias_layout_guess_needs_a_bias():
    """Keras' TF ops.add guesses tf.nn.bias_add's layout, and a convolution reaches ops.add only
    for its bias (the base classes' call, under use_bias): a channels_first convolution without a
    bias deviating on TensorFlow is not that guess.  A seed's layer (use_bias unset) still is."""
    from dataclasses import replace

    four = ("jax", "onnxruntime", "tensorflow", "torch")
    params = (("data_format", "'channels_first'"), ("filters", "+int"), ("use_bias", "True"))
    sig = Signature("deviation", "Conv2D", params, four, odd=("tensorflow",), layer="Conv2D")
    assert _known_id(sig) == "keras-tf-add-bias-layout-guess"
    assert _known_id(replace(sig, params=(("data_format", "'channels_first'"),))) == "keras-tf-add-bias-layout-guess"
    no_bias = replace(sig, params=(("data_format", "'channels_first'"), ("filters", "+int"), ("use_bias", "False")))
    assert _known_id(no_bias) is None
    assert _known_id(replace(no_bias, kind="inconsistency", backends=("tensorflow", "torch"))) is None


def test_a_bias_tensorflow_placed_on_axis_1_is_not_the_layout_guess():
    """A channels_first convolution with a bias whose traced graph shows an NCHW BiasAdd and no
    misplaced one had its bias put where it belongs: Keras' guess was right, and TensorFlow
    alone off is another cause.  A bfloat16 DepthwiseConv2D(depth_multiplier 3, strides (1, 2))
    of output width 1 is oneDNN's strided unit-width convolution, known upstream (the api-cpu
    campaign, rng 3007, once under the guess's entry); a Conv2D's float32 face with that graph is
    neither (announced), and with the misplaced bias, or no graph seen, it is the guess still."""
    params = (("data_format", "'channels_first'"), ("depth_multiplier", "+int"), ("use_bias", "True"))

    def sig(api: str, policy: str, facts: tuple[str, ...]) -> Signature:
        context = ((f"policy:{policy}",) if policy != "float32" else ()) + tuple(f"program:{f}" for f in facts)
        return Signature("deviation", api, params, ("jax", "onnxruntime", "tensorflow", "torch"),
                         odd=("tensorflow",), layer=api, context=context)

    assert _known_id(sig("DepthwiseConv2D", "bfloat16", ("bias_add_nchw",))) == "onednn-bf16-conv-strided-unit-width"
    assert _known_id(sig("SeparableConv1D", "float32", ("bias_add_nchw",))) is None
    assert _known_id(sig("SeparableConv1D", "float32", ("bias_add_misplaced",))) == "keras-tf-add-bias-layout-guess"
    assert _known_id(sig("SeparableConv1D", "float32", ())) == "keras-tf-add-bias-layout-guess"
    assert _known_id(sig("DepthwiseConv2D", "bfloat16", ("bias_add_nchw", "bias_add_misplaced"))) == \
        "keras-tf-add-bias-layout-guess"


def test_a_window_dropped_by_the_axis_rule_is_the_mask_built_from_axis_1():
    """MultiHeadAttention's window is built from axis 1 whatever its attention axes (findings row
    112): refused where the lengths differ, silently dropped where axis 1 has length 1, which the
    axis rule sees as other values on every backend (the api-cpu campaign, rng 3010).  Without a
    window the same values face is another cause."""
    params = (("attention_axes", "[+int]"), ("num_heads", "+int"), ("sliding_window", "+int"), ("rule", "axis"))
    sig = Signature("equivalence", "MultiHeadAttention", params, ("jax",), layer="MultiHeadAttention",
                    context=("equivalence:values", "failed_alike:jax,onnxruntime,tensorflow,torch"))
    assert _known_id(sig) == "keras-mha-window-mask-axis-1"
    no_window = tuple(p for p in params if p[0] != "sliding_window")
    assert _known_id(Signature("equivalence", "MultiHeadAttention", no_window, ("jax",), layer="MultiHeadAttention",
                               context=("equivalence:values",))) is None


def test_jax_category_encoding_float_ids_is_not_multi_hot():
    """JAX's one_hot drops non-integer float ids (one_hot and count go through it as they are);
    multi_hot casts the ids to int32 first, truncating as TensorFlow and torch do, so a JAX
    deviation of CategoryEncoding(output_mode='multi_hot') is not that entry's."""
    from dataclasses import replace

    sig = Signature("deviation", "CategoryEncoding", (("num_tokens", "+int"), ("output_mode", "'one_hot'")),
                    ("jax", "tensorflow", "torch"), odd=("jax",), layer="CategoryEncoding")
    assert _known_id(sig) == "keras-jax-category-encoding-float-ids"
    count = replace(sig, params=(("num_tokens", "+int"), ("output_mode", "'count'")))
    assert _known_id(count) == "keras-jax-category-encoding-float-ids"
    assert _known_id(replace(sig, params=(("num_tokens", "+int"),))) == "keras-jax-category-encoding-float-ids"
    assert _known_id(replace(sig, params=(("num_tokens", "+int"), ("output_mode", "'multi_hot'")))) is None


def test_relu_layer_selects_only_with_a_threshold():
    """Keras' ReLU layer writes where(x > t, x, 0) only for a threshold other than 0 (tf2onnx's
    Mul/Add lowering of that select leaks NaN on onnxruntime and OpenVINO); with threshold 0 it
    is relu, relu6 or leaky_relu and a clip, no select, so an onnxruntime NaN there is not the
    select entry's (unless the converted graph shows the lowering)."""
    from dataclasses import replace

    four = ("jax", "onnxruntime", "tensorflow", "torch")
    params = (("max_value", "+float"), ("negative_slope", "+float"), ("threshold", "+float"))
    sig = Signature("nan", "ReLU", params, four, odd=("onnxruntime",), layer="ReLU")
    assert _known_id(sig) == "tf2onnx-select-mul-nan"
    assert _known_id(replace(sig, params=(("threshold", "-float"),))) == "tf2onnx-select-mul-nan"
    assert _known_id(replace(sig, backends=("onnxruntime", "openvino", "tensorflow"),
                             odd=("openvino",))) == "tf2onnx-select-mul-nan"
    zero = replace(sig, params=(("max_value", "+float"), ("negative_slope", "+float"), ("threshold", "0")))
    assert _known_id(zero) is None
    # OpenVINO's own Relu(NaN) = 0 is still there: its relu(-x) and relu nodes
    assert _known_id(replace(zero, odd=("openvino",), backends=("openvino", "tensorflow"))) == "openvino-relu-nan"
    assert _known_id(replace(zero, context=("program:select_as_arithmetic",))) == "tf2onnx-select-mul-nan"


def test_torch_layer_normalization_over_one_axis_never_takes_the_moments_path():
    """One axis (an int, a list of one) is always continuous, so Keras on torch normalizes it
    with F.layer_norm, never by ops.moments: a torch NaN of LayerNormalization(axis=1) (rng 2826's
    and 2838's TimeDistributed(LayerNormalization(axis=1)) on a near-max or Inf row) is not the
    unclamped variance.  Two or more axes, or a seed's own axis, still are."""
    from dataclasses import replace

    four = ("jax", "onnxruntime", "tensorflow", "torch")
    wrapped = Signature("nan", "LayerNormalization+TimeDistributed",
                        (("axis", "+int"), ("center", "False"), ("epsilon", "+float"),
                         ("layer", "'LayerNormalization'"), ("scale", "True")),
                        four, odd=("torch",), layer="TimeDistributed", context=("nonfinite_input",))
    assert _known_id(wrapped) != "keras-torch-moments-negative-variance"
    alone = Signature("nan", "LayerNormalization", (("axis", "-int"), ("epsilon", "+float")), four,
                      odd=("torch",), layer="LayerNormalization")
    assert _known_id(alone) != "keras-torch-moments-negative-variance"
    assert _known_id(replace(alone, params=(("axis", "[+int]"),))) != "keras-torch-moments-negative-variance"
    for axis in ("[+int, -int]", "[+int, +int]", "[-int, -int, -int]", "[+int, +int, -int, -int]"):
        sig = replace(alone, params=(("axis", axis), ("epsilon", "+float")))
        assert _known_id(sig) == "keras-torch-moments-negative-variance", axis
    assert _known_id(replace(alone, params=())) == "keras-torch-moments-negative-variance"  # a seed's own axis


def test_tf2onnxs_nonconstant_bias_is_known_by_onnx_checkers_words_on_a_nested_layer():
    """onnx.checker refusing tf2onnx's graph at convert names the Add by its node, which for a
    wrapped convolution (SpectralNormalization's) is a nested path (the api-cpu campaign, rng 2845)."""
    words = ("tf2onnx produced an invalid ONNX graph (onnx.checker: [ShapeInferenceError] Inference error(s): "
             "(op_type:Add, node name: <layer><path>/BiasAdd): [ShapeInferenceError] Incompatible dimensions")
    sig = Signature("divergent_acceptance", "activations.softplus", (("activation", "'softplus'"),), ("onnxruntime",),
                    phase="convert", error=words, layer="SpectralNormalization", error_full=words)
    assert match_known(sig, load_known_issues()).id == "tf2onnx-biasadd-nchw-nonconst"


def test_tf2onnx_resize_scales_reshape_is_known_by_onnxruntimes_reshape_failure_on_a_resize():
    """A resize by 7/3 converted to float32 scales, a Reshape baked from ONNX's inferred 6 rows
    (the api-cpu campaign, rng 2853); a Reshape failure on another layer is not this."""
    words = ("Fail: [ONNXRuntimeError] : <n> : FAIL : Non-zero status code returned while running Reshape node. "
             "Name:<name> Status Message: <path> onnxruntime::ReshapeHelper::ReshapeHelper(const "
             "onnxruntime::TensorShape&, onnxruntime::TensorShapeVector&, bool) size != <n> && "
             "(input_shape_size % size) == <n> was false. The input tensor cannot be reshaped to the requested shape.")
    sig = Signature("divergent_acceptance", "Resizing", (("interpolation", "'nearest'"),), ("onnxruntime",),
                    phase="run", error=words, layer="Resizing", error_full=words)
    issues = load_known_issues()
    assert match_known(sig, issues).id == "tf2onnx-resize-scales-reshape"
    from dataclasses import replace
    other = match_known(replace(sig, api="Dense", layer="Dense", params=()), issues)
    assert other is None or other.id != "tf2onnx-resize-scales-reshape"


def test_tensorflows_onednn_softmax_of_an_infinite_row_is_undefined_and_known_upstream():
    """TensorFlow odd in a NaN pattern on a layer whose activation is softmax: oneDNN's Softmax
    of a row holding +Inf (NaN there, 0 elsewhere) where the others give a NaN row (the api-cpu
    campaign: a GRU whose state overflows inside the layer, rng 2851; a Conv3D fed a lone Inf,
    rng 2829).  Another backend odd, TensorFlow with more NaN, or another activation, is not this."""
    from dataclasses import replace

    issues = load_known_issues()
    backends = ("jax", "onnxruntime", "tensorflow", "torch")
    params = (("activation", "'softmax'"), ("recurrent_activation", "None"))
    for api, layer in (("GRU+activations.softmax", "GRU"), ("Conv3D+activations.softmax", "Conv3D"),
                       ("Softmax", "Softmax")):
        hit = match_known(Signature("nan", api, params, backends, odd=("tensorflow",), layer=layer,
                                    context=("odd_fewer_nonfinite",)), issues)
        assert (hit.id, hit.status, hit.klass) == ("tf-onednn-softmax-inf", "known upstream", "undefined"), api
    gru = Signature("nan", "GRU+activations.softmax", params, backends, odd=("torch",), layer="GRU",
                    context=("odd_fewer_nonfinite",))
    assert match_known(gru, issues) is None
    # TensorFlow with more NaN than the rest: a softmax making NaN from finite values, not this
    assert match_known(replace(gru, odd=("tensorflow",), context=("odd_more_nonfinite",)), issues) is None
    assert match_known(replace(gru, odd=("tensorflow",), context=()), issues) is None
    tanh = Signature("nan", "GRU+activations.tanh", (("activation", "'tanh'"),), backends, odd=("tensorflow",),
                     layer="GRU", context=("odd_fewer_nonfinite",))
    hit = match_known(tanh, issues)
    assert hit is None or hit.id != "tf-onednn-softmax-inf"


def test_a_select_lowered_to_arithmetic_is_not_the_cause_where_the_converter_has_fewer_nan():
    """A float16 ConvLSTM2D called with a mask, onnxruntime odd with fewer non-finite values than
    TensorFlow and torch (the api-cpu campaign, rng 2847): the select lowering only adds NaN, so
    the fewer side is onnxruntime's float16 cast removal; with more, or no direction, the mask
    rule still claims it."""
    from dataclasses import replace

    issues = load_known_issues()
    base = Signature("nan", "ConvLSTM2D+activations.squareplus", (("activation", "'squareplus'"),),
                     ("onnxruntime", "tensorflow", "torch"), odd=("onnxruntime",), layer="ConvLSTM2D",
                     context=("masked", "policy:mixed_float16"))
    assert match_known(base, issues).id == "tf2onnx-select-mul-nan"
    assert match_known(replace(base, context=base.context + ("odd_more_nonfinite",)), issues).id == \
        "tf2onnx-select-mul-nan"
    fewer = replace(base, context=base.context + ("odd_fewer_nonfinite",))
    assert match_known(fewer, issues).id == "ort-fp16-cast-roundtrip-elided"
    float32 = replace(fewer, context=("masked", "odd_fewer_nonfinite"))
    hit = match_known(float32, issues)
    assert hit is None or hit.id != "tf2onnx-select-mul-nan"


def test_tensorflows_grappler_gelu_reorder_is_found_before_where_tensorflow_has_more_nan():
    """Bidirectional(LSTM(activation='gelu', recurrent_activation='linear')): TensorFlow's graph
    has 30 more NaN than torch and JAX, where o * gelu(c) is a signed zero (the api-cpu campaign,
    rng 2824; findings row 90).  TensorFlow with fewer NaN, or another activation, is not this."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("nan", "Bidirectional+LSTM+activations.gelu",
                    (("activation", "'gelu'"), ("recurrent_activation", "'linear'"), ("unroll", "True")),
                    ("jax", "tensorflow", "torch"), odd=("tensorflow",), layer="Bidirectional",
                    context=("odd_more_nonfinite",))
    hit = match_known(sig, issues)
    assert (hit.id, hit.status, hit.row) == ("tf-grappler-gelu-mul-overflow-nan", "found before", 90)
    gate = replace(sig, api="ConvLSTM1D+activations.gelu+activations.selu", layer="ConvLSTM1D",
                   params=(("activation", "'selu'"), ("recurrent_activation", "'gelu'")))
    assert match_known(gate, issues).id == "tf-grappler-gelu-mul-overflow-nan"  # o = gelu(z) times selu(c): rng 2869
    for other in (replace(sig, context=("odd_fewer_nonfinite",)), replace(sig, context=()),
                  replace(sig, params=(("activation", "'tanh'"),), api="Bidirectional+LSTM")):
        hit = match_known(other, issues)
        assert hit is None or hit.id != "tf-grappler-gelu-mul-overflow-nan", other


def test_a_seed_rnn_refusal_that_names_no_layer_is_known_by_the_layer_its_mutations_changed():
    """The lstm seed with mask_zero, go_backwards, unroll and a drawn recurrent_activation: torch
    raises "'tuple' object has no attribute 'shape'" (torch.flip of the unrolled outputs, findings
    row 25), in words that name no layer.  The activation is blamed (a string the seed never ran),
    but the layer it was drawn on is the LSTM, and the entry knows it by that (the api-cpu
    campaign, rng 2864)."""
    spec = {"name": "lstm", "layers": [
        {"name": "embedding", "api": "Embedding", "params": {"input_dim": 50, "output_dim": 8, "mask_zero": True},
         "inputs": ["x"]},
        {"name": "lstm", "api": "LSTM", "params": {"units": 16, "recurrent_activation": "hard_tanh",
                                                   "go_backwards": True, "unroll": True}, "inputs": ["embedding"]},
        {"name": "logits", "api": "Dense", "params": {"units": 3}, "inputs": ["lstm"]}]}
    muts = [{"layer": "embedding", "param": "mask_zero", "old": False, "new": True},
            {"layer": "lstm", "param": "recurrent_activation", "old": "sigmoid", "new": "hard_tanh"},
            {"layer": "lstm", "param": "go_backwards", "old": False, "new": True},
            {"layer": "lstm", "param": "unroll", "old": False, "new": True}]
    f = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {
        "accepted": ["tensorflow", "jax"],
        "errors": {"torch": {"phase": "run", "message": "AttributeError: 'tuple' object has no attribute 'shape'"}}})
    (sig,) = signatures_of(f, spec, {"mutations": muts})
    assert sig.api == "activations.hard_tanh" and sig.layer == "LSTM"
    hit = match_known(sig, load_known_issues())
    assert (hit.id, hit.status, hit.row) == ("keras-torch-rnn-backwards-unroll-mask", "found before", 25)


def test_a_converter_keeping_the_nan_its_reference_drops_is_the_references_known_bug():
    """Only TensorFlow and onnxruntime ran a max pooling of a NaN (torch and JAX refused the
    case): TensorFlow drops it, onnxruntime keeps it and is odd, judged against its reference,
    with more non-finite values.  Seen from TensorFlow, the entry's backend, that is TensorFlow
    with fewer: tf-maxpool-drops-nan, whose direction rule would otherwise refuse it (the
    api-cpu campaign, rng 2860, re-signed once every backend was counted)."""
    from dataclasses import replace

    from audee.triage.signature import Signature

    sig = Signature("nan", "MaxPooling2D", (), ("onnxruntime", "tensorflow"), odd=("onnxruntime",),
                    layer="MaxPooling2D", context=("nonfinite_input", "odd_more_nonfinite", "program:max_as_max_pool"))
    issues = load_known_issues()
    assert match_known(sig, issues).id == "tf-maxpool-drops-nan"
    # onnxruntime odd against independent frameworks too: its own MaxPool, which drops NaN, is not it
    four = replace(sig, backends=("jax", "onnxruntime", "tensorflow", "torch"))
    hit = match_known(four, issues)
    assert hit is None or hit.id not in ("tf-maxpool-drops-nan", "ort-maxpool-nan")


def test_of_several_layers_the_mutations_changed_the_one_the_traceback_runs_through_is_pinned():
    """The gru seed with its activations drawn on the GRU and on the Dense after it, go_backwards,
    unroll and a mask: torch's refusal names no layer, the suspect mutations changed two layers,
    and the traceback runs through keras/src/layers/rnn/gru.py, not dense.py: the GRU is pinned and
    findings row 25's entry knows it (the api-cpu campaign, rng 2876, announced new)."""
    spec = {"name": "gru", "layers": [
        {"name": "embedding", "api": "Embedding", "params": {"input_dim": 50, "output_dim": 3, "mask_zero": True},
         "inputs": ["x"]},
        {"name": "gru", "api": "GRU", "params": {"units": 16, "activation": "hard_silu", "recurrent_activation": "relu6",
                                                 "go_backwards": True, "unroll": True}, "inputs": ["embedding"]},
        {"name": "logits", "api": "Dense", "params": {"units": 3, "activation": "hard_tanh"}, "inputs": ["gru"]}]}
    muts = [{"layer": "embedding", "param": "mask_zero", "old": False, "new": True},
            {"layer": "gru", "param": "activation", "old": "tanh", "new": "hard_silu"},
            {"layer": "gru", "param": "recurrent_activation", "old": "sigmoid", "new": "relu6"},
            {"layer": "gru", "param": "go_backwards", "old": False, "new": True},
            {"layer": "gru", "param": "unroll", "old": False, "new": True},
            {"layer": "logits", "param": "activation", "old": "softmax", "new": "hard_tanh"}]
    frames = ["keras/src/models/functional.py", "keras/src/layers/rnn/gru.py", "keras/src/layers/rnn/rnn.py",
              "keras/src/backend/torch/rnn.py"]
    tb = "Traceback (most recent call last):\n" + "".join(f'  File "/v/site-packages/{f}", line 1, in call\n'
                                                           for f in frames)

    def sig(traceback: str | None):
        f = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {
            "accepted": ["tensorflow", "jax"],
            "errors": {"torch": {"phase": "run", "message": "AttributeError: 'tuple' object has no attribute 'shape'",
                                 "traceback": traceback}}})
        (s,) = signatures_of(f, spec, {"mutations": muts})
        return s

    pinned = sig(tb)
    assert pinned.layer == "GRU"
    hit = match_known(pinned, load_known_issues())
    assert (hit.id, hit.row) == ("keras-torch-rnn-backwards-unroll-mask", 25)
    assert sig(None).layer != "GRU"                     # without the traceback: two layers, no pin


def test_what_the_rng_2866_check_found_under_other_entries_is_known_by_its_own():
    """Two real bugs the hand check of the api-cpu campaign's rng 2866 found filed under other
    entries (findings rows 94 and 95): a bfloat16 adapter Dense whose oneDNN fused MatMul+BiasAdd
    gives NaN where the others hold -inf (no Relu: not the fused-relu entry), and a float16
    AveragePooling3D that only JAX and onnxruntime ran, JAX summing its windows in float16 (the
    oracle names no odd backend, and onnxruntime's float16 entry claimed it).  With onnxruntime
    named odd, and with a relu drawn, the older entries keep their cases."""
    issues = load_known_issues()

    def hit(sig: Signature) -> str | None:
        issue = match_known(sig, issues)
        return issue.id if issue else None

    three = ("jax", "tensorflow", "torch")
    dense = Signature("nan", "Dense", (), three, odd=("tensorflow",), layer="Dense", context=("policy:bfloat16",))
    assert hit(dense) == "tf-onednn-bf16-fused-matmul-inf-nan"
    relu = Signature("nan", "Dense+activations.relu", (("activation", "'relu'"),), three, odd=("tensorflow",),
                     layer="Dense", context=("policy:bfloat16",))
    assert hit(relu) == "tf-onednn-fused-relu-nan"
    pool = Signature("nan", "AveragePooling3D", (("padding", "'same'"),), ("jax", "onnxruntime"),
                     layer="AveragePooling3D", context=("policy:float16",))
    assert hit(pool) == "keras-jax-avg-pool-half-accum"
    ort = Signature("nan", "AveragePooling3D", (), ("jax", "onnxruntime", "tensorflow", "torch"),
                    odd=("onnxruntime",), layer="AveragePooling3D", context=("policy:float16",))
    assert hit(ort) == "ort-fp16-cast-roundtrip-elided"


def test_tensorflows_fused_relu_wants_tensorflow_named_odd_not_only_involved():
    """A bfloat16 1x1 Conv2D on one input channel: TensorFlow and torch (both oneDNN) put a NaN
    beside an Inf, JAX does not, and the oracle names no odd backend (the api-cpu campaign, rng
    2867, checked by hand: another bug).  The fused-relu entry, whose mechanism makes TensorFlow
    the odd one, does not claim it."""
    sig = Signature("nan", "Conv2D", (), ("jax", "tensorflow", "torch"), layer="Conv2D",
                    context=("policy:bfloat16",))
    hit = match_known(sig, load_known_issues())
    assert hit is None or hit.id != "tf-onednn-fused-relu-nan"


def test_onednns_bf16_conv1x1_on_one_channel_is_known_by_its_own_entry():
    """The api-cpu campaign, rng 2867 (api-SeparableConv2D-v00004, checked by hand): a bfloat16 1x1
    Conv2D on one input channel where TensorFlow and torch (both oneDNN) put a NaN beside an Inf and
    JAX does not; no odd backend.  Findings row 96; a float32 one is not it."""
    known = load_known_issues()
    for api in ("Conv2D", "SeparableConv2D", "DepthwiseConv2D", "Conv1D"):
        sig = Signature("nan", api, (), ("jax", "tensorflow", "torch"), layer=api, context=("policy:bfloat16",))
        hit = match_known(sig, known)
        assert hit is not None and hit.id == "onednn-bf16-conv1x1-one-channel-inf-nan", (api, hit)
    sig = Signature("nan", "Conv2D", (), ("jax", "tensorflow", "torch"), layer="Conv2D", context=("policy:float32",))
    hit = match_known(sig, known)
    assert hit is None or hit.id != "onednn-bf16-conv1x1-one-channel-inf-nan"


def test_onednns_strided_unit_width_convolution_is_found_before_where_tensorflow_or_torch_is_odd():
    """oneDNN's float32 BRGEMM convolution is wrong where the innermost output dimension is 1 after
    a stride (findings row 107; the api-cpu campaign, rng 2930: a ConvLSTM3D, TensorFlow and torch
    against JAX and onnxruntime): TensorFlow's Conv3D, and torch's convolutions of a one-channel
    channels-last input, which Keras' torch backend makes.  JAX odd is not this."""
    from dataclasses import replace

    known = load_known_issues()
    sig = Signature("deviation", "ConvLSTM3D", (("strides", "+int"),), ("jax", "onnxruntime", "tensorflow", "torch"),
                    odd=("tensorflow",), layer="ConvLSTM3D", context=())
    hit = match_known(sig, known)
    assert hit is not None and hit.id == "tf-onednn-conv3d-strided-unit-width" and hit.klass == "bug", hit
    hit = match_known(replace(sig, odd=("torch",)), known)  # the same kernel under torch's channels-last conv
    assert hit is not None and hit.id == "tf-onednn-conv3d-strided-unit-width", hit
    hit = match_known(replace(sig, odd=("jax",)), known)
    assert hit is None or hit.id != "tf-onednn-conv3d-strided-unit-width", hit
    for odd in ("tensorflow", "torch"):  # rng 2937's DepthwiseConv2D, strides (1, 2), one input channel
        hit = match_known(replace(sig, api="DepthwiseConv2D", layer="DepthwiseConv2D", odd=(odd,)), known)
        assert hit is not None and hit.id == "tf-onednn-conv3d-strided-unit-width", (odd, hit)


def test_onnxruntimes_multi_axis_reduce_mean_is_known_upstream_for_a_float32_group_normalization():
    """onnxruntime's ReduceMean over axes [1, 2, 4] sums sequentially (the api-cpu campaign, rng
    2929: a GroupNormalization of values near 18647, onnxruntime 0.30 off the float64 result);
    onnxruntime#28450.  TensorFlow odd, or a float16 layer (onnxruntime's float16 entry), is not this."""
    from dataclasses import replace

    known = load_known_issues()
    sig = Signature("deviation", "GroupNormalization", (("groups", "+int"),), ("onnxruntime", "tensorflow"),
                    odd=("onnxruntime",), layer="GroupNormalization", context=())
    hit = match_known(sig, known)
    assert hit is not None and hit.id == "ort-cpu-multi-axis-reduce-sequential-sum" and hit.klass == "bug", hit
    for other in (replace(sig, odd=("tensorflow",)), replace(sig, context=("policy:float16",))):
        hit = match_known(other, known)
        assert hit is None or hit.id != "ort-cpu-multi-axis-reduce-sequential-sum", (other, hit)


def test_torchs_bfloat16_kernel3_convolution_on_one_channel_is_row_96_where_torch_alone_has_more():
    """oneDNN's jit_bf16:avx512_core direct convolution pads one input channel to a pair on a CPU
    without avx512_bf16: torch alone NaN beside a +inf (the api-cpu campaign, rng 2923, a Conv1D
    filed undefined for the input's +inf; row 96's mechanism).  torch with fewer non-finite values,
    another backend odd, or float32 is not this."""
    from dataclasses import replace

    known = load_known_issues()
    sig = Signature("nan", "Conv1D+activations.log_softmax", (), ("jax", "tensorflow", "torch"), odd=("torch",),
                    layer="Conv1D", context=("nonfinite_input", "odd_more_nonfinite", "policy:bfloat16"))
    hit = match_known(sig, known)
    assert hit is not None and hit.id == "onednn-bf16-conv1x1-one-channel-inf-nan" and hit.klass == "bug", hit
    for other in (replace(sig, context=("nonfinite_input", "odd_fewer_nonfinite", "policy:bfloat16")),
                  replace(sig, odd=("jax",)), replace(sig, context=("nonfinite_input", "odd_more_nonfinite"))):
        hit = match_known(other, known)
        assert hit is None or hit.id != "onednn-bf16-conv1x1-one-channel-inf-nan", (other, hit)


def test_tensorflows_float16_average_pooling_is_found_before_where_tensorflow_is_odd():
    """TensorFlow's CPU float16 AvgPool sums the window in float16 (findings row 97, the api-cpu
    campaign, rng 2870): TensorFlow odd on a float16 AveragePooling1D is that entry's; JAX odd is
    JAX's twin (row 95); a float32 case is neither."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("nan", "AveragePooling1D", (("pool_size", "+int"),), ("jax", "onnxruntime", "tensorflow", "torch"),
                    odd=("tensorflow",), layer="AveragePooling1D", context=("policy:mixed_float16",))
    assert match_known(sig, issues).id == "tf-cpu-avg-pool-half-accum"
    assert match_known(replace(sig, odd=("jax",)), issues).id == "keras-jax-avg-pool-half-accum"
    hit = match_known(replace(sig, context=()), issues)
    assert hit is None or hit.id not in ("tf-cpu-avg-pool-half-accum", "keras-jax-avg-pool-half-accum")


def test_torchs_exact_gelu_tail_is_known_upstream_where_torch_alone_differs():
    """An LSTM with recurrent_activation gelu whose cell state grows: torch's 1 + erf cancels
    in the gates' negative tail (the api-cpu campaign, rng 2886; pytorch/pytorch#187806).
    Another backend odd, or no gelu, is not this."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("deviation", "LSTM+activations.gelu+activations.sigmoid",
                    (("activation", "'sigmoid'"), ("recurrent_activation", "'gelu'"), ("unroll", "True")),
                    ("tensorflow", "torch"), odd=("torch",), layer="LSTM")
    hit = match_known(sig, issues)
    assert (hit.id, hit.status) == ("torch-gelu-erf-tail-cancellation", "known upstream")
    dense = replace(sig, api="Dense+activations.gelu", layer="Dense", params=(("activation", "'gelu'"),))
    assert match_known(dense, issues).id == "torch-gelu-erf-tail-cancellation"
    for other in (replace(sig, odd=("tensorflow",)),
                  replace(sig, params=(("activation", "'sigmoid'"), ("recurrent_activation", "'tanh'")))):
        hit = match_known(other, issues)
        assert hit is None or hit.id != "torch-gelu-erf-tail-cancellation", other


def test_torchs_onednn_gelu_inf_is_known_upstream_where_torch_alone_has_more_nonfinite():
    """Activation('gelu') on a row with +Inf or a value above FLT_MAX / 2: torch's oneDNN exact
    GELU gives NaN / Inf where TensorFlow and JAX give Inf / x (pytorch/pytorch#185770).  Another
    backend odd, torch with fewer non-finite values, float16 (no oneDNN path) or another
    activation is not this."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("nan", "Activation+activations.gelu", (("activation", "'gelu'"),),
                    ("jax", "tensorflow", "torch"), odd=("torch",), layer="Activation",
                    context=("odd_more_nonfinite",))
    hit = match_known(sig, issues)
    assert (hit.id, hit.status) == ("torch-onednn-gelu-inf-nan", "known upstream")
    bf16 = replace(sig, context=("odd_more_nonfinite", "policy:bfloat16"))
    assert match_known(bf16, issues).id == "torch-onednn-gelu-inf-nan"
    lstm = replace(sig, api="LSTM+activations.gelu+activations.tanh", layer="LSTM",
                   params=(("activation", "'tanh'"), ("recurrent_activation", "'gelu'")))
    assert match_known(lstm, issues).id == "torch-onednn-gelu-inf-nan"
    for other in (replace(sig, odd=("tensorflow",)), replace(sig, context=("odd_fewer_nonfinite",)),
                  replace(sig, context=("odd_more_nonfinite", "policy:float16")),
                  replace(sig, api="Activation+activations.silu", params=(("activation", "'silu'"),))):
        hit = match_known(other, issues)
        assert hit is None or hit.id != "torch-onednn-gelu-inf-nan", other


def test_a_float16_division_by_an_overflowing_reciprocal_is_found_before_by_its_direction():
    """Normalization under float16 with a tiny variance: XLA (JAX) and grappler's folding (the graph
    onnxruntime runs) divide by multiplying with 1 / sqrt(var), which overflows (the api-cpu
    campaign, rng 2893's hand check: two against two, filed under onnxruntime's float16 entry,
    whose mechanism is onnxruntime having fewer non-finite values, not more)."""
    from dataclasses import replace

    issues = load_known_issues()
    both = Signature("nan", "Normalization", (("dtype", "'float16'"),), ("jax", "onnxruntime", "tensorflow", "torch"),
                     layer="Normalization", context=("policy:float16",))
    assert match_known(both, issues).id == "xla-cpu-div-broadcast-reciprocal-fp16"
    jax = replace(both, odd=("jax",), context=("policy:float16", "odd_more_nonfinite"))
    assert match_known(jax, issues).id == "xla-cpu-div-broadcast-reciprocal-fp16"
    ort = replace(both, odd=("onnxruntime",), context=("policy:float16", "odd_more_nonfinite"))
    assert (match_known(ort, issues).id, match_known(ort, issues).row) == ("tf-grappler-div-const-reciprocal-fp16", 104)
    kept = replace(ort, context=("policy:float16", "odd_fewer_nonfinite"))  # a float16 overflow kept finite
    assert match_known(kept, issues).id == "ort-fp16-cast-roundtrip-elided"


def test_tensorflows_fused_mish_tail_is_a_limitation_found_before():
    """Findings row 105: TensorFlow's graphs run mish as oneDNN's fused op, which loses its negative
    tail (absolute error under 7.4e-7); an LSTM with mish gates amplifies it (the api-cpu
    campaign, rng 2905).  TensorFlow among the pair where no side is named, onnxruntime judged
    against it, or TensorFlow odd: the entry; another activation or TensorFlow not in the pair:
    not it."""
    from dataclasses import replace

    from audee.triage.rootcause import classify

    issues = load_known_issues()
    params = (("activation", "'softsign'"), ("go_backwards", "True"), ("recurrent_activation", "'mish'"))
    sig = Signature("deviation", "LSTM+activations.mish+activations.softsign", params,
                    ("jax", "tensorflow", "torch"), layer="LSTM")
    hit = match_known(sig, issues)
    assert (hit.id, hit.status, hit.row) == ("tf-onednn-fused-mish-negative-tail", "found before", 105)
    assert classify(sig, hit)[0] == "limitation"
    assert match_known(replace(sig, kind="inconsistency", backends=("jax", "tensorflow")), issues).id == hit.id
    assert match_known(replace(sig, backends=("jax", "torch")), issues) is None
    sigmoid = tuple((k, "'sigmoid'") if k == "recurrent_activation" else (k, v) for k, v in params)
    assert match_known(replace(sig, params=sigmoid), issues) is None


def test_a_stale_reshape_after_a_square_refused_by_a_later_node_is_the_transpose_optimizers_bug():
    """tf2onnx's transpose optimizer moved a Transpose below a square and made it a Reshape of
    a stale shape (findings row 98); a Dot(normalize=True) takes the result into its MatMul,
    which onnxruntime refuses at run ("left operand cannot broadcast", the api-cpu campaign,
    rng 2908).  The converted graph's fact names the mechanism whichever node trips; the same
    refusal without it is not claimed."""
    from dataclasses import replace

    from audee.triage.signature import Signature

    error = ("Fail: [ONNXRuntimeError] : <n> : FAIL : Non-zero status code returned while running MatMul node. "
             "Name:<name> Status Message: matmul_helper.<name> Compute left operand cannot broadcast on dim <n>")
    sig = Signature("divergent_acceptance", "Dot", (("axes", "[+int, +int]"), ("normalize", "True")),
                    ("onnxruntime",), phase="run", error=error, layer="Dot", op="MatMul", component="onnxruntime",
                    error_full=error, context=("policy:float16", "program:transpose_reshaped_after_square"))
    issues = load_known_issues()
    hit = match_known(sig, issues)
    assert (hit.id, hit.row) == ("tf2onnx-transpose-square-stale-shape", 98)
    other = match_known(replace(sig, context=("policy:float16",)), issues)
    assert other is None or other.id != "tf2onnx-transpose-square-stale-shape"


def test_a_stale_reshape_after_a_square_that_broadcasts_silently_is_the_same_bug():
    """Not refused: the stale shape broadcasts and onnxruntime, odd, computes another tensor
    (UnitNormalization after a Permute, the api-cpu campaign rng 2909); the converted graph's
    fact makes it findings row 98, as the refusals are."""
    from dataclasses import replace

    from audee.triage.signature import Signature

    sig = Signature("inconsistency", "UnitNormalization", (("axis", "+int"),), ("onnxruntime", "tensorflow"),
                    odd=("onnxruntime",), layer="UnitNormalization",
                    context=("program:transpose_reshaped_after_square",))
    issues = load_known_issues()
    assert match_known(sig, issues).id == "tf2onnx-transpose-square-stale-shape"
    for other in (replace(sig, context=()), replace(sig, odd=("tensorflow",))):
        hit = match_known(other, issues)
        assert hit is None or hit.id != "tf2onnx-transpose-square-stale-shape"


def test_a_max_dropping_the_nan_of_its_window_is_a_bug_on_a_nan_input():
    """TensorFlow's max pooling (and its adaptive one), onnxruntime's MaxPool and ReduceMax give a
    finite value for a window holding the input's NaN: the NaN a max should return is the
    input's, so the NaN input does not make the answer undefined (as JAX's YNNPACK max,
    findings row 91).  Without the entries' class the input rule filed these known bugs as
    undefined (the audit of rngs 2908-2912's undefined roots)."""
    from audee.triage.rootcause import classify

    issues = load_known_issues()
    four = ("jax", "onnxruntime", "tensorflow", "torch")
    for api, odd, extra, want in (
            ("MaxPooling2D", "tensorflow", (), "tf-maxpool-drops-nan"),
            ("AdaptiveMaxPooling2D", "tensorflow", (), "tf-adaptive-maxpool-drops-nan"),
            ("MaxPooling3D", "onnxruntime", ("program:max_as_max_pool",), "ort-maxpool-nan"),
            ("GlobalMaxPooling2D", "onnxruntime", ("program:max_as_reduce_max",), "ort-reducemax-nan")):
        sig = Signature("nan", api, (), four, odd=(odd,), layer=api,
                        context=("nonfinite_input", "odd_fewer_nonfinite", *extra))
        issue = match_known(sig, issues)
        assert issue is not None and issue.id == want, (api, issue)
        assert classify(sig, issue)[0] == "bug", (api, classify(sig, issue))


def test_grapplers_gelu_nan_hidden_by_a_shrink_activation_is_the_same_bug():
    """TensorFlow's graph makes the cell state of a gelu-gated recurrent layer NaN (findings
    row 90); a hard_shrink output activation maps the NaN to 0, so TensorFlow is odd with
    fewer non-finite values (the api-cpu campaign rng 2909, once a NaN in another input row
    no longer cleared it).  Another activation, or TensorFlow with more, is the other rule's."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("nan", "ConvLSTM1D", (("activation", "'hard_shrink'"), ("recurrent_activation", "'gelu'")),
                    ("jax", "tensorflow", "torch"), odd=("tensorflow",), layer="ConvLSTM1D",
                    context=("odd_fewer_nonfinite",))
    assert match_known(sig, issues).id == "tf-grappler-gelu-mul-overflow-nan"
    other = match_known(replace(sig, params=(("activation", "'tanh'"), ("recurrent_activation", "'gelu'"))), issues)
    assert other is None or other.id != "tf-grappler-gelu-mul-overflow-nan"


def test_tensorflows_float16_einsum_overflowing_its_running_sum_is_found_before():
    """A float16 MultiHeadAttention NaN on TensorFlow alone, with more non-finite values: its
    Einsum sums half products in half (findings row 106, the api-cpu campaign rng 2915).  In
    float32, or with TensorFlow fewer, or another backend odd, it is not this bug."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("nan", "MultiHeadAttention", (), ("jax", "onnxruntime", "tensorflow", "torch"),
                    odd=("tensorflow",), layer="MultiHeadAttention", context=("odd_more_nonfinite", "policy:float16"))
    hit = match_known(sig, issues)
    assert (hit.id, hit.row, hit.klass) == ("tf-cpu-einsum-half-accum", 106, "bug")
    for other in (replace(sig, context=("odd_more_nonfinite",)), replace(sig, context=("odd_fewer_nonfinite", "policy:float16")),
                  replace(sig, odd=("torch",))):
        got = match_known(other, issues)
        assert got is None or got.id != "tf-cpu-einsum-half-accum", other


def test_a_converted_resize_of_another_shape_is_the_baked_reshape_s_silent_face():
    """tf2onnx's Resize with float32 scales and a Reshape baked from ONNX's inferred size (row 93)
    fails at run, or silently gives another shape: CenterCrop(9, 16) of a (16, 9, 1) image,
    TensorFlow (8, 9, 16, 1), onnxruntime (9, 8, 16, 1) (the api-cpu campaign, rng 2940).  An
    inconsistency of equal shapes is not this."""
    from audee.triage.signature import SHAPE_MISMATCH, signatures_of

    known = load_known_issues()
    spec = {"layers": [{"name": "t", "api": "CenterCrop", "params": {"height": 9, "width": 16}}]}

    def sig(shapes: dict | None):
        f = Finding(Kind.INCONSISTENCY, ["onnxruntime", "tensorflow"], {
            "pair": "tensorflow|onnxruntime", "odd": ["onnxruntime"], "shape_mismatch": shapes, "inputs": [0]})
        (s,) = signatures_of(f, spec, {"api": "CenterCrop"})
        return s
    mismatch = sig({"tensorflow": [8, 9, 16, 1], "onnxruntime": [9, 8, 16, 1]})
    assert SHAPE_MISMATCH in mismatch.context
    hit = match_known(mismatch, known)
    assert hit is not None and hit.id == "tf2onnx-resize-scales-reshape", hit
    hit = match_known(sig(None), known)
    assert hit is None or hit.id != "tf2onnx-resize-scales-reshape", hit


def test_a_cpu_kernels_bug_does_not_claim_the_same_layer_on_a_gpu():
    """oneDNN's fused bias + relu turning NaN into 0 is a CPU kernel's (``device: cpu``):
    TensorFlow odd on ``tensorflow@cuda`` ran cuDNN and is not that bug, and stays new; the
    CPU face, and a GPU run beside TensorFlow on the CPU, are still it."""
    from dataclasses import replace

    issues = load_known_issues()
    cpu = Signature("nan", "Dense", (("activation", "'relu'"),), ("jax", "tensorflow", "torch"), odd=("tensorflow",),
                    layer="Dense", context=(ODD_FEWER_NONFINITE,))
    assert match_known(cpu, issues).id == "tf-onednn-fused-relu-nan"
    gpu = replace(cpu, backends=("jax@cuda", "tensorflow@cuda", "torch@cuda"), odd=("tensorflow@cuda",))
    hit = match_known(gpu, issues)
    assert hit is None or hit.id != "tf-onednn-fused-relu-nan", hit
    beside = replace(cpu, backends=("jax@cuda", "tensorflow", "torch@cuda"), odd=("tensorflow",))
    assert match_known(beside, issues).id == "tf-onednn-fused-relu-nan"
    entry = next(i for i in issues if i.id == "tf-onednn-fused-relu-nan")
    assert entry.device == "cpu" and next(i for i in issues if i.id == "keras-jax-convlstm-mask").device is None


def test_a_known_bug_seen_on_a_gpu_is_the_known_bug():
    """An entry names frameworks (``jax``); a run on a GPU names placements (``jax@cuda``,
    ``torch@cuda:0:tf32``).  JAX's ConvLSTM mask bug seen on ``jax@cuda`` beside
    ``torch@cpu`` is row 52, not a new bug (an H200 campaign announced it as new).  An
    environment stays part of the name: ``jax@prev`` runs another release, which an
    entry about this one does not describe."""
    from dataclasses import replace

    issues = load_known_issues()
    params = (("activation", "'silu'"), ("call.mask", "'t_convlstm2d_mask'"), ("data_format", "'channels_first'"),
              ("padding", "'valid'"), ("recurrent_activation", "'hard_shrink'"))
    cpu = Signature("deviation", "ConvLSTM2D+activations.hard_shrink+activations.silu", params, ("jax", "tensorflow"),
                    odd=("jax",), layer="ConvLSTM2D")
    assert match_known(cpu, issues).id == "keras-jax-convlstm-mask"
    for jax, other in (("jax@cuda", "torch"), ("jax@cuda:0:tf32", "torch@cuda"), ("jax@cuda:1", "tensorflow@cuda:1")):
        gpu = replace(cpu, backends=tuple(sorted((jax, other))), odd=(jax,))
        assert match_known(gpu, issues).id == "keras-jax-convlstm-mask", gpu
    for other in (replace(cpu, backends=("jax@cuda", "torch@cuda"), odd=("torch@cuda",)),  # torch's difference
                  replace(cpu, backends=("jax", "jax@prev"), odd=("jax@prev",))):             # another release
        hit = match_known(other, issues)
        assert hit is None or hit.id != "keras-jax-convlstm-mask", other


def test_onnxruntimes_elided_cast_seen_by_the_axis_rule_is_known():
    """A float16 Softmax(axis=1) fed values near 4025 on onnxruntime: the Cast pair before a node
    without a float16 kernel is elided in the original graph, not in its equivalent (a Transpose
    between them), so the axis rule sees the two apart on onnxruntime alone (a hand check of the
    axis rule under api-cpu's dtypes); a float32 case's is not that entry's."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("equivalence", "Softmax", (("rule", "axis"),), ("onnxruntime",), odd=("onnxruntime",),
                    layer="Softmax", context=("equivalence:values", "policy:float16"))
    assert match_known(sig, issues).id == "ort-fp16-cast-roundtrip-elided"
    assert match_known(replace(sig, context=("equivalence:values",)), issues) is None
    # every backend failing the rule alike (none odd) is the layer's own bug there (rng 2987: a float16
    # LayerNormalization(axis=[1, -1]) on onnxruntime), not the elided cast
    norm = Signature("equivalence", "LayerNormalization", (("axis", "[+int, -int]"), ("rule", "axis")),
                     ("onnxruntime",), layer="LayerNormalization", context=("equivalence:values", "policy:float16"))
    assert match_known(norm, issues).id == "keras-layernorm-mixed-sign-axes"


def test_a_carry_refused_by_lax_scan_is_the_gru_entrys_under_a_mixed_policy_only():
    """JAX's GRU without a bias under a mixed policy makes a float32 carry lax.scan refuses
    (findings row 100); in float32 the same words come from a carry of another shape (a glu
    activation halving a SimpleRNN's state inside Bidirectional, an invalid value: rng 2987)."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("divergent_acceptance", "Bidirectional", (), ("jax",), "run",
                    "TypeError: scan body function carry input and carry output must have equal types",
                    layer="Bidirectional", context=("policy:mixed_float16",))
    assert match_known(sig, issues).id == "keras-jax-gru-nobias-mixed-precision"
    hit = match_known(replace(sig, context=("invalid:activation",)), issues)
    assert hit is None or hit.id != "keras-jax-gru-nobias-mixed-precision"


def test_onnxruntimes_sigmoid_tail_and_its_linear_resize_of_infinities_are_known_upstream():
    """Rng 3016's two announced roots, checked by hand: a swish-gated LSTM finite on
    onnxruntime where its exploding state is +inf elsewhere (its Sigmoid's lost tail, known
    upstream, a bug) and a CenterCrop resizing a row of infinities to Inf where the others give
    NaN (undefined: no formula's answer is the right one).  Neither claims a float16 face or a
    resize that spreads NaN (row 108's)."""
    issues = load_known_issues()
    four = ("jax", "onnxruntime", "tensorflow", "torch")
    lstm = Signature("nan", "LSTM+activations.relu+activations.swish", (("recurrent_activation", "'swish'"),), four,
                     odd=("onnxruntime",), layer="LSTM", context=("odd_fewer_nonfinite",))
    crop = Signature("nan", "CenterCrop", (("height", "+int"), ("width", "+int")), four,
                     odd=("onnxruntime",), layer="CenterCrop", context=("nonfinite_input",))
    assert (match_known(lstm, issues).id, match_known(lstm, issues).klass) == ("ort-sigmoid-negative-tail", "bug")
    assert (match_known(crop, issues).id, match_known(crop, issues).klass) == \
        ("ort-resize-linear-inf-weighted-sum", "undefined")
    from dataclasses import replace

    half = replace(lstm, context=("odd_fewer_nonfinite", "policy:float16"))
    assert getattr(match_known(half, issues), "id", None) != "ort-sigmoid-negative-tail"
    # onnxruntime with more non-finite values is no lost tail (that gives 0 where others overflow):
    # rng 3023's ConvLSTM3D, onnxruntime's right +inf named odd against TensorFlow's graph, whose
    # fused mish gate (-0 in its negative tail) times an overflowing cell state gave 0
    conv = Signature("nan", "ConvLSTM3D+activations.mish+activations.swish",
                     (("activation", "'swish'"), ("recurrent_activation", "'mish'")), four, odd=("onnxruntime",),
                     layer="ConvLSTM3D", context=("odd_more_nonfinite", "judged_only"))
    assert match_known(conv, issues).id == "tf-onednn-fused-mish-negative-tail"
    # without the oracle's word that onnxruntime was judged against TensorFlow alone, torch and JAX
    # took a side: not TensorFlow's fault, and not the lost tail either
    hit = match_known(replace(conv, context=("odd_more_nonfinite",)), issues)
    assert getattr(hit, "id", None) not in ("tf-onednn-fused-mish-negative-tail", "ort-sigmoid-negative-tail")
    spread = Signature("nan", "UpSampling2D", (("interpolation", "'bilinear'"),), four, odd=("onnxruntime",),
                       layer="UpSampling2D", context=("nonfinite_input", "odd_more_nonfinite"))
    assert match_known(spread, issues).id == "ort-resize-linear-nan-neighbor"


def test_torchs_uneven_same_padding_keeps_a_float32_overflow_in_average_pooling_standing():
    """Rng 3017's announced root: a float32 AveragePooling3D(3, 2, same) of near-maximal values
    beside an Inf, torch +inf where the others give -inf.  The overflow's order would be cleared
    where the backends compute one thing; torch's replicated edge (fixed in Keras 3.16) averages
    another window, so it stands: that fault's NaN face, not a new bug; a float16 one is not it."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("nan", "AveragePooling3D", (("padding", "'same'"), ("pool_size", "+int")),
                    ("jax", "onnxruntime", "tensorflow", "torch"), odd=("torch",), layer="AveragePooling3D",
                    context=("nonfinite_input",))
    hit = match_known(sig, issues)
    assert (hit.id, hit.status) == ("keras-torch-avg-pool-same-uneven-padding", "fixed upstream")
    half = replace(sig, context=("nonfinite_input", "policy:float16"))
    assert getattr(match_known(half, issues), "id", None) != "keras-torch-avg-pool-same-uneven-padding"


def test_tensorflows_half_conv3d_samples_from_offset_one_as_its_eigen_kernel_does():
    """Rng 3021's announced root: a mixed_float16 Conv3D(15, 1, strides 3, same), TensorFlow 29
    off the others, is row 29's Eigen fault (float16 [1, 4] where float32 gives [0, 3]); a
    float32 deviation of the same layer is not it (oneDNN computes float32 right)."""
    from dataclasses import replace

    issues = load_known_issues()
    sig = Signature("deviation", "Conv3D", (("padding", "'same'"), ("strides", "+int")),
                    ("jax", "onnxruntime", "tensorflow", "torch"), odd=("tensorflow",), layer="Conv3D",
                    context=("policy:mixed_float16",))
    assert match_known(sig, issues).id == "tf-conv3d-same-negative-padding"
    assert getattr(match_known(replace(sig, context=()), issues), "id", None) != "tf-conv3d-same-negative-padding"
