"""Many small models per build (issue 32): API-level cases per second with K cases per build.

    python experiments/bench_pack.py [--ks 1,4,8,16,32] [--apis Dense,Conv2D,...] [--variants 8]
        [--sets tensorflow,onnxruntime/tensorflow,torch,jax,onnxruntime] [--batch 8] [--json FILE]

For each backend set, one pool of workers runs the same API-level cases (``--variants`` per
API of ``--apis``, rng 0, the default dtype policies and invalid-value rate) once per K
(``audee fuzz --api ... --pack K``; K=1 is the unpacked run), each into a fresh directory,
after a warm-up run of a few cases (the frameworks' first calls are not charged to the
first K).  Printed per set and K: cases, seconds, cases/s, the ratio to K=1, and whether
every results row equals K=1's (``seconds`` and ``phases`` apart: packing must not change
a verdict); also each backend's worker seconds per case (the phases rows record).

Worker messages may name Python sets (a Keras error listing accepted values), whose order
changes with each process's hash seed: the K runs share their workers, so equal rows
compare equal here.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from audee.backends.pool import Pool  # noqa: E402
from audee.backends.registry import parse_backends  # noqa: E402
from audee.fuzz import FuzzConfig, fuzz_apis  # noqa: E402

APIS = "Dense,Conv2D,Conv1D,Add,Concatenate,BatchNormalization,LayerNormalization,MaxPooling2D,Embedding,LSTM"
SETS = "tensorflow,onnxruntime/tensorflow,torch,jax,onnxruntime"
TIMING = ("seconds", "phases")


def _rows(out: Path) -> dict[str, dict[str, Any]]:
    from audee.store import RunStore

    return {r.id: r.to_json() for r in RunStore(out).rows()}


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {k: v for k, v in a.items() if k not in TIMING} == {k: v for k, v in b.items() if k not in TIMING}


def _worker_seconds(rows: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each backend's worker seconds per case, over every phase."""
    total: dict[str, float] = {}
    for row in rows.values():
        for label, phases in (row.get("phases") or {}).items():
            total[label] = total.get(label, 0.0) + sum(phases.values())
    return {label: s / max(1, len(rows)) for label, s in total.items()}


def _cpu(pool: Pool) -> float:
    """CPU seconds the pool's worker processes used so far (user + system, from /proc;
    a worker restarted since is counted from its restart)."""
    total = 0.0
    for w in pool.processes.values():
        try:
            fields = Path(f"/proc/{w.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, AttributeError, IndexError, ValueError):
            pass
    return total


def bench_set(backends: str, apis: list[str], variants: int, ks: list[int], batch: int,
              tmp: Path, **draw: Any) -> list[dict[str, Any]]:
    refs = parse_backends(backends)
    out: list[dict[str, Any]] = []
    with Pool(refs, tmp / "logs", timeout=600) as pool:
        failed = pool.start()
        if failed:
            raise SystemExit(f"{backends}: workers could not start: {failed}")
        warm = FuzzConfig(refs, tmp / "warm", variants=1, batch=batch, rng=99)
        fuzz_apis(apis[:3], warm, pool=pool)
        base: dict[str, dict[str, Any]] | None = None
        for n, k in enumerate(ks):
            run = tmp / f"{backends.replace(',', '+')}-{n}-k{k}"
            cfg = FuzzConfig(refs, run, variants=variants, batch=batch, pack=k, **draw)
            t, cpu, mine = time.perf_counter(), _cpu(pool), time.process_time()
            fuzz_apis(apis, cfg, pool=pool)
            dt = time.perf_counter() - t
            cpu, mine = _cpu(pool) - cpu, time.process_time() - mine
            rows = _rows(run)
            base = rows if base is None else base
            same = sum(_same(base[i], rows[i]) for i in base if i in rows)
            entry = {"backends": backends, "k": k, "cases": len(rows), "seconds": round(dt, 2),
                     "cases_per_s": round(len(rows) / dt, 3), "same_rows": same,
                     "pack_only": sum("pack_only" in r for r in rows.values()),
                     "worker_cpu_s_per_case": round(cpu / max(1, len(rows)), 3),
                     "parent_cpu_s_per_case": round(mine / max(1, len(rows)), 3),
                     "worker_s_per_case": {b: round(s, 3) for b, s in _worker_seconds(rows).items()}}
            out.append(entry)
            print(f"  K={k:<3d} {entry['cases']:4d} cases {dt:8.1f} s {entry['cases_per_s']:7.3f} cases/s "
                  f"x{entry['cases_per_s'] / out[0]['cases_per_s']:.2f}  rows equal to K={ks[0]}: "
                  f"{same}/{len(base)}  CPU s/case: workers {entry['worker_cpu_s_per_case']:.3f}, parent "
                  f"{entry['parent_cpu_s_per_case']:.3f}; worker phases s/case: "
                  + ", ".join(f"{b} {s:.3f}" for b, s in entry["worker_s_per_case"].items()), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ks", default="1,4,8,16,32", help="cases per build, comma-separated (first: the reference)")
    ap.add_argument("--apis", default=APIS)
    ap.add_argument("--variants", type=int, default=8, help="cases per API")
    ap.add_argument("--sets", default=SETS, help="backend sets, '/'-separated")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--invalid-prob", type=float, default=None, help="as audee fuzz (default: its default)")
    ap.add_argument("--dtypes", default=None, help="as audee fuzz (default: its default)")
    ap.add_argument("--json", help="write the table here as JSON")
    ap.add_argument("--keep", help="keep the run directories here (default: a temporary directory)")
    args = ap.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    apis = [a for a in args.apis.split(",") if a]
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-pack-"))
    results = []
    try:
        for backends in args.sets.split("/"):
            print(f"{backends}: {len(apis)} APIs x {args.variants} cases, batch {args.batch}"
                  + "".join(f", {k} {v}" for k, v in (("invalid_prob", args.invalid_prob), ("dtypes", args.dtypes))
                            if v is not None), flush=True)
            draw = {k: v for k, v in (("invalid_prob", args.invalid_prob), ("dtypes", args.dtypes)) if v is not None}
            results += bench_set(backends, apis, args.variants, ks, args.batch, tmp, **draw)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
