"""Crash oracle: tell expected rejections from real crashes.

* consistent rejection — every backend raised a clean error (an invalid parameter every
  framework refuses): expected, not a bug;
* divergent acceptance — some backends ran the case and others raised a clean error;
* hard crash — a signal, an abort, an exit or a timeout: always a failure.
"""
from __future__ import annotations

from audee.cases.case import Finding, Kind, Outcome
from audee.records.findings import (BackendError, ConsistentRejectionDetail, DivergentAcceptanceDetail,
                                    HardCrashDetail)


def crash_findings(outcomes: list[Outcome]) -> list[Finding]:
    findings = []
    for o in outcomes:
        if o.failure is not None and o.failure.hard:
            f = o.failure
            findings.append(Finding(Kind.HARD_CRASH, [o.backend],
                                    HardCrashDetail(how=f.kind, phase=f.phase, message=f.message,
                                                    log_tail=f.log_tail[-2000:])))
    clean = [o for o in outcomes if o.failure is not None and not o.failure.hard]
    ok = [o for o in outcomes if o.ok]
    if clean and ok:
        findings.append(Finding(Kind.DIVERGENT_ACCEPTANCE, [o.backend for o in clean],
                                DivergentAcceptanceDetail(
                                    accepted=[o.backend for o in ok],
                                    errors={o.backend: BackendError(phase=o.failure.phase, message=o.failure.message,
                                                                    traceback=o.failure.traceback[-4000:])
                                            for o in clean},
                                    program={o.backend: dict(o.facts) for o in clean + ok
                                             if getattr(o, "facts", None)})))
    elif clean and not ok and len(clean) == len([o for o in outcomes if not (o.failure and o.failure.hard)]):
        findings.append(Finding(Kind.CONSISTENT_REJECTION, [o.backend for o in clean],
                                ConsistentRejectionDetail(
                                    errors={o.backend: BackendError(phase=o.failure.phase, message=o.failure.message)
                                            for o in clean})))
    return findings
