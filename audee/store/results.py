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
from typing import Any, Iterator

import numpy as np

from audee.errors import AudeeError

log = logging.getLogger(__name__)


def _default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


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
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # torn last line from a kill: that case is redone on resume
                try:
                    row = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    log.warning("%s: skipping a line that is not valid JSON", self.path)
                    continue
                if not isinstance(row, dict) or "id" not in row:
                    log.warning("%s: skipping a line that is not a row (a JSON object with an id)", self.path)
                    continue
                yield row

    def done_ids(self) -> set[str]:
        return {r["id"] for r in self.rows()}

