"""Write the merged report: Markdown and CSV tables shaped like the paper's, PNG plots,
and an index.md that links them.

Deduplication follows the paper (section 3.2): inconsistencies found with different
inputs on the same DNN and weights count once; different weights (weight-level search)
are different inconsistencies.  Keys: network level and input level, (seed, DNN, backend
pair); weight levels, (seed, DNN, test case).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from audee.report.merge import CampaignData

LEVEL_ORDER = ["NET", "IN", "WT", "IN-WT"]


def unique_inconsistencies(cases: pd.DataFrame) -> pd.DataFrame:
    if cases.empty or "inconsistent_pairs" not in cases:
        return pd.DataFrame(columns=["seed", "pair", "level", "key"])
    rows = []
    for _, r in cases.iterrows():
        for pair in r.get("inconsistent_pairs") or []:
            dnn = r.get("target") or (r["id"].rsplit("-", 2)[0] if r["level"] != "NET" else r["id"])
            dnn = str(r.get("search_id", "") or "").split("-ga-")[0].split("-random-")[0] or dnn
            weights = r["id"] if r["level"] in ("WT", "IN-WT") else ""
            rows.append({"seed": r["seed"], "pair": pair.replace("|", " vs "), "level": r["level"],
                         "key": (r["unit"], dnn, pair, weights)})
    df = pd.DataFrame(rows)
    return df.drop_duplicates("key") if not df.empty else df


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
    s = s.assign(found=s["first_failure_s"].notna(), seed=s["target"].str.split("-").str[0])
    t = s.groupby(["seed", "search", "level"]).agg(runs=("id", "count"), with_nan=("found", "sum"),
                                                   median_first_s=("first_failure_s", "median"),
                                                   evaluations=("evaluations", "sum"))
    return t.reset_index()


def figure3(data: CampaignData, path: Path) -> bool:
    """Best fitness per generation of every inconsistency search (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = [t for t in data.traces.values() if t.get("config", {}).get("fitness") == "inconsistency"]
    if not traces:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for t in traces:
        gens = [g["generation"] for g in t["trace"]]
        best = [max(g["best"], 1e-12) for g in t["trace"]]
        ax.plot(gens, best, label=t["id"] if len(traces) <= 8 else None, lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("generation")
    ax.set_ylabel("best logits distance")
    ax.set_title("Layer-distance amplification over generations")
    if len(traces) <= 8:
        ax.legend(fontsize=6)
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
    sections = [("Table 1: unique inconsistencies (seed x backend pair x level)", "table1", table1(data.cases)),
                ("Test cases by outcome", "outcomes", crash_table(data.cases)),
                ("Table 3: NaN search", "table3", table3(data.searches))]
    index = ["# audee report", "",
             f"{len(data.cases)} test cases, {len(data.searches)} search runs, "
             f"{data.cases['unit'].nunique() if not data.cases.empty else 0} units.", ""]
    for title, name, df in sections:
        df.to_csv(out / f"{name}.csv", index=False)
        (out / f"{name}.md").write_text(f"# {title}\n\n{_md(df)}")
        written += [out / f"{name}.csv", out / f"{name}.md"]
        index += [f"## {title}", "", _md(df), f"([Markdown]({name}.md), [CSV]({name}.csv))", ""]
    if figure3(data, out / "figure3.png"):
        written.append(out / "figure3.png")
        index += ["## Figure 3: amplification over generations", "", "![figure 3](figure3.png)", ""]
    (out / "index.md").write_text("\n".join(index))
    written.append(out / "index.md")
    return written
