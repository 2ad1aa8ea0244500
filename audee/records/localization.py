"""The localization report, as declared types.

``audee localize`` (:mod:`audee.localize.run`) builds a :class:`LocalizationReport` while the
localize-fix loop runs (:mod:`audee.localize.localizer`: its rounds, their trials, ranked
candidates and the named sources); ``--json`` prints it, the campaign's RQ2 stage writes it
inside one :class:`LocalizationRecord` per unique inconsistency
(``units/<id>/localize/<case>--<pair>.json``), which the report (:mod:`audee.report`) and
bug signatures read back.

Why these rules:

* **same JSON as the dataclasses before them**: fields are declared in their order, and
  :meth:`LocalizationReport.to_json` keeps its old form (every field, the derived
  ``candidates`` list, non-finite floats as the strings ``"nan"``/``"inf"``, tuples as
  lists, numpy scalars as numbers); a stage file keeps the keys that were written only.
* **old files load**: every field has a default; a key a newer version adds is kept.
* **positional construction**: ``Source("conv", "Conv2D", "padding", ...)`` as before.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_serializer, model_validator

from audee.records.findings import plain

NAN = float("nan")


def jsonable(x: Any) -> Any:
    """A report's JSON values: non-finite floats as strings, tuples as lists, numpy scalars
    as numbers (what ``json.dumps`` writes without ``NaN`` literals)."""
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    if isinstance(x, np.generic):
        return x.item()
    return x


class Part(BaseModel):
    """A part of a localization report: positional or keyword construction, numpy values made
    plain, unknown keys kept."""

    model_config = ConfigDict(extra="allow")

    def __init__(self, *args: Any, **data: Any) -> None:
        names = list(type(self).model_fields)
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional arguments")
        super().__init__(**dict(zip(names, args)), **data)

    @model_validator(mode="before")
    @classmethod
    def _plain_values(cls, data: Any) -> Any:
        return plain(dict(data)) if isinstance(data, Mapping) else data

    def to_json(self) -> dict[str, Any]:
        return jsonable(self.model_dump())


class RateRow(Part):
    """One layer of a rate table: Definition 4 distance between the pair, change rate."""

    layer: str = ""
    api: str = ""
    distance: float = NAN
    rate: float = NAN


class Trial(Part):
    """One experiment of the loop: a parameter of the target layer replaced, and the verdict."""

    layer: str = ""
    param: str = ""
    old: Any = None
    new: Any = None
    verdict: str = ""                       # removed | fails | unbuildable | crash | nan
    rate: float = NAN
    detail: str = ""
    context: dict[str, Any] | None = None   # masking test: the other parameter moved


class LocalizedPair(Part):
    """A localized (layer, parameter): its value and the replacement that removes the
    failure (a stage file's summary holds these; a report's :class:`Source` adds more)."""

    layer: str = ""
    api: str = ""
    param: str = ""
    old: Any = None
    new: Any = None


class Source(LocalizedPair):
    """A named (layer, parameter), as the localize-fix loop found it: the kind it localized
    and the failure rate it removed (fields after :class:`LocalizedPair`'s, in that order)."""

    kind: str = ""                          # the finding kind localized
    rate: float = NAN

    def signature(self) -> tuple:
        return (self.layer, self.param)


class Evidence(Part):
    """A candidate's evidence (audee.localize.evidence), each in [0, 1]; ``default`` and
    ``masking`` only where known (absent from the JSON otherwise)."""

    share: float = 0.0
    default: float | None = None
    masking: float | None = None

    @model_serializer(mode="wrap")
    def _known_only(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class RankedCandidate(Part):
    """A candidate parameter, ranked (audee.localize.evidence.Candidate's record)."""

    layer: str = ""
    api: str = ""
    param: str = ""
    old: Any = None
    origin: str = ""                        # config | signature | input
    removing: list[Any] = []                # replacements that remove the failure
    failing: list[Any] = []                 # replacements that keep it
    default: Any = None
    default_removes: bool | None = None
    contexts: int = 0
    toggles: int = 0
    best_rate: float = NAN
    order: int = 0
    score: float = 0.0
    named: bool = False
    share: float = 0.0
    evidence: Evidence = Field(default_factory=Evidence)


class Round(Part):
    """One round of the localize-fix loop: its target layer and what was tried on it."""

    layer: str | None = None
    table: list[RateRow] = []               # per layer: distance, change rate (inconsistency)
    trials: list[Trial] = []
    baseline_rate: float = NAN              # the layer alone with its original parameters
    candidates: list[RankedCandidate] = []  # ranked, with evidence
    baseline: str = ""                      # the probe's verdict on the layer alone, unchanged


class Trigger(Part):
    """An input-borne failure: sanitizing the special values of the layer's input removes it."""

    layer: str = ""
    sanitized: list[str] = []


class LocalizationReport(Part):
    """What ``audee localize`` found for a case's main failure."""

    case_id: str = ""
    kind: str = ""
    backends: list[str] = []
    rounds: list[Round] = []
    sources: list[Source] = []
    cradle: list[str] = []
    reproduced: bool = True
    note: str = ""
    trigger: Trigger | None = None
    error: str | None = None                # crash / rejection: the normalized error
    repro: str | None = None                # one-layer repro script of the top candidate

    @model_validator(mode="before")
    @classmethod
    def _derived(cls, data: Any) -> Any:
        """``candidates`` in the JSON is derived from the rounds: not read back."""
        if isinstance(data, Mapping) and "candidates" in data:
            data = {k: v for k, v in data.items() if k != "candidates"}
        return data

    @property
    def candidates(self) -> list[RankedCandidate]:
        return [c for rnd in self.rounds for c in rnd.candidates]

    def to_json(self) -> dict[str, Any]:
        d = self.model_dump()
        d["candidates"] = [c.model_dump() for c in self.candidates]
        return jsonable(d)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LocalizationReport":
        return cls.model_validate(dict(d))

    def top_source(self) -> tuple[str, str, Any] | None:
        """(API, parameter, blamed value) of the top source, or None."""
        if not self.sources:
            return None
        s = self.sources[0]
        return str(s.api), str(s.param), s.old


class LocalizationRecord(Part):
    """One file of the campaign's RQ2 stage: the unique inconsistency (from
    :func:`audee.report.dedup.unique_inconsistencies`), what the report tables need, the
    full report (None when localizing failed, with ``error``), the seconds it took.  Only
    the keys written are dumped, as the dict before it did."""

    unit: str | None = None
    seed: str | None = None
    pair: str = ""
    level: str | None = None
    dnn: str | None = None
    case_id: str = ""
    case_file: str | None = None
    key: list[Any] = []                     # audee.report.dedup.inconsistency_key
    reproduced: bool | None = None
    note: str | None = None
    layers: int | None = None
    top1_rate: float | None = None
    localized: list[LocalizedPair] = []
    cradle: list[str] = []
    error: str | None = None
    report: LocalizationReport | None = None
    seconds: float | None = None

    @field_serializer("report")
    def _whole_report(self, report: LocalizationReport | None) -> dict[str, Any] | None:
        return None if report is None else report.to_json()

    @classmethod
    def of_pick(cls, pick: Mapping[str, Any]) -> "LocalizationRecord":
        """The record of one unique inconsistency, before it is localized (key last)."""
        return cls.model_validate({**{k: v for k, v in pick.items() if k != "key"}, "key": list(pick["key"])})

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LocalizationRecord":
        return cls.model_validate(dict(d))

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)

    def summary(self) -> dict[str, Any]:
        """The written fields but the full report (what the report's tables read), the
        localized pairs as :class:`LocalizedPair`."""
        extra = self.model_extra or {}
        out = {k: getattr(self, k) for k in type(self).model_fields if k in self.model_fields_set and k != "report"}
        return {**out, **extra}

    def top_source(self) -> tuple[str, str, Any] | None:
        """(API, parameter, blamed value) of the top localized pair, or None."""
        if not self.localized:
            return None
        top = self.localized[0]
        return str(top.api), str(top.param), top.old


def parse_localization(d: Mapping[str, Any]) -> LocalizationRecord | LocalizationReport:
    """A localization's JSON: a stage file (its ``localized`` pairs) or a report (its
    ``sources``)."""
    if d.get("localized"):
        return LocalizationRecord.from_json(d)
    return LocalizationReport.from_json(d)


__all__ = ["Evidence", "LocalizationRecord", "LocalizationReport", "LocalizedPair", "RankedCandidate", "RateRow",
           "Round", "Source", "Trial", "Trigger", "jsonable", "parse_localization"]
