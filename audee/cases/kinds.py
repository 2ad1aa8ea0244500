"""The one table of finding kinds: what each kind is, declared once.

Every other list of kinds (which are failures, the main failure's order, the kinds a case
file may hold, the detail types, root-cause families, odd-backend rules, the kinds a float64
reference names the culprit of, ...) is derived from :data:`KINDS` here, so a new kind is
one entry and no list can miss it (a case file once refused a kind another list held).

Each :class:`FindingKind` says:

* ``detail``: the type of its detail (:mod:`audee.records.findings`);
* ``failure``: whether it is a failure (``consistent_rejection``, ``nan_propagated`` and the
  ``*_accumulated`` kinds are expected behaviour, not failures);
* ``main``: its rank as a case's main failure (:func:`audee.oracle.verdicts.main_failure`; 0 first);
* ``family``: its root-cause family (:mod:`audee.triage.rootcause`): ``crash`` (keyed by component,
  op and error), ``nan``, ``numeric`` (deviation, inconsistency and precision: one numeric
  fix, whichever oracle saw it), else a family of its own;
* ``accumulated``: the kind it becomes when no layer is to blame on its own input;
* ``odd``: the rule :func:`audee.oracle.odd.mark_odd` names its odd backend by
  (``acceptance``, ``nan``, ``pairs`` — one finding per backend pair —, ``equivalence``,
  ``reference``, ``version`` — the newer release of a version pair —, ``declared`` — the
  backends computing a layer unlike the rest, against Keras' declaration —; None: no rule there);
* ``phase``: ``run`` (a forward pass) or ``train`` (a training step, :mod:`audee.train`);
* ``culprit``: whether the float64 reference names its culprit (:mod:`audee.oracle.precision`);
* ``holds``: when a re-run's finding of the same kind shows the recorded one again
  (:func:`audee.oracle.verdicts.finding_holds`).

The names are spelled once, in :class:`Kind`; ``tests/test_finding_kinds.py`` holds every
name to one table entry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Protocol

from audee.records.findings import (ConsistentRejectionDetail, DeclaredOutputDetail, Detail, DeviationDetail, DivergentAcceptanceDetail,
                                    EquivalenceDetail, HardCrashDetail, InconsistencyDetail, NanDetail,
                                    PrecisionDetail, Record, RegressionDetail, TrainDeviationDetail, TrainNanDetail)


class Kind:
    """The finding kinds' names (their facts: :data:`KINDS`)."""

    HARD_CRASH = "hard_crash"                      # signal, abort, timeout, exit
    DIVERGENT_ACCEPTANCE = "divergent_acceptance"  # one backend accepts what another rejects
    CONSISTENT_REJECTION = "consistent_rejection"  # every backend raises a clean error
    NAN = "nan"                                    # NaN/Inf in some layer's output
    NAN_PROPAGATED = "nan_propagated"              # NaN/Inf input, identical NaN/Inf patterns everywhere
    INCONSISTENCY = "inconsistency"                # predicted labels differ between two backends
    DEVIATION = "deviation"                        # outputs differ beyond tolerance (audee/oracle/deviation.py)
    DEVIATION_ACCUMULATED = "deviation_accumulated"  # beyond tolerance, but no layer deviates on its own input
    # the training phase (audee/oracle/train.py): loss, gradients or updated weights
    TRAIN_DEVIATION = "train_deviation"            # beyond tolerance between two backends
    TRAIN_DEVIATION_ACCUMULATED = "train_deviation_accumulated"  # ... but no layer deviates on its own input
    TRAIN_NAN = "train_nan"                        # NaN/Inf in loss, gradients or weights on some backends only
    # equivalent models (audee/oracle/equivalence.py): one backend, a model and its equivalent
    EQUIVALENCE = "equivalence"                    # the backend computes the two differently (or refuses one)
    EQUIVALENCE_ACCUMULATED = "equivalence_accumulated"  # ... but no rewritten layer differs on its own input
    # precision against a float64 reference (audee/oracle/precision.py): one backend far less
    # accurate than the best, whether or not the backends agree with each other
    PRECISION = "precision"
    PRECISION_ACCUMULATED = "precision_accumulated"  # ... but no layer loses it on its own input (or only ill-conditioned)
    # one backend under two releases (audee/oracle/regression.py): a version pair differs
    REGRESSION = "regression"
    # Keras' declared output of a layer against what a backend computes (audee/oracle/declared.py)
    DECLARED_OUTPUT = "declared_output"

    #: the failure kinds, in table order (derived below from :data:`KINDS`)
    FAILURES: tuple[str, ...] = ()


class _Judged(Protocol):
    """What a "still holds" rule reads of a finding (:class:`audee.cases.case.Finding`)."""

    kind: str
    backends: list[str]
    detail: Any


def same_backends(recorded: _Judged, now: _Judged) -> bool:
    """The same backends (a pair, or the backends that crashed or refused)."""
    return sorted(now.backends) == sorted(recorded.backends)


def shares_backend(recorded: _Judged, now: _Judged) -> bool:
    """A backend in common: which backends a NaN finding names follows which non-finite
    patterns differ, and that shifts with the backends run beside it."""
    return bool(set(now.backends) & set(recorded.backends))


def same_rule_same_backends(recorded: _Judged, now: _Judged) -> bool:
    """The same equivalence rule failing on the same backend."""
    return now.detail.rule == recorded.detail.rule and same_backends(recorded, now)


OddRule = Literal["acceptance", "nan", "pairs", "equivalence", "reference", "version", "declared"]


@dataclass(frozen=True)
class FindingKind:
    """One finding kind's facts (module docstring)."""

    name: str
    detail: type[Detail]
    failure: bool
    about: str
    main: int | None = None
    family: str = ""                       # "" : a family of its own (its name)
    accumulated: str | None = None
    odd: OddRule | None = None
    phase: Literal["run", "train"] = "run"
    culprit: bool = False
    holds: Callable[[_Judged, _Judged], bool] = same_backends

    @property
    def root_family(self) -> str:
        return self.family or self.name


_K = Kind
#: The table.  Its order is the order lists derived from it keep: the failures first, then
#: the kinds that are not.
KINDS: tuple[FindingKind, ...] = (
    FindingKind(_K.HARD_CRASH, HardCrashDetail, True, "a signal, abort, exit or timeout on a backend",
                main=2, family="crash", odd="acceptance"),
    FindingKind(_K.DIVERGENT_ACCEPTANCE, DivergentAcceptanceDetail, True,
                "some backends run the case, the others raise a clean error",
                main=3, family="crash", odd="acceptance"),
    FindingKind(_K.NAN, NanDetail, True, "NaN/Inf patterns differ between backends",
                main=1, family="nan", odd="nan", holds=shares_backend),
    FindingKind(_K.INCONSISTENCY, InconsistencyDetail, True, "predicted labels differ between two backends",
                main=0, family="numeric", odd="pairs", culprit=True),
    FindingKind(_K.DEVIATION, DeviationDetail, True, "outputs differ beyond tolerance between two backends",
                main=5, family="numeric", accumulated=_K.DEVIATION_ACCUMULATED, odd="pairs", culprit=True),
    FindingKind(_K.TRAIN_DEVIATION, TrainDeviationDetail, True, "a training step differs beyond tolerance",
                main=8, accumulated=_K.TRAIN_DEVIATION_ACCUMULATED, phase="train"),
    FindingKind(_K.TRAIN_NAN, TrainNanDetail, True, "NaN/Inf in a training step on some backends only",
                main=7, phase="train"),
    FindingKind(_K.EQUIVALENCE, EquivalenceDetail, True, "a backend computes a model and its equivalent differently",
                main=6, accumulated=_K.EQUIVALENCE_ACCUMULATED, odd="equivalence", holds=same_rule_same_backends),
    FindingKind(_K.PRECISION, PrecisionDetail, True, "a backend far less accurate than the best against float64",
                main=4, family="numeric", accumulated=_K.PRECISION_ACCUMULATED, odd="reference"),
    # whatever the oracles saw between the two releases (its family its own: a change between
    # releases is one fix, apart from the frameworks' differences); as a main failure after
    # every finding among frameworks, which say what the frameworks do (a run of a version
    # pair alone has the regression only: its pair's own findings are folded into it)
    # a layer computing another shape or dtype than Keras declares for it: a contract every
    # Keras backend answers to on its own, after the differences among them
    FindingKind(_K.DECLARED_OUTPUT, DeclaredOutputDetail, True,
                "a layer's output differs in shape or dtype from the one Keras declares for it",
                main=9, odd="declared"),
    FindingKind(_K.REGRESSION, RegressionDetail, True, "one backend computes differently under two releases",
                main=10, odd="version"),
    FindingKind(_K.CONSISTENT_REJECTION, ConsistentRejectionDetail, False, "every backend raises a clean error"),
    FindingKind(_K.NAN_PROPAGATED, NanDetail, False, "non-finite values the input explains, alike everywhere"),
    FindingKind(_K.DEVIATION_ACCUMULATED, DeviationDetail, False,
                "a deviation no layer shows on its own input", culprit=True),
    FindingKind(_K.TRAIN_DEVIATION_ACCUMULATED, TrainDeviationDetail, False,
                "a training-step deviation no layer shows on its own input", phase="train"),
    FindingKind(_K.EQUIVALENCE_ACCUMULATED, EquivalenceDetail, False,
                "an equivalence no rewritten layer shows on its own input"),
    FindingKind(_K.PRECISION_ACCUMULATED, PrecisionDetail, False,
                "a precision loss no layer shows on its own input"),
)

#: name -> its entry
BY_NAME: Mapping[str, FindingKind] = {k.name: k for k in KINDS}
#: every kind a verdict (and so a case file) may hold
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: the failure kinds
FAILURES: tuple[str, ...] = tuple(k.name for k in KINDS if k.failure)
Kind.FAILURES = FAILURES
#: the main failure's order, most important first
MAIN_FAILURE_ORDER: tuple[str, ...] = tuple(k.name for k in sorted((k for k in KINDS if k.main is not None),
                                                                   key=lambda k: k.main or 0))
#: kind -> its detail type
DETAIL_TYPES: Mapping[str, type[Detail]] = {k.name: k.detail for k in KINDS}


def kinds_where(**facts: Any) -> tuple[str, ...]:
    """The names of the kinds whose facts equal ``facts`` (``kinds_where(family="crash")``)."""
    return tuple(k.name for k in KINDS if all(getattr(k, f) == v for f, v in facts.items()))


#: crashes and divergent acceptances: a backend failed to run the case
CRASHES = kinds_where(family="crash")
#: one finding per backend pair (the odd backend is the one every failing pair holds)
PAIRWISE = kinds_where(odd="pairs")
#: one numeric fix, whichever oracle saw it (audee.triage.rootcause)
NUMERIC = kinds_where(family="numeric")
#: the training step's failures
TRAINING_FAILURES = kinds_where(phase="train", failure=True)
#: the kinds a float64 reference names the culprit of
CULPRIT_KINDS = kinds_where(culprit=True)


def with_accumulated(name: str) -> tuple[str, ...]:
    """``name`` and the kind it becomes when no layer is to blame alone (``deviation`` ->
    ``("deviation", "deviation_accumulated")``)."""
    acc = BY_NAME[name].accumulated
    return (name, acc) if acc else (name,)


def root_family(name: str) -> str:
    """The root-cause family of ``name`` (an unknown kind: its own)."""
    k = BY_NAME.get(name)
    return k.root_family if k is not None else name


def odd_rule(name: str) -> OddRule | None:
    """The rule :func:`audee.oracle.odd.mark_odd` names ``name``'s odd backend by (None: none)."""
    k = BY_NAME.get(name)
    return k.odd if k is not None else None


def holds(recorded: _Judged, now: _Judged) -> bool:
    """Whether ``now`` shows the recorded finding again: the same kind, and its kind's rule
    (an unknown kind: the same backends)."""
    if now.kind != recorded.kind:
        return False
    k = BY_NAME.get(recorded.kind)
    return (k.holds if k is not None else same_backends)(recorded, now)


def detail_type(kind: str) -> type[Detail]:
    """The detail type of ``kind`` (:class:`Detail` for a kind without one)."""
    return DETAIL_TYPES.get(kind, Detail)


def parse_detail(kind: str, data: Mapping[str, Any] | Detail | None) -> Detail:
    """``data`` (a detail's JSON, or a detail) as ``kind``'s detail type; a detail already
    of that type is returned as it is.  Raises pydantic's ValidationError on a wrong value."""
    cls = detail_type(kind)
    if isinstance(data, cls):
        return data
    if isinstance(data, Record):
        data = data.to_json()
    return cls.model_validate(dict(data or {}))


__all__ = ["BY_NAME", "CRASHES", "CULPRIT_KINDS", "DETAIL_TYPES", "FAILURES", "FindingKind", "KINDS", "Kind",
           "MAIN_FAILURE_ORDER", "NAMES", "NUMERIC", "PAIRWISE", "TRAINING_FAILURES", "detail_type", "holds",
           "kinds_where", "odd_rule", "parse_detail", "root_family", "same_backends", "same_rule_same_backends",
           "shares_backend", "with_accumulated"]
