"""A campaign as a real SLURM job array: 4 tasks, one cancelled midway and resubmitted;
the merged result equals a single-process run of the same campaign."""
from __future__ import annotations

import json
import os
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
    if reason and os.environ.get("CI") == "true":  # CI installs SLURM (make slurm): its absence is a failure
        pytest.fail(f"CI=true but the real-SLURM test cannot run: {reason}")
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


@pytest.mark.slow  # about a minute on 2 cores; make test keeps test_step_sparse_and_explicit_arrays_list_the_right_units
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

    assert json.loads((out / "shards.json").read_text())["ids"] == [0, 1, 2, 3]  # the layout, fixed on first use
    done = {d.name: (d / "results.jsonl").read_bytes() for d in (out / "units").iterdir() if not d.name.endswith("r1")}
    # resubmit the cancelled task alone: it reads the layout from OUT/shards.json and runs shard 1 of 4 only
    again = cluster.sbatch("--array=1", env_audee, f"--output={tmp_path}/again-%a.out", str(script), str(cfg),
                           str(out), cwd=ROOT)
    cluster.wait(again)
    log = (tmp_path / "again-1.out").read_text()
    assert "shard 1/4: 1 of 4 units: lenet5--tensorflow--r1" in log, log[-2000:]
    assert {n: (out / "units" / n / "results.jsonl").read_bytes() for n in done} == done
    assert _units(out) == _units(tmp_path / "one")
    for run in (out, tmp_path / "one"):
        r = subprocess.run([sys.executable, "-m", "audee", "report", str(run)], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
    for name in ("table1.csv", "outcomes.csv", "table3.csv"):
        assert (out / "report" / name).read_text() == (tmp_path / "one" / "report" / name).read_text()


def test_step_sparse_and_explicit_arrays_list_the_right_units(cluster, tmp_path):
    """The shard arithmetic against the variables a real SLURM sets (units listed, not run)."""
    from audee.campaign import load_campaign

    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    ids = [u.id for u in load_campaign(cfg).units]
    lister = tmp_path / "audee-list"  # AUDEE for the script: the same command line, plus --list-units
    lister.write_text(f"#!/bin/sh\nexec {sys.executable} -m audee \"$@\" --list-units\n")
    lister.chmod(0o755)
    script = str(ROOT / "experiments" / "slurm" / "audee-array-cpu.sbatch")

    def run(array: str, name: str, *extra: str) -> dict[int, str]:
        job = cluster.sbatch(f"--array={array}", f"--export=ALL,AUDEE={lister}", f"--output={tmp_path}/{name}-%a.out",
                             script, str(cfg), str(tmp_path / name), *extra, cwd=ROOT)
        cluster.wait(job)
        return {int(f.stem.rsplit("-", 1)[1]): f.read_text() for f in tmp_path.glob(f"{name}-*.out")}

    step = run("0-6:2", "step")  # 4 tasks, 4 shards: every unit once
    assert sorted(step) == [0, 2, 4, 6]
    assert {t: [line for line in text.split() if line in ids] for t, text in step.items()} == \
        {0: ids[0:1], 2: ids[1:2], 4: ids[2:3], 6: ids[3:4]}, step
    sparse = run("1,3,7", "sparse")  # no layout from sparse ids: each task stops and asks for N
    assert sorted(sparse) == [1, 3, 7]
    for text in sparse.values():
        assert "pass --shards N" in text and "Traceback" not in text and not set(text.split()) & set(ids), text
    explicit = run("3", "explicit", "4")  # one task of --shards 4, submitted alone: exactly shard 3
    assert [line for line in explicit[3].split() if line in ids] == [ids[3]], explicit
    assert not any((tmp_path / name / "shards.json").exists() for name in ("step", "sparse", "explicit"))
