"""Run op-level cases (issue 30) on every backend and judge them.

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
from audee.case import Outcome, Verdict
from audee.opcase import OpCase
from audee.oracle.deviation import FULL, Tolerances, as_tolerances
from audee.oracle.ops import op_findings


@dataclass
class OpResult:
    """A judged op case, read as :class:`audee.execute.Result` is (rows, case files)."""

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


@dataclass
class OpSubmitted:
    case: OpCase
    tickets: dict[str, int]
    started: float


class OpExecutor:
    """Op cases on a :class:`Pool` of Keras backends, judged with ``tolerances``."""

    def __init__(self, pool: Pool, *, tolerances: Tolerances | dict[str, Any] | None = None,
                 undefined: dict[str, Sequence[str]] | None = None, **_: Any):
        """``undefined``: per op, what its contract leaves undefined (the op configs')."""
        self.pool = pool
        self.tolerances = as_tolerances(tolerances)
        self.undefined = dict(undefined or {})

    def run(self, case: OpCase) -> OpResult:
        return self.finish(self.submit(case))

    def submit(self, case: OpCase) -> OpSubmitted:
        return OpSubmitted(case, self.pool.submit_op(case.call(), case.tensors), time.perf_counter())

    def finish(self, sub: OpSubmitted) -> OpResult:
        modes = self.pool.precisions
        outcomes: dict[str, Outcome] = {}
        outputs: dict[str, list[Any]] = {}
        dtypes: dict[str, list[str]] = {}
        phases: dict[str, dict[str, float]] = {}
        for label, got in self.pool.collect_op(sub.tickets).items():
            if isinstance(got, WorkerFailure):
                outcomes[label] = Outcome(label, failure=got, precision=modes.get(label, FULL))
                continue
            outcomes[label] = Outcome(label, run_s=got["run_s"], precision=modes.get(label, FULL))
            outputs[label], dtypes[label] = list(got["outputs"]), list(got["dtypes"])
            phases[label] = {k: round(float(v), 5) for k, v in got.get("phases", {}).items()}
        ordered = [outcomes[label] for label in self.pool.labels if label in outcomes]
        findings, skipped = op_findings(ordered, outputs, dtypes, sub.case.tensors, self.tolerances,
                                        self.undefined.get(sub.case.op, ()))
        return OpResult(sub.case, Verdict(findings), {o.backend: o for o in ordered}, outputs, dtypes, skipped,
                        seconds=time.perf_counter() - sub.started, phases=phases)
