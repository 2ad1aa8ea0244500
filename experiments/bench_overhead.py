"""Overhead of audee's test-case loop against the bare compiled forward, side by side.

For one spec and one input batch on every backend, it measures in the same run:

* audee: the wall time of ``Executor.run`` (dispatch to all workers, pickling across
  processes, oracles) for a spec already built, median over repeats;
* bare: inside each worker, the backend's compiled forward call alone (tf.function,
  jax.jit, a direct torch call, an onnxruntime session), median over repeats.

ratio = audee wall / sum of bare times (the backends run one after the other in the
bare reference; audee runs them in parallel processes).  audee's workers share the CPU
cores out among themselves (one thread each on 2 cores with 4 backends), so the bare
reference is given twice: in the same workers, and in workers left at each framework's
default threading ("bare sum, default threads").  Build/export time per new spec is
reported separately: it is paid once per spec, not per test case.

    python experiments/bench_overhead.py [--seed lenet5] [--batch 32] [--repeats 50]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from audee.backends.pool import Pool
from audee.backends.registry import DEFAULT_BACKENDS, parse_backends
from audee.cases.case import TestCase
from audee.engine.execute import Executor, seed_batch
from audee.mutation.seeds import load_seed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", default="lenet5")
    ap.add_argument("--backends", default=",".join(DEFAULT_BACKENDS))
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32, 100])
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()

    seed = load_seed(args.seed)
    refs = parse_backends(args.backends)
    default_bare = _bare_default_threads(seed, refs, args.batch, args.repeats)
    with tempfile.TemporaryDirectory() as tmp, Pool(refs, Path(tmp)) as pool:
        t = time.perf_counter()
        failed = pool.start()
        assert not failed, failed
        print(f"workers started in {time.perf_counter() - t:.1f} s (framework imports, in parallel)")
        ex = Executor(pool)
        t = time.perf_counter()
        builds = pool.build(seed.spec)
        print(f"first build of {args.seed}: {time.perf_counter() - t:.2f} s wall; per backend: " +
              ", ".join(f"{k} {v['build_s']:.2f} s" for k, v in builds.items()))
        print(f"\n{'batch':>5} {'audee wall ms':>14} {'bare sum ms':>12} {'bare max ms':>12} "
              f"{'ratio/sum':>10} {'ratio/max':>10} {'bare sum, default threads':>26} {'ratio':>6}"
              f"   bare per backend (ms)")
        for batch in args.batch:
            inputs, _ = seed_batch(seed.inputs, 0, batch)
            case = TestCase("bench", seed.spec, dict(seed.weights or {}), inputs)
            ex.complete_weights(case, seed.weight_seed)
            for _ in range(5):
                ex.run(case)  # warm up: compile for this batch size, weights in place
            walls = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                result = ex.run(case)
                walls.append(time.perf_counter() - t)
            assert not result.verdict.failed, result.verdict.to_json()
            bare = {label: statistics.median(pool.call(label, "time_forward", spec=seed.spec.to_json(),
                                                       key=seed.spec.key(), inputs=inputs, repeats=args.repeats))
                    for label in pool.labels}
            wall = statistics.median(walls)
            bsum, bmax = sum(bare.values()), max(bare.values())
            dsum = default_bare[batch]
            print(f"{batch:>5} {wall * 1e3:>14.2f} {bsum * 1e3:>12.2f} {bmax * 1e3:>12.2f} "
                  f"{wall / bsum:>10.2f} {wall / bmax:>10.2f} {dsum * 1e3:>26.2f} {wall / dsum:>6.2f}   " +
                  ", ".join(f"{k} {v * 1e3:.2f}" for k, v in bare.items()))


def _bare_default_threads(seed, refs, batches, repeats) -> dict[int, float]:
    """Sum over backends of the bare forward time, each framework at its default threading."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp, Pool(refs, Path(tmp), threads=0) as pool:
        assert not pool.start()
        ex = Executor(pool)
        for batch in batches:
            inputs, _ = seed_batch(seed.inputs, 0, batch)
            case = TestCase("bench", seed.spec, dict(seed.weights or {}), inputs)
            ex.complete_weights(case, seed.weight_seed)
            ex.run(case)
            out[batch] = sum(statistics.median(pool.call(label, "time_forward", spec=seed.spec.to_json(),
                                                         key=seed.spec.key(), inputs=inputs, repeats=repeats))
                             for label in pool.labels)
    return out


if __name__ == "__main__":
    main()
