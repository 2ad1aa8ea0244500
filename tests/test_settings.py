"""Settings: one pydantic model per config (audee.settings) behind the CLI flags, campaign
files and search configs; bad input is one line (exit 2) naming the file or flag and the
field, found before anything runs, losing nothing."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.campaign import load_campaign
from audee.core.errors import AudeeError, ConfigError
from audee.settings import (TIE_MARGIN, TIMEOUT_S, FuzzSettings, LocalizeSettings, SearchSettings,
                            validate_settings)
from audee.store import ResultsTable

AUDEE = [sys.executable, "-m", "audee"]
ROOT = Path(__file__).resolve().parents[1]


def _fuzz(tmp: Path, *args: str, env: dict[str, str] | None = None, out: Path | None = None):
    out = out or tmp / "out"
    return subprocess.run(AUDEE + ["fuzz", "--out", str(out), "--no-progress", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})}, cwd=tmp)


def _spec_with(tmp: Path, change) -> Path:
    spec = json.loads((ROOT / "seeds" / "lenet5" / "spec.json").read_text())
    change(spec)
    p = tmp / "spec.json"
    p.write_text(json.dumps(spec))
    return p


def _corrupt_npz(tmp: Path) -> Path:
    p = tmp / "in.npz"
    np.savez_compressed(p, image=np.random.default_rng(0).random((4, 28, 28, 1), dtype=np.float32))
    data = bytearray(p.read_bytes())
    data[200:260] = b"x" * 60
    p.write_bytes(bytes(data))
    return p


def _set_param(spec: dict, api: str, key: str, value) -> None:
    next(la for la in spec["layers"] if la["api"] == api)["params"][key] = value


def _rename_api(spec: dict) -> None:
    spec["layers"][0]["api"] = "Conv9D"


CLI_CASES = {
    "rng": (lambda tmp: ["--rng", "-1"], "--rng: must be >= 0"),
    "max-layers": (lambda tmp: ["--max-layers", "-1"], "--max-layers: must be >= 0"),
    "invalid-prob": (lambda tmp: ["--invalid-prob", "2"], "--invalid-prob: must be <= 1"),
    "layer-rate": (lambda tmp: ["--layer-rate", "5"], "--layer-rate: must be <= 1"),
    "timeout-0": (lambda tmp: ["--timeout", "0"], "--timeout: must be > 0"),
    "timeout-neg": (lambda tmp: ["--timeout=-5"], "--timeout: must be > 0"),
    "batch": (lambda tmp: ["--batch", "0"], "--batch: must be >= 1"),
    "variants-huge": (lambda tmp: ["--variants", "1000000000"], "--variants: must be <= "),
    "layer": (lambda tmp: ["--level", "input", "--fitness", "nan", "--backends", "tensorflow", "--layer", "nope"],
              "--layer: no layer 'nope'"),
    "budget": (lambda tmp: ["--level", "input", "--backends", "tensorflow,jax", "--budget", "soon"], "--budget:"),
    "parents": (lambda tmp: ["--level", "input", "--backends", "tensorflow,jax", "--parents", "30"],
                "--parents: must be between"),
    "backend": (lambda tmp: ["--backends", "tensorflow,tourch"], "unknown backend 'tourch'"),
    "unknown-api": (lambda tmp: ["--seed", str(_spec_with(tmp, _rename_api))], "api: unknown API 'Conv9D'"),
    "wrong-type": (lambda tmp: ["--seed", str(_spec_with(tmp, lambda s: _set_param(s, "Conv2D", "filters", "many")))],
                   ".params.filters: 'many' is not a valid int"),
    "corrupt-inputs": (lambda tmp: ["--inputs", str(_corrupt_npz(tmp))], "in.npz: cannot read inputs"),
}


@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_bad_flags_are_one_line_exit_2_before_anything_runs(tmp_path, case):
    args, words = CLI_CASES[case]
    r = _fuzz(tmp_path, *args(tmp_path))
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()] if (tmp_path / "out").exists() else []
    assert not [p for p in written if p.suffix in (".jsonl", ".pkl") or p.name == "config.json"], written


def test_out_naming_a_file_is_refused_and_the_file_kept(tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("precious\n")
    for out in (f, f / "sub"):
        r = _fuzz(tmp_path, out=out)
        assert r.returncode == 2 and "--out:" in r.stderr and "not a directory" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    r = subprocess.run(AUDEE + ["campaign", str(ROOT / "experiments" / "campaigns" / "rq1-cpu.yaml"), "--out", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--out:" in r.stderr
    assert f.read_text() == "precious\n"


def test_empty_api_config_directory_is_an_error(tmp_path):
    empty = tmp_path / "apis"
    empty.mkdir()
    r = _fuzz(tmp_path, env={"AUDEE_API_CONFIGS": str(empty)})
    assert r.returncode == 2 and f"{empty}: no API configs" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


CAMPAIGN = "name: x\n{defaults}runs:\n  - seeds: [lenet5]\n    backends: [[tensorflow, onnxruntime]]\n{extra}"


@pytest.mark.parametrize("defaults, extra, field, words", [
    ("defaults: {variants: -3}\n", "", "defaults.variants", "must be >= 0"),
    ("", "    timeout: -5\n", "runs[0].timeout", "must be > 0"),
    ("defaults: {batch: 0}\n", "", "defaults.batch", "must be >= 1"),
    ("", "    invalid_prob: 1.5\n", "runs[0].invalid_prob", "must be <= 1"),
    ("", "    layer_rate: 2\n", "runs[0].layer_rate", "must be <= 1"),
    ("", "    search: {level: input, mutation_rate: 3}\n", "runs[0].search.mutation_rate", "must be <= 1"),
    ("", "    search: {level: input, population: 4}\n", "runs[0].search.parents", "must be between"),
    ("", "    search: {level: input, budget: soon}\n", "runs[0].search.budget", "duration"),
    ("", "    localize: {t2: -1}\n", "runs[0].localize.t2", "must be >= 0"),
    ("", "    variants: 1000000000\n", "runs[0].variants", "must be <= 1000000"),
    ("", "    rngs: [-1]\n", "runs[0].rngs[0]", "must be >= 0"),
    ("", "    max_layers: true\n", "runs[0].max_layers", "expected an integer"),
    # an unknown backend in a later run: found at load, not after the earlier units ran
    ("", "  - seeds: [lenet5]\n    backends: [[tensorflow], [torch, tensorflw]]\n", "runs[1].backends[1][1]",
     "unknown backend 'tensorflw'"),
    ("", "  - seeds: [lenet5]\n    backends: [[jax@tpu]]\n", "runs[1].backends[0][0]", "unknown device"),
])
def test_bad_campaign_settings_name_file_and_field(tmp_path, defaults, extra, field, words):
    p = tmp_path / "camp.yaml"
    p.write_text(CAMPAIGN.format(defaults=defaults, extra=extra))
    with pytest.raises(ConfigError) as err:
        load_campaign(p)
    assert str(err.value).startswith(f"{p}: {field}: "), str(err.value)
    assert words in str(err.value)


def test_too_many_units_is_refused_at_load_without_expanding_them(tmp_path):
    seeds = ", ".join(f"s{i}" for i in range(400))
    rngs = ", ".join(str(i) for i in range(300))
    p = tmp_path / "big.yaml"
    p.write_text(f"name: big\nruns:\n  - seeds: [{seeds}]\n    backends: [[tensorflow]]\n    rngs: [{rngs}]\n")
    with pytest.raises(ConfigError, match=r"big.yaml: runs\[0\]: .*120,000 units.*at most 100,000"):
        load_campaign(p)


def test_cli_flags_and_campaign_units_share_one_definition(tmp_path):
    from audee.campaign.runner import unit_config
    from audee.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["fuzz", "--out", "o"])
    fuzz_parser = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "fuzz")[1]
    actions = {a.dest: a for a in fuzz_parser._actions}
    for name, f in FuzzSettings.flat_fields().items():
        assert name in actions and getattr(args, name) is None       # "not given" stays visible
        assert f.description and f.description.split("(")[0].strip()[:30] in actions[name].help
    for name in SearchSettings.model_fields:
        if name not in ("search", "rng"):
            assert name in actions and getattr(args, name) is None
    assert FuzzSettings.flat_fields()["tie_margin"].default == TIE_MARGIN
    assert "(default: 1e-05)" in actions["tie_margin"].help
    assert FuzzSettings.flat_fields()["timeout"].default == TIMEOUT_S
    p = tmp_path / "c.yaml"
    p.write_text("name: d\nruns:\n  - seeds: [lenet5]\n    backends: [[tensorflow]]\n")
    cfg, plan = unit_config(load_campaign(p).units[0], tmp_path / "u")
    defaults = FuzzSettings()
    assert plan is None
    for name in FuzzSettings.flat_fields():
        assert getattr(cfg, name) == getattr(defaults, name)          # campaign unit defaults = CLI defaults
    loc = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "localize")[1]
    assert {a.dest for a in loc._actions} >= {"t1", "t2", "precision", "ga_iter", "timeout"}
    assert "(default: 1000)" in next(a for a in loc._actions if a.dest == "t1").help
    assert LocalizeSettings().t1 == 1000.0


def test_search_has_no_generation_cap_unless_asked():
    assert SearchSettings().max_iter is None
    assert validate_settings(SearchSettings, {"max_iter": 100000}).max_iter == 100000
    with pytest.raises(ConfigError, match="--max-iter: must be >= 1"):
        validate_settings(SearchSettings, {"max_iter": 0}, flags=True)


def test_fitness_names_match_the_fitness_functions():
    import typing

    from audee.fitness import FITNESSES

    assert set(typing.get_args(SearchSettings.model_fields["fitness"].annotation)) == set(FITNESSES)


def test_unknown_keys_are_named_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"f.yaml: populaton: unknown setting \(known: .*population"):
        validate_settings(SearchSettings, {"populaton": 3}, "f.yaml")


def test_a_row_that_is_json_but_not_an_object_is_skipped_with_a_warning(tmp_path, caplog):
    p = tmp_path / "results.jsonl"
    p.write_text('{"id": "a", "status": "pass"}\n[1, 2]\n"text"\n42\n{"no_id": 1}\n{"id": "b"}\n')
    with caplog.at_level(logging.WARNING):
        rows = list(ResultsTable(p).rows())
    assert [r["id"] for r in rows] == ["a", "b"]
    assert ResultsTable(p).done_ids() == {"a", "b"}
    assert "not a row" in caplog.text


def test_full_disk_is_one_line_naming_the_file_and_keeps_what_was_written(tmp_path, monkeypatch):
    import audee.store.atomic as atomic

    with pytest.raises(AudeeError, match=r"^/dev/full: cannot write a row: No space left on device$"):
        ResultsTable("/dev/full").append({"id": "x"})
    target = tmp_path / "config.json"
    target.write_bytes(b"old")
    tmp = tmp_path / "partial.tmp"
    monkeypatch.setattr(atomic, "_create_temp", lambda path: (os.open("/dev/full", os.O_WRONLY), str(tmp)))
    with pytest.raises(AudeeError, match=r"config.json: cannot write: No space left on device"):
        atomic.write_atomic(target, b"new" * 100_000)
    assert target.read_bytes() == b"old"
