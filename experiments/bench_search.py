"""Search benchmarks, each measured side by side in one run (issue: search).

(a) overhead: wall time of a GA generation against the bare compiled forward time of the
    same batches on the same backends (the n individuals a generation evaluates, its
    parents' fitness being known: input level one batch of n, weight level n batches of
    one), LeNet-5 on tensorflow, torch, jax, onnxruntime(-fed); measured in blocks, each
    a search between two measurements of the bare forwards, so that drift in the
    machine's speed cancels; with each process's CPU a generation (every worker, this
    parent) against the CPU of its bare forwards, and the least wall time a generation
    can take on the task's CPUs (all processes' CPU over the number of CPUs);
(b) GA against random search on equal budgets: failures found and time to first failure,
    on LeNet-5 and an RNN seed, over several rng seeds, for the NaN fitness (TensorFlow)
    and the inconsistency fitness (TensorFlow vs PyTorch);
(c) NaN search on ResNet-20 and MobileNet-V2 variants: share of variants with a NaN and
    time to the first one (the paper's Table 3 setting at CPU budgets).

    python experiments/bench_search.py --part a b c [--generations 12 --blocks 9] [--budget 20] [--rngs 0 1 2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from proc_cpu import cpu_seconds  # experiments/ is on the path when run as a script

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.core.cpus import task_cpus
from audee.engine.execute import Executor
from audee.fuzz import FuzzConfig, fuzz
from audee.search.engine import Search, SearchConfig
from audee.search.runner import SearchPlan
from audee.mutation.seeds import load_seed


def part_a(generations: int, blocks: int) -> None:
    print("\n(a) GA generation wall time vs bare compiled forward of the same batches (LeNet-5)")
    print(f"    {blocks} blocks, each a fresh search of {generations} generations between two measurements of "
          "the bare forwards of the batches its generations evaluate (the machine's speed drifts: each block is "
          "its own comparison)")
    seed = load_seed("lenet5")
    for level, backends in (("input", "tensorflow,torch,jax,onnxruntime"),
                            ("weight", "tensorflow,torch,jax,onnxruntime-fed")):
        refs = parse_backends(backends)
        # a process per backend (share=False): the tallies are per backend, and a hosted pair shares one
        with tempfile.TemporaryDirectory() as tmp, Pool(refs, Path(tmp), share=False) as pool:
            assert not pool.start()
            pids = {label: pool.workers[label].proc.pid for label in pool.labels} | {"parent": os.getpid()}
            ex = Executor(pool)
            case = TestCase("bench", seed.spec, dict(seed.weights or {}), {k: v[:1] for k, v in seed.inputs.items()})
            ex.complete_weights(case, seed.weight_seed)
            cfg = SearchConfig(level=level, fitness="inconsistency", population=20, parents=6, max_iter=generations,
                               budget_s=1e9, input_scale=0.01, weight_scale=0.01, rng=0)
            Search(ex, case, SearchConfig(**{**cfg.__dict__, "max_iter": 3}), pool.labels,
                   lambda r: r.case.id, "warm").run()  # compile for these batch sizes
            rows = []
            evaluated = cfg.population - cfg.parents  # what a generation after the first evaluates
            cpu = _CpuTally(pids)
            for block in range(blocks):
                before = _bare_forward(pool, case, level, evaluated, cpu)
                cpu.start()
                out = Search(ex, case, SearchConfig(**{**cfg.__dict__, "rng": block}), pool.labels,
                             lambda r: r.case.id, "bench").run()
                cpu.stop(sum(t["evaluated"] for t in out.trace))
                after = _bare_forward(pool, case, level, evaluated, cpu)
                steps = np.diff([t["elapsed_s"] for t in out.trace])  # generations 2.. (the first evaluates all)
                assert statistics.median(t["evaluated"] for t in out.trace[1:]) == evaluated
                bare = {b: (before[b] + after[b]) / 2 for b in before}  # bracketing the search: drift cancels
                rows.append({"generation_s": float(statistics.median(steps)), "bare": bare,
                             "evaluated": evaluated, "evals_per_s": out.evals_per_s})
            ratios = [r["generation_s"] / sum(r["bare"].values()) for r in rows]
            mid = rows[int(np.argsort(ratios)[len(ratios) // 2])]
            print(f"  {level:<6} level, {backends}, {mid['evaluated']:.0f} new individuals a generation: ratio to "
                  f"the bare forward sum, median {statistics.median(ratios):.2f} (blocks: "
                  + ", ".join(f"{r:.2f}" for r in ratios) + f"); median block: generation "
                  f"{mid['generation_s'] * 1e3:.1f} ms, bare sum {sum(mid['bare'].values()) * 1e3:.1f} ms ("
                  + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in mid["bare"].items())
                  + f"), {mid['evals_per_s']:.0f} evaluations/s")
            print("         " + cpu.summary(evaluated, statistics.median(r["generation_s"] for r in rows)))


class _CpuTally:
    """CPU seconds of each process of the pool (workers and this parent, every thread)
    over all blocks' searches, against the CPU of the bare forwards: where a generation's
    wall time goes beyond the forwards, and the least wall time the cores allow
    (``experiments/proc_cpu.py``: clock ticks, so summed over every block)."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids
        self.search = {label: 0.0 for label in pids}
        self.individuals = 0
        self.bare = {label: 0.0 for label in pids if label != "parent"}
        self.bare_individuals = {label: 0 for label in self.bare}
        self._at: dict[str, float] = {}

    def start(self) -> None:
        self._at = {label: cpu_seconds(pid) for label, pid in self.pids.items()}

    def stop(self, individuals: int) -> None:
        for label, pid in self.pids.items():
            self.search[label] += cpu_seconds(pid) - self._at[label]
        self.individuals += individuals

    def bare_call(self, label: str, individuals: int, call: Callable[[], Any]) -> Any:
        at = cpu_seconds(self.pids[label])
        value = call()
        self.bare[label] += cpu_seconds(self.pids[label]) - at
        self.bare_individuals[label] += individuals
        return value

    def summary(self, per: int, generation_s: float) -> str:
        """CPU per generation of ``per`` individuals, each worker against its bare forwards."""
        gen = {label: s * per / max(self.individuals, 1) for label, s in self.search.items()}
        bare = {label: s * per / max(self.bare_individuals[label], 1) for label, s in self.bare.items()}
        total, cpus = sum(gen.values()), task_cpus()
        return ("CPU ms a generation (bare forwards'): "
                + ", ".join(f"{label} {gen[label] * 1e3:.1f} ({bare[label] * 1e3:.1f})" for label in bare)
                + f", parent {gen['parent'] * 1e3:.1f}; total {total * 1e3:.1f} against {sum(bare.values()) * 1e3:.1f}"
                f" bare: on {cpus} CPUs a generation takes at least {total / cpus * 1e3:.1f} ms "
                f"(busy {total / (cpus * generation_s):.0%} of the median generation)")


def _bare_forward(pool: Pool, case: TestCase, level: str, n: int, cpu: _CpuTally) -> dict[str, float]:
    """Per backend: seconds of the bare compiled forward of what a generation of ``n`` new
    individuals runs (input level: one batch of n; weight levels: n batches of one)."""
    spec, key = case.spec.to_json(), case.spec.key()
    if level == "input":
        x = {k: np.repeat(v, n, axis=0) for k, v in case.inputs.items()}
        return {b: statistics.median(cpu.bare_call(b, n * 20, lambda: pool.call(
                    b, "time_forward", spec=spec, key=key, inputs=x, repeats=20)))
                for b in pool.labels}
    return {b: n * statistics.median(cpu.bare_call(b, 50, lambda: pool.call(
                b, "time_forward", spec=spec, key=key, inputs=case.inputs, repeats=50)))
            for b in pool.labels}


def _searches(seed_name: str, backends: str, plan: SearchPlan, variants: int, rng: int, batch: int = 8) -> list[Any]:
    seed = load_seed(seed_name)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = FuzzConfig(parse_backends(backends), Path(tmp), variants=variants, rng=rng, batch=batch)
        stats = fuzz(seed, seed.inputs, cfg, plan=plan)
        return stats.searches


def part_b(budget: float, rngs: list[int], seeds: list[str], level: str) -> None:
    """GA vs random with the same noise and budget, for both fitnesses."""
    settings = (("nan", "tensorflow", 0.5), ("inconsistency", "tensorflow,torch", 0.2))
    for fitness, backends, rel in settings:
        print(f"\n(b) GA vs random search, {level} level, {fitness} fitness on {backends}, budget {budget:.0f} s each")
        print(f"  {'seed':<10} {'rng':>3} {'search':<7} {'failures':>8} {'first failure s':>16} {'evals':>7} {'best':>10}")
        for seed_name in seeds:
            agg: dict[str, list] = {"ga": [], "random": []}
            for rng in rngs:
                cfg = SearchConfig(level=level, fitness=fitness, budget_s=budget, max_iter=10**6, rng=rng,
                                   relative_scale=rel)
                for r in _searches(seed_name, backends, SearchPlan(cfg, ["ga", "random"], 1, rng), 0, rng):
                    first = r.first_failure_s
                    agg[r.search].append(r)
                    print(f"  {seed_name:<10} {rng:>3} {r.search:<7} {len(r.failures):>8} "
                          f"{first if first is None else round(first, 2)!s:>16} {r.evaluations:>7} "
                          f"{r.best_fitness:>10.3g}")
            for kind, rows in agg.items():
                firsts = [r.first_failure_s for r in rows if r.first_failure_s is not None]
                best = statistics.median(r.best_fitness for r in rows)
                print(f"  {seed_name:<10} all {kind:<7} failures {sum(len(r.failures) for r in rows)}, runs with a "
                      f"failure {len(firsts)}/{len(rows)}, median first "
                      f"{round(statistics.median(firsts), 2) if firsts else None} s, median best fitness {best:.3g}")


def part_c(budget: float, variants: int) -> None:
    print(f"\n(c) NaN search (GA, input level, max-min fitness on tensorflow) on {variants} network variants, "
          f"budget {budget:.0f} s each")
    for seed_name in ("resnet20", "mobilenetv2"):
        cfg = SearchConfig(level="input", fitness="nan", budget_s=budget, max_iter=10**6, stop_at_first=True,
                           relative_scale=0.5, population=10, parents=3, rng=0)
        t = time.perf_counter()
        rows = _searches(seed_name, "tensorflow", SearchPlan(cfg, ["ga"], variants), variants, 0, batch=4)
        firsts = [r.first_failure_s for r in rows if r.first_failure_s is not None]
        print(f"  {seed_name:<12} variants searched {len(rows)}, with NaN {len(firsts)} "
              f"({100 * len(firsts) / max(len(rows), 1):.0f}%), time to first NaN: median "
              f"{statistics.median(firsts) if firsts else float('nan'):.2f} s, min "
              f"{min(firsts) if firsts else float('nan'):.2f} s; wall {time.perf_counter() - t:.0f} s")
        print("   " + json.dumps([{"target": r.target, "generations": r.generations, "evaluations": r.evaluations,
                                    "first_failure_s": r.first_failure_s} for r in rows]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", nargs="+", default=["a", "b", "c"], choices=["a", "b", "c"])
    ap.add_argument("--generations", type=int, default=12, help="(a) generations per block")
    ap.add_argument("--blocks", type=int, default=9, help="(a) searches, each between two bare measurements")
    ap.add_argument("--budget", type=float, default=20.0)
    ap.add_argument("--rngs", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--seeds", nargs="+", default=["lenet5", "lstm"])
    ap.add_argument("--level", default="input")
    ap.add_argument("--nan-variants", type=int, default=5)
    args = ap.parse_args()
    if "a" in args.part:
        part_a(args.generations, args.blocks)
    if "b" in args.part:
        part_b(args.budget, args.rngs, args.seeds, args.level)
    if "c" in args.part:
        part_c(args.budget, args.nan_variants)


if __name__ == "__main__":
    main()
