"""Which recorded inconsistencies are the same one.

The paper's criteria (section 3.2): on one DNN, inconsistencies found with different
inputs are one; different weights make a different DNN, so weight-level and
input+weight-level findings each count.  The DNN of a network-level test case is the
case itself; the DNN of a search-found case is the search's target variant.  Units are
part of the key because two units (other rng, other backends) draw different variants
under the same ids.

Typed rows in (audee.records: a results row and its search run), so the campaign's
localization stage and the report share one definition; the report's frames, whose
level and DNN the merge worked out from the same rows, come in as :class:`Seen`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from audee.records.rows import ResultRow
from audee.records.search import SearchRun

LEVELS = {"input": "IN", "weight": "WT", "input-weight": "IN-WT"}


def level_of(row: ResultRow, searches: Mapping[str, SearchRun]) -> str:
    """NET for network-level rows, else IN / WT / IN-WT from the row's search (the row's
    own record of its level when the search run is missing)."""
    if not row.search_id:
        return "NET"
    run = searches.get(row.search_id)
    level = (run.level if run is not None else None) or row.level or ""
    return level if level in LEVELS.values() else LEVELS.get(level, "?")


def dnn_of(row: ResultRow, searches: Mapping[str, SearchRun]) -> str:
    """The DNN a case ran: itself at network level, else its search's target."""
    if not row.search_id:
        return row.id
    run = searches.get(row.search_id)
    return str((run.target if run is not None else None) or row.search_id)


@dataclass(frozen=True)
class Seen:
    """What deduplication reads of one results row: its id, seed, case file, inconsistent
    pairs, level (NET / IN / WT / IN-WT) and DNN."""

    id: str
    seed: str | None
    level: str
    dnn: str
    pairs: tuple[str, ...]
    case_file: str | None = None

    @classmethod
    def of(cls, row: ResultRow, searches: Mapping[str, SearchRun]) -> "Seen":
        return cls(row.id, row.seed, level_of(row, searches), dnn_of(row, searches), tuple(row.inconsistent_pairs),
                   row.case_file)


def inconsistency_key(unit: str, seen: Seen, pair: str) -> tuple[str, str, str, str]:
    weights = seen.id if seen.level in ("WT", "IN-WT") else ""
    return (unit, seen.dnn, pair, weights)


def unique_inconsistencies(unit: str, rows: Iterable[Seen | ResultRow],
                           searches: Mapping[str, SearchRun] | None = None) -> list[dict[str, Any]]:
    """One entry per unique inconsistency: the first case (by id) that shows it."""
    seen = [r if isinstance(r, Seen) else Seen.of(r, searches or {}) for r in rows]
    picked: dict[tuple, dict[str, Any]] = {}
    for s in sorted(seen, key=lambda s: s.id):
        for pair in s.pairs:
            key = inconsistency_key(unit, s, pair)
            if key not in picked:
                picked[key] = {"key": key, "unit": unit, "seed": s.seed, "pair": pair, "level": s.level,
                               "dnn": key[1], "case_id": s.id, "case_file": s.case_file}
    return list(picked.values())
