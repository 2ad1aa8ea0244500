"""Worker starts three ways, side by side in one run: new processes, forks of a zygote, kept processes.

A worker's start is mostly its framework's import.  Two things avoid it: a zygote
(:mod:`audee.backends.zygote`, on by default for CPU workers) imports once per worker
command and forks each worker from there; ``keep_idle_workers`` keeps a stopped worker's
process for the next pool, which renews it.  Two measurements, each way in the same run:

* pools opened in sequence (``--pools``), each starting the backends, running one small CNN
  case on them and stopping: wall time per pool; the first pool of a way starts what the
  later ones reuse;
* restarts (``--restarts``): a started pool's workers killed (as a crash ends them) and
  started again, one after another: wall time per restart, new processes against forks.

It prints the times and the ratios new / forked and new / kept, and whether every way
computed the same logits.

    python experiments/bench_worker_starts.py [--backends tensorflow,torch,jax] [--pools 4] [--restarts 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Iterator

import numpy as np

from audee.backends.pool import Pool, keep_idle_workers
from audee.backends.registry import parse_backends
from audee.backends.zygote import ENABLE_ENV
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


@contextmanager
def forking(on: bool) -> Iterator[None]:
    """Zygotes on or off (``AUDEE_FORK_WORKERS``) for the workers started inside."""
    before = os.environ.get(ENABLE_ENV)
    os.environ[ENABLE_ENV] = "1" if on else "0"
    try:
        yield
    finally:
        os.environ.pop(ENABLE_ENV) if before is None else os.environ.__setitem__(ENABLE_ENV, before)


def restarts(backends: str, logs: Path, n: int) -> list[float]:
    """Seconds to start each worker again after killing it, ``n`` times per worker."""
    took = []
    with Pool(parse_backends(backends), logs, timeout=300) as pool:
        assert not pool.start()
        for _ in range(n):
            for w in pool.workers.values():
                w.proc.kill()
                w.proc.wait()
                t = time.perf_counter()
                assert w.ensure() is None
                took.append(time.perf_counter() - t)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="tensorflow,torch,jax")
    ap.add_argument("--pools", type=int, default=4)
    ap.add_argument("--restarts", type=int, default=3)
    args = ap.parse_args()
    times: dict[str, list[float]] = {}
    logits: dict[str, list[np.ndarray]] = {}
    ways = {"new processes": (False, nullcontext), "forked processes": (True, nullcontext),
            "kept processes": (False, lambda: keep_idle_workers(8))}
    with tempfile.TemporaryDirectory() as tmp:
        for way, (fork, ctx) in ways.items():
            with forking(fork), ctx():
                got = [one_pool(args.backends, Path(tmp) / f"{way[:4]}{i}") for i in range(args.pools)]
            times[way], logits[way] = [g[0] for g in got], [g[1] for g in got]
        again = {}
        for way, fork in (("new processes", False), ("forked processes", True)):
            with forking(fork):
                again[way] = restarts(args.backends, Path(tmp) / f"restart-{way[:4]}", args.restarts)
    for way, ts in times.items():
        print(f"{way:17} per pool: " + ", ".join(f"{t:.1f}" for t in ts) + f" s (median {statistics.median(ts):.1f} s)")
    for way, ts in again.items():
        print(f"{way:17} per restart: median {statistics.median(ts):.2f} s (of {len(ts)})")
    same = all(np.array_equal(a, b) for w in times for a, b in zip(logits["new processes"], logits[w]))
    print(f"same logits every way: {same}")
    new = times["new processes"]
    for way in ("forked processes", "kept processes"):
        print(f"ratio new / {way.split()[0]}, pools after the first: "
              f"{statistics.median(new[1:]) / statistics.median(times[way][1:]):.1f}x; "
              f"all {args.pools}: {sum(new) / sum(times[way]):.1f}x")
    print(f"ratio new / forked per restart: "
          f"{statistics.median(again['new processes']) / statistics.median(again['forked processes']):.1f}x")


if __name__ == "__main__":
    main()
