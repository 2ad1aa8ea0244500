"""The steady-state `audee fuzz` rate of code revisions, run alternately in one benchmark.

    python experiments/bench_revisions.py --revs 765e987 HEAD [--pairs 2] [--window 40] [--warmup 3]
        [--seed lenet5] [--backends tensorflow,torch,jax,onnxruntime] [--out experiments/results/fuzz_rate]

Each revision is exported with ``git archive`` into a temporary directory and run as
``python -m audee fuzz`` with ``PYTHONPATH`` pointing there (this ``.venv``: the
revisions must share its requirements).  The runs alternate, revision after revision,
``--pairs`` times, so a machine whose speed drifts slows every revision alike.

Rate: result rows written during ``--window`` seconds that start ``--warmup`` seconds
after the first row (start-up and the seed case excluded: "after start-up").  Busy: the
machine's non-idle share of that window (``/proc/stat``).  CPU per case: each process's
user + system CPU over the window (``/proc/PID/stat``: the parent and each worker) over
the rows written in it.  Linux only.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from datetime import datetime
from io import BytesIO
from pathlib import Path
from typing import Any

from proc_cpu import cpu_seconds  # experiments/ is on the path when run as a script

ROOT = Path(__file__).resolve().parents[1]


def export(rev: str, into: Path) -> tuple[str, Path]:
    """``rev``'s tree under ``into`` (its full hash, the directory)."""
    full = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    tree = into / full[:10]
    tree.mkdir(parents=True)
    blob = subprocess.run(["git", "archive", full], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(tree, filter="data")
    return full, tree


def _machine_ticks() -> tuple[int, int]:
    """(busy, idle) clock ticks of the whole machine so far."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields[:8]) - idle, idle


def _processes(parent: int) -> dict[int, str]:
    """The fuzz process and its workers: pid -> label (the worker's backend class)."""
    out = {parent: "parent"}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) != parent:
            continue
        args = [a.decode() for a in cmd if a]
        label = args[args.index("--backend") + 1].rsplit(":", 1)[-1] if "--backend" in args else args[-1]
        out[int(entry.name)] = label
    return out


def _rows(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def measure(tree: Path, seed: str, backends: str, window: float, warmup: float, work: Path) -> dict[str, Any]:
    """One fuzz run of the code in ``tree``: its rate over the window."""
    from audee.store import RunStore

    out = work / "run"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    load = os.getloadavg()[0]
    proc = subprocess.Popen([sys.executable, "-m", "audee", "fuzz", "--seed", seed, "--backends", backends,
                             "--variants", "1000", "--out", str(out), "--rng", "0"],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    results = RunStore(out).results_path  # counted by lines: the tree measured may be any revision
    try:
        deadline = time.monotonic() + 600
        while _rows(results) == 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{tree.name}: no result row (exit {proc.poll()})")
            time.sleep(0.2)
        time.sleep(warmup)
        procs = _processes(proc.pid)
        cpu0 = {pid: cpu_seconds(pid) for pid in procs}
        busy0, idle0 = _machine_ticks()
        n0, t0 = _rows(results), time.monotonic()
        time.sleep(window)
        n1, t1 = _rows(results), time.monotonic()
        busy1, idle1 = _machine_ticks()
        cpu1 = {pid: cpu_seconds(pid) for pid in procs}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    cases = n1 - n0
    per_case = {label: round((cpu1[pid] - cpu0[pid]) / cases, 4) if cases else None for pid, label in procs.items()}
    return {"cases": cases, "seconds": round(t1 - t0, 2), "rate": round(cases / (t1 - t0), 3),
            "busy": round((busy1 - busy0) / max(busy1 - busy0 + idle1 - idle0, 1), 3),
            "load_at_start": round(load, 2), "cpu_per_case": per_case}


def report(runs: list[dict[str, Any]], revs: list[tuple[str, str]], args: argparse.Namespace) -> str:
    base = statistics.median(r["rate"] for r in runs if r["rev"] == revs[0][1])
    lines = [f"# `audee fuzz` steady-state rate by revision (`python experiments/bench_revisions.py "
             f"--revs {' '.join(r for r, _ in revs)} --pairs {args.pairs} --window {args.window:g}`)", "",
             f"{os.cpu_count()} CPUs; {datetime.now():%Y-%m-%d %H:%M}; `--seed {args.seed} --backends {args.backends}`; "
             f"rows written over {args.window:g} s from {args.warmup:g} s after the first row; runs alternate.", "",
             "| run | revision | cases | cases/s | busy | load at start | CPU s per case (process) |",
             "|---:|---|---:|---:|---:|---:|---|"]
    for i, r in enumerate(runs, 1):
        cpu = ", ".join(f"{k} {v}" for k, v in sorted(r["cpu_per_case"].items()))
        lines.append(f"| {i} | {r['name']} ({r['rev'][:7]}) | {r['cases']} | {r['rate']:.2f} | {r['busy']:.2f} | "
                     f"{r['load_at_start']} | {cpu} |")
    lines += ["", "| revision | median cases/s | vs first revision |", "|---|---:|---:|"]
    for name, full in revs:
        med = statistics.median(r["rate"] for r in runs if r["rev"] == full)
        lines.append(f"| {name} ({full[:7]}) | {med:.2f} | {med / base:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--revs", nargs="+", required=True, help="git revisions; the first is the reference")
    ap.add_argument("--pairs", type=int, default=2, help="rounds of one run per revision")
    ap.add_argument("--window", type=float, default=40.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--seed", default="lenet5")
    ap.add_argument("--backends", default="tensorflow,torch,jax,onnxruntime")
    ap.add_argument("--out", type=Path, help="write OUT.md and OUT.json")
    args = ap.parse_args()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        trees = [(rev, *export(rev, Path(tmp) / "trees")) for rev in args.revs]
        for round_ in range(args.pairs):
            for name, full, tree in trees:
                with tempfile.TemporaryDirectory(dir=tmp) as work:
                    got = measure(tree, args.seed, args.backends, args.window, args.warmup, Path(work))
                runs.append({"name": name, "rev": full, "round": round_, **got})
                print(f"round {round_ + 1} {name} ({full[:7]}): {got['rate']:.2f} cases/s, busy {got['busy']:.2f}, "
                      f"CPU per case {got['cpu_per_case']}", flush=True)
    text = report(runs, [(n, f) for n, f, _ in trees], args)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                                             "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
