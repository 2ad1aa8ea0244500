"""Reach probe for the batch of zero rows: every configured API's valid cases, each run on its
batch and then on none of its rows, on every backend; a backend that refuses the empty batch or
returns another shape than (0,) + the full run's other dimensions is listed.

    python experiments/batch_empty_probe.py [--backends tensorflow,torch,jax,onnxruntime] [--rng 7]
        [--per-api 2] [--apis all|API,...] [--out experiments/results/batch_empty_probe.jsonl]

It measured the reach that made ``batch_empty`` a default rule (experiments/results/batch_empty.md).
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from audee.apis import load_api_configs
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.cases.spec import weights_key
from audee.engine.execute import Executor
from audee.levels.base import unbuildable
from audee.mutation.apilevel import cast_weights, generate_case
from audee.settings import DTYPE_WEIGHTS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="tensorflow,torch,jax,onnxruntime")
    ap.add_argument("--rng", type=int, default=7)
    ap.add_argument("--per-api", type=int, default=2)
    ap.add_argument("--apis", default="all", help="all, or a comma-separated list")
    ap.add_argument("--out", type=Path, default=Path("experiments/results/batch_empty_probe.jsonl"))
    args = ap.parse_args()
    apis = load_api_configs()
    pool = Pool(parse_backends(args.backends), Path(tempfile.mkdtemp()), timeout=120, threads=1)
    pool.start_or_fail()
    ex = Executor(pool, diagnose=False)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for api in sorted(apis) if args.apis == "all" else args.apis.split(","):
            for index in range(args.per_api):
                g = generate_case(api, apis, args.rng, index, invalid_prob=0.0, dtypes=DTYPE_WEIGHTS,
                                  validate=unbuildable(ex), max_redraws=5)
                case = TestCase(g.spec.name, g.spec, {}, g.inputs)
                ex.complete_weights(case, 1)
                case.weights = cast_weights(case.weights, g.meta["dtype"])
                wkey = weights_key(case.weights)
                full = ex.pool_run(case.spec, case.weights, wkey, case.inputs)
                ran = [b for b, r in full.items() if isinstance(r, dict)]
                if not ran:
                    continue
                empty = ex.pool_run(case.spec, case.weights, wkey, {k: v[:0] for k, v in case.inputs.items()},
                                    labels=ran)
                row = {"api": api, "index": index, "dtype": g.meta["dtype"]}
                for b in ran:
                    want = (0,) + tuple(np.shape(full[b]["logits"]))[1:]
                    got = empty.get(b)
                    row[b] = ("ok" if tuple(np.shape(got["logits"])) == want
                              else f"shape {tuple(np.shape(got['logits']))}, want {want}") if isinstance(got, dict) \
                        else f"refused: {str(getattr(got, 'message', got))[:300]}"
                out.write(json.dumps(row) + "\n")
                bad = {b: v for b, v in row.items() if b in ran and v != "ok"}
                if bad:
                    print(api, index, g.meta["dtype"], json.dumps(bad)[:400], flush=True)
    pool.close()


if __name__ == "__main__":
    main()
