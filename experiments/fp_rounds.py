"""What the oracle false-positive experiments share (``equivalence_fp.py``, ``precision_fp.py``):
rounds of ``audee fuzz`` runs over API-level models and seed variants on the four default
backends, resumable from a work directory, and the record of every invocation.

Imported by those scripts from their own directory (``python experiments/<name>.py`` puts it
first on ``sys.path``)."""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

import audee.fuzz as fuzz_mod
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.mutation.seeds import list_seeds, load_seed

BACKENDS = "tensorflow,torch,jax,onnxruntime"
SMALL = ("lenet5", "simplernn", "lstm", "gru")  # seeds whose variants cost seconds; the CNNs last

#: (class, explanation, {finding field: regex}): an entry of an experiment's table of explanations
Explained = list[tuple[str, str, dict[str, str]]]


def run_round(work: Path, batch: int, rng: int, deadline: float, apis: list[str], api_variants: int,
              seed_variants: dict[str, int], settings: dict[str, Any]) -> bool:
    """One round: ``api_variants`` API-level models of each of ``apis``, then
    ``seed_variants[seed]`` network variants of each seed (the small seeds first), every
    case an ``audee fuzz`` case with ``--invalid-prob 0`` and ``settings`` (resumed from
    ``work``); False once past the deadline."""
    refs = parse_backends(BACKENDS)
    # no repro scripts: each would re-run its case a few times to check it (the findings are read here)
    fuzz_mod.write_bug_repros = lambda *args, **kwargs: []
    with Pool(refs, work / "logs") as pool:
        pool.start_or_fail()
        for api in apis:  # one-layer models first: the cheapest cases, most of them
            if time.time() > deadline:
                return False
            cfg = fuzz_mod.FuzzConfig(refs, work / "api" / api, variants=api_variants, rng=rng, batch=batch,
                                      invalid_prob=0.0, **settings)
            t = time.perf_counter()
            stats = fuzz_mod.fuzz_apis([api], cfg, pool=pool)
            print(f"{time.strftime('%H:%M:%S')} api {api}: {stats.run} run ({stats.skipped} resumed) "
                  f"in {time.perf_counter() - t:.0f} s, {stats.failing_cases} failing", flush=True)
        order = [n for n in SMALL if n in seed_variants] + [n for n in seed_variants if n not in SMALL]
        for name in order:
            if time.time() > deadline:
                return False
            seed = load_seed(name)
            cfg = fuzz_mod.FuzzConfig(refs, work / name, variants=seed_variants[name], rng=rng, batch=batch,
                                      invalid_prob=0.0, **settings)
            t = time.perf_counter()
            stats = fuzz_mod.fuzz(seed, seed.inputs, cfg, pool=pool)
            print(f"{time.strftime('%H:%M:%S')} {name}: {stats.run} run ({stats.skipped} resumed) "
                  f"in {time.perf_counter() - t:.0f} s, {stats.failing_cases} failing", flush=True)
    return True


def run_dirs(work: Path) -> list[tuple[str, Path]]:
    """Every fuzz run directory under ``work``: (seed name or ``api:<API>``, directory)."""
    out = [(name, work / name) for name in list_seeds() if (work / name / "results.jsonl").exists()]
    out += [(f"api:{p.name}", p) for p in sorted((work / "api").glob("*")) if (p / "results.jsonl").exists()]
    return out


def explain(f: dict[str, Any], table: Explained) -> tuple[str, str]:
    """The first entry of ``table`` whose every regex matches (re.search) the finding's field:
    its class and explanation; ``("unexplained", "")`` when none does."""
    for klass, text, fields in table:
        if all(re.search(rx, str(f.get(k) or ""), re.S) for k, rx in fields.items()):
            return klass, text
    return "unexplained", ""


def record_runs(work: Path, t0: float, ran: bool) -> list[dict[str, Any]]:
    """Every invocation into ``work`` (its command and seconds; this one added when it ran cases)."""
    runs_file = work / "runs.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else []
    if ran:
        runs.append({"command": "python " + " ".join(sys.argv), "seconds": round(time.time() - t0)})
        runs_file.write_text(json.dumps(runs, indent=1))
    return runs


def write_results(out: Path, res: dict[str, Any], runs: list[dict[str, Any]],
                  markdown: Callable[[dict[str, Any], str, float | None], str]) -> None:
    """``OUT.json`` and ``OUT.md`` (the command line of every invocation, their minutes)."""
    res["runs"] = runs
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1, default=float))
    command = "; ".join(r["command"] for r in runs) or "python " + " ".join(sys.argv)
    seconds = sum(r["seconds"] for r in runs) or None
    out.with_suffix(".md").write_text(markdown(res, command, seconds))
    print(out.with_suffix(".md").read_text())
