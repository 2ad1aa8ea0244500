"""Campaigns: configs are schema-checked, shards are deterministic (SLURM arrays too), and
a campaign killed with SIGKILL at random points resumes without losing or duplicating."""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from audee.campaign import load_campaign, shard_of
from audee.core.errors import AudeeError, ConfigError
from audee.store import ResultsTable

CONFIG = """name: tiny
defaults: {variants: 5, batch: 8}
runs:
  - seeds: [lenet5]
    backends: [[tensorflow, onnxruntime]]
    rngs: [0, 6]
"""


def test_a_training_run_of_the_same_targets_has_units_of_its_own(tmp_path):
    """The ops campaign runs each op forward and, in another run, its gradients on the same
    backends and rng: the gradient run's units are its own (``-train``), not the forward
    run's replaced."""
    p = tmp_path / "c.yaml"
    p.write_text("name: x\nruns:\n  - ops: [sqrt, log]\n    backends: [[tensorflow, jax]]\n"
                 "  - ops: [sqrt, log]\n    phase: train\n    backends: [[tensorflow, jax]]\n")
    units = load_campaign(p).units
    assert len(units) == 4
    trained = [u for u in units if u.settings.get("phase") == "train"]
    assert len(trained) == 2 and all(u.id.endswith("--r0-train") for u in trained)


def test_units_and_shards_are_deterministic(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(CONFIG.replace("rngs: [0, 6]", "rngs: [0, 1, 2, 3, 4]"))
    c = load_campaign(p)
    ids = [u.id for u in c.units]
    assert ids == sorted(ids) and len(ids) == 5
    shards = [[u.id for u in c.shard(i, 3)] for i in range(3)]
    assert sorted(sum(shards, [])) == ids and all(shards)
    assert shard_of(None, {"SLURM_ARRAY_TASK_ID": "7", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_COUNT": "4"}) \
        == (2, 4)
    assert shard_of(None, {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_MAX": "3"}) == (1, 4)
    assert shard_of("2/3", {}) == (2, 3) and shard_of(None, {}) == (0, 1)
    with pytest.raises(AudeeError, match="--shard"):
        shard_of("3/3", {})


@pytest.mark.parametrize("body, field", [
    ("name: x\nruns:\n  - seeds: [lenet5]\n    backends: tensorflow\n", "runs[0].backends"),
    ("name: x\nruns:\n  - seeds: [lenet5]\n    backends: [[tensorflow]]\n    variantz: 3\n", "runs[0].variantz"),
    ("name: x\ndefaults: {batch: big}\nruns: []\n", "defaults.batch"),
    ("name: x\nruns:\n  - seeds: [lenet5]\n    backends: [[tensorflow]]\n    search: {fitness: nan}\n",
     "runs[0].search.level"),
    ("name: x\nruns:\n  - seeds: [lenet5]\n    backends: [[tensorflow]]\n    localize: {consistant: 3}\n",
     "runs[0].localize.consistant"),
    ("name: x\nruns:\n  - seeds: [lenet5]\n    backends: [[tensorflow]]\n    localize: {t1: -1}\n",
     "runs[0].localize.t1"),
    # two runs making one unit: the second would have replaced the first without a word
    ("name: x\nruns:\n  - ops: [sqrt]\n    backends: [[tensorflow, jax]]\n  - ops: [sqrt]\n    variants: 9\n"
     "    backends: [[tensorflow, jax]]\n", "runs[1]"),
])
def test_bad_campaign_fields_are_named(tmp_path, body, field):
    p = tmp_path / "bad.yaml"
    p.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_campaign(p)
    assert f"bad.yaml: {field}" in str(err.value), str(err.value)


def _campaign(cfg: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(out), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _state(out: Path) -> dict[str, list[tuple]]:
    units = {}
    for d in sorted((out / "units").iterdir()):
        rows = list(ResultsTable(d / "results.jsonl").rows())
        units[d.name] = sorted((r["id"], r["status"], tuple(r["kinds"])) for r in rows)
    return units


@pytest.mark.slow  # many kills and resumes; make test keeps the SIGTERM and resume tests
def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    ref = _campaign(cfg, tmp_path / "ref")
    assert ref.wait(timeout=600) == 0
    rnd = random.Random(7)
    out = tmp_path / "killed"
    # three kills at random rows of the 12 (2 units x 6 cases), none at a unit's first or last case
    for target in sorted(rnd.sample([1, 2, 3, 4, 7, 8, 9, 10], 3)):
        p = _campaign(cfg, out)
        _wait_for(lambda: sum(_rows(out)) >= target and bool(_started_units(out)), p, f"row {target} mid-unit")
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        assert _started_units(out), "the kill landed between units: it tests no resume of a half-done unit"
    final = _campaign(cfg, out)
    assert final.wait(timeout=600) == 0
    got, want = _state(out), _state(tmp_path / "ref")
    assert got == want                      # same cases, same verdicts: nothing lost
    for rows in got.values():
        ids = [r[0] for r in rows]
        assert len(ids) == len(set(ids)) == 6  # the seed + 5 variants, none twice
    for d in (out / "units").iterdir():
        assert json.loads((d / "DONE.json").read_text())["test_cases"] == 6
    status = json.loads((out / "status" / "shard-0-of-1.json").read_text())
    assert status["done"] == status["units"] == 2 and status["current"] is None


def test_report_merges_units_and_deduplicates_by_the_papers_criteria(tmp_path):
    from audee.report import load_campaign_dir, write_report
    from audee.report.write import table1

    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: r\ndefaults: {variants: 8, batch: 8}\nruns:\n  - seeds: [lenet5]\n"
                   "    backends: [[tensorflow, onnxruntime]]\n    rngs: [6]\n"
                   "    invalid_prob: 0.3\n")
    reported = []
    for shard in ("0/2", "1/2"):  # shards write into one directory; the report merges them
        r = subprocess.run([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(tmp_path / "o"),
                            "--shard", shard, "--no-progress"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        r = subprocess.run([sys.executable, "-m", "audee", "report", str(tmp_path / "o")], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        reported.append(r.stdout.splitlines()[1].strip())
    # what the counts cover leads them: after one shard of two, a report says the other has not run
    units = json.loads((tmp_path / "o" / "status" / "shard-0-of-2.json").read_text())["units"]
    assert reported[0] == (f"over 9 test cases; {units} of {units} units done (1 of 2 shards not started, their "
                           f"units not counted) - the counts cover what ran; rerun `audee campaign` to finish"), reported
    assert reported[1] == f"over 9 test cases; {units} of {units} units done", reported
    index = (tmp_path / "o" / "report" / "index.md").read_text()
    assert "Table 1" in index and "Test cases by outcome" in index
    data = load_campaign_dir(tmp_path / "o")
    assert len(data.cases) == 9
    outcomes = (tmp_path / "o" / "report" / "outcomes.csv").read_text()
    assert "divergent_acceptance" in outcomes.splitlines()[0]
    # two inputs flipping on one DNN, same weights, same pair: one inconsistency
    import pandas as pd

    dup = pd.DataFrame([{"id": "s-v1", "seed": "s", "unit": "u", "level": "NET", "inconsistent_pairs": ["a|b"]},
                        {"id": "s-v1", "seed": "s", "unit": "u", "level": "NET", "inconsistent_pairs": ["a|b"]},
                        {"id": "s-v2", "seed": "s", "unit": "u", "level": "NET", "inconsistent_pairs": ["a|b"]}])
    assert table1(dup)["NET"].tolist() == [2]
    assert write_report(data, tmp_path / "again")[-1].name == "index.md"


def test_a_report_says_which_units_its_counts_cover_and_refuses_a_campaign_where_nothing_ran(tmp_path, capsys):
    """A killed, stopped or unstarted unit is not a clean one: "new bugs: 0" over part of a
    campaign says so, and over none of it is no report at all."""
    from audee.cli import main
    from audee.core.exitcodes import ExitCode

    row = {"id": "c1", "seed": "lenet5", "variant": 0, "status": "pass", "kinds": [], "seconds": 0.1,
           "backends": {"jax": "ok", "torch": "ok"}, "pairs": {}, "signatures": [], "exercised": []}
    out = tmp_path / "o"
    for uid in ("u-done", "u-killed", "u-error", "u-empty"):
        (out / "units" / uid).mkdir(parents=True)
    (out / "status").mkdir()
    (out / "status" / "shard-0-of-2.json").write_text(json.dumps(
        {"shard": 0, "shards": 2, "unit_ids": ["u-done", "u-killed", "u-error", "u-empty", "u-later"]}))
    assert main(["report", str(out)]) == ExitCode.BAD_INPUT  # nothing ran yet: no report of zeros
    assert capsys.readouterr().err.strip() == (f"audee: error: {out}: no test case to report in its 5 units: "
                                               "nothing ran there yet")
    assert not (out / "report").exists()
    for uid in ("u-done", "u-killed"):
        (out / "units" / uid / "results.jsonl").write_text(json.dumps({**row, "id": f"{uid}-c1"}) + "\n")
    (out / "units" / "u-done" / "DONE.json").write_text("{}")
    (out / "units" / "u-error" / "ERROR.json").write_text(json.dumps({"unit": "u-error", "error": "boom"}))
    assert main(["report", str(out)]) == ExitCode.OK
    line = ("2 test cases; 1 of 5 units done (1 stopped on an internal error, 1 partly run, 2 not run, 1 of 2 "
            "shards not started, their units not counted) - the counts cover what ran; rerun `audee campaign` "
            "to finish")
    assert capsys.readouterr().out.splitlines()[1] == f"  over {line}"
    assert f"Over {line}." in (out / "report" / "index.md").read_text().splitlines()
    assert f"Over {line}." in (out / "report" / "roots.md").read_text().splitlines()


def test_dedup_counts_inputs_once_and_weights_apart():
    from audee.report.dedup import unique_inconsistencies

    from audee.records import ResultRow, SearchRun

    searches = {sid: SearchRun(id=sid, target="lenet5-v1", level=level)
                for sid, level in (("s-ga", "input"), ("s-wt", "weight"), ("s-rnd", "input"))}
    rows = [{"id": "a", "search_id": "s-ga", "inconsistent_pairs": ["x|y"]},
            {"id": "b", "search_id": "s-rnd", "inconsistent_pairs": ["x|y"]},   # same DNN, other input: same
            {"id": "c", "search_id": "s-wt", "inconsistent_pairs": ["x|y"]},    # other weights: new
            {"id": "d", "search_id": "s-wt", "inconsistent_pairs": ["x|y", "x|z"]},
            {"id": "lenet5-v2", "inconsistent_pairs": ["x|y"]}]                # network level: the DNN itself
    rows = [ResultRow(**r, seed="lenet5", status="fail", kinds=["inconsistency"], backends={"x": "ok", "y": "ok"})
            for r in rows]
    got = unique_inconsistencies("u", rows, searches)
    assert sorted((u["level"], u["case_id"], u["pair"]) for u in got) == [
        ("IN", "a", "x|y"), ("NET", "lenet5-v2", "x|y"), ("WT", "c", "x|y"), ("WT", "d", "x|y"), ("WT", "d", "x|z")]


RQ2 = """name: rq2-tiny
defaults: {variants: 3, batch: 8, operators: redraw}
runs:
  - seeds: [lenet5]
    rngs: [5]
    backends: [[tensorflow, "localize.faults:ConvReluAsElu"]]
"""


@pytest.mark.slow  # two campaign runs and a localization per inconsistency; the stage's parts are tested apart
def test_rq2_stage_localizes_every_unique_inconsistency_and_resumes(tmp_path):
    """An injected fault (conv ReLU computed as ELU on one backend) makes two of rng 5's three
    parameter-redraw variants inconsistent; the stage localizes each to (Conv2D, activation), samples consistent
    cases for Figure 4, and can be added to a finished campaign or resumed file by file."""
    from audee.report import load_campaign_dir
    from audee.report.write import signatures, table2

    out = tmp_path / "o"
    plain, rq2 = tmp_path / "plain.yaml", tmp_path / "rq2.yaml"
    plain.write_text(RQ2)
    rq2.write_text(RQ2 + "    localize: {consistent: 2}\n")

    def run(cfg: Path) -> None:
        r = subprocess.run([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(out), "--no-progress"],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]

    run(plain)  # RQ1 only; then the same units with the RQ2 stage added: the fuzz run is not redone
    unit = next((out / "units").iterdir())
    before = (unit / "results.jsonl").read_bytes()
    assert not (unit / "localize").exists()
    run(rq2)
    assert (unit / "results.jsonl").read_bytes() == before
    ldir = unit / "localize"
    files = sorted(ldir.glob("*--*.json"))
    inconsistent = [r for r in ResultsTable(unit / "results.jsonl").rows() if r["inconsistent_pairs"]]
    assert len(files) == len(inconsistent) >= 1
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["reproduced"] and doc["report"]["rounds"], doc
        top = doc["localized"][0]
        assert (top["api"], top["param"]) == ("Conv2D", "activation")
        assert doc["top1_rate"] > 1000
        assert top["layer"] in doc["cradle"]

    # resume file by file: a lost localization (and the stage's commit point) is redone, the rest kept
    kept = {f.name: f.stat().st_mtime_ns for f in files[1:]}
    files[0].unlink()
    (ldir / "DONE.json").unlink()
    run(rq2)
    assert files[0].is_file() and (ldir / "DONE.json").is_file()
    assert {f.name: f.stat().st_mtime_ns for f in files[1:]} == kept

    data = load_campaign_dir(out)
    t2 = table2(data.localized)
    assert t2[["seed", "#M", "#Layer", "located"]].values.tolist() == [["lenet5", len(files), 9, len(files)]]
    sig = signatures(data.localized)
    assert sig[["api", "param", "cases"]].values.tolist() == [["Conv2D", "activation", len(files)]]
    assert set(data.consistent["case_id"]) <= {"lenet5-seed", "lenet5-v00000", "lenet5-v00001", "lenet5-v00002"}
    r = subprocess.run([sys.executable, "-m", "audee", "report", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    index = (out / "report" / "index.md").read_text()
    assert "Table 2" in index and "figure4.png" in index and (out / "report" / "figure4.png").stat().st_size > 1000


def test_shipped_campaigns_load_and_rq2_adds_localization_to_the_rq1_units():
    root = Path(__file__).resolve().parents[1] / "experiments" / "campaigns"
    # versions-cpu names the second environment (`make env-prev`), relative to the directory audee runs in
    prev = Path(".venv-prev/bin/python")
    loaded = {p.stem: load_campaign(p) for p in sorted(root.glob("*.yaml"))
              if p.stem != "versions-cpu" or prev.is_file()}
    if not prev.is_file():
        with pytest.raises(ConfigError, match=r"versions-cpu\.yaml: envs\.prev: environment 'prev': "
                                              r"\.venv-prev/bin/python is not an executable file"):
            load_campaign(root / "versions-cpu.yaml")
    assert {"rq1-cpu", "rq2-cpu", "rq3-nan-cpu", "rq1-full", "rq2-full", "rq3-full"} <= set(loaded)

    def plain(c):
        return [(u.id, u.seed, u.backends, u.settings, u.search) for u in c.units]

    for size in ("cpu", "full"):
        rq1, rq2 = loaded[f"rq1-{size}"], loaded[f"rq2-{size}"]
        assert plain(rq1) == plain(rq2)  # same units: rq2 run into rq1's --out only adds localize/
        assert all(u.localize is None for u in rq1.units) and all(u.localize is not None for u in rq2.units)


def _env(**kw) -> dict[str, str]:
    return {f"SLURM_ARRAY_TASK_{k.upper()}": str(v) for k, v in kw.items()}


def test_job_array_layouts_step_sparse_resubmitted_and_garbage(tmp_path):
    """Shards from SLURM array variables: a step array is a full layout, recorded in
    OUT/shards.json on first use; a task resubmitted alone (--array=4) runs exactly its own
    shard from that record; sparse ids, garbage values and conflicts are one-line errors."""
    out = tmp_path / "o"
    tasks = [shard_of(None, _env(id=t, min=0, max=6, step=2, count=4), out=out) for t in (0, 2, 4, 6)]
    assert tasks == [(0, 4), (1, 4), (2, 4), (3, 4)]  # --array=0-6:2 covers every unit
    assert json.loads((out / "shards.json").read_text())["ids"] == [0, 2, 4, 6]
    alone = _env(id=4, min=4, max=4, step=1, count=1)  # sbatch --array=4: the recorded layout decides
    assert shard_of(None, alone, out=out) == (2, 4)
    assert shard_of(None, alone, out=tmp_path / "fresh") == (0, 1)  # no record: that array is the layout
    with pytest.raises(AudeeError, match="SLURM_ARRAY_TASK_ID=5 is not one of the task ids 0-6:2"):
        shard_of(None, _env(id=5, min=5, max=5, count=1), out=out)
    with pytest.raises(AudeeError, match="--shard 1/3 conflicts with the recorded layout of 4 shards"):
        shard_of("1/3", {}, out=out)
    assert shard_of("1/4", {}, out=out) == (1, 4)
    with pytest.raises(AudeeError, match="--shards 8 conflicts"):
        shard_of(None, _env(id=3, min=0, max=7, count=8), shards=8, out=out)
    # sparse ids (--array=1,3,7): refused, --shards N named
    with pytest.raises(AudeeError, match="SLURM_ARRAY_TASK_COUNT: .*sparse.*--shards N"):
        shard_of(None, _env(id=3, min=1, max=7, step=1, count=3), out=tmp_path / "sparse")
    assert not (tmp_path / "sparse" / "shards.json").exists()
    # --shards N: the task id is the shard; a resubmitted single task needs nothing else
    assert shard_of(None, _env(id=3, min=3, max=3, count=1), shards=8, out=tmp_path / "s") == (3, 8)
    assert shard_of(None, _env(id=5, min=5, max=5, count=1), out=tmp_path / "s") == (5, 8)
    with pytest.raises(AudeeError, match="--shards: SLURM_ARRAY_TASK_ID=8 is not a shard of --shards 8"):
        shard_of(None, _env(id=8, min=8, max=8, count=1), shards=8)
    with pytest.raises(AudeeError, match="--shards: needs SLURM_ARRAY_TASK_ID"):
        shard_of(None, {}, shards=2)
    for var, env in [("SLURM_ARRAY_TASK_ID", _env(id="3x", max=7)), ("SLURM_ARRAY_TASK_ID", _env(id="")),
                     ("SLURM_ARRAY_TASK_MAX", _env(id=1, max="n/a")),
                     ("SLURM_ARRAY_TASK_STEP", _env(id=1, max=3, step="two"))]:
        with pytest.raises(AudeeError, match=f"^{var}: expected an integer"):
            shard_of(None, env)
    with pytest.raises(AudeeError, match="SLURM_ARRAY_TASK_ID=9 is not in the array 0-3"):
        shard_of(None, _env(id=9, min=0, max=3))


def _audee(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    return subprocess.run([sys.executable, "-m", "audee", *args], capture_output=True, text=True, timeout=timeout,
                          env={**clean, **(env or {})})


def test_list_units_and_one_line_errors_from_the_command_line(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG.replace("rngs: [0, 6]", "rngs: [0, 1, 2, 3, 4]"))
    ids = [u.id for u in load_campaign(cfg).units]
    out = tmp_path / "o"
    got = [_audee("campaign", str(cfg), "--out", str(out), "--list-units", "--shard", f"{i}/2").stdout.split()
           for i in range(2)]
    assert got == [ids[0::2], ids[1::2]]
    r = _audee("campaign", str(cfg), "--out", str(out), "--list-units",
               env=_env(id=4, min=0, max=6, step=2, count=4))
    assert r.returncode == 0 and r.stdout.split() == ids[2::4] and "shard 2/4" in r.stderr
    assert not (out / "shards.json").exists()  # listing records nothing
    for env, words in [(_env(id="seven"), "SLURM_ARRAY_TASK_ID: expected an integer, got 'seven'"),
                       (_env(id=3, min=1, max=7, count=3), "pass --shards N")]:
        r = _audee("campaign", str(cfg), "--out", str(out), "--list-units", env=env)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _audee("campaign", str(cfg), "--out", str(out), "--shards", "4", "--list-units", env=_env(id=4, max=4))
    assert r.returncode == 2 and "not a shard of --shards 4" in r.stderr


def test_unit_ids_are_single_safe_path_components(tmp_path):
    from audee.campaign import Unit
    from audee.campaign.runner import unit_dir

    seed = tmp_path / "x" / "myseed"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"name: p\nruns:\n  - seeds: [lenet5, {seed}, '../up', '.']\n"
                   "    backends: [[tensorflow, 'tests.plugins:SleepingBackend']]\n")
    units = {u.seed: u.id for u in load_campaign(cfg).units}
    assert units["lenet5"] == "lenet5--tensorflow+tests.plugins.SleepingBackend--r0"  # shipped names: unchanged
    assert units[str(seed)].startswith("myseed-") and units[str(seed)] != units["lenet5"]
    for uid in units.values():
        assert all(c.isalnum() or c in "._+-" for c in uid) and uid not in (".", ".."), uid
        assert unit_dir(tmp_path / "o", Unit(uid, "s", ("tensorflow",), {})).parent == tmp_path / "o" / "units"
    other = tmp_path / "y" / "myseed"  # same basename, other path: another unit
    cfg.write_text(f"name: p\nruns:\n  - seeds: [{seed}, {other}]\n    backends: [[tensorflow]]\n")
    assert len({u.id for u in load_campaign(cfg).units}) == 2
    with pytest.raises(AudeeError, match="outside"):
        unit_dir(tmp_path / "o", Unit("../../escape", "s", ("tensorflow",), {}))


def _holder(path: Path) -> subprocess.Popen:
    """A process holding an output directory's lock until killed."""
    p = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom audee.store.lock import dir_lock\n"
                          "with dir_lock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(600)\n",
                          str(path)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_second_fuzz_on_the_same_out_fails_at_once_naming_the_holder(tmp_path):
    out = tmp_path / "o"
    holder = _holder(out)
    try:
        r = _audee("fuzz", "--seed", "lenet5", "--backends", "jax", "--variants", "1", "--out", str(out),
                   "--no-progress")
        assert holder.poll() is None  # it did not wait for the lock: the holder still has it
        assert r.returncode == 2 and f"in use by pid {holder.pid}" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert sorted(p.name for p in out.iterdir()) == [".audee.lock"]  # it wrote nothing
    finally:
        holder.kill()
        holder.wait()


def test_one_writer_per_shard_and_per_unit(tmp_path):
    """Two tasks on one shard, or two shard layouts on one unit: the second fails at once
    naming the first one's pid, and nothing is recorded twice.  The first runs 40 variants, so
    that it still holds its locks while the three others start (4 were done before the third
    on a loaded machine)."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: lock\ndefaults: {variants: 40, batch: 4}\nruns:\n  - seeds: [lenet5]\n"
                   "    backends: [[jax]]\n")
    out = tmp_path / "o"
    first = subprocess.Popen([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(out),
                              "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        (unit,) = [u.id for u in load_campaign(cfg).units]
        deadline = time.monotonic() + 120
        while not (out / "units" / unit / ".audee.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, first.stderr.read()
        same = _audee("campaign", str(cfg), "--out", str(out), "--no-progress", timeout=60)
        assert same.returncode == 2 and f"shard 0/1 of {out} is in use by pid {first.pid}" in same.stderr, \
            same.stderr
        other = _audee("campaign", str(cfg), "--out", str(out), "--shard", "0/2", "--no-progress", timeout=120)
        assert other.returncode == 2 and f"units/{unit} is in use by pid {first.pid}" in other.stderr, other.stderr
        direct = _audee("fuzz", "--seed", "lenet5", "--backends", "jax", "--out", str(out / "units" / unit),
                        "--no-progress", timeout=60)
        assert direct.returncode == 2 and f"in use by pid {first.pid}" in direct.stderr, direct.stderr
        assert first.wait(timeout=600) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    rows = list(ResultsTable(out / "units" / unit / "results.jsonl").rows())
    assert len(rows) == len({r["id"] for r in rows}) == 41
    assert json.loads((out / "units" / unit / "DONE.json").read_text())["test_cases"] == 41
    assert not (out / "status" / "shard-0-of-2.json").exists()


PARALLEL = """name: parallel
defaults: {variants: 8, batch: 8, threads: 1}
runs:
  - seeds: [lenet5]
    backends: [[tensorflow]]
    rngs: [0, 6]
"""


def _wait_for(check: Callable[[], bool], proc: subprocess.Popen, what: str, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while not check():
        assert proc.poll() is None, f"the campaign ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {limit:.0f} s"
        time.sleep(0.1)


def _rows(out: Path) -> list[int]:
    return [sum(1 for _ in ResultsTable(d / "results.jsonl").rows()) if (d / "results.jsonl").is_file() else 0
            for d in sorted((out / "units").glob("*"))]


def _started_units(out: Path) -> list[str]:
    """Units with committed rows and no DONE.json: half done."""
    return [d.name for d, n in zip(sorted((out / "units").glob("*")), _rows(out))
            if n >= 1 and not (d / "DONE.json").exists()]


def _worker_pids(out: Path) -> set[int]:
    """Every backend worker the shard (and its slots) started, from the shard's log."""
    text = (out / "logs" / "shard-0-of-1" / "audee.log").read_text()
    return {int(m) for m in re.findall(r"worker \S+: started .* pid (\d+)", text)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").is_file() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _slots(shard: int) -> list[int]:
    """The shard's unit processes (multiprocessing spawn children; not its resource tracker)."""
    kids = Path(f"/proc/{shard}/task/{shard}/children").read_text().split()
    return [int(k) for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]


@pytest.mark.slow
def test_parallel_units_give_the_serial_results_and_resume_after_sigterm_and_a_dead_slot(tmp_path):
    """Two units at once, each in its own slot process with its own worker: the same cases
    and verdicts as the serial shard.  SIGTERM mid-unit: exit 143, every worker gone; a
    slot killed mid-unit: its unit gets ERROR.json, the other finishes, exit 6; then a
    rerun resumes both half-done units to the serial result."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(PARALLEL)
    ref = subprocess.run([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(tmp_path / "ref"),
                          "--no-progress", "--parallel-units", "1"], capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr[-2000:]
    out = tmp_path / "par"
    args = [sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(out), "--no-progress",
            "--parallel-units", "2"]

    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _wait_for(lambda: (out / "units").is_dir() and len(rows := _rows(out)) == 2 and min(rows) >= 1, first,
              "a row in both units")
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 143, first.stderr.read()
    assert _rows(out) != [9, 9]  # stopped mid-run
    assert len(_worker_pids(out)) == 2 and not any(_alive(p) for p in _worker_pids(out))

    second = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    status = out / "status" / "shard-0-of-1.json"

    def both_running() -> bool:
        try:
            now = json.loads(status.read_text())  # this run's status (the last one's may still say running)
            return now["pid"] == second.pid and len(now.get("running", {})) == 2 and len(_slots(second.pid)) == 2
        except (OSError, ValueError):
            return False

    _wait_for(both_running, second, "two units running")
    os.kill(_slots(second.pid)[0], signal.SIGKILL)
    assert second.wait(timeout=600) == 6, second.stderr.read()
    errors = sorted(out.glob("units/*/ERROR.json"))
    assert len(errors) == 1 and "died with exit code -9" in json.loads(errors[0].read_text())["error"]
    assert len(list(out.glob("units/*/DONE.json"))) == 1
    state = json.loads(status.read_text())
    assert state["done"] == 1 and [e["unit"] for e in state["errors"]] == [errors[0].parent.name]

    third = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-2000:]
    assert _state(out) == _state(tmp_path / "ref")   # same cases, same verdicts, none twice
    assert all(n == 9 for n in _rows(out)) and not list(out.glob("units/*/ERROR.json"))
    state = json.loads(status.read_text())
    assert state["done"] == state["units"] == 2 and state["current"] is None and "errors" not in state
    assert sorted(p.name for p in (out / "logs" / "shard-0-of-1").glob("slot-*")) == ["slot-0", "slot-1"]
