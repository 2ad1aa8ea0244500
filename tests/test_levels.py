"""The case levels' registry: how a case names its level, the level objects behind the
names, the runner protocol the executors declare.  Plain data and imports: no worker runs."""
from __future__ import annotations

import pytest

from audee.levels import ENTRIES, LEVELS, Runner, level_name, level_named, level_of, run_level, source_name


def test_a_case_names_its_level_by_its_meta():
    assert level_name({"seed": "lenet5"}) == source_name({"seed": "lenet5"}) == "network"
    assert level_name({"seed": "api:Dense"}) == "api"
    assert level_name({"seed": "op:cumsum"}) == "op"
    assert level_name({}, call=True) == "op"  # a record holding a call, whatever its seed says
    assert level_name(None) == "network"
    train = {"seed": "api:Dense", "phase": "train"}
    assert level_name(train) == "train" and source_name(train) == "api"  # trained, made by the API level


def test_every_level_is_registered_once_and_loads():
    # the built-in levels, each once (a level the registry adds leaves this test as it is)
    assert {"network", "api", "op", "train"} <= set(LEVELS) and len(set(LEVELS)) == len(LEVELS)
    assert len({e.module for e in ENTRIES}) == len(ENTRIES)
    for name in LEVELS:
        level = level_named(name)
        assert level.name == name and level is level_named(name)
    with pytest.raises(KeyError, match="no case level"):
        level_named("nonesuch")


def test_a_record_is_answered_by_its_level():
    class Record:
        def __init__(self, meta, op=None):
            self.meta, self.op = meta, op or {}

    assert level_of(Record({"seed": "lenet5"})).name == "network"
    assert level_of(Record({"seed": "x"}, {"op": "cumsum"})).name == "op"
    assert level_of(Record({"seed": "lenet5", "phase": "train"})).name == "train"
    assert level_of(Record({"seed": "op:sum"})).localize_refusal()
    assert level_of(Record({"seed": "lenet5"})).localize_refusal() is None


def test_a_runs_level_is_its_phases_over_its_source():
    assert run_level("api") is level_named("api")
    trained = run_level("api", "train")
    assert trained.name == "train" and trained.source is level_named("api")
    assert trained.case_id("Dense", 2) == level_named("api").case_id("Dense", 2) == "api-Dense-v00002"
    assert run_level("network", "inference") is level_named("network")
    assert [level_named("network").case_id("lenet5", i) for i in level_named("network").indices(
        type("Cfg", (), {"variants": 2})())] == ["lenet5-seed", "lenet5-v00000", "lenet5-v00001"]


def test_the_three_executors_declare_the_runner_protocol():
    from audee.engine.execute import Executor
    from audee.engine.opexec import OpExecutor
    from audee.engine.train import TrainExecutor

    for cls in (Executor, OpExecutor, TrainExecutor):
        assert Runner in cls.__mro__ and all(callable(getattr(cls, m)) for m in ("submit", "finish", "run"))


def test_op_cases_refuse_model_judgements_by_their_level():
    from audee.core.errors import AudeeError
    from audee.settings import FuzzSettings

    with pytest.raises(AudeeError, match="--equivalence all judges models"):
        run_level("op", "train").check(FuzzSettings(phase="train", equivalence="all"))
    with pytest.raises(AudeeError, match="--phase train judges models"):  # the op level alone trains nothing
        level_named("op").check(FuzzSettings(phase="train"))
    run_level("op", "train").check(FuzzSettings(phase="train"))  # a call's training phase: its gradients
    # the default rule set (axis, image_channels) applies where a case has the layer it rewrites: an op call has none
    assert FuzzSettings().equivalence == "axis,image_channels,batch_empty" and FuzzSettings(profile="paper").equivalence == "none"
    level_named("op").check(FuzzSettings())
    with pytest.raises(AudeeError, match="--equivalence axis,padding judges models"):
        level_named("op").check(FuzzSettings(equivalence="axis,padding"))
    level_named("api").check(FuzzSettings(phase="train"))  # a model level takes every judgement


def test_a_calls_training_phase_is_its_gradient_level():
    """``--phase train`` over a call level runs the ``opgrad`` level (the registry decides, by
    whether the source makes calls); a record of phase train holding a call is re-run by it."""
    grads = run_level("op", "train")
    assert grads.name == "opgrad" and grads.source is level_named("op")
    assert grads.case_id("abs", 3) == "op-abs-v00003"
    assert run_level("activation", "train").source is level_named("activation")
    assert level_name({"seed": "op:abs", "phase": "train"}) == "opgrad"
    assert level_name({"seed": "activation:relu", "phase": "train"}) == "opgrad"
    assert level_name({"phase": "train"}, call=True) == "opgrad"
    assert level_name({"seed": "lenet5", "phase": "train"}) == "train"
    assert run_level("network", "train").name == "train"
    assert level_named("opgrad").localize_refusal() is not None


def test_the_settings_a_level_reads_are_settings():
    from audee.settings import FuzzSettings

    for name in LEVELS:
        unknown = set(level_named(name).settings) - set(FuzzSettings.flat_fields())
        assert not unknown, (name, unknown)


def test_a_target_levels_flag_and_names_come_from_its_registry_entry():
    """`audee fuzz`'s target flags are the registry's: a level with a flag in its entry is
    reachable from the command line without a line of cli.py."""
    import argparse

    from audee.cli import build_parser
    from audee.core.errors import AudeeError
    from audee.levels import parse_targets, target_entries

    entries = target_entries()
    # the registry's entries with a flag, in its order (a level the registry adds leaves this test as it is)
    assert entries == tuple(e for e in ENTRIES if e.flag)
    assert [e.name for e in entries if e.name in ("api", "op", "activation")] == ["api", "op", "activation"]
    fuzz = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["fuzz"]
    flags = {s for a in fuzz._actions for s in a.option_strings}
    for e in entries:
        assert e.flag in flags and e.plural and e.word
        known = list(level_named(e.name).target_names())
        assert known and parse_targets(e.name, "all") == sorted(known)
        assert parse_targets(e.name, f"{known[0]},{known[0]}") == [known[0]]
        with pytest.raises(AudeeError, match=f"^{e.flag}: unknown {e.word} 'no_such_name'"):
            parse_targets(e.name, "no_such_name")
