"""Campaign throughput with 1 shard and with 2 shards in parallel, side by side in one run.

    python experiments/bench_shards.py [--variants 15]

Both runs execute the same campaign (4 units) into fresh directories; the 2-shard run
starts `audee campaign --shard 0/2` and `--shard 1/2` at once, as two SLURM array tasks
on one node would.  Scaling efficiency = (T1 / T2) / 2.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """name: bench-shards
defaults: {{variants: {variants}, batch: 16}}
runs:
  - seeds: [lenet5, lstm]
    backends: [[tensorflow, jax]]
    rngs: [0, 1]
"""


def _campaign(cfg: Path, out: Path, shard: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(out), "--shard", shard,
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "c.yaml"
        cfg.write_text(CONFIG.format(variants=args.variants))
        units = 4
        t = time.perf_counter()
        assert _campaign(cfg, Path(tmp) / "one", "0/1").wait() == 0
        t1 = time.perf_counter() - t
        t = time.perf_counter()
        procs = [_campaign(cfg, Path(tmp) / "two", s) for s in ("0/2", "1/2")]
        assert all(p.wait() == 0 for p in procs)
        t2 = time.perf_counter() - t
        cases = sum(1 for _ in (Path(tmp) / "two").glob("units/*/variants/*.json"))
    print(f"campaign: {units} units, {cases} test cases (variants {args.variants}, tensorflow+jax)")
    print(f"1 shard : {t1:7.1f} s   {units / t1 * 60:6.2f} units/min")
    print(f"2 shards: {t2:7.1f} s   {units / t2 * 60:6.2f} units/min   speed-up {t1 / t2:.2f}   "
          f"scaling efficiency {t1 / t2 / 2:.0%}")


if __name__ == "__main__":
    main()
