"""Op configs (issue 30): the shipped ``api_configs/ops/`` files load through the layer
configs' one loader and schema, match the installed Keras (every ``keras.ops`` function
configured or excluded with a reason, the files what the generator writes), and a
malformed op config is refused with the file and the field named."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audee.apis import load_api_config, load_api_configs, load_op_configs
from audee.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "KERAS_BACKEND": "jax"}


def test_at_least_250_ops_configured_in_the_layer_schema():
    ops = load_op_configs()
    assert len(ops) >= 250
    assert all(c.namespace == "ops" and c.args for c in ops.values() if c.api not in ("size", "ndim"))
    # the families the issue names are among them
    for name in ("top_k", "logsumexp", "segment_sum", "take", "argsort", "sort", "cholesky", "fft", "image.resize",
                 "bitwise_and", "cumsum", "where"):
        assert name in ops, name
    assert ops["take"].args["indices"].shape == "index" and ops["take"].derive == "index_axis"
    assert "tie_indices" in ops["argmax"].undefined
    assert set(load_api_configs()).isdisjoint(ops)  # the layers' folder holds no op, and the reverse


CHECK_SCRIPT = """
import json, runpy, sys
sys.argv = ["make_op_configs.py", "--check"]
try:
    runpy.run_path("api_configs/ops/make_op_configs.py", run_name="__main__")
except SystemExit as e:
    assert not e.code, "generator --check: files out of date"
from audee.apis import load_op_configs
from audee.apis.coverage import coverage_rows, excluded_ops, uncovered_ops
ops = load_op_configs()
print(json.dumps({"rows": coverage_rows(ops), "uncovered": uncovered_ops(ops), "excluded": excluded_ops()}))
"""


def test_generator_and_coverage_agree_with_the_installed_keras():
    """One process with keras: the generator's --check (the files are what it writes) and
    the coverage (no function neither configured nor excluded, no parameter missing)."""
    got = subprocess.run([sys.executable, "-c", CHECK_SCRIPT], env=ENV, capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    assert got.returncode == 0, got.stdout[-2000:] + got.stderr[-2000:]
    cov = json.loads(got.stdout.strip().splitlines()[-1])
    assert cov["uncovered"] == []
    assert not [r for r in cov["rows"] if r["status"] in ("missing", "not_in_keras")]
    assert {"cond", "scan", "einsum", "empty"} <= set(cov["excluded"])
    assert len(cov["excluded"]) + len(load_op_configs()) >= 337


@pytest.mark.parametrize("body, field", [
    ("api: add\ncategory: op.numpy\nargs:\n  x1: {type: tensor, dtypes: [float33]}\n", "args.x1.dtypes"),
    ("api: add\ncategory: op.numpy\nargs:\n  x1: {type: tensor, shape: broadcast}\n", "args.x1.shape"),
    ("api: add\ncategory: op.numpy\nargs:\n  x1: {type: tensor, shape: sideways}\n", "args.x1.shape"),
    ("api: add\ncategory: op.numpy\nargs:\n  x1: {type: tensors, count: [3, 1]}\n", "args.x1.count"),
    ("api: add\ncategory: op.numpy\nundefined: [sometimes]\nargs:\n  x1: {type: tensor}\n", "undefined"),
    ("api: add\ncategory: op.numpy\nargs:\n  x1: {type: tensor, invalid: [-1]}\n", "args.x1.invalid[0]"),
    ("api: add\ncategory: op.numpy\nargs:\n  x1: {type: tensor, spread: true}\n", "args.x1.spread"),
    ("api: add\ncategory: op.numpy\nranks: [-1]\nargs:\n  x1: {type: tensor}\n", "ranks"),
    ("api: add\ncategory: core\nargs:\n  x1: {type: tensor}\n", "args"),
    ("api: add\ncategory: core\nparams:\n  x1: {type: tensor}\n", "params.x1.type"),
    ("api: add\ncategory: op.numpy\ndistinct: [axis1, offset]\nargs:\n  x1: {type: tensor}\nparams:\n"
     "  axis1: {type: axis}\n  offset: {type: int, range: [0, 2]}\n", "distinct"),
    ("api: add\ncategory: op.numpy\ndistinct: [axis1]\nargs:\n  x1: {type: tensor}\nparams:\n"
     "  axis1: {type: axis}\n", "distinct"),
    ("api: add\ncategory: core\ndistinct: [axis]\n", "distinct"),
])
def test_malformed_op_config_names_file_and_field(tmp_path, body, field):
    path = tmp_path / "add.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as e:
        load_api_config(path)
    assert str(e.value).startswith(f"{path}: {field}:"), str(e.value)


def test_a_layer_config_in_the_ops_folder_is_refused(tmp_path):
    (tmp_path / "Dense.yaml").write_text((REPO / "api_configs/Dense.yaml").read_text())
    with pytest.raises(ConfigError, match="Dense.yaml: category: not an op config"):
        load_op_configs(tmp_path)


def test_dtypes_outside_keras_tested_contract_are_invalid_not_drawn():
    """nn/math/image/linalg ops are tested by Keras on floats only: their integer inputs are
    the crafty invalid value; numpy ops keep integers (they promote as NumPy does)."""
    configs = load_op_configs()
    assert configs["relu6"].args["x"].dtypes == ["float32", "float64", "float16", "bfloat16"]
    assert configs["relu6"].args["x"].invalid == ["int32"]
    assert configs["segment_sum"].args["segment_ids"].invalid == []        # ids: integers by nature
    assert configs["bitwise_not"].args["x"].invalid == ["bool"]
    assert "int32" in configs["sqrt"].args["x"].dtypes and not configs["sqrt"].args["x"].invalid
