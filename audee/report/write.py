"""Write the merged report: Markdown and CSV tables shaped like the paper's, PNG plots,
and an index.md that links them.

Inconsistencies are counted after the paper's reduction (section 3.2), defined once in
:mod:`audee.report.dedup`.
"""
from __future__ import annotations

import os
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from audee.apis import load_api_configs
from audee.core.bounded import utf8
from audee.core.markdown import cell as _cell
from audee.levels import source_name
from audee.records.localization import LocalizationRecord
from audee.records.rows import PlacedRow
from audee.report import coverage
from audee.report.dedup import Seen, unique_inconsistencies as unique_inconsistencies_of
from audee.report.merge import CampaignData
from audee.store.atomic import write_atomic, write_via
from audee.triage import Bug, RootCause, RootKey

LEVEL_ORDER = ["NET", "IN", "WT", "IN-WT"]
INDEX_ROWS = 30  # rows of a table shown in index.md; the table's own file has them all
TABLE2 = ["seed", "#M", "#Layer", "located", "L_Audee", "#L(75%)", "FP(75%)", "reproduced", "median_s", "errors"]


def unique_inconsistencies(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per unique inconsistency (paper criteria, :mod:`audee.report.dedup`)."""
    cols = ["seed", "pair", "level", "key", "case_id"]
    if cases.empty or "inconsistent_pairs" not in cases:
        return pd.DataFrame(columns=cols)
    rows = []
    for unit, group in cases.groupby("unit"):
        for u in unique_inconsistencies_of(str(unit), [_seen(r) for r in group.to_dict("records")]):
            rows.append({"seed": u["seed"], "pair": u["pair"].replace("|", " vs "), "level": u["level"],
                         "key": u["key"], "case_id": u["case_id"]})
    return pd.DataFrame(rows, columns=cols)


def _seen(r: dict[str, Any]) -> Seen:
    """A frame row as deduplication reads it: level and DNN as the merge worked them out
    from the typed row and its search (a frame without a ``dnn`` column holds network-level
    cases, each its own DNN)."""
    seed, level, dnn, case_file = r.get("seed"), r.get("level"), r.get("dnn"), r.get("case_file")
    return Seen(str(r["id"]), None if _missing(seed) else seed, "NET" if _missing(level) else str(level),
                str(r["id"] if _missing(dnn) else dnn), tuple(_list(r.get("inconsistent_pairs"))),
                case_file if isinstance(case_file, str) else None)


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _pairs_run(cases: pd.DataFrame, units: pd.DataFrame | None) -> list[tuple[str, str]]:
    """Every (seed, "a vs b") that was run: from the units' configs, else from the case
    rows' backends."""
    runs: list[tuple[str, str]] = []
    if units is not None and not units.empty:
        for _, u in units.iterrows():
            runs += [(str(u["seed"]), p.replace("|", " vs ")) for p in u["pairs"]]
    elif not cases.empty and "backends" in cases:
        for seed, backends in zip(cases["seed"], cases["backends"]):
            if isinstance(backends, dict):
                runs += [(str(seed), f"{a} vs {b}") for a, b in combinations(backends, 2)]
    seen: set[tuple[str, frozenset]] = set()
    out = []
    for seed, pair in runs:  # one orientation per pair: the first seen
        key = (seed, frozenset(pair.split(" vs ")))
        if key not in seen:
            seen.add(key)
            out.append((seed, pair))
    return out


def table1(cases: pd.DataFrame, units: pd.DataFrame | None = None) -> pd.DataFrame:
    """Unique inconsistencies: seed x backend pair x NET/IN/WT/IN-WT (the paper's Table 1).
    Every seed and pair that was run has a row, those with no inconsistency too."""
    u = unique_inconsistencies(cases)
    cols = ["seed", "pair", *LEVEL_ORDER]
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for seed, pair in _pairs_run(cases, units):
        counts[(seed, pair)] = dict.fromkeys(LEVEL_ORDER, 0)
    for _, r in u.iterrows():
        key = (str(r["seed"]), r["pair"])
        if key not in counts:  # the same pair in the other orientation, or a unit without config
            a, b = r["pair"].split(" vs ")
            key = (key[0], f"{b} vs {a}") if (key[0], f"{b} vs {a}") in counts else key
            counts.setdefault(key, dict.fromkeys(LEVEL_ORDER, 0))
        if r["level"] in counts[key]:
            counts[key][r["level"]] += 1
    rows = [{"seed": seed, "pair": pair, **c} for (seed, pair), c in sorted(counts.items())]
    return pd.DataFrame(rows, columns=cols)


def failing_cases(cases: pd.DataFrame, out: Path) -> pd.DataFrame:
    """Every failing test case with its case file (relative to ``out``, the report
    directory; a link in Markdown): what `audee reproduce` and `audee localize` take."""
    cols = ["unit", "case", "kinds", "backends", "case_file"]
    if cases.empty or "status" not in cases:
        return pd.DataFrame(columns=cols)
    rows = []
    for _, r in cases[cases["status"] == "fail"].sort_values(["unit", "id"]).iterrows():
        link = "-"
        if isinstance(r.get("case_path"), str):  # the case file as the merge found it (audee.store.RunStore)
            link = Path(os.path.relpath(r["case_path"], Path(out).resolve())).as_posix()
        rows.append({"unit": r["unit"], "case": r["id"], "kinds": ", ".join(_list(r.get("kinds"))),
                     "backends": _backends(r), "case_file": link})
    return pd.DataFrame(rows, columns=cols)


def backend_errors(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per backend that rejected or crashed on a test case, with its error message:
    consistent rejections (every backend refuses) have no case file, so the message is
    read here."""
    cols = ["unit", "case", "kinds", "backend", "status", "error"]
    if cases.empty or "backends" not in cases:
        return pd.DataFrame(columns=cols)
    rows = []
    for _, r in cases.sort_values(["unit", "id"]).iterrows():
        status = r["backends"] if isinstance(r["backends"], dict) else {}
        errors = r.get("errors") if isinstance(r.get("errors"), dict) else {}
        for backend, st in status.items():
            if st != "ok":
                rows.append({"unit": r["unit"], "case": r["id"], "kinds": ", ".join(_list(r.get("kinds"))),
                             "backend": backend, "status": st,
                             "error": errors.get(backend, "(not recorded by this audee version)")})
    return pd.DataFrame(rows, columns=cols)


def _list(v: object) -> list:
    return list(v) if isinstance(v, (list, tuple)) else []


def _backends(r: pd.Series) -> str:
    """The backends a failing case involves: the failing ones with their status, and the
    pairs that flipped labels."""
    status = r["backends"] if isinstance(r.get("backends"), dict) else {}
    parts = [f"{b} ({st})" for b, st in status.items() if st != "ok"]
    parts += [p.replace("|", " vs ") for p in _list(r.get("inconsistent_pairs"))]
    nan = r.get("nan") if isinstance(r.get("nan"), dict) else {}
    # {backend: first non-finite layer}; rows written before it read {layer: backend}
    nan_backends = set(nan) if set(nan) <= set(status) else set(nan.values())
    parts += sorted({f"{b} (NaN)" for b in nan_backends})
    return "; ".join(parts) or ", ".join(status)


def crash_table(cases: pd.DataFrame) -> pd.DataFrame:
    """Test cases per seed by outcome (crash kinds and NaN included)."""
    if cases.empty:
        return pd.DataFrame()
    kinds = ["hard_crash", "divergent_acceptance", "consistent_rejection", "nan", "inconsistency"]
    out = cases.groupby("seed").agg(test_cases=("id", "count"))
    for k in kinds:
        out[k] = cases.groupby("seed")["kinds"].apply(lambda s, k=k: int(sum(k in v for v in s)))
    return out.reset_index()


def table3(searches: pd.DataFrame) -> pd.DataFrame:
    """NaN search: runs, runs with a failure, median time to the first (the paper's Table 3)."""
    if searches.empty:
        return pd.DataFrame()
    s = searches[searches["fitness"] == "nan"]
    if s.empty:
        return pd.DataFrame()
    s = s.assign(found=s["first_failure_s"].notna())
    t = s.groupby(["seed", "search", "level"]).agg(runs=("id", "count"), with_nan=("found", "sum"),
                                                   median_first_s=("first_failure_s", "median"),
                                                   evaluations=("evaluations", "sum"))
    return t.reset_index()


def table2(localized: pd.DataFrame) -> pd.DataFrame:
    """Localization per seed (the paper's Table 2).

    #M: unique inconsistencies localized; #Layer: layers in the DNN; located: cases where
    audee named at least one (layer, parameter); L_Audee: mean (layer, parameter) pairs per
    case; #L(75%): mean layers CRADLE's top-quartile rule flags; FP(75%): share of those
    flags outside the layers audee localized, over the cases audee localized (the paper's
    comparison: no ground truth, audee's answer is the reference)."""
    if localized.empty:
        return pd.DataFrame(columns=TABLE2)
    failed = localized.get("error", pd.Series(index=localized.index, dtype=object)).notna()
    rows = []
    for seed, everything in localized.groupby("seed"):
        g = everything[~failed[everything.index]]
        if g.empty:
            rows.append({"seed": seed, "#M": 0, "errors": len(everything)})
            continue
        pairs = g["localized"].apply(lambda v: len(v) if isinstance(v, list) else 0)
        flags = g["cradle"].apply(lambda v: len(v) if isinstance(v, list) else 0)
        flagged = fp = 0
        for _, r in g[pairs > 0].iterrows():
            layers = {p.layer for p in r["localized"]}
            flagged += len(r["cradle"])
            fp += sum(layer not in layers for layer in r["cradle"])
        rows.append({"seed": seed, "#M": len(g), "#Layer": int(g["layers"].max()), "located": int((pairs > 0).sum()),
                     "L_Audee": round(float(pairs[pairs > 0].mean()), 2) if (pairs > 0).any() else 0.0,
                     "#L(75%)": round(float(flags.mean()), 2),
                     "FP(75%)": f"{100 * fp / flagged:.1f}%" if flagged else "-",
                     "reproduced": int(g["reproduced"].sum()), "median_s": round(float(g["seconds"].median()), 1),
                     "errors": len(everything) - len(g)})
    return pd.DataFrame(rows, columns=TABLE2)


def signatures(localized: pd.DataFrame) -> pd.DataFrame:
    """Inconsistencies deduplicated by localization signature: the top-1 (layer API,
    parameter) audee named, and the backend pair.  Many test cases, one likely root cause;
    ``also`` lists the other parameters localized in the same cases."""
    cols = ["api", "param", "pair", "cases", "seeds", "levels", "example_case", "example_fix", "also"]
    rows = []
    for _, r in localized.iterrows() if not localized.empty else []:
        found = r.get("localized") if isinstance(r.get("localized"), list) else []
        if not found:
            continue
        top = found[0]
        rows.append({"api": top.api, "param": top.param, "pair": r["pair"].replace("|", " vs "),
                     "seed": r["seed"], "level": r["level"], "case": r["case_id"],
                     "fix": f"{top.old!r} -> {top.new!r}",
                     "also": [f"{p.api}.{p.param}" for p in found[1:] if (p.api, p.param) != (top.api, top.param)]})
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    t = df.groupby(["api", "param", "pair"]).agg(
        cases=("case", "nunique"), seeds=("seed", lambda s: ", ".join(sorted(set(s)))),
        levels=("level", lambda s: ", ".join(sorted(set(s)))), example_case=("case", "first"),
        example_fix=("fix", "first"), also=("also", lambda s: ", ".join(sorted({a for v in s for a in v})) or "-"))
    return t.reset_index().sort_values(["cases", "api"], ascending=[False, True])[cols]


def top1_rates(data: CampaignData) -> pd.DataFrame:
    """Top-1 change rate (Top1-CR) per case: inconsistent (localized) and consistent (sampled)."""
    parts = []
    if not data.localized.empty and "top1_rate" in data.localized:
        parts.append(data.localized[["seed", "pair", "top1_rate"]].assign(category="inconsistent"))
    if not data.consistent.empty and "top1_rate" in data.consistent:
        parts.append(data.consistent[["seed", "pair", "top1_rate"]].assign(category="consistent"))
    if not parts:
        return pd.DataFrame(columns=["seed", "pair", "top1_rate", "category"])
    df = pd.concat(parts, ignore_index=True)
    df["top1_rate"] = pd.to_numeric(df["top1_rate"], errors="coerce")
    return df.dropna(subset=["top1_rate"])


def top1_table(rates: pd.DataFrame, t1: float = 1000.0) -> pd.DataFrame:
    if rates.empty:
        return pd.DataFrame()
    t = rates.groupby(["seed", "category"])["top1_rate"].agg(
        cases="count", median="median", min="min", max="max",
        above_t1=lambda s: f"{100 * (s > t1).mean():.0f}%")
    return t.reset_index()


def figure4(rates: pd.DataFrame, path: Path, t1: float = 1000.0) -> bool:
    """Box plots of Top1-CR per seed, inconsistent against consistent (the paper's Figure 4)."""
    if rates.empty:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeds = sorted(rates["seed"].unique())
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(seeds) + 1.5), 4))
    ax.set_yscale("log")
    big, floor = 1e12, 1e-9  # inf (a layer turned non-finite on one backend) and 0 (bit-identical) plotted here
    below = ax.get_xaxis_transform()
    colors = {"inconsistent": "tab:red", "consistent": "tab:blue"}
    handles = {}
    for i, seed in enumerate(seeds):
        for j, cat in enumerate(("inconsistent", "consistent")):
            v = rates[(rates["seed"] == seed) & (rates["category"] == cat)]["top1_rate"].to_numpy(float)
            if v.size == 0:
                continue
            v = np.clip(np.nan_to_num(v, posinf=big), floor, big)
            pos = i + (j - 0.5) * 0.35
            bp = ax.boxplot([v], positions=[pos], widths=0.3, patch_artist=True, showfliers=False)
            for box in bp["boxes"]:
                box.set_facecolor(colors[cat])
                box.set_alpha(0.6)
            handles[cat] = bp["boxes"][0]
            jitter = np.random.default_rng(i * 2 + j).uniform(-0.08, 0.08, v.size)
            ax.scatter(pos + jitter, v, s=6, color=colors[cat], alpha=0.8, zorder=3)
            ax.text(pos, 0.01, f"n={v.size}", ha="center", va="bottom", fontsize=6, transform=below)
    ax.axhline(t1, color="k", ls="--", lw=1)
    ax.text(-0.55, t1 * 1.5, f"t1 = {t1:g}", ha="left", fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(seeds)), seeds)
    ax.set_xlim(-0.6, len(seeds) - 0.4)
    ax.set_ylabel("top-1 change rate")
    ax.set_title("Top-1 change rate: inconsistent vs consistent cases")
    ax.legend(handles.values(), handles.keys(), fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    write_via(path, lambda f: fig.savefig(f, format="png", dpi=120))
    plt.close(fig)
    return True


FIG3_FLOOR, FIG3_CEIL = 1e-12, 1e30  # Figure 3's y range; values outside are drawn clipped and marked


def clip_series(best: np.ndarray) -> tuple[np.ndarray, np.ndarray, int | None, int | None]:
    """Figure 3's y values for one best-so-far series: values clipped into
    [FIG3_FLOOR, FIG3_CEIL], which points are drawn as measured (``solid``; the clipped
    stretch is dotted), and the index where a high clip starts (a suffix: best so far only
    grows) and where a low clip ends (a prefix), or None.  NaN (no value yet) stays NaN."""
    high = best >= FIG3_CEIL      # inf, and the 1e300 a search records for a non-finite distance
    low = best <= FIG3_FLOOR      # 0: bit-identical outputs
    y = np.where(np.isnan(best), np.nan, np.clip(best, FIG3_FLOOR, FIG3_CEIL))
    hi = int(np.flatnonzero(high)[0]) if high.any() else None
    lo = int(np.flatnonzero(low)[-1]) if low.any() else None
    solid = ~(high | low)
    if hi is not None:
        solid[hi] = True          # the measured line rises to the marker
    if lo is not None:
        solid[lo] = True          # and leaves the floor from it
    return y, solid, hi, lo


def figure3(data: CampaignData, path: Path) -> bool:
    """Best-so-far logits distance per generation of every inconsistency search, log
    scales: how the search amplifies the distance.  One panel per search level; colour
    is the seed, line style the search (GA solid, random dashed).  Values outside the
    plotted range are clipped and marked, not drawn as if measured (:func:`clip_series`):
    a non-finite distance (recorded as 1e300 by the search) or one above 1e30 sits on the
    top edge from a triangle on, an exact 0 (bit-identical outputs) on the bottom edge up
    to a down-triangle, both dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    traces = [t for t in data.traces.values() if t.trace.fitness == "inconsistency" and t.trace.trace]
    if not traces:
        return False
    level_name = {"input": "IN", "weight": "WT", "input-weight": "IN-WT"}
    levels = [lv for lv in LEVEL_ORDER if any(level_name.get(t.trace.level, "?") == lv for t in traces)]
    levels += sorted({level_name.get(t.trace.level, "?") for t in traces} - set(levels))
    seeds = sorted({str(t.seed) for t in traces})
    palette = plt.get_cmap("tab10" if len(seeds) <= 10 else "tab20")
    color = {seed: palette(i % palette.N) for i, seed in enumerate(seeds)}
    fig, axes = plt.subplots(1, len(levels), figsize=(3.2 + 3.6 * len(levels), 4.4), sharey=True, squeeze=False)
    clipped = {"high": 0, "low": 0}
    shown: list[float] = []
    for ax, level in zip(axes[0], levels):
        runs = [t for t in traces if level_name.get(t.trace.level, "?") == level]
        for t in sorted(runs, key=lambda t: (str(t.seed), t.trace.search, t.trace.id)):
            gens = np.array([g.generation for g in t.trace.trace], dtype=float) + 1
            best = np.array([np.nan if g.best is None else g.best for g in t.trace.trace], dtype=float)
            best = np.fmax.accumulate(best)  # best so far; a generation without a value keeps the last
            ga = t.trace.search == "ga"
            c = color[str(t.seed)]
            y, solid, hi, lo = clip_series(best)
            ax.plot(gens, np.where(solid, y, np.nan), ls="-" if ga else "--", lw=1.3 if ga else 1.0, color=c,
                    alpha=0.85)
            ax.plot(gens, np.where(solid, np.nan, y), ls=":", lw=1.0, color=c, alpha=0.85)  # clipped stretch
            for i, marker, where in ((hi, "^", "high"), (lo, "v", "low")):
                if i is not None:
                    clipped[where] += 1
                    ax.plot(gens[i], y[i], marker=marker, ms=7, color=c, mec="k", mew=0.6, ls="none", zorder=4)
            shown += [v for v in y[np.isfinite(y)]]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("generation + 1")
        ax.set_title(f"{level} level ({len(runs)} search run{'s' if len(runs) != 1 else ''})", fontsize=10)
    axes[0][0].set_ylabel("best logits distance so far")
    if shown:
        axes[0][0].set_ylim(min(shown) / 30, max(shown) * 30)
    for ax in axes[0]:
        for where, edge in (("high", FIG3_CEIL), ("low", FIG3_FLOOR)):
            if clipped[where]:
                ax.axhline(edge, color="0.6", lw=0.7, ls=":")
    handles = [Line2D([], [], color=color[s], lw=2, label=s) for s in seeds]
    handles += [Line2D([], [], color="k", ls="-", label="GA"), Line2D([], [], color="k", ls="--", label="random")]
    if clipped["high"]:
        handles.append(Line2D([], [], color="w", marker="^", mec="k", mfc="0.5", ms=7,
                              label=f"non-finite or > {FIG3_CEIL:.0e}:\nclipped to the top edge,\ndotted from here on"))
    if clipped["low"]:
        handles.append(Line2D([], [], color="w", marker="v", mec="k", mfc="0.5", ms=7,
                              label=f"0 or < {FIG3_FLOOR:.0e}:\nclipped to the bottom edge,\ndotted up to here"))
    axes[0][-1].legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="seed / search",
                       title_fontsize=7)
    fig.suptitle("Distance amplification over generations", fontsize=11)
    fig.tight_layout()
    write_via(path, lambda f: fig.savefig(f, format="png", dpi=120))
    plt.close(fig)
    return True


def _md(df: pd.DataFrame) -> str:
    if df.empty:
        return "_none_\n"
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else
                                       f"[case file]({v})" if k == "case_file" and v != "-" else
                                       f"[repro]({v})" if k == "repro" and v != "-" else
                                       f"[{v}]({v})" if k == "link" and v != "-" else _cell(v)
                                       for k, v in r.items()) + " |")
    return "\n".join(lines) + "\n"


BUG_COLS = ["class", "status", "known_id", "kind", "backends", "odd", "what", "phase", "error", "cases", "units",
            "first_case", "case_file", "repro", "report", "link", "known_where", "slug"]


def _relocalized(at: PlacedRow, localized: dict) -> PlacedRow:
    """A row whose inconsistencies were localized (the RQ2 stage): their signatures take the
    layer API and parameter from the localization (audee.triage.signature: localization first)."""
    from dataclasses import replace

    from audee.cases.case import Finding
    from audee.records.findings import InconsistencyDetail
    from audee.triage.signature import Signature, signatures_of

    docs = localized.get((at.unit, at.row.id))
    if not docs:
        return at
    sigs = []
    for d in at.row.signatures:
        sig = Signature.from_json(d)
        doc = docs.get("|".join(sig.backends)) if sig.kind == "inconsistency" else None
        if doc is not None and doc.localized:
            finding = Finding(sig.kind, list(sig.backends), InconsistencyDetail(pair="|".join(sig.backends)))
            sigs += [replace(x, odd=sig.odd, context=tuple(dict.fromkeys(sig.context + x.context))).to_json()
                     for x in signatures_of(finding, localization=doc)]
        else:
            sigs.append(d)
    return replace(at, row=at.row.model_copy(update={"signatures": sigs}))


def campaign_bugs(data: CampaignData, known: list | None = None) -> list[Bug]:
    """Unique bugs over every unit and shard (audee.triage.known.unique_bugs), signatures re-derived
    where the localize stage ran."""
    from audee.triage.known import load_known_issues, unique_bugs

    if not data.rows:
        return []
    localized: dict = {}
    for _, r in data.localized.iterrows() if not data.localized.empty else []:
        if isinstance(r.get("localized"), list):
            pair = "|".join(sorted(str(r["pair"]).split("|")))
            localized.setdefault((r["unit"], r["case_id"]), {})[pair] = LocalizationRecord(localized=r["localized"])
    rows = [_relocalized(at, localized) for at in data.rows if at.row.status == "fail"]
    return unique_bugs(rows, load_known_issues() if known is None else known)


def bug_table(bugs: list[Bug], out: Path, reports: dict[RootKey, Path] | None = None) -> pd.DataFrame:
    """One row per signature (audee.triage.signature), new first: its status (new, found before,
    known upstream, fixed upstream: audee.triage.known) and where it is known, kind, backends,
    API/params, cases behind it, the first case file and the repro script (links relative to
    ``out``)."""
    table = []
    for b in bugs:
        paths = {"case_file": b.case_file, "repro": b.repro, "report": (reports or {}).get(b.root)}
        rel = {k: Path(os.path.relpath(v, Path(out).resolve())).as_posix() if v else "-" for k, v in paths.items()}
        table.append({"class": b.klass, "status": b.status, "known_id": b.known_id or "-", "kind": b.kind,
                      "backends": ", ".join(b.backends), "odd": ", ".join(b.odd) or "-",
                      "what": b.what, "phase": b.phase or "-",
                      "error": b.error or "-", "cases": b.cases, "units": len(b.units),
                      "first_case": b.first_case, **rel, "link": b.link or "-", "known_where": b.known_where or "-",
                      "slug": b.slug})
    return pd.DataFrame(table, columns=BUG_COLS)


def phase_table(cases: pd.DataFrame) -> pd.DataFrame:
    """Per backend: test cases with phase timings and the mean seconds per case of each
    phase in its worker (:func:`audee.store.results.phase_summary`): where the time went."""
    from audee.backends.base import TIMED_PHASES
    from audee.store.results import PHASES_FIELD, phase_summary

    columns = ["backend", "cases", *TIMED_PHASES, "total"]
    if cases.empty or PHASES_FIELD not in cases:
        return pd.DataFrame(columns=columns)
    summary = phase_summary(v for v in cases[PHASES_FIELD] if isinstance(v, dict))
    return pd.DataFrame([{"backend": b, "cases": s["cases"], **s["mean_s"], "total": s["mean_total_s"]}
                         for b, s in summary.items()], columns=columns)


def rate_table(cases: pd.DataFrame) -> pd.DataFrame:
    """Per case level (``op``: one keras.ops call, ``api``: a small model around a layer
    API, ``network``: a seed or its variant): test cases, the seconds they added to their
    runs (the rows' ``seconds``) and cases per second, so one campaign compares the levels."""
    columns = ["level", "cases", "seconds", "cases_per_s"]
    if cases.empty or "seconds" not in cases:
        return pd.DataFrame(columns=columns)
    seed = cases["seed"].astype(str) if "seed" in cases else pd.Series([""] * len(cases))
    level = seed.map(lambda v: source_name({"seed": v}))  # the level that made the case (audee.levels)
    rows = []
    for name, group in cases.assign(level=level.values).groupby("level"):
        secs = float(pd.to_numeric(group["seconds"], errors="coerce").fillna(0).sum())
        rows.append({"level": name, "cases": len(group), "seconds": round(secs, 1),
                     "cases_per_s": round(len(group) / secs, 3) if secs else None})
    return pd.DataFrame(rows, columns=columns)


ROOT_COLS = ["class", "status", "alone", "known_id", "kind", "component", "op", "api", "odd", "silent", "backends", "error",
             "signatures", "cases", "first_case", "repro", "report", "known_where", "why"]


def root_table(roots: list[RootCause], out: Path, reports: dict[RootKey, Path]) -> pd.DataFrame:
    """Root causes (audee.triage.rootcause.root_causes), bugs first, new before the rest, each
    with its status and where it is known (the findings row and script, or the link);
    ``reports``: the upstream-ready report of each new bug (audee.report.bugreports)."""
    rows = []
    for g in roots:
        rel = {k: Path(os.path.relpath(v, Path(out).resolve())).as_posix() if v else "-"
               for k, v in (("repro", g.repro), ("report", reports.get(g.root)))}
        rows.append({"class": g.klass, "status": g.status, "alone": g.alone or "-", "known_id": g.known_id or "-",
                     "kind": g.kind,
                     "component": g.component or "-", "op": g.op or "-", "api": g.api or "-",
                     "odd": ", ".join(g.odd) or "-", "silent": g.silent or "-",
                     "backends": ", ".join(g.backends), "error": g.error or "-",
                     "signatures": g.signatures, "cases": g.cases, "first_case": g.first_case,
                     **rel, "known_where": g.known_where or "-", "why": g.class_reason})
    return pd.DataFrame(rows, columns=ROOT_COLS)


def class_line(roots: list[RootCause]) -> str:
    """Root causes per class, new and known: the count a maintainer reads first."""
    from audee.triage.rootcause import class_counts

    return "; ".join(f"{c['root_causes']} {k} ({c['new']} new)" for k, c in class_counts(roots).items())


def write_report(data: CampaignData, out: Path, known: list | None = None, recheck_new: bool = False,
                 python: str | None = None) -> list[Path]:
    """``known``: the known issues bugs are judged against (default: the shipped list);
    ``recheck_new``: run each new bug's script again alone first (:mod:`audee.report.alone`,
    with ``python``), so that only the ones that reproduce count and get a report."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    from audee.report.bugreports import write_bug_reports
    from audee.triage.rootcause import new_bugs_line, root_causes

    raw_bugs = campaign_bugs(data, known)
    raw_roots = root_causes(raw_bugs)
    if recheck_new:
        from audee.report.alone import recheck_new as run_alone

        raw_roots = run_alone(raw_roots, out, python)
    reports = write_bug_reports(raw_roots, out)
    written += list(reports.values())
    bugs = bug_table(raw_bugs, out, reports)
    roots = root_table(raw_roots, out, reports)
    unique = unique_inconsistencies(data.cases)
    sigs = signatures(data.localized)
    rates = top1_rates(data)
    failing = failing_cases(data.cases, out)
    errors = backend_errors(data.cases)
    configured = sorted(load_api_configs())
    api_runs, api_rest = coverage.backend_api_tables(data.cases)
    skipped, skipped_keys = coverage.skipped_tables(data.cases)
    sections = [("Root causes by class (bug, harness, limitation, undefined; new first; report: the "
                 "upstream-ready report of a new bug; docs/oracles.md)", "roots", roots),
                ("Bug signatures (new first; found before: a findings row; known upstream: reported; fixed "
                 "upstream: fixed after the installed version)", "bugs", bugs),
                ("Table 1: unique inconsistencies (seed x backend pair x level)", "table1",
                 table1(data.cases, data.units)),
                ("Test cases by outcome", "outcomes", crash_table(data.cases)),
                ("Failing test cases and their case files", "failing", failing),
                ("Backend errors (rejections and crashes) with their messages", "errors", errors),
                ("Table 2: localization of unique inconsistencies", "table2", table2(data.localized)),
                ("Unique inconsistencies by localization signature (layer API, parameter, pair)", "signatures", sigs),
                ("Top-1 change rates (Figure 4's data)", "top1", top1_table(rates)),
                ("Table 3: NaN search", "table3", table3(data.searches)),
                ("Coverage by API (configured APIs never exercised first)", "coverage_apis",
                 coverage.api_table(data.cases, configured)),
                ("Coverage by parameter value: test cases run and failing", "coverage_values",
                 coverage.coverage_table(data.cases)),
                ("APIs each backend converts and runs (API-level cases; limitation: an explicit refusal)",
                 "backend_apis", api_runs),
                ("APIs a backend never ran, with its first error (phase, normalized message)", "backend_apis_rest",
                 api_rest),
                ("Runs each backend skipped: it had refused the API and dtype policy with an explicit "
                 "'unsupported' error earlier in the run (refusal_memo, docs/backends.md)", "skipped", skipped),
                ("Skipped runs by API and dtype policy, with the cases that saw the refusal", "skipped_keys",
                 skipped_keys),
                ("Phase timings: mean seconds per test case in each backend's worker", "phases",
                 phase_table(data.cases)),
                ("Rate by case level (op: a keras.ops call; api: a model around a layer API; network: a seed "
                 "variant)", "rates", rate_table(data.cases))]
    n_units = data.cases["unit"].nunique() if not data.cases.empty else 0
    # the count a maintainer reads first leads roots.md and index.md
    leads = {"roots": f"**{new_bugs_line(raw_roots)}** (root causes of class bug; each new one has a report in "
                      f"bugs/)\n\nOver {data.coverage_line()}.\n\n"}
    index = ["# audee report", "", *leads["roots"].strip().split("\n"), "",
             f"{len(roots)} root causes ([list](roots.md)): {class_line(raw_roots)}; "
             f"{len(reports)} new bugs with an upstream-ready report (bugs/); "
             f"from {len(bugs)} bug signatures ([list](bugs.md)); "
             f"{len(data.cases)} test cases, {len(data.searches)} search runs, {n_units} units; "
             f"{len(failing)} failing test cases ([list with case files](failing.md)); "
             f"{len(unique)} unique inconsistencies (paper criteria), {len(data.localized)} localized, "
             f"{len(sigs)} unique localization signatures.", ""]
    for title, name, df in sections:
        write_atomic(out / f"{name}.csv", utf8(df.to_csv(index=False)))
        write_atomic(out / f"{name}.md", utf8(f"# {title}\n\n{leads.get(name, '')}{_md(df)}"))
        written += [out / f"{name}.csv", out / f"{name}.md"]
        shown = _md(df.head(INDEX_ROWS))
        if len(df) > INDEX_ROWS:
            shown += f"\n... and {len(df) - INDEX_ROWS} more rows in [{name}.md]({name}.md).\n"
        index += [f"## {title}", "", shown, f"([Markdown]({name}.md), [CSV]({name}.csv))", ""]
    if figure3(data, out / "figure3.png"):
        written.append(out / "figure3.png")
        index += ["## Figure 3: amplification over generations", "", "![figure 3](figure3.png)", "",
                  f"One panel per search level; colour: seed, solid: GA, dashed: random search. Distances "
                  f"outside [{FIG3_FLOOR:g}, {FIG3_CEIL:g}] are clipped to that bound, marked and dotted (a "
                  f"triangle where a non-finite or larger distance starts, a down-triangle where an exact 0 "
                  f"ends): they are not measured values.", ""]
    if coverage.heatmap(data.cases, out / "coverage.png", configured):
        written.append(out / "coverage.png")
        index += ["## Coverage heat-map: APIs x parameters", "", "![coverage](coverage.png)", "",
                  "Distinct values of each parameter exercised per API; a blank row is a configured API that "
                  "no test case ran.", ""]
    if figure4(rates, out / "figure4.png"):
        written.append(out / "figure4.png")
        index += ["## Figure 4: top-1 change rate, inconsistent vs consistent", "", "![figure 4](figure4.png)", ""]
    write_atomic(out / "index.md", utf8("\n".join(index)))
    written.append(out / "index.md")
    return written
