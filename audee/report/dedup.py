"""Which recorded inconsistencies are the same one.

The paper's criteria (section 3.2): on one DNN, inconsistencies found with different
inputs are one; different weights make a different DNN, so weight-level and
input+weight-level findings each count.  The DNN of a network-level test case is the
case itself; the DNN of a search-found case is the search's target variant.  Units are
part of the key because two units (other rng, other backends) draw different variants
under the same ids.

Plain dict rows in, so both the campaign's localization stage and the pandas report
share one definition.
"""
from __future__ import annotations

from typing import Any, Iterable

LEVELS = {"input": "IN", "weight": "WT", "input-weight": "IN-WT"}


def level_of(row: dict[str, Any], searches: dict[str, dict[str, Any]]) -> str:
    """NET for network-level rows, else IN / WT / IN-WT from the row's search."""
    sid = row.get("search_id")
    if not sid:
        return "NET"
    level = (searches.get(sid) or {}).get("level") or row.get("level", "")
    return level if level in LEVELS.values() else LEVELS.get(level, "?")


def dnn_of(row: dict[str, Any], searches: dict[str, dict[str, Any]]) -> str:
    sid = row.get("search_id")
    if not sid:
        return str(row["id"])
    return str((searches.get(sid) or {}).get("target") or row.get("target") or sid)


def inconsistency_key(unit: str, row: dict[str, Any], pair: str,
                      searches: dict[str, dict[str, Any]]) -> tuple[str, str, str, str]:
    level = level_of(row, searches)
    weights = str(row["id"]) if level in ("WT", "IN-WT") else ""
    return (unit, dnn_of(row, searches), pair, weights)


def unique_inconsistencies(unit: str, rows: Iterable[dict[str, Any]],
                           searches: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per unique inconsistency: the first case (by id) that shows it."""
    picked: dict[tuple, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: str(r["id"])):
        for pair in row.get("inconsistent_pairs") or []:
            key = inconsistency_key(unit, row, pair, searches)
            if key not in picked:
                picked[key] = {"key": key, "unit": unit, "seed": row.get("seed"), "pair": pair,
                               "level": level_of(row, searches), "dnn": key[1], "case_id": row["id"],
                               "case_file": row.get("case_file")}
    return list(picked.values())
