"""Triaged bugs: signatures the project or upstream already knows, so a run says which root
causes are new and which were found before, are known upstream or were fixed upstream.

audee ships ``audee/data/known_issues.yaml``, the one list of triaged bugs: the project's own
findings (``findings/``: a row of ``findings/README.md``, whose summary table
``findings/make_readme.py`` writes from this file, and a standalone script) and the issues
known upstream.  ``--known-issues FILE`` (repeatable) adds a user's own list,
``--no-shipped-known-issues`` leaves the shipped one out.  A file::

    findings:                            # optional: the rows of findings/README.md's summary table
      - row: 7
        title: tf2onnx BiasAdd(data_format=NCHW) with a non-constant bias
        script: tf2onnx_biasadd_nchw_nonconst.py   # in findings/; none for a row without one
        backends: onnxruntime            # the table's cells, Markdown
        output: ...
        upstream: not found (queries: ...)
        verdict: '**converter bug** (...)'
    issues:
      - id: tf2onnx-gelu-erfc            # letters, digits, - _ .; unique over all lists
        title: one line
        status: known upstream           # found before (a findings row, no upstream report), known upstream
                                         # (the default), fixed upstream (a fix merged after a release)
        row: 4                           # the findings row it belongs to (required for found before)
        note: what happens and why, what to do
        link: https://github.com/...     # the upstream issue (known upstream, fixed upstream)
        fixed: {package: keras, version: 3.16.0}   # fixed upstream: the first release with the fix
        class: limitation                # optional: bug, limitation, undefined, harness (audee.triage.rootcause)
        match:                           # optional (an entry no finding of audee's shows); every criterion
          kind: divergent_acceptance     # given must hold; at least one.  A kind or a list of kinds
          api: activations.gelu          # the signature's responsible API, or a list: any of them
          params: {activation: gelu}     # a subset of the signature's parameters; a list: any of those values
          unset: [activation]            # parameters the signature does not carry (a seed layer no mutation drew)
          backends: [onnxruntime]        # a subset of the odd backends (else of the signature's)
          odd: [onnxruntime]             # a subset of the backends the oracle named odd (none named: no match,
                                         # but an undecided NaN or deviation pair is read by side: _pair_sides)
          against_reference: false       # the odd ones judged only against their reference (true) or not (false)
          facts: [nonfinite_input]       # facts the signature records (audee.triage.signature: its context)
          without: [odd_fewer_nonfinite] # facts it must not record (a mechanism that only adds NaN); where
                                         # ``backends`` names the reference an odd converter was judged
                                         # against, the direction facts are the reference's (flipped)
          phase: convert                 # build, convert, weights, run (train, gradient, update); or a list
          error: 'No Op registered for Erfc'   # a regex searched in the whole normalized error
          policy: [float16, mixed_float16]     # the failing layer's dtype policy (float32 where none), or a list
          mask: true                     # the failing layer was called with a mask (false: without)
          program: select_as_arithmetic  # the odd backend's program shows this of the failing layer

A ``fixed upstream`` entry is compared with the installed version of its package when it is
matched: before the fixed version the fix is upstream only (``fixed upstream``: upgrade); at
or after it the fix did not cover what audee saw, which is then ``known upstream``.

An ``api`` matches the signature's blamed API, the layer it pins, and every alias of
either: another public name of the same Keras class or a Keras layer it subclasses
(``ReversibleEmbedding`` is an ``Embedding``; :func:`audee.apis.keras_layers.layer_aliases`,
stored with the Keras layer list).  ``backends`` is compared with the odd
backends where the oracle named them: an entry about TensorFlow dropping NaN does not
match a finding where onnxruntime is the odd one, unless onnxruntime was judged odd only
against TensorFlow, its reference (the reference's known bug is then the cause).  ``odd`` asks
more: that the oracle named those backends odd.  Where a converter follows its reference into
the reference's own bug, the two agree against the other frameworks and no side is named; a
rule for the converter's own face then says ``odd`` so that it leaves that finding to the
reference's entry.  A seed model's signature carries only the parameters its mutations drew,
so a rule about a layer's own activation names the activation for the API level and says
``unset`` for the seeds, whose layers keep theirs.  Numbers in ``params`` match by sign, as
signatures keep them (``units: 3`` matches any positive ``units``).  The schema is checked
(unknown keys refused; every findings row has an entry, every entry's row exists) and a bad
file is one line naming the file and the field, exit code 2.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from packaging.version import InvalidVersion, Version

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from audee.apis.keras_layers import layer_aliases
from audee.cases.kinds import FAILURES
from audee.core.paths import data_dir
from audee.records.findings import Phase
from audee.records.rows import PlacedRow, ResultRow
from audee.backends.info import PROGRAM_FACTS, reference_of
from audee.backends.registry import device_kind, unplaced
from audee.oracle.compute_dtype import POLICY_COMPUTE
from audee.oracle.pairs import component_changes
from audee.triage.rootcause import CLASSES, DOCUMENTED, classify, root_of
from audee.settings import FieldError, settings_error, validate_settings
from audee.triage.signature import (JUDGED_ONLY, ODD_FEWER_NONFINITE, ODD_MORE_NONFINITE, ODD_OFF_FLOAT64,
                                    OUTVOTED_ON_FLOAT64, PAIR_MORE_NONFINITE, PAIR_OFF_FLOAT64, PROGRAM, PROGRAM_OF,
                                    REJECTED_BY, Signature, explicit_refusal, value_class)
from audee.triage import FIXED_UPSTREAM, FOUND_BEFORE, KNOWN_UPSTREAM, Bug, KnownRoot, RootKey
from audee.core.yamlio import read_yaml_mapping

KINDS = FAILURES  # the failure kinds a match may name (the finding kind table's)
#: the statuses a triaged entry may have (a bug no entry matches is new)
ENTRY_STATUSES = (FOUND_BEFORE, KNOWN_UPSTREAM, FIXED_UPSTREAM)


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


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


class Fix(_Strict):
    package: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                         description="the distribution whose release carries the fix (keras, tensorflow, torch, ...)")
    version: str = Field(description="the first version with the fix (PEP 440)")

    @field_validator("version")
    @classmethod
    def _pep440(cls, v: Any) -> Any:
        if _version(v) is None:
            raise ValueError(f"not a version (PEP 440): {v!r}")
        return v


def _known_names(v: Any, known: Iterable[str], what: str) -> Any:
    """``v`` (a name, a list of names, or None) when every name is one of ``known``; else the
    one-line error naming the first that is not."""
    known = tuple(known)
    for name in [v] if isinstance(v, str) else v or []:
        if name not in known:
            raise ValueError(f"unknown {what} {name!r} (known: {', '.join(known)})")
    return v


class KnownMatch(_Strict):
    kind: str | list[str] | None = Field(None, description="finding kind(s)")
    api: str | list[str] | None = Field(None, min_length=1,
                                        description="responsible layer API, or a list of APIs (any of them)")
    params: dict[str, Any] | None = Field(None, description="parameter values (a subset; a list: any of them)")
    unset: list[str] | None = Field(None, min_length=1, description="parameters the signature does not carry")
    backends: list[str] | None = Field(None, min_length=1, description="backends (a subset)")
    odd: list[str] | None = Field(None, min_length=1, description="backends the oracle named odd (a subset of "
                                                                  "them; a finding with none named matches no rule "
                                                                  "that gives odd)")
    facts: list[str] | None = Field(None, min_length=1,
                                    description="facts the signature records about the case (a subset of its "
                                                "context: nonfinite_input, masked, overflow_boundary, ...)")
    without: list[str] | None = Field(None, min_length=1,
                                      description="facts the signature must not record (none of them): a mechanism "
                                                  "that only adds non-finite values is not the cause of a finding "
                                                  "whose odd backend has fewer (odd_fewer_nonfinite)")
    against_reference: bool | None = Field(
        None, description="whether the odd backends were judged only against their own reference (a compiled mode "
                          "against its eager run, a converter against the program it converted: true) or among "
                          "independent frameworks (false): a framework's kernel bug shows in the second, not where "
                          "both sides run that kernel")
    phase: str | list[str] | None = Field(None, description="crash phase, or a list of phases (any of them)")
    error: str | None = Field(None, min_length=1, description="regex on the normalized error message")
    policy: str | list[str] | None = Field(None, description="the dtype policy the failing layer ran under "
                                                           "(float32 where none is recorded), or a list (any of them)")
    mask: bool | None = Field(None, description="whether the failing layer was called with a mask")
    program: str | None = Field(None, description="what the odd backend's program shows of how it computes the "
                                                  "failing layer (audee.backends.info.PROGRAM_FACTS)")
    changed: Fix | None = Field(None, description="a regression whose version pair crosses this release: the "
                                                    "package older than the version on the older side, at or "
                                                    "after it on the newer (the release that changed it)")

    @field_validator("kind")
    @classmethod
    def _kinds(cls, v: Any) -> Any:
        return _known_names(v, KINDS, "finding kind")

    @field_validator("phase")
    @classmethod
    def _phase(cls, v: Any) -> Any:
        for p in [v] if isinstance(v, str) else v or []:
            if p not in Phase.ALL:
                raise ValueError(f"expected build, convert, weights, run (or, in training, train, gradient, update), "
                                 f"got {p!r}")
        return v

    @field_validator("policy")
    @classmethod
    def _policy(cls, v: Any) -> Any:
        return _known_names(v, POLICY_COMPUTE, "dtype policy")

    @field_validator("program")
    @classmethod
    def _program(cls, v: Any) -> Any:
        return _known_names(v, PROGRAM_FACTS, "program fact")

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
            raise ValueError("give at least one of kind, api, params, unset, backends, odd, against_reference, "
                             "facts, without, phase, error, policy, mask, program, changed")
        return self

    def matches(self, sig: Signature) -> bool:
        if self.odd and not sig.odd:
            return any(self._matches(side) for side in _pair_sides(sig))
        return self._matches(sig) or (bool(self.odd) and any(self._matches(side) for side in _outvoted(sig)))

    def _matches(self, sig: Signature) -> bool:
        if self.kind is not None and sig.kind not in ([self.kind] if isinstance(self.kind, str) else self.kind):
            return False
        if self.api is not None:
            wanted = [self.api] if isinstance(self.api, str) else self.api
            if not set(wanted) & _apis_of(sig):
                return False
        if self.params:
            have = set(sig.params)
            for p, v in self.params.items():
                if not any({(p, value_class(w)), (p, repr(w)), (p, str(w))} & have
                           for w in (v if isinstance(v, list) else [v])):
                    return False
        if self.unset and {p for p, _ in sig.params} & set(self.unset):
            return False
        context = set(sig.context)
        if self.backends and not set(self.backends) <= _unplaced(sig.named_backends):
            if not set(self.backends) <= _unplaced(_judges(sig)):
                return False
            context = _from_reference(context)  # the entry's backend is the reference the odd side left
        if self.odd and not set(self.odd) <= _unplaced(sig.odd):
            return False
        if self.against_reference is not None and bool(_judges(sig)) != self.against_reference:
            return False
        if self.facts and not set(self.facts) <= context:
            return False
        if self.without and set(self.without) & context:
            return False
        if self.phase is not None and sig.phase not in ([self.phase] if isinstance(self.phase, str) else self.phase):
            return False
        if self.error is not None and not re.search(self.error, sig.error_full or sig.error or ""):
            return False
        if self.policy is not None and sig.policy not in ([self.policy] if isinstance(self.policy, str) else self.policy):
            return False
        if self.mask is not None and sig.masked != self.mask:
            return False
        if self.program is not None and self.program not in sig.program:
            return False
        if self.changed is not None and not _crosses(sig, self.changed):
            return False
        return True


def _pair_sides(sig: Signature) -> list[Signature]:
    """An undecided NaN pair read from each side: its two independent frameworks, neither named
    odd, each taken as the odd one with the direction its non-finite count gives it
    (:data:`PAIR_MORE_NONFINITE`).  With two frameworks the oracle cannot tell which is wrong,
    but an entry whose mechanism adds (or drops) NaN on one named side explains the pair as
    well as it explains that side odd among more (TensorFlow's grappler NaN in a gelu LSTM that
    only TensorFlow and JAX ran: rng 3022).  An undecided deviation pair is read from the side
    off the layer's float64 result alone (:data:`PAIR_OFF_FLOAT64`: rng 3026's bfloat16 Conv2D,
    TensorFlow's oneDNN garbage against JAX on float64).  None for any other signature."""
    if len(sig.backends) != 2:
        return []
    off = _read_off_float64(sig, PAIR_OFF_FLOAT64)
    if off:  # a deviation: the side off the layer's float64 result, the other on it
        return off
    rest = tuple(c for c in sig.context if not c.startswith(PAIR_MORE_NONFINITE))
    more = [c[len(PAIR_MORE_NONFINITE):] for c in sig.context if c.startswith(PAIR_MORE_NONFINITE)]
    if len(more) != 1:
        return []
    return [dataclasses.replace(sig, odd=(b,), context=rest + (ODD_MORE_NONFINITE if b == more[0] else ODD_FEWER_NONFINITE,))
            for b in sig.backends]


def _outvoted(sig: Signature) -> list[Signature]:
    """A deviation pair whose side a majority named odd is on the layer's float64 result and
    the other side off it (:data:`OUTVOTED_ON_FLOAT64`) read from the side off it, as an
    undecided pair is (:func:`_pair_sides`): backends sharing a kernel library, wrong alike,
    outvote the one computing right, and an entry naming the wrong one explains the pair
    (oneDNN's bfloat16 strided unit-width convolution on TensorFlow and torch against JAX: rng
    3033).  None for any other signature."""
    return _read_off_float64(sig, OUTVOTED_ON_FLOAT64) if len(sig.backends) == 2 else []


def _read_off_float64(sig: Signature, fact: str) -> list[Signature]:
    """``sig`` read as its side named by ``fact`` (``<fact><backend>``, one of them) odd, off
    the layer's float64 result (:data:`ODD_OFF_FLOAT64`); none where it records no such fact."""
    off = [c[len(fact):] for c in sig.context if c.startswith(fact)]
    if len(off) != 1:
        return []
    rest = tuple(c for c in sig.context if not c.startswith(fact))
    return [dataclasses.replace(sig, odd=(off[0],), context=rest + (ODD_OFF_FLOAT64,))]


def _from_reference(context: set[str]) -> set[str]:
    """A signature's facts seen from the reference its odd converter was judged against: the
    converter holding more non-finite values is the reference holding fewer (TensorFlow's
    max pooling dropping the NaN onnxruntime keeps is TensorFlow with fewer, the mechanism of
    ``tf-maxpool-drops-nan``), and the reverse."""
    swap = {ODD_MORE_NONFINITE: ODD_FEWER_NONFINITE, ODD_FEWER_NONFINITE: ODD_MORE_NONFINITE}
    return {swap.get(c, c) for c in context}


def _unplaced(labels: Iterable[str]) -> set[str]:
    """Labels as an entry names backends: a device or precision mode left out
    (:func:`audee.backends.registry.unplaced`), so a bug seen on ``jax@cuda`` is ``jax``'s."""
    return {unplaced(b) for b in labels}


def _judges(sig: Signature) -> set[str]:
    """The references a signature's odd backends were judged against, when every odd backend
    is a compiled or converted one judged against a backend of the finding and every other
    backend is such a reference or another program of it (no independent framework): a difference
    there is the reference's known bug where an entry says the reference is wrong on this
    API (TensorFlow's max pooling dropping NaN makes a converter that keeps it the odd side
    of their pair), one root cause, not a new one of the converter.  Where the oracle itself
    named the odd ones against their references alone (``judged_only``: the independent
    frameworks' pairs cleared as an overflow's order), those references judge them whatever
    other backends ran (rng 3023: TensorFlow's fused mish at an exploding ConvLSTM3D state)."""
    odd = set(sig.odd)
    refs = {reference_of(b) for b in odd}
    if not odd or None in refs or not refs <= set(sig.backends) or refs & odd:
        return set()
    if JUDGED_ONLY in sig.context:  # the oracle named them odd against their references alone
        return {str(r) for r in refs}
    if any(b not in odd | refs and reference_of(b) not in refs for b in sig.backends):
        return set()  # an independent framework took a side: the odd one is judged by more than its reference
    return {str(r) for r in refs}


def _crosses(sig: Signature, release: Fix) -> bool:
    """Whether ``sig`` is a regression between a release of ``release.package`` before
    ``release.version`` (its older side) and one at or after it (its newer side)."""
    if sig.kind != "regression":
        return False
    pair = component_changes(sig.component or "").get(release.package)
    if pair is None:
        return False
    newer, older = (_version(v) for v in pair)
    first = Version(release.version)
    return newer is not None and older is not None and older < first <= newer


def _rule(raw: Any, where: str) -> KnownMatch:
    """One ``match`` rule checked; its first error as a :class:`FieldError` at ``where``."""
    if not isinstance(raw, dict):
        raise FieldError(where, f"expected a mapping of criteria, got {raw!r}")
    try:
        return KnownMatch.model_validate(raw)
    except ValidationError as exc:
        err = settings_error(exc, KnownMatch)
        text = str(err)
        message = text[len(err.field) + 2:] if err.field else text
        field = where + ("" if not err.field else err.field if err.field.startswith("[") else "." + err.field)
        raise FieldError(field, message) from None


@functools.cache
def installed_version(package: str) -> str | None:
    """The installed version of a distribution (None: not installed), read from its metadata
    without importing it."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


class FindingRow(_Strict):
    """One row of the summary table of ``findings/README.md`` (its cells, Markdown)."""

    row: int = Field(ge=1, description="its number, which the README's text and the entries cite")
    title: str = Field(min_length=1, description="what was found")
    script: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]+\.py$", description="its script in findings/")
    script_note: str | None = Field(None, min_length=1, description="how to read the script, after its name")
    backends: str = Field(min_length=1)
    output: str = Field(min_length=1, description="the confirmed output, short")
    upstream: str = Field(min_length=1, description="what the upstream search found")
    verdict: str = Field(min_length=1)


class KnownIssue(_Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="a short unique id")
    title: str = Field(min_length=1)
    status: str = Field(KNOWN_UPSTREAM, description="found before, known upstream or fixed upstream")
    row: int | None = Field(None, ge=1, description="the row of findings/README.md it belongs to")
    note: str = ""
    link: str | None = Field(None, pattern=r"^https?://\S+$", description="the upstream issue")
    fixed: Fix | None = Field(None, description="fixed upstream: the package and its first version with the fix")
    klass: str | None = Field(None, alias="class",
                              description="the class of what it matches (audee.triage.rootcause); default: by the rules")
    device: Literal["cpu", "gpu"] | None = Field(
        None, description="where its kernel runs: an entry for a CPU kernel (oneDNN, Eigen, MLAS, XLA's CPU "
                          "compiler) claims no signature whose backends it names ran on a GPU, nor the reverse; "
                          "none: a framework's own code, on any device")
    match: Any = Field(None, description="a rule (every criterion given holds) or a list of rules (any of them); "
                                         "none: an entry no finding of audee's shows")
    _rules: list[KnownMatch] = PrivateAttr(default_factory=list)  # ``match`` checked (set on validation)
    _source: str = PrivateAttr("")  # the file it came from (set on loading)
    _finding: FindingRow | None = PrivateAttr(None)  # its findings row (set on loading)

    @field_validator("klass")
    @classmethod
    def _class(cls, v: Any) -> Any:
        if v is not None and v not in CLASSES:
            raise ValueError(f"unknown class {v!r} (known: {', '.join(CLASSES)})")
        return v

    @field_validator("status")
    @classmethod
    def _status(cls, v: Any) -> Any:
        if v not in ENTRY_STATUSES:
            raise ValueError(f"unknown status {v!r} (known: {', '.join(ENTRY_STATUSES)})")
        return v

    @model_validator(mode="after")
    def _match_rules(self) -> "KnownIssue":
        """``match`` as rules: one mapping, or a list of them for a bug with several faces
        (one entry, one root cause); a bad rule is named by its place (``match[1].kind``)."""
        raw = self.match
        if raw is None:
            self._rules = []
        elif isinstance(raw, KnownMatch):
            self._rules = [raw]
        elif isinstance(raw, dict):
            self._rules = [_rule(raw, "match")]
        elif isinstance(raw, list) and raw:
            self._rules = [_rule(r, f"match[{i}]") for i, r in enumerate(raw)]
        else:
            raise FieldError("match", "expected a mapping of criteria or a non-empty list of them")
        return self

    @model_validator(mode="after")
    def _status_fields(self) -> "KnownIssue":
        if self.status == FOUND_BEFORE:
            if self.row is None:
                raise FieldError("row", "required: a `found before` entry is a row of findings/README.md")
            if self.link is not None:
                raise FieldError("link", "a `found before` entry has no upstream issue (reported upstream, it is "
                                         "`known upstream`)")
        elif self.link is None:
            raise FieldError("link", f"required: the upstream issue of a `{self.status}` entry")
        if self.status == FIXED_UPSTREAM and self.fixed is None:
            raise FieldError("fixed", "required: the package and the first version with the fix")
        if self.status != FIXED_UPSTREAM and self.fixed is not None:
            raise FieldError("fixed", "only a `fixed upstream` entry names its fix")
        if self.klass == DOCUMENTED:  # a change between two releases, and the release that made it
            if not self._rules or any(r.kind != "regression" or r.changed is None for r in self._rules):
                raise FieldError("match", f"a `{DOCUMENTED}` entry matches regressions only, each rule with "
                                          "`kind: regression` and `changed` (the release that documents the change)")
        return self

    @property
    def source(self) -> str:
        return self._source

    @property
    def rules(self) -> list[KnownMatch]:
        return list(self._rules)

    def matches(self, sig: Signature) -> bool:
        """Whether any of its rules holds for ``sig`` (an entry without rules matches nothing),
        on the backends it names where it names a device."""
        return any(r.matches(sig) and self._on_device(r, sig) for r in self._rules)

    def own_backends_only(self, sig: Signature) -> bool:
        """Whether every rule of it that holds for ``sig`` names the backends it is about: a
        cause of those backends' own code (torch's fused kernel path), not one other backends'
        refusals of the same case can share."""
        held = [r for r in self._rules if r.matches(sig) and self._on_device(r, sig)]
        return bool(held) and all(r.backends or r.odd for r in held)

    def backends_named(self, sig: Signature) -> set[str]:
        """The backends its rules that hold for ``sig`` are about (their ``odd``, else their
        ``backends``, unplaced); empty where one of them names none: the entry then explains
        every backend of the finding."""
        held = [r for r in self._rules if r.matches(sig) and self._on_device(r, sig)]
        if not held or any(not (r.odd or r.backends) for r in held):
            return set()
        return {b for r in held for b in (r.odd or r.backends or ())}

    def _on_device(self, rule: KnownMatch, sig: Signature) -> bool:
        """Whether the signature's backends the rule names (its odd ones, or all it names when
        the rule names none) ran on the entry's device."""
        if self.device is None:
            return True
        named = set(rule.odd or ()) | set(rule.backends or ())
        labels = [b for b in (*sig.odd, *sig.backends) if unplaced(b) in named] if named else list(sig.named_backends)
        return all(device_kind(b) == self.device for b in labels)

    @property
    def finding(self) -> FindingRow | None:
        return self._finding

    @property
    def script(self) -> str | None:
        """Its findings script (``findings/<name>.py``), where its row has one."""
        return f"findings/{self._finding.script}" if self._finding and self._finding.script else None

    @property
    def ref(self) -> str:
        """What its root cause is known by (:class:`audee.triage.KnownRoot`): the upstream
        link, or for the project's own finding its row and id (one entry, one fix)."""
        return self.link if self.link is not None else f"findings row {self.row}: {self.id}"

    def status_now(self, installed: Callable[[str], str | None] = installed_version) -> str:
        """Its status against the installed packages: a ``fixed upstream`` entry whose package
        is installed at or after the fixed version is ``known upstream`` (the fix did not cover
        what was seen); a package not installed cannot tell, the entry's status stands."""
        if self.status != FIXED_UPSTREAM or self.fixed is None:
            return self.status
        have = installed(self.fixed.package)
        version = _version(have) if have else None
        return KNOWN_UPSTREAM if version is not None and version >= Version(self.fixed.version) else FIXED_UPSTREAM

    def where(self, installed: Callable[[str], str | None] = installed_version) -> str:
        """Where it is known, for people: its findings row and script, or its link (with the
        fix's version against the installed one)."""
        if self.status == FOUND_BEFORE:
            return f"findings row {self.row}" + (f", {self.script}" if self.script else "")
        text = str(self.link)
        if self.fixed is not None:
            have = installed(self.fixed.package) or "not installed"
            seen = "; still seen" if self.status_now(installed) != FIXED_UPSTREAM else ""
            text += f" (fixed in {self.fixed.package} {self.fixed.version}; installed {have}{seen})"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status, "row": self.row, "link": self.link,
                "source": self.source}


class KnownIssues(_Strict):
    findings: list[FindingRow] = Field(default_factory=list)
    issues: list[KnownIssue] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> "KnownIssues":
        seen: set[str] = set()
        for i, issue in enumerate(self.issues):
            if issue.id in seen:
                raise FieldError(f"issues[{i}].id", f"duplicate id {issue.id!r}")
            seen.add(issue.id)
        rows: dict[int, FindingRow] = {}
        for j, f in enumerate(self.findings):
            if f.row in rows:
                raise FieldError(f"findings[{j}].row", f"duplicate row {f.row}")
            rows[f.row] = f
        for i, issue in enumerate(self.issues):
            if issue.row is not None and issue.row not in rows:
                raise FieldError(f"issues[{i}].row", f"no row {issue.row} under findings: in this file")
            issue._finding = rows.get(issue.row) if issue.row is not None else None
        named = {issue.row for issue in self.issues}
        for j, f in enumerate(self.findings):
            if f.row not in named:
                raise FieldError(f"findings[{j}]", f"row {f.row} has no entry under issues: (give it one with its "
                                                   f"status)")
        return self


def load_triage_file(path: str | Path | None = None) -> KnownIssues:
    """One file of triaged bugs (default: the shipped one) with its findings rows,
    schema-checked (a :class:`audee.core.errors.ConfigError` naming the file and the field
    otherwise)."""
    path = shipped_file() if path is None else path
    data = read_yaml_mapping(path, "a mapping with an `issues:` list")
    doc = validate_settings(KnownIssues, data, str(path))
    for issue in doc.issues:
        issue._source = str(path)
    return doc


def load_known_file(path: str | Path) -> list[KnownIssue]:
    """The entries of one known-issues file (:func:`load_triage_file`)."""
    return load_triage_file(path).issues


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
    return next((i for i in issues if i.matches(sig)), None)


def _shared_refusal(sig: Signature) -> RootKey | None:
    """The merged root of a signature that is one of several backends' refusals of one case at
    one layer (:func:`audee.triage.rootcause.root_of`, "refused alike"), else None."""
    return root_of(sig) if any(c.startswith(REJECTED_BY) for c in sig.context) else None


class _Followed:
    """The known entry each case of a merged refusal takes (:func:`unique_bugs`): the first one
    a member matches whose refusal answers that case (several backends refusing one case
    alike are one cause, so an entry that knows one backend's words knows the others'), an
    entry about the case before one about its member's own backends
    (:meth:`KnownIssue.own_backends_only`: RMSNormalization(axis=1) refused by TensorFlow,
    onnxruntime and JAX for Keras' scale and by torch for its fused kernel path, the api-cpu
    campaign, rng 2988: the others follow JAX's entry, not torch's).  By case, each member as
    that case signed it, not by the merged root alone: cases refused alike in the same words at
    one layer may have different causes (RMSNormalization's axis=[1, -1] and axis=1 in rng 3001,
    the first case's entry once taken by the other's backends).  A member's explicit
    "unsupported" (a missing op) is that backend's limitation whatever the input: its entry
    stays its own."""

    def __init__(self) -> None:
        self._own: dict[tuple[RootKey, str], KnownIssue] = {}
        self._shared: dict[tuple[RootKey, str], KnownIssue] = {}
        self._merged: dict[str, dict[str, RootKey]] = {}  # signature key -> case -> its merged refusal

    def add(self, sig: Signature, issue: KnownIssue | None, case: str) -> None:
        """One case's signature and the entry it matches (None: none)."""
        merged = _shared_refusal(sig)
        if merged is None:
            return
        self._merged.setdefault(sig.key(), {}).setdefault(case, merged)
        if issue is not None and not explicit_refusal(sig.error_full or sig.error):
            (self._own if issue.own_backends_only(sig) else self._shared).setdefault((merged, case), issue)

    def entry(self, key: str, first: str, cases: Iterable[str]) -> KnownIssue | None:
        """The entry an unmatched signature takes: its first case's, else another of its cases'
        (in case order), else none: it is new."""
        merged = self._merged.get(key, {})
        for case in [first, *sorted(cases)]:
            at = (merged.get(case), case)
            issue = self._shared.get(at) or self._own.get(at)  # the case's cause before one backend's own
            if issue is not None:
                return issue
        return None


def _causes(sig: Signature, issues: list[KnownIssue]) -> list[tuple[Signature, KnownIssue | None]]:
    """A signature and the entry it matches, then, where that entry's rules name only some of
    its odd backends, the rest of them as a signature of their own with the entry they match
    (none: a new bug): one case may show two causes (onnxruntime's NaN-dropping max pool beside
    TensorFlow's, the api-cpu campaign, rng 3003; torch's soft_shrink beside tf2onnx's select,
    rng 3004), and an odd backend no entry explains is not explained by another's entry."""
    issue = match_known(sig, issues)
    if issue is None or len(sig.odd) < 2:
        return [(sig, issue)]
    named = issue.backends_named(sig)
    rest = tuple(b for b in sig.odd if unplaced(b) not in named) if named else ()
    if not rest or len(rest) == len(sig.odd):  # all explained, or the entry is about a reference it judged
        return [(sig, issue)]
    return [(sig, issue), *_causes(_rest_of(sig, rest), issues)]


def _rest_of(sig: Signature, rest: tuple[str, ...]) -> Signature:
    """``sig`` with only the odd backends ``rest``: a program fact every one of them shows
    (:data:`PROGRAM_OF`, recorded apart because the whole odd set did not share it) is now
    the signature's own (onnxruntime's ReduceMax dropping a NaN beside JAX's YNNPACK reduce
    doing the same: the api-cpu campaign, rng 3025)."""
    own: dict[str, set[str]] = {}
    for c in sig.context:
        if c.startswith(PROGRAM_OF):
            b, _, f = c[len(PROGRAM_OF):].partition(":")
            own.setdefault(f, set()).add(b)
    lifted = tuple(PROGRAM + f for f, bs in sorted(own.items()) if set(rest) <= bs and PROGRAM + f not in sig.context)
    return dataclasses.replace(sig, odd=rest, context=tuple(sig.context) + lifted)


def _telling(sig: Signature, issue: KnownIssue | None) -> int:
    """How telling ``sig`` (matching ``issue``) is: its class's place in
    :data:`audee.triage.rootcause.CLASSES`, lower first.  One signature key over several cases
    whose facts differ (a difference on a row of subnormal values, and the same difference on
    ordinary rows) is the bug the ordinary case shows, whichever case sorts first."""
    return CLASSES.index(classify(sig, issue)[0])


def unique_bugs(rows: Iterable[PlacedRow | ResultRow], issues: list[KnownIssue]) -> list[Bug]:
    """Unique bugs over result rows (each one's ``signatures``): one :class:`Bug` per
    signature key and the entry its cases match (none: new), new ones first, then by cases behind it; each with its known issue (if
    any; a refusal merged with others of the same case takes the entry another of them
    matches, :class:`_Followed`) and that entry's status now (:meth:`KnownIssue.status_now`), its class
    (:func:`audee.triage.rootcause.classify`) and root (the known issue's link or findings row,
    :attr:`KnownIssue.ref`, else :func:`audee.triage.rootcause.root_of`), the number of cases,
    the first case (by id) of the most telling class (:func:`_telling`: its facts decide the
    class and the entry) and its case file, the repro script ``<slug>.py`` of the row's run directory when one exists (a
    :class:`PlacedRow` says where a row was read; a bare row has its case file as written and
    no script), and the campaign units it was seen in."""
    placed = [r if isinstance(r, PlacedRow) else PlacedRow(r) for r in rows]
    followed = _Followed()
    seen: list[tuple[Signature, PlacedRow, KnownIssue | None, str]] = []  # each case's causes, in case order
    for at in sorted(placed, key=lambda a: a.row.id):
        for sig, issue, script in ((s, i, whole.slug()) for whole in map(Signature.from_json, at.row.signatures)
                                   for s, i in _causes(whole, issues)):
            followed.add(sig, issue, at.row.id)
            seen.append((sig, at, issue, script))
    unmatched: dict[str, set[str]] = {}  # signature key -> its cases no entry matches of their own
    for sig, at, issue, _ in seen:
        if issue is None:
            unmatched.setdefault(sig.key(), set()).add(at.row.id)
    # one bug per signature key and entry: cases of one key that different entries match, or
    # none, are different causes (a float32 case of one oneDNN bug beside bfloat16 cases of
    # another, rng 3012), never one cause under the first case's entry
    Group = tuple[str, str | None]
    first: dict[Group, tuple[Signature, PlacedRow, KnownIssue | None, bool]] = {}
    rank: dict[Group, int] = {}  # the first case's :func:`_telling`
    slugs: dict[Group, str] = {}  # the first case's script: its whole signature's (a second cause has none of its own)
    case_ids: dict[Group, set[str]] = {}
    units: dict[Group, list[str]] = {}
    for sig, at, issue, script in seen:
        key, follows = sig.key(), issue is None
        taken = issue or followed.entry(key, at.row.id, unmatched.get(key, ()))
        group = (key, taken.id if taken else None)
        telling = _telling(sig, issue)
        if group not in first:
            case_ids[group], units[group] = set(), []
        if group not in first or telling < rank[group]:  # the case that shows it best: a bug beside an undefined one
            first[group], rank[group], slugs[group] = (sig, at, taken, follows), telling, script
        case_ids[group].add(at.row.id)
        if at.unit is not None and at.unit not in units[group]:
            units[group].append(at.unit)
    bugs = []
    for group, (sig, at, issue, follows) in first.items():
        klass, why = classify(sig, issue)
        if issue is not None and follows and issue.klass:
            why = f"known issue {issue.id}, which another backend's refusal of the same case matches"
        repro = Path(at.repro_dir) / f"{slugs[group]}.py" if at.repro_dir is not None else None
        bugs.append(Bug(
            sig, KnownRoot(issue.ref) if issue else root_of(sig), klass, why, cases=len(case_ids[group]),
            first_case=at.row.id, case_file=at.case_path or at.row.case_file,
            repro=str(repro) if repro is not None and repro.is_file() else None,
            known_id=issue.id if issue else None, known_title=issue.title if issue else None,
            link=issue.link if issue else None, known_status=issue.status_now() if issue else None,
            known_where=issue.where() if issue else None, units=tuple(units[group]),
            case_ids=tuple(sorted(case_ids[group]))))
    return sorted(bugs, key=lambda b: (b.status != "new", -b.cases, b.key))


#: the header of findings/README.md's summary table (:func:`findings_table`)
FINDINGS_HEADER = ("| row | what | backends | confirmed output (short) | upstream | status | verdict |\n"
                   "|---|---|---|---|---|---|---|")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _entry_status(issue: KnownIssue) -> str:
    fix = f" in {issue.fixed.package} {issue.fixed.version}" if issue.fixed is not None else ""
    return f"{issue.status}{fix} (`{issue.id}`)"


def findings_table(doc: KnownIssues) -> str:
    """The summary table of ``findings/README.md`` as the data file makes it: one line per
    findings row, its entries' statuses (as the file gives them: the installed versions do
    not change the README) in the status column."""
    entries: dict[int, list[KnownIssue]] = {}
    for issue in doc.issues:
        if issue.row is not None:
            entries.setdefault(issue.row, []).append(issue)
    lines = [FINDINGS_HEADER]
    for f in sorted(doc.findings, key=lambda f: f.row):
        script = f"`{f.script}`" if f.script else "no script"
        what = f"{f.title} -- {script}" + (f" {f.script_note}" if f.script_note else "")
        status = "; ".join(_entry_status(i) for i in entries[f.row])
        lines.append("| " + " | ".join(_cell(c) for c in (str(f.row), what, f.backends, f.output, f.upstream, status,
                                                          f.verdict)) + " |")
    return "\n".join(lines)
