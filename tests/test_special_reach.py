"""Special values that reach (audee/mutation/special.py, audee/mutation/oplevel.py
place_specials, audee/oracle/ops.py): one NaN/Inf among finite values per row or per reduced
slice, equal maxima with a NaN, values at each op's domain edges (its config's ``domain``), a
special value on every tensor argument (a scalar second operand too), and index outputs
judged by the values they point at, a NaN input left to the pair's class rule.

The framework tests run ``keras.ops`` calls on TensorFlow, its XLA-compiled mode, PyTorch and
JAX; two of their differences are bugs users reported upstream (tensorflow/tensorflow#116992:
CPU XLA drops a NaN in ``reduce_max``; tensorflow/tensorflow#118177: XLA's argmax of a NaN).
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from audee.apis import load_op_configs
from audee.cases.case import NONFINITE_SPECIALS, Finding, Kind, Outcome
from audee.mutation import special
from audee.mutation.oplevel import generate_op_case, place_specials
from audee.cases.opcase import OpCase
from audee.oracle.ops import op_findings


def _row() -> np.ndarray:
    return np.random.default_rng(1).random((4, 5)).astype(np.float32) + 1.0


# ---- the kinds, no framework ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["lone_nan", "lone_inf", "lone_-inf"])
def test_a_lone_kind_sets_one_element_per_chosen_slice_and_keeps_the_rest(kind):
    row = _row()
    for axis in (None, 0, 1):
        got = special.special_row(row, kind, np.random.default_rng(7), axis=axis)
        bad = ~np.isfinite(got)
        assert (got[~bad] == row[~bad]).all()  # the rest as it was
        if axis is None:
            assert bad.sum() == 1
        else:
            per_slice = bad.sum(axis=axis)
            assert set(per_slice.tolist()) <= {0, 1} and per_slice.sum() >= 1
        np.testing.assert_array_equal(special.special_row(row, kind, np.random.default_rng(7), axis=axis), got)
    assert kind in NONFINITE_SPECIALS  # the root-cause classes see it as a non-finite input


def test_a_lone_nan_lands_inside_one_segment_among_finite_members():
    """segment_max's data rows are its segments' members: a lone NaN in one row is one NaN in
    one segment, the segment's other rows finite."""
    configs = load_op_configs()
    inside = 0
    for i in range(40):
        case = generate_op_case("segment_max", configs, 3, i)
        place_specials(case, configs["segment_max"], np.random.default_rng(i), 0.3, kinds=["lone_nan"])
        data, ids = np.asarray(case.tensors["data"]), np.asarray(case.tensors["segment_ids"])
        for seg in np.unique(ids):
            rows = data[ids == seg].reshape(int((ids == seg).sum()), -1)
            nan_rows = np.isnan(rows).any(axis=1)
            if len(rows) > 1 and nan_rows.sum() == 1 and np.isnan(rows).sum() == 1:
                inside += 1
    assert inside >= 3, inside


def test_a_nan_tie_puts_the_slice_maximum_twice_and_a_nan():
    row = _row()
    got = special.special_row(row, "nan_tie", np.random.default_rng(3), axis=1)
    hit = np.isnan(got).any(axis=1)
    assert hit.any()
    for r in np.flatnonzero(hit):
        finite = got[r][np.isfinite(got[r])]
        assert np.isnan(got[r]).sum() == 1 and (finite == finite.max()).sum() >= 2
    assert (got[~hit] == row[~hit]).all()


def test_domain_edges_are_the_floats_around_each_bound_and_the_dtypes_edges():
    near, own = special.edge_values(np.float32, [-1.0, 1.0])
    assert near.tolist() == [np.nextafter(np.float32(-1), np.float32(-2)), -1.0, np.nextafter(np.float32(-1), 0),
                             np.nextafter(np.float32(1), 0), 1.0, np.nextafter(np.float32(1), np.float32(2))]
    info = np.finfo(np.float32)
    assert {0.0, float(info.max), float(info.tiny), float(info.smallest_subnormal)} <= set(own.tolist())
    assert np.signbit(own[1]) and own[1] == 0  # -0
    import ml_dtypes

    near, _ = special.edge_values(ml_dtypes.bfloat16, [1.0])
    assert near.dtype == ml_dtypes.bfloat16 and float(near[2]) == 1.0078125  # bfloat16's next float after 1


def test_the_op_configs_carry_domains_and_their_edges_are_drawn():
    configs = load_op_configs()
    assert configs["log"].args["x"].bounds == [0.0] and configs["arccos"].args["x"].bounds == [-1.0, 1.0]
    assert configs["arccosh"].args["x"].bounds == [1.0] and configs["divide"].args["x2"].bounds == [0.0]
    assert not configs["divide"].args["x1"].domain
    sub = float(np.finfo(np.float32).smallest_subnormal)
    wanted = {("arccos", "x"): {-1.0, 1.0, float(np.nextafter(np.float32(1), np.float32(2))),
                                float(np.nextafter(np.float32(1), np.float32(0))),
                                float(np.nextafter(np.float32(-1), np.float32(-2)))},
              ("log", "x"): {0.0, sub, -sub}, ("divide", "x2"): {0.0, sub, -sub}}  # a divisor: 0 and next to it
    for (op, name), values in wanted.items():
        seen: set[float] = set()
        kinds: set[str] = set()
        for i in range(120):
            case = generate_op_case(op, configs, 5, i)
            if case.dtypes[name] != "float32":
                continue
            before = np.array(case.tensors[name], copy=True)
            done = place_specials(case, configs[op], np.random.default_rng(i), 1.0, kinds=["domain_edge"])
            kinds |= {d["kind"] for d in done if d["input"] == name}
            changed = (np.asarray(case.tensors[name]) != before) | (np.signbit(case.tensors[name]) != np.signbit(before))
            seen |= set(np.asarray(case.tensors[name])[changed].astype(np.float64).tolist())
        assert values <= seen, (op, sorted(values - seen))
        assert kinds <= {"domain_edge", "subnormal"} and "domain_edge" in kinds  # a subnormal placed says so
    import ml_dtypes

    for i in range(60):  # a bfloat16 tensor gets bfloat16's edges, and travels as float32 holding them
        case = generate_op_case("arccos", configs, 5, i)
        if case.dtypes["x"] == "bfloat16" and np.ndim(case.tensors["x"]):
            place_specials(case, configs["arccos"], np.random.default_rng(i), 1.0, kinds=["domain_edge"])
            x = np.asarray(case.tensors["x"])
            assert x.dtype == np.float32 and (x.astype(ml_dtypes.bfloat16).astype(np.float32) == x).all()
            break
    else:
        pytest.fail("no bfloat16 arccos case")
    counted = special.describe({"x": np.array([1.0, 0.5, -1.0], np.float32)}, bounds={"x": [-1.0, 1.0]})
    assert counted == {"domain_edge": 2}


def test_a_domain_that_is_no_interval_is_one_line_naming_file_and_field(tmp_path):
    from audee.apis.config import load_api_config
    from audee.core.errors import ConfigError

    for text, say in (("(1, 0)", "low < high"), ("[0, inf]", "infinite bound"), ("0..1", "not an interval")):
        path = tmp_path / "log.yaml"
        path.write_text(f"api: log\ncategory: op.numpy\nargs:\n  x: {{type: tensor, domain: '{text}'}}\n")
        with pytest.raises(ConfigError) as e:
            load_api_config(path)
        assert str(path) in str(e.value) and "args.x.domain" in str(e.value) and say in str(e.value)
    path.write_text("api: log\ncategory: op.numpy\nparams:\n  k: {type: int, range: [0, 3], domain: '(0, 1)'}\n")
    with pytest.raises(ConfigError, match="params.k.domain"):
        load_api_config(path)


def test_every_tensor_argument_can_carry_a_special_value_a_scalar_second_operand_too():
    from audee.levels.op import OpLevel

    cfg = SimpleNamespace(rng=2, invalid_prob=0.0, special_inputs=0.5)
    got = list(OpLevel().cases(None, [("divide", i) for i in range(80)], cfg, None, {}))
    scalar = [(case, meta) for case, meta in got if np.ndim(case.tensors["x2"]) == 0]
    assert scalar, "no case drew a scalar divisor"
    hit = [case for case, meta in scalar if any(s["input"] == "x2" for s in meta.get("special_inputs", []))]
    assert hit, "a scalar second operand never carried a special value"


# ---- index outputs, no framework -----------------------------------------------------------------
def _argmax(x: np.ndarray, outs: dict[str, np.ndarray], axis: int = 1) -> tuple[list[Finding], list[str]]:
    call = {"args": [{"tensor": "x"}], "kwargs": {"axis": axis}}
    outcomes = [Outcome(b) for b in outs]
    return op_findings(outcomes, {b: [o] for b, o in outs.items()}, {b: ["int32"] for b in outs}, {"x": x},
                       None, ["tie_indices"], "argmax", call)


def test_index_outputs_are_judged_by_the_values_they_point_at():
    x = np.array([[5.5, np.nan, 5.5, 1.0], [2.0, 2.0, 1.0, 0.0]], np.float32)
    i = lambda *v: np.array(v, np.int32)  # noqa: E731
    found, skipped = _argmax(x, {"tensorflow": i(0, 0), "torch": i(2, 1)})  # tied maxima: both right
    assert not found and skipped == ["out0: indices of tied values judged by the values they point at"]
    found, _ = _argmax(x, {"tensorflow": i(0, 0), "torch": i(1, 0)})  # the NaN against a finite maximum
    assert [(f.kind, f.detail.tensor, f.detail.dtype) for f in found] == [(Kind.DEVIATION, "out0", "int32")]
    found, _ = _argmax(x, {"tensorflow": i(0, 0), "torch": i(0, 9)})  # an index out of range points at nothing
    assert len(found) == 1


def _classes(found: list[Finding], kind: str = "lone_nan") -> list[tuple[str, tuple[str, ...]]]:
    from audee.triage.rootcause import classify
    from audee.triage.signature import case_signatures
    from audee.cases.case import Verdict

    meta = {"seed": "op:argmax", "api": "argmax", "special_inputs": [{"input": "x", "row": 0, "kind": kind}]}
    return [(classify(s)[0], s.odd) for s in case_signatures(Verdict(found), None, meta)]


def test_an_index_from_a_nan_input_falls_under_the_pair_rule():
    x = np.array([[4.0, 5.5, np.nan]], np.float32)
    one, two = np.array([1], np.int32), np.array([2], np.int32)
    mode, _ = _argmax(x, {"tensorflow": one, "tensorflow-xla": two})
    assert _classes(mode) == [("bug", ("tensorflow-xla",))]  # the compiled mode keeps what eager computes
    independent, _ = _argmax(x, {"tensorflow": one, "torch": two})
    assert [k for k, _ in _classes(independent)] == ["undefined"]  # independent frameworks: the NaN-input rule


# ---- on the real frameworks ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends("tensorflow,tensorflow-xla,torch,jax"), tmp_path_factory.mktemp("logs"),
              threads=1) as p:
        p.start_or_fail()
        yield p


@pytest.mark.slow
def test_one_nan_in_a_reduced_axis_reaches_max_and_xla_drops_it(pool):
    """``keras.ops.max`` over axis 1 with one NaN in some slices among finite values: eager and
    graph TensorFlow, PyTorch and JAX return NaN on exactly those slices; TensorFlow under XLA
    returns the finite maximum (tensorflow/tensorflow#116992), its bug against its reference."""
    from audee.engine.opexec import OpExecutor
    from audee.triage.rootcause import classify
    from audee.triage.signature import case_signatures

    configs = load_op_configs()
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    case = OpCase("max", [{"tensor": "x"}], {"axis": 1}, {"x": x}, {"x": "float32"})
    done = place_specials(case, configs["max"], np.random.default_rng(3), 0.5, kinds=["lone_nan"])
    got = case.tensors["x"]
    assert {d["kind"] for d in done} == {"lone_nan"} and (np.isnan(got).sum(axis=1) <= 1).all()
    slices = np.isnan(got).any(axis=1)
    assert slices.any() and not slices.all()
    r = OpExecutor(pool).run(case)
    for b in ("tensorflow", "torch", "jax"):
        np.testing.assert_array_equal(np.isnan(r.outputs[b][0]), slices, err_msg=b)
    xla = r.outputs["tensorflow-xla"][0]
    assert np.isfinite(xla).all() and np.allclose(xla[slices], np.nanmax(got, axis=1)[slices])
    (nan,) = [f for f in r.verdict.findings if f.kind == Kind.NAN]
    assert nan.detail.odd == ["tensorflow-xla"]
    meta = {"seed": "op:max", "api": "max", "special_inputs": done}
    sigs = [s for s in case_signatures(r.verdict, None, meta) if s.kind == Kind.NAN]
    assert sigs and all(classify(s)[0] == "bug" and s.odd == ("tensorflow-xla",) for s in sigs)


@pytest.mark.slow
def test_an_argmax_with_a_nan_tie_on_a_mode_pair_is_judged_by_the_pair_rule(pool):
    """A row with equal maxima and a NaN: graph TensorFlow and XLA point at different values;
    the pair's difference is XLA's bug, while TensorFlow against PyTorch on it is undefined."""
    from audee.engine.opexec import OpExecutor

    x = np.array([[5.5, np.nan, 5.5, 1.0], [4.0, 5.5, np.nan, 0.0]], np.float32)
    r = OpExecutor(pool, undefined={"argmax": ["tie_indices"]}).run(
        OpCase("argmax", [{"tensor": "x"}], {"axis": 1}, {"x": x}, {"x": "float32"}))
    devs = {tuple(sorted(f.backends)): f for f in r.verdict.findings if f.kind == Kind.DEVIATION}
    pair = devs[("tensorflow", "tensorflow-xla")]
    assert _classes([pair], "nan_tie") == [("bug", ("tensorflow-xla",))]
    assert [k for k, _ in _classes([devs[("tensorflow", "torch")]], "nan_tie")] == ["undefined"]


@pytest.mark.slow
def test_default_op_generation_finds_xla_argmax_on_a_nan(tmp_path):
    """tensorflow/tensorflow#118177 (XLA's argmax picks the NaN, graph TensorFlow the finite
    maximum) from the shipped campaigns' rates (10% special rows, 10% invalid values), rng 1,
    on ``argmax`` alone: case 81 is the first to find it (a ``lone_nan``).  Before, an index
    output of a NaN input was never compared."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.fuzz import FuzzConfig, fuzz_ops
    from audee.store import RunStore

    with Pool(parse_backends("tensorflow,tensorflow-xla"), tmp_path / "logs", threads=1) as p:
        p.start_or_fail()
        cfg = FuzzConfig([w.ref for w in p.workers.values()], tmp_path / "run", variants=82, rng=1,
                         special_inputs=0.1, invalid_prob=0.1)
        fuzz_ops(["argmax"], cfg, pool=p)
    rows = [r for r in RunStore(Path(tmp_path / "run")).rows() if r.status == "fail"]
    found = [(r.id, s) for r in rows for s in r.signatures if s["kind"] == "deviation"]
    assert found, [r.id for r in rows]
    case_id, sig = found[0]
    assert case_id == "op-argmax-v00081" and sig["backends"] == ["tensorflow", "tensorflow-xla"]
    assert sig["odd"] == ["tensorflow-xla"] and "nonfinite_input" in sig["context"]


@pytest.mark.slow
def test_a_lone_nan_in_an_image_reaches_one_pooling_window(tmp_path):
    """At the layer level a ``lone_nan`` row is one NaN in one sample: a 2x2 max pooling keeps
    it in the one window that holds it, and the other windows stay finite, on JAX and torch."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.spec import ModelSpec
    from audee.cases.weights import adapt_weights

    spec = ModelSpec.from_json({
        "name": "pool", "inputs": [{"name": "x", "shape": [4, 4, 1], "range": [0, 1]}],
        "layers": [{"name": "p", "api": "MaxPooling2D", "params": {"pool_size": [2, 2]}, "inputs": ["x"]},
                   {"name": "f", "api": "Flatten", "params": {}, "inputs": ["p"]}],
        "output": "f", "logits": "f"})
    x = np.random.default_rng(0).random((3, 4, 4, 1), dtype=np.float32)
    out, done = special.inject({"x": x}, spec.inputs, np.random.default_rng(1), 1.0, kinds=["lone_nan"])
    assert [d["kind"] for d in done] == ["lone_nan"] * 3 and (np.isnan(out["x"]).sum(axis=(1, 2, 3)) == 1).all()
    windows = np.isnan(out["x"][..., 0]).reshape(3, 2, 2, 2, 2).any(axis=(2, 4)).reshape(3, 4)
    with Pool(parse_backends("jax,torch"), tmp_path) as pool:
        pool.start_or_fail()
        shapes = {k: [(r, tuple(s)) for r, s in v] for k, v in pool.build(spec)["jax"]["shapes"].items()}
        got = pool.run(spec, adapt_weights({}, shapes, 0), "w0", out)
    for label in ("jax", "torch"):
        np.testing.assert_array_equal(np.isnan(np.asarray(got[label]["output"])), windows, err_msg=label)
