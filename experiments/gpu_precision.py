"""CPU against GPU on the seven unmutated seeds, in full float32 and in TF32 mode (issue 14).

Every seed runs once, unmutated, on every backend named (default: torch and jax on the CPU,
``torch@cuda`` and ``jax@cuda`` in full precision, ``torch@cuda:tf32`` and
``jax@cuda:tf32``), through audee's own Executor, so the verdicts are exactly what
``audee fuzz`` would report.  For every backend pair: the deviation oracle's score on the
logits with the pair's own tolerances (float32 for full-precision pairs, tf32 where either
backend computes in TF32 mode), the score the same values would get under float32's
tolerances, max |a - b|, max |a - b| / s, the paper's Definition 4 distance, label flips
and ties, and every finding.

    python experiments/gpu_precision.py [--backends ...] [--batch 100] [--seeds ...] \\
        [--out experiments/results/gpu_precision]

Needs a CUDA machine (the ``device`` tool of this workplace, or a SLURM GPU node).
Writes ``OUT.json`` and ``OUT.md``.  A fault check: ``--backends
torch@cuda:tf32,tests.plugins:ScaledFc2Torch@cuda:tf32 --seeds lenet5`` (one layer 5% off,
beyond the TF32 tolerances) must be flagged ``deviation`` at that layer.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.engine.execute import Executor, seed_batch
from audee.oracle.deviation import FULL, compare, pair_compute
from audee.oracle.distance import layer_distance
from audee.records.findings import DeviationDetail
from audee.mutation.seeds import list_seeds, load_seed

BACKENDS = "torch,jax,torch@cuda,jax@cuda,torch@cuda:tf32,jax@cuda:tf32"


def own_layers(finding: Any) -> list[str]:
    """The layers a deviation finding blames on their own input (none for other kinds)."""
    return finding.detail.own_layers if isinstance(finding.detail, DeviationDetail) else []


def run(seeds: list[str], backends: str, batch: int) -> dict[str, Any]:
    refs = parse_backends(backends)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="audee-gpu-precision-") as tmp, Pool(refs, Path(tmp)) as pool:
        failed = pool.start()
        workers = {label: {"device": w.ref.device, "precision": w.precision_state or {"mode": w.ref.precision},
                           "versions": w.versions, "started": label not in failed}
                   for label, w in pool.workers.items()}
        ex = Executor(pool)
        modes = pool.precisions
        for name in seeds:
            seed = load_seed(name)
            inputs, _ = seed_batch(seed.inputs, 0, batch)
            case = TestCase(f"{name}-seed", seed.spec, dict(seed.weights or {}), inputs)
            ex.complete_weights(case, seed.weight_seed)
            t = time.perf_counter()
            result = ex.run(case)
            ok = [o for o in result.outcomes.values() if o.ok]
            for a, b in combinations(ok, 2):
                key = f"{a.backend}|{b.backend}"
                compute = pair_compute(modes[a.backend], modes[b.backend])
                la, lb = np.asarray(a.logits), np.asarray(b.logits)
                own = compare(la, lb, ex.tolerances, compute=compute)
                as_f32 = compare(la, lb, ex.tolerances, compute=FULL)
                pair = result.pairs.get(key, {})
                findings = sorted({str(f.kind) + (f" at {own_layers(f)}" if own_layers(f) else "")
                                   for f in result.verdict.findings
                                   if set(f.backends[:2]) == {a.backend, b.backend}})
                rows.append({"seed": name, "pair": key, "judged_as": own["dtype"] if own else None,
                             "score": own["score"] if own else None,
                             "score_float32_tol": as_f32["score"] if as_f32 else None,
                             "max_abs": own["max_abs"] if own else None, "max_rel": own["max_rel"] if own else None,
                             "distance": layer_distance(la, lb) if la.shape == lb.shape else float("inf"),
                             "flips": pair.get("flips", 0), "ties": pair.get("ties", 0), "findings": findings})
            crashes = {o.backend: f"{o.failure.kind}:{o.failure.phase}" for o in result.outcomes.values() if not o.ok}
            kinds = sorted({f"{f.kind} {'|'.join(f.backends)}" for f in result.verdict.findings})
            print(f"{name}: {len(ok)} backends ran, findings {kinds or 'none'}, crashes {crashes or 'none'}, "
                  f"{time.perf_counter() - t:.1f} s", flush=True)
    return {"backends": backends, "batch": batch, "workers": workers, "rows": rows,
            "host": platform.node(), "python": sys.version.split()[0]}


def markdown(res: dict[str, Any], command: str) -> str:
    out = ["# CPU against GPU: the unmutated seeds in full float32 and in TF32 mode", "",
           f"Command: `{command}`", "",
           *([f"Device: {res['device']}", ""] if res.get("device") else []),
           f"Backends: {res['backends']}; batch {res['batch']} seed inputs per seed; default tolerances "
           "(float32 rtol 1e-3 atol 1e-5, tf32 rtol 1e-2 atol 1e-3); score = max over rows of "
           "|a-b| / (atol + rtol * row max |value|), a deviation is score > 1.", "",
           "## Workers", "", "| backend | device | precision (as the framework reports it) | versions |",
           "|---|---|---|---|"]
    for label, w in res["workers"].items():
        prec = ", ".join(f"{k}={v}" for k, v in w["precision"].items())
        vers = ", ".join(f"{k} {v}" for k, v in w["versions"].items())
        out.append(f"| {label} | {w['device']} | {prec} | {vers} |")
    for title, want in (("Full precision pairs (judged as float32)", "float32"),
                        ("Pairs with a backend in TF32 mode (judged as tf32)", "tf32")):
        rows = [r for r in res["rows"] if r["judged_as"] == want]
        out += ["", f"## {title}", "",
                "| seed | pair | score | score under float32 tolerances | max abs | max rel | distance (Def. 4) "
                "| flips | ties | findings |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in rows:
            out.append(f"| {r['seed']} | {r['pair'].replace('|', ' vs ')} | {r['score']:.3g} | {r['score_float32_tol']:.3g} | "
                       f"{r['max_abs']:.2g} | {r['max_rel']:.2g} | {r['distance']:.2g} | {r['flips']} | {r['ties']} | "
                       f"{', '.join(r['findings']) or '-'} |")
        if rows:
            worst = max(rows, key=lambda r: r["score"])
            failing = [r for r in rows if any(f.split()[0] in Kind.FAILURES for f in r["findings"])]
            other = [r for r in rows if r["findings"] and r not in failing]
            out += ["", f"Worst score {worst['score']:.3g} ({worst['seed']}, {worst['pair'].replace('|', ' vs ')}); "
                        f"pairs with a failure: {len(failing)} of {len(rows)}; with only findings that are not "
                        f"failures (deviation_accumulated): {len(other)}."]
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=BACKENDS)
    ap.add_argument("--seeds", nargs="+", default=None, help="default: all seven")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--out", type=Path, default=Path("experiments/results/gpu_precision"))
    ap.add_argument("--render", type=Path, default=None, metavar="JSON",
                    help="write OUT.md from a JSON this script wrote (on another machine), running nothing")
    args = ap.parse_args()
    if args.render is not None:
        res = json.loads(args.render.read_text())
        command = res.get("command", "python experiments/gpu_precision.py")
        args.out.with_suffix(".md").write_text(markdown(res, command))
        return 0
    res = run(args.seeds or list_seeds(), args.backends, args.batch)
    command = "python experiments/gpu_precision.py " + " ".join(sys.argv[1:])
    res["command"] = command.strip()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=1, default=float))
    args.out.with_suffix(".md").write_text(markdown(res, command.strip()))
    print(markdown(res, command.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
