"""Campaign scaling: k shards side by side, and one shard running k units at once.

    python experiments/bench_shards.py [--shards 1,2,4,8] [--parallel 1,2,4,8] [--variants 20]
        [--seeds lenet5,lstm] [--rngs 2] [--backends tensorflow,torch] [--json FILE]

Every run executes the same campaign (rq1-cpu sized units: seeds x rngs, one backend pair,
20 network variants at batch 16: 21 test cases per unit) into a fresh directory:

- ``k shards``: ``audee campaign --shard i/k`` for i < k at once, each pinned to its own
  cores/k CPUs (``os.sched_setaffinity``, as SLURM's ``--cpus-per-task`` pins an array
  task; audee reads the mask, audee/core/cpus.py, and gives each worker its share);
- ``k units at once``: one ``audee campaign --parallel-units k`` on all the CPUs.

k needs k CPUs; larger k are skipped with the reason printed.  Scaling efficiency
E_k = T_1 / (k * T_k).  Per-phase costs come from the shards' logs: the shard's own
start-up (process, imports, seed checks: launch to its first unit), worker start-up
(framework import, ``ready after``), and per test case (``fuzz ... done in``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

CONFIG = """name: bench-shards
defaults: {{variants: {variants}, batch: 16, operators: redraw, timeout: 300}}
runs:
  - seeds: [{seeds}]
    backends: [[{backends}]]
    rngs: [{rngs}]
"""
STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _pin(cores: list[int]):
    return lambda: os.sched_setaffinity(0, cores)


def _launch(cfg: Path, out: Path, extra: list[str], cores: list[int] | None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.Popen([sys.executable, "-m", "audee", "-v", "campaign", str(cfg), "--out", str(out),
                             "--no-progress", *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            preexec_fn=_pin(cores) if cores is not None else None)


def _phases(out: Path, launched: float) -> dict[str, Any]:
    """Per-phase costs from every shard log of a campaign directory."""
    ready, fuzz, cases, first = [], [], 0, []
    for logf in sorted(out.glob("logs/shard-*/audee.log")):
        text = logf.read_text()
        ready += [float(x) for x in re.findall(r"worker \S+: ready after ([\d.]+) s", text)]
        for secs, n in re.findall(r"fuzz \S+ done in ([\d.]+) s: (\d+) test cases run", text):
            fuzz.append(float(secs))
            cases += int(n)
        m = re.search(STAMP + r".*unit \S+: started", text, re.M)
        if m:
            first.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() - launched)
    return {"shard_startup_s": round(statistics.mean(first), 2) if first else None,
            "worker_ready_s": [round(x, 1) for x in ready],
            "worker_startups": len(ready),
            "fuzz_s": round(sum(fuzz), 1), "cases": cases,
            "per_case_s": round(sum(fuzz) / cases, 3) if cases else None}


def _driver_cpu(out: Path) -> dict[str, float]:
    """CPU seconds of the process driving each unit (mutation, oracles, I/O), from the status files."""
    got: dict[str, float] = {}
    for f in out.glob("status/*.json"):
        got.update(json.loads(f.read_text()).get("cpu_seconds", {}))
    return got


def run(cfg: Path, out: Path, k: int, mode: str, cpus: list[int]) -> dict[str, Any]:
    launched = time.time()
    t = time.perf_counter()
    if mode == "shards":
        per = len(cpus) // k
        procs = [_launch(cfg, out, ["--shard", f"{i}/{k}", "--parallel-units", "1"], cpus[i * per:(i + 1) * per])
                 for i in range(k)]
    else:
        procs = [_launch(cfg, out, ["--parallel-units", str(k)], None)]
    codes, cpu = [], 0.0
    for p in procs:  # wait4: the CPU seconds of each shard's whole tree (its slots and workers are reaped in it)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        codes.append(p.returncode)
        cpu += usage.ru_utime + usage.ru_stime
    wall = time.perf_counter() - t
    if any(codes):
        raise SystemExit(f"{mode} k={k}: exit codes {codes}; see {out}/logs")
    units = {p.parent.name: json.loads(p.read_text())["seconds"] for p in out.glob("units/*/DONE.json")}
    return {"mode": mode, "k": k, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "units": len(units),
            "unit_fuzz_s": {u: units[u] for u in sorted(units)}, "driver_cpu_s": _driver_cpu(out),
            **_phases(out, launched)}


def model(doc: dict[str, Any], cores: int = 16, shards: int = 8,
          units: tuple[int, ...] = (8, 16, 64)) -> dict[str, Any]:
    """Predict ``shards`` shards of ``cores // shards`` CPUs against one serial shard on ``cores``
    CPUs from a 1-shard run (a shard on this machine's 2 CPUs, each worker on its own core:
    what each of 8 shards on a 16-core node is) and a 2-shard run (half the CPUs per worker
    set: how a unit's time depends on the CPUs its set has).

    T_shard(U units) = S + W + U * u: S the shard's own start-up, W the worker start-up of
    its set (its workers start at once: the slowest), u the fuzz time of one unit.
    T_8 = S + W + (U / 8) * u_2       (8 shards of 2 cores, each what this machine's 1-shard run is)
    T_1 = S + W + U * u_2 / g         (one serial shard on 16 cores, its workers on 8 threads each;
                                       g the unit's speed-up from 8x the CPUs: between 1, small models
                                       do not use them, and gain**3, each of three doublings gaining
                                       what 1 -> 2 CPUs per worker set gained here)
    E_8 = T_1 / (8 * T_8).  Not a measurement: memory bandwidth, caches and turbo shared by
    8 shards on one node, and the frameworks' own thread scaling past 2 cores, are assumptions."""
    runs = {(r["mode"], r["k"]): r for r in doc["runs"]}
    one = runs[("shards", 1)]
    half = runs.get(("shards", 2))
    n1 = one["units"]
    S = one["shard_startup_s"]
    W = max(one["worker_ready_s"])
    u2 = one["fuzz_s"] / n1
    gain = None
    if half is not None:
        uh = half["fuzz_s"] / half["units"]
        gain = uh / u2  # one doubling of the CPUs per worker set (1 -> 2 cores here)
    out: dict[str, Any] = {"inputs": {"S_shard_startup_s": S, "W_worker_startup_s": W, "u2_unit_fuzz_s": round(u2, 2),
                                      "per_case_s": one["per_case_s"],
                                      "doubling_gain": round(gain, 3) if gain else None},
                           "cores": cores, "shards": shards, "predictions": []}
    if half is not None and one.get("cpu_s") and half.get("cpu_s"):
        # load-independent cross-check: CPU seconds of all processes.  The 2-shard run does the
        # same units plus one more shard start-up and worker set, so the difference is their cost
        start_cpu = half["cpu_s"] - one["cpu_s"]
        unit_cpu = (one["cpu_s"] - start_cpu) / n1
        out["inputs"].update(startup_cpu_s=round(start_cpu, 1), unit_cpu_s=round(unit_cpu, 2),
                             startup_to_unit_wall=round((S + W) / u2, 2),
                             startup_to_unit_cpu=round(start_cpu / unit_cpu, 2) if unit_cpu > 0 else None)
    per = cores // shards
    A = S + W
    out["units_for_70pct"] = {}
    for name, g in (("g=1", 1.0), ("g=gain", gain or 1.0)):
        # T1 >= 0.7 * 8 * T8  <=>  U * u2 * (1/g - 0.7) >= (0.7 * 8 - 1) * A
        slack = 1 / g - 0.7
        out["units_for_70pct"][name] = (math.ceil((0.7 * shards - 1) * A / (u2 * slack)) if slack > 0 else None)
    for U in units:
        t8 = S + W + (U / shards) * u2
        for label, g in (("8x the CPUs do not speed a unit up (g=1)", 1.0),
                         ("8x the CPUs gain what 1 -> 2 CPUs per set gained here (g=gain)", gain or 1.0),
                         ("each of 3 doublings gains that (g=gain^3, an extreme)", (gain or 1.0) ** 3)):
            t1 = S + W + U * u2 / g
            out["predictions"].append({"units": U, "assumption": label, "g": round(g, 3), "T1_s": round(t1, 1),
                                       f"T{shards}_s": round(t8, 1), "efficiency": round(t1 / (shards * t8), 3),
                                       "cores_per_shard": per})
    return out


def efficiencies(runs: list[dict[str, Any]]) -> None:
    """E_k = T_1 / (k T_k), T_1 the 1-shard run (a serial shard, the same thing in both modes)
    where a mode has no k=1 run of its own."""
    base = {r["mode"]: r["wall_s"] for r in runs if r["k"] == 1}
    for r in runs:
        t1 = base.get(r["mode"], base.get("shards"))
        r["efficiency"] = round(t1 / (r["k"] * r["wall_s"]), 3) if t1 else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", default="1,2,4,8")
    ap.add_argument("--parallel", default="1,2,4,8")
    ap.add_argument("--variants", type=int, default=20)
    ap.add_argument("--seeds", default="lenet5,lstm")
    ap.add_argument("--rngs", type=int, default=2, help="rngs per seed (units = seeds x rngs)")
    ap.add_argument("--backends", default="tensorflow,torch")
    ap.add_argument("--out", type=Path, help="write OUT.json (every measurement and the 16-core model) and OUT.md")
    ap.add_argument("--model-from", type=Path, help="no runs: the model from an OUT.json written before")
    args = ap.parse_args()
    if args.model_from:
        doc = json.loads(args.model_from.read_text())
        efficiencies(doc["runs"])
        doc["model"] = model(doc)
        _write(doc, args.out or args.model_from.with_suffix(""))
        return
    from audee.core.cpus import task_cpus

    cpus = sorted(os.sched_getaffinity(0))[:task_cpus()]
    n_units = len(args.seeds.split(",")) * args.rngs
    load0 = os.getloadavg()
    print(f"{len(cpus)} CPUs (affinity, SLURM, cgroup quota: audee.core.cpus.task_cpus), load average {load0[0]:.1f}; "
          f"campaign: {n_units} units ({args.seeds} x {args.rngs} rngs) on {args.backends}, "
          f"{args.variants} variants, batch 16")
    results: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="audee-bench-shards-") as tmp:
        cfg = Path(tmp) / "c.yaml"
        cfg.write_text(CONFIG.format(variants=args.variants, seeds=", ".join(args.seeds.split(",")),
                                     backends=", ".join(args.backends.split(",")),
                                     rngs=", ".join(str(r) for r in range(args.rngs))))
        for mode, ks in (("shards", _ints(args.shards)), ("parallel-units", _ints(args.parallel))):
            for k in ks:
                why = (f"needs {k} CPUs and this task has {len(cpus)}" if k > len(cpus) else
                       f"the campaign has only {n_units} units" if k > n_units else None)
                if why:
                    print(f"{mode:>14} k={k}: skipped, {why}")
                    skipped.append({"mode": mode, "k": k, "why": why})
                    continue
                r = run(cfg, Path(tmp) / f"{mode}-{k}", k, mode, cpus)
                results.append(r)
                efficiencies(results)
                drv = r["driver_cpu_s"]
                share = sum(drv.values()) / sum(r["unit_fuzz_s"].values()) if drv else float("nan")
                print(f"{mode:>14} k={k}: {r['wall_s']:7.1f} s  {r['units'] / r['wall_s'] * 60:5.2f} units/min  "
                      + (f"E={r['efficiency']:.0%}  " if r["efficiency"] is not None else "")
                      + f"shard start-up {r['shard_startup_s']} s, {r['worker_startups']} worker start-ups "
                      f"(median {statistics.median(r['worker_ready_s']):.1f} s), {r['per_case_s']} s/case, "
                      f"driver CPU {share:.0%} of unit wall, {r['cpu_s']} CPU s in all")
    load1 = os.getloadavg()
    print(f"load average {load1[0]:.1f} at the end (other processes on this machine count in every figure)")
    doc = {"command": " ".join(["python", *sys.argv]), "cpus": len(cpus), "load_average": [load0[0], load1[0]],
           "units": n_units, "variants": args.variants, "seeds": args.seeds, "backends": args.backends,
           "runs": results, "skipped": skipped}
    if ("shards", 1) in {(r["mode"], r["k"]) for r in results}:
        doc["model"] = model(doc)
        for p in doc["model"]["predictions"]:
            print(f"model, {doc['model']['cores']} cores, {p['units']} units, {p['assumption']}: "
                  f"T1 {p['T1_s']} s, T{doc['model']['shards']} {p['T8_s']} s, E={p['efficiency']:.0%}")
    if args.out:
        _write(doc, args.out)


def _write(doc: dict[str, Any], prefix: Path) -> None:
    """PREFIX.json (everything) and PREFIX.md (the table and the model's arithmetic)."""
    Path(f"{prefix}.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# Campaign scaling: {doc['cpus']} CPUs", "",
             f"`{doc.get('command', 'python experiments/bench_shards.py')}`: {doc['units']} units "
             f"({doc['seeds']} x rngs) on {doc['backends']}, {doc['variants']} variants at batch 16. "
             f"Load average {doc['load_average'][0]:.1f} at the start, {doc['load_average'][1]:.1f} at the end: "
             "other processes on this machine count in every figure.", "",
             "| mode | k | wall s | CPU s (all processes) | units/min | efficiency T1/(k Tk) | shard start-up s | "
             "worker start-ups (s each) | s per case | driver CPU / unit wall |", "|---" * 10 + "|"]
    for r in doc["runs"]:
        drv = sum(r["driver_cpu_s"].values()) / max(1e-9, sum(r["unit_fuzz_s"].values()))
        eff = f"{r['efficiency']:.0%}" if r.get("efficiency") is not None else ""
        lines.append(f"| {r['mode']} | {r['k']} | {r['wall_s']} | {r.get('cpu_s', '')} | "
                     f"{r['units'] / r['wall_s'] * 60:.2f} | {eff} | "
                     f"{r['shard_startup_s']} | {r['worker_startups']} ({', '.join(map(str, r['worker_ready_s']))}) | "
                     f"{r['per_case_s']} | {drv:.0%} |")
    if min(doc["load_average"]) > doc["cpus"]:
        lines += ["", f"The load average stayed above the {doc['cpus']} CPUs throughout: other processes kept the "
                  "machine saturated, so k > 1 here could not add throughput and its efficiency measures the "
                  "contention, not audee. The model below uses the 1-shard run's phase costs as ratios (S, W and "
                  "u2 slow down together under a uniform load, and E depends on their ratios), which is itself an "
                  "assumption."]
    m = doc.get("model")
    if m:
        i = m["inputs"]
        lines += ["", f"## Model: {m['shards']} shards on {m['cores']} cores (a model, not a measurement)", "",
                  f"From the 1-shard run: S = {i['S_shard_startup_s']} s (shard start-up: launch to its first "
                  f"unit), W = {i['W_worker_startup_s']} s (worker start-up, the slowest of the set), "
                  f"u2 = {i['u2_unit_fuzz_s']} s (fuzz time of one unit, {i['per_case_s']} s per case, on 2 CPUs "
                  f"for the set); from the 2-shard run: one unit on 1 CPU for the set takes "
                  f"{i['doubling_gain']} x u2 (the gain of doubling the CPUs).", "",
                  *([f"Cross-check without the load: CPU seconds of all processes, 2 shards minus 1 shard = "
                     f"{i['startup_cpu_s']} CPU s for one more shard start-up and worker set, "
                     f"{i['unit_cpu_s']} CPU s per unit; start-up / unit = {i['startup_to_unit_cpu']} in CPU "
                     f"against (S + W) / u2 = {i['startup_to_unit_wall']} in wall time.", ""]
                    if i.get("startup_cpu_s") is not None else []),
                  f"T{m['shards']} = S + W + (U/{m['shards']}) u2 ({m['shards']} shards of "
                  f"{m['cores'] // m['shards']} CPUs, each like the 1-shard run here); "
                  f"T1 = S + W + U u2 / g (one serial "
                  f"shard on {m['cores']} CPUs); E = T1 / ({m['shards']} T{m['shards']}).", "",
                  f"Units the campaign needs for E >= 70% (T1 >= 0.7 x {m['shards']} T{m['shards']}, i.e. "
                  f"U u2 (1/g - 0.7) >= {0.7 * m['shards'] - 1:g} (S + W)): "
                  + ", ".join(f"{k}: {'never' if v is None else v}" for k, v in m.get("units_for_70pct", {}).items())
                  + ".", "",
                  "| units U | assumption | g | T1 s | T8 s | E |", "|---|---|---|---|---|---|"]
        for p in m["predictions"]:
            lines.append(f"| {p['units']} | {p['assumption']} | {p['g']} | {p['T1_s']} | {p['T8_s']} | "
                         f"{p['efficiency']:.0%} |")
        r = i.get("startup_to_unit_cpu")
        if r:
            n = m["shards"]
            cpu_e = ", ".join(f"U={U}: {(r + U) / (n * (r + U / n)):.0%}" for U in sorted({p["units"] for p in
                                                                                           m["predictions"]}))
            lines += ["", f"With the CPU-second ratio instead ((S + W) / u2 = {r}) and g = 1: E = (r + U) / "
                      f"({n} (r + U/{n})): {cpu_e}; E >= 70% needs U >= {math.ceil((0.7 * n - 1) * r / 0.3)}."]
    if doc.get("skipped"):
        lines += ["", "Not run here: " + "; ".join(f"{x['mode']} k={x['k']} ({x['why']})"
                                                     for x in doc["skipped"]) + "."]
    Path(f"{prefix}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
