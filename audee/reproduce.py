"""``audee reproduce case.pkl``: re-run a recorded case and say whether its verdict holds."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from audee.backends.pool import Pool, WorkerFailure
from audee.backends.registry import BackendRef
from audee.case import Verdict
from audee.errors import BackendUnavailable
from audee.execute import Executor, Result
from audee.settings import TIMEOUT_S
from audee.store.caserecord import CaseRecord


@dataclass
class Reproduction:
    record: CaseRecord
    original: Verdict
    result: Result

    @property
    def holds(self) -> bool:
        """Every failure the case was saved for shows up again (kind and backends)."""
        return self.original.signatures() <= self.result.verdict.signatures()


def start_or_raise(pool: Pool, log_dir: Path | None = None, source: str | None = None) -> None:
    """Start ``pool``'s workers; one that cannot start is :class:`BackendUnavailable`
    (exit 4), not a finding: a case is never judged on backends that are not there."""
    failed = pool.start()
    if failed:
        raise BackendUnavailable(_failed_line(failed) + (f"; see {log_dir}" if log_dir else ""), source=source)


def _failed_line(failed: dict[str, WorkerFailure]) -> str:
    parts = []
    for label, f in failed.items():
        last = (f.message.strip().splitlines() or [f.kind])[-1]
        parts.append(f"{label}: {last}")
    return "backend worker failed to start (" + "; ".join(parts) + ")"


def reproduce(path: str | Path, *, backends: list[BackendRef] | None = None, log_dir: Path,
              timeout: float = TIMEOUT_S, tie_margin: float | None = None,
              allowed_plugins: Iterable[str] = ()) -> Reproduction:
    """Re-run the case in ``path`` on its recorded backends (or ``backends``), judged with
    the tie margin it was recorded with (or ``tie_margin``).  Plugins the case names run
    only when ``allowed_plugins`` names them."""
    record = CaseRecord.from_file(path)
    case = record.test_case()
    original = record.verdict_obj()
    refs = backends or record.backend_refs(allowed_plugins=allowed_plugins)
    with Pool(refs, log_dir, timeout=timeout) as pool:
        start_or_raise(pool, None, str(path))
        ex = Executor(pool, tie_margin=tie_margin if tie_margin is not None else record.tie_margin,
                      tolerances=record.tolerances or None)  # judged as recorded (old files: defaults)
        result = ex.run(case)
    return Reproduction(record, original, result)
