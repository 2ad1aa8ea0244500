"""Known issues: bug signatures already reported upstream, so a run says "known" instead of "new".

audee ships ``audee/data/known_issues.yaml``; ``--known-issues FILE`` (repeatable) adds a
user's own list, ``--no-shipped-known-issues`` leaves the shipped one out.  A file::

    issues:
      - id: tf2onnx-gelu-erfc            # letters, digits, - _ .; unique over all lists
        title: one line
        note: what happens and why, what to do
        link: https://github.com/...     # the upstream issue
        class: limitation                # optional: bug, limitation, undefined, harness (audee.triage.rootcause)
        match:                           # every criterion given must hold; at least one
          kind: divergent_acceptance     # or a list of kinds
          api: activations.gelu          # the signature's responsible API, or a list: any of them
          params: {activation: gelu}     # a subset of the signature's parameters
          backends: [onnxruntime]        # a subset of the odd backends (else of the signature's)
          phase: convert                 # build, convert, weights, run (train, gradient, update); or a list
          error: 'No Op registered for Erfc'   # a regex searched in the whole normalized error

An ``api`` matches the signature's blamed API, the layer it pins, and every alias of
either: another public name of the same Keras class or a Keras layer it subclasses
(``ReversibleEmbedding`` is an ``Embedding``; :func:`audee.apis.keras_layers.layer_aliases`,
stored with the Keras layer list).  ``backends`` is compared with the odd
backends where the oracle named them: an entry about TensorFlow dropping NaN does not
match a finding where onnxruntime is the odd one.  Numbers in ``params`` match by sign, as
signatures keep them (``units: 3`` matches any positive ``units``).  The schema is checked
(unknown keys refused) and a bad file is one line naming the file and the field, exit code 2.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from audee.apis.keras_layers import layer_aliases
from audee.cases.kinds import FAILURES
from audee.core.paths import data_dir
from audee.records.rows import PlacedRow, ResultRow
from audee.triage.rootcause import CLASSES, classify, root_of
from audee.settings import FieldError, validate_settings
from audee.triage.signature import Signature, value_class
from audee.triage import Bug, KnownRoot
from audee.core.yamlio import read_yaml_mapping

KINDS = FAILURES  # the failure kinds a match may name (the finding kind table's)


def shipped_file() -> Path:
    return data_dir() / "known_issues.yaml"


def _apis_of(sig: Signature) -> set[str]:
    """Every API a signature may be known by: its blamed API's parts, the layer it pins, and
    their aliases."""
    apis = {a for a in (sig.api or "").split("+") if a} | ({sig.layer} if sig.layer else set())
    table = layer_aliases()
    return apis | {alias for a in apis for alias in table.get(a, ())}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)


class KnownMatch(_Strict):
    kind: str | list[str] | None = Field(None, description="finding kind(s)")
    api: str | list[str] | None = Field(None, min_length=1,
                                        description="responsible layer API, or a list of APIs (any of them)")
    params: dict[str, Any] | None = Field(None, description="parameter values (a subset)")
    backends: list[str] | None = Field(None, min_length=1, description="backends (a subset)")
    phase: str | list[str] | None = Field(None, description="crash phase, or a list of phases (any of them)")
    error: str | None = Field(None, min_length=1, description="regex on the normalized error message")

    @field_validator("kind")
    @classmethod
    def _kinds(cls, v: Any) -> Any:
        for k in [v] if isinstance(v, str) else v or []:
            if k not in KINDS:
                raise ValueError(f"unknown finding kind {k!r} (known: {', '.join(KINDS)})")
        return v

    @field_validator("phase")
    @classmethod
    def _phase(cls, v: Any) -> Any:
        for p in [v] if isinstance(v, str) else v or []:
            if p not in ("build", "convert", "weights", "run", "train", "gradient", "update"):
                raise ValueError(f"expected build, convert, weights, run (or, in training, train, gradient, update), "
                                 f"got {p!r}")
        return v

    @field_validator("error")
    @classmethod
    def _regex(cls, v: Any) -> Any:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return v

    @model_validator(mode="after")
    def _something(self) -> "KnownMatch":
        if all(getattr(self, k) in (None, {}, []) for k in type(self).model_fields):
            raise ValueError("give at least one of kind, api, params, backends, phase, error")
        return self

    def matches(self, sig: Signature) -> bool:
        if self.kind is not None and sig.kind not in ([self.kind] if isinstance(self.kind, str) else self.kind):
            return False
        if self.api is not None:
            wanted = [self.api] if isinstance(self.api, str) else self.api
            if not set(wanted) & _apis_of(sig):
                return False
        if self.params:
            have = set(sig.params)
            for p, v in self.params.items():
                if not ({(p, value_class(v)), (p, repr(v)), (p, str(v))} & have):
                    return False
        if self.backends and not set(self.backends) <= set(sig.named_backends):
            return False
        if self.phase is not None and sig.phase not in ([self.phase] if isinstance(self.phase, str) else self.phase):
            return False
        if self.error is not None and not re.search(self.error, sig.error_full or sig.error or ""):
            return False
        return True


class KnownIssue(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="a short unique id")
    title: str = Field(min_length=1)
    note: str = ""
    link: str = Field(pattern=r"^https?://\S+$", description="the upstream issue")
    klass: str | None = Field(None, alias="class",
                              description="the class of what it matches (audee.triage.rootcause); default: by the rules")
    match: KnownMatch
    _source: str = PrivateAttr("")

    @field_validator("klass")
    @classmethod
    def _class(cls, v: Any) -> Any:
        if v is not None and v not in CLASSES:
            raise ValueError(f"unknown class {v!r} (known: {', '.join(CLASSES)})")
        return v  # the file it came from (set on loading)

    @property
    def source(self) -> str:
        return self._source

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "link": self.link, "source": self.source}


class KnownIssues(_Strict):
    issues: list[KnownIssue] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> "KnownIssues":
        seen: set[str] = set()
        for i, issue in enumerate(self.issues):
            if issue.id in seen:
                raise FieldError(f"issues[{i}].id", f"duplicate id {issue.id!r}")
            seen.add(issue.id)
        return self


def load_known_file(path: str | Path) -> list[KnownIssue]:
    """One known-issues file, schema-checked (a :class:`audee.core.errors.ConfigError` naming the
    file and the field otherwise)."""
    data = read_yaml_mapping(path, "a mapping with an `issues:` list")
    doc = validate_settings(KnownIssues, data, str(path))
    for issue in doc.issues:
        issue._source = str(path)
    return doc.issues


def load_known_issues(files: list[str | Path] | tuple = (), shipped: bool = True) -> list[KnownIssue]:
    """The shipped list (unless ``shipped`` is false) and every file of ``files``, in order;
    an id given twice is an error naming the second file."""
    from audee.core.errors import ConfigError

    out: list[KnownIssue] = []
    seen: dict[str, str] = {}
    for path in ([shipped_file()] if shipped else []) + [Path(f) for f in files]:
        for issue in load_known_file(path):
            if issue.id in seen:
                raise ConfigError(f"id {issue.id!r} is already defined in {seen[issue.id]}",
                                  source=str(path), field="issues.id")
            seen[issue.id] = str(path)
            out.append(issue)
    return out


def match_known(sig: Signature | dict[str, Any], issues: list[KnownIssue]) -> KnownIssue | None:
    """The first known issue whose match holds for ``sig``, or None (a new bug)."""
    if isinstance(sig, dict):
        sig = Signature.from_json(sig)
    return next((i for i in issues if i.match.matches(sig)), None)


def unique_bugs(rows: Iterable[PlacedRow | ResultRow], issues: list[KnownIssue]) -> list[Bug]:
    """Unique bugs over result rows (each one's ``signatures``): one :class:`Bug` per
    signature key, new ones first, then by cases behind it; each with its known issue (if
    any), its class (:func:`audee.triage.rootcause.classify`) and root (the known issue's link, else
    :func:`audee.triage.rootcause.root_of`), the number of cases, the first case (by id) and its case
    file, the repro script ``<slug>.py`` of the row's run directory when one exists (a
    :class:`PlacedRow` says where a row was read; a bare row has its case file as written and
    no script), and the campaign units it was seen in."""
    first: dict[str, Bug] = {}
    case_ids: dict[str, set[str]] = {}
    units: dict[str, list[str]] = {}
    placed = [r if isinstance(r, PlacedRow) else PlacedRow(r) for r in rows]
    for at in sorted(placed, key=lambda a: a.row.id):
        row = at.row
        for d in row.signatures:
            sig = Signature.from_json(d)
            key = sig.key()
            if key not in first:
                issue = match_known(sig, issues)
                klass, why = classify(sig, issue)
                repro = Path(at.repro_dir) / f"{sig.slug()}.py" if at.repro_dir is not None else None
                first[key] = Bug(
                    sig, KnownRoot(issue.link) if issue else root_of(sig), klass, why, cases=0, first_case=row.id,
                    case_file=at.case_path or row.case_file,
                    repro=str(repro) if repro is not None and repro.is_file() else None,
                    known_id=issue.id if issue else None, known_title=issue.title if issue else None,
                    link=issue.link if issue else None)
                case_ids[key], units[key] = set(), []
            case_ids[key].add(row.id)
            if at.unit is not None and at.unit not in units[key]:
                units[key].append(at.unit)
    bugs = [replace(b, cases=len(case_ids[k]), units=tuple(units[k])) for k, b in first.items()]
    return sorted(bugs, key=lambda b: (b.status != "new", -b.cases, b.key))
