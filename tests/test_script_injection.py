"""A case file cannot put code into a repro script, and the loader refuses fields outside their schema.

Written as an attacker would: every text field of a case (id, versions, the seed, a backend's
error message, an op's name) holds text that closes a docstring, ends a comment line or
escapes a string, then tries to create a marker file.  Either the loader refuses the file
in one line (exit 2), or the script written from it loads and never runs that text.  The
generators are tried both behind the loader and past it (a record made in memory): the
script's safety may not depend on the loader alone.
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.backends.registry import parse_backends
from audee.core.errors import CaseFileError
from audee.store import CaseRecord
from tests.test_repro import gelu_record

ROOT = Path(__file__).resolve().parent.parent


def hostile(mark: Path) -> list[str]:
    """Texts that try to run ``open(mark, 'w')`` from a docstring, a comment, a string or a
    raw string, with backslashes and a lone surrogate besides."""
    code = f"open({str(mark)!r}, 'w').write('pwned')"
    return [f'"""\n{code}\n"""', f"x\n{code}\n#", f"'''\n{code}\n'''", f"\\\n{code}", f"\r{code}\r",
            f"\\\"\"\"; {code}; \"\"\"\\", f"\udc80 # \\x00 \u2028{code}", f"# -*- coding: utf-7 -*-\n+AAo-{code}"]


def _load_top_level(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    """Run the script's module level only (what importing it runs), in a fresh process."""
    probe = f"import importlib.util as u; s = u.spec_from_file_location('s', {str(script)!r}); " \
            "m = u.module_from_spec(s); s.loader.exec_module(m)"
    return subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=300)


def _evil_model_record(mark: Path) -> CaseRecord:
    """A model case whose every free text holds the attack (made in memory: past the loader)."""
    texts = hostile(mark)
    rec = gelu_record()
    rec.id = texts[1]
    rec.versions = {"tensorflow": {t: t for t in texts}, "onnxruntime": {"onnxruntime": texts[0]}}
    rec.meta = {"seed": texts[0]}
    finding = rec.verdict["findings"][0]
    finding["detail"]["errors"]["onnxruntime"]["message"] = "\n".join(texts)
    return rec


def test_a_model_cases_text_never_runs_in_its_script(tmp_path):
    from audee.repro import write_repro

    mark = tmp_path / "MARKER"
    rep = write_repro(_evil_model_record(mark), tmp_path / "out", "evil")
    compile(rep.script.read_text(encoding="utf-8"), str(rep.script), "exec")
    got = _load_top_level(rep.script, tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    assert not mark.exists()


def test_an_op_cases_text_never_runs_in_its_script(tmp_path):
    from audee.repro.ops import write_op_repro

    mark = tmp_path / "MARKER"
    texts = hostile(mark)
    rec = CaseRecord(id=texts[0], spec={}, weights={}, inputs={"x": np.ones(3, np.float32)},
                     backends=parse_backends("tensorflow,jax"),
                     verdict={"status": "fail", "findings": [{"kind": "hard_crash", "backends": ["tensorflow"],
                                                              "detail": {"message": texts[1]}}]},
                     versions={"tensorflow": {"tensorflow": texts[0]}, "jax": {t: t for t in texts}},
                     op={"op": f"abs{texts[0]}", "args": [{"tensor": "x"}, texts[2]], "kwargs": {texts[3]: texts[4]},
                         "dtypes": {"x": "float32"}})
    script = write_op_repro(rec, tmp_path / "out", "evil", 0)
    compile(script.read_text(encoding="utf-8"), str(script), "exec")
    got = _load_top_level(script, tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    assert not mark.exists()
    # its gradient phase's script: the tensors differentiated are data too
    from audee.repro.opgrad import write_opgrad_repro

    rec.meta["train"] = {"gradient": {"seed": 3, "wrt": [texts[1]]}}
    script = write_opgrad_repro(rec, tmp_path / "out", "evil-grad", 0)
    compile(script.read_text(encoding="utf-8"), str(script), "exec")
    got = _load_top_level(script, tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    assert not mark.exists()


def test_every_template_takes_text_as_comments_and_data_only(tmp_path):
    """The one filler (audee.repro.source): each generator's template with the attack in
    every comment and data placeholder loads, holds the data unchanged, runs none of it."""
    from audee.repro.opgrad import GRAD_SCRIPT
    from audee.repro.ops import OP_SCRIPT
    from audee.repro.source import Code, Comment, Data, comment_safe, fill
    from audee.repro.template import SCRIPT
    from audee.repro.train import TEMPLATE

    mark = tmp_path / "MARKER"
    texts = hostile(mark)
    value = {"data": texts[0], "texts": texts, "nested": [{t: t} for t in texts], "n": float("nan")}
    for i, (template, code) in enumerate([(SCRIPT, {"OWNED": ""}), (OP_SCRIPT, {"NORMALIZED_ERROR": "", "OP_CODE": ""}),
                                          (GRAD_SCRIPT, {"NORMALIZED_ERROR": "", "COTANGENT": "", "OP_CODE": ""}), (TEMPLATE, {})]):
        names = {n for n in ("HEADER", "MODEL", "CASE", "EQUIV", "DATA", "CALL", "TENSORS", "BACKENDS", "GRAD")
                 if f"__{n}__" in template}
        pieces = {n: Comment(texts) if n == "HEADER" else Data(texts[0]) if n == "DATA" else
                  Data(value, rows=n == "MODEL") for n in names}
        text = fill(template, {**pieces, **{k: Code(v) for k, v in code.items()}})
        assert text.splitlines()[1] == "# -*- coding: utf-8 -*-"
        script = tmp_path / f"t{i}.py"
        script.write_text(text, encoding="utf-8")
        probe = (f"import importlib.util as u, json, math; s = u.spec_from_file_location('s', {str(script)!r}); "
                 "m = u.module_from_spec(s); s.loader.exec_module(m); "
                 f"v = m.CASE; print(json.dumps(v['texts'] == json.loads({json.dumps(texts)!r}) "
                 "and math.isnan(v['n'])))")
        got = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert got.returncode == 0 and got.stdout.strip() == "true", got.stderr[-2000:]
        assert not mark.exists()
    assert comment_safe("a\nb\\c\udc80é") == "a\\nb\\c\\udc80\\xe9"
    with pytest.raises(TypeError):
        fill("#!\n#\n__XX__\n", {"XX": "import os"})  # a plain str: the site must say what it is
    assert fill("#!\n#\n__AA__ __BB__\n", {"AA": Code("__BB__"), "BB": Code("b")}) == "#!\n#\n__BB__ b\n"
    with pytest.raises(ValueError, match="encoding"):
        fill("#!\n__AA__\n", {"AA": Comment(["x"])})


# ---- the loader --------------------------------------------------------------------------------------
def _op_dict(**op) -> dict:
    rec = CaseRecord(id="op-add-v00001", spec={}, weights={},
                     inputs={"x": np.ones(3, np.float32), "y": np.ones(3, np.float32)},
                     backends=parse_backends("tensorflow"),
                     verdict={"status": "fail", "findings": [{"kind": "hard_crash", "backends": ["tensorflow"],
                                                              "detail": {"message": "boom"}}]},
                     versions={"tensorflow": {"keras": "3.15.1", "tensorflow": "2.21.0"}},
                     op={"op": "add", "args": [{"tensor": "x"}, {"tensor": "y"}], "kwargs": {},
                         "dtypes": {"x": "float32", "y": "float32"}} | op, created="2025-01-02T03:04:05")
    return {**rec.to_dict(), "format": "audee.case/2"}


@pytest.mark.parametrize("field,change,words", [
    ("op", {"op": {"op": "builtins.exec"}}, "op.op: 'builtins.exec' is not a configured keras.ops function"),
    ("op", {"op": {"op": 'add"""'}}, "op.op"),
    ("op", {"op": {"dtypes": {"x": 'float32"""'}}}, "op.dtypes.x"),
    ("op", {"op": {"kwargs": {"axis": (1,)}}}, "op.kwargs.axis"),  # a tuple: no JSON data
    ("id", {"id": 'op-add"""\nimport os'}, "id: not a case id"),
    ("id", {"id": "../../outside"}, "id: not a case id"),
    ("id", {"id": "x\udc80"}, "id: not a case id"),
    ("versions", {"versions": {"tensorflow": {"tensorflow": '2"""'}}}, "versions.tensorflow.tensorflow"),
    ("versions", {"versions": {"tensorflow": "2.21"}}, "versions.tensorflow"),
    ("versions", {"versions": {"tensorflow\n#": {}}}, "versions: expected a backend label"),
    ("backends", {"backends": [{"label": "tensorflow\nx", "target": "audee.backends.keras_backends:TensorflowBackend",
                                "device": "cpu"}]}, "backends[0].label"),
    ("created", {"created": "\n#"}, "created"),
    ("tolerances", {"tolerances": {"float32": {"rtol": "1e-3"}}}, "tolerances.float32.rtol"),
])
def test_the_loader_refuses_a_field_outside_its_schema(tmp_path, field, change, words):
    d = _op_dict()
    if "op" in change:
        d["op"] = {**d["op"], **change["op"]}
    else:
        d.update(change)
    path = tmp_path / "case.pkl"
    path.write_bytes(pickle.dumps(d, protocol=4))
    with pytest.raises(CaseFileError) as err:
        CaseRecord.from_file(path)
    assert words in str(err.value) and "\n" not in str(err.value) and str(err.value).isascii()


def test_every_id_audee_writes_is_a_case_id():
    """Ids as audee makes them (fuzz, API and op levels, searches, old files' tests) fit."""
    from audee.mutation.apilevel import case_id
    from audee.mutation.oplevel import op_case_id
    from audee.store.caserecord import CASE_ID

    ids = ["lenet5-seed", "lenet5-v00001", case_id("Conv2DTranspose", 3), op_case_id("image.resize", 12),
           "lenet5-v00001-inconsistency-input-weight-inconsistency-r-1-g012-0123456789ab", "x-v00001", "sec-1",
           "gelu-v1", "lenet5-bias-fault-no-bias-jax", "op-linalg.qr-v00000"]
    assert all(CASE_ID.match(i) for i in ids), [i for i in ids if not CASE_ID.match(i)]


def test_a_seed_whose_name_cannot_start_case_ids_is_refused(tmp_path):
    from audee.core.errors import AudeeError
    from audee.mutation.seeds import load_seed
    from tests.helpers import tiny_cnn

    spec = tiny_cnn().to_json() | {"name": "my model\n#"}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    with pytest.raises(AudeeError, match="cannot start case ids") as err:
        load_seed(str(path))
    assert "\n" not in str(err.value)


def test_repro_refuses_a_forged_op_case_in_one_line_and_runs_nothing(tmp_path):
    """`audee repro` / `audee reproduce` on an op case naming ``builtins.exec`` (no config): a
    bad file, exit 2, one line; no script written, no marker."""
    mark = tmp_path / "MARKER"
    d = _op_dict()
    d["op"] = {**d["op"], "op": "builtins.exec"}
    d["id"] = f'op-x"""\nopen({str(mark)!r}, "w")\n"""'
    path = tmp_path / "run" / "cases" / "case.pkl"
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps(d, protocol=4))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for command in (["repro", str(path), "--out", str(tmp_path / "out")], ["reproduce", str(path)]):
        got = subprocess.run([sys.executable, "-m", "audee", *command], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=300)
        errors = [ln for ln in got.stderr.splitlines() if ln.startswith("audee: error:")]
        assert got.returncode == 2 and len(errors) == 1 and "Traceback" not in got.stderr, got.stderr[-2000:]
        assert "id: not a case id" in errors[0] or "op.op" in errors[0]
    assert not mark.exists() and not (tmp_path / "out").exists()
    d["id"] = "op-add-v00001"
    path.write_bytes(pickle.dumps(d, protocol=4))
    got = subprocess.run([sys.executable, "-m", "audee", "reproduce", str(path)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 2 and "op.op: 'builtins.exec' is not a configured keras.ops function" in got.stderr
