"""The finding kind table (audee.cases.kinds) is the one list of kinds: every kind it holds is
written to a case file, read back and judged again as a reproduction would judge it, and
every list of kinds elsewhere is the table's."""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases import kinds
from audee.triage import known
from audee.triage import rootcause
from audee.oracle import verdicts
from audee.campaign import localize_stage
from audee.cases.case import Finding, Kind, Verdict
from audee.oracle import odd, precision
from audee.store import CaseRecord
from audee.store import caserecord
from audee.oracle.verdicts import finding_holds, main_failure, verdict_holds
from tests.helpers import tiny_cnn

PAIR = ["tensorflow", "torch"]


def _finding(k: kinds.FindingKind, backends: list[str] | None = None) -> Finding:
    """One finding of kind ``k`` with the detail its oracle would give it (what the
    "still holds" rules and the odd-backend rules read)."""
    one = k.name.startswith(("equivalence", "precision"))  # one backend, against itself or float64
    detail = {"pair": "|".join(PAIR)} if k.odd == "pairs" or k.name.startswith("train_deviation") else {}
    if k.name.startswith("equivalence"):
        detail = {"rule": "float64", "backend": "torch", "reason": "values"}
    if k.name.startswith("precision"):
        detail = {"backend": "torch", "reference": "jax", "score": 3.0}
    return Finding(k.name, list(backends or (["torch"] if one else PAIR)), detail)


def _record(verdict: Verdict) -> CaseRecord:
    return CaseRecord.from_dict({
        "id": "x-v00001", "spec": tiny_cnn().to_json(), "weights": {"d": [np.ones((2, 2), np.float32)]},
        "inputs": {"image": np.zeros((1, 12, 12, 1), np.float32)},
        "backends": [{"label": b, "target": t, "device": "cpu"} for b, t in (
            ("tensorflow", "audee.backends.keras_backends:TensorflowBackend"),
            ("torch", "audee.backends.keras_backends:TorchBackend"))],
        "verdict": verdict.to_json(), "versions": {}}, new=True)


def test_a_case_record_holding_every_kind_is_written_read_and_reproduced(tmp_path):
    recorded = Verdict([_finding(k) for k in kinds.KINDS])
    back = CaseRecord.from_file(_record(recorded).to_file(tmp_path / "c.pkl")).verdict_obj()
    assert [f.kind for f in back.findings] == list(kinds.NAMES)
    for f, k in zip(back.findings, kinds.KINDS):
        assert type(f.detail) is k.detail and f.is_failure == k.failure
    assert back.to_json() == recorded.to_json() and back.status == "fail"
    # a reproduction judges the read-back verdict: every finding, failure or not, holds again
    assert verdict_holds(recorded, back)
    assert all(finding_holds(f, back.findings) for f in recorded.findings)
    assert main_failure(back.findings).kind == Kind.INCONSISTENCY


@pytest.mark.parametrize("k", kinds.KINDS, ids=lambda k: k.name)
def test_each_kind_holds_by_its_own_rule(k):
    recorded = _finding(k)
    assert finding_holds(recorded, [_finding(k)])
    assert not finding_holds(recorded, [_finding(other) for other in kinds.KINDS if other is not k])
    elsewhere = _finding(k, ["jax"])
    assert not finding_holds(recorded, [elsewhere])
    shifted = _finding(k, [recorded.backends[-1], "jax"])  # shares one backend with the recorded one
    assert finding_holds(recorded, [shifted]) == (k.holds is kinds.shares_backend)
    if k.holds is kinds.same_rule_same_backends:
        other_rule = _finding(k)
        other_rule.detail.rule = "transpose"
        assert not finding_holds(recorded, [other_rule])


def test_every_name_has_one_entry_and_the_facts_agree():
    names = [v for a, v in vars(Kind).items() if a.isupper() and isinstance(v, str)]
    assert sorted(names) == sorted(kinds.NAMES) and len(kinds.NAMES) == len(kinds.KINDS)
    ranks = [k.main for k in kinds.KINDS if k.failure]
    assert sorted(ranks) == list(range(len(kinds.FAILURES)))  # every failure ranked once, nothing else
    assert all(k.main is None for k in kinds.KINDS if not k.failure)
    for k in kinds.KINDS:
        if k.accumulated:  # an accumulated kind: the same detail, not a failure, no kind of its own to become
            acc = kinds.BY_NAME[k.accumulated]
            assert k.failure and not acc.failure and acc.detail is k.detail and acc.accumulated is None


def test_every_rooms_list_of_kinds_is_the_tables():
    """Each room reads the table's own list (the same object, not a copy of today's kinds), so
    a kind added to the table is in every room's list without a line elsewhere: a case file
    once refused a kind that another, hand-kept list lacked."""
    assert Kind.FAILURES is kinds.FAILURES
    assert caserecord.FINDING_KINDS is kinds.NAMES
    assert verdicts.MAIN_FAILURE_ORDER is kinds.MAIN_FAILURE_ORDER
    assert known.KINDS is kinds.FAILURES
    assert odd.PAIRWISE is kinds.PAIRWISE
    assert rootcause.CRASHES is kinds.CRASHES
    assert precision.CULPRIT_KINDS is kinds.CULPRIT_KINDS
    assert localize_stage.CONSISTENT_KINDS == set(kinds.with_accumulated(Kind.DEVIATION))


def test_a_bug_report_shows_the_evidence_of_every_failure_kind():
    """A bug report's "Expected and actual" has lines for each failure kind (a hand-kept chain of
    kinds had missed equivalence and precision: their reports said the verdict held none)."""
    from audee.report.bugreports import EVIDENCE

    assert set(EVIDENCE) == set(kinds.FAILURES)


#: the kinds the table was made with; their facts below stay as they are whatever kind is added
TODAY = frozenset({"hard_crash", "divergent_acceptance", "nan", "inconsistency", "deviation", "train_deviation",
                   "train_nan", "equivalence", "precision", "consistent_rejection", "nan_propagated",
                   "deviation_accumulated", "train_deviation_accumulated", "equivalence_accumulated",
                   "precision_accumulated"})


def _today(names):
    """``names`` restricted to :data:`TODAY`, in their order: a new kind leaves the checks as they are."""
    return tuple(n for n in names if n in TODAY)


def test_todays_kinds_keep_their_facts():
    """The derived lists, read for the kinds the table started with: the same kinds in the same
    order where order is read (the hand-kept lists they replaced; the case file's list gained
    ``precision_accumulated``, which it lacked)."""
    assert TODAY <= set(kinds.NAMES)
    assert _today(kinds.FAILURES) == ("hard_crash", "divergent_acceptance", "nan", "inconsistency", "deviation",
                                      "train_deviation", "train_nan", "equivalence", "precision")
    assert _today(kinds.NAMES) == (*_today(kinds.FAILURES), "consistent_rejection", "nan_propagated",
                                   "deviation_accumulated", "train_deviation_accumulated",
                                   "equivalence_accumulated", "precision_accumulated")
    assert _today(kinds.MAIN_FAILURE_ORDER) == ("inconsistency", "nan", "hard_crash", "divergent_acceptance",
                                                "precision", "deviation", "equivalence", "train_nan",
                                                "train_deviation")
    assert set(_today(kinds.PAIRWISE)) == {"deviation", "inconsistency"}
    assert set(_today(kinds.CRASHES)) == {"hard_crash", "divergent_acceptance"}
    assert set(_today(kinds.NUMERIC)) == {"deviation", "inconsistency", "precision"}
    assert set(_today(kinds.CULPRIT_KINDS)) == {"deviation", "deviation_accumulated", "inconsistency"}
    assert set(_today(kinds.TRAINING_FAILURES)) == {"train_deviation", "train_nan"}
    assert {n: t.__name__ for n, t in kinds.DETAIL_TYPES.items() if n in TODAY} == {
        "hard_crash": "HardCrashDetail", "divergent_acceptance": "DivergentAcceptanceDetail",
        "consistent_rejection": "ConsistentRejectionDetail", "nan": "NanDetail", "nan_propagated": "NanDetail",
        "inconsistency": "InconsistencyDetail", "deviation": "DeviationDetail",
        "deviation_accumulated": "DeviationDetail", "train_deviation": "TrainDeviationDetail",
        "train_deviation_accumulated": "TrainDeviationDetail", "train_nan": "TrainNanDetail",
        "equivalence": "EquivalenceDetail", "equivalence_accumulated": "EquivalenceDetail",
        "precision": "PrecisionDetail", "precision_accumulated": "PrecisionDetail"}
    assert [kinds.root_family(n) for n in ("hard_crash", "nan", "precision", "train_nan", "made_up")] == \
        ["crash", "nan", "numeric", "train_nan", "made_up"]
