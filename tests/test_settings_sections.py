"""The fuzz settings in sections (run, judging, one per level or oracle) with named profiles:
the flags, campaign keys and ``config.json`` they came from stay as they were."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from audee.campaign import load_campaign
from audee.core.errors import ConfigError
from audee.settings import (FLAG_ORDER, FLAT_PATHS, PROFILES, FuzzSettings, JudgingSettings, ToleranceSettings,
                            validate_settings)

# the settings of `audee fuzz --seed lenet5 --backends tensorflow,jax --variants 4 --rng 3 --batch 4`
# as config.json held them before the settings had sections (every key flat)
OLD_CONFIG = {
    "seed": "lenet5", "variants": 4, "rng": 3, "batch": 4, "layer_rate": 0.5, "max_layers": 3, "invalid_prob": 0.1,
    "max_redraws": 5, "timeout": 120.0, "tie_margin": 1e-05, "threads": None, "float32_rtol": 0.001,
    "float32_atol": 1e-05, "float16_rtol": 0.01, "float16_atol": 0.001, "bfloat16_rtol": 0.05,
    "bfloat16_atol": 0.01, "tf32_rtol": 0.01, "tf32_atol": 0.001,
    "operators": "redraw:3,insert:1,replace:1,remove:0.5,activation:1,duplicate:0.5", "special_inputs": 0.0,
    "dtypes": "float32:0.7,float16:0.1,bfloat16:0.1,mixed_float16:0.1", "pack": 1, "equivalence": "none",
    "reference": "none", "reference_backend": "auto", "precision_factor": 10.0, "phase": "inference", "steps": 1,
    "losses": "categorical_crossentropy,sparse_categorical_crossentropy,binary_crossentropy,mean_squared_error,"
              "mean_absolute_error,huber,log_cosh,hinge",
    "optimizers": "sgd,adam,rmsprop,adagrad", "learning_rate": None, "call_training": 0.0, "call_mask": 0.3,
    "backends": [{"label": "tensorflow", "target": "audee.backends.keras_backends:TensorflowBackend",
                  "device": "cpu", "precision": "full"},
                 {"label": "jax", "target": "audee.backends.keras_backends:JaxBackend", "device": "cpu",
                  "precision": "full"}],
    "out": "/tmp/x",
}


def _fuzz_parser():
    from audee.cli import build_parser

    parser = build_parser()
    return parser, parser._subparsers._group_actions[0].choices["fuzz"]


def test_flat_keys_go_into_their_sections_and_read_flat_too():
    s = FuzzSettings(tie_margin=0.5, float32_rtol=0.2, steps=3, pack=2, reference="float64")
    assert isinstance(s.judging, JudgingSettings) and isinstance(s.judging.tolerances, ToleranceSettings)
    assert (s.judging.tie_margin, s.judging.tolerances.float32_rtol, s.train.steps, s.api.pack) == (0.5, 0.2, 3, 2)
    assert (s.tie_margin, s.float32_rtol, s.steps, s.reference) == (0.5, 0.2, 3, "float64")
    assert s.tolerances() == s.judging.tolerances.table() and s.tolerances()["float32"]["rtol"] == 0.2
    assert s.given() == {"tie_margin": 0.5, "float32_rtol": 0.2, "steps": 3, "pack": 2, "reference": "float64"}
    # a section given nested is the same settings
    assert FuzzSettings(judging={"tie_margin": 0.5, "tolerances": {"float32_rtol": 0.2}}).flat() == \
        FuzzSettings(tie_margin=0.5, float32_rtol=0.2).flat()
    with pytest.raises(Exception, match="frozen"):
        s.tie_margin = 1.0


def test_every_flat_setting_has_one_place_in_a_section():
    assert list(FuzzSettings.flat_fields()) == list(FLAG_ORDER) and set(FLAT_PATHS) == set(FLAG_ORDER)
    assert FLAT_PATHS["float32_rtol"] == ("judging", "tolerances", "float32_rtol")
    assert FLAT_PATHS["timeout"] == ("run", "timeout") and FLAT_PATHS["steps"] == ("train", "steps")
    for profile in PROFILES.values():
        assert set(profile) <= set(FLAT_PATHS)
        FuzzSettings(**profile)  # every profile is valid settings


def test_the_fuzz_flags_come_from_the_sections_in_their_old_order():
    """Each setting's flag, type, default (None: not given) and help as before the sections;
    the one new flag is --profile."""
    _, fuzz = _fuzz_parser()
    opts = [a for a in fuzz._actions if a.dest in FLAT_PATHS]
    assert [a.dest for a in opts] == list(FLAG_ORDER)
    fields = FuzzSettings.flat_fields()
    for a in opts:
        f = fields[a.dest]
        assert a.default is None and a.help.replace("%%", "%").startswith(f.description)
        flag = "--threads-per-backend" if a.dest == "threads" else "--" + a.dest.replace("_", "-")
        assert a.option_strings == [flag]
    assert next(a for a in fuzz._actions if a.dest == "tie_margin").help.endswith("(default: 1e-05)")
    assert next(a for a in fuzz._actions if a.dest == "threads").type is int
    profile = next(a for a in fuzz._actions if a.dest == "profile")
    assert profile.option_strings == ["--profile"] and list(profile.choices) == list(PROFILES)


def test_a_profile_sets_its_values_and_a_flag_wins(tmp_path):
    from audee.cli import _fuzz_config

    parser, _ = _fuzz_parser()
    args = parser.parse_args(["fuzz", "--seed", "lenet5", "--out", str(tmp_path), "--profile", "smoke",
                              "--batch", "8"])
    cfg, plan = _fuzz_config(args, [])
    assert plan is None
    assert (cfg.variants, cfg.rng, cfg.max_redraws) == (2, 0, 1)        # the profile's
    assert cfg.batch == 8                                               # the flag's, over the profile's 2
    args = parser.parse_args(["fuzz", "--seed", "lenet5", "--out", str(tmp_path), "--profile", "paper"])
    cfg, _ = _fuzz_config(args, [])
    assert (cfg.variants, cfg.tie_margin, cfg.operators) == (50, 0.0, "redraw")
    assert cfg.batch == FuzzSettings().batch                            # what no profile sets: the default


def test_a_campaign_profile_at_the_top_or_in_a_run(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("name: p\nprofile: paper\n"
                 "runs:\n"
                 "  - seeds: [lenet5]\n    backends: [[tensorflow]]\n    tie_margin: 0.001\n"
                 "  - seeds: [mlp]\n    backends: [[tensorflow]]\n    profile: smoke\n    batch: 3\n")
    a, b = load_campaign(p).units
    assert (a.settings["variants"], a.settings["operators"], a.settings["tie_margin"]) == (50, "redraw", 0.001)
    assert (b.settings["variants"], b.settings["batch"], b.settings["max_redraws"]) == (2, 3, 1)
    assert b.settings["operators"] == "redraw"          # the top's profile under the run's own
    p.write_text("name: p\nprofile: fast\nruns:\n  - seeds: [lenet5]\n    backends: [[tensorflow]]\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: profile: unknown profile 'fast' \(one of smoke, paper, ci\)"):
        load_campaign(p)
    p.write_text("name: p\nruns:\n  - seeds: [lenet5]\n    backends: [[tensorflow]]\n    profile: 3\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: runs\[0\]\.profile: unknown profile 3"):
        load_campaign(p)


def test_errors_name_the_flat_key_not_the_section():
    with pytest.raises(ConfigError, match=r"^f\.yaml: runs\[0\]\.float16_atol: must be >= 0"):
        validate_settings(FuzzSettings, {"float16_atol": -1}, "f.yaml", prefix="runs[0]")
    with pytest.raises(ConfigError, match=r"^--float16-atol: expected a number"):
        validate_settings(FuzzSettings, {"judging": {"tolerances": {"float16_atol": "a"}}}, flags=True)
    with pytest.raises(ConfigError, match=r"^--threads-per-backend: must be >= 0"):
        validate_settings(FuzzSettings, {"threads": -1}, flags=True)


def test_config_json_stays_flat_and_an_old_one_resumes(tmp_path, caplog):
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, check_resume, run_config
    from audee.store import RunStore

    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text(json.dumps(OLD_CONFIG))
    (out / "results.jsonl").write_text('{"id": "lenet5-v0"}\n')
    store = RunStore(out)
    # the old run's settings: no equivalence rule ran then (the default was none), and the settings
    # added since as that audee ran without them (no causal attention drawn, no refusal remembered)
    old_ways = {"equivalence": "none", "call_causal": 0.0, "refusal_memo": "off"}
    cfg = FuzzConfig(parse_backends("tensorflow,jax"), out, variants=4, rng=3, batch=4, **old_ways)
    doc = run_config(cfg, {"seed": "lenet5"})
    # the same keys in order, and the settings added since after them
    added = {"call_causal": 0.0, "refusal_memo": "off"}
    settings = {k: v for k, v in OLD_CONFIG.items() if k not in ("backends", "out")}
    assert doc == {**settings, **added, "backends": OLD_CONFIG["backends"], "out": str(out)}
    assert list(doc) == [*settings, *added, "backends", "out"]
    check_resume(store, doc)                                                       # resumes
    check_resume(store, run_config(FuzzConfig(parse_backends("tensorflow,jax"), out, variants=9, rng=3, batch=4,
                                              timeout=5.0, **old_ways), {"seed": "lenet5"}))   # free to change
    other = FuzzConfig(parse_backends("tensorflow,jax"), out, variants=4, rng=3, batch=4, float16_rtol=0.5,
                       **old_ways)
    with pytest.raises(ConfigError, match=r"config\.json: float16_rtol: holds a run with other settings"):
        check_resume(store, run_config(other, {"seed": "lenet5"}))
    # today's defaults draw causal attention and remember refusals: the old run's later cases would be
    # drawn and run another way than its first ones under one config.json
    drawn = FuzzConfig(parse_backends("tensorflow,jax"), out, variants=4, rng=3, batch=4, equivalence="none")
    with pytest.raises(ConfigError, match=r"config\.json: call_causal, refusal_memo: holds a run with other "
                                          r"settings \(call_causal: absent \(an older audee: 0\.0\) there, 0\.3 now"):
        check_resume(store, run_config(drawn, {"seed": "lenet5"}))
    today = FuzzConfig(parse_backends("tensorflow,jax"), out, variants=4, rng=3, batch=4)  # the axis rule by default
    with pytest.raises(ConfigError, match=r"config\.json: equivalence, call_causal, refusal_memo: holds a run"):
        check_resume(store, run_config(today, {"seed": "lenet5"}))
    # a setting an old file lacks whose older behaviour is no one value: resumed, and said so
    lacking = {k: v for k, v in OLD_CONFIG.items() if k != "precision_factor"}
    (out / "config.json").write_text(json.dumps(lacking))
    with caplog.at_level("WARNING", logger="audee.fuzz"):
        check_resume(store, doc)
    assert "written by an older audee without precision_factor; resumed with precision_factor=10.0" in caplog.text
    (out / "config.json").write_text(json.dumps(OLD_CONFIG))
    assert json.loads((out / "config.json").read_text()) == OLD_CONFIG
