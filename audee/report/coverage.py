"""What a run exercised: per layer API and per parameter value, test cases run and failed.

A test case exercises every layer of its model with the parameter values that layer was
built with, not only the ones a mutation changed: a Conv2D with ``padding='same'`` that
ran is coverage of ``(Conv2D, padding, "same")`` whichever operator produced it.  Each
results row carries these triples (:func:`exercised`, the ``exercised`` field); the
report aggregates them (:func:`coverage_table`, :func:`api_table`) and draws a heat-map
of APIs x parameters (:func:`heatmap`), beside the configured APIs nothing exercised.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from audee.oracle.exercised import API_ONLY, exercised  # noqa: F401 - re-exported: what a case exercised
from audee.store.atomic import write_via

def _triples(cases: pd.DataFrame) -> pd.DataFrame:
    rows = []
    if "exercised" not in cases.columns:
        return pd.DataFrame(columns=["api", "param", "value", "failed"])
    for ex, status in zip(cases["exercised"], cases.get("status", pd.Series(["pass"] * len(cases)))):
        if not isinstance(ex, list):
            continue
        for api, param, value in ex:
            rows.append((api, param, value, status == "fail"))
    return pd.DataFrame(rows, columns=["api", "param", "value", "failed"])


def coverage_table(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per (api, param, value) exercised: test cases run, and failing."""
    t = _triples(cases)
    t = t[t["param"] != API_ONLY]
    if t.empty:
        return pd.DataFrame(columns=["api", "param", "value", "cases", "failing"])
    g = t.groupby(["api", "param", "value"])["failed"].agg(cases="size", failing="sum").reset_index()
    g["failing"] = g["failing"].astype(int)
    return g.sort_values(["api", "param", "value"]).reset_index(drop=True)


def api_table(cases: pd.DataFrame, configured: Iterable[str] = ()) -> pd.DataFrame:
    """One row per API, configured or exercised: test cases that ran it, failing ones,
    parameters and distinct parameter values exercised (0 cases: never exercised)."""
    t = _triples(cases)
    apis = t[t["param"] == API_ONLY].groupby("api")["failed"].agg(cases="size", failing="sum")
    params = t[t["param"] != API_ONLY].groupby("api").agg(params=("param", "nunique"),
                                                          values=("value", "size"))
    distinct = (t[t["param"] != API_ONLY].drop_duplicates(["api", "param", "value"]).groupby("api").size()
                .rename("distinct_values"))
    out = pd.concat([apis, params, distinct], axis=1)
    for api in configured:
        if api not in out.index:
            out.loc[api] = 0
    out = out.fillna(0).astype(int).drop(columns=["values"], errors="ignore").reset_index()
    out = out.rename(columns={"index": "api"})
    return out.sort_values(["cases", "api"], ascending=[True, True]).reset_index(drop=True)[
        ["api", "cases", "failing", "params", "distinct_values"]]


def heatmap(cases: pd.DataFrame, path: Path, configured: Iterable[str] = ()) -> bool:
    """APIs (rows) x parameters (columns): distinct values exercised per cell, the
    configured APIs that never ran as empty rows.  False (nothing written) without data."""
    t = _triples(cases)
    t = t[t["param"] != API_ONLY]
    apis = sorted(set(t["api"]) | set(configured))
    if not apis:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    params = sorted(set(t["param"]))
    counts = t.drop_duplicates(["api", "param", "value"]).groupby(["api", "param"]).size()
    grid = np.zeros((len(apis), max(len(params), 1)))
    for (api, param), n in counts.items():
        grid[apis.index(api), params.index(param)] = n
    fig, ax = plt.subplots(figsize=(max(6, 0.28 * len(params) + 3), max(4, 0.2 * len(apis) + 1.5)))
    im = ax.imshow(np.where(grid > 0, grid, np.nan), aspect="auto", cmap="viridis")
    ax.set_yticks(range(len(apis)), apis, fontsize=6)
    ax.set_xticks(range(len(params)), params, fontsize=6, rotation=90)
    ax.set_title("distinct parameter values exercised (blank: none)", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    write_via(path, lambda f: fig.savefig(f, format="png", dpi=120))
    plt.close(fig)
    return True


def backend_api_tables(cases: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per backend, over API-level cases (rows with an ``api``): how many APIs it was given,
    how many it converted and ran in at least one case, and how many it never ran; and one
    row per (backend, API) never run, with the phase and the normalized error of its first
    failure (:func:`audee.triage.rootcause.template`) and that error's class when it is an explicit
    refusal (limitation) — what a converter or compiler covers, and why not the rest."""
    from audee.triage.rootcause import template
    from audee.triage.signature import explicit_refusal

    summary_cols = ["backend", "apis", "ran", "never_ran", "never_ran_limitation"]
    rest_cols = ["backend", "api", "cases", "phase", "error", "limitation"]
    if cases.empty or "api" not in cases.columns:
        return pd.DataFrame(columns=summary_cols), pd.DataFrame(columns=rest_cols)
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    for api, backends, errors in zip(cases["api"], cases["backends"], cases.get("errors", [None] * len(cases))):
        if not isinstance(api, str) or not isinstance(backends, dict):
            continue
        for label, status in backends.items():
            s = seen.setdefault((label, api), {"cases": 0, "ran": False, "phase": "", "error": None})
            s["cases"] += 1
            if status == "ok":
                s["ran"] = True
            elif s["error"] is None:
                s["phase"] = str(status).partition(":")[2] or str(status)
                s["error"] = (errors or {}).get(label, "") if isinstance(errors, dict) else ""
    rest = [{"backend": label, "api": api, "cases": s["cases"], "phase": s["phase"], "error": template(s["error"]),
             "limitation": explicit_refusal(s["error"])}
            for (label, api), s in sorted(seen.items()) if not s["ran"]]
    rest_df = pd.DataFrame(rest, columns=rest_cols)
    summary = []
    for label in sorted({label for label, _ in seen}):
        mine = {api: s for (b, api), s in seen.items() if b == label}
        never = [r for r in rest if r["backend"] == label]
        summary.append({"backend": label, "apis": len(mine), "ran": sum(s["ran"] for s in mine.values()),
                        "never_ran": len(never), "never_ran_limitation": sum(r["limitation"] for r in never)})
    return pd.DataFrame(summary, columns=summary_cols), rest_df


def skipped_tables(cases: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs the refusal memo left out (:mod:`audee.engine.refusals`, the rows' ``skipped``):
    per backend, the runs skipped and the (API, dtype policy) keys they were skipped for; and
    per unit and key, the runs skipped, the cases whose explicit refusals they follow and
    their words.  Where a converter's budget went instead of converting what it refuses."""
    summary_cols = ["backend", "skipped_runs", "keys"]
    key_cols = ["unit", "backend", "api", "dtype", "skipped_runs", "refused_in", "reason"]
    if cases.empty or "skipped" not in cases.columns:
        return pd.DataFrame(columns=summary_cols), pd.DataFrame(columns=key_cols)
    units = cases["unit"] if "unit" in cases.columns else pd.Series([""] * len(cases))
    keys: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for unit, api, dtype, skipped in zip(units, cases.get("api", [None] * len(cases)),
                                         cases.get("dtype", [None] * len(cases)), cases["skipped"]):
        if not isinstance(skipped, dict):
            continue
        for label, skip in skipped.items():
            k = (str(unit), str(label), str(api), str(dtype))
            cases = skip.get("cases") if isinstance(skip, dict) else None
            s = keys.setdefault(k, {"skipped_runs": 0,
                                    "refused_in": ", ".join(map(str, cases)) if isinstance(cases, list) else "-",
                                    "reason": skip.get("reason", "-") if isinstance(skip, dict) else "-"})
            s["skipped_runs"] += 1
    detail = pd.DataFrame([{"unit": u, "backend": b, "api": a, "dtype": d, **s}
                           for (u, b, a, d), s in sorted(keys.items())], columns=key_cols)
    summary = [{"backend": b, "skipped_runs": int(g["skipped_runs"].sum()), "keys": len(g)}
               for b, g in detail.groupby("backend")] if not detail.empty else []
    return pd.DataFrame(summary, columns=summary_cols), detail
