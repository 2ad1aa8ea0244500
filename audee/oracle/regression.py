"""Regression pairs: one backend under two releases, judged against itself.

A backend may run in another environment (``torch@prev``: another Python interpreter, say
with the previous Keras; :mod:`audee.backends.registry`).  ``torch`` and ``torch@prev`` run
the same program, so any difference between them is the release's: the older release is the
reference, the newer side is judged (:func:`audee.oracle.pairs.version_sides`, from the
versions each worker reported at its start).

The oracles judge every pair as they always do; :func:`regression_findings` then reads their
findings for each version pair of the case and makes one ``regression`` finding per pair that
differs, whatever kind saw it (a deviation, a label flip, a NaN pattern, one side raising or
crashing where the other ran, a training step): its detail names the newer and older side,
the packages whose versions differ (``component``: "keras 3.15.1 vs 3.14.1 on torch") and
carries each finding it was seen as (``evidence``).  A finding of the version pair alone (a
deviation or label flip of the pair, a NaN pattern or a refusal only the two differ in) is
replaced by it; one that speaks of other backends too (a NaN pattern a third backend shares,
a crash) stays, as it says what happened among all of them.  It runs after the odd marking
of the other kinds, so the majority still reads the version pair's differences
(``tensorflow`` and ``torch`` agreeing against ``torch@prev``).  Non-failures
(``deviation_accumulated``: rounding no layer shows alone) are no regression.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Iterable, Mapping

from audee.cases.case import Finding, Kind
from audee.cases.kinds import MAIN_FAILURE_ORDER, PAIRWISE
from audee.oracle.pairs import UNORDERED, VERSION_RULE, changed_versions, version_component, version_pair, version_sides
from audee.records.findings import RegressionDetail

#: pairwise kinds whose finding is the version pair's alone: replaced by the regression
_PAIR_KINDS = (*PAIRWISE, Kind.TRAIN_DEVIATION)
#: what a regression copies of the first finding it was seen as, if of this type
_NUMBERS = {"tensor": str, "score": (int, float), "max_abs": (int, float), "max_rel": (int, float), "rows": list,
            "first_layer": str}


def version_pairs(labels: Iterable[str]) -> list[tuple[str, str]]:
    """The version pairs among ``labels`` (:func:`audee.oracle.pairs.version_pair`), each sorted."""
    return [(a, b) for a, b in combinations(sorted(set(labels)), 2) if version_pair(a, b)]


def regression_findings(findings: list[Finding], versions: Mapping[str, Mapping[str, str]]) -> list[Finding]:
    """``findings`` of one case with each version pair's differences made one ``regression``
    finding (module docstring); ``versions``: each worker's reported versions, by label
    (:meth:`audee.backends.pool.Pool.versions`).  The list as it was when no two backends of
    the case are one backend in two environments."""
    labels = {b for f in findings for b in f.backends} | set(versions)
    pairs = version_pairs(labels)
    if not pairs:
        return list(findings)
    crashed = {b for f in findings if f.kind == Kind.HARD_CRASH for b in f.backends}
    seen: dict[tuple[str, str], list[Finding]] = {}
    kept: list[Finding] = []
    for f in findings:
        hit = [p for p in pairs if f.is_failure and _differs(f, p, crashed)]
        for p in hit:
            seen.setdefault(p, []).append(f)
        involved = _involved(f) if hit else None
        if involved is None or not any(involved <= set(p) for p in hit):  # the pair's alone: the regression says it
            kept.append(f)
    return kept + [_regression(p, fs, versions) for p, fs in seen.items()]


def _pair(f: Finding) -> frozenset[str]:
    pair = getattr(f.detail, "pair", None)
    return frozenset(pair.split("|")) if isinstance(pair, str) else frozenset(f.backends)


def _involved(f: Finding) -> set[str] | None:
    """Every backend a finding speaks of: a pair, the backends whose non-finite patterns or
    acceptance differ and the ones they differ from; None for a crash, which also speaks of
    the backends that ran without naming them (so never of the pair alone)."""
    d = f.detail
    if f.kind in _PAIR_KINDS:
        return set(_pair(f))
    if f.kind == Kind.NAN:
        return set(f.backends) | {b for k in d.patterns for b in k.split("|")}
    if f.kind == Kind.TRAIN_NAN:
        return set(f.backends) | set(d.nonfinite) | set(d.finite_backends)
    if f.kind == Kind.DIVERGENT_ACCEPTANCE:
        return set(f.backends) | set(d.accepted) | set(d.errors)
    return None


def _differs(f: Finding, pair: tuple[str, str], crashed: set[str]) -> bool:
    """Whether finding ``f`` says the two sides of ``pair`` behaved differently."""
    a, b = pair
    d = f.detail
    if f.kind in _PAIR_KINDS:
        return _pair(f) == frozenset(pair)
    if f.kind == Kind.NAN:
        if d.agreed:
            return False
        hit = d.patterns.get(f"{a}|{b}") or d.patterns.get(f"{b}|{a}")
        return hit is not None and not hit.cleared
    if f.kind == Kind.TRAIN_NAN:
        return sorted(d.nonfinite.get(a, [])) != sorted(d.nonfinite.get(b, []))
    if f.kind == Kind.HARD_CRASH:  # one finding per crashed backend: the other side ran, or failed cleanly
        return (a in f.backends and b not in crashed) or (b in f.backends and a not in crashed)
    if f.kind == Kind.DIVERGENT_ACCEPTANCE:
        accepted, refused = set(d.accepted), set(d.errors)
        return (a in accepted and b in refused) or (b in accepted and a in refused)
    return False


def _rank(kind: str) -> int:
    return MAIN_FAILURE_ORDER.index(kind) if kind in MAIN_FAILURE_ORDER else len(MAIN_FAILURE_ORDER)


def _regression(pair: tuple[str, str], found: list[Finding], versions: Mapping[str, Mapping[str, str]]) -> Finding:
    """One version pair's ``regression``: the newer side judged against the older where the
    versions order them, the first finding's numbers and layer copied up."""
    a, b = pair
    sides = version_sides(a, b, versions)
    older, newer = sides if sides is not None else (None, None)
    found = sorted(found, key=lambda f: _rank(f.kind))
    first = found[0].detail
    first_kind = found[0].kind
    detail = RegressionDetail(
        pair=f"{a}|{b}", older=older, newer=newer,
        versions={x: dict(versions.get(x) or {}) for x in pair},
        changed={k: list(v) for k, v in changed_versions(older or a, newer or b, versions).items()},
        component=version_component(older or a, newer or b, versions) if (versions.get(a) and versions.get(b))
        else None,
        seen=list(dict.fromkeys(f.kind for f in found)),
        evidence=[{"kind": f.kind, "detail": f.detail.to_json()} for f in found],
        odd=[newer] if newer else [], odd_rule=VERSION_RULE if newer else UNORDERED)
    for name, kind in _NUMBERS.items():
        value = getattr(first, name, None)
        if isinstance(value, kind) and not isinstance(value, bool):  # a NaN finding's first_layer is per backend
            setattr(detail, name, value)
    layer = _layer(first_kind, first, a, b)
    if layer is not None:
        detail.layer = layer
    message, phase, raised = _message(first_kind, first, pair)
    if message is not None:
        detail.message, detail.phase, detail.raised = message, phase, raised
    if getattr(first, "input_nonfinite", False):
        detail.input_nonfinite = True
    backends = [older, newer] if sides is not None else [a, b]
    return Finding(Kind.REGRESSION, backends, detail)


def _layer(kind: str, d: Any, a: str, b: str) -> str | None:
    """The layer a finding pins: the first deviating on its own input, the layer a training
    finding blames, where the two sides' non-finite patterns first differ, else the first."""
    own = getattr(d, "own_layers", None) or []
    if own:
        return own[0]
    if isinstance(getattr(d, "layer", None), str):
        return d.layer
    if kind == Kind.NAN:
        hit = d.patterns.get(f"{a}|{b}") or d.patterns.get(f"{b}|{a}")
        if hit is not None and hit.first_layer:
            return hit.first_layer
    first = getattr(d, "first_layer", None)
    return first if isinstance(first, str) else None


def _message(kind: str, d: Any, pair: tuple[str, str]) -> tuple[str | None, str | None, str | None]:
    """The error of the side that raised or crashed, where one did and the other ran: its
    message, phase and label."""
    if kind == Kind.DIVERGENT_ACCEPTANCE:
        for side in pair:
            e = d.errors.get(side)
            if e is not None:
                return e.message, e.phase, side
    if kind == Kind.HARD_CRASH:
        return d.message, d.phase, None
    return None, None, None

