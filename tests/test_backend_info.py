"""One description per backend (audee.backends.info): every built-in backend is described
completely and as its class runs, a plugin gets the defaults, and the modules that judge,
report and script read a backend's facts from the description instead of naming it.

Pure Python: the backend classes are imported (their modules import no framework at the
top), never run."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from audee.backends.info import (BUILTIN_INFO, BackendInfo, all_op_names, all_unsupported, describe,
                                 keras_frameworks, trackers_of)
from audee.backends.registry import BUILTIN, load_class
from audee.report.bugreports import VERSION_KEYS, search_queries, trackers
from audee.triage.rootcause import _flushing
from audee.triage.signature import explicit_refusal
from audee.triage.signature import component_of, op_of
from audee.triage import CrashRoot, RootCause

PACKAGE = Path(__file__).resolve().parents[1] / "audee"
PLUGIN = "tests.plugins:RaisingBackend"


@pytest.mark.parametrize("name", list(BUILTIN_INFO))
def test_every_builtin_backend_is_described_completely(name):
    info = BUILTIN_INFO[name]
    cls = load_class(info.target)
    assert info.name == name == cls.name and info.builtin
    assert info.label and info.blamed == name
    assert info.trackers and all(re.fullmatch(r"[\w.-]+/[\w.-]+", t) for t in info.trackers)
    assert info.version_keys and info.packages and info.unsupported and info.op_names
    assert info.keras_backend in keras_frameworks()
    # its capabilities as its class declares them (the pool reads the class's in the worker)
    assert info.models and (info.trains, info.runs_ops) == (cls.trains, cls.runs_ops)
    for p in info.unsupported:
        re.compile(p)
    for o in info.op_names:
        assert re.compile(o.pattern).groups == 1, o
    if info.converter is not None:
        assert info.converter_trackers and trackers_of(info.converter) == info.converter_trackers
    for words in (info.runtime_errors, info.error_words, *(pattern for _, pattern in info.graph_faults)):
        if words is not None:
            re.compile(words)


def test_the_registry_and_the_shared_facts_come_from_the_descriptions():
    assert BUILTIN == {n: i.target for n, i in BUILTIN_INFO.items()}
    assert keras_frameworks() == ("tensorflow", "torch", "jax")
    # TensorFlow's and JAX's CPU kernels flush subnormals, torch's do not; every mode of a
    # framework as the framework (a rule, not a list: a new mode leaves this test as it is)
    flushing = {n for n, i in BUILTIN_INFO.items() if i.flushes_subnormals}
    assert flushing == {n for n in BUILTIN_INFO if n.partition("-")[0] in ("tensorflow", "jax")}
    assert "tensorflow-xla" in flushing and "jax-x64" in flushing and not {"torch", "onnxruntime"} & flushing
    assert {n: i.keras_backend for n, i in BUILTIN_INFO.items() if i.keras_backend != n.partition("-")[0]} == {
        "onnxruntime": "tensorflow", "onnxruntime-fed": "tensorflow", "openvino": "tensorflow",
        "litert": "tensorflow"}
    # one rank per pattern: the order op_of tries them in is declared, not an accident of the table
    ranks = {}
    for info in BUILTIN_INFO.values():
        for o in info.op_names:
            assert ranks.setdefault(o.rank, o.pattern) == o.pattern, (o, ranks[o.rank])
    assert len(all_op_names()) == len(ranks)
    # backends sharing a converter file its bugs in one place
    converters = {}
    for info in BUILTIN_INFO.values():
        if info.converter:
            assert converters.setdefault(info.converter, info.converter_trackers) == info.converter_trackers
    assert trackers("tf2onnx") == ("onnx/tensorflow-onnx",)
    assert trackers("torch.onnx") == ("pytorch/pytorch", "microsoft/onnxscript")
    assert trackers("openvino") == ("openvinotoolkit/openvino", "onnx/tensorflow-onnx")
    assert VERSION_KEYS[:2] == ("python", "keras") and VERSION_KEYS[-1] == "numpy"
    assert {"jaxlib", "tf2onnx", "openvino", "ai-edge-litert", "onnxscript"} <= set(VERSION_KEYS)
    assert len(all_unsupported()) == len(set(all_unsupported()))


def test_a_plugin_backend_gets_the_defaults():
    info = describe(PLUGIN + "@cuda:tf32")
    assert info == BackendInfo(name=PLUGIN, target=PLUGIN, label=PLUGIN) and not info.builtin
    assert info.blamed == PLUGIN and info.keras_backend is None and info.converter is None
    assert (info.trackers, info.version_keys, info.packages, info.unsupported, info.op_names) == ((),) * 5
    assert info.models and not info.trains and not info.runs_ops and not info.flushes_subnormals
    assert describe("torch@cuda:tf32") is BUILTIN_INFO["torch"]
    # judged with the defaults: blamed on itself, filed at Keras, never a flushing backend
    assert component_of([PLUGIN], "run", "ValueError: refusing this batch on purpose") == PLUGIN
    assert trackers(PLUGIN) == ("keras-team/keras",)
    crash = RootCause(CrashRoot("hard_crash", PLUGIN, "-", "boom"), "bug", "no rule clears it", "hard_crash", "-", 1, 1,
                      "c0", component=PLUGIN, error="boom")
    assert search_queries(crash)[0].startswith(
        "repo:keras-team/keras ")
    assert not _flushing([PLUGIN]) and _flushing(["jax-eager@cuda"]) and not _flushing(["torch"])


def test_each_backends_words_reach_the_judgement():
    """A backend's own "unsupported" words and op patterns are what the rules read."""
    assert explicit_refusal("ConverterError: 'tf.Erfc' op is neither a custom op nor a flex op")
    assert op_of("ConverterError: 'tf.Erfc' op is neither a custom op nor a flex op") == "Erfc"
    assert explicit_refusal("OpConversionFailure: No conversion rule found for operations: Erfc")
    assert op_of("OpConversionFailure: No conversion rule found for operations: Erfc") == "Erfc"
    assert not explicit_refusal("ValueError: something plain went wrong")


def test_the_backends_page_lists_every_builtin_backend():
    """docs/backends.md's table of built-in backends names each one with its class, as the
    descriptions declare them: a backend added in ``info.py`` and not on the page (or one
    renamed on one side only) fails here."""
    text = (PACKAGE.parent / "docs" / "backends.md").read_text()
    start = text.index("## Built-in backends")
    table = text[start:text.index("\n#", start + 1)]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", table, re.M)
    assert len(rows) == len(dict(rows)) and dict(rows) == BUILTIN, \
        "docs/backends.md's built-in table differs from audee/backends/info.py's BUILTIN_INFO"


def test_no_module_outside_the_backends_names_a_converter_backend():
    """A backend named outside ``audee/backends/`` is a fact kept twice.  A standalone
    script's lines for a backend come from its description (``BackendInfo.script``), so no
    template names one either."""
    named = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                   if "backends" not in p.relative_to(PACKAGE).parts[:1]
                   and re.search(r"openvino|litert|torch-onnx", p.read_text(), re.I))
    assert not named, f"modules naming a backend outside audee/backends/: {named}"


def test_the_program_a_backend_runs_joins_its_modes_twins_and_conversions():
    """A float64 result of one program shares that program's dtype-free faults: JAX's float64
    twin and eager mode run JAX's, onnxruntime and openvino TensorFlow's converted, a device
    label its backend's; a plugin is a program of its own."""
    from audee.backends.info import program_of

    assert {program_of(b) for b in ("jax", "jax-x64", "jax-eager")} == {"jax"}
    assert {program_of(b) for b in ("tensorflow", "tensorflow-xla", "onnxruntime", "openvino")} == {"tensorflow"}
    assert program_of("torch@cuda:tf32") == "torch"
    assert program_of("tests.plugins:ScaledTTorch") == "tests.plugins:ScaledTTorch"
