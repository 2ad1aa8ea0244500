"""The triage records: a bug and a root cause as declared types.

A **bug** is one signature (:mod:`audee.triage.signature`) as a maintainer counts it: its class,
the known issue it matches, the cases behind it and where the first one's case file and
repro script are.  A **root cause** is the bugs one upstream fix would close, known by a
**root key**: a crash's failing component, op and error template; a numeric or NaN
difference's odd backend (or the pair the oracle could not tell apart) and layer; or the
link of the known issue its bugs match.  :func:`audee.triage.known.unique_bugs` makes the bugs and
:func:`audee.triage.rootcause.root_causes` the root causes; the summary, the report and the printed
lines read these records as they were made, so no reader rebuilds one from key strings.

Each record writes the JSON a run's ``summary.json`` has always held (``to_json``) and
reads it back (``from_json``); a root key's text is the one reports print and hash.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from audee.cases.case import Kind
from audee.cases.kinds import CRASHES, root_family
from audee.triage.signature import Signature

#: the first word of a known issue's root key
KNOWN = "known"
_SEP = " | "

#: a bug's or a root cause's status: no triaged entry matches it (``new``), or the status of
#: the entry that does (audee.triage.known): the project's own triaged finding (a row and a
#: script in ``findings/``), an issue known upstream (its link), or one whose fix was merged
#: upstream after the installed version
NEW, FOUND_BEFORE, KNOWN_UPSTREAM, FIXED_UPSTREAM = "new", "found before", "known upstream", "fixed upstream"
STATUSES = (NEW, FOUND_BEFORE, KNOWN_UPSTREAM, FIXED_UPSTREAM)
#: what a standalone script did when run again alone (``audee recheck``; a root cause's ``alone``):
#: printed REPRODUCED, printed NOT REPRODUCED, printed NOT TESTABLE HERE (this machine lacks what the
#: bug needs, such as a CPU instruction set its kernel runs on: neither there nor fixed), or none of
#: them (an error, a timeout)
REPRODUCES, FIXED, UNTESTABLE, BROKEN = "reproduces", "fixed", "not testable here", "broken"
RECHECK_RESULTS = (REPRODUCES, FIXED, UNTESTABLE, BROKEN)


@dataclass(frozen=True)
class CrashRoot:
    """A crash or a rejection: the component that failed (else the failing backends), the op
    or layer its error names (``-``: none) and the error's template (:func:`audee.triage.rootcause.template`)."""

    kind: str
    who: str
    op: str
    template: str

    def __str__(self) -> str:
        return _SEP.join([self.kind, self.who, self.op, self.template])


@dataclass(frozen=True)
class NumericRoot:
    """A difference in values (a numeric, NaN or equivalence family, :func:`audee.cases.kinds.root_family`):
    the odd backends, or where the oracle could not tell them the finding's backends
    (``pair``, printed ``?a,b``); the layer that fails on its own input (with the parameters
    localization named, an equivalence rule); for NaN whether the input held NaN/Inf."""

    family: str
    odd: tuple[str, ...]
    what: str
    pair: tuple[str, ...] = ()
    source: str | None = None

    def __post_init__(self) -> None:
        if self.odd and self.pair:  # one of the two names who is off, never both: equal roots, equal keys
            raise ValueError(f"a root names its odd backends or its pair, not both: {self.odd}, {self.pair}")

    @property
    def told(self) -> bool:
        """Whether the oracle named the odd backends (else the root is a pair's)."""
        return bool(self.odd)

    def with_odd(self, backend: str) -> "NumericRoot":
        """The same family, layer and input with ``backend`` the odd one: the root a pair's is a view of."""
        return replace(self, odd=(backend,), pair=())

    def __str__(self) -> str:
        who = ",".join(self.odd) if self.odd else "?" + ",".join(self.pair)
        return _SEP.join([self.family, who, self.what, *([self.source] if self.source is not None else [])])


@dataclass(frozen=True)
class KnownRoot:
    """Every bug matching a known issue at ``link``: one upstream issue is one fix, however
    many entries, backends or error texts reach it.  An entry of the project's own findings
    has no upstream link: its ``link`` is its findings row and id (``findings row 7:
    tf2onnx-biasadd-nchw-nonconst``), one entry one fix."""

    link: str

    def __str__(self) -> str:
        return f"{KNOWN}{_SEP}{self.link}"


RootKey = CrashRoot | NumericRoot | KnownRoot


def parse_root(text: str) -> RootKey:
    """A root key read back from its text (a summary's ``root``): the inverse of ``str``."""
    head, _, rest = text.partition(_SEP)
    if head == KNOWN:
        return KnownRoot(rest)
    parts = rest.split(_SEP)
    if head in CRASHES:  # the template is last and may hold anything
        if len(parts) < 3:
            raise ValueError(f"not a crash's root key: {text!r}")
        return CrashRoot(head, parts[0], parts[1], _SEP.join(parts[2:]))
    if len(parts) < 2:
        raise ValueError(f"not a root key: {text!r}")
    who, *what = parts
    source = what.pop() if head == root_family(Kind.NAN) and len(what) > 1 else None
    backends = tuple(b for b in who.lstrip("?").split(",") if b)
    told = not who.startswith("?")
    return NumericRoot(head, backends if told else (), _SEP.join(what), () if told else backends, source)


def _opt(v: Any) -> str | None:
    return None if v is None else str(v)


def _known_status(d: dict[str, Any]) -> str | None:
    """The status a summary entry was written with, as a matched entry's (None: new); a
    summary written before the four statuses said ``known`` for every match: known upstream."""
    status = d.get("status")
    if status in (None, NEW):
        return KNOWN_UPSTREAM if d.get("known_id") else None
    return KNOWN_UPSTREAM if status == KNOWN else str(status)


@dataclass(frozen=True)
class Bug:
    """One signature over a run's rows: its class and why (:func:`audee.triage.rootcause.classify`),
    the known issue it matches (None: a new bug) with its status and where it is known (the
    link, or the findings row and script), its root key, the cases behind it, the first one
    (by id) with its case file and the repro script ``<slug>.py`` where one was written, and
    the campaign units it was seen in."""

    signature: Signature
    root: RootKey
    klass: str
    class_reason: str
    cases: int
    first_case: str
    case_file: str | None = None
    repro: str | None = None
    known_id: str | None = None
    known_title: str | None = None
    link: str | None = None
    units: tuple[str, ...] = ()
    known_status: str | None = None
    known_where: str | None = None
    #: the ids of the cases behind it (``cases`` of them), so a root of several signatures counts a case once
    case_ids: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def status(self) -> str:
        """``new``, or the matched entry's status (:data:`STATUSES`)."""
        return self.known_status or (KNOWN_UPSTREAM if self.known_id else NEW)

    @property
    def kind(self) -> str:
        return self.signature.kind

    @property
    def backends(self) -> tuple[str, ...]:
        return self.signature.backends

    @property
    def odd(self) -> tuple[str, ...]:
        return self.signature.odd

    @property
    def api(self) -> str | None:
        return self.signature.api

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(f"{p}={v}" for p, v in self.signature.params)

    @property
    def what(self) -> str:
        return self.signature.describe()

    @property
    def phase(self) -> str | None:
        return self.signature.phase

    @property
    def error(self) -> str | None:
        return self.signature.error

    @property
    def key(self) -> str:
        return self.signature.key()

    @property
    def slug(self) -> str:
        return self.signature.slug()

    def to_json(self) -> dict[str, Any]:
        """A summary's ``bugs`` entry."""
        return {"status": self.status, "known_id": self.known_id, "known_title": self.known_title, "link": self.link,
                "known_where": self.known_where, "class": self.klass, "class_reason": self.class_reason,
                "kind": self.kind,
                "backends": list(self.backends), "odd": list(self.odd), "api": self.api, "params": list(self.params),
                "what": self.what, "phase": self.phase, "error": self.error, "cases": self.cases,
                "first_case": self.first_case, "case_file": self.case_file, "repro": self.repro, "key": self.key,
                "root": str(self.root), "slug": self.slug, "units": list(self.units), "case_ids": list(self.case_ids)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Bug":
        """A summary's ``bugs`` entry read back: its signature as far as the entry keeps one
        (what its key is made of; not the facts only a root key and a class are decided on)."""
        params = tuple(tuple(str(p).split("=", 1)) for p in d.get("params") or [])
        sig = Signature(str(d["kind"]), _opt(d.get("api")), params,  # type: ignore[arg-type]
                        tuple(str(b) for b in d.get("backends") or []), _opt(d.get("phase")), _opt(d.get("error")),
                        tuple(str(b) for b in d.get("odd") or []))
        return cls(sig, parse_root(str(d["root"])), str(d["class"]), str(d["class_reason"]), int(d["cases"]),
                   str(d["first_case"]), _opt(d.get("case_file")), _opt(d.get("repro")), _opt(d.get("known_id")),
                   _opt(d.get("known_title")), _opt(d.get("link")), tuple(str(u) for u in d.get("units") or []),
                   _known_status(d), _opt(d.get("known_where")), tuple(str(c) for c in d.get("case_ids") or []))


@dataclass(frozen=True)
class RootCause:
    """One upstream fix (:mod:`audee.triage.rootcause`): its key; its class (the most telling of its
    bugs') and why; the known issue any of them matches, its status and where it is known;
    the first bug's kind, component, op,
    layer API, normalized error and first case; the backends involved and the odd ones; for
    an ``undefined`` cause the backend silently different from the rest; how many signatures
    and cases (each case once, however many of its signatures the root holds) are behind it.

    ``case_file``, ``repro`` and ``members`` say where this process found the first case's
    files and which bugs it grouped: the report reads them, a summary does not keep them, so
    they are not part of a root cause's equality."""

    root: RootKey
    klass: str
    class_reason: str
    kind: str
    api: str
    signatures: int
    cases: int
    first_case: str
    known_id: str | None = None
    component: str | None = None
    op: str | None = None
    error: str | None = None
    odd: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    silent: str | None = None
    known_status: str | None = None
    known_where: str | None = None
    #: its repro script run again alone (:data:`RECHECK_RESULTS`), None where not run: a new
    #: root whose script does not reproduce alone is not counted as a new bug
    alone: str | None = None
    case_file: str | None = field(default=None, compare=False)
    repro: str | None = field(default=None, compare=False)
    members: tuple[Bug, ...] = field(default=(), compare=False, repr=False)

    @property
    def status(self) -> str:
        """``new``, or the status of the entry its bugs match (:data:`STATUSES`)."""
        return self.known_status or (KNOWN_UPSTREAM if self.known_id else NEW)

    @property
    def new_bug(self) -> bool:
        """A new bug a maintainer gets a report of: class ``bug``, no triaged entry matches it,
        and its script, where it was run again alone, reproduced."""
        return self.klass == "bug" and self.status == NEW and self.alone in (None, REPRODUCES)

    def to_json(self) -> dict[str, Any]:
        """A summary's ``roots`` entry."""
        return {"class": self.klass, "status": self.status, "known_id": self.known_id,
                "known_where": self.known_where, "kind": self.kind,
                "component": self.component, "op": self.op, "api": self.api, "odd": list(self.odd),
                "backends": list(self.backends), "silent": self.silent, "signatures": self.signatures,
                "cases": self.cases, "first_case": self.first_case, "class_reason": self.class_reason,
                "error": self.error, "root": str(self.root), **({"alone": self.alone} if self.alone else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RootCause":
        """A summary's ``roots`` entry read back."""
        return cls(parse_root(str(d["root"])), str(d["class"]), str(d["class_reason"]), str(d["kind"]),
                   str(d["api"]), int(d["signatures"]), int(d["cases"]), str(d["first_case"]),
                   _opt(d.get("known_id")), _opt(d.get("component")), _opt(d.get("op")), _opt(d.get("error")),
                   tuple(str(b) for b in d.get("odd") or []), tuple(str(b) for b in d.get("backends") or []),
                   _opt(d.get("silent")), _known_status(d), _opt(d.get("known_where")),
                   d.get("alone") if d.get("alone") in RECHECK_RESULTS else None)

