"""NaN search with the default search settings vs a relative Cauchy scale (issue 10, part 6).

For every seed: `audee fuzz`-style network variants (valid: --invalid-prob 0) on
TensorFlow, then a GA search with the NaN fitness at the input-weight level on the first
variants that passed, stopping at the first NaN (``audee fuzz --level input-weight
--fitness nan --backends tensorflow --budget B --stop-at-first``), once per ``--relative-scale``
value (0: the default before issue 10; 0.5: the NaN fitness's default since).  Reports the share of variants with a
NaN within the budget and the time to the first.

The paper's Table 3 setting is 5 minutes per search; on a shared 2-core machine the
default here is 60 s and 2 variants per seed (say so when quoting).

    python experiments/nan_defaults.py [--budget 60] [--variants 2] [--scales 0.5 0] \\
        [--work /tmp/nan_defaults] [--out experiments/results/nan_defaults]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from audee.backends.registry import parse_backends
from audee.fuzz import FuzzConfig, fuzz
from audee.search.engine import SearchConfig
from audee.search.runner import SearchPlan
from audee.mutation.seeds import list_seeds, load_seed


def run(seeds: list[str], scales: list[str], budget: float, variants: int, work: Path, log: Path) -> list[dict]:
    rows = []
    done = set()
    if log.exists():
        for line in log.read_text().splitlines():
            r = json.loads(line)
            rows.append(r)
            done.add((r["setting"], r["seed"]))
    for scale in scales:
        for name in seeds:
            if (scale, name) in done:
                continue
            seed = load_seed(name)
            given = {} if scale == "default" else {"relative_scale": float(scale)}
            cfg = SearchConfig(level="input-weight", fitness="nan", budget_s=budget, stop_at_first=True, rng=0,
                               **given)
            out = work / scale / name
            # a few extra variants: those with a failure already are not search targets
            fcfg = FuzzConfig(parse_backends("tensorflow"), out, variants=variants + 3, rng=0, invalid_prob=0.0,
                              batch=8)
            t = time.perf_counter()
            stats = fuzz(seed, seed.inputs, fcfg, plan=SearchPlan(cfg, ["ga"], variants))
            for s in stats.searches:
                r = {"setting": scale, "seed": name, "target": s.target, "first_nan_s": s.first_failure_s,
                     "generations": s.generations, "evaluations": s.evaluations, "best_fitness": s.best_fitness}
                rows.append(r)
                with log.open("a") as fh:
                    fh.write(json.dumps(r) + "\n")
                print(json.dumps(r), flush=True)
            print(f"== {scale} {name}: {len(stats.searches)} searches, {time.perf_counter() - t:.0f} s", flush=True)
    return rows


def summary(rows: list[dict], budget: float, variants: int, command: str) -> str:
    lines = ["# NaN search: default settings vs relative Cauchy scale", "", f"Command: `{command}`", "",
             f"GA, input-weight level, NaN fitness on TensorFlow, stop at the first NaN, {budget:.0f} s per search, "
             f"{variants} valid network variants per seed ("
             + ("the paper's Table 3 setting: 5 minutes per search, on a 2-core machine)." if budget >= 300 else
                "the paper's Table 3 uses 5 minutes per search: this is a reduced budget on a shared 2-core "
                "machine).") + " `default`: the search defaults of `audee fuzz --fitness nan` (relative scale "
             "0.5 since issue 10).", "",
             "| setting | seed | variants with NaN | times to first NaN (s) |", "|---|---|---:|---|"]
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["setting"], []).append(r)
    for setting, rs in by.items():
        for name in dict.fromkeys(r["seed"] for r in rs):
            mine = [r for r in rs if r["seed"] == name]
            hits = [r["first_nan_s"] for r in mine if r["first_nan_s"] is not None]
            lines.append(f"| {setting} | {name} | {len(hits)}/{len(mine)} | "
                         f"{', '.join(f'{h:.2f}' for h in hits) or '-'} |")
    lines += ["", "| setting | variants with NaN | share | median time to first (s) | max (s) |",
              "|---|---:|---:|---:|---:|"]
    for setting, rs in by.items():
        hits = [r["first_nan_s"] for r in rs if r["first_nan_s"] is not None]
        lines.append(f"| {setting} | {len(hits)}/{len(rs)} | {100 * len(hits) / max(len(rs), 1):.0f}% | "
                     f"{statistics.median(hits) if hits else float('nan'):.2f} | "
                     f"{max(hits) if hits else float('nan'):.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="+", default=None, help="default: all seven")
    ap.add_argument("--scales", nargs="+", default=["0.5", "0"],
                    help="relative_scale values, or 'default' (whatever SearchSettings gives; 0 was the "
                         "default for every fitness before issue 10)")
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--variants", type=int, default=2)
    ap.add_argument("--work", type=Path, default=Path("/tmp/nan_defaults"))
    ap.add_argument("--out", type=Path, default=Path("experiments/results/nan_defaults"))
    args = ap.parse_args()
    seeds = args.seeds or list_seeds()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = run(seeds, args.scales, args.budget, args.variants, args.work, args.work / "searches.jsonl")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    text = summary(rows, args.budget, args.variants, "python " + " ".join(sys.argv))
    args.out.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
