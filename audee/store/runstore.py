"""One run directory (an ``audee fuzz`` output, or a campaign unit) behind one interface.

Fuzz runs, campaigns, the report and the localization stage read and write a run's files
only through :class:`RunStore`, never by path::

    results.jsonl      typed rows (audee.records.ResultRow), appended one line each
    cases/<id>.pkl     failing cases (audee.store.caserecord.CaseRecord)
    variants/<id>.json the spec of every generated case
    searches.jsonl     one row per search run (audee.records.SearchRun)
    traces/<id>.json   one trace per search run (audee.records.SearchTrace)
    logs/  repro/      the run's log and workers' logs; standalone repro scripts
    recheck/           `audee recheck`'s table of those scripts run again (recheck.md, .csv, .json)
    localize/          a campaign unit's localization stage (its reports are audee.records')
    config.json        the run's settings, written first
    summary.json       `audee fuzz`'s counts;  DONE.json / ERROR.json: a campaign unit's commit point / error

As Hypothesis's engine sees only its example database: the layout is known here alone.
The JSONL mechanism (one ``O_APPEND`` write and fsync per row, torn last lines cut) is
:class:`audee.store.results.ResultsTable`'s; every whole file is written atomically.
"""
from __future__ import annotations

import json
import os
import logging
from pathlib import Path
from typing import Any, Iterator

from audee.core.bounded import MAX_TEXT_BYTES, read_bytes
from audee.core.errors import AudeeError
from audee.records.rows import PlacedRow, ResultRow, RowRejected, parse_row
from audee.records.search import SearchRun, SearchTrace, last_runs, parse_search_run, parse_trace
from audee.cases.spec import ModelSpec
from audee.store.atomic import write_atomic
from audee.store.caserecord import CaseRecord, save_case
from audee.store.results import ResultsTable

log = logging.getLogger(__name__)

RESULTS, SEARCHES = "results.jsonl", "searches.jsonl"
CONFIG, SUMMARY, DONE, ERROR = "config.json", "summary.json", "DONE.json", "ERROR.json"


class RunStore:
    """The files of the run directory ``root``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._results = ResultsTable(self.root / RESULTS)
        self._searches = ResultsTable(self.root / SEARCHES)

    def __repr__(self) -> str:
        return f"RunStore({str(self.root)!r})"

    # ---- folders ---------------------------------------------------------------------------
    @property
    def logs(self) -> Path:
        """The run's log (``audee.log``) and its workers' logs."""
        return self.root / "logs"

    @property
    def log_file(self) -> Path:
        """The run's own log (audee.core.logs.setup_logging writes it)."""
        return self.logs / "audee.log"

    @property
    def repro_dir(self) -> Path:
        """Standalone repro scripts, one per unique bug (audee.repro)."""
        return self.root / "repro"

    @property
    def recheck_dir(self) -> Path:
        """``audee recheck``'s table of the repro scripts run again (audee.repro.recheck)."""
        return self.root / "recheck"

    @property
    def localize_dir(self) -> Path:
        """A campaign unit's localization stage (audee.campaign.localize_stage)."""
        return self.root / "localize"

    @property
    def cases_dir(self) -> Path:
        return self.root / "cases"

    def prepare(self) -> None:
        """The folders a run writes into from its first case on."""
        self.cases_dir.mkdir(parents=True, exist_ok=True)

    # ---- results rows ----------------------------------------------------------------------
    @property
    def results_path(self) -> Path:
        """The results table's file (for messages: read it through :meth:`rows`)."""
        return self._results.path

    def has_results(self) -> bool:
        """Whether a results table is there (a pipe or a device there too: reading it is then
        one error line naming it, never a run taken for an empty one)."""
        return os.path.lexists(self._results.path)

    def rows(self) -> Iterator[ResultRow]:
        """Every test case's row in the order written; a line that is none (not JSON, no id,
        a field of the wrong type) is a warning naming the file and line, and skipped."""
        for n, raw in self._results.numbered_lines():
            try:
                yield parse_row(raw)
            except RowRejected as exc:
                log.warning("%s:%d: skipping %s", self._results.path, n, exc.what)

    def append(self, row: ResultRow) -> None:
        """One row, durable when this returns (one write, fsynced)."""
        self._results.append(row.to_json())

    def done_ids(self) -> set[str]:
        """Every case id with a row (a run resumes past them)."""
        return self._results.done_ids()

    def placed(self, row: ResultRow, unit: str | None = None) -> PlacedRow:
        """``row`` with its case file resolved here and this run's repro folder."""
        return PlacedRow(row, unit, str(self.case_file_path(row.case_file)) if row.case_file else None,
                         str(self.repro_dir))

    # ---- case files ------------------------------------------------------------------------
    def case_path(self, case_id: str) -> Path:
        return self.cases_dir / f"{case_id}.pkl"

    def case_file_path(self, case_file: str) -> Path:
        """A row's ``case_file`` (relative to the run directory) as a path."""
        return self.root / case_file

    def save_case(self, case_id: str, record: CaseRecord) -> str:
        """Write the case file; its path relative to the run directory (a row's ``case_file``)."""
        return str(save_case(self.case_path(case_id), record).relative_to(self.root))

    def load_case(self, case_file: str) -> CaseRecord:
        """The case file a row names (``case_file``), checked (one-line errors)."""
        return CaseRecord.from_file(self.case_file_path(case_file))

    # ---- variant specs ---------------------------------------------------------------------
    def variant_path(self, case_id: str) -> Path:
        return self.root / "variants" / f"{case_id}.json"

    def has_variant(self, case_id: str) -> bool:
        return self.variant_path(case_id).is_file()

    def write_variant(self, case_id: str, spec: ModelSpec) -> None:
        write_atomic(self.variant_path(case_id), json.dumps(spec.to_json(), indent=1).encode())

    def load_variant(self, case_id: str) -> ModelSpec:
        return ModelSpec.load(self.variant_path(case_id))

    # ---- search runs and traces ------------------------------------------------------------
    def search_runs(self) -> Iterator[SearchRun]:
        """Every ``searches.jsonl`` row in the order written (a rerun's row after the
        interrupted one's); a line that is none is a warning naming it, and skipped."""
        for n, raw in self._searches.numbered_lines():
            try:
                yield parse_search_run(raw)
            except RowRejected as exc:
                log.warning("%s:%d: skipping %s", self._searches.path, n, exc.what)

    def last_search_runs(self) -> dict[str, SearchRun]:
        """Each search run's last row, by id: the one readers keep."""
        return last_runs(self.search_runs())

    def append_search(self, run: SearchRun) -> None:
        self._searches.append(run.to_json())

    def trace_path(self, search_id: str) -> Path:
        return self.root / "traces" / f"{search_id}.json"

    def write_trace(self, trace: SearchTrace) -> None:
        write_atomic(self.trace_path(trace.id), trace.dumps())

    def traces(self) -> Iterator[SearchTrace]:
        """Every trace, by file name; one that does not read (only a foreign file could: they
        are written atomically) is skipped."""
        folder = self.root / "traces"
        for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                yield parse_trace(read_bytes(p, MAX_TEXT_BYTES))
            except (AudeeError, RowRejected) as exc:
                log.debug("%s: skipped: %s", p, exc)

    # ---- whole JSON documents --------------------------------------------------------------
    def write_config(self, doc: dict[str, Any]) -> None:
        """``config.json``: the run's header and settings (written first)."""
        write_atomic(self.root / CONFIG, json.dumps(doc, indent=1, default=str).encode())

    def config(self) -> dict[str, Any]:
        """``config.json`` (seed, backends, settings); {} when missing or unreadable: a reader
        of finished runs takes what the rows say instead."""
        doc = self._read_json(CONFIG, strict=False)
        return doc if isinstance(doc, dict) else {}

    def write_summary(self, doc: dict[str, Any]) -> None:
        """``summary.json``: `audee fuzz`'s counts and unique bugs."""
        write_atomic(self.root / SUMMARY, (json.dumps(doc, indent=1) + "\n").encode())

    def summary(self) -> dict[str, Any]:
        """``summary.json``; a missing or unreadable one is one error line naming it."""
        return self._read_json(SUMMARY, strict=True)

    def committed(self) -> bool:
        """Whether a campaign unit's fuzz run finished (``DONE.json``, written last)."""
        return (self.root / DONE).is_file()

    def commit(self, summary: dict[str, Any]) -> None:
        """A campaign unit's commit point: its summary, written atomically, last."""
        write_atomic(self.root / DONE, json.dumps(summary, indent=1, default=str).encode())

    def write_error(self, record: dict[str, Any]) -> None:
        """A campaign unit's internal error (``ERROR.json``), kept until it runs through."""
        write_atomic(self.root / ERROR, json.dumps(record, indent=1).encode())

    def has_error(self) -> bool:
        """Whether a campaign unit stopped on an internal error and has not run through since."""
        return (self.root / ERROR).is_file()

    def clear_error(self) -> None:
        (self.root / ERROR).unlink(missing_ok=True)

    def _read_json(self, name: str, *, strict: bool) -> Any:
        path = self.root / name
        try:
            return json.loads(read_bytes(path, MAX_TEXT_BYTES))
        except AudeeError:  # no such file, a pipe, a device, a huge file
            if not strict:
                return None
            raise
        except ValueError:
            if not strict:
                return None
            raise AudeeError("cannot read: not valid JSON", source=str(path)) from None
