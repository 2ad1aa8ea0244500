"""The case levels' registry: which levels there are, how a case record or a row names its
level, and the level object behind each name.

A level is a package ``audee/levels/<name>/`` whose module holds ``LEVEL`` (an
:class:`audee.levels.base.Level`); it is found here by its dotted path and imported when
first asked for, as a plugin backend is (``audee.backends.registry``), so the registry stays
plain data that every layer may read.  Adding a level is one package plus one :data:`ENTRIES`
line.  No module but this one imports a level package (``tests/test_layering.py``).

How a case names its level (decided here, once): a record's ``meta["phase"]`` names the
training phase, which is a level of its own (its runner, script and localizer differ)
over the cases another level made (a model level's: ``train``; a call level's, whose
training phase is its gradient: ``opgrad``); an op case holds a call (``CaseRecord.op``) and its
seed reads ``op:<op>``; an API-level case's seed reads ``api:<API>``; anything else is a
network case (a seed or its variant).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Mapping

from audee.levels.base import Level, Localized, Runner

__all__ = ["ENTRIES", "LEVELS", "Entry", "Level", "Localized", "Runner", "is_call", "level_name", "level_named", "level_of",
           "parse_targets", "run_level", "source_name", "target_entries", "targets_header"]


@dataclass(frozen=True)
class Entry:
    """One level: its name, the module holding its ``LEVEL``, and how its cases are marked."""

    name: str
    module: str
    seed_prefix: str | None = None  # a case's ``meta["seed"]`` starts with it
    phase: str | None = None        # a run's ``--phase`` / a record's ``meta["phase"]`` names it
    call: bool = False              # its case records hold a call (``CaseRecord.op``) instead of a model
    targets_key: str | None = None  # the ``config.json`` key its runs record their targets under (the
                                    # API and op levels' runs always had one; others: level and targets)
    flag: str | None = None         # the ``audee fuzz`` flag naming its targets (a level run over named targets)
    word: str = ""                  # one target in a message ("API"); ``plural`` counts them in a summary
    plural: str = ""
    listing: str = ""               # where a user sees its targets' names ("audee apis"); else they are listed
    flag_help: str = ""
    doc: str = ""


ENTRIES: tuple[Entry, ...] = (
    Entry("network", "audee.levels.network", doc="a seed's network variants (`audee fuzz --seed`)"),
    Entry("api", "audee.levels.api", seed_prefix="api:", targets_key="apis", flag="--api", word="API", plural="APIs",
          listing="audee apis", doc="small models around one layer API (`--api`)",
          flag_help="API-level fuzzing instead of a seed: --variants small models around each layer API named (see "
                    "`audee apis`; all: every configured one), ids api-<API>-v<i>; --dtypes picks their dtype "
                    "policies"),
    Entry("op", "audee.levels.op", seed_prefix="op:", call=True, targets_key="ops", flag="--op", word="op",
          plural="ops", listing="audee apis --ops", doc="one keras.ops call (`--op`)",
          flag_help="op-level fuzzing (docs/ops.md): --variants calls of each keras.ops function named (see "
                    "`audee apis --ops`; all: every configured one) on the Keras backends, ids op-<op>-v<i>"),
    Entry("activation", "audee.levels.activation", seed_prefix="activation:", call=True, flag="--activation",
          word="activation", plural="activations", doc="one keras.activations function on a drawn tensor (`--activation`)",
          flag_help="activation-level fuzzing: --variants calls of each keras.activations function named (all: "
                    "every one) on a drawn tensor with drawn parameters, on the Keras backends, ids "
                    "activation-<name>-v<i>"),
    Entry("train", "audee.levels.train", phase="train",
          doc="one training step of a model level's case (`--phase train`)"),
    Entry("opgrad", "audee.levels.opgrad", phase="train", call=True,
          doc="the vector-Jacobian product of a call level's case (`--op ... --phase train`)"),
)
LEVELS: tuple[str, ...] = tuple(e.name for e in ENTRIES)
DEFAULT = "network"  # a case no other level marks
_BY_NAME: dict[str, Entry] = {e.name: e for e in ENTRIES}
_LOADED: dict[str, Level] = {}


def source_name(meta: Mapping[str, Any] | None, *, call: bool = False) -> str:
    """The level that made a case (by its seed's namespace, or its call): ``op``, ``api`` or
    ``network``; a training step's too (its phase aside).  ``call``: the record holds one."""
    seed = str((meta or {}).get("seed", ""))
    sources = [e for e in ENTRIES if e.phase is None]
    for e in sources:  # the seed's namespace first: several levels' records may hold a call
        if e.seed_prefix and seed.startswith(e.seed_prefix):
            return e.name
    return next((e.name for e in sources if call and e.call), DEFAULT)


def target_entries() -> tuple[Entry, ...]:
    """The levels a run names targets of (``audee fuzz --api/--op/...``), in flag order."""
    return tuple(e for e in ENTRIES if e.flag)


def parse_targets(name: str, text: str) -> list[str]:
    """``text`` (comma-separated names, or ``all``: every one in name order) as level
    ``name``'s targets, each checked against the names its level knows; a bad one is one
    line naming the flag."""
    from audee.core.errors import AudeeError

    e = _BY_NAME[name]
    known = level_named(name).target_names()
    where = f"see `{e.listing}`" if e.listing else "one of " + ", ".join(known)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if names == ["all"]:
        return sorted(known)
    if not names:
        raise AudeeError(f"expected {e.word} names ({where}) or all", field=e.flag)
    for n in names:
        if n not in known:
            raise AudeeError(f"unknown {e.word} {n!r} ({where}, or all)", field=e.flag)
    return list(dict.fromkeys(names))


def targets_header(name: str, targets: list[str]) -> dict[str, Any]:
    """What a run of level ``name`` over ``targets`` records of them in ``config.json`` (and so
    what a resume compares)."""
    key = _BY_NAME[name].targets_key
    return {key: list(targets)} if key else {"level": name, "targets": list(targets)}


def is_call(meta: Mapping[str, Any] | None) -> bool:
    """Whether the level that made a case makes calls (its tensors the call's whole input:
    ``op``, ``activation``), by the case's seed namespace."""
    return _BY_NAME[source_name(meta)].call


def level_name(meta: Mapping[str, Any] | None, *, call: bool = False) -> str:
    """The level a case is run, scripted and localized as: its phase's level when its meta
    names one (``train``), else :func:`source_name`."""
    source = source_name(meta, call=call)
    phased = _phase_entry((meta or {}).get("phase"), source)
    return phased.name if phased is not None else source


def _phase_entry(phase: Any, source: str) -> Entry | None:
    """The level of ``phase`` over ``source``'s cases: the one that makes calls when
    ``source`` does (a call's training phase is its gradient), else the model one."""
    matches = [e for e in ENTRIES if e.phase is not None and phase == e.phase]
    return next((e for e in matches if e.call == _BY_NAME[source].call), matches[0] if matches else None)


def level_named(name: str) -> Level:
    """The level object of ``name`` (imported on first use)."""
    if name not in _BY_NAME:
        raise KeyError(f"no case level {name!r} (levels: {', '.join(LEVELS)})")
    if name not in _LOADED:
        _LOADED[name] = importlib.import_module(_BY_NAME[name].module).LEVEL
    return _LOADED[name]


def level_of(record: Any) -> Level:
    """The level of a case record (:class:`audee.store.caserecord.CaseRecord`): what re-runs
    it, writes its script and localizes it."""
    return level_named(level_name(record.meta, call=bool(getattr(record, "op", None))))


def run_level(source: str, phase: str | None = None) -> Level:
    """The level a fuzz run drives: ``source``'s (the level making its cases), or the level
    of its ``phase`` over them (``--phase train``: training steps of ``source``'s cases)."""
    phased = _phase_entry(phase, source)
    if phased is not None:
        return level_named(phased.name).over(level_named(source))  # type: ignore[attr-defined]
    return level_named(source)
