"""A campaign's output directory: where its units and its shards' status files lie, and
how far it has run.

    units/<id>/                  one RunStore per unit (DONE.json commits it, ERROR.json: stopped)
    status/shard-I-of-N.json     each started shard's units and counts, kept up to date
    shards.json, locks/, logs/   the job array's layout, locks and logs (audee.campaign.runner)

A report over a campaign that has not finished counts only what ran; :class:`Progress`
says how much that is, so that "new bugs: 0" over 3 units of 104 cannot pass for a
finished campaign's count, and a campaign in which nothing ran is refused, not reported.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from audee.core.bounded import MAX_TEXT_BYTES, read_bytes
from audee.core.errors import AudeeError
from audee.store.runstore import RunStore

UNITS, STATUS = "units", "status"


@dataclass(frozen=True)
class Progress:
    """The units a campaign directory knows of (its started shards' lists and its unit
    directories) by how far each ran."""

    known: tuple[str, ...]    # every unit id of the started shards, and any unit directory
    done: tuple[str, ...]     # committed (DONE.json)
    errors: tuple[str, ...]   # stopped on an internal error (ERROR.json), not committed
    partial: tuple[str, ...]  # test cases written, neither committed nor stopped: running, or killed
    shards: int | None = None          # the shard count the started shards agree on
    shards_started: int = 0            # shards with a status file

    @property
    def not_run(self) -> tuple[str, ...]:
        ran = set(self.done) | set(self.errors) | set(self.partial)
        return tuple(u for u in self.known if u not in ran)

    @property
    def finished(self) -> bool:
        return bool(self.known) and len(self.done) == len(self.known) and \
            (self.shards is None or self.shards_started >= self.shards)

    def line(self) -> str:
        """One line for the top of a report: which units its counts cover."""
        head = f"{len(self.done)} of {len(self.known)} units done"
        if self.finished:
            return head
        rest = [f"{n} {what}" for n, what in ((len(self.errors), "stopped on an internal error"),
                                              (len(self.partial), "partly run"),
                                              (len(self.not_run), "not run")) if n]
        if self.shards is not None and self.shards_started < self.shards:
            rest.append(f"{self.shards - self.shards_started} of {self.shards} shards not started, their "
                        f"units not counted")
        return (head + (f" ({', '.join(rest)})" if rest else "")
                + " - the counts cover what ran; rerun `audee campaign` to finish")


class CampaignDir:
    """The files of the campaign output directory ``root``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def is_campaign(self) -> bool:
        return (self.root / UNITS).is_dir()

    def unit_dir(self, unit_id: str) -> Path:
        """``units/<id>``, checked to lie inside the directory (a unit id is one safe path component)."""
        udir = self.root / UNITS / unit_id
        if udir.resolve().parent != (self.root / UNITS).resolve():
            raise AudeeError(f"unit id {unit_id!r} would write outside {(self.root / UNITS).resolve()}",
                             field="units")
        return udir

    def unit_dirs(self) -> list[Path]:
        units = self.root / UNITS
        return sorted(p for p in units.iterdir() if p.is_dir()) if units.is_dir() else []

    def status_path(self, index: int, count: int) -> Path:
        return self.root / STATUS / f"shard-{index}-of-{count}.json"

    def _statuses(self) -> list[dict]:
        docs = []
        for p in sorted((self.root / STATUS).glob("shard-*-of-*.json")):
            try:
                doc = json.loads(read_bytes(p, MAX_TEXT_BYTES))
            except (AudeeError, ValueError, UnicodeDecodeError):
                continue  # written atomically: only a foreign file could fail to read
            if isinstance(doc, dict):
                docs.append(doc)
        return docs

    def progress(self) -> Progress:
        """How far the campaign ran (the shard count: the one its started shards agree on)."""
        statuses = self._statuses()
        listed = [str(u) for doc in statuses for u in (doc.get("unit_ids") or []) if isinstance(u, str)]
        dirs = {p.name: p for p in self.unit_dirs()}
        known = tuple(sorted(set(listed) | set(dirs)))
        done, errors, partial = [], [], []
        for uid in known:
            if uid not in dirs:
                continue
            store = RunStore(dirs[uid])
            if store.committed():
                done.append(uid)
            elif store.has_error():
                errors.append(uid)
            elif store.has_results():
                partial.append(uid)
        counts = {doc["shards"] for doc in statuses if isinstance(doc.get("shards"), int)}
        shards = counts.pop() if len(counts) == 1 else None
        started = len({doc.get("shard") for doc in statuses if doc.get("shards") == shards}) if shards else 0
        return Progress(known, tuple(done), tuple(errors), tuple(partial), shards, started)
