"""Re-judge a run's failing cases with today's oracles, side by side with their recorded verdicts.

    python experiments/rejudge.py runs/api-cpu --kinds nan --out experiments/results/nan_conditioning

For every case of RUN (a fuzz directory or a campaign: ``units/*/results.jsonl``) whose
recorded kinds include one of ``--kinds``, the case file is run again through the
Executor (one pool per backend set, started once), and the recorded verdict is set beside
the new one: for NaN findings whether a pattern difference still stands (``strong``), the
reason each pair was cleared (audee.oracle.nan.condition_pattern) and whether the input
was at overflow scale.  Prints a table; writes OUT.md and OUT.json.
"""
from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path
from typing import Any

from audee.backends.pool import Pool
from audee.cases.case import Kind
from audee.engine.execute import Executor
from audee.records.rows import ResultRow
from audee.store import RunStore
from audee.store.caserecord import CaseRecord

NAN_KINDS = (Kind.NAN, Kind.NAN_PROPAGATED)


def failing_rows(run: Path, kinds: set[str]) -> list[tuple[Path, ResultRow]]:
    """Each recorded case of ``kinds`` with its case file, over the run's units (or the run itself)."""
    units = sorted(d for d in run.glob("units/*") if RunStore(d).has_results()) or [run]
    out = []
    for store in map(RunStore, units):
        for row in store.rows():
            if kinds & set(row.kinds) and row.case_file is not None:
                out.append((store.case_file_path(row.case_file), row))
    return out


def nan_state(findings: list[Any]) -> str:
    """``strong`` (a pattern difference stands), ``nan`` (the paper's NaN oracle),
    ``propagated`` (the input explains it) or ``none``."""
    kinds = {f.kind for f in findings}
    if any(f.kind == Kind.NAN and f.detail.strong for f in findings):
        return "strong"
    return "nan" if Kind.NAN in kinds else "propagated" if Kind.NAN_PROPAGATED in kinds else "none"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--kinds", default="nan", help="comma-separated recorded kinds to re-judge")
    ap.add_argument("--out", type=Path, required=True, help="OUT.md and OUT.json are written")
    args = ap.parse_args()
    rows = failing_rows(args.run, set(args.kinds.split(",")))
    by_backends: dict[tuple, list] = collections.defaultdict(list)
    for path, row in rows:
        rec = CaseRecord.from_file(path)
        by_backends[tuple(r.label for r in rec.backend_refs())].append((path, row, rec))
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        for labels, items in by_backends.items():
            with Pool(items[0][2].backend_refs(), Path(tmp)) as pool:
                failed = pool.start()
                assert not failed, failed
                ex = Executor(pool)
                for path, row, rec in items:
                    result = ex.run(rec.test_case())
                    nans = [f for f in result.verdict.findings if f.kind in NAN_KINDS]
                    entry = {"id": row.id, "recorded": "strong" if row.nan_strong else
                             ("nan" if Kind.NAN in row.kinds else "none"),
                             "now": nan_state(result.verdict.findings),
                             "kinds_now": sorted({f.kind for f in result.verdict.findings}),
                             "overflow_scale_input": any(f.detail.input_overflow_scale for f in nans),
                             "agreed": any(f.detail.agreed for f in nans),
                             "overflow_boundary": any(f.detail.overflow_boundary for f in nans),
                             "odd": sorted({b for f in nans for b in f.detail.odd or []}),
                             "pairs": {k: p.cleared or f"stands at {p.own_layer}"
                                       for f in nans for k, p in f.detail.patterns.items()}}
                    print(json.dumps(entry), flush=True)
                    table.append(entry)
    counts = collections.Counter((e["recorded"], e["now"]) for e in table)
    reasons = collections.Counter(r for e in table for r in set(e["pairs"].values()) if not r.startswith("stands"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps({"run": str(args.run), "cases": table,
                                                    "transitions": {f"{a}->{b}": n for (a, b), n in counts.items()},
                                                    "cleared_reasons": dict(reasons)}, indent=1) + "\n")
    md = [f"# Re-judged: {len(table)} cases of `{args.run}` recorded with {args.kinds}", "",
          "| recorded | now | cases |", "|---|---|---|"]
    md += [f"| {a} | {b} | {n} |" for (a, b), n in sorted(counts.items())]
    md += ["", "Pairs cleared, by reason (a case counts once per reason): " +
           ", ".join(f"{r} {n}" for r, n in sorted(reasons.items())), "",
           "| case | recorded | now | overflow-scale input | pairs |", "|---|---|---|---|---|"]
    md += [f"| {e['id']} | {e['recorded']} | {e['now']} | {'yes' if e['overflow_scale_input'] else ''} | "
           f"{'; '.join(f'{k}: {v}' for k, v in e['pairs'].items())} |" for e in table]
    Path(f"{args.out}.md").write_text("\n".join(md) + "\n")
    print("\n".join(md[:8]))


if __name__ == "__main__":
    main()
