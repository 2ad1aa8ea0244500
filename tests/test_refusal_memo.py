"""The refusal memo (audee/engine/refusals.py): once a converter refused an API under a dtype
policy twice and converted it never, the run's later cases of it leave that backend out at
build time, each row saying why and which cases saw the refusal; a failure of another kind is
retried on every case; a resumed run skips the same; with the memo off every case converts."""
from __future__ import annotations

import json
import shutil

import pytest

from audee.apis import load_api_configs
from audee.backends.pool import WorkerFailure
from audee.cases.case import Outcome, TestCase, Verdict
from audee.engine.refusals import REASON_CHARS, RefusalMemo, reason_of, refusals_in
from audee.mutation.apilevel import generate_case
from audee.oracle import crash_findings
from audee.triage.known import load_known_issues

REFUSED = "AveragePooling2D"   # no TFLite builtin in bfloat16: "neither a custom op nor a flex op"
BROKEN = "tests.refusal_plugins:BrokenLiteRt"
WORDS = "error: 'tf.AvgPool' op is neither a custom op nor a flex op"


def _outcomes(**failures: WorkerFailure | None) -> dict[str, Outcome]:
    return {label: Outcome(label, failure=f) for label, f in failures.items()}


def _error(message: str = f"ConverterError: {WORDS}", kind: str = "error") -> WorkerFailure:
    return WorkerFailure(kind, "convert", message)


def _spec(invalid: bool = False):
    got = generate_case(REFUSED, load_api_configs(), 0, 0, invalid_prob=1.0 if invalid else 0.0,
                        dtypes={"bfloat16": 1.0})
    assert any(m.invalid for m in got.mutations) == invalid
    return got.spec


def _judged(outcomes: dict[str, Outcome], spec=None, cid: str = "c") -> tuple[TestCase, Verdict]:
    """A case with ``outcomes`` and the crash oracle's verdict on them (what the memo reads)."""
    return TestCase(cid, spec or _spec(), {}, {}), Verdict(crash_findings(list(outcomes.values())))


def _refusals(spec=None, **failures: WorkerFailure | None) -> dict[str, str]:
    outcomes = _outcomes(**failures)
    return refusals_in(*_judged(outcomes, spec), outcomes, load_known_issues())


#: PyTorch's exporter writing bfloat16 Conv nodes at an opset that takes none: "unsupported type"
#: words, but a known bug (torch-onnx-bf16-invalid-opset), as a torch-onnx run of a bfloat16 Conv2D says
BF16_OPSET = ("torch.onnx produced an invalid ONNX graph (onnx.checker: [ShapeInferenceError] (op_type:Conv, "
              "node name: node_Conv_16): X typestr: T, has unsupported type: tensor(bfloat16)); torch-onnx refused "
              "it: InvalidGraph: [ONNXRuntimeError] : 10 : INVALID_GRAPH : This is an invalid model. Type Error: "
              "Type 'tensor(bfloat16)' of input parameter (audee_y0) of operator (Conv) in node (node_Conv_16) is "
              "invalid.")


def test_only_a_converters_limitation_class_refusal_of_a_program_its_source_runs_counts():
    """The rule, on outcomes as the workers answer them and the crash oracle's verdict: a
    limitation-class refusal (root-cause classes) of a backend that converts or compiles
    TensorFlow's model while TensorFlow ran it; not a crash, a timeout, an error without the
    words, a known bug with the words, the source failing too, a Keras framework's refusal
    (jitted JAX's too: one of the three), nor a case with a crafty invalid value."""
    why = _refusals(tensorflow=None, litert=_error())
    assert list(why) == ["litert"] and why["litert"].startswith("convert: ConverterError:")
    assert list(_refusals(torch=None, litert=_error())) == ["litert"]                  # its source not in the run
    assert list(_refusals(tensorflow=None, **{"tensorflow-xla": _error()})) == ["tensorflow-xla"]
    assert _refusals(tensorflow=None, litert=_error(kind="signal")) == {}
    assert _refusals(tensorflow=None, litert=_error(kind="timeout")) == {}
    assert _refusals(tensorflow=None, litert=_error("ValueError: Invalid tensor size.")) == {}
    assert _refusals(torch=None, **{"torch-onnx": _error(BF16_OPSET)}) == {}
    assert _refusals(torch=None, tensorflow=_error(), litert=_error()) == {}
    assert _refusals(torch=None, tensorflow=_error("The Conv2D op currently only supports the NHWC tensor format "
                                                   "on the CPU")) == {}
    assert _refusals(tensorflow=None, jax=_error("TypeError: float16 is not supported by dot_general")) == {}
    assert _refusals(_spec(invalid=True), tensorflow=None, litert=_error()) == {}


def _stepper(memo: RefusalMemo, labels: list[str]):
    """Cases made, submitted, judged and learnt from in the run's order, as the Executor does:
    each step's skips, then what the backends not skipped did."""
    def step(outcomes: dict[str, Outcome], spec=None) -> dict:
        spec = spec or _spec()
        skip = memo.skips(spec, labels)
        n = memo.submitted()
        ran = {label: o for label, o in outcomes.items() if label not in skip}
        memo.learn(n, *_judged(ran, spec, f"c{n}"), ran)
        return skip
    return step


def test_a_key_refused_twice_and_never_converted_is_skipped_from_two_cases_on():
    """Two valid cases' explicit refusals of the key (an invalid draw's does not count), read
    two cases later (the case just before is still running when one is made): skipped after;
    a backend that converted the key once is never skipped; nor every backend of a case."""
    labels = ["tensorflow", "litert"]
    refused, ok = _outcomes(tensorflow=None, litert=_error()), _outcomes(tensorflow=None, litert=None)
    step = _stepper(memo := RefusalMemo(), labels)
    assert step(refused, _spec(invalid=True)) == {}          # c0: its value's refusal
    assert [step(refused) for _ in range(3)] == [{}, {}, {}]  # c1, c2; c3 sees c1 alone
    (skip,) = step(refused).values()                         # c4 sees c1 and c2
    assert skip.cases == ("c1", "c2") and skip.reason == reason_of("convert", f"ConverterError: {WORDS}")
    assert skip.to_json() == {"reason": skip.reason, "cases": ["c1", "c2"]}
    assert memo.skips(_spec(), ["litert"]) == {}              # never every backend: a case runs somewhere
    step = _stepper(RefusalMemo(), labels)
    assert [step(o) for o in (refused, ok, refused, refused, refused, refused)] == [{}] * 6   # it converts the key


def test_a_resumed_memo_is_the_memo_of_the_rows():
    """The rows of the cases above rebuild the same memo: the next case skips the same."""
    from audee.records.rows import ResultRow

    spec = _spec()
    live = RefusalMemo()
    step = _stepper(live, ["tensorflow", "litert"])
    rows = []
    for _ in range(3):
        step(_outcomes(tensorflow=None, litert=_error()), spec)
        rows.append(ResultRow.build({"id": f"c{len(rows)}", "status": "fail", "kinds": [], "api": REFUSED,
                                     "dtype": "bfloat16", "backends": {"tensorflow": "ok", "litert": "error:convert"},
                                     "refused": {"litert": reason_of("convert", f"ConverterError: {WORDS}")}}))
    resumed = RefusalMemo()
    resumed.restore(rows)
    assert resumed.made == live.made == 3
    assert resumed.skips(spec, ["tensorflow", "litert"]) == live.skips(spec, ["tensorflow", "litert"]) != {}


def test_a_reason_shows_the_refusals_words_after_a_long_preamble():
    long = "RuntimeError: " + "x" * 2000 + " No conversion rule found for operations: Expm1 " + "y" * 500
    why = reason_of("convert", long)
    assert "No conversion rule found for operations: Expm1" in why and len(why) <= REASON_CHARS + 20


@pytest.fixture(scope="module")
def converters(tmp_path_factory):
    """TensorFlow, the TFLite converter + LiteRT, and a LiteRT whose converter breaks."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    refs = parse_backends(f"tensorflow,litert,{BROKEN}")
    with Pool(refs, tmp_path_factory.mktemp("logs"), timeout=300) as pool:
        assert pool.start() == {}
        yield pool


def _fuzz(pool, out, variants: int, memo: str = "on") -> list[dict]:
    from audee.fuzz import FuzzConfig, fuzz_apis

    cfg = FuzzConfig(pool.refs, out, variants=variants, batch=2, invalid_prob=0.0, special_inputs=0.0,
                     dtypes="bfloat16", refusal_memo=memo)
    fuzz_apis([REFUSED], cfg, pool=pool)
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _seen(rows: list[dict]) -> list[tuple]:
    return [(r["id"], r["backends"], r.get("skipped"), r.get("refused")) for r in rows]


@pytest.fixture(scope="module")
def memo_run(converters, tmp_path_factory):
    out = tmp_path_factory.mktemp("memo") / "run"
    return out, _fuzz(converters, out, 5)


def test_a_refused_api_and_dtype_converts_once_then_is_skipped_with_its_reason(memo_run):
    """LiteRT refuses a bfloat16 AveragePooling2D: the first two cases' refusals are read
    from the fourth case on (the third is made while the second runs), which leaves it out at
    build time (no outcome, no conversion: its worker was not asked), each row naming the
    refusal and the cases that saw it; TensorFlow runs every case.  The summary and the report
    count the skipped runs per backend."""
    from audee.fuzz import summarize
    from audee.report.coverage import skipped_tables
    from audee.report.merge import load_campaign_dir

    out, rows = memo_run
    converted, skipped = rows[:3], rows[3:]
    for r in converted:
        assert r["backends"]["litert"] == "error:convert" and "neither a custom op" in r["refused"]["litert"]
    for r in skipped:
        assert "litert" not in r["backends"] and r["backends"]["tensorflow"] == "ok"
        assert r["skipped"] == {"litert": {"reason": rows[0]["refused"]["litert"], "cases": [rows[0]["id"],
                                                                                             rows[1]["id"]]}}
        assert "litert" not in r["phases"]                          # its worker did nothing for the case
    assert summarize(out)["skipped_runs"] == {"litert": 2}
    by_backend, by_key = skipped_tables(load_campaign_dir(out).cases)
    assert by_backend.to_dict("records") == [{"backend": "litert", "skipped_runs": 2, "keys": 1}]
    assert by_key[["api", "dtype", "skipped_runs", "refused_in"]].values.tolist() == [
        [REFUSED, "bfloat16", 2, f"{rows[0]['id']}, {rows[1]['id']}"]]


def test_a_failure_without_the_refusal_words_is_retried_on_every_case(memo_run):
    """The broken converter fails every case with a clean error of no limitation's words (a
    bug's, not an explicit "unsupported"): it converts every case again, never skipped."""
    _, rows = memo_run
    assert all(r["backends"][BROKEN] == "error:convert" for r in rows)
    assert not any(BROKEN in r.get("skipped", {}) or BROKEN in r.get("refused", {}) for r in rows)


@pytest.mark.parametrize("kept", [1, 2, 3, 4])
def test_a_resumed_run_rebuilds_the_memo_from_its_rows(memo_run, converters, tmp_path, kept):
    """A run killed after ``kept`` rows (before either refusal is read, as the first skip is
    decided, after it) and resumed: its rows are those of the run that was never stopped."""
    out, rows = memo_run
    again = tmp_path / "run"
    shutil.copytree(out, again)
    lines = (again / "results.jsonl").read_text().splitlines()
    (again / "results.jsonl").write_text("\n".join(lines[:kept]) + "\n")
    resumed = _fuzz(converters, again, 5)
    assert _seen(resumed) == _seen(rows)


def test_with_the_memo_off_every_case_converts(converters, tmp_path):
    rows = _fuzz(converters, tmp_path / "run", 3, memo="off")
    assert all(r["backends"]["litert"] == "error:convert" and "skipped" not in r and "refused" not in r
               for r in rows)


def test_a_run_started_with_the_memo_off_resumes_only_with_it_off(converters, tmp_path):
    """``refusal_memo`` is a key of ``config.json``: a resume keeps the run's behaviour."""
    from audee.core.errors import ConfigError

    out = tmp_path / "run"
    _fuzz(converters, out, 1, memo="off")
    with pytest.raises(ConfigError, match="refusal_memo"):
        _fuzz(converters, out, 2, memo="on")


def test_a_campaign_turns_the_memo_off_in_plain_yaml(tmp_path):
    """``refusal_memo: off`` (YAML reads a bare off as false) is the switch's off; a value that
    is neither is one line naming the field."""
    from audee.campaign.config import load_campaign
    from audee.core.errors import ConfigError

    p = tmp_path / "c.yaml"
    p.write_text("name: m\ndefaults: {refusal_memo: off}\n"
                 "runs:\n  - apis: [Dense]\n    backends: [[tensorflow, litert]]\n")
    (unit,) = load_campaign(p).units
    assert unit.settings["refusal_memo"] == "off"
    p.write_text(p.read_text().replace("refusal_memo: off", "refusal_memo: later"))
    with pytest.raises(ConfigError, match=r"c\.yaml: defaults\.refusal_memo: expected 'on' or 'off'"):
        load_campaign(p)
