"""Localize a case file: load, re-run, pick the failure, run Algorithm 2, report."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from audee.backends.pool import Pool
from audee.backends.registry import BackendRef
from audee.cases.case import Kind
from audee.engine.execute import Executor
from audee.oracle.equivalence import batch_rule
from audee.levels import level_of
from audee.records.localization import RateRow, Round
from audee.reference.run import Reference
from audee.localize.localizer import LocalizeConfig, Localizer, Report
from audee.settings import TIMEOUT_S
from audee.triage.signature import normalize_error
from audee.store.caserecord import CaseRecord
from audee.oracle.verdicts import main_failure, recorded_rules, verdict_holds


def localize_case(path: str | Path, cfg: LocalizeConfig | None = None, *, backends: list[BackendRef] | None = None,
                  pair: list[str] | None = None, timeout: float = TIMEOUT_S, log_dir: Path | None = None,
                  apis: dict[str, Any] | None = None, pool: Pool | None = None,
                  allowed_plugins: Iterable[str] = (), repro_dir: str | Path | None = None) -> Report:
    """Localize the case's main failure.  ``pool`` may be shared across cases (the
    localization benchmark does so); otherwise one is started for the case's backends
    (or ``backends``): plugins the case names run only when ``allowed_plugins`` names them.
    ``repro_dir``: also write the one-layer repro script of the top candidate's layer there."""
    from audee.apis import load_api_configs
    from audee.core.errors import AudeeError

    record = CaseRecord.from_file(path)
    refusal = level_of(record).localize_refusal()  # an op call: its arguments are the whole case
    if refusal:
        raise AudeeError(refusal, source=str(path))
    case = record.test_case()
    apis = apis or load_api_configs()
    if pool is not None:
        return with_repro(_localize(pool, record, case, apis, cfg or LocalizeConfig(), pair), record, pool, repro_dir)
    refs = backends or record.backend_refs(allowed_plugins=allowed_plugins)
    reference = Reference.recorded(record.meta)  # the workers of its float64 reference, if it had one
    with tempfile.TemporaryDirectory(prefix="audee-localize-") as tmp:
        with Pool(refs, log_dir or Path(tmp), timeout=timeout,
                  reference=reference.workers(refs) if reference else []) as own:
            own.start_or_fail(logs=log_dir, source=str(path))
            return with_repro(_localize(own, record, case, apis, cfg or LocalizeConfig(), pair), record, own,
                               repro_dir)


def with_repro(report: Report, record: CaseRecord, pool: Pool, repro_dir: str | Path | None) -> Report:
    """The Judge issue's one-layer repro script for the top candidate's layer, written on
    the same workers; why not, in the note, when it cannot be written."""
    if repro_dir is None or not (report.sources or report.trigger) or not report.reproduced:
        return report
    from audee.core.errors import AudeeError
    from audee.repro import default_name, pick_finding, write_repro

    layer = report.sources[0].layer if report.sources else report.trigger.layer
    try:
        # the recorded finding that was localized (else the case's main failure)
        findings = record.verdict_obj().findings
        index = next((i for i, f in enumerate(findings)
                      if f.kind == report.kind and sorted(f.backends) == sorted(report.backends)), None)
        script = write_repro(record, Path(repro_dir), default_name(record, pick_finding(record, index)),
                             layer=layer, model="one-layer", pool=pool, finding=index)
        report.repro = str(script.script)
    except AudeeError as exc:
        report.note = (report.note + "; " if report.note else "") + f"no repro script: {exc}"
    return report


def _localize(pool: Pool, record: CaseRecord, case: Any, apis: dict[str, Any], cfg: LocalizeConfig,
              pair: list[str] | None) -> Report:
    # does the case still fail, and how?  Judged with the tie margin and tolerances it was recorded with
    recorded = record.verdict_obj()
    now = Executor(pool, tie_margin=record.tie_margin, tolerances=record.tolerances or None,
                   equivalence=recorded_rules(recorded), reference=Reference.recorded(record.meta)).run(case)
    main = main_failure(now.verdict.findings, pair)
    report = Report(case.id, main.kind if main else "none", main.backends if main else [])
    report.reproduced = verdict_holds(recorded, now.verdict) and main is not None
    if main is None:
        report.note = "the case no longer fails on these backends"
        return report
    loc = Localizer(pool, apis, cfg, tolerances=record.tolerances or None)
    if main.kind == Kind.INCONSISTENCY:
        rows = (main.detail.inputs or [])[: cfg.max_inputs]
        inputs = {k: v[rows] for k, v in case.inputs.items()}
        loc.localize_inconsistency(case, list(main.backends), inputs, report)
    elif main.kind == Kind.DEVIATION:
        d = main.detail
        rows = list(d.rows or range(case.batch))[: cfg.max_inputs]
        inputs = {k: v[rows] for k, v in case.inputs.items()}
        layers = list(d.own_layers) or ([d.first_layer] if d.first_layer else [])
        report.note = (f"{d.tensor or 'logits'} out of tolerance (score {d.score or 0:.3g}); first layer "
                       f"out of tolerance: {d.first_layer or 'none'}; deviating on their own input: "
                       f"{', '.join(d.own_layers) or 'none'}")
        loc.localize_deviation(case, list(main.backends), inputs, layers, report)
    elif main.kind == Kind.PRECISION:
        localize_precision(case, main, report)
    elif main.kind == Kind.EQUIVALENCE:
        d = main.detail
        rows = [r for r in (d.rows or []) if 0 <= r < case.batch]
        # a batch rule's rows only mean something in their batch: the whole batch then
        rows = list(range(case.batch)) if batch_rule(d.rule) or not rows \
            else rows[: cfg.max_inputs]
        inputs = {k: v[rows] for k, v in case.inputs.items()}
        report.note = (f"rule {d.rule} on {d.backend}: {d.reason}" + (f" (score {d.score:.3g})" if d.score else "")
                       + f"; first layer that differs: {d.first_layer or 'none'}; differing alone: "
                       + f"{d.layer or 'none'}")
        loc.localize_equivalence(case, main.backends[0], d.rule, inputs, d.layer, list(d.rewritten), report)
    elif main.kind == Kind.REGRESSION:
        localize_regression(loc, case, main, now.outcomes, cfg, report)
    elif main.kind == Kind.NAN:
        bad, ref, first = nan_roles(main)
        rows = _nan_rows(now.outcomes[bad], case.batch)
        inputs = {k: v[rows] for k, v in case.inputs.items()}
        loc.localize_by_replacement(case, Kind.NAN, bad, ref, inputs, report, first)
    else:
        bad = main.backends[0]
        failure = now.outcomes[bad].failure
        report.error = normalize_error(failure.message or failure.kind) if failure is not None else None
        ok = [b for b, o in now.outcomes.items() if o.ok]
        inputs = {k: v[:cfg.max_inputs] for k, v in case.inputs.items()}
        loc.localize_by_replacement(case, main.kind, bad, ok[0] if ok else None, inputs, report, None)
    return report


def localize_regression(loc: Localizer, case: Any, finding: Any, outcomes: dict[str, Any], cfg: LocalizeConfig,
                        report: Report) -> None:
    """A ``regression`` (one backend under two releases computing the case differently):
    the layer and parameter behind it, as for a difference between frameworks.  The older
    release is the reference: its layer inputs feed the layer alone, and a replacement removes
    the regression when the two releases then agree (:class:`audee.localize.localizer.Probe`).
    The rows are those the two releases differ on."""
    d = finding.detail
    older, newer = (d.older, d.newer) if d.newer and d.older else tuple(finding.backends)
    rows = [r for r in (d.rows or []) if 0 <= r < case.batch] or _differing_rows(outcomes.get(older),
                                                                                 outcomes.get(newer), case.batch)
    inputs = {k: v[rows[: cfg.max_inputs]] for k, v in case.inputs.items()}
    report.note = (f"{newer} computes differently from {older} ({d.component or 'versions not reported'}), seen "
                   f"as {', '.join(d.seen) or 'a difference'}; the layer it names: {d.layer or 'none'}")
    loc.localize_by_replacement(case, Kind.REGRESSION, newer, older, inputs, report,
                                d.layer if d.layer in case.spec.layer_names() else None)


def _differing_rows(a: Any, b: Any, batch: int) -> list[int]:
    """The rows whose outputs two runs give differently (values or non-finite pattern); the
    first rows when they cannot be compared."""
    x = getattr(a, "output", None)
    y = getattr(b, "output", None)
    if x is not None and y is not None and x.shape == y.shape and x.shape[:1] == (batch,):
        x, y = x.reshape(batch, -1).astype(np.float64), y.reshape(batch, -1).astype(np.float64)
        same = np.isclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True).all(axis=1)
        rows = np.flatnonzero(~same).tolist()
        if rows:
            return rows
    return list(range(min(batch, 4)))


def localized(report: Report) -> bool:
    """Whether ``report`` localized its failure: a (layer, parameter) source or an input
    trigger; for an ``equivalence`` finding the layer that differs from its equivalent alone
    (for a ``precision`` one the layer that loses accuracy alone) is the answer already (a batch rule's leaking rows are rarely a parameter's doing), a
    parameter that removes it a further one."""
    if report.sources or report.trigger:
        return True
    return report.kind in (Kind.EQUIVALENCE, Kind.PRECISION) and any(r.layer for r in report.rounds)


def localize_precision(case: Any, finding: Any, report: Report) -> None:
    """A ``precision`` finding, localized by the reference's per-layer judgement
    (:mod:`audee.reference.diagnose`, run again by the re-judgement): one round whose layer
    is the first layer out of tolerance on the reference's own input (else the first out of
    tolerance along the model), with each layer's error along the model as its table."""
    d = finding.detail
    report.note = (f"{d.backend} against the {d.reference_dtype or 'float64'} reference on {d.reference}: error "
                   f"{d.score or 0:.3g} ({d.factor or 0:.3g}x {d.best}'s); first layer out of tolerance: "
                   f"{d.first_layer or 'none'}; out of tolerance on the reference's input: {d.layer or 'none'}")
    table = [RateRow(layer=name, api=case.spec.layer(name).api, distance=err, rate=float("nan"))
             for name, err in (d.layer_errors or {}).items()]
    report.rounds.append(Round(layer=d.layer or d.first_layer, table=table))


def nan_roles(finding: Any) -> tuple[str, str | None, str | None]:
    """(failing backend, reference backend, target layer) of a NaN finding: the first pair
    whose non-finite patterns differ and the first layer where they do; else the first
    backend with NaN/Inf and its first such layer."""
    d = finding.detail
    nonfinite = d.layers  # backend -> its non-finite layers
    for key, p in d.patterns.items():
        a, b = key.split("|")
        layer = p.first_layer
        bad = next((x for x in (a, b) if layer and layer in nonfinite.get(x, [])), a if a in nonfinite else b)
        return bad, (b if bad == a else a), layer or d.first_layer.get(bad)
    bad = next(iter(d.first_layer), finding.backends[0])
    ok = d.finite_backends
    return bad, (ok[0] if ok else None), d.first_layer.get(bad)


def _nan_rows(outcome: Any, batch: int) -> list[int]:
    """Rows whose output went non-finite (fall back to the first rows)."""
    if outcome.output is not None:
        bad = ~np.isfinite(outcome.output.reshape(outcome.output.shape[0], -1)).all(axis=1)
        rows = np.flatnonzero(bad).tolist()
        if rows:
            return rows[:4]
    return list(range(min(batch, 4)))


def render(report: Report, top_k: int = 3, trials: bool = True) -> str:
    """The human-readable report: distance/rate table, every trial, the top candidates of
    each localized layer with their evidence, the named (layer, parameter) pairs."""
    lines = [f"case {report.case_id}: {report.kind} on {', '.join(report.backends) or '-'}"
             + ("" if report.reproduced else "  (does NOT reproduce as recorded)")]
    if report.note:
        lines.append(f"note: {report.note}")
    if report.error:
        lines.append(f"error (normalized): {report.error}")
    what = {"inconsistency": "first layer with change rate over t1", "nan": "first layer where the non-finite "
            "patterns differ", "deviation": "layer deviating on its own input",
            "regression": "the layer whose two releases differ alone, on the older release's input",
            "precision": "first layer out of tolerance on the float64 reference's input (table: each layer's "
                         "error against the reference)"}.get(report.kind,
                                                                                    "first layer that fails alone")
    for i, rnd in enumerate(report.rounds):
        lines.append(f"\nround {i + 1}: {what} -> {rnd.layer or 'none'}")
        if rnd.table:
            lines.append(f"  {'layer':<22} {'api':<22} {'distance':>12} {'change rate':>14}")
            for row in rnd.table:
                mark = "  <-" if row.layer == rnd.layer else ""
                lines.append(f"  {row.layer:<22} {row.api:<22} {row.distance:>12.4g} {row.rate:>14.4g}{mark}")
        if rnd.layer and rnd.baseline:
            rate = f", one-layer rate {rnd.baseline_rate:.4g}" if np.isfinite(rnd.baseline_rate) else ""
            lines.append(f"  {rnd.layer} alone, original parameters: {rnd.baseline}{rate}")
        if trials:
            for t in rnd.trials:
                rate = f" rate {t.rate:.4g}" if np.isfinite(t.rate) else ""
                ctx = f" with {', '.join(f'{k}={v!r}' for k, v in t.context.items())}" if t.context else ""
                lines.append(f"    try {t.layer}.{t.param}: {t.old!r} -> {t.new!r}{ctx}: {t.verdict}{rate}"
                             + (f" ({t.detail})" if t.detail else ""))
        if rnd.candidates:
            lines.append(f"  candidates (top {min(top_k, len(rnd.candidates))} of {len(rnd.candidates)}; "
                         "evidence: share of values that remove it, default removes it, masking test):")
            for c in rnd.candidates[:top_k]:
                ev = c.evidence
                removing = ", ".join(repr(v) for v in c.removing[:4]) + (" ..." if len(c.removing) > 4 else "")
                parts = [f"share {len(c.removing)}/{len(c.removing) + len(c.failing)}"]
                if ev.default is not None:
                    parts.append(f"default {c.default!r} {'removes' if ev.default else 'keeps'} it")
                if c.contexts:
                    parts.append(f"masking {c.toggles}/{c.contexts}")
                lines.append(f"   {'*' if c.named else ' '} {c.param:<20} score {c.score:.2f}  "
                             f"({'; '.join(parts)}) {c.old!r} -> {removing} [{c.origin}]")
    lines.append("\nlocalized (layer, parameter): value -> fix (* = top-1)")
    if not report.sources:
        lines.append("  nothing")
    for k, s in enumerate(report.sources):
        lines.append(f"  {'*' if k == 0 else ' '} {s.layer} ({s.api}) {s.param}: {s.old!r} -> {s.new!r}  [{s.kind}]")
    if report.trigger:
        lines.append(f"\ntrigger: the input of {report.trigger.layer}: sanitizing "
                     f"{'; '.join(report.trigger.sanitized)} removes the failure")
    if report.repro:
        lines.append(f"\none-layer repro script: {report.repro}")
    if report.cradle:
        lines.append(f"\nCRADLE's rule (top quartile of change rates) would flag: {', '.join(report.cradle)}")
    return "\n".join(lines)
