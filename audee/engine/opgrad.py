"""Run an op-level case's gradient phase on every backend and judge it (``audee fuzz --op
... --phase train``).

Each Keras worker calls the op and pulls a drawn cotangent back through it with its
framework's own autodiff (``tf.GradientTape``, ``torch.autograd.grad``, ``jax.vjp``:
``KerasBackend.run_op_grad``), answering the call's outputs and the gradient of each
floating tensor argument.  The cotangent of output ``k`` is :func:`audee.cases.opcase.cotangent`
of the case's seed (:func:`cotangent_seed`), so every backend pulls back the same vector.
The outputs are judged as the op level judges them (:func:`audee.oracle.ops.op_findings`,
crashes included: a backend that cannot differentiate the call fails in phase
``gradient``), the gradients by :func:`audee.oracle.opgrad.gradient_findings`, each named
``grad:<tensor>``; then the conditioning runs of :class:`audee.engine.opexec.OpExecutor` on both,
the moved call differentiated again.

An :class:`OpGradResult` is an op result whose outputs are the call's followed by its
gradients (``names`` says which is which), so rows, case files (``CaseRecord.op``) and the
conditioning read it unchanged; its ``train`` (the seed and the tensors differentiated)
marks the record as the training phase's.
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from audee.backends.pool import WorkerFailure
from audee.cases.case import SPEC_REFUSES, Outcome, Verdict
from audee.cases.opcase import OpCase
from audee.engine.opexec import OpExecutor, OpResult, OpSubmitted
from audee.oracle.deviation import FULL
from audee.oracle.opgrad import gradient_findings, grad_name
from audee.oracle.ops import op_findings
from audee.oracle.regression import regression_findings

#: the key of a case's ``meta["train"]`` (and a row's ``train``) holding its gradient phase
GRADIENT = "gradient"


def cotangent_seed(case: OpCase) -> int:
    """The seed of a case's cotangents: the one its level drew (``meta["train"]["gradient"]
    ["seed"]``, recorded in its case file), else one fixed by its id."""
    got = ((case.meta or {}).get("train") or {}).get(GRADIENT, {}).get("seed")
    return int(got) if got is not None else zlib.crc32(case.id.encode())


@dataclass
class OpGradResult(OpResult):
    """A judged gradient phase: ``outputs``/``dtypes`` per backend are the call's outputs
    followed by its gradients, ``names`` each one's name (``out<k>``, ``grad:<tensor>``)."""

    names: list[str] = field(default_factory=list)
    train: dict[str, Any] = field(default_factory=dict)


class OpGradExecutor(OpExecutor):
    """Op cases' gradient phase on a :class:`audee.backends.pool.Pool` of Keras backends."""

    def submit(self, case: OpCase) -> OpSubmitted:
        tickets = self.pool.submit_op_grad(case.call(), case.tensors, cotangent_seed(case))
        return OpSubmitted(case, tickets, time.perf_counter())

    def finish(self, sub: OpSubmitted) -> OpGradResult:
        case, modes = sub.case, self.pool.precisions
        outcomes: dict[str, Outcome] = {}
        outputs: dict[str, list[Any]] = {}
        dtypes: dict[str, list[str]] = {}
        grads: dict[str, list[Any]] = {}
        grad_dtypes: dict[str, list[str]] = {}
        phases: dict[str, dict[str, float]] = {}
        wrt: list[str] = []
        answers = self.pool.collect_op(sub.tickets)
        for label, got in answers.items():
            if isinstance(got, WorkerFailure):
                outcomes[label] = Outcome(label, failure=got, precision=modes.get(label, FULL))
                continue
            outcomes[label] = Outcome(label, run_s=got["run_s"], precision=modes.get(label, FULL))
            outputs[label], dtypes[label] = list(got["outputs"]), list(got["dtypes"])
            grads[label], grad_dtypes[label] = list(got["grads"]), list(got["grad_dtypes"])
            wrt = wrt or list(got["wrt"])
            phases[label] = {k: round(float(v), 5) for k, v in got.get("phases", {}).items()}
        ordered = [outcomes[label] for label in self.pool.labels if label in outcomes]
        undefined = self.undefined.get(case.op, ())
        findings, skipped = op_findings(ordered, outputs, dtypes, case.tensors, self.tolerances, undefined,
                                        case.op, case.call())
        more, why = gradient_findings([o for o in ordered if o.ok], grads, grad_dtypes, wrt, case.tensors,
                                      self.tolerances, undefined, case.op, case.call())
        spec = next((got["spec_refuses"] for got in answers.values() if isinstance(got, dict)
                     and got.get("spec_refuses")), None)
        if spec:  # Keras's own symbolic call refuses the arguments: outside its contract
            skipped.append(f"{SPEC_REFUSES}: {spec}")
        n = max((len(v) for v in outputs.values()), default=0)
        names = [f"out{k}" for k in range(n)] + [grad_name(t) for t in wrt]
        result = OpGradResult(case, Verdict(findings + more), {o.backend: o for o in ordered},
                              {b: outputs[b] + grads[b] for b in outputs},
                              {b: dtypes[b] + grad_dtypes[b] for b in outputs}, skipped + why, phases=phases,
                              names=names, train={GRADIENT: {"seed": cotangent_seed(case), "wrt": wrt}})
        self._condition(result)
        result.verdict.findings[:] = regression_findings(result.verdict.findings, self.pool.versions())
        result.seconds = time.perf_counter() - sub.started
        return result

    def _again(self, case: OpCase, tensors: dict[str, Any], labels: list[str]) -> dict[str, list[Any]]:
        """The moved call differentiated again: its outputs followed by its gradients."""
        got = self.pool.collect_op(self.pool.submit_op_grad(case.call(), tensors, cotangent_seed(case), labels))
        return {b: list(r["outputs"]) + list(r["grads"]) for b, r in got.items()
                if isinstance(r, dict) and "outputs" in r}

    def _index(self, result: OpResult, name: Any) -> int | None:
        names = getattr(result, "names", [])
        return names.index(name) if name in names else None
