"""Run a campaign shard: each unit is one `audee fuzz` run in ``OUT/units/<unit id>/``.

Resumable at two depths: a finished unit has ``DONE.json`` (written atomically, last) and
is skipped; an interrupted unit is rerun in place, where the fuzz run itself skips every
test case and search already in its tables.  So a preempted or killed task loses nothing
that was committed.  A unit with ``localize`` settings then runs the RQ2 stage
(``localize/``, its own commit point ``localize/DONE.json``; see localize_stage).  Each
shard keeps ``OUT/status/shard-I-of-N.json`` up to date, and keeps its backend workers
alive across units (``OUT/logs/shard-I-of-N/``).
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Callable

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.campaign.config import Campaign, Unit
from audee.campaign.localize_stage import localize_unit, pending
from audee.errors import AudeeError
from audee.fuzz import FuzzConfig, fuzz, start_pool, summarize
from audee.seeds import load_seed
from audee.store.atomic import write_atomic


def shard_of(arg: str | None, env: dict[str, str] | None = None) -> tuple[int, int]:
    """``I/N`` from the command line, else from a SLURM job array, else the whole campaign."""
    env = dict(os.environ) if env is None else env
    if arg:
        try:
            i, n = (int(x) for x in arg.split("/"))
        except ValueError:
            raise AudeeError(f"expected I/N such as 0/4, got {arg!r}", field="--shard") from None
        if not 0 <= i < n:
            raise AudeeError(f"need 0 <= I < N, got {arg!r}", field="--shard")
        return i, n
    if "SLURM_ARRAY_TASK_ID" in env:
        task = int(env["SLURM_ARRAY_TASK_ID"])
        lo = int(env.get("SLURM_ARRAY_TASK_MIN", 0))
        if "SLURM_ARRAY_TASK_COUNT" in env:
            count = int(env["SLURM_ARRAY_TASK_COUNT"])
        else:
            count = int(env.get("SLURM_ARRAY_TASK_MAX", task)) - lo + 1
        return task - lo, count
    return 0, 1


def unit_config(unit: Unit, out: Path, device: str = "cpu") -> tuple[FuzzConfig, Any]:
    s = unit.settings
    cfg = FuzzConfig(parse_backends(list(unit.backends), device), out, variants=s.get("variants", 20), rng=s.get("rng", 0),
                     batch=s.get("batch", 16), layer_rate=s.get("layer_rate", 0.5), max_layers=s.get("max_layers", 3),
                     invalid_prob=s.get("invalid_prob", 0.1), timeout=s.get("timeout", 120.0),
                     tie_margin=s.get("tie_margin", 1e-5))
    plan = None
    if unit.search:
        from audee.search.config import make_config
        from audee.search.runner import SearchPlan

        raw = {k: v for k, v in unit.search.items() if k not in ("searches", "on_consistent", "input_index")}
        plan = SearchPlan(make_config(raw, {"rng": cfg.rng}, unit.id), list(unit.search["searches"]),
                          unit.search["on_consistent"], unit.search.get("input_index"))
    return cfg, plan


class _Pools:
    """The shard's workers, kept across units with the same backends: framework start-up
    (3-10 s per backend) is paid once per backend set, not once per unit.  One set is
    alive at a time, and units run grouped by backend set."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.key: tuple | None = None
        self.pool: Pool | None = None

    def get(self, cfg: FuzzConfig) -> Pool:
        key = tuple((b.label, b.target, b.device) for b in cfg.backends)
        if key != self.key or self.pool is None:
            self.close()
            self.pool = start_pool(cfg, self.log_dir)
            self.key = key
        return self.pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.pool, self.key = None, None


def run_shard(campaign: Campaign, out: Path, index: int, count: int,
              progress: Callable[[int], Any] | None = None, device: str = "cpu") -> dict[str, Any]:
    out = Path(out)
    units = campaign.shard(index, count)
    for seed in sorted({u.seed for u in units}):
        load_seed(seed)  # a bad seed name fails now, not hours into the shard
    status_path = out / "status" / f"shard-{index}-of-{count}.json"
    status: dict[str, Any] = {"campaign": campaign.name, "shard": index, "shards": count,
                              "host": socket.gethostname(), "units": len(units), "done": 0, "current": None,
                              "started": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def save_status() -> None:
        status["updated"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        write_atomic(status_path, json.dumps(status, indent=1).encode())

    pools = _Pools(out / "logs" / f"shard-{index}-of-{count}")
    try:
        for unit in sorted(units, key=lambda u: (u.backends, u.id)):  # same workers for a run of units
            udir = out / "units" / unit.id
            done = (udir / "DONE.json").is_file()
            if done and not pending(unit, udir):
                status["done"] += 1
                if progress is not None:
                    progress(1)
                continue
            status["current"] = unit.id
            status["stage"] = "localize" if done else "fuzz"
            save_status()
            cfg, plan = unit_config(unit, udir, device)
            pool = pools.get(cfg)
            pool.set_timeout(cfg.timeout)  # the pool outlives units; each has its own limit
            if not done:
                t0 = time.perf_counter()
                seed = load_seed(unit.seed)
                fuzz(seed, seed.inputs, cfg, plan=plan, pool=pool)
                summary = {"unit": unit.id, "seed": unit.seed, "backends": list(unit.backends),
                           "settings": unit.settings, "search": unit.search, "localize": unit.localize,
                           "seconds": round(time.perf_counter() - t0, 2), **summarize(udir)}
                write_atomic(udir / "DONE.json", json.dumps(summary, indent=1, default=str).encode())  # commit
            if pending(unit, udir):
                if not done:
                    status["stage"] = "localize"
                    save_status()
                localize_unit(unit, udir, pool)  # RQ2 stage: its own commit point, localize/DONE.json
            status["done"] += 1
            if progress is not None:
                progress(1)
    finally:
        pools.close()
    status["current"] = status["stage"] = None
    save_status()
    return status
