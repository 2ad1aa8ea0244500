"""The one label-flip rule and the one distance module, without any framework: the
inconsistency oracle, the search's per-individual judgement, the fitness functions and
localization all read these."""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Kind, Outcome
from audee.fitness import inconsistency_fitness, relative_inconsistency_fitness
from audee.oracle.distance import SCALE_FLOOR, layer_distance, per_input_distance, relative_distance
from audee.oracle.inconsistency import inconsistency_findings
from audee.oracle.labels import label_flips
from audee.settings import TIE_MARGIN

NAN, INF = float("nan"), float("inf")


def _rows(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype=np.float32)


def test_flips_ties_and_agreement():
    a = _rows([0.9, 0.1, 0.0], [0.5, 0.5 + 1e-7, 0.0], [0.2, 0.7, 0.1])
    b = _rows([0.1, 0.9, 0.0], [0.5 + 1e-7, 0.5, 0.0], [0.2, 0.7, 0.1])
    flips, ties, (la, lb) = label_flips(a, b, TIE_MARGIN)
    assert flips.tolist() == [True, False, False]     # row 0 flips
    assert ties.tolist() == [False, True, False]      # row 1: labels differ inside the margin
    assert la.tolist() == [0, 1, 1] and lb.tolist() == [1, 0, 1]
    # tie_margin 0: the paper's plain definition, the tie is a flip
    flips, ties, _ = label_flips(a, b, 0.0)
    assert flips.tolist() == [True, True, False] and not ties.any()


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_a_row_with_nan_or_inf_on_either_side_is_neither_flip_nor_tie(bad):
    a = _rows([bad, 0.1, 0.0], [0.9, 0.1, 0.0], [0.9, 0.1, 0.0])
    b = _rows([0.1, 0.9, 0.0], [0.1, 0.9, bad], [0.1, 0.9, 0.0])
    for x, y in ((a, b), (b, a)):
        flips, ties, _ = label_flips(x, y, TIE_MARGIN)
        assert flips.tolist() == [False, False, True]  # only the finite row counts
        assert not ties.any()


def test_different_shapes_flip_every_row():
    flips, ties, _ = label_flips(np.zeros((3, 4)), np.zeros((3, 5)), TIE_MARGIN)
    assert flips.all() and not ties.any()


def _outcome(name: str, out: np.ndarray) -> Outcome:
    return Outcome(name, logits=out, output=out, nonfinite=[] if np.isfinite(out).all() else ["logits"])


def test_oracle_uses_the_rule_row_by_row():
    """One NaN row on one backend leaves the other rows judged (the NaN oracle takes that row)."""
    a = _rows([NAN, 0.1], [0.9, 0.1], [0.5, 0.5 + 1e-7], [0.9, 0.1])
    b = _rows([0.1, 0.9], [0.1, 0.9], [0.5 + 1e-7, 0.5], [0.9, 0.1])
    findings, pairs = inconsistency_findings([_outcome("x", a), _outcome("y", b)], TIE_MARGIN)
    (f,) = findings
    assert f.kind == Kind.INCONSISTENCY and f.detail.inputs == [1] and f.detail.ties == 1
    assert pairs["x|y"]["flips"] == 1 and pairs["x|y"]["ties"] == 1
    # every row non-finite on one side: no inconsistency at all
    findings, _ = inconsistency_findings([_outcome("x", np.full((2, 2), NAN, np.float32)),
                                          _outcome("y", _rows([0.1, 0.9], [0.9, 0.1]))], TIE_MARGIN)
    assert findings == []


def test_judging_functions_have_no_literal_tie_margin_default():
    import inspect

    from audee.search.evaluate import PopulationEvaluator

    for fn in (inconsistency_findings, label_flips, PopulationEvaluator.__init__):
        assert inspect.signature(fn).parameters["tie_margin"].default is inspect.Parameter.empty


def test_definition4_distance_and_its_non_finite_rule():
    a = _rows([1.0, 2.0], [INF, 0.0], [NAN, 1.0], [INF, 1.0])
    b = _rows([1.0, 4.0], [INF, 0.0], [NAN, 1.0], [1.0, 1.0])
    assert per_input_distance(a, b).tolist() == [1.0, 0.0, 0.0, INF]
    assert layer_distance(a[:3], b[:3]) == pytest.approx(1 / 3)
    assert layer_distance(a, b) == INF
    assert layer_distance(np.zeros((2, 3)), np.zeros((2, 4))) == INF


def test_relative_distance_is_scale_free():
    a = _rows([1.0, 2.0], [0.0, 0.0], [1.0, NAN])
    b = _rows([1.0, 4.0], [0.0, 0.0], [1.0, 1.0])
    rel = relative_distance(a, b)
    assert rel[0] == pytest.approx(1.0 / ((1.5 + 2.5) / 2 + SCALE_FLOOR))
    assert rel[1] == 0.0 and rel[2] == INF          # agreement at zero scale; NaN on one side
    np.testing.assert_allclose(relative_distance(a[:1] * 1e6, b[:1] * 1e6), rel[:1], rtol=1e-6)


def test_fitness_functions_read_the_distance_module():
    outs = {"x": _rows([1.0, 2.0], [0.0, 0.0]), "y": _rows([1.0, 4.0], [0.0, 0.0]),
            "z": _rows([1.0, 2.0], [0.0, 3.0])}
    best, pair = inconsistency_fitness(outs)  # the deviation oracle's normalized score (tests/test_deviation.py)
    np.testing.assert_allclose(best, [2.0 / (1e-5 + 1e-3 * 4.0), 3.0 / (1e-5 + 1e-3 * 3.0)])
    assert pair == ["x|y", "x|z"]
    rel, rpair = relative_inconsistency_fitness(outs)
    np.testing.assert_allclose(rel, [max(relative_distance(outs[p], outs[q])[i] for p, q in
                                         (("x", "y"), ("x", "z"), ("y", "z"))) for i in range(2)])
    assert rpair[1] in ("x|z", "y|z")


def test_an_empty_output_has_no_label_and_no_distance():
    """A layer can produce an empty tensor (a crop to nothing): no label to flip, no
    distance, no deviation, and no crash of the oracles (it once stopped a campaign)."""
    from audee.oracle.deviation import compare
    from audee.oracle.distance import per_input_distance

    empty = np.zeros((3, 0, 4), np.float32)
    got = label_flips(empty, empty, TIE_MARGIN)
    assert not got.flips.any() and not got.ties.any() and (got.labels[0] == -1).all()
    np.testing.assert_array_equal(per_input_distance(empty, empty), [0.0, 0.0, 0.0])
    assert compare(empty, empty)["score"] == 0.0
    findings, _ = inconsistency_findings([_outcome("x", empty), _outcome("y", empty)], TIE_MARGIN)
    assert findings == []
