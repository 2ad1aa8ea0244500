"""``audee reproduce case.pkl``: re-run a recorded case and say whether its verdict holds."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from audee.backends.pool import Pool
from audee.backends.registry import BackendRef
from audee.cases.case import Verdict
from audee.engine.execute import Executor, Result
from audee.levels import Runner, level_of
from audee.reference.run import Reference
from audee.settings import TIMEOUT_S
from audee.store.caserecord import CaseRecord
from audee.oracle.verdicts import recorded_rules, verdict_holds


@dataclass
class Reproduction:
    record: CaseRecord
    original: Verdict
    result: Result

    @property
    def holds(self) -> bool:
        """Every failure the case was saved for shows up again (:func:`audee.oracle.verdicts.verdict_holds`)."""
        return verdict_holds(self.original, self.result.verdict)


def reproduce(path: str | Path, *, backends: list[BackendRef] | None = None, log_dir: Path,
              timeout: float = TIMEOUT_S, tie_margin: float | None = None,
              allowed_plugins: Iterable[str] = ()) -> Reproduction:
    """Re-run the case in ``path`` on its recorded backends (or ``backends``), judged with
    the tie margin it was recorded with (or ``tie_margin``), by its level's runner
    (:func:`audee.levels.level_of`).  Plugins the case names run only when
    ``allowed_plugins`` names them."""
    record = CaseRecord.from_file(path)
    original = record.verdict_obj()
    refs = backends or record.backend_refs(allowed_plugins=allowed_plugins)
    result = level_of(record).rerun(record, refs=refs, log_dir=log_dir, timeout=timeout, tie_margin=tie_margin)
    return Reproduction(record, original, result)


def rerun_model(record: CaseRecord, *, refs: list[BackendRef], log_dir: Path, timeout: float = TIMEOUT_S,
                tie_margin: float | None = None, runner: Callable[[Pool, float, Any], Runner] | None = None) -> Result:
    """A recorded model case run again on ``refs`` (beside its float64 reference, if it had
    one), judged as recorded (its tie margin unless ``tie_margin``, its tolerances, the
    equivalence rules its findings name); ``runner(pool, tie_margin, tolerances)``: another
    level's runner over the same workers (a training step's)."""
    original = record.verdict_obj()
    case = record.test_case()
    reference = Reference.recorded(record.meta)  # its float64 reference, if it had one, on the same workers
    with Pool(refs, log_dir, timeout=timeout, reference=reference.workers(refs) if reference else []) as pool:
        pool.start_or_fail(source=str(record.source))
        ex: Runner = Executor(pool, tie_margin=tie_margin if tie_margin is not None else record.tie_margin,
                              tolerances=record.tolerances or None,  # judged as recorded (old files: defaults)
                              equivalence=recorded_rules(original),  # the equivalence rules its findings name
                              reference=reference)
        if runner is not None:
            ex = runner(pool, ex.tie_margin, ex.tolerances)
        return ex.run(case)
