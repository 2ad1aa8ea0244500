"""The documented plugins, run for real: the worked example beside TensorFlow, and the
interface example of ``docs/backends.md`` taken from the page itself and started as a
plugin (a plugin written to the page must start and run)."""
import inspect
import re
from pathlib import Path

from audee.backends import examples
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.engine.execute import Executor
from tests.helpers import tiny_cnn, tiny_inputs

PLUGIN = "audee.backends.examples:DenseWithoutBiasTF"
DOC = Path(__file__).resolve().parent.parent / "docs" / "backends.md"
MARKER = "<!-- plugin-example:"


def documented_plugin() -> str:
    """The first ```python block after the plugin-example marker of docs/backends.md."""
    text = DOC.read_text(encoding="utf-8")
    assert MARKER in text, "docs/backends.md lost its plugin-example marker"
    m = re.search(r"```python\n(.*?)```", text[text.index(MARKER):], re.S)
    assert m, "no python block after the plugin-example marker"
    return m.group(1)


def test_the_worked_example_on_the_page_is_the_shipped_class():
    assert inspect.getsource(examples.DenseWithoutBiasTF) in DOC.read_text(encoding="utf-8")


def test_the_documented_interface_starts_and_runs_as_a_plugin(tmp_path, monkeypatch):
    code = documented_plugin()
    assert "--backends jax,mirror_plugin:MirrorJax" in DOC.read_text(encoding="utf-8")
    (tmp_path / "mirror_plugin.py").write_text(code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # as the page says: the module beside where audee runs
    target = "mirror_plugin:MirrorJax"
    with Pool(parse_backends(f"jax,{target}"), tmp_path / "logs") as pool:
        pool.start_or_fail()  # a plugin whose __init__/prepare_process miss the precision fails here
        assert pool.workers[target].versions["jax"] == pool.workers["jax"].versions["jax"]
        ex = Executor(pool, tie_margin=0.0)
        case = TestCase("doc-plugin", tiny_cnn(), {}, tiny_inputs(4))
        ex.complete_weights(case, 1)
        result = ex.run(case)
    assert not result.verdict.failed, result.verdict
    assert result.pairs[f"jax|{target}"]["distance"] < 1e-6  # the same computation through the interface


def test_dense_without_bias_plugin_is_flagged(tmp_path):
    with Pool(parse_backends(f"tensorflow,{PLUGIN}"), tmp_path) as pool:
        assert pool.start() == {}
        assert pool.workers[PLUGIN].versions["tensorflow"]
        ex = Executor(pool, tie_margin=0.0)
        case = TestCase("p", tiny_cnn(), {}, tiny_inputs(32))
        ex.complete_weights(case, 3)
        case.weights["logits"][1][:] = [3.0, -3.0, 0.0, 1.0, -1.0]  # a bias that decides labels
        result = ex.run(case)
    pair = f"tensorflow|{PLUGIN}"
    assert result.pairs[pair]["distance"] > 0.1
    (finding,) = [f for f in result.verdict.findings if f.kind == Kind.INCONSISTENCY]
    layers = finding.detail.layer_distances
    assert layers["flat"] < 1e-5 < layers["logits"]   # the jump is at the altered layer
