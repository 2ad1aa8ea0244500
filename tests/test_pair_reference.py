"""Each pair judged against its reference (audee.oracle.pairs): a compiled mode or a
converter of a framework is the odd side of a pair with it, and a difference on NaN/Inf
inputs is its bug; between independent frameworks today's rules hold (docs/oracles.md,
"Pairs and their references").

The end-to-end tests run a one-Dense-layer model with a NaN in one row on TensorFlow and on
TensorFlow-based plugins (tests/plugins.py) whose layer maps NaN to a finite value.
"""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Kind

MODE = "tests.plugins:NanZeroTfMode"
CONVERTER = "tests.plugins:NanFiniteTfConverter"
INDEPENDENT = "tests.plugins:NanZeroTfIndependent"


# ---- the rule, no framework ----------------------------------------------------------------------
def test_each_mode_and_converter_names_its_reference_on_its_placement():
    from audee.backends.info import reference_of
    from audee.oracle.pairs import judged_against, judged_side

    assert reference_of("tensorflow-xla@cuda") == "tensorflow@cuda"
    assert [reference_of(n) for n in ("tensorflow-eager", "tensorflow-noonednn", "onnxruntime", "onnxruntime-fed",
                                      "openvino", "litert")] == ["tensorflow"] * 6
    assert reference_of("torch-compile") == reference_of("torch-onnx") == "torch"
    assert reference_of("jax") == "jax-eager"  # jax.jit compiles the program written op by op
    assert [reference_of(n) for n in ("tensorflow", "torch", "jax-eager", "jax-x64")] == [None] * 4
    assert judged_against("onnxruntime", "tensorflow") == "tensorflow"
    assert judged_side("tensorflow@cuda", "tensorflow-xla@cuda") == "tensorflow-xla@cuda"
    assert judged_against("tensorflow", "torch") is None
    assert judged_against("tensorflow", "tensorflow-xla@cuda") is None  # another placement: another program run
    from audee.backends.info import note_plugin_reference
    from tests.plugins import NanZeroTfIndependent, NanZeroTfMode

    # a plugin's reference is what its worker declares at start (the pool notes it), never an import
    note_plugin_reference(MODE, NanZeroTfMode.reference)
    note_plugin_reference(INDEPENDENT, getattr(NanZeroTfIndependent, "reference", None))
    assert reference_of(MODE) == "tensorflow" and reference_of(INDEPENDENT) is None


def test_a_pair_root_of_a_backend_and_its_reference_folds_into_the_judged_side():
    from audee.triage.rootcause import _pair_target
    from audee.triage import NumericRoot

    pair = NumericRoot("nan", (), "Dense", ("litert", "tensorflow"), "from NaN/Inf input")
    assert str(_pair_target(pair, {pair: []})) == str(pair.with_odd("litert"))
    independent = NumericRoot("nan", (), "Dense", ("tensorflow", "torch"), "from NaN/Inf input")
    assert _pair_target(independent, {independent: []}) is None


# ---- on real TensorFlow workers ------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends(f"tensorflow,{MODE},{CONVERTER},{INDEPENDENT}"), tmp_path_factory.mktemp("logs"),
              timeout=180) as p:
        assert p.start() == {}
        yield p


def _judged(pool, other: str):
    """The one-Dense model on 3 rows, a NaN in row 0, on ``tensorflow`` and ``other``: its NaN
    finding, its signatures and their classes."""
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.triage.rootcause import classify, root_key
    from audee.triage.signature import case_signatures
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "one-dense", "inputs": [{"name": "x", "shape": [4], "range": [0, 1]}],
        "layers": [{"name": "d", "api": "Dense", "params": {"units": 3}, "inputs": ["x"]}],
        "output": "d", "logits": "d"})
    x = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    x[0, 1] = np.nan
    case = TestCase("nan-pair", spec, {}, {"x": x})

    class Only:  # the module's pool seen as a pool of two of its backends
        def __getattr__(self, name):
            return getattr(pool, name)

        @property
        def labels(self):  # the backends it stands for: an executor builds on these
            return ["tensorflow", other]

        def build(self, spec, labels=None):
            return pool.build(spec, labels or ["tensorflow", other])

        def run(self, *args, labels=None, **kwargs):
            return pool.run(*args, labels=labels or ["tensorflow", other], **kwargs)

        def submit_run(self, *args, labels=None, **kwargs):
            return pool.submit_run(*args, labels=labels or ["tensorflow", other], **kwargs)

        @property
        def precisions(self):
            return {k: v for k, v in pool.precisions.items() if k in ("tensorflow", other)}

    ex = Executor(Only())
    ex.complete_weights(case, weight_seed=0)
    result = ex.run(case)
    assert np.isnan(result.outcomes["tensorflow"].output[0]).all() and np.isfinite(result.outcomes[other].output).all()
    (f,) = [f for f in result.verdict.findings if f.kind == Kind.NAN]
    sigs = [s for s in case_signatures(result.verdict, spec, {}) if s.kind == Kind.NAN]
    return f, [(s, classify(s)[0], root_key(s)) for s in sigs]


@pytest.mark.parametrize("other", [MODE, CONVERTER])
def test_a_mode_or_converter_mapping_nan_to_a_finite_value_is_its_bug(pool, other):
    f, judged = _judged(pool, other)
    assert f.detail.input_nonfinite and f.detail.odd == [other]
    assert f.detail.odd_rule == "judged against its reference tensorflow"
    assert judged and all(k == "bug" and s.odd == (other,) and "?" not in key for s, k, key in judged), judged


def test_independent_frameworks_differing_on_a_nan_input_stay_undefined(pool):
    f, judged = _judged(pool, INDEPENDENT)
    assert f.detail.input_nonfinite and f.detail.odd == [] and f.detail.odd_rule == "two backends: cannot tell"
    assert judged and all(k == "undefined" and s.odd == () for s, k, _ in judged), judged


def test_a_plugin_label_read_from_a_file_imports_nothing():
    """Judging reads a plugin's reference only from a module already loaded: a label in a row
    or a case file (``module:Class``) never makes the judge import that module."""
    import sys

    from audee.backends.info import reference_of

    assert "audee_no_such_plugin_mod" not in sys.modules
    assert reference_of("audee_no_such_plugin_mod:Backend") is None
    assert "audee_no_such_plugin_mod" not in sys.modules
