"""``audee reproduce case.pkl``: re-run a recorded case and say whether its verdict holds."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from audee.backends.pool import Pool
from audee.backends.registry import BackendRef
from audee.case import Verdict
from audee.execute import Executor, Result
from audee.reference.run import Reference
from audee.settings import TIMEOUT_S
from audee.store.caserecord import CaseRecord
from audee.verdicts import recorded_rules, verdict_holds


@dataclass
class Reproduction:
    record: CaseRecord
    original: Verdict
    result: Result

    @property
    def holds(self) -> bool:
        """Every failure the case was saved for shows up again (:func:`audee.verdicts.verdict_holds`)."""
        return verdict_holds(self.original, self.result.verdict)


def reproduce(path: str | Path, *, backends: list[BackendRef] | None = None, log_dir: Path,
              timeout: float = TIMEOUT_S, tie_margin: float | None = None,
              allowed_plugins: Iterable[str] = ()) -> Reproduction:
    """Re-run the case in ``path`` on its recorded backends (or ``backends``), judged with
    the tie margin it was recorded with (or ``tie_margin``).  Plugins the case names run
    only when ``allowed_plugins`` names them."""
    record = CaseRecord.from_file(path)
    original = record.verdict_obj()
    if record.is_op:  # an op-level case (issue 30): the call again, judged as recorded
        from audee.apis import load_op_configs
        from audee.opexec import OpExecutor

        undefined = {n: c.undefined for n, c in load_op_configs().items()}
        refs = backends or record.backend_refs(allowed_plugins=allowed_plugins)
        with Pool(refs, log_dir, timeout=timeout) as pool:
            pool.start_or_fail(source=str(path))
            result = OpExecutor(pool, tolerances=record.tolerances or None, undefined=undefined).run(record.op_case())
        return Reproduction(record, original, result)
    case = record.test_case()
    refs = backends or record.backend_refs(allowed_plugins=allowed_plugins)
    reference = Reference.recorded(record.meta)  # its float64 reference, if it had one, on the same workers
    with Pool(refs, log_dir, timeout=timeout, reference=reference.workers(refs) if reference else []) as pool:
        pool.start_or_fail(source=str(path))
        ex = Executor(pool, tie_margin=tie_margin if tie_margin is not None else record.tie_margin,
                      tolerances=record.tolerances or None,  # judged as recorded (old files: defaults)
                      equivalence=recorded_rules(original),  # the equivalence rules its findings name
                      reference=reference)
        if record.meta.get("phase") == "train":  # a training step (audee.train): its recorded setup again
            from audee.train.run import TrainExecutor

            ex = TrainExecutor(pool, tie_margin=ex.tie_margin, tolerances=ex.tolerances)
        result = ex.run(case)
    return Reproduction(record, original, result)
