"""A converter's budget with and without the refusal memo (``--refusal-memo``,
audee/engine/refusals.py): the same API-level run with the memo off and on, side by side.

Each run is ``audee fuzz --api APIS --variants N --backends BACKENDS`` with the compilers
campaign's dtype mixture (experiments/campaigns/compilers-cpu.yaml): some APIs the TFLite
converter or OpenVINO's ONNX frontend refuse under some dtype policy with an explicit
"unsupported" error, some they convert.  Per mode: the wall time (workers' start-up
included, the same in both) and the seconds of the cases, and per converter the cases it
was given (each is built and converted: a worker converts a model as soon as it has built
it), the cases it failed, the cases it skipped and those of them it converted and ran with
the memo off (coverage lost).  Then the cases whose verdict kinds or whose other backends'
statuses differ between the two modes: the memo must change nothing but the skipped
conversions (a case judged without the converter may lose the finding the refusal itself
was, a divergent acceptance of class limitation).

    python experiments/refusal_budget.py [--apis A,B,...] [--variants 10] [--rng 0]
        [--dtypes POLICIES] [--backends tensorflow,litert,openvino] [--rounds 2] [--work /tmp/refusal_budget]
        [--out experiments/results/refusal_budget.md] [--append]

Runs each mode ``--rounds`` times, alternating which goes first (a shared machine drifts),
prints the table and the ratios off/on, and writes it to ``--out`` (``--append``: after what
it holds).  Timings are what this machine gave on the day: tests assert no time.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: refused by a converter under some policy (3-D pooling: no TFLite builtin; bincount: none in
#: TFLite, no OpenVINO rule for the ONNX graph of Discretization's Bucketize), and converted ones
APIS = "AveragePooling3D,MaxPooling3D,CategoryEncoding,Discretization,Dense,Conv2D"
DTYPES = "float32:0.7,float16:0.1,bfloat16:0.1,mixed_float16:0.1"  # the compilers campaign's


def run(memo: str, args: argparse.Namespace) -> tuple[float, list[dict[str, Any]]]:
    """One ``audee fuzz`` run with the memo ``memo``: its wall seconds and its rows."""
    out = Path(args.work) / memo
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "audee", "-q", "fuzz", "--api", args.apis, "--variants", str(args.variants),
           "--rng", str(args.rng), "--batch", "8", "--dtypes", args.dtypes, "--backends", args.backends,
           "--refusal-memo", memo, "--no-progress", "--out", str(out)]
    t = time.perf_counter()
    with open(Path(args.work) / f"{memo}.log", "w") as log:  # the run's own summary, kept beside it
        subprocess.run(cmd, cwd=REPO, check=True, stdout=log, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t
    return wall, [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def counts(rows: list[dict[str, Any]], backend: str) -> dict[str, int]:
    """A converter's cases given (built, so converted), refused (failed with an error) and skipped."""
    given = [r for r in rows if backend in r["backends"]]
    return {"converted": len(given), "failed": sum(r["backends"][backend] != "ok" for r in given),
            "skipped": sum(backend in (r.get("skipped") or {}) for r in rows)}


def _each(values: list[float]) -> str:
    return "(" + ", ".join(f"{v:.1f}" for v in values) + ")"


def case_s(rows: list[dict[str, Any]]) -> float:
    """The seconds the cases added to their run (the rows' ``seconds`` add up to its wall
    time after the workers started)."""
    return sum(float(r["seconds"]) for r in rows)


def lost(off: list[dict[str, Any]], on: list[dict[str, Any]], backend: str) -> int:
    """Cases the memo skipped on ``backend`` that it converted and ran with the memo off: the
    coverage a key too coarse for its refusal costs."""
    by_id = {r["id"]: r for r in off}
    return sum(backend in (r.get("skipped") or {}) and by_id[r["id"]]["backends"].get(backend) == "ok" for r in on)


def differences(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> list[str]:
    """Cases whose kinds or whose statuses on the backends both runs ran differ, beyond a
    skipped converter's own refusal finding."""
    by_id = {r["id"]: r for r in off}
    out = []
    for r in on:
        o = by_id[r["id"]]
        both = set(r["backends"]) & set(o["backends"])
        if any(r["backends"][b] != o["backends"][b] for b in both):
            out.append(f"{r['id']}: statuses {o['backends']} -> {r['backends']}")
        elif r["kinds"] != o["kinds"] and not r.get("skipped"):
            out.append(f"{r['id']}: kinds {o['kinds']} -> {r['kinds']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--apis", default=APIS)
    ap.add_argument("--variants", type=int, default=10)
    ap.add_argument("--rng", type=int, default=0)
    ap.add_argument("--dtypes", default=DTYPES, help="the dtype policies drawn (default: the compilers campaign's)")
    ap.add_argument("--backends", default="tensorflow,litert,openvino")
    ap.add_argument("--rounds", type=int, default=2, help="runs with the memo off and on each, alternating")
    ap.add_argument("--work", default="/tmp/refusal_budget")
    ap.add_argument("--out", default=str(REPO / "experiments" / "results" / "refusal_budget.md"))
    ap.add_argument("--append", action="store_true", help="add this measurement to --out instead of replacing it")
    args = ap.parse_args()
    converters = [b for b in args.backends.split(",") if b not in ("tensorflow", "torch", "jax")]
    walls: dict[str, list[float]] = {"off": [], "on": []}
    cases: dict[str, list[float]] = {"off": [], "on": []}
    got: dict[str, list[dict[str, Any]]] = {}
    for k in range(args.rounds):  # off then on, then on then off, ...: the order's drift shared out
        for memo in (("off", "on") if k % 2 == 0 else ("on", "off")):
            wall, rows = run(memo, args)
            walls[memo].append(wall)
            cases[memo].append(case_s(rows))
            got.setdefault(memo, rows)
    off, on = got["off"], got["on"]
    wall_off, wall_on = (sum(walls[m]) / len(walls[m]) for m in ("off", "on"))
    case_off, case_on = (sum(cases[m]) / len(cases[m]) for m in ("off", "on"))
    lines = ["# The refusal memo: a converter's budget (`experiments/refusal_budget.py`)", "",
             f"`audee fuzz --api {args.apis} --variants {args.variants} --rng {args.rng} --dtypes {args.dtypes} "
             f"--backends {args.backends}`, {len(on)} cases; {args.rounds} runs each with the memo off and on, "
             "alternating which goes first; times are their means (each run's in brackets), counts the first "
             "run's (a run is deterministic).", "",
             "| | memo off | memo on | off / on |", "|---|---:|---:|---:|",
             f"| wall seconds (workers' start-up included) | {wall_off:.1f} {_each(walls['off'])} | "
             f"{wall_on:.1f} {_each(walls['on'])} | {wall_off / wall_on:.2f} |",
             f"| seconds of the cases (the rows' sum) | {case_off:.1f} {_each(cases['off'])} | "
             f"{case_on:.1f} {_each(cases['on'])} | {case_off / case_on:.2f} |"]
    for b in converters:
        c_off, c_on = counts(off, b), counts(on, b)
        ratio = f"{c_off['converted'] / c_on['converted']:.2f}" if c_on["converted"] else "-"
        lines += [f"| {b}: cases converted | {c_off['converted']} | {c_on['converted']} | {ratio} |",
                  f"| {b}: cases it failed | {c_off['failed']} | {c_on['failed']} | |",
                  f"| {b}: cases skipped | {c_off['skipped']} | {c_on['skipped']} | |",
                  f"| {b}: skipped, though it ran them with the memo off | | {lost(off, on, b)} | |"]
    diff = differences(off, on)
    lines += ["", f"Cases judged differently beyond the skipped refusals: {len(diff)}", *[f"- {d}" for d in diff]]
    keys = sorted({(b, r["api"], r["dtype"], ", ".join(s["cases"])) for r in on
                   for b, s in (r.get("skipped") or {}).items()})
    lines += ["", "Skipped (backend, API, dtype policy, the cases that saw the refusal):",
              *[f"- {b} {api} {dt} ({cases})" for b, api, dt, cases in keys]]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    old = Path(args.out).read_text() if args.append and Path(args.out).exists() else ""
    Path(args.out).write_text(old + ("\n" if old else "") + text)


if __name__ == "__main__":
    main()
