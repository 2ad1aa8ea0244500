"""One scaffold for every standalone repro script (``audee.repro.scaffold``): the model, op and
training-step templates share its parent, data check and exit codes as one text, and a
model script's backend code is each backend's own (``BackendInfo.script``), found by name."""
from __future__ import annotations

import ast
import re

from audee.backends.info import BUILTIN_INFO, describe
from audee.repro.opgrad import GRAD_SCRIPT
from audee.repro.ops import OP_SCRIPT
from audee.repro.scaffold import _DATA_SECTION, _SCAFFOLD, backend_code
from audee.repro.template import SCRIPT
from audee.repro.train import TEMPLATE


def _functions(text: str) -> dict[str, str]:
    """Top-level function name -> its source, of a template (placeholders made names first)."""
    src = re.sub(r"__([A-Z][A-Z0-9_]*[A-Z0-9])__", r"PLACEHOLDER_\1", text)
    tree = ast.parse(src)
    return {n.name: ast.get_source_segment(src, n) or "" for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_every_level_runs_in_the_one_scaffold():
    shared = _functions(_SCAFFOLD.replace("__DOC__", ""))
    assert {"run_all", "main", "environment_broken", "write_result"} <= set(shared)
    for template in (SCRIPT, OP_SCRIPT, GRAD_SCRIPT, TEMPLATE):
        got = _functions(template)
        for name, source in shared.items():
            assert got[name] == source, name        # the scaffold's text, once, in every level
        assert {"child", "read_result", "verdict"} <= set(got)
        assert "ENV_BROKEN = 2" in template and "BAD_DATA = 3" in template
    data = _functions(_DATA_SECTION.replace("__DATA__", "PLACEHOLDER_DATA"))
    for template in (SCRIPT, TEMPLATE):            # the two levels with a .npz: one data check
        assert all(_functions(template)[n] == s for n, s in data.items())
    assert "def check_data" not in OP_SCRIPT       # an op script carries its tensors itself
    assert "def check_data" not in GRAD_SCRIPT


def test_a_model_scripts_backend_code_is_each_backends_own():
    code = backend_code()
    table = ast.literal_eval(re.sub(r'"(gpu|run)": (\w+)', r'"\1": "\2"',
                                    code[code.index("BACKEND_CODE = ") + len("BACKEND_CODE = "):]))
    assert set(table) == {n for n, i in BUILTIN_INFO.items() if i.models}
    funcs = _functions(code)
    for name, row in table.items():
        info = BUILTIN_INFO[name]
        assert row["keras"] == info.keras_backend and row["modules"] == list(info.modules)
        assert row["run"] in funcs and info.script is not None
        assert info.script.run.strip().splitlines()[-1].strip() in funcs[row["run"]]
        assert (row["gpu"] == "None") == (info.script.gpu is None)
    assert code.count("def tf2onnx_graph(") == 1   # a helper two backends share is written once
    assert "def tf2onnx_graph(" in SCRIPT and "BACKEND_CODE = {" in SCRIPT
    assert describe("mypkg.mod:Backend").script is None  # a plugin has no script lines: refused earlier


def test_a_model_script_judges_its_kinds_and_refuses_the_others(tmp_path, monkeypatch):
    """Each kind a model script declares it judges has its branch in the script's ``judge`` (a
    deviation: the closing tolerance check every other pair reaches too); a failure of a kind
    it does not judge gets one error line and no script, never a script that judges it as a
    deviation (what a new kind's finding got before)."""
    import pytest

    import audee.repro as repro
    from audee.cases.case import Kind
    from audee.core.errors import AudeeError
    from audee.repro.template import JUDGED_KINDS
    from tests.test_repro import gelu_record

    judge = _functions(SCRIPT)["judge"]
    for kind in JUDGED_KINDS:
        assert kind == Kind.DEVIATION or f'"{kind}"' in judge, kind
    record = gelu_record(backends="tensorflow,jax")
    record.verdict = {"status": "fail", "findings": [
        {"kind": "deviation", "backends": ["tensorflow", "jax"], "detail": {"pair": "tensorflow|jax"}}]}
    assert repro.write_repro(record, tmp_path, "judged").script.is_file()  # no pool: written, not checked
    monkeypatch.setattr(repro, "JUDGED_KINDS", tuple(k for k in JUDGED_KINDS if k != Kind.DEVIATION))
    with pytest.raises(AudeeError, match="no standalone script for a deviation finding"):
        repro.write_repro(record, tmp_path, "refused")
    assert not (tmp_path / "refused.py").exists() and not (tmp_path / "refused.npz").exists()


def test_a_scripts_expectation_of_a_kind_without_words_is_the_kind_tables():
    """What a script says it expects, for a failure kind ``_expect`` has no words of its own
    for (a new kind with a script judge): the kind's ``about`` from the finding kind table,
    one backend or several (it unpacked a pair before, and raised on one backend)."""
    from audee.cases.case import Finding, Kind
    from audee.cases.kinds import BY_NAME
    from audee.repro import _expect

    one = Finding(Kind.TRAIN_NAN, ["jax"], {})
    assert _expect(one, ["jax"], ["jax"], "d") == f"jax: {BY_NAME[Kind.TRAIN_NAN].about}"
    pair = Finding(Kind.DEVIATION, ["tensorflow", "jax"], {"pair": "tensorflow|jax"})
    assert _expect(pair, ["tensorflow", "jax"], ["tensorflow", "jax"], "d") == \
        "tensorflow and jax disagree on d beyond the tolerance"


def test_a_child_writes_bfloat16_results_the_parent_can_read(tmp_path):
    """A training step on bfloat16 returns ml_dtypes arrays; saved as they are they read back
    as raw bytes in the parent ("could not convert string to float: b'A\\xbf'"), and two
    train-cpu scripts stopped in their verdict.  Written as float32, exactly."""
    import os

    import ml_dtypes
    import numpy as np

    src = _SCAFFOLD[_SCAFFOLD.index("def write_result("):]
    ns = {"np": np, "os": os}
    exec(src[:src.index("\n\n\ndef ")], ns)  # the script's own function, as every script carries it
    write_result = ns["write_result"]
    out = str(tmp_path / "r.npz")
    write_result(out, out_=np.array([1.5, -2.25], ml_dtypes.bfloat16), loss=np.float32(3.0))
    got = np.load(out, allow_pickle=False)
    assert got["out_"].dtype == np.float32 and got["out_"].tolist() == [1.5, -2.25] and float(got["loss"]) == 3.0
