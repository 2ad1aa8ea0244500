"""Typed records of a run directory (audee.records, audee.store.RunStore): a row fuzz writes
reads back as the same JSON line, older rows still load, nonsense is refused with its reason
(and skipped with a warning by every reader), unknown keys survive; a search run and its
trace keep their bytes; RunStore over a real small run (JAX beside a plugin that refuses
every batch, so every case fails and gets a case file)."""
from __future__ import annotations

import json
import logging

import pytest

from audee.records import ResultRow, RowRejected, SearchRun, SearchTrace, parse_row
from audee.store import RunStore

OLD = {"id": "lenet5-v00001", "seed": "lenet5", "variant": 1, "rng": 0, "status": "fail", "kinds": ["nan"],
       "backends": {"tensorflow": "ok", "torch": "ok"}, "pairs": {"tensorflow|torch": {"distance": 0.1, "flips": 0}},
       "nan": {"conv1": "torch"}, "seconds": 2, "mutations": ["conv1.filters=3"], "case_file": "cases/x.pkl"}


def _line(obj: dict) -> str:
    return json.dumps(obj, allow_nan=True, sort_keys=True)  # as audee.store.results.ResultsTable writes


# ---- without a framework ------------------------------------------------------------------------
def test_an_old_row_loads_and_dumps_as_it_was():
    row = parse_row(_line(OLD))   # nan as {layer: backend}, no phases, no exercised, no signatures
    assert row.nan == {"conv1": "torch"} and row.phases == {} and row.exercised == [] and row.signatures == []
    assert row.seconds == 2 and isinstance(row.seconds, int)       # an int stays an int
    assert _line(row.to_json()) == _line(OLD)
    assert ResultRow.build(OLD).to_json() == OLD                   # building keeps every key and value


def test_unknown_keys_survive():
    row = parse_row(_line({**OLD, "from_the_future": {"x": [1, 2]}}))
    assert row.extra == {"from_the_future": {"x": [1, 2]}}
    assert row.to_json()["from_the_future"] == {"x": [1, 2]}


@pytest.mark.parametrize("bad, why", [
    (b"{not json\n", "a line that is not valid JSON"),
    (b"[1, 2]\n", "a line that is not a row (a JSON object with an id)"),
    (_line({**OLD, "status": "maybe"}).encode(), "(status: expected one of pass, fail, rejected, got 'maybe')"),
    (_line({**OLD, "nan_strong": 1}).encode(), "(nan_strong: input should be a valid boolean, got 1)"),
    (_line({**OLD, "variant": True}).encode(), "(variant: expected int, got True)"),
    (_line({**OLD, "kinds": "nan"}).encode(), "(kinds: expected a list of finding kinds, got 'nan')"),
    (_line({k: v for k, v in OLD.items() if k != "seed"}).encode(), "(seed: expected the seed's name, got None)"),
])
def test_nonsense_is_refused_with_its_reason(bad, why):
    with pytest.raises(RowRejected) as err:
        parse_row(bad)
    assert why in err.value.what


def test_readers_skip_nonsense_rows_with_a_warning(tmp_path, caplog):
    from audee.fuzz import summarize

    store = RunStore(tmp_path)
    store.append(parse_row(_line(OLD)))
    with open(store.results_path, "ab") as f:
        f.write(_line({**OLD, "id": "x", "seconds": "slow"}).encode() + b"\n")
    with caplog.at_level(logging.WARNING, logger="audee"):
        assert [r.id for r in store.rows()] == [OLD["id"]]
        assert summarize(tmp_path, known=[])["test_cases"] == 1
    warnings = {r.getMessage() for r in caplog.records if r.levelno == logging.WARNING}
    assert warnings == {f"{store.results_path}:2: skipping a row that is not a test case "
                        "(seconds: expected a number, got 'slow')"}
    assert store.done_ids() == {OLD["id"], "x"}   # resume still skips it: the case ran


def test_search_run_and_trace_keep_their_bytes(tmp_path):
    row = {"id": "t-ga-input-inconsistency-r0", "target": "t", "search": "ga", "level": "input",
           "fitness": "inconsistency", "input_row": 0, "stopped": "budget", "generations": 3, "evaluations": 12,
           "seconds": 1.5, "first_failure_s": None, "failures": [], "best_fitness": 0.25, "evals_per_s": 8.0}
    trace = {"id": row["id"], "config": {"level": "input", "search": "ga", "fitness": "inconsistency"},
             "stopped": "budget",
             "trace": [{"generation": 0, "best": 0.25, "mean": None, "pair": "a|b", "evaluated": 4, "eval_s": 0.1,
                        "failures": 0, "elapsed_s": 0.2, "layers": {"dense": 0.5}}]}
    store = RunStore(tmp_path)
    store.append_search(SearchRun.model_validate(row))
    store.append_search(SearchRun.model_validate({**row, "stopped": "interrupted"}))
    store.write_trace(SearchTrace.model_validate(trace))
    assert [r.stopped for r in store.search_runs()] == ["budget", "interrupted"]
    assert store.last_search_runs()[row["id"]].stopped == "interrupted"   # the last row wins
    assert store.trace_path(row["id"]).read_bytes() == json.dumps(trace, indent=1).encode()
    (t,) = store.traces()
    assert (t.level, t.search, t.fitness, t.trace[0].best) == ("input", "ga", "inconsistency", 0.25)


# ---- a real run ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, fuzz
    from audee.mutation.seeds import load_seed

    out = tmp_path_factory.mktemp("records") / "run"
    seed = load_seed("lenet5")
    cfg = FuzzConfig(parse_backends("jax,tests.plugins:RaisingBackend"), out, variants=2, batch=4, rng=3,
                     invalid_prob=0.0)  # valid draws only: every case runs, and fails on the plugin
    stats = fuzz(seed, seed.inputs, cfg)
    assert stats.run == 3
    return RunStore(out)


def test_rows_a_run_wrote_round_trip_unchanged(run):
    lines = run.results_path.read_bytes().splitlines()
    assert len(lines) == 3
    for raw in lines:
        row = parse_row(raw)
        assert _line(row.to_json()).encode() == raw   # the same sorted-key JSON line
    copy = RunStore(run.root.parent / "copy")
    for row in run.rows():
        copy.append(row)
    assert copy.results_path.read_bytes() == run.results_path.read_bytes()


def test_run_store_over_a_real_run(run):
    rows = list(run.rows())
    assert [r.id for r in rows] == ["lenet5-seed", "lenet5-v00000", "lenet5-v00001"]
    assert run.done_ids() == {r.id for r in rows}
    for r in rows:
        assert r.status == "fail" and "divergent_acceptance" in r.kinds and r.seed == "lenet5"
        assert r.backends["tests.plugins:RaisingBackend"] == "error:run" and r.signatures and r.exercised and r.phases
        assert r.case_file == str(run.case_path(r.id).relative_to(run.root))
        record = run.load_case(r.case_file)
        assert record.id == r.id
        assert run.has_variant(r.id) and run.load_variant(r.id).layers
    assert [r.variant for r in rows] == [-1, 0, 1] and rows[1].mutations and rows[1].weight_seed is not None
    config = run.config()
    assert config["seed"] == "lenet5" and config["variants"] == 2
    assert run.logs.is_dir() and list(run.search_runs()) == [] and list(run.traces()) == []
    saved = run.save_case("again", record)
    assert saved == "cases/again.pkl" and run.load_case(saved).id == record.id


def test_summary_and_unique_bugs_read_typed_rows(run):
    from audee.fuzz import summarize

    summary = summarize(run.root, known=[])
    assert summary["test_cases"] == 3 and summary["failing"] == 3 and summary["divergent_acceptance"] == 3
    assert summary["bugs"] and all(b["case_file"].startswith(str(run.root)) for b in summary["bugs"])
    run.write_summary(summary)
    assert run.summary() == json.loads(json.dumps(summary))
