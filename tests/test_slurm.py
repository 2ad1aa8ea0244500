"""A campaign as a real SLURM job array: 4 tasks, one cancelled midway and resubmitted;
the merged result equals a single-process run of the same campaign."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from audee.store import ResultsTable
from tests.slurm_cluster import Cluster, unavailable

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "name: slurm\ndefaults: {variants: 12, batch: 8}\nruns:\n  - seeds: [lenet5]\n" \
         "    backends: [[tensorflow]]\n    rngs: [0, 1, 2, 3]\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable()
    if reason:
        print(f"\nSKIPPING the real-SLURM test: {reason}")
        pytest.skip(reason)
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _units(out: Path) -> dict[str, list]:
    return {d.name: sorted((r["id"], r["status"], tuple(r["kinds"])) for r in ResultsTable(d / "results.jsonl").rows())
            for d in sorted((out / "units").iterdir())}


def test_job_array_with_a_cancelled_task_matches_a_single_process_run(cluster, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    single = subprocess.run([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(tmp_path / "one"),
                             "--no-progress"], capture_output=True, text=True, timeout=900)
    assert single.returncode == 0, single.stderr[-2000:]

    out = tmp_path / "array"
    script = ROOT / "experiments" / "slurm" / "audee-array-cpu.sbatch"
    env_audee = f"--export=ALL,AUDEE={Path(sys.executable).parent / 'audee'}"
    job = cluster.sbatch("--array=0-3", env_audee, f"--output={tmp_path}/task-%a.out", str(script), str(cfg),
                         str(out), cwd=ROOT)
    results = out / "units" / "lenet5--tensorflow--r1" / "results.jsonl"
    deadline = time.monotonic() + 600
    while len(list(ResultsTable(results).rows())) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)  # task 1 is midway: some of its test cases are committed, not all
    subprocess.run(["scancel", f"{job}_1"], env=cluster.env, check=True)
    cluster.wait(job)
    assert 3 <= len(list(ResultsTable(results).rows())) < 13
    assert not (out / "units" / "lenet5--tensorflow--r1" / "DONE.json").exists()  # it really was cut short

    again = cluster.sbatch("--array=0-3", env_audee, f"--output={tmp_path}/again-%a.out", str(script), str(cfg),
                           str(out), cwd=ROOT)
    cluster.wait(again)
    assert _units(out) == _units(tmp_path / "one")
    for run in (out, tmp_path / "one"):
        r = subprocess.run([sys.executable, "-m", "audee", "report", str(run)], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    for name in ("table1.csv", "outcomes.csv", "table3.csv"):
        assert (out / "report" / name).read_text() == (tmp_path / "one" / "report" / name).read_text()
