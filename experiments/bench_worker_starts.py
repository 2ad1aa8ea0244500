"""Pools opened one after another, with new worker processes and with kept ones, side by side.

A process that opens pool after pool on the same frameworks (the test suite: each test its own
pool) spends most of its time importing frameworks.  ``keep_idle_workers`` keeps a stopped
worker's process for the next pool, which renews it (``renew``: new backend objects, nothing
built) instead of importing again.  For each way, in the same run, it opens ``--pools`` pools
in sequence, each starting the backends and running one small CNN case on them, and prints the
wall time per pool and the ratio new / kept.  The first kept pool starts its processes as a
new one does; the others take them over.

    python experiments/bench_idle_workers.py [--backends tensorflow,torch,jax] [--pools 4]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from audee.backends.pool import Pool, keep_idle_workers
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.engine.execute import Executor
from audee.cases.spec import ModelSpec

SPEC = {"name": "bench", "inputs": [{"name": "image", "shape": [12, 12, 1], "range": [0, 1]}],
        "layers": [{"name": "conv", "api": "Conv2D", "params": {"filters": 4, "kernel_size": 3}, "inputs": ["image"]},
                   {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["conv"]},
                   {"name": "logits", "api": "Dense", "params": {"units": 5}, "inputs": ["flat"]}],
        "output": "logits", "logits": "logits"}


def one_pool(backends: str, logs: Path) -> tuple[float, np.ndarray]:
    """Seconds to start the pool, run one case on every backend and stop it; the first logits."""
    t = time.perf_counter()
    with Pool(parse_backends(backends), logs, timeout=300) as pool:
        failed = pool.start()
        assert not failed, failed
        ex = Executor(pool)
        case = TestCase("c", ModelSpec.from_json(SPEC), {},
                        {"image": np.random.default_rng(0).random((4, 12, 12, 1), dtype=np.float32)})
        ex.complete_weights(case, weight_seed=0)
        result = ex.run(case)
        assert all(o.ok for o in result.outcomes.values()), result.outcomes
    return time.perf_counter() - t, next(iter(result.outcomes.values())).logits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="tensorflow,torch,jax")
    ap.add_argument("--pools", type=int, default=4)
    args = ap.parse_args()
    times: dict[str, list[float]] = {}
    logits: dict[str, list[np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for way, ctx in (("new processes", nullcontext()), ("kept processes", keep_idle_workers(8))):
            with ctx:
                got = [one_pool(args.backends, Path(tmp) / f"{way[:4]}{i}") for i in range(args.pools)]
            times[way], logits[way] = [g[0] for g in got], [g[1] for g in got]
    for way, ts in times.items():
        print(f"{way:15} per pool: " + ", ".join(f"{t:.1f}" for t in ts) + f" s (median {statistics.median(ts):.1f} s)")
    same = all(np.array_equal(a, b) for a, b in zip(logits["new processes"], logits["kept processes"]))
    print(f"same logits both ways: {same}")
    new, kept = times["new processes"], times["kept processes"]
    print(f"ratio new / kept, pools after the first: {statistics.median(new[1:]) / statistics.median(kept[1:]):.1f}x; "
          f"all {args.pools}: {sum(new) / sum(kept):.1f}x")


if __name__ == "__main__":
    main()
