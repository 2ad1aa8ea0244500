"""Write the merged report: Markdown and CSV tables shaped like the paper's, PNG plots,
and an index.md that links them.

Inconsistencies are counted after the paper's reduction (section 3.2), defined once in
:mod:`audee.report.dedup`.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from audee.report.dedup import unique_inconsistencies as unique_inconsistencies_of
from audee.report.merge import CampaignData

LEVEL_ORDER = ["NET", "IN", "WT", "IN-WT"]
TABLE2 = ["seed", "#M", "#Layer", "located", "L_Audee", "#L(75%)", "FP(75%)", "reproduced", "median_s", "errors"]


def unique_inconsistencies(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per unique inconsistency (paper criteria, :mod:`audee.report.dedup`)."""
    cols = ["seed", "pair", "level", "key", "case_id"]
    if cases.empty or "inconsistent_pairs" not in cases:
        return pd.DataFrame(columns=cols)
    rows = []
    for unit, group in cases.groupby("unit"):
        records = [{k: v for k, v in r.items() if not _missing(v)} for r in group.to_dict("records")]
        for u in unique_inconsistencies_of(str(unit), records, {}):
            rows.append({"seed": u["seed"], "pair": u["pair"].replace("|", " vs "), "level": u["level"],
                         "key": u["key"], "case_id": u["case_id"]})
    return pd.DataFrame(rows, columns=cols)


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def table1(cases: pd.DataFrame) -> pd.DataFrame:
    """Unique inconsistencies: seed x backend pair x NET/IN/WT/IN-WT (the paper's Table 1)."""
    u = unique_inconsistencies(cases)
    if u.empty:
        return pd.DataFrame(columns=["seed", "pair", *LEVEL_ORDER])
    t = u.pivot_table(index=["seed", "pair"], columns="level", values="key", aggfunc="count", fill_value=0)
    return t.reindex(columns=LEVEL_ORDER, fill_value=0).reset_index()


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
            layers = {p["layer"] for p in r["localized"]}
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
        rows.append({"api": top["api"], "param": top["param"], "pair": r["pair"].replace("|", " vs "),
                     "seed": r["seed"], "level": r["level"], "case": r["case_id"],
                     "fix": f"{top['old']!r} -> {top['new']!r}",
                     "also": [f"{p['api']}.{p['param']}" for p in found[1:]
                              if (p["api"], p["param"]) != (top["api"], top["param"])]})
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
    import numpy as np

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
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def figure3(data: CampaignData, path: Path) -> bool:
    """Best-so-far logits distance per generation of every inconsistency search (GA
    solid, random dashed), log scales: how the search amplifies the distance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    traces = [t for t in data.traces.values() if t.get("config", {}).get("fitness") == "inconsistency" and t["trace"]]
    if not traces:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.2))
    labelled = len(traces) <= 12
    for t in sorted(traces, key=lambda t: t["id"]):
        gens = np.array([g["generation"] for g in t["trace"]], dtype=float) + 1
        best = np.array([g["best"] if g["best"] is not None else np.nan for g in t["trace"]], dtype=float)
        best = np.fmax.accumulate(np.nan_to_num(best, nan=0.0, posinf=1e30))
        ga = t.get("config", {}).get("search", "ga") == "ga"
        ax.plot(gens, np.clip(best, 1e-12, 1e30), ls="-" if ga else "--", lw=1.2 if ga else 0.9,
                label=t["id"] if labelled else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("generation + 1")
    ax.set_ylabel("best logits distance so far")
    ax.set_title("Distance amplification over generations (GA solid, random dashed)")
    if labelled:
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _md(df: pd.DataFrame) -> str:
    if df.empty:
        return "_none_\n"
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines) + "\n"


def write_report(data: CampaignData, out: Path) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    unique = unique_inconsistencies(data.cases)
    sigs = signatures(data.localized)
    rates = top1_rates(data)
    sections = [("Table 1: unique inconsistencies (seed x backend pair x level)", "table1", table1(data.cases)),
                ("Test cases by outcome", "outcomes", crash_table(data.cases)),
                ("Table 2: localization of unique inconsistencies", "table2", table2(data.localized)),
                ("Unique inconsistencies by localization signature (layer API, parameter, pair)", "signatures", sigs),
                ("Top-1 change rates (Figure 4's data)", "top1", top1_table(rates)),
                ("Table 3: NaN search", "table3", table3(data.searches))]
    n_units = data.cases["unit"].nunique() if not data.cases.empty else 0
    index = ["# audee report", "",
             f"{len(data.cases)} test cases, {len(data.searches)} search runs, {n_units} units; "
             f"{len(unique)} unique inconsistencies (paper criteria), {len(data.localized)} localized, "
             f"{len(sigs)} unique localization signatures.", ""]
    for title, name, df in sections:
        df.to_csv(out / f"{name}.csv", index=False)
        (out / f"{name}.md").write_text(f"# {title}\n\n{_md(df)}")
        written += [out / f"{name}.csv", out / f"{name}.md"]
        index += [f"## {title}", "", _md(df), f"([Markdown]({name}.md), [CSV]({name}.csv))", ""]
    if figure3(data, out / "figure3.png"):
        written.append(out / "figure3.png")
        index += ["## Figure 3: amplification over generations", "", "![figure 3](figure3.png)", ""]
    if figure4(rates, out / "figure4.png"):
        written.append(out / "figure4.png")
        index += ["## Figure 4: top-1 change rate, inconsistent vs consistent", "", "![figure 4](figure4.png)", ""]
    (out / "index.md").write_text("\n".join(index))
    written.append(out / "index.md")
    return written
