"""The triage records (audee.triage): a bug and a root cause are declared types made once
(audee.triage.known.unique_bugs, audee.triage.rootcause.root_causes), written to a summary as the JSON it
has always held, read back equal, and read as made by the report and the printed summary."""
from __future__ import annotations

import json

import pytest

from audee.cases.case import Kind
from audee.triage.known import KnownIssue, unique_bugs
from audee.records import ResultRow
from audee.triage.rootcause import root_causes, root_of
from audee.triage.signature import Signature
from audee.triage import Bug, CrashRoot, KnownRoot, NumericRoot, RootCause, parse_root

S = Signature
SIZE = "InvalidArgumentError: Conv3DBackpropInputOp: Size of out_backprop doesn't match computed"
#: one group of signatures per case: an odd root and two pairs (one folds into it), a NaN on
#: NaN input (undefined, a silent backend), a crash with a rider, a known issue, the harness,
#: an equivalence rule, a crash whose error holds the key's separator
CASES = [
    [S(Kind.DEVIATION, "Dense", (), ("tensorflow", "torch"), odd=("torch",), layer="Dense")],
    [S(Kind.DEVIATION, "Dense", (), ("jax", "torch"), layer="Dense")],
    [S(Kind.DEVIATION, "Dense", (), ("jax", "tensorflow"), layer="Dense")],
    [S(Kind.NAN, "Dense", (), ("jax", "onnxruntime", "torch"), odd=("onnxruntime",), layer="Dense",
       context=("nonfinite_input",))],
    [S(Kind.DIVERGENT_ACCEPTANCE, "Conv3DTranspose", (("activation", "'selu'"),), ("tensorflow",), "run", SIZE,
       op="Conv3DBackpropInput", component="tensorflow", error_full=SIZE)],
    [S(Kind.DIVERGENT_ACCEPTANCE, "Conv3DTranspose", (("activation", "'relu'"),), ("tensorflow",), "run", SIZE,
       op="Conv3DBackpropInput", component="tensorflow", error_full=SIZE, context=("invalid:filters",))],
    [S(Kind.DIVERGENT_ACCEPTANCE, "Dense", (("activation", "'gelu'"),), ("onnxruntime",), "convert",
       "InvalidGraph: No Op registered for Erfc", op="Erfc", component="tf2onnx")],
    [S(Kind.DIVERGENT_ACCEPTANCE, "Conv2D", (), ("onnxruntime",), "convert", "ValueError: glue",
       component="onnxruntime", context=("audee_raised",))],
    [S(Kind.EQUIVALENCE, "Conv2D", (("rule", "padding"),), ("jax",), odd=("jax",), layer="Conv2D")],
    [S(Kind.HARD_CRASH, "LSTM", (), ("torch",), "run", "RuntimeError: a | b", component="torch")],
]
ERFC = KnownIssue.model_validate({"id": "erfc", "title": "t", "link": "https://x.org/1", "class": "limitation",
                                  "match": {"error": "Erfc"}})


def _made() -> tuple[list[Bug], list[RootCause]]:
    rows = [ResultRow(id=f"c{i}", status="fail", kinds=[], backends={"a": "ok"}, case_file=f"cases/c{i}.pkl",
                      signatures=[s.to_json() for s in group]) for i, group in enumerate(CASES * 2)]
    bugs = unique_bugs(rows, [ERFC])
    return bugs, root_causes(bugs)


def test_a_root_cause_and_a_bug_round_trip_through_their_serialised_form():
    bugs, roots = _made()
    assert len(bugs) == len(CASES) and len(roots) == len(CASES) - 2  # a rider and a pair join a root
    for g in roots:
        text = json.loads(json.dumps(g.to_json()))
        back = RootCause.from_json(text)
        assert back == g and back.to_json() == text and type(back.root) is type(g.root)
    for b in bugs:
        text = json.loads(json.dumps(b.to_json()))
        back = Bug.from_json(text)
        assert back == b and back.to_json() == text
    # every kind of root key reads back from its text, a separator inside an error too
    keys = {b.root for b in bugs}
    assert {type(k) for k in keys} == {CrashRoot, NumericRoot, KnownRoot}
    assert any(isinstance(k, CrashRoot) and " | " in k.template for k in keys)
    assert any(isinstance(k, NumericRoot) and k.source is not None for k in keys)
    assert all(parse_root(str(k)) == k for k in keys)


def test_root_causes_group_by_typed_keys_and_fold_a_pair_into_its_odd_root():
    bugs, roots = _made()
    dense = [g for g in roots if g.kind == Kind.DEVIATION and g.api == "Dense"]
    odd = next(g for g in dense if g.root.told)
    assert odd.root == NumericRoot("numeric", ("torch",), "Dense") and odd.odd == ("torch",)
    assert [m.root for m in odd.members] == [odd.root, NumericRoot("numeric", (), "Dense", ("jax", "torch"))]
    assert (odd.signatures, odd.cases) == (2, 4)
    # the pair without an odd root of its own stays, printed as the pair
    (pair,) = [g for g in dense if not g.root.told]
    assert str(pair.root) == "numeric | ?jax,tensorflow | Dense"
    known = next(g for g in roots if g.known_id)
    assert known.root == KnownRoot(ERFC.link) and known.status == "known upstream" and known.klass == "limitation"
    crash = next(g for g in roots if g.op == "Conv3DBackpropInput")
    assert crash.root == root_of(CASES[4][0]) and crash.klass == "bug" and crash.signatures == 2
    with pytest.raises(ValueError, match="not both"):
        NumericRoot("numeric", ("torch",), "Dense", ("jax", "torch"))


def test_the_report_and_the_printed_summary_read_the_typed_records(tmp_path, capsys):
    from audee.cli import print_roots
    from audee.report.bugreports import write_bug_reports
    from audee.report.write import bug_table, root_table

    bugs, roots = _made()
    reports = write_bug_reports(roots, tmp_path)
    assert set(reports) == {g.root for g in roots if g.klass == "bug" and g.status == "new"}
    table = root_table(roots, tmp_path, reports)
    assert list(table["class"]) == [g.klass for g in roots] and list(table["cases"]) == [g.cases for g in roots]
    assert sum(table["report"] != "-") == len(reports)
    linked = bug_table(bugs, tmp_path, reports)
    assert sum(linked["report"] != "-") == sum(b.root in reports for b in bugs) > 0
    # a summary's roots read back print as the records made them
    print_roots(roots, len(bugs))
    made = capsys.readouterr().out
    print_roots([RootCause.from_json(json.loads(json.dumps(g.to_json()))) for g in roots], len(bugs))
    assert capsys.readouterr().out == made and "?jax,tensorflow" in made
