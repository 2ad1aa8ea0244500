"""How often each mutation operator's first draw cannot be built (the redraw rate).

    python -m audee.mutation.measure --seeds lenet5,lstm --variants 20 --backends jax

For every seed, operator and variant index, the variant's first draw (valid values only:
``invalid_prob`` 0, no ``validate``) is built on every backend.  A draw that no backend
builds is one that ``mutate_spec`` would redraw through ``validate``; one that only some
backends build is counted apart (a divergent acceptance at build time, a finding).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from audee.apis import load_api_configs
from audee.mutation.network import mutate_spec
from audee.settings import OPERATORS


def measure(seeds: list[str], operators: list[str], variants: int, backends: str, rng: int = 0,
            log_dir: Path | None = None) -> dict[str, Any]:
    """Counts per (seed, operator): variants, built by none, built by some, and the first
    error of each unbuildable draw."""
    from audee.backends.pool import Pool, WorkerFailure
    from audee.backends.registry import parse_backends
    from audee.mutation.seeds import load_seed

    apis = load_api_configs()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, Pool(parse_backends(backends), log_dir or Path(tmp)) as pool:
        pool.start_or_fail()
        for name in seeds:
            seed = load_seed(name)
            for op in operators:
                row = {"variants": 0, "none": 0, "some": 0, "errors": []}
                for i in range(variants):
                    v = mutate_spec(seed.spec, apis, np.random.default_rng([rng, i]), invalid_prob=0.0,
                                    operators={op: 1.0}, index=i)
                    built = pool.build(v.spec)
                    bad = [g for g in built.values() if isinstance(g, WorkerFailure)]
                    row["variants"] += 1
                    if len(bad) == len(built):
                        row["none"] += 1
                        row["errors"].append(f"v{i} {v.mutations[0].op} {v.mutations[0].new}: "
                                             f"{bad[0].message.strip().splitlines()[-1][:160]}")
                    elif bad:
                        row["some"] += 1
                out[f"{name}/{op}"] = row
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="all", help="comma-separated seed names, or all")
    ap.add_argument("--operators", default=",".join(OPERATORS))
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--backends", default="tensorflow,torch,jax,onnxruntime")
    ap.add_argument("--rng", type=int, default=0)
    args = ap.parse_args(argv)
    from audee.mutation.seeds import list_seeds

    seeds = list_seeds() if args.seeds == "all" else args.seeds.split(",")
    t0 = time.perf_counter()
    res = measure(seeds, args.operators.split(","), args.variants, args.backends, args.rng)
    totals: dict[str, list[int]] = {}
    for key, row in res.items():
        op = key.split("/")[1]
        t = totals.setdefault(op, [0, 0, 0])
        t[0] += row["variants"]
        t[1] += row["none"]
        t[2] += row["some"]
        print(f"{key:28s} {row['variants']:4d} variants, {row['none']:3d} built by no backend, "
              f"{row['some']:3d} by some")
        for e in row["errors"]:
            print(f"    {e}")
    for op, (n, none, some) in totals.items():
        print(f"TOTAL {op:12s} {n:4d} variants: redraw rate {none / max(n, 1):.1%} (no backend builds), "
              f"{some / max(n, 1):.1%} built by some backends only")
    print(f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    print(json.dumps({op: {"variants": n, "none": none, "some": some} for op, (n, none, some) in totals.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
