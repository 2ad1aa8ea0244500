"""The documented plugin example, run for real beside TensorFlow."""
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.case import Kind, TestCase
from audee.execute import Executor
from tests.helpers import tiny_cnn, tiny_inputs

PLUGIN = "audee.backends.examples:DenseWithoutBiasTF"


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
    layers = finding.detail["layer_distances"]
    assert layers["flat"] < 1e-5 < layers["logits"]   # the jump is at the altered layer
