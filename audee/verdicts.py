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

Only :mod:`audee.case` is imported: the rooms above read this one.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from audee.case import Finding, Kind, Verdict

#: The main failure's order, most important first (see the module docstring).
MAIN_FAILURE_ORDER = (Kind.INCONSISTENCY, Kind.NAN, Kind.HARD_CRASH, Kind.DIVERGENT_ACCEPTANCE)
MAIN_FAILURE_ORDER += (Kind.PRECISION,)  # one backend against float64: it names the wrong one and its layer
MAIN_FAILURE_ORDER += (Kind.DEVIATION,)
MAIN_FAILURE_ORDER += (Kind.EQUIVALENCE,)  # one backend against itself: the last word
MAIN_FAILURE_ORDER += (Kind.TRAIN_NAN, Kind.TRAIN_DEVIATION)  # the training phase (its cases have no others)


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
    """Whether the recorded failure shows again among ``now``: the same kind on the same
    backends (a NaN finding: on a backend it names)."""
    for g in now:
        if g.kind != recorded.kind:
            continue
        if recorded.kind == Kind.NAN:
            if set(g.backends) & set(recorded.backends):
                return True
        elif recorded.kind == Kind.EQUIVALENCE:  # the same rule failing on the same backend
            if g.detail.rule == recorded.detail.rule and sorted(g.backends) == sorted(recorded.backends):
                return True
        elif sorted(g.backends) == sorted(recorded.backends):
            return True
    return False


def recorded_rules(verdict: Verdict) -> tuple[str, ...]:
    """The equivalence rules a verdict's ``equivalence`` findings (failing or accumulated)
    name: what a re-run must apply to judge them again."""
    return tuple(dict.fromkeys(f.detail.rule for f in verdict.findings
                               if f.kind in (Kind.EQUIVALENCE, Kind.EQUIVALENCE_ACCUMULATED) and f.detail.rule))


def verdict_holds(recorded: Verdict, now: Verdict) -> bool:
    """Whether every failure of the recorded verdict holds in the new one."""
    return all(finding_holds(f, now.findings) for f in recorded.findings if f.is_failure)
