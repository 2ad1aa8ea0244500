"""Each finding kind's detail is a declared type (audee.records.findings), and the
localization report is one too (audee.records.localization): their JSON is the dicts' JSON
before them (same keys, same values, NaN/Inf kept), numpy values come out plain, old files
(keys missing) load, and keys a type does not declare survive a round trip.  No framework."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pydantic import ValidationError

from audee.cases.case import Finding, Kind, Verdict
from audee.cases.kinds import DETAIL_TYPES, parse_detail
from audee.records.findings import (BackendError, ConsistentRejectionDetail, Detail, DeviationDetail,
                                    DivergentAcceptanceDetail, HardCrashDetail, InconsistencyDetail, NanDetail,
                                    NanExample, NanPattern, OwnScore)
from audee.records.localization import (Evidence, LocalizationRecord, LocalizationReport, LocalizedPair,
                                        RankedCandidate, RateRow, Round, Source, Trial, Trigger, parse_localization)

INF, NAN = float("inf"), float("nan")

#: one detail of every kind, as its oracle and the Executor write it (numpy values included)
DETAILS = {
    Kind.HARD_CRASH: {"how": "signal", "phase": "run", "message": "killed by signal 11", "log_tail": "...",
                      "odd": ["torch"], "odd_rule": "minority of 3"},
    Kind.DIVERGENT_ACCEPTANCE: {"accepted": ["jax"], "errors": {"torch": {"phase": "build", "message": "no",
                                                                           "traceback": "Traceback ..."}},
                                "odd": [], "odd_rule": "two backends: cannot tell"},
    Kind.CONSISTENT_REJECTION: {"errors": {"jax": {"phase": "build", "message": "bad"},
                                           "torch": {"phase": "build", "message": "bad too"}}},
    Kind.NAN: {"first_layer": {"a": "conv"}, "layers": {"a": ["conv", "out"]}, "strong": True,
               "finite_backends": ["b"], "input_nonfinite": np.bool_(False), "input_overflow_scale": False,
               "patterns": {"a|b": {"first_layer": "conv", "first_layer_from": "layers", "elements": np.int64(3),
                                    "example": {"array": "output", "index": [0, 1], "a": "nan", "b": "finite"},
                                    "arrays": ["output"], "layer_elements": 2,
                                    "layer_example": {"index": [np.int32(0), 4], "a": "+inf", "b": "finite"},
                                    "own_layer": "conv", "overflow_boundary": False, "overflow_evidence": "scale"}},
               "counts": {"a": {"nan": 3, "+inf": 0, "-inf": 0}}, "ran": 2, "agreed": False,
               "overflow_boundary": False, "odd": [], "odd_rule": "two backends: cannot tell"},
    Kind.INCONSISTENCY: {"pair": "a|b", "distance": np.float64(INF), "inputs": [1, 3], "n_flips": 2, "ties": 0,
                         "input_distance": {"1": INF, "3": np.float32(0.5)},
                         "shape_mismatch": {"a": [4, 10], "b": [4, 9]},
                         "layer_distances": {"conv": NAN, "out": 0.25}, "odd": [], "odd_rule": "x"},
    Kind.DEVIATION: {"pair": "a|b", "tensor": "logits", "score": np.float32(3.5), "max_abs": 0.1, "max_rel": NAN,
                     "n_out": np.int64(4), "n": 40, "rows": [2, 0], "dtype": "tf32",
                     "tolerance": {"rtol": 1e-2, "atol": 1e-3}, "first_layer": None, "own_layers": ["dense"],
                     "own": {"dense": {"score": 2.0, "max_abs": 0.1, "max_rel": 0.01, "self_score": 0.1},
                             "conv": {"score": 0.5, "max_abs": 0.0, "max_rel": 0.0}},
                     "ill_conditioned": ["conv"], "label_flips": 3, "flip_inputs": [1, 4, 7],
                     "odd": ["b"], "odd_rule": "minority of 3"},
}


def _same(a, b) -> bool:
    """Equal JSON values, NaN equal to NaN, and no numpy type left in ``a``."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    assert not isinstance(a, np.generic), a
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and type(a) is type(b.item() if isinstance(b, np.generic) else b)


@pytest.mark.parametrize("kind", sorted(DETAILS))
def test_every_kind_round_trips_with_nonfinite_and_numpy_values(kind: str):
    f = Finding(kind, ["a", "b"], DETAILS[kind])
    assert type(f.detail) is DETAIL_TYPES[kind]
    out = f.to_json()
    assert _same(out["detail"], DETAILS[kind])                    # same keys, same order, same values
    text = json.dumps(out)                                        # NaN/Inf written as JSON allows them
    back = Finding.from_json(json.loads(text))
    assert type(back.detail) is DETAIL_TYPES[kind] and _same(back.to_json()["detail"], out["detail"])
    assert Verdict.from_json(Verdict([f]).to_json()).findings[0].to_json() == Finding.from_json(out).to_json()


def test_every_kind_has_a_detail_type():
    kinds = [v for k, v in vars(Kind).items() if k.isupper() and isinstance(v, str)]
    assert set(kinds) == set(DETAIL_TYPES)
    assert DETAIL_TYPES[Kind.NAN_PROPAGATED] is NanDetail and DETAIL_TYPES[Kind.DEVIATION_ACCUMULATED] is DeviationDetail


def test_fields_are_attributes_and_typed():
    d = Finding(Kind.DEVIATION, ["a", "b"], DETAILS[Kind.DEVIATION]).detail
    assert d.pair == "a|b" and d.n_out == 4 and type(d.n_out) is int and type(d.score) is float
    assert d.tolerance.rtol == 1e-2 and d.own["dense"].self_score == 0.1 and d.own["conv"].self_score is None
    n = Finding(Kind.NAN, ["a", "b"], DETAILS[Kind.NAN]).detail
    p = n.patterns["a|b"]
    assert isinstance(p, NanPattern) and p.example.codes() == {"a": "nan", "b": "finite"}
    assert p.layer_example.array is None and p.layer_example.index == [0, 4]
    c = Finding(Kind.DIVERGENT_ACCEPTANCE, ["b"], DETAILS[Kind.DIVERGENT_ACCEPTANCE]).detail
    assert isinstance(c.errors["torch"], BackendError) and c.errors["torch"].traceback == "Traceback ..."


def test_keys_written_later_appear_only_once_written():
    """``ill_conditioned``, ``odd`` ...: absent from the JSON until set, as the dicts had them."""
    d = DeviationDetail(pair="a|b", first_layer=None, own_layers=[], own={})
    assert list(d.to_json()) == ["pair", "first_layer", "own_layers", "own"]
    assert d.ill_conditioned is None and not d.written("ill_conditioned") and d.written("first_layer")
    d.own["x"] = OwnScore(score=2.0, max_abs=1.0, max_rel=0.5)
    d.own["x"].self_score = 0.25
    d.ill_conditioned = ["x"]
    d.odd, d.odd_rule = [], "all 3 alike"
    assert d.to_json() == {"pair": "a|b", "first_layer": None, "own_layers": [], "own": {
        "x": {"score": 2.0, "max_abs": 1.0, "max_rel": 0.5, "self_score": 0.25}}, "ill_conditioned": ["x"],
        "odd": [], "odd_rule": "all 3 alike"}
    i = InconsistencyDetail(pair="a|b", inputs=[1])
    i.labels = {"a": [1], "b": [2]}
    assert "shape_mismatch" not in i.to_json() and i.to_json()["labels"] == {"a": [1], "b": [2]}


def test_an_old_detail_missing_fields_loads_with_defaults():
    old = Finding.from_json({"kind": "nan", "backends": ["a"], "detail": {"first_layer": {"a": "conv"}}})
    d = old.detail
    assert isinstance(d, NanDetail) and d.patterns == {} and not d.strong and d.ran == 2 and d.odd is None
    assert old.to_json()["detail"] == {"first_layer": {"a": "conv"}}   # nothing invented on the way back
    dev = parse_detail(Kind.DEVIATION, {"pair": "a|b"})
    assert dev.rows is None and dev.own_layers == [] and dev.dtype is None and dev.tolerance is None
    flip = parse_detail(Kind.INCONSISTENCY, {"pair": "a|b", "inputs": [0, 2]})
    assert flip.n_flips is None and flip.flips == 2 and flip.shape_mismatch is None
    assert Finding(Kind.HARD_CRASH, ["a"]).detail == HardCrashDetail()
    assert Finding(Kind.CONSISTENT_REJECTION, ["a"], None).detail == ConsistentRejectionDetail()


def test_an_unknown_key_survives_a_round_trip():
    data = {**DETAILS[Kind.INCONSISTENCY], "from_the_future": {"x": [1, 2]}}
    f = Finding.from_json({"kind": Kind.INCONSISTENCY, "backends": ["a", "b"], "detail": data})
    assert f.detail.written("from_the_future") and f.to_json()["detail"]["from_the_future"] == {"x": [1, 2]}
    nested = {"patterns": {"a|b": {"first_layer": "c", "newer": 1}}}
    assert parse_detail(Kind.NAN, nested).to_json() == nested


def test_an_unknown_kind_gets_a_generic_detail():
    d = parse_detail("made_up", {"pair": "a|b", "x": np.float32(1.5)})
    assert type(d) is Detail and d.to_json() == {"pair": "a|b", "x": 1.5}
    f = Finding("made_up", ["a"], {"y": 1})
    assert not f.is_failure and f.to_json()["detail"] == {"y": 1}


def test_a_wrong_value_is_refused_by_its_type():
    with pytest.raises(ValidationError):
        parse_detail(Kind.DEVIATION, {"own_layers": "dense"})
    with pytest.raises(ValidationError):
        parse_detail(Kind.NAN, {"patterns": {"a|b": 3}})


def test_writers_build_the_types():
    """Oracles construct the typed detail; a mapping given to Finding is parsed, a detail kept."""
    d = DivergentAcceptanceDetail(accepted=["a"], errors={"b": BackendError(phase="run", message="m")})
    f = Finding(Kind.DIVERGENT_ACCEPTANCE, ["b"], d)
    assert f.detail is d and f.to_json()["detail"] == {"accepted": ["a"], "errors": {"b": {"phase": "run",
                                                                                            "message": "m"}}}
    ex = NanExample(array="output", index=[0], **{"torch@cuda:tf32": "nan", "jax": "finite"})
    assert ex.to_json() == {"array": "output", "index": [0], "torch@cuda:tf32": "nan", "jax": "finite"}


# ---- the localization report --------------------------------------------------------------------------
def _report() -> LocalizationReport:
    r = LocalizationReport("c1", Kind.INCONSISTENCY, ["jax", "torch"],
                           sources=[Source("conv", "Conv2D", "padding", "same", "valid", Kind.INCONSISTENCY, 3.0)])
    rnd = Round("conv", [RateRow(layer="conv", api="Conv2D", distance=INF, rate=np.float64(2e4)),
                         RateRow(layer="out", api="Dense", distance=0.5, rate=NAN)])
    rnd.trials.append(Trial("conv", "padding", "same", "valid", "removed", 3.0))
    rnd.trials.append(Trial("conv", "kernel_size", [3, 3], (1, 1), "fails", context={"strides": 2}))
    rnd.candidates.append(RankedCandidate(layer="conv", api="Conv2D", param="padding", old="same", origin="config",
                                          removing=["valid"], default="valid", default_removes=True, score=1.0,
                                          named=True, share=1.0, evidence=Evidence(share=1.0, default=1.0)))
    r.rounds.append(rnd)
    r.cradle = ["conv"]
    r.trigger = Trigger(layer="conv", sanitized=["x: 1 NaN/Inf"])
    return r


def test_a_report_dumps_as_before_and_round_trips():
    j = _report().to_json()
    assert list(j) == ["case_id", "kind", "backends", "rounds", "sources", "cradle", "reproduced", "note",
                       "trigger", "error", "repro", "candidates"]
    assert j["rounds"][0]["table"][0] == {"layer": "conv", "api": "Conv2D", "distance": "inf", "rate": 20000.0}
    assert j["rounds"][0]["baseline_rate"] == "nan" and j["rounds"][0]["trials"][1]["new"] == [1, 1]
    assert j["candidates"][0]["evidence"] == {"share": 1.0, "default": 1.0}       # masking unknown: absent
    assert j["candidates"] == j["rounds"][0]["candidates"] and j["trigger"] == {"layer": "conv",
                                                                                  "sanitized": ["x: 1 NaN/Inf"]}
    text = json.dumps(j, allow_nan=False)                          # no NaN literal in a report
    back = LocalizationReport.from_json(json.loads(text))
    assert back.to_json() == j and math.isinf(back.rounds[0].table[0].distance)
    assert back.candidates[0].evidence.masking is None and back.top_source() == ("Conv2D", "padding", "same")


def test_an_old_report_without_newer_keys_loads():
    old = {"case_id": "c", "kind": "inconsistency", "backends": ["a", "b"], "cradle": [], "reproduced": True,
           "note": "", "sources": [{"layer": "l", "api": "Dense", "param": "units", "old": 3, "new": 4,
                                    "kind": "inconsistency", "rate": "nan"}],
           "rounds": [{"layer": "l", "table": [], "trials": [], "baseline_rate": "nan",
                       "candidates": [{"layer": "l", "param": "units", "old": 3, "removing": [4]}]}]}
    r = LocalizationReport.from_json(old)
    assert r.trigger is None and r.error is None and r.repro is None and r.rounds[0].baseline == ""
    assert r.candidates[0].evidence == Evidence() and r.candidates[0].named is False
    assert r.to_json()["repro"] is None and r.sources[0].signature() == ("l", "units")


def test_a_stage_file_keeps_its_keys_and_reads_back():
    pick = {"key": ("u", "dnn", "a|b", ""), "unit": "u", "seed": "lenet5", "pair": "a|b", "level": "NET",
            "dnn": "dnn", "case_id": "c1", "case_file": "cases/c1.pkl"}
    rec = LocalizationRecord.of_pick(pick)
    rec.reproduced, rec.note, rec.layers, rec.top1_rate = True, "", 9, INF
    rec.localized = [LocalizedPair(layer="conv", api="Conv2D", param="padding", old="same", new="valid")]
    rec.cradle, rec.report, rec.seconds = ["conv"], _report(), 1.5
    doc = rec.to_json()
    assert list(doc) == ["unit", "seed", "pair", "level", "dnn", "case_id", "case_file", "key", "reproduced",
                         "note", "layers", "top1_rate", "localized", "cradle", "report", "seconds"]
    assert doc["key"] == ["u", "dnn", "a|b", ""] and doc["report"] == _report().to_json()
    back = LocalizationRecord.from_json(json.loads(json.dumps(doc)))
    assert back.to_json() == json.loads(json.dumps(doc)) and "report" not in back.summary()
    assert back.top_source() == ("Conv2D", "padding", "same")
    failed = LocalizationRecord.of_pick(pick)
    failed.error, failed.report, failed.seconds = "RuntimeError: x", None, 0.1
    assert list(failed.to_json())[-3:] == ["error", "report", "seconds"] and failed.to_json()["report"] is None
    assert isinstance(parse_localization({"localized": doc["localized"]}), LocalizationRecord)
    assert isinstance(parse_localization({"sources": []}), LocalizationReport)


def test_a_case_file_with_a_wrongly_typed_detail_is_one_line_naming_the_field():
    from audee.core.errors import CaseFileError
    from audee.store.caserecord import CaseRecord
    from tests.test_case_security import _record

    good = {"kind": "deviation", "backends": ["a", "b"], "detail": {"pair": "a|b", "own_layers": ["d"]}}
    rec = CaseRecord.from_dict(_record([], verdict={"status": "fail", "findings": [good]}))
    assert rec.verdict_obj().findings[0].detail.own_layers == ["d"]
    bad = {**good, "detail": {"pair": "a|b", "own": {"d": {"score": "high"}}}}
    with pytest.raises(CaseFileError, match=r"verdict\.findings\[0\]\.detail\.own\.d\.score") as err:
        CaseRecord.from_dict(_record([], verdict={"status": "fail", "findings": [bad]}))
    assert "\n" not in str(err.value)
