"""Localize a case file: load, re-run, pick the failure, run Algorithm 2, report."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from audee.backends.pool import Pool
from audee.backends.registry import BackendRef
from audee.case import Kind
from audee.execute import Executor
from audee.localize.localizer import LocalizeConfig, Localizer, Report
from audee.reproduce import start_or_raise
from audee.settings import TIMEOUT_S
from audee.store.caserecord import CaseRecord

PRIORITY = (Kind.INCONSISTENCY, Kind.NAN, Kind.HARD_CRASH, Kind.DIVERGENT_ACCEPTANCE)


def localize_case(path: str | Path, cfg: LocalizeConfig | None = None, *, backends: list[BackendRef] | None = None,
                  pair: list[str] | None = None, timeout: float = TIMEOUT_S, log_dir: Path | None = None,
                  apis: dict[str, Any] | None = None, pool: Pool | None = None,
                  allowed_plugins: Iterable[str] = ()) -> Report:
    """Localize the case's main failure.  ``pool`` may be shared across cases (the
    localization benchmark does so); otherwise one is started for the case's backends
    (or ``backends``): plugins the case names run only when ``allowed_plugins`` names them."""
    from audee.apis import load_api_configs

    record = CaseRecord.from_file(path)
    case = record.test_case()
    apis = apis or load_api_configs()
    if pool is not None:
        return _localize(pool, record, case, apis, cfg or LocalizeConfig(), pair)
    refs = backends or record.backend_refs(allowed_plugins=allowed_plugins)
    with tempfile.TemporaryDirectory(prefix="audee-localize-") as tmp:
        with Pool(refs, log_dir or Path(tmp), timeout=timeout) as own:
            start_or_raise(own, log_dir, str(path))
            return _localize(own, record, case, apis, cfg or LocalizeConfig(), pair)


def _localize(pool: Pool, record: CaseRecord, case: Any, apis: dict[str, Any], cfg: LocalizeConfig,
              pair: list[str] | None) -> Report:
    # does the case still fail, and how?  Judged with the tie margin and tolerances it was recorded with
    now = Executor(pool, tie_margin=record.tie_margin, tolerances=record.tolerances or None).run(case)
    recorded = record.verdict_obj()
    findings = [f for f in now.verdict.findings if f.is_failure]
    main = None
    for kind in PRIORITY:
        main = next((f for f in findings if f.kind == kind and (pair is None or sorted(f.backends) == sorted(pair))),
                    None)
        if main is not None:
            break
    report = Report(case.id, main.kind if main else "none", main.backends if main else [])
    report.reproduced = recorded.signatures() <= now.verdict.signatures() and main is not None
    dev = next((f for f in findings if f.kind == Kind.DEVIATION
                and (pair is None or sorted(f.backends) == sorted(pair))), None)
    if main is None and dev is not None:
        # no label flip: the deviation oracle already judged each layer on its own input
        report = Report(case.id, Kind.DEVIATION, list(dev.backends))
        report.reproduced = recorded.signatures() <= now.verdict.signatures()
        d = dev.detail
        report.note = (f"{d.get('tensor', 'logits')} out of tolerance (score {d.get('score', 0):.3g}); first layer out "
                       f"of tolerance: {d.get('first_layer') or 'none'}; deviating on their own input: "
                       f"{', '.join(d.get('own_layers') or []) or 'none'} (Algorithm 2 localizes label flips)")
        return report
    if main is None:
        report.note = "the case no longer fails on these backends"
        return report
    loc = Localizer(pool, apis, cfg)
    if main.kind == Kind.INCONSISTENCY:
        rows = main.detail["inputs"][: cfg.max_inputs]
        inputs = {k: v[rows] for k, v in case.inputs.items()}
        loc.localize_inconsistency(case, list(main.backends), inputs, report)
    elif main.kind == Kind.NAN:
        bad = main.backends[0]
        ok = main.detail.get("finite_backends") or []
        rows = _nan_rows(now.outcomes[bad], case.batch)
        inputs = {k: v[rows] for k, v in case.inputs.items()}
        loc.localize_by_replacement(case, Kind.NAN, bad, ok[0] if ok else None, inputs, report,
                                    main.detail["first_layer"][bad])
    else:
        bad = main.backends[0]
        ok = [b for b, o in now.outcomes.items() if o.ok]
        inputs = {k: v[:cfg.max_inputs] for k, v in case.inputs.items()}
        loc.localize_by_replacement(case, main.kind, bad, ok[0] if ok else None, inputs, report, None)
    return report


def _nan_rows(outcome: Any, batch: int) -> list[int]:
    """Rows whose output went non-finite (fall back to the first rows)."""
    if outcome.output is not None:
        bad = ~np.isfinite(outcome.output.reshape(outcome.output.shape[0], -1)).all(axis=1)
        rows = np.flatnonzero(bad).tolist()
        if rows:
            return rows[:4]
    return list(range(min(batch, 4)))


def render(report: Report) -> str:
    """The human-readable report: distance/rate table, localized sources, every trial."""
    lines = [f"case {report.case_id}: {report.kind} on {', '.join(report.backends) or '-'}"
             + ("" if report.reproduced else "  (does NOT reproduce as recorded)")]
    if report.note:
        lines.append(f"note: {report.note}")
    what = {"inconsistency": "first layer with change rate over t1", "nan": "first layer with NaN/Inf"}.get(
        report.kind, "first layer that fails alone")
    for i, rnd in enumerate(report.rounds):
        lines.append(f"\nround {i + 1}: {what} -> {rnd.layer or 'none'}")
        if rnd.table:
            lines.append(f"  {'layer':<22} {'api':<22} {'distance':>12} {'change rate':>14}")
            for row in rnd.table:
                mark = "  <-" if row["layer"] == rnd.layer else ""
                lines.append(f"  {row['layer']:<22} {row['api']:<22} {row['distance']:>12.4g} {row['rate']:>14.4g}{mark}")
        if rnd.layer and np.isfinite(rnd.baseline_rate):
            lines.append(f"  {rnd.layer} alone, original parameters: one-layer change rate {rnd.baseline_rate:.4g}")
        for t in rnd.trials:
            rate = f" rate {t.rate:.4g}" if np.isfinite(t.rate) else ""
            lines.append(f"    try {t.layer}.{t.param}: {t.old!r} -> {t.new!r}: {t.verdict}{rate}"
                         + (f" ({t.detail})" if t.detail else ""))
    lines.append("\nlocalized (layer, parameter): value -> replacements that remove it (* = top-1)")
    if not report.sources:
        lines.append("  nothing")
    groups: dict[tuple, list] = {}
    for s in report.sources:  # one line per (layer, parameter), best replacement first
        groups.setdefault((s.layer, s.api, s.param, repr(s.old), s.kind), []).append(s.new)
    for k, ((layer, api, param, old, kind), news) in enumerate(groups.items()):
        shown = ", ".join(repr(v) for v in news[:6]) + (f", ... ({len(news)} values)" if len(news) > 6 else "")
        lines.append(f"  {'*' if k == 0 else ' '} {layer} ({api}) {param}: {old} -> {shown}  [{kind}]")
    if report.cradle:
        lines.append(f"\nCRADLE's rule (top quartile of change rates) would flag: {', '.join(report.cradle)}")
    return "\n".join(lines)
