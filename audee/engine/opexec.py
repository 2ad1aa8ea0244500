"""Run op-level cases on every backend and judge them.

An op case is one ``keras.ops`` call: no model to build, no weights, nothing to compile
per model; every worker gets the call at once (``Pool.submit_op``) and answers its
outputs; :func:`audee.oracle.ops.op_findings` judges them.  The interface is the
Executor's (``submit`` / ``finish`` / ``run``), so the fuzz loop pipelines op cases as it
does models: case k+1 is drawn while case k computes.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from audee.backends.pool import Pool, WorkerFailure
from audee.levels.base import Runner
from audee.cases.case import SPEC_REFUSES, Kind, Outcome, Verdict
from audee.cases.opcase import OpCase
from audee.records.findings import OwnScore
from audee.oracle.attribution import Alone, attribute
from audee.oracle.deviation import DTYPE_ROUNDING, FULL, ROUNDING, Tolerances, as_tolerances, perturbed
from audee.oracle.nan import condition_pattern, settle_conditioning
from audee.oracle.ops import float64_verdicts, op_findings, restore, value_compare
from audee.oracle.regression import regression_findings
from audee.oracle.pairs import Float64Verdict
from audee.records.reference import ReferenceRun
from audee.reference.run import Reference, disputed


@dataclass
class OpResult:
    """A judged op case, read as :class:`audee.engine.execute.Result` is (rows, case files)."""

    case: OpCase
    verdict: Verdict
    outcomes: dict[str, Outcome]
    outputs: dict[str, list[Any]] = field(default_factory=dict)   # backend -> its outputs
    dtypes: dict[str, list[str]] = field(default_factory=dict)    # backend -> their Keras dtypes
    undefined: list[str] = field(default_factory=list)            # what was not compared, and why
    pairs: dict[str, dict] = field(default_factory=dict)
    layer_distances: dict[str, dict[str, float]] = field(default_factory=dict)
    equivalence: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    phases: dict[str, dict[str, float]] = field(default_factory=dict)
    reference: ReferenceRun | None = None   # the call's float64 reference (``--reference float64``); rows read it


@dataclass
class OpSubmitted:
    case: OpCase
    tickets: dict[str, int]
    started: float
    reference: dict[str, int] = field(default_factory=dict)   # the float64 reference's tickets
    sat_out: list[str] = field(default_factory=list)   # backends left out of this case, and why


class OpExecutor(Runner):
    """Op cases on a :class:`Pool` of Keras backends, judged with ``tolerances``."""

    def __init__(self, pool: Pool, *, tolerances: Tolerances | dict[str, Any] | None = None,
                 undefined: dict[str, Sequence[str]] | None = None, reference: Reference | None = None, **_: Any):
        """``undefined``: per op, what its contract leaves undefined (the op configs');
        ``reference``: the float64 reference each call runs beside (none by default): where it
        judges, it names the odd backends of the call's findings (:mod:`audee.oracle.pairs`)."""
        self.pool = pool
        self.tolerances = as_tolerances(tolerances)
        self.undefined = dict(undefined or {})
        self.reference = reference

    def run(self, case: OpCase) -> OpResult:
        return self.finish(self.submit(case))

    def submit(self, case: OpCase) -> OpSubmitted:
        labels, sat_out = self._labels_for(case)
        tickets = self.pool.submit_op(case.call(), case.tensors, labels)
        ref = self.reference.submit_op(self.pool, case.call(), case.tensors) if self.reference is not None else {}
        return OpSubmitted(case, tickets, time.perf_counter(), reference=ref, sat_out=sat_out)

    def _labels_for(self, case: OpCase) -> tuple[list[str], list[str]]:
        """The backends that call this case's op, and a note per backend left out: one whose
        contract computes a tensor dtype of the case in another (``Backend.op_skips``), when
        some other backend computes it (else every one runs it, each in what it computes)."""
        labels = list(self.pool.op_labels)
        dtypes = set(case.dtypes.values())
        skips = {label: [f"{label} {why}" for d, why in getattr(self.pool.workers[label], "op_skips", {}).items()
                         if d in dtypes] for label in labels}
        kept = [label for label in labels if not skips[label]]
        if not kept:
            return labels, []
        return kept, [f"left out: {note}" for label in labels for note in skips[label]]

    def finish(self, sub: OpSubmitted) -> OpResult:
        modes = self.pool.precisions
        outcomes: dict[str, Outcome] = {}
        outputs: dict[str, list[Any]] = {}
        dtypes: dict[str, list[str]] = {}
        phases: dict[str, dict[str, float]] = {}
        answers = self.pool.collect_op(sub.tickets)
        for label, got in answers.items():
            if isinstance(got, WorkerFailure):
                outcomes[label] = Outcome(label, failure=got, precision=modes.get(label, FULL))
                continue
            outcomes[label] = Outcome(label, run_s=got["run_s"], precision=modes.get(label, FULL))
            outputs[label], dtypes[label] = list(got["outputs"]), list(got["dtypes"])
            phases[label] = {k: round(float(v), 5) for k, v in got.get("phases", {}).items()}
        ordered = [outcomes[label] for label in self.pool.labels if label in outcomes]
        undefined = self.undefined.get(sub.case.op, ())
        reference, verdicts = self._against_float64(sub, ordered, outputs, dtypes, undefined)
        findings, skipped = op_findings(ordered, outputs, dtypes, sub.case.tensors, self.tolerances,
                                        undefined, sub.case.op, sub.case.call(), float64=verdicts)
        spec = next((got["spec_refuses"] for got in answers.values() if isinstance(got, dict)
                     and got.get("spec_refuses")), None)
        if spec:  # Keras's own symbolic call refuses the arguments: outside its contract
            skipped.append(f"{SPEC_REFUSES}: {spec}")
        result = OpResult(sub.case, Verdict(findings), {o.backend: o for o in ordered}, outputs, dtypes,
                          sub.sat_out + skipped, phases=phases, reference=reference)
        self._condition(result)
        result.verdict.findings[:] = regression_findings(result.verdict.findings, self.pool.versions())
        result.seconds = time.perf_counter() - sub.started
        return result

    def _against_float64(self, sub: OpSubmitted, ordered: list[Outcome], outputs: dict[str, list[Any]],
                         dtypes: dict[str, list[str]], undefined: Sequence[str]
                         ) -> tuple[ReferenceRun | None, list[Float64Verdict | None]]:
        """The call's float64 reference collected, its record (each backend's largest error
        over the outputs) and, where it judges (computed, not disputed), each output's verdict
        for the odd marking."""
        if self.reference is None:
            return None, []
        ref = self.reference.collect_op(self.pool, sub.reference, self.tolerances)
        rec = ref.record
        if not ref.outputs:
            return rec, []
        verdicts = float64_verdicts(ordered, outputs, dtypes, ref.outputs, ref.dtypes, sub.case.tensors,
                                    self.tolerances, undefined)
        errors: dict[str, float] = {}
        for v in verdicts:
            for b, e in (v.errors.items() if v is not None else ()):
                errors[b] = max(errors.get(b, 0.0), e)
        rec.errors = errors
        odd = sorted({b for v in verdicts if v is not None and v.nonfinite for b in v.nonfinite})
        rec.nonfinite = odd or None
        rec.disputed = disputed(rec)
        return rec, verdicts if rec.usable else []

    def _condition(self, result: OpResult) -> None:
        """The conditioning rules of the model oracles, the op being the layer: the call run
        again on the backends of its numeric findings, every float tensor moved by two ulps
        of its dtype (:func:`audee.oracle.deviation.perturbed`).  A deviation the op itself
        turns rounding into on either backend is no evidence against one
        (:func:`audee.oracle.attribution.attribute`: ``deviation_accumulated``, the op in
        ``ill_conditioned``), else the op is its ``own_layers``; a non-finite pattern
        difference is judged by :func:`audee.oracle.nan.condition_pattern`."""
        case = result.case
        devs = [f for f in result.verdict.findings
                if f.kind == Kind.DEVIATION and self._index(result, f.detail.tensor) is not None]
        nans = [f for f in result.verdict.findings if f.kind == Kind.NAN and f.detail.patterns]
        if not devs and not nans:
            return
        labels = sorted({b for f in devs + nans for b in f.backends if b in result.outputs})
        size = max([ROUNDING[FULL]] + [DTYPE_ROUNDING.get(d, 0.0) for d in case.dtypes.values()])
        moved_in = perturbed(case.tensors, size=size)
        moved = self._again(case, moved_in, labels)
        for f in devs:
            k = self._index(result, f.detail.tensor)
            pair = tuple(f.backends)

            def self_score(k: int = k, pair: tuple[str, ...] = pair) -> float:
                """How far the call moves on either backend when its tensors move by rounding noise."""
                selves = [value_compare(restore(result.outputs[x][k], result.dtypes[x][k]),
                                        restore(moved[x][k], result.dtypes[x][k]), self.tolerances)
                          if x in moved and len(moved[x]) > k else None for x in pair]
                return max((float(c["score"]) if c is not None else float("inf")) for c in selves)

            # the op is the layer and the case its own input: judged alone already, out of tolerance
            att = attribute([case.op], [case.op],
                            lambda _, f=f, s=self_score: Alone(OwnScore(score=float(f.detail.score or 0.0)),
                                                               self_score=s))
            if att.blamed:
                f.detail.own_layers = att.blamed
            else:
                f.detail.ill_conditioned = [case.op]
                f.kind = Kind.DEVIATION_ACCUMULATED
        first = next(iter(case.dtypes.values()), None)
        for f in nans:
            for key, p in f.detail.patterns.items():
                a, b = key.split("|")
                k = self._index(result, p.first_layer)
                if k is None or a not in result.outputs or b not in result.outputs:
                    continue
                alone = {x: restore(result.outputs[x][k], result.dtypes[x][k]) for x in (a, b)}
                after = {x: restore(moved[x][k], result.dtypes[x][k]) for x in (a, b)
                         if x in moved and len(moved[x]) > k}
                reason = condition_pattern(case.tensors, alone, after, first)
                if reason is None:
                    p.own_layer = case.op
                else:
                    p.cleared = reason
            settle_conditioning(f)

    def _again(self, case: OpCase, tensors: dict[str, Any], labels: list[str]) -> dict[str, list[Any]]:
        """The call on ``tensors`` (the conditioning's moved ones) on ``labels``: each
        backend's outputs, in the order :meth:`_index` counts them."""
        got = self.pool.collect_op(self.pool.submit_op(case.call(), tensors, labels))
        return {b: r["outputs"] for b, r in got.items() if isinstance(r, dict) and "outputs" in r}

    def _index(self, result: OpResult, name: Any) -> int | None:
        """The output a finding names (``out2`` -> 2), None for a shape or dtype mismatch."""
        return _output(name)


def _output(name: Any) -> int | None:
    """The output index a finding names (``out2`` -> 2), None for a shape or dtype mismatch."""
    if isinstance(name, str) and name.startswith("out") and name[3:].isdigit():
        return int(name[3:])
    return None
