"""``audee reproduce case.pkl``: re-run a recorded case and say whether its verdict holds."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from audee.backends.pool import Pool
from audee.backends.registry import BackendRef
from audee.case import TestCase, Verdict
from audee.errors import CaseFileError
from audee.execute import Executor, Result
from audee.spec import ModelSpec
from audee.store import load_case


@dataclass
class Reproduction:
    record: dict
    original: Verdict
    result: Result

    @property
    def holds(self) -> bool:
        """Every failure the case was saved for shows up again (kind and backends)."""
        return self.original.signatures() <= self.result.verdict.signatures()


def case_from_record(record: dict, source: str) -> TestCase:
    try:
        spec = ModelSpec.from_json(record["spec"], source=f"{source}: spec")
    except Exception as exc:
        raise CaseFileError(str(exc), source=source, field="spec") from None
    return TestCase(record["id"], spec, record["weights"], record["inputs"],
                    {k: record.get(k) for k in ("seed", "variant", "rng", "mutations")})


def backends_of(record: dict, source: str) -> list[BackendRef]:
    try:
        return [BackendRef(b["label"], b["target"], b["device"]) for b in record["backends"]]
    except (KeyError, TypeError):
        raise CaseFileError("expected a list of {label, target, device}", source=source, field="backends") from None


def reproduce(path: str | Path, *, backends: list[BackendRef] | None = None, log_dir: Path,
              timeout: float = 120.0, tie_margin: float | None = None) -> Reproduction:
    record = load_case(path)
    case = case_from_record(record, str(path))
    refs = backends or backends_of(record, str(path))
    with Pool(refs, log_dir, timeout=timeout) as pool:
        pool.start()
        ex = Executor(pool, tie_margin=tie_margin if tie_margin is not None else record.get("tie_margin", 1e-5))
        result = ex.run(case)
    return Reproduction(record, Verdict.from_json(record["verdict"]), result)
