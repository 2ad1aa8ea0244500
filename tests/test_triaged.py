"""The one list of triaged bugs (audee/data/known_issues.yaml, audee.triage.known): every row of
findings/README.md has an entry with a status and the README's table is made from the file;
a root cause matching a triaged findings row is `found before`, not new; a fixed-upstream
entry against the installed version; the summary line every report leads with.  The
campaign roots here are real recorded ones (experiments/results/*: the reports' tables of
the runs, triaged by hand in the README beside each)."""
from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audee.core.errors import ConfigError
from audee.records import ResultRow
from audee.triage import Bug, RootCause
from audee.triage.known import (KnownIssue, installed_version, load_known_file, load_known_issues, load_triage_file,
                                match_known, unique_bugs)
from audee.triage.rootcause import class_counts, new_bugs_line, root_causes
from audee.triage.signature import Signature

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"


# ---- the recorded tables of a report (roots.md, bugs.md) as signatures ----------------------------
def _cells(line: str) -> list[str]:
    return [html.unescape(p.strip().replace("\\|", "|")) for p in re.split(r"(?<!\\)\|", line)[1:-1]]


def _table(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if line.startswith("|") and not line.startswith("|---")]
    head = _cells(lines[0])
    return [dict(zip(head, _cells(line))) for line in lines[1:]]


def _opt(v: str | None) -> str | None:
    return None if v in (None, "", "-") else v


def _names(v: str | None) -> tuple[str, ...]:
    return tuple(sorted(b.strip() for b in v.split(","))) if _opt(v) else ()


def _root_signature(r: dict[str, str]) -> Signature:
    """A recorded root cause's first signature as far as roots.md keeps it (no parameters)."""
    return Signature(r["kind"], _opt(r["api"]), (), _names(r["backends"]), None, _opt(r["error"]), _names(r["odd"]),
                     layer=_opt(r["api"]), op=_opt(r["op"]), component=_opt(r["component"]),
                     error_full=_opt(r["error"]))


def _bug_signature(r: dict[str, str]) -> Signature:
    """A recorded bug signature as bugs.md keeps it: its API and parameters from `what`."""
    api, _, rest = r["what"].partition("(")
    params, depth, cur = [], 0, ""
    for ch in rest[:-1] if rest else "":
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            params.append(cur.strip())
            cur = ""
        else:
            cur += ch
    params += [cur.strip()] if cur.strip() else []
    return Signature(r["kind"], api, tuple(tuple(p.split("=", 1)) for p in params), _names(r["backends"]),
                     _opt(r["phase"]), _opt(r["error"]), _names(r.get("odd")), error_full=_opt(r["error"]))


def _rows(*sigs: Signature) -> list[ResultRow]:
    return [ResultRow(id=f"c{i}", status="fail", kinds=[], backends={"a": "ok"}, signatures=[s.to_json()])
            for i, s in enumerate(sigs)]


# ---- the README's table and the data file ---------------------------------------------------------
def _make_readme(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "findings" / "make_readme.py"), *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_the_readme_table_is_the_data_files_and_an_edit_on_either_side_shows(tmp_path):
    got = _make_readme("--check")
    assert got.returncode == 0, got.stderr
    readme = (ROOT / "findings" / "README.md").read_text()
    # a cell edited by hand in the README ...
    edited = tmp_path / "README.md"
    edited.write_text(readme.replace("| 7 | tf2onnx BiasAdd(data_format=NCHW)", "| 7 | tf2onnx BiasAdd(NCHW)", 1))
    assert edited.read_text() != readme
    got = _make_readme("--check", "--readme", str(edited))
    assert got.returncode == 1 and "edit the data file, not the table" in got.stderr
    # ... or a status changed in the data file: the README is stale
    data = (ROOT / "audee" / "data" / "known_issues.yaml").read_text()
    stale = tmp_path / "known.yaml"
    stale.write_text(data.replace("  - id: tf2onnx-biasadd-nchw-nonconst\n",
                                  "  - id: tf2onnx-biasadd-nchw-nonconst2\n"))
    assert _make_readme("--check", "--data", str(stale)).returncode == 1
    # writing makes them equal again
    assert _make_readme("--readme", str(edited)).returncode == 0
    assert edited.read_text() == readme


def test_every_findings_row_and_script_has_an_entry_with_a_status():
    doc = load_triage_file()
    rows = {f.row: f for f in doc.findings}
    assert sorted(rows) == list(range(1, len(rows) + 1))  # the README's rows, none left out
    scripts = {f.script for f in doc.findings if f.script}
    assert scripts == {p.name for p in (ROOT / "findings").glob("*.py") if p.name != "make_readme.py"}
    by_row: dict[int, list[KnownIssue]] = {}
    for issue in doc.issues:
        if issue.row is not None:
            by_row.setdefault(issue.row, []).append(issue)
    assert set(by_row) == set(rows)
    for issue in doc.issues:
        assert issue.status in ("found before", "known upstream", "fixed upstream")
        assert (issue.link is None) == (issue.status == "found before"), issue.id
        if issue.status == "found before" and rows[issue.row].script:
            assert issue.script == f"findings/{rows[issue.row].script}"
    # rows whose finding audee reports have a match rule (a harness bug fixed in audee, a TF
    # fusion no model reaches alone, and TFLite's clamp of infinities, which a NaN finding cannot
    # tell from the NaN its row matches, do not; grappler's reordered gelu product is told by
    # TensorFlow holding more NaN than the rest on a gelu layer; torch's symmetric pad, whose
    # refusal face is TensorFlow's documented MirrorPad bound and whose values differ only where
    # CLAHE's integer-histogram entry already claims the deviation, does not either)
    unmatched = {i.id for i in doc.issues if not i.rules}
    assert unmatched == {"audee-meshgrid-list-argument", "tf-remapper-conv-nchw-bias-nhwc",
                         "tflite-float-clamp-inf-to-flt-max", "keras-torch-symmetric-pad-replicate"}


# ---- real campaigns' roots: triaged findings rows are found before ---------------------------------
#: the ops campaign's root causes (experiments/results/ops_cpu_campaign/roots_at_run.md, 0-based
#: R index as the triage files name them) that its triage (triage_G1.md ... triage_G5.md) found
#: to be a row of findings/README.md (before or by that triage): R -> row.  Left out: the torch
#: keepdims roots (row 74), whose entry matches on parameters roots.md does not keep.
OPS_ROWS = {30: 25, 42: 26, 59: 52, 26: 52, 21: 57, 7: 41, 37: 30, 84: 30, 86: 30, 88: 30, 65: 30, 52: 47, 10: 47,
            35: 36, 8: 34, 11: 34, 9: 39, 1: 31, 3: 31, 4: 31, 2: 32, 16: 47, 39: 47, 5: 51, 13: 48, 91: 58, 50: 58,
            27: 59, 44: 60, 6: 61, 22: 62, 55: 63, 0: 63, 49: 64, 29: 65, 14: 66, 89: 66, 96: 67, 20: 47, 40: 47,
            12: 68, 19: 68, 28: 69, 82: 70, 51: 70, 76: 75, 53: 71, 17: 72, 115: 54, 116: 73, 117: 44}


def test_the_ops_campaigns_roots_triaged_as_findings_rows_are_not_new():
    roots = _table(RESULTS / "ops_cpu_campaign" / "roots_at_run.md")
    issues = load_known_issues()
    for r, row in OPS_ROWS.items():
        assert roots[r]["status"] == "new" or r == 76, r  # new at the run (R76: LAPACK's hang, known since)
        sig = _root_signature(roots[r])
        hit = match_known(sig, issues)
        assert hit is not None and hit.row == row, (r, row, roots[r]["api"], hit and hit.id)
    # counted as root causes: none of them is new now, and the summary line says so
    sigs = [_root_signature(roots[r]) for r in OPS_ROWS]
    counted = root_causes(unique_bugs(_rows(*sigs), issues))
    assert all(g.status != "new" for g in counted)
    assert class_counts(counted)["bug"]["new"] == 0
    assert new_bugs_line(counted).startswith("new bugs: 0 (found before: ")
    # without the list every one of them is new, as the run said
    assert all(g.status == "new" for g in root_causes(unique_bugs(_rows(*sigs), [])))


@pytest.mark.parametrize("table, kind, api, backends, entry", [
    # the api-cpu campaign at rng 2 (its README's hand check: R00, R05, R02, R06, R03)
    ("api_cpu_campaign_r2/bugs.md", "divergent_acceptance", "DepthwiseConv1D+activations.selu", "onnxruntime",
     "tf2onnx-biasadd-nchw-nonconst"),
    ("api_cpu_campaign_r2/bugs.md", "divergent_acceptance", "Conv1DTranspose+activations.glu", "onnxruntime",
     "tf2onnx-biasadd-nchw-nonconst"),
    ("api_cpu_campaign_r2/bugs.md", "divergent_acceptance", "Conv3DTranspose+activations.squareplus", "onnxruntime",
     "tf2onnx-convtranspose-output-padding"),
    ("api_cpu_campaign_r2/bugs.md", "divergent_acceptance", "Softmax", "onnxruntime", "tf2onnx-isinf-float16"),
    ("api_cpu_campaign_r2/bugs.md", "divergent_acceptance", "CategoryEncoding", "torch",
     "keras-torch-category-encoding-id-num-tokens"),
    ("api_cpu_campaign_r2/bugs.md", "divergent_acceptance", "LSTM+activations.celu+activations.squareplus",
     "onnxruntime", "tf2onnx-expm1"),
    # the compilers campaign (its README: rows 4, 7, 10, and the new rows 12, 13)
    ("compilers_cpu_campaign/bugs.md", "deviation", "Resizing", "openvino, tensorflow",
     "openvino-resize-exclude-outside"),
    ("compilers_cpu_campaign/bugs.md", "divergent_acceptance", "DepthwiseConv1D+activations.relu", "litert",
     "litert-nchw-biasadd-rank"),
    ("compilers_cpu_campaign/bugs.md", "divergent_acceptance", "SeparableConv2D", "onnxruntime",
     "tf2onnx-biasadd-nchw-nonconst"),
    # the first api-cpu campaign (the Keras TF backend's half-precision bincount, ZeroPadding's negative int)
    ("api_cpu_campaign/bugs.md", "divergent_acceptance", "Discretization", "tensorflow",
     "keras-tf-category-encoding-half"),
    ("api_cpu_campaign/bugs.md", "divergent_acceptance", "ZeroPadding3D", "jax", "keras-zeropadding-negative-int"),
])
def test_recorded_bugs_of_the_findings_rows_are_found_before(table, kind, api, backends, entry):
    rows = [r for r in _table(RESULTS / table) if r["kind"] == kind and r["what"].split("(")[0] == api
            and r["backends"] == backends and r["status"] == "new"]
    assert rows, (table, api)
    (bug,) = unique_bugs(_rows(_bug_signature(rows[0])), load_known_issues())
    assert (bug.known_id, bug.status) == (entry, "found before")
    row = next(i.row for i in load_known_issues() if i.id == entry)
    assert bug.known_where.startswith(f"findings row {row}")


def test_the_training_campaigns_findings_are_found_before():
    """The train-cpu campaign's new roots its README traced to findings rows 22, 23, 26 and 28
    (the Reshape crash: row 28's gradient, recorded in phase `gradient`)."""
    roots = {(r["kind"], r["api"]): r for r in _table(RESULTS / "train_cpu_campaign" / "roots_at_run.md")}
    issues = load_known_issues()
    for key, entry in ((("train_deviation", "Softmax"), "keras-tf-crossentropy-wrong-keras-logits"),
                       (("train_deviation", "Embedding"), "keras-tf-sparse-optimizer-duplicate-ids"),
                       (("train_deviation", "ReversibleEmbedding"), "keras-tf-sparse-optimizer-duplicate-ids"),
                       (("divergent_acceptance", "CategoryEncoding"), "keras-tf-category-encoding-half")):
        assert match_known(_root_signature(roots[key]), issues).id == entry, key
    from dataclasses import replace

    reshape = replace(_root_signature(roots[("divergent_acceptance", "Reshape")]), phase="gradient")
    assert match_known(reshape, issues).id == "tf-conv-transpose-empty-output-grad-shape"
    assert match_known(replace(reshape, phase="run"), issues) is None  # a forward Reshape refusal is not it


def test_the_compilers_campaigns_new_bugs_checked_by_hand_are_found_before():
    """The compilers campaign at rng 2811 announced these roots as new bugs; its hand check
    (campaigns_r2811/README.md) found each real and wrote it up as findings rows 82-85."""
    roots = _table(RESULTS / "campaigns_r2811" / "roots_compilers-cpu.md")
    issues = load_known_issues()
    for kind, api, odd, entry, row in (  # odd: the odd backend, else the one backend that failed
            ("deviation", "AutoContrast", "jax", "xla-mul-reassociation-overflow", 82),
            ("deviation", "AutoContrast", "tensorflow-xla", "xla-mul-reassociation-overflow", 82),
            ("nan", "Conv3D", "litert", "litert-conv3d-nan-to-flt-max", 83),
            ("divergent_acceptance", "inner", "tensorflow-xla", "keras-tf-inner-cond-graph", 84),
            ("divergent_acceptance", "ContrastLimitedAdaptiveHistogramEqualization", "torch-onnx",
             "torch-onnx-squeeze-non-unit-dim", 85)):
        (r,) = [r for r in roots if (r["kind"], r["api"]) == (kind, api) and r["status"] == "new"
                and (r["odd"] if r["odd"] != "-" else r["backends"]) == odd]
        (bug,) = unique_bugs(_rows(_root_signature(r)), issues)
        assert (bug.known_id, bug.status, bug.known_where.split(",")[0]) == (entry, "found before",
                                                                             f"findings row {row}"), (api, odd)
    # AutoContrast with OpenVINO odd against TensorFlow is another cause (no XLA there)
    (other,) = [r for r in roots if (r["api"], r["odd"]) == ("AutoContrast", "openvino")]
    hit = match_known(_root_signature(other), issues)
    assert hit is None or hit.id != "xla-mul-reassociation-overflow"


# ---- fixed upstream against the installed version ---------------------------------------------------
def _entries(tmp_path: Path, fixed_version: str) -> list[KnownIssue]:
    p = tmp_path / f"k{fixed_version}.yaml"
    p.write_text(f"""issues:
  - id: rot
    title: t
    status: fixed upstream
    link: https://x.org/1
    fixed: {{package: keras, version: "{fixed_version}"}}
    match: {{kind: deviation, api: rot90, backends: [tensorflow]}}
""")
    return load_known_issues([p], shipped=False)


ROT90 = Signature("deviation", "rot90", (), ("tensorflow", "torch"), odd=("tensorflow",), layer="rot90")


def test_a_fixed_upstream_entry_is_shown_as_such_before_the_fix_and_known_upstream_from_it(tmp_path):
    keras = installed_version("keras")
    assert keras is not None
    (before,) = unique_bugs(_rows(ROT90), _entries(tmp_path, "999.0"))  # the fix is in a later release
    assert before.status == "fixed upstream"
    assert before.known_where == f"https://x.org/1 (fixed in keras 999.0; installed {keras})"
    (root,) = root_causes([before])
    assert root.status == "fixed upstream" and new_bugs_line([root]) == (
        "new bugs: 0 (found before: 0, known upstream: 0, fixed upstream: 1)")
    (after,) = unique_bugs(_rows(ROT90), _entries(tmp_path, "0.1"))  # installed: the fix did not cover it
    assert after.status == "known upstream" and after.known_where.endswith("; still seen)")
    # the status is the installed version's, the entry's own stays as written (the README shows that)
    issue = _entries(tmp_path, "0.1")[0]
    assert issue.status == "fixed upstream" and issue.status_now(lambda p: None) == "fixed upstream"
    assert issue.status_now(lambda p: "0.1") == "known upstream"
    # the shipped entry: Keras' rot90 fix merged after 3.15.1
    (shipped,) = unique_bugs(_rows(ROT90), load_known_issues())
    from packaging.version import Version

    assert shipped.known_id == "keras-tf-rot90-nonsquare"
    assert shipped.status == ("fixed upstream" if Version(keras) < Version("3.16.0") else "known upstream")


def test_the_summary_line_counts_bugs_by_status_and_reads_back(tmp_path):
    p = tmp_path / "k.yaml"
    p.write_text("""findings:
  - {row: 1, title: a TF crash, script: a.py, backends: tensorflow, output: x, upstream: not found, verdict: bug}
issues:
  - {id: ours, title: t, status: found before, row: 1, match: {kind: hard_crash, error: ours}}
  - {id: theirs, title: t, link: 'https://x.org/2', match: {kind: hard_crash, error: theirs}}
  - {id: fixed, title: t, status: fixed upstream, link: 'https://x.org/3',
     fixed: {package: no-such-pkg-x, version: '1'}, match: {kind: hard_crash, error: fixed}}
""")
    issues = load_known_issues([p], shipped=False)

    def crash(text: str) -> Signature:
        return Signature("hard_crash", "Dense", (), ("tensorflow",), "run", f"Error: {text}",
                         error_full=f"Error: {text}")

    roots = root_causes(unique_bugs(_rows(*(crash(t) for t in ("ours", "theirs", "fixed", "brand new"))), issues))
    assert [g.status for g in roots] == ["new", "found before", "known upstream", "fixed upstream"]  # new first
    assert new_bugs_line(roots) == "new bugs: 1 (found before: 1, known upstream: 1, fixed upstream: 1)"
    ours = next(g for g in roots if g.status == "found before")
    assert ours.known_where == "findings row 1, findings/a.py" and str(ours.root) == "known | findings row 1: ours"
    # a package not installed cannot tell: the entry's own status stands
    assert next(g for g in roots if g.known_id == "fixed").known_where.endswith("installed not installed)")
    # summary.json's roots and bugs read back with their statuses; an old summary's "known" is known upstream
    assert [RootCause.from_json(g.to_json()) for g in roots] == roots
    bugs = unique_bugs(_rows(crash("ours")), issues)
    assert Bug.from_json(bugs[0].to_json()).status == "found before"
    old = {**roots[2].to_json(), "status": "known"}
    old.pop("known_where")
    assert RootCause.from_json(old).status == "known upstream"


# ---- the schema: one-line errors naming the file and the field -------------------------------------
ROW = "findings:\n  - {row: 1, title: t, script: null, backends: b, output: o, upstream: u, verdict: v}\n"


@pytest.mark.parametrize("body, field", [
    ("issues:\n  - {id: a, title: t, status: found before, match: {kind: nan}}\n",
     "issues[0].row: required: a `found before` entry is a row of findings/README.md"),
    (ROW + "issues:\n  - {id: a, title: t, status: found before, row: 1, link: 'https://x.org/1'}\n",
     "issues[0].link: a `found before` entry has no upstream issue"),
    ("issues:\n  - {id: a, title: t, status: fixed upstream, match: {kind: nan}}\n",
     "issues[0].link: required: the upstream issue of a `fixed upstream` entry"),
    ("issues:\n  - {id: a, title: t, status: fixed upstream, link: 'https://x.org/1'}\n",
     "issues[0].fixed: required: the package and the first version with the fix"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', fixed: {package: keras, version: '3.16'}}\n",
     "issues[0].fixed: only a `fixed upstream` entry names its fix"),
    ("issues:\n  - {id: a, title: t, status: fixed upstream, link: 'https://x.org/1', "
     "fixed: {package: keras, version: 'soon'}}\n", "issues[0].fixed.version: not a version (PEP 440): 'soon'"),
    ("issues:\n  - {id: a, title: t, status: new, link: 'https://x.org/1'}\n",
     "issues[0].status: unknown status 'new'"),
    ("issues:\n  - {id: a, title: t, status: found before, row: 2}\n",
     "issues[0].row: no row 2 under findings: in this file"),
    (ROW + "issues: []\n", "findings[0]: row 1 has no entry under issues:"),
    (ROW + "  - {row: 1, title: t, script: null, backends: b, output: o, upstream: u, verdict: v}\n"
     "issues:\n  - {id: a, title: t, status: found before, row: 1}\n", "findings[1].row: duplicate row 1"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: [{kind: nan}, {kind: oops}]}\n",
     "issues[0].match[1].kind: unknown finding kind 'oops'"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: [{kind: nan}, {colour: red}]}\n",
     "issues[0].match[1].colour: unknown setting"),
    ("issues:\n  - {id: a, title: t, link: 'https://x.org/1', match: []}\n",
     "issues[0].match: expected a mapping of criteria or a non-empty list of them"),
])
def test_schema_errors_of_statuses_rows_and_rules_are_one_line(tmp_path, body, field):
    p = tmp_path / "k.yaml"
    p.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_known_file(p)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{p}: ") and field in text, text


def test_a_rule_list_is_one_entry_and_one_root_cause(tmp_path):
    p = tmp_path / "k.yaml"
    p.write_text(ROW + """issues:
  - id: two-faces
    title: t
    status: found before
    row: 1
    match:
      - {kind: hard_crash, error: at load}
      - {kind: hard_crash, error: at run}
""")
    issues = load_known_issues([p], shipped=False)
    load = Signature("hard_crash", "Dense", (), ("onnxruntime",), "convert", "E: at load", error_full="E: at load")
    run = Signature("hard_crash", "Dense", (), ("onnxruntime",), "run", "E: at run", error_full="E: at run")
    (root,) = root_causes(unique_bugs(_rows(load, run), issues))
    assert (root.known_id, root.status, root.signatures) == ("two-faces", "found before", 2)
    assert len(root_causes(unique_bugs(_rows(load, run), []))) == 2
