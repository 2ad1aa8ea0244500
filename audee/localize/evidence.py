"""The ranking rule: which (layer, parameter) the causal evidence points at.

A parameter is a *candidate* when some replacement of its value, everything else kept,
removes the failure from its layer alone.  One such replacement is weak evidence: a value
that masks the trigger (a 1-wide kernel makes the padding irrelevant; a pool size and
stride that leave no border overhang) removes the failure as surely as fixing the real
cause does.  So each candidate gets three pieces of evidence, each a number in [0, 1]:

* ``share``: how many of its alternative values (that run) remove the failure; a masker
  removes it only at its special values, the cause at most of them;
* ``default``: whether the Keras default value removes it (1) or not (0); unknown when
  the parameter has no default, already uses it, or the default does not run;
* ``masking``: the masking test: the candidate keeps its value while another parameter
  moves to a value that still fails (a different context); does the failure then go when
  the candidate alone takes each of its removing values?  A cause's fixes work in every
  context; a masker's (a pool size that happened to leave no overhang) only where the
  context keeps the trigger masked.  Unknown when there is no context.

The candidate's *score* is the mean of the evidence it has.  Candidates are ranked by
score (then by how many values remove the failure, then by the best replacement's
one-layer rate, then by parameter order); the named sources are the candidates within
:data:`TIE` of the top score: the ones the evidence cannot tell apart.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from audee.records.localization import RankedCandidate

TIE = 0.05  # candidates this close to the top score are named together


@dataclass
class Candidate:
    layer: str
    api: str
    param: str
    old: Any
    origin: str                        # config | signature
    removing: list[Any] = field(default_factory=list)   # replacements that remove the failure
    failing: list[Any] = field(default_factory=list)    # replacements that keep it
    default: Any = None
    default_removes: bool | None = None
    contexts: int = 0                  # masking test: (context, removing value) pairs tried
    toggles: int = 0                   # ... in which the value removes the failure
    best_rate: float = float("nan")    # the best replacement's one-layer rate (inconsistency)
    order: int = 0                     # position among the layer's parameters
    score: float = 0.0
    named: bool = False

    @property
    def share(self) -> float:
        tried = len(self.removing) + len(self.failing)
        return len(self.removing) / tried if tried else 0.0

    @property
    def fix(self) -> Any:
        """The replacement to fix the model with: the default if it removes the failure."""
        return self.default if self.default_removes else self.removing[0]

    def evidence(self) -> dict[str, float]:
        ev = {"share": round(self.share, 3)}
        if self.default_removes is not None:
            ev["default"] = 1.0 if self.default_removes else 0.0
        if self.contexts:
            ev["masking"] = round(self.toggles / self.contexts, 3)
        return ev

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(share=round(self.share, 3), evidence=self.evidence())
        return d

    def to_record(self) -> RankedCandidate:
        """The candidate as the report records it (a round's ``candidates``)."""
        return RankedCandidate.model_validate(self.to_json())


def score(c: Candidate) -> float:
    ev = c.evidence()
    return sum(ev.values()) / len(ev)


def rank(cands: list[Candidate]) -> list[Candidate]:
    """Score, sort and mark the named ones (see the module docstring)."""
    for c in cands:
        c.score = round(score(c), 4)
    ranked = sorted(cands, key=lambda c: (-c.score, -len(c.removing),
                                          c.best_rate if c.best_rate == c.best_rate else float("inf"), c.order))
    if ranked:
        top = ranked[0].score
        for c in ranked:
            c.named = c.score >= top - TIE
    return ranked
