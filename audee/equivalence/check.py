"""The equivalence oracle's runs: each selected rule's equivalent model beside the test case,
on every backend that ran it, judged per backend (:mod:`audee.oracle.equivalence`).

Called by :meth:`audee.engine.execute.Executor.judge` once a case's outcomes are in: the rewrites
are built (the workers cache them like any spec; a batch rule's is the case's own spec)
and run at once on every backend, then each backend's pair of runs is judged.  A finding
about values or non-finite patterns is then diagnosed on that backend:

1. the original and its equivalent run again with their layers kept in the worker, and
   the mapped layers are compared on the worst rows: ``first_layer``, the first one out of
   tolerance (or whose patterns differ);
2. each rewritten layer out of tolerance (the first, then those that raise the score most
   over their inputs', at most :data:`OWN_LAYER_CHECKS`) is judged alone: its one-layer
   model with and without the rule, fed the original's input of that layer, on the same
   backend (``own``);
3. a layer that differs alone is blamed (``layer``) when it is well-conditioned there
   (moving its input by rounding noise moves its output by less than a tenth of the
   difference: :func:`audee.oracle.attribution.attribute`); else it is ``ill_conditioned``;
4. when every layer judged is cleared, the finding is ``equivalence_accumulated`` (no
   failure): rounding changed by the rewrite (a re-associated sum), amplified along the
   model.

A rule that witnesses refusals (``Rule.witnesses_refusals``: the axis rule, which only moves
axes) runs its rewrite on the backends that refused the case cleanly too; where the rewrite
runs, the refusal is the original layer's (``original_rejected``, pinned on the one layer the
rule moved, not diagnosed further).

A rejected (or crashed) rewrite is pinned on the first rewritten layer whose one-layer
rewrite the backend refuses too.  A rewrite refused while its weights are put in is
audee's own fault (a rule mapped them wrongly): logged, never a finding.
"""
from __future__ import annotations

import logging
import uuid
from typing import Any

import numpy as np

from audee.cases.case import Finding, Kind, Outcome, TestCase
from audee.equivalence.rules import Rewrite, Rule, safe_shapes
from audee.oracle.compute_dtype import layer_compute_dtype
from audee.oracle.attribution import Alone, attribute, batch_of
from audee.oracle.deviation import (FULL, Tolerance, Tolerances, compare, jump_order, pair_compute, perturbed,
                                    rounding_for)
from audee.oracle.equivalence import judge_rewrite, pattern_cleared, settle
from audee.oracle.nan import compare_codes, condition_pattern
from audee.records.findings import OwnScore
from audee.cases.spec import one_layer_model, weights_key

log = logging.getLogger(__name__)

#: a rule judged exactly (``Rule.tolerance == "exact"``: the round trips): any difference is out of
#: tolerance (the atol keeps scores finite); its layers are still judged alone with the dtype's tolerance
EXACT = Tolerances(**{dt: Tolerance(0.0, 1e-300) for dt in ("float32", "float16", "bfloat16", "tf32")})
DIAGNOSE_ROWS = 8        # rows whose layers are fetched for a finding
OWN_LAYER_CHECKS = 6     # rewritten layers judged alone per finding
REJECTION_CHECKS = 8     # rewritten layers tried alone to pin a rejected rewrite
#: a rule's status in a case's results row (``equivalence``): every backend agreed; some
#: backend failed it; only accumulated rounding; audee could not run it (logged)
STATUSES = ("pass", "fail", "accumulated", "harness")


def run_equivalence(ex: Any, case: TestCase, outcomes: dict[str, Outcome], rules: list[Rule], *,
                    diagnose: bool = True) -> tuple[list[Finding], dict[str, str]]:
    """The ``equivalence`` findings of ``case`` (whose ``outcomes`` are in) under ``rules``,
    and each applied rule's status (:data:`STATUSES`).  ``ex``: the Executor (its pool,
    tolerances, build cache and the case's phase tally)."""
    ran = [label for label, o in outcomes.items() if o.ok]
    # backends that refused the case cleanly: a rule that witnesses refusals runs its rewrite there too
    refused = [label for label, o in outcomes.items() if not o.ok and getattr(o.failure, "kind", None) == "error"]
    if not rules or not (ran or (refused and any(r.witnesses_refusals for r in rules))):
        return [], {}
    n = case.batch
    # each applied rule: its rewrite, the rewrite's inputs, the run tickets, the backends that could not build
    # it, the backends it runs on
    rewrites: list[tuple[Rule, Rewrite, dict[str, np.ndarray], dict[str, int], dict[str, Outcome], list[str]]] = []
    statuses: dict[str, str] = {}
    for rule in rules:
        try:
            rw = rule.apply(case.spec, case.weights)
        except Exception:  # noqa: BLE001 - a rule that breaks on a spec is audee's bug: logged, the case goes on
            log.exception("equivalence rule %s failed on case %s", rule.name, case.id)
            statuses[rule.name] = "harness"
            continue
        if rw is None or (rw.order == "reversed" and n < 2):
            continue
        on = ran + (refused if rule.witnesses_refusals else [])
        if not on:
            continue
        inputs = rw.map_inputs(case.inputs)
        built = ex.build(rw.spec)
        ready = [b for b in on if isinstance(built.get(b), dict)]
        failed = {b: Outcome(b, failure=built[b]) for b in on if b not in ready}
        tickets = ex.pool.submit_run(rw.spec, rw.weights, weights_key(rw.weights), inputs, labels=ready) \
            if ready else {}
        rewrites.append((rule, rw, inputs, tickets, failed, on))
        statuses[rule.name] = "pass"
    findings: list[Finding] = []
    kept: dict[str, str] = {}  # backend -> tag of the original's layers kept in its worker
    for rule, rw, inputs, tickets, failed, on in rewrites:
        replies = ex.pool.collect_run(tickets) if tickets else {}
        ex.add_phases(replies)
        got = dict(failed)
        for b, r in replies.items():
            got[b] = Outcome(b, failure=r) if not isinstance(r, dict) else \
                Outcome(b, logits=r["logits"], output=r["output"], nonfinite=r["nonfinite"], declared=r.get("declared"))
        rows = rw.rows(n)
        for b in on:
            tolerances = EXACT if rule.tolerance == "exact" else ex.tolerances
            f = judge_rewrite(rule.name, outcomes[b], got[b], rows, tolerances, nonfinite_exact=rule.nonfinite_exact,
                              inputs=case.inputs, rewritten_layers=rw.rewritten, compute=_compute(outcomes[b]),
                              widens=rule.widens, witnesses=rule.witnesses_refusals,
                              acceptance_only=rule.acceptance_only, layer_map=rw.layer_map)
            if f is None:
                continue
            if f.detail.reason == "rejected" and f.detail.phase == "weights":
                log.warning("equivalence rule %s: %s refused the weights mapped onto case %s's rewrite (audee's "
                            "fault, no finding): %s", rule.name, b, case.id, f.detail.message)
                statuses[rule.name] = "harness"
                continue
            if f.detail.reason == "shape" and f.detail.layer and f.detail.shapes:
                _with_input_shape(case, f.detail)
            if diagnose and f.detail.reason != "original_rejected":  # nothing of the original's to compare
                try:
                    _diagnose(ex, case, rule, rw, inputs, b, f, kept)
                except Exception:  # noqa: BLE001 - a diagnosis that breaks leaves the finding as judged
                    log.exception("diagnosing equivalence rule %s on %s, case %s", rule.name, b, case.id)
            findings.append(f)
            if f.kind == Kind.EQUIVALENCE:
                statuses[rule.name] = "fail"
            elif statuses[rule.name] == "pass":
                statuses[rule.name] = "accumulated"
    return findings, statuses


def _mode(ex: Any, backend: str) -> str:
    """The compute mode of ``backend`` in the pool (a GPU backend in TF32 mode: tf32)."""
    return pair_compute(ex.pool.precisions.get(backend, FULL))


def _compute(outcome: Outcome) -> str:
    """The compute mode one backend's two runs are judged in (its own: tf32 on a GPU in TF32 mode)."""
    return pair_compute(outcome.precision)


# ---- the diagnosis ------------------------------------------------------------------------------
def _keep(ex: Any, spec: Any, weights: Any, inputs: dict[str, np.ndarray], backend: str) -> str | None:
    """Run ``spec`` on ``backend`` with every layer's output kept in its worker; the tag."""
    tag = f"eq-{uuid.uuid4().hex[:12]}"
    got = ex.pool_run(spec, weights, weights_key(weights), inputs, labels=[backend], keep=tag)
    return tag if isinstance(got.get(backend), dict) else None


def _kept(ex: Any, backend: str, tag: str | None, rows: list[int]) -> dict[str, np.ndarray] | None:
    if tag is None:
        return None
    try:
        return ex.pool.call(backend, "kept_layers", tag=tag, rows=rows)
    except RuntimeError:
        return None


def _diagnose(ex: Any, case: TestCase, rule: Rule, rw: Rewrite, inputs: dict[str, np.ndarray], backend: str,
              f: Finding, kept: dict[str, str]) -> None:
    d = f.detail
    n = case.batch
    order_rows = rw.rows(n)
    if backend not in kept:
        tag = _keep(ex, case.spec, case.weights, case.inputs, backend)
        if tag is not None:
            kept[backend] = tag
    if d.reason in ("rejected", "crashed"):
        _pin_rejection(ex, case, rule, backend, kept.get(backend), f)
        return
    if d.reason == "shape" and d.layer is None:  # (a layer off its declaration names itself)
        _pin_shape(ex, case, rw, inputs, backend, kept.get(backend), f)
        return
    if d.reason not in ("values", "nonfinite"):
        return
    d.own = {}  # written, so that the finding's JSON lists it (empty when no layer could be judged)
    rows = batch_of([r for r in (d.rows or []) if r in order_rows][:DIAGNOSE_ROWS] or order_rows[:DIAGNOSE_ROWS],
                    case.inputs)
    orig = _kept(ex, backend, kept.get(backend), rows)
    rw_tag = _keep(ex, rw.spec, rw.weights, inputs, backend)
    new = _kept(ex, backend, rw_tag, [order_rows.index(r) for r in rows])
    if orig is None or new is None:
        return
    order = case.spec.topological_order()
    compute = _mode(ex, backend)
    scores: dict[str, dict[str, Any]] = {}
    first = None
    for name in order:
        mapped = rw.layer_map.get(name)
        if mapped is None or name not in orig or mapped not in new:
            continue
        a, b = np.asarray(orig[name]), np.asarray(new[mapped])
        if a.shape != b.shape:
            continue
        differs = False
        if d.reason == "nonfinite":
            differs = compare_codes(a, b) is not None and pattern_cleared(
                a, b, nonfinite_exact=rule.nonfinite_exact, inputs={k: v[rows] for k, v in case.inputs.items()},
                widens=rule.widens) is None
            scores[name] = {"score": 2.0 if differs else 0.0}
        else:
            got = compare(a, b, ex.tolerances, compute=compute)
            if got is not None:
                scores[name] = got
                differs = got["score"] > 1.0
        if differs and first is None:
            first = name
    d.first_layer = first
    rewritten = set(rw.rewritten)
    candidates = [x for x in jump_order(scores, order, case.spec.predecessors) if x in rewritten][:OWN_LAYER_CHECKS]
    att = attribute(candidates, order, lambda name: _alone(ex, case, rule, backend, name, orig, rows, f), own=d.own)
    d.layer = d.layer or (att.blamed[0] if att.blamed else None)
    if att.ill_conditioned:
        d.ill_conditioned = [*(d.ill_conditioned or []), *att.ill_conditioned]
    settle(f, att.judged, att.checked)


def _layer_feed(ex: Any, case: TestCase, rule: Rule, backend: str, name: str, orig: dict[str, np.ndarray],
                rows: list[int]) -> dict[str, np.ndarray] | None:
    """The original's inputs of layer ``name`` on ``backend``: on the diagnosed rows, or for a
    batch rule the whole batch (its rows only mean something in their batch)."""
    refs = case.spec.layer(name).reads
    if getattr(rule, "order", None) is None:
        if not all(r in orig or r in case.inputs for r in refs):
            return None
        return {r: (orig[r] if r in orig else case.inputs[r][rows]) for r in refs}
    layers = [r for r in refs if r not in case.inputs]
    got = ex.pool_run(case.spec, case.weights, weights_key(case.weights), case.inputs, labels=[backend],
                      layers=layers or [name]).get(backend)
    if not isinstance(got, dict):
        return None
    return {r: (case.inputs[r] if r in case.inputs else got["layers"][r]) for r in refs}


def _alone(ex: Any, case: TestCase, rule: Rule, backend: str, name: str, orig: dict[str, np.ndarray],
           rows: list[int], f: Finding) -> Alone | None:
    """Layer ``name`` alone with and without ``rule`` on ``backend`` (module docstring): its
    difference and how to tell its conditioning; None when it cannot be judged alone."""
    d = f.detail
    feed = _layer_feed(ex, case, rule, backend, name, orig, rows)
    if feed is None:
        return None
    model = one_layer_model(case.spec, case.weights, name, feed)
    if model is None:
        return None
    spec1, w1 = model
    rw1 = rule.apply(spec1, w1)
    if rw1 is None:
        return None
    pair = _pair(ex, spec1, w1, rw1, feed, backend)
    if pair is None:
        return None
    a, b = pair
    compute = _mode(ex, backend)
    if d.reason == "nonfinite":
        if compare_codes(a, b) is None or pattern_cleared(a, b, nonfinite_exact=rule.nonfinite_exact,
                                                          inputs=feed, widens=rule.widens) is not None:
            return Alone(OwnScore(score=0.0))

        def pattern() -> str | None:
            size = rounding_for(compute, feed)
            moved = _pair(ex, spec1, w1, rw1, perturbed(feed, size=size), backend)
            return condition_pattern(feed, {"original": a, "rewrite": b},
                                     None if moved is None else {"original": moved[0], "rewrite": moved[1]},
                                     layer_compute_dtype(case.spec.layer(name).params))

        return Alone(OwnScore(score=float("inf")), pattern=pattern)
    own = compare(a, b, ex.tolerances, compute=compute)
    if own is None:
        return None

    def self_score() -> float:
        moved = _pair(ex, spec1, w1, rw1, perturbed(feed, size=rounding_for(compute, feed)), backend)
        if moved is None:
            return float("inf")
        s_orig = compare(a, moved[0], ex.tolerances, compute=compute)
        s_rw = compare(b, moved[1], ex.tolerances, compute=compute)
        return max(float(s["score"]) if s is not None else float("inf") for s in (s_orig, s_rw))

    return Alone(OwnScore(score=own["score"], max_abs=own["max_abs"], max_rel=own["max_rel"]), self_score=self_score)


def _pair(ex: Any, spec1: Any, w1: Any, rw1: Rewrite, feed: dict[str, np.ndarray],
          backend: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The one-layer model and its rewrite on ``feed`` on ``backend``: (original rows in the
    rewrite's order, rewrite), or None when either fails."""
    ex.build(spec1)
    ex.build(rw1.spec)
    o = ex.pool_run(spec1, w1, weights_key(w1), feed, labels=[backend]).get(backend)
    r = ex.pool_run(rw1.spec, rw1.weights, weights_key(rw1.weights), rw1.map_inputs(feed),
                    labels=[backend]).get(backend)
    if not (isinstance(o, dict) and isinstance(r, dict)):
        return None
    n = int(next(iter(feed.values())).shape[0])
    a = np.asarray(o["logits"])[rw1.rows(n)]
    b = np.asarray(r["logits"])
    return (a, b) if a.shape == b.shape else None


def _with_input_shape(case: TestCase, d: Any) -> None:
    """``shapes["input"]``: the shape of what the layer ``d.layer`` of a shape finding is fed
    (the case's inferred shape, the rewrite's batch), so that a layer returning its input is
    told from one computing another wrong shape; left out where it cannot be inferred."""
    refs = case.spec.layer(d.layer).reads
    shape = safe_shapes(case.spec).get(refs[0]) if len(refs) == 1 else None
    if shape is not None and all(isinstance(x, int) for x in shape):
        d.shapes = {**d.shapes, "input": [d.shapes["rewrite"][0], *shape]}


def _pin_shape(ex: Any, case: TestCase, rw: Rewrite, inputs: dict[str, np.ndarray], backend: str,
               tag: str | None, f: Finding) -> None:
    """The first layer whose equivalent's output has another shape than its own past the batch
    axis (``first_layer`` and ``layer``: a shape is no rounding, so it needs no judging alone).
    The original's row 0 beside the rewrite's row that holds it; a batch of zero rows holds
    none, and its shapes still tell."""
    d = f.detail
    order_rows = rw.rows(case.batch)
    orig = _kept(ex, backend, tag, [0])
    new = _kept(ex, backend, _keep(ex, rw.spec, rw.weights, inputs, backend),
                [order_rows.index(0)] if 0 in order_rows else [])
    if orig is None or new is None:
        return
    for name in case.spec.topological_order():
        mapped = rw.layer_map.get(name)
        if name in orig and mapped in new and np.shape(orig[name])[1:] != np.shape(new[mapped])[1:]:
            d.first_layer = d.layer = name
            return


def _pin_rejection(ex: Any, case: TestCase, rule: Rule, backend: str, tag: str | None, f: Finding) -> None:
    """The first rewritten layer whose one-layer rewrite ``backend`` refuses as well where the
    layer alone runs its feed, or runs into a shape off Keras' declaration (``layer``, and then ``shapes``: the refusal is a later
    layer's complaint about it, TensorFlow's oneDNN convolution returning its input
    unconvolved on a batch of zero rows and the next layer refusing the channels)."""
    d = f.detail
    orig = _kept(ex, backend, tag, [0])
    if orig is None:
        return
    for name in d.rewritten[:REJECTION_CHECKS]:
        refs = case.spec.layer(name).reads
        if not all(r in orig or r in case.inputs for r in refs):
            continue
        feed = {r: (orig[r] if r in orig else case.inputs[r][:1]) for r in refs}
        model = one_layer_model(case.spec, case.weights, name, feed)
        if model is None:
            continue
        spec1, w1 = model
        rw1 = rule.apply(spec1, w1)
        if rw1 is None:
            continue
        if not isinstance(ex.pool_run(spec1, w1, weights_key(w1), feed, labels=[backend]).get(backend), dict):
            continue  # the layer alone does not run its own feed: no evidence about the rewrite
        built = ex.build(rw1.spec).get(backend)
        got = built if not isinstance(built, dict) else ex.pool_run(
            rw1.spec, rw1.weights, weights_key(rw1.weights), rw1.map_inputs(feed), labels=[backend]).get(backend)
        if not isinstance(got, dict):
            d.layer = name
            return
        off = (got.get("declared") or {}).get(name)
        if off is not None and list(off[0][0])[1:] != list(off[1][0])[1:]:
            d.layer = name
            d.shapes = {"original": [len(rw1.rows(1)), *off[0][0][1:]], "rewrite": list(off[1][0]),
                        "input": [len(rw1.rows(1)), *np.shape(feed[refs[0]])[1:]]}
            return


__all__ = ["STATUSES", "run_equivalence"]
