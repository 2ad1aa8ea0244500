"""The append-only results table: one JSON line per test case run, failing or not.

Each row is written with a single ``write`` on an ``O_APPEND`` descriptor and fsynced, so
a kill leaves at most a torn last line, which the reader skips.  Rows are keyed by test
case id; a rerun of the same output directory skips ids already present (resume).
"""
from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from audee.core.bounded import open_regular
from audee.core.errors import AudeeError
from audee.records.rows import RowRejected, parse_object

log = logging.getLogger(__name__)


def _default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


#: the ``phases`` field of a row: backend -> phase -> seconds its worker spent on the case, phases
#: as in :data:`audee.backends.base.TIMED_PHASES` (a phase it did not go through is absent)
PHASES_FIELD = "phases"
#: the longest results row read (a backend's message is bounded where it enters: rows stay far smaller)
MAX_ROW_BYTES = 64 << 20


def phases_field(phases: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """A case's phase timings as a row stores them: seconds rounded to 0.1 ms, each
    backend's phases in the order a case goes through them."""
    from audee.backends.base import TIMED_PHASES

    order = {p: i for i, p in enumerate(TIMED_PHASES)}
    return {label: {p: round(float(s), 4) for p, s in sorted(ph.items(), key=lambda kv: order.get(kv[0], 99))}
            for label, ph in sorted(phases.items())}


def phase_summary(phases: Iterable[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per backend over the rows' phase timings (each row's ``phases`` field; rows without
    timings hold none): cases, mean seconds per case of each phase (over all those cases: a
    phase a case skipped, such as a cached build, counts 0) and their total; the summary's
    and the report's phase table."""
    from audee.backends.base import TIMED_PHASES

    sums: dict[str, dict[str, float]] = {}
    cases: dict[str, int] = {}
    for timings in phases:
        for label, ph in (timings or {}).items():
            cases[label] = cases.get(label, 0) + 1
            mine = sums.setdefault(label, {})
            for p, s in ph.items():
                mine[p] = mine.get(p, 0.0) + float(s)
    out = {}
    for label in sorted(sums):
        n = cases[label]
        means = {p: round(sums[label].get(p, 0.0) / n, 4) for p in TIMED_PHASES}
        out[label] = {"cases": n, "mean_s": means, "mean_total_s": round(sum(means.values()), 4)}
    return out


def phase_lines(summary: dict[str, dict[str, Any]]) -> list[str]:
    """The phase summary as fixed-width text lines (``audee fuzz``'s printed summary)."""
    from audee.backends.base import TIMED_PHASES

    if not summary:
        return []
    width = max(20, *(len(label) for label in summary))
    lines = [f"  {'phases, s per case':<{width + 2}} " + " ".join(f"{p:>8}" for p in TIMED_PHASES)
             + f" {'total':>8}  cases"]
    for label, s in summary.items():
        lines.append(f"    {label:<{width}} " + " ".join(f"{s['mean_s'][p]:>8.3f}" for p in TIMED_PHASES)
                     + f" {s['mean_total_s']:>8.3f}  {s['cases']:>5}")
    return lines


class ResultsTable:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._repaired = False

    def repair(self) -> None:
        """Cut a torn last line (a kill mid-write) so the next row starts on its own line."""
        if not self.path.is_file():
            return
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)

    def append(self, row: dict[str, Any]) -> None:
        if not self._repaired:
            self.repair()
            self._repaired = True
        line = (json.dumps(row, default=_default, allow_nan=True, sort_keys=True) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # the umask decides, as for open()
            try:
                if os.write(fd, line) != len(line):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # a full disk (ENOSPC), quota, permissions: one line naming the file
            self._repaired = False  # a partial row is cut before the next append
            raise AudeeError(f"cannot write a row: {exc.strerror or exc}", source=str(self.path)) from None

    def rows(self) -> Iterator[dict[str, Any]]:
        for _, row in self.numbered_rows():
            yield row

    def numbered_lines(self) -> Iterator[tuple[int, bytes]]:
        """(line number, bytes) of every whole line: a typed reader parses each and names
        the line it rejects (audee.store.runstore)."""
        if not os.path.lexists(self.path):
            return
        with open_regular(self.path, None) as f:  # a pipe or a device: one line naming it, never a hang
            n = 0
            while raw := f.readline(MAX_ROW_BYTES + 1):
                n += 1
                if len(raw) > MAX_ROW_BYTES:
                    raise AudeeError(f"line {n} is longer than the {MAX_ROW_BYTES:,} bytes a row may have",
                                     source=str(self.path))
                if not raw.endswith(b"\n"):
                    break  # torn last line from a kill: that case is redone on resume
                yield n, raw

    def numbered_rows(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, JSON object with an id) for every row, any table; a line that is
        none is a warning naming it, and skipped.  Results rows are read typed, through
        :class:`audee.store.runstore.RunStore`."""
        for n, raw in self.numbered_lines():
            try:
                yield n, parse_object(raw)
            except RowRejected as exc:
                log.warning("%s:%d: skipping %s", self.path, n, exc.what)

    def done_ids(self) -> set[str]:
        return {r["id"] for r in self.rows()}

