"""Campaigns: configs are schema-checked, shards are deterministic (SLURM arrays too), and
a campaign killed with SIGKILL at random points resumes without losing or duplicating."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audee.campaign import load_campaign, shard_of
from audee.errors import AudeeError, ConfigError
from audee.store import ResultsTable

CONFIG = """name: tiny
defaults: {variants: 5, batch: 8}
runs:
  - seeds: [lenet5]
    backends: [[tensorflow, onnxruntime]]
    rngs: [0, 6]
"""


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


def test_sigkill_at_random_points_loses_and_duplicates_nothing(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG)
    ref = _campaign(cfg, tmp_path / "ref")
    assert ref.wait(timeout=600) == 0
    rnd = random.Random(7)
    out = tmp_path / "killed"
    for _ in range(3):
        p = _campaign(cfg, out)
        time.sleep(rnd.uniform(9, 16))  # workers start in ~8 s: kills land mid-unit
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
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
    for shard in ("0/2", "1/2"):  # shards write into one directory; the report merges them
        r = subprocess.run([sys.executable, "-m", "audee", "campaign", str(cfg), "--out", str(tmp_path / "o"),
                            "--shard", shard, "--no-progress"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "audee", "report", str(tmp_path / "o")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
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


def test_dedup_counts_inputs_once_and_weights_apart():
    from audee.report.dedup import unique_inconsistencies

    searches = {"s-ga": {"target": "lenet5-v1", "level": "input"}, "s-wt": {"target": "lenet5-v1", "level": "weight"},
                "s-rnd": {"target": "lenet5-v1", "level": "input"}}
    rows = [{"id": "a", "search_id": "s-ga", "inconsistent_pairs": ["x|y"]},
            {"id": "b", "search_id": "s-rnd", "inconsistent_pairs": ["x|y"]},   # same DNN, other input: same
            {"id": "c", "search_id": "s-wt", "inconsistent_pairs": ["x|y"]},    # other weights: new
            {"id": "d", "search_id": "s-wt", "inconsistent_pairs": ["x|y", "x|z"]},
            {"id": "lenet5-v2", "inconsistent_pairs": ["x|y"]}]                # network level: the DNN itself
    got = unique_inconsistencies("u", rows, searches)
    assert sorted((u["level"], u["case_id"], u["pair"]) for u in got) == [
        ("IN", "a", "x|y"), ("NET", "lenet5-v2", "x|y"), ("WT", "c", "x|y"), ("WT", "d", "x|y"), ("WT", "d", "x|z")]


RQ2 = """name: rq2-tiny
defaults: {variants: 2, batch: 8}
runs:
  - seeds: [lenet5]
    backends: [[tensorflow, "localize.faults:ConvReluAsElu"]]
"""


def test_rq2_stage_localizes_every_unique_inconsistency_and_resumes(tmp_path):
    """An injected fault (conv ReLU computed as ELU on one backend) makes both variants
    inconsistent; the stage localizes each to (Conv2D, activation), samples consistent
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
    assert set(data.consistent["case_id"]) <= {"lenet5-seed", "lenet5-v00000", "lenet5-v00001"}
    r = subprocess.run([sys.executable, "-m", "audee", "report", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    index = (out / "report" / "index.md").read_text()
    assert "Table 2" in index and "figure4.png" in index and (out / "report" / "figure4.png").stat().st_size > 1000


def test_shipped_campaigns_load_and_rq2_adds_localization_to_the_rq1_units():
    root = Path(__file__).resolve().parents[1] / "experiments" / "campaigns"
    loaded = {p.stem: load_campaign(p) for p in sorted(root.glob("*.yaml"))}
    assert {"rq1-cpu", "rq2-cpu", "rq3-nan-cpu", "rq1-full", "rq2-full", "rq3-full"} <= set(loaded)

    def plain(c):
        return [(u.id, u.seed, u.backends, u.settings, u.search) for u in c.units]

    for size in ("cpu", "full"):
        rq1, rq2 = loaded[f"rq1-{size}"], loaded[f"rq2-{size}"]
        assert plain(rq1) == plain(rq2)  # same units: rq2 run into rq1's --out only adds localize/
        assert all(u.localize is None for u in rq1.units) and all(u.localize is not None for u in rq2.units)
