"""The flush probe: whether flush-to-zero explains a flushing backend's difference.

TensorFlow's and XLA's CPU kernels flush subnormal values to zero by design; torch keeps
them.  A difference on rows of subnormal or tiny values between a flushing backend and one
that keeps them is that documented choice (:mod:`audee.triage.rootcause`, ``subnormal_input``).
Between two flushing backends it may be the flush as well (one meets a subnormal
intermediate the other's formula never makes: TensorFlow's STFT of a row near 1e-36 against
JAX, the api-cpu campaign, rng 2929) or a bug that shows on small values (JAX's closed-form
2x2 determinant underflowing in IEEE arithmetic).  The probe tells the two apart by their
mechanism: the finding's rows run again on a backend that keeps subnormals, with
flush-to-zero switched on (``Backend.flushing``); where the flushed run moves away from that
backend's own run and lands on a backend's values, flushing explains that backend's values
(``DeviationDetail.flush_like``).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from audee.backends.info import describe
from audee.backends.pool import WorkerFailure
from audee.cases.case import Finding, Kind, Outcome, TestCase, subnormal_rows
from audee.cases.spec import weights_key
from audee.oracle.deviation import Tolerances, compare, pair_compute

log = logging.getLogger(__name__)


def probed(findings: list[Finding], subnormal: set[int]) -> list[Finding]:
    """The deviation findings the probe judges: every row they name holds subnormal or tiny
    values, and some backend of theirs flushes by design."""
    return [f for f in findings
            if f.kind == Kind.DEVIATION and f.detail.rows and {int(r) for r in f.detail.rows} <= subnormal
            and any(describe(b).flushes_subnormals for b in f.backends)]


def runners(outcomes: dict[str, Outcome]) -> list[str]:
    """The backends that ran the case and can flush on request (``flush_switch``)."""
    return [x for x, o in outcomes.items() if o.ok and describe(x).flush_switch]


def flush_probe(run: Callable[..., dict[str, Any]], tolerances: Tolerances, case: TestCase,
                outcomes: dict[str, Outcome], devs: list[Finding]) -> None:
    """Fill ``flush_like`` of the deviation findings :func:`probed` picks: the backends of each
    whose values on its rows a flushed run of a :func:`runners` backend reproduces within
    tolerance, counted only where the flush moved that runner out of tolerance of its own run
    (a flush that changes nothing explains nothing).  A runner that fails the flushed run
    gives no evidence (logged); a finding no runner could probe keeps ``flush_like`` None.
    ``run``: the executor's pool run (``Pool.run``'s arguments), ``outcomes``: the case's."""
    findings = probed(devs, subnormal_rows(case.meta))
    labels = runners(outcomes)
    if not findings or not labels:
        return
    rows = sorted({int(r) for f in findings for r in f.detail.rows})
    sub = {k: v[rows] for k, v in case.inputs.items()}
    got = run(case.spec, case.weights, weights_key(case.weights), sub, labels=labels, flush=True)
    usable = {x: reply for x, reply in got.items() if isinstance(reply, dict)}
    for x, reply in got.items():
        if isinstance(reply, WorkerFailure):
            log.warning("%s: the flush probe could not run on %s (%s); no evidence from it", case.id, x,
                        reply.line[:200])
    for f in findings:
        d = f.detail
        tensor = d.tensor if d.tensor in ("logits", "output") else "logits"
        at = [rows.index(int(r)) for r in d.rows]
        like: set[str] = set()
        for x, reply in usable.items():
            flushed = np.asarray(reply[tensor])[at]
            own = _rows(outcomes[x], tensor, d.rows)
            moved = compare(flushed, own, tolerances) if own is not None else None
            if moved is None or moved["score"] <= 1.0:
                continue
            for b in f.backends:
                mine = _rows(outcomes[b], tensor, d.rows)
                same = compare(mine, flushed, tolerances,
                               compute=pair_compute(outcomes[b].precision, outcomes[x].precision)) \
                    if mine is not None else None
                if same is not None and same["score"] <= 1.0:
                    like.add(b)
        d.flush_like = sorted(like) if usable else None


def _rows(outcome: Outcome, tensor: str, rows: list[int]) -> np.ndarray | None:
    """``outcome``'s ``tensor`` (logits or output) on ``rows``, None where it has none."""
    value = getattr(outcome, tensor, None)
    return None if value is None else np.asarray(value)[[int(r) for r in rows]]
