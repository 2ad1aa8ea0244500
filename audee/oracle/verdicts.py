"""Two decisions about a case's findings, each made here only.

* **The case's main failure** (:func:`main_failure`): the one failure a command works on
  when a case has several — the one ``audee localize`` localizes and the one a repro
  script is written for, so a localized case's script shows what was localized.  The
  order is the paper's: an inconsistency (a label flip, the paper's bug) first, then a
  NaN, a hard crash, a divergent acceptance, and a deviation last (a label flip also
  deviates; the deviation is then the less specific view of the same failure).
* **A recorded failure still holds** (:func:`finding_holds`, :func:`verdict_holds`): a
  re-run shows a finding of the same kind on the same backends.  A NaN finding holds
  where one now shares a backend with it: which backends a NaN finding names follows
  which non-finite patterns differ, and that shifts with the backends run beside it (a
  repro script's model runs only some of them).  ``audee reproduce``, ``audee localize``
  and ``audee repro`` (checking a smaller model still fails) all ask this.

Only :mod:`audee.cases.case` and the finding kind table (:mod:`audee.cases.kinds`, which holds each
kind's rank and "still holds" rule) are imported: the rooms above read this one.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from audee.cases import kinds
from audee.cases.case import Finding, Kind, Verdict

#: The main failure's order, most important first (see the module docstring): each kind's
#: rank in the finding kind table (audee.cases.kinds).
MAIN_FAILURE_ORDER = kinds.MAIN_FAILURE_ORDER


def main_failure(findings: Iterable[Finding], pair: Sequence[str] | None = None) -> Finding | None:
    """The first failure finding of the first kind in :data:`MAIN_FAILURE_ORDER` (on the
    backends ``pair`` when given), or None when there is none."""
    failures = [f for f in findings if f.is_failure and (pair is None or sorted(f.backends) == sorted(pair))]
    for kind in MAIN_FAILURE_ORDER:
        found = next((f for f in failures if f.kind == kind), None)
        if found is not None:
            return found
    return None


def finding_holds(recorded: Finding, now: Iterable[Finding]) -> bool:
    """Whether the recorded failure shows again among ``now``: the same kind, and its kind's
    "still holds" rule (:data:`audee.cases.kinds.KINDS`: the same backends; a NaN finding: a backend
    it names; an equivalence: the same rule on the same backend)."""
    return any(kinds.holds(recorded, g) for g in now)


def recorded_rules(verdict: Verdict) -> tuple[str, ...]:
    """The equivalence rules a verdict's ``equivalence`` findings (failing or accumulated)
    name: what a re-run must apply to judge them again."""
    return tuple(dict.fromkeys(f.detail.rule for f in verdict.findings
                               if f.kind in kinds.with_accumulated(Kind.EQUIVALENCE) and f.detail.rule))


def verdict_holds(recorded: Verdict, now: Verdict) -> bool:
    """Whether every failure of the recorded verdict holds in the new one."""
    return all(finding_holds(f, now.findings) for f in recorded.findings if f.is_failure)
