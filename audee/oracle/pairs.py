"""The one owner of "which side of a pair is judged against the other": a backend that
compiles or converts another's program (its description's ``reference``,
:func:`audee.backends.info.reference_of`) must compute what that program computes, so in a
pair of the two the reference is right by definition and the other side is the odd one.

Between independent frameworks (``tensorflow``, ``torch``, ``jax``) nothing is anyone's
reference: the majority and the float64 reference decide, as before.  The odd-backend
marking (:mod:`audee.oracle.odd`), the root-cause classes and the pair folding
(:mod:`audee.triage.rootcause`) read these functions and no other copy of the rule
(docs/oracles.md, "Pairs and their references").
"""
from __future__ import annotations

from itertools import combinations
from typing import Iterable

from audee.backends.info import reference_of


def judged_against(a: str, b: str) -> str | None:
    """The reference side of the pair ``a``, ``b`` (result labels) where one compiles or
    converts the other's program on the same placement; None between independent backends."""
    if reference_of(a) == b:
        return b
    if reference_of(b) == a:
        return a
    return None


def judged_side(a: str, b: str) -> str | None:
    """The side of the pair ``a``, ``b`` judged against the other (the compiled or converted
    one), or None where neither is the other's reference."""
    ref = judged_against(a, b)
    return None if ref is None else (b if ref == a else a)


def odd_by_reference(pairs: Iterable[Iterable[str]]) -> tuple[list[str], str] | None:
    """The odd backends of differing ``pairs`` when each is a compiled or converted backend
    and its reference: the judged sides, and the rule that decided; None when any differing
    pair is two independent backends (or there is none)."""
    sides, refs = set(), set()
    for pair in pairs:
        members = sorted(pair)
        if len(members) != 2:
            return None
        side = judged_side(*members)
        if side is None:
            return None
        sides.add(side)
        refs.update(m for m in members if m != side)
    if not sides or sides & refs:  # a backend both judged and the judge: no single answer
        return None
    return sorted(sides), "judged against its reference " + ", ".join(sorted(refs))


def differing_pairs(groups: dict[str, object]) -> list[frozenset[str]]:
    """The pairs of backends in different groups (backend -> group key)."""
    return [frozenset((a, b)) for a, b in combinations(sorted(groups), 2) if groups[a] != groups[b]]


def in_contract(odd: Iterable[str], backends: Iterable[str]) -> bool:
    """Whether a difference whose odd backends are ``odd``, among ``backends``, is judged
    against a reference that is itself not odd: each odd backend compiles or converts one of
    the others, which the odd ones are not.  Then the inputs the reference took (NaN, Inf)
    are in the contract: the compiled or converted program must keep what its source computes."""
    odd = {str(b) for b in odd}
    involved = {str(b) for b in backends}
    if not odd:
        return False
    refs = {reference_of(b) for b in odd}
    return all(r is not None and r in involved and r not in odd for r in refs)
