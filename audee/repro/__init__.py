"""Standalone repro scripts: one failure of a case as plain Python a framework maintainer runs.

:func:`write_repro` writes ``OUT/<name>.py`` and ``OUT/<name>.npz``.  The script imports
numpy and the frameworks only (no audee): it builds the model with Keras' functional API
from a small embedded JSON spec, loads weights and inputs from the ``.npz`` beside it,
runs each backend in its own process (re-invoking itself with ``--backend NAME``),
compares the outputs for the recorded finding kind and exits 0 if the failure reproduces,
1 if it does not, 2 if the environment is broken (a framework missing), 3 if its ``.npz``
is missing or not the one it was written with (checked before anything runs: bad data is
never a verdict).  The template is :mod:`audee.repro.template`.

The model is the smallest one that still fails: with a layer known (``layer=``, the
deviation finding's ``own_layers``, the NaN finding's first layer, a localization result in
the case) the layer alone, fed one backend's output of its predecessors (as
:mod:`audee.localize` builds one-layer cases), on the failing rows of the batch; each
candidate is checked on ``pool`` and the first that still fails, through the programs the
case ran (:func:`shows_program`: a converter may compute the layer alone with a sibling
kernel), is written, else the whole variant.  Plugin backends cannot be in a script (it would need audee's code): a
failure that involves one is refused.
"""
from __future__ import annotations

import inspect
import io
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audee import __version__
from audee.backends.info import describe
from audee.cases.case import Finding, Kind, TestCase
from audee.core.errors import AudeeError
from audee.oracle.equivalence import batch_rule
from audee.cases.kinds import BY_NAME, CRASHES, PAIRWISE
from audee.levels import level_of
from audee.oracle.declared import shape_text
from audee.oracle.deviation import Tolerances
from audee.records.findings import DeclaredOutputDetail, DeviationDetail, EquivalenceDetail, HardCrashDetail
from audee.records.localization import LocalizationReport
from audee.records.rows import ResultRow
from audee.repro.recheck import run_alone, script_env
from audee.repro.source import Code, Comment, Data, fill
from audee.repro.template import JUDGED_KINDS, SCRIPT
from audee.cases.spec import ModelSpec, Weights, contiguous, one_layer_spec, weights_key
from audee.core.bounded import utf8
from audee.store.atomic import write_atomic
from audee.store.caserecord import BUILTIN_TARGETS, CaseRecord
from audee.store.runstore import RunStore
from audee.oracle.verdicts import finding_holds, main_failure

#: the script's exit codes (its header says them too): the failure reproduces, it does not, the
#: environment is broken (a framework missing), the data file is missing or damaged (no verdict)
EXIT_REPRODUCED, EXIT_NOT_REPRODUCED, EXIT_BROKEN, EXIT_BAD_DATA = 0, 1, 2, 3
SCRIPT_TIMEOUT_S = 600


@dataclass
class ReproScript:
    script: Path
    data: Path
    kind: str
    backends: list[str]
    model: str                      # "one-layer" or "variant"
    layer: str | None               # the layer alone (one-layer), else None
    rows: list[int]                 # rows of the case's batch kept
    verified: bool | None = None    # checked on the pool to fail now (None: not checked)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        what = f"layer {self.layer} alone" if self.model == "one-layer" else "the whole variant"
        check = {True: "checked to fail now", False: "does NOT fail now on audee's workers",
                 None: "not checked"}[self.verified]
        return f"{self.kind} on {', '.join(self.backends)}: {what}, {len(self.rows)} input(s), {check}"


# ---- what the script shows ----------------------------------------------------------------------
def pick_finding(record: CaseRecord, index: int | None = None) -> Finding:
    """The finding a script is written for: ``index`` into the verdict, else the case's
    main failure (:func:`audee.oracle.verdicts.main_failure`)."""
    findings = [Finding.from_json(f) for f in record.verdict.get("findings", [])]
    if index is not None:
        if not 0 <= index < len(findings):
            raise AudeeError(f"the case has {len(findings)} findings, no finding {index}", source=record.source or None)
        return findings[index]
    main = main_failure(findings)
    if main is not None:
        return main
    raise AudeeError("the case records no failure to reproduce (verdict: "
                     f"{record.verdict.get('status', '?')})", source=record.source or None)


def _roles(record: CaseRecord, f: Finding) -> tuple[list[str], list[str]]:
    """(backends the script runs, the failing ones among them), in the case's order."""
    d = f.detail
    if f.kind == Kind.DIVERGENT_ACCEPTANCE:
        run = list(f.backends) + [b for b in d.accepted if b not in f.backends][:1]
    elif f.kind == Kind.NAN:
        run = list(f.backends) + [b for b in d.finite_backends if b not in f.backends][:1]
    else:
        run = list(f.backends)
    order = [r.label for r in record.backends]
    run = sorted(dict.fromkeys(run), key=lambda b: order.index(b) if b in order else len(order))
    if f.kind in PAIRWISE:
        run = list(f.backends)  # the pair, reference first
    if f.kind == Kind.EQUIVALENCE:
        run = list(f.backends)  # one backend, the model and its equivalent
    return run, list(f.backends)


def check_builtin(record: CaseRecord, labels: list[str]) -> None:
    """Refuse a failure that needs a plugin backend: the script runs built-in backends only."""
    targets = {r.label: r.target for r in record.backends}
    plugins = [b for b in labels if targets.get(b, "") not in BUILTIN_TARGETS]
    if plugins:
        raise AudeeError(
            f"the failure involves the plugin backend {plugins[0]!r} ({targets.get(plugins[0], '?')}); a repro "
            "script runs built-in backends only (numpy and the frameworks, no audee code), so it cannot show it",
            source=record.source or None)


def check_one_interpreter(record: CaseRecord, f: Finding) -> None:
    """Refuse a failure between environments (a ``regression``, or any finding naming a
    backend recorded in another environment, ``torch@prev``): a script runs every backend
    under the one interpreter that runs it, so it would compare one release with itself."""
    envs = {r.label: r.env for r in record.backends if r.env is not None}
    named = [b for b in f.backends if b in envs]
    if f.kind == Kind.REGRESSION or named:
        where = f" ({named[0]!r} ran in the environment {envs[named[0]]!r})" if named else ""
        raise AudeeError(f"a {f.kind} finding between environments{where} cannot be in a standalone script: it "
                         "runs every backend under the interpreter that runs it; `audee reproduce --env "
                         "NAME=/path/to/python` re-runs the case", source=record.source or None)


def known_layer(record: CaseRecord, f: Finding, layer: str | None = None) -> str | None:
    """The layer the failure is pinned on: given, from the finding, or from a localization."""
    names = set(record.model_spec.layer_names())
    if layer is not None:
        if layer not in names:
            raise AudeeError(f"no layer {layer!r} in the case's model (layers: {', '.join(sorted(names))})",
                             field="--layer")
        return layer
    d = f.detail
    cands: list[Any] = list(d.own_layers) if isinstance(d, DeviationDetail) else []
    if isinstance(d, EquivalenceDetail) and d.reason in ("values", "nonfinite", "rejected", "crashed"):
        cands.append(d.layer)  # the layer that differs from its equivalent alone (or whose rewrite is refused)
    if f.kind == Kind.NAN:  # where the patterns part, as the signature blames (not a backend's first NaN)
        cands += [d.departure(record.model_spec.layer_names(), f.backends)]
    if isinstance(d, DeclaredOutputDetail):  # the first layer computing unlike its declaration
        cands.append(d.layer)
    loc = record.meta.get("localization")
    if isinstance(loc, dict):
        cands += [s.layer for s in LocalizationReport.from_json(loc).sources]
    if f.kind in CRASHES:  # a layer the error message names
        from audee.triage.signature import named_layer

        texts = [d.message] if isinstance(d, HardCrashDetail) else [e.message for e in d.errors.values()]
        spec_layers = {ls.name: ls for ls in record.model_spec.layers}
        cands += [named_layer(t, spec_layers) for t in texts if isinstance(t, str)]
    return next((c for c in cands if isinstance(c, str) and c in names), None)


def failing_rows(f: Finding, n: int) -> list[int]:
    """The batch rows the finding names (all rows when it names none)."""
    d = f.detail
    if f.kind == Kind.EQUIVALENCE and batch_rule(d.rule):
        return list(range(n))  # a batch rule's rows only mean something in their batch
    rows = d.rows if f.kind in (Kind.DEVIATION, Kind.EQUIVALENCE) else d.inputs if f.kind == Kind.INCONSISTENCY else None
    rows = sorted({int(r) for r in rows or [] if 0 <= int(r) < n})
    return rows or list(range(n))


def _compare_layer(spec: ModelSpec, f: Finding, one_layer: str | None) -> str:
    if one_layer is not None:
        return one_layer
    if f.kind == Kind.EQUIVALENCE and f.detail.reason == "shape" and f.detail.layer in spec.layer_names():
        return f.detail.layer  # the layer whose shape the equivalent changed (the next may hide it)
    if f.kind in (Kind.DEVIATION, Kind.EQUIVALENCE):  # the tensor the whole-model check found out of tolerance
        return spec.output if f.detail.tensor == "output" else spec.logits_layer
    if f.kind == Kind.DECLARED_OUTPUT and f.detail.layer in spec.layer_names():  # the layer unlike its declaration
        return f.detail.layer
    return spec.output


# ---- checking a candidate on audee's workers ----------------------------------------------------
def _still_fails(pool: Any, record: CaseRecord, f: Finding, case: TestCase, layer: str | None = None) -> bool:
    """Whether ``case`` fails as ``f`` did, through the same programs (:func:`shows_program`)."""
    from audee.engine.execute import Executor

    ex = Executor(pool, tie_margin=record.tie_margin, diagnose=False, tolerances=record.tolerances or None,
                  equivalence=[f.detail.rule] if f.kind == Kind.EQUIVALENCE else [])
    ex.complete_weights(case, 0)
    return any(finding_holds(f, [g]) and shows_program(f, g, layer) for g in ex.run(case).verdict.findings)


def shows_program(recorded: Finding, now: Finding, layer: str | None = None) -> bool:
    """Whether ``now``'s programs show every fact ``recorded``'s showed of ``layer`` (of any
    layer where None), backend by backend (:data:`audee.backends.info.PROGRAM_FACTS`).  A
    converter can compute a layer alone with another kernel than inside its model (tf2onnx
    folds the transposes before a channels_first max pooling into a ReduceMax, and writes a
    GlobalMaxPool for the layer alone): a smaller model failing through the sibling kernel
    shows the maintainer another bug, so it is no smaller model of this one."""
    want: dict[str, dict[str, list[str]]] = getattr(recorded.detail, "program", None) or {}
    got: dict[str, dict[str, list[str]]] = getattr(now.detail, "program", None) or {}

    def facts(program: dict[str, dict[str, list[str]]], backend: str) -> set[str]:
        per = program.get(backend) or {}
        return set(per.get(layer, ())) if layer is not None else {x for fs in per.values() for x in fs}

    return all(facts(want, b) <= facts(got, b) for b in want)


def _layer_inputs(pool: Any, spec: ModelSpec, weights: Weights, inputs: dict[str, np.ndarray], layer: str,
                  source: str) -> dict[str, np.ndarray] | None:
    """The layer's inputs as ``source`` computes them inside the model (None if it cannot run)."""
    from audee.backends.pool import WorkerFailure

    pool.build(spec, labels=[source])
    got = pool.run(spec, weights, weights_key(weights), inputs, labels=[source], layers=True)[source]
    if isinstance(got, WorkerFailure):
        return None
    outs = got["layers"]
    return {ref: (outs[ref] if ref in outs else inputs[ref]) for ref in spec.layer(layer).reads}


def _one_layer(spec: ModelSpec, weights: Weights, layer: str, layer_inputs: dict[str, np.ndarray]) -> TestCase:
    s1 = one_layer_spec(spec, layer, layer_inputs)
    return TestCase(f"{layer}-alone", s1, {layer: weights[layer]} if layer in weights else {}, dict(layer_inputs))


# ---- writing ----------------------------------------------------------------------------------
def _packages(backend: str) -> list[str]:
    """What a repro script imports to run a backend: its description's packages (a
    converter's whole path: the framework whose Keras model it takes, the converter, the
    runtime; a mode runs on its framework)."""
    return list(describe(backend).packages) or [backend.partition("@")[0].partition("-")[0]]


def write_repro(record: CaseRecord, out_dir: Path, name: str, *, model: str = "auto", layer: str | None = None,
                pool: Any = None, finding: int | None = None, timeout: float = SCRIPT_TIMEOUT_S) -> ReproScript:
    """Write ``out_dir/<name>.py`` and ``out_dir/<name>.npz`` for one failure of ``record``.

    ``model``: ``auto`` (the layer alone when a layer is known and it still fails on
    ``pool``, else the variant), ``one-layer`` or ``variant``.  Without a pool nothing is
    checked and no one-layer model can be made (its input comes from running the case)."""
    if model not in ("auto", "one-layer", "variant"):
        raise AudeeError(f"expected auto, one-layer or variant, got {model!r}", field="--model")
    f = pick_finding(record, finding)
    if f.kind == Kind.PRECISION:  # judged against a float64 model the script does not build
        raise AudeeError("no standalone script for a precision finding yet (its case's deviation findings, if any, "
                         "have theirs; `audee localize` names its layer)", source=record.source or None)
    if f.is_failure and f.kind not in JUDGED_KINDS:  # a kind the script cannot tell: no script rather than a wrong one
        raise AudeeError(f"no standalone script for a {f.kind} finding (a model script judges "
                         f"{', '.join(JUDGED_KINDS)})", source=record.source or None)
    run, failing = _roles(record, f)
    check_builtin(record, run)
    spec = record.model_spec
    case = record.test_case()
    n = case.batch
    rows = failing_rows(f, n)
    notes: list[str] = []
    target = known_layer(record, f, layer) if model != "variant" else None
    if model == "one-layer" and target is None:
        raise AudeeError("no layer known for a one-layer model: name one with --layer", field="--layer")
    if target is not None and pool is None:
        notes.append(f"layer {target} alone needs audee's workers to compute its input: the whole variant is written")
        target = None

    def sub(r: list[int]) -> dict[str, np.ndarray]:
        return {k: v[r] for k, v in case.inputs.items()}

    candidates: list[tuple[str, TestCase, list[int]]] = []
    if target is not None:
        source = failing[0] if f.kind == Kind.NAN else \
            next((b for b in run if b not in failing), run[0]) if f.kind in CRASHES else run[0]
        li = _layer_inputs(pool, spec, case.weights, sub(rows), target, source)
        if li is None:
            notes.append(f"{source} cannot run the model to give layer {target} its input")
        else:
            candidates.append(("one-layer", _one_layer(spec, case.weights, target, li), rows))
    if model != "one-layer":
        candidates.append(("variant", TestCase(case.id, spec, case.weights, sub(rows)), rows))
        if len(rows) < n:
            candidates.append(("variant", TestCase(case.id, spec, case.weights, dict(case.inputs)), list(range(n))))
    if not candidates:
        raise AudeeError(f"cannot make a one-layer model: {notes[-1]}", source=record.source or None)

    chosen, verified = candidates[0], None   # unchecked: the failing rows of the variant
    if pool is not None:
        chosen = candidates[-1]
        verified = False
        for cand in candidates:
            if _still_fails(pool, record, f, cand[1], target if cand[0] == "one-layer" else None):
                chosen, verified = cand, True
                break
            notes.append(f"{cand[0]}{' ' + target if cand[0] == 'one-layer' else ''} on {len(cand[2])} input(s) "
                         "does not fail now, or not through the programs the case ran")
        if not verified and model == "one-layer":
            chosen = candidates[0]
    kind_model, tc, kept = chosen
    one = target if kind_model == "one-layer" else None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    script, data = out_dir / f"{name}.py", out_dir / f"{name}.npz"
    equiv = _equivalent(f, tc)
    manifest = _write_data(data, tc, equiv)
    text = render(record, f, tc.spec, run, failing, name, one=one, compare=_compare_layer(tc.spec, f, one),
                  rows=kept, timeout=timeout, data=manifest, equiv=equiv)
    write_atomic(script, utf8(text))
    os.chmod(script, 0o755 & ~_umask())
    return ReproScript(script, data, f.kind, run, kind_model, one, kept, verified, notes)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _data_arrays(case: TestCase, equiv: Any = None) -> dict[str, np.ndarray]:
    """The ``.npz``'s arrays: ``x/<input>`` and ``w/<layer>/<k>``; an equivalent model's
    weights as ``v/<layer>/<k>``."""
    arrays = {f"x/{k}": contiguous(v) for k, v in case.inputs.items()}
    for lname, arrs in case.weights.items():
        for k, a in enumerate(arrs):
            arrays[f"w/{lname}/{k}"] = contiguous(a)  # a scalar weight keeps its shape ()
    for lname, arrs in (equiv.weights.items() if equiv is not None else ()):
        for k, a in enumerate(arrs):
            arrays[f"v/{lname}/{k}"] = contiguous(a)
    return arrays


def _equivalent(f: Finding, case: TestCase) -> Any:
    """The equivalent model of ``case`` by an ``equivalence`` finding's rule (None otherwise,
    or when the rule no longer applies to it)."""
    if f.kind != Kind.EQUIVALENCE or not f.detail.rule:
        return None
    from audee.equivalence.rules import RULES

    rule = RULES.get(f.detail.rule)
    return rule.apply(case.spec, case.weights) if rule is not None else None


def _write_data(path: Path, case: TestCase, equiv: Any = None) -> dict[str, tuple[list[int], str]]:
    """Write the ``.npz`` of ``case``; its manifest (array -> shape and dtype, as read
    back), which the script checks its data file against before it runs anything."""
    buf = io.BytesIO()
    np.savez_compressed(buf, **_data_arrays(case, equiv))
    data = buf.getvalue()
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        manifest = {k: (list(z[k].shape), str(z[k].dtype)) for k in z.files}
    write_atomic(path, data)   # mode 0o666 less the umask, as every file audee writes
    return manifest


def _versions(record: CaseRecord, labels: list[str]) -> str:
    parts = []
    for b in labels:
        v = record.versions.get(b) or {}
        if isinstance(v, dict) and v:
            parts.append(f"{b}: " + ", ".join(f"{k} {x}" for k, x in v.items()))
    return "; ".join(parts) or "(not recorded)"


def _expect(f: Finding, run: list[str], failing: list[str], layer: str) -> str:
    others = [b for b in run if b not in failing]
    if f.kind == Kind.HARD_CRASH:
        how = f.detail.how or "crash"
        return f"{', '.join(failing)} crashes ({how}, {f.detail.phase or '?'} phase)"
    if f.kind == Kind.DIVERGENT_ACCEPTANCE:
        return f"{', '.join(failing)} rejects a model that {', '.join(others)} runs"
    if f.kind == Kind.NAN:
        return f"NaN/Inf on {', '.join(failing)}" + (f" where {', '.join(others)} stays finite" if others else "")
    if f.kind == Kind.EQUIVALENCE:
        a, rule = f.backends[0], f.detail.rule
        if f.detail.reason in ("rejected", "crashed"):
            return f"{a} runs the model but refuses its equivalent by the rule {rule}"
        if f.detail.reason == "original_rejected":
            return f"{a} refuses the model but runs its equivalent by the rule {rule}"
        return f"{a} computes {layer} differently in the model and in its equivalent by the rule {rule}"
    if f.is_failure and f.kind not in (Kind.INCONSISTENCY, Kind.DEVIATION):  # no words here: the kind table's
        return f"{', '.join(f.backends)}: {BY_NAME[f.kind].about}"
    a, b = f.backends[:2]
    if f.kind == Kind.INCONSISTENCY:
        return f"{a} and {b} predict different labels for the same inputs"
    return f"{a} and {b} disagree on {layer} beyond the tolerance"


def _recorded(f: Finding) -> str:
    d = f.detail
    if f.kind == Kind.DIVERGENT_ACCEPTANCE:
        return "; ".join(f"{b} {e.phase or '?'} error: {(e.message or '').strip().splitlines()[0][:160]}"
                         for b, e in d.errors.items() if (e.message or "").strip())
    if f.kind == Kind.HARD_CRASH:
        return f"{', '.join(f.backends)}: {(d.message or d.how or '').strip()[:160]}"
    if f.kind == Kind.INCONSISTENCY:
        flips = d.n_flips if d.n_flips is not None else "?"
        return f"{flips} label flips, logits distance {d.distance if d.distance is not None else float('nan'):.4g}"
    if f.kind == Kind.NAN:
        first = d.first_layer
        return "first non-finite layer " + ", ".join(f"{k}: {v}" for k, v in first.items()) if first else ""
    if isinstance(d, DeclaredOutputDetail) and d.declared:
        return f"{d.layer}: declared {shape_text(d.declared)}, computed " + \
            ", ".join(f"{shape_text(got)} on {b}" for b, got in d.computed.items())
    if isinstance(d, EquivalenceDetail):
        shown = {"rule": d.rule, "reason": d.reason, "score": d.score, "first_layer": d.first_layer,
                 "layer": d.layer, "message": (d.message or "")[:160] or None}
        return ", ".join(f"{k} {v}" for k, v in shown.items() if v is not None)
    if not isinstance(d, DeviationDetail):
        return ""
    shown = {"score": d.score, "max_abs": d.max_abs, "max_rel": d.max_rel, "n_out": d.n_out,
             "first_layer": d.first_layer, "own_layers": d.own_layers}
    return ", ".join(f"{k} {v}" for k, v in shown.items() if d.written(k))


def render(record: CaseRecord, f: Finding, spec: ModelSpec, run: list[str], failing: list[str], name: str, *,
           one: str | None, compare: str, rows: list[int], timeout: float,
           data: dict[str, tuple[list[int], str]], equiv: Any = None) -> str:
    """The script's text; ``data``: the manifest of its ``.npz`` (:func:`_write_data`);
    ``equiv``: an equivalence finding's equivalent model (:class:`audee.equivalence.Rewrite`)."""
    given = f.detail.tolerance if isinstance(f.detail, (DeviationDetail, EquivalenceDetail)) else None
    tol = (given.to_json() if given is not None else None) or (record.tolerances or {}).get("float32") or {}
    rtol, atol = float(tol.get("rtol", 1e-3)), float(tol.get("atol", 1e-5))
    expect = _expect(f, run, failing, compare)
    model = {"inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in spec.inputs],
             "layers": [{"name": n, "api": spec.layer(n).api, "params": spec.layer(n).params,
                         "inputs": spec.layer(n).inputs} | ({"call": spec.layer(n).call} if spec.layer(n).call else {})
                        for n in spec.topological_order()]}
    case = {"title": f"{f.kind}: {expect}", "kind": f.kind, "expect": expect, "backends": run, "failing": failing,
            "pair": list(f.backends[:2]), "layer": compare, "tie_margin": record.tie_margin, "rtol": rtol,
            "atol": atol, "timeout": timeout,
            "devices": {r.label: r.device for r in record.backends if r.label in run},
            "precisions": {r.label: r.precision for r in record.backends if r.label in run},
            "tie_rtol": {dt: float(getattr(Tolerances.from_json(record.tolerances), dt).rtol)
                         for dt in ("bfloat16", "float16", "tf32")},
            "data": data,
            # an equivalence finding whose backend refused the model and ran its equivalent
            "refused": f.kind == Kind.EQUIVALENCE and f.detail.reason == "original_rejected"}
    seed = record.meta.get("seed")
    what = (f"layer {one} ({spec.layer(one).api}) alone, fed the input it saw inside" if one
            else f"the whole model ({len(spec.layers)} layers) of") + f" case {record.id}" \
        + (f" (seed {seed})" if seed else "") + f", {len(rows)} input(s)"
    needs = sorted({m for b in run for m in _packages(b)})
    recorded = _recorded(f)
    header = [f"Repro: {expect}.", "",
              f"Shows: {f.kind}. The model: {what}.",
              *([f"Recorded: {recorded}"] if recorded else []),
              f"Found with: {_versions(record, run)}", "",
              f"Run:  python {name}.py      ({name}.npz beside it holds the weights and inputs;",
              f"      needs numpy, keras 3, {', '.join(needs)})",
              f"      python {name}.py --backend {run[0]} --out OUT.npz   runs one backend alone",
              "Exit: 0 the failure reproduces, 1 it does not, 2 the environment is broken,",
              f"      3 {name}.npz is missing or damaged (checked first: no verdict).",
              f"Written by audee {__version__} from case {record.id}; the script does not need audee."]
    return fill(SCRIPT, {"HEADER": Comment(header), "MODEL": Data(model, rows=True), "CASE": Data(case),
                         "EQUIV": Data(_equiv_json(equiv, len(rows))), "OWNED": Code(_owned_source()),
                         "DATA": Data(f"{name}.npz")})


def _owned_source() -> str:
    """The text of :mod:`audee.apis.owned_layers` (audee's own layers and the round trips),
    which the script carries verbatim: it runs without audee, and this stays the one owner."""
    from audee.apis import owned_layers

    return inspect.getsource(owned_layers).strip()


def _equiv_json(equiv: Any, n: int) -> Any:
    """The script's EQUIV: the equivalent model, its rows, input dtype and layer map (None
    for other kinds)."""
    if equiv is None:
        return None
    s = equiv.spec
    return {"rule": equiv.rule, "rows": equiv.rows(n), "input_dtype": equiv.input_dtype, "map": equiv.layer_map,
            "model": {"inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in s.inputs],
                      "layers": [{"name": x, "api": s.layer(x).api, "params": s.layer(x).params,
                                  "inputs": s.layer(x).inputs} | ({"call": s.layer(x).call} if s.layer(x).call else {})
                                 for x in s.topological_order()]}
            | ({"roundtrip": s.roundtrip} if s.roundtrip else {})}


# ---- running one ------------------------------------------------------------------------------
def run_script(script: Path, timeout: float = SCRIPT_TIMEOUT_S * 2) -> tuple[int, str]:
    """Run a repro script alone in a fresh process (its own directory as cwd is not needed:
    a scratch one is used); its exit code and output."""
    r = run_alone([sys.executable, str(Path(script).resolve())], env=script_env({}), timeout=timeout)
    if r.exit is None:
        return EXIT_BROKEN, f"the script ran past {timeout:.0f} s"
    return r.exit, (r.stdout + (r.stderr[-2000:] if r.exit not in (0, 1) else "")).rstrip()


def default_name(record: CaseRecord, f: Finding) -> str:
    """The bug signature's slug (:meth:`audee.triage.signature.Signature.slug`), else the case id."""
    try:
        from audee.triage.signature import signatures_of  # noqa: PLC0415

        sigs = signatures_of(f, record.spec, record.meta, record.meta.get("localization"))
        if sigs:
            return sigs[0].slug()
    except Exception:  # noqa: BLE001 - no signature: the case id names it
        pass
    return record.id


# ---- `audee repro CASE.pkl` ---------------------------------------------------------------------
def repro_case(path: str | Path, *, out: str | Path | None = None, name: str | None = None, layer: str | None = None,
               model: str = "auto", backends: list[Any] | None = None, allowed_plugins: Any = (),
               timeout: float = SCRIPT_TIMEOUT_S, log_dir: Path | None = None,
               finding: int | None = None) -> ReproScript:
    """Write the repro script of a case file: into ``out`` (default: ``repro/`` beside the
    case's ``cases/`` directory), named after the bug signature.  Audee's workers (the
    script's backends, or ``backends``) compute the one-layer input and check the model
    still fails."""
    record = CaseRecord.from_file(path)
    check_one_interpreter(record, pick_finding(record, finding))
    return level_of(record).repro_case(path, record, out=out, name=name, layer=layer, model=model,
                                       backends=backends, allowed_plugins=allowed_plugins, timeout=timeout,
                                       log_dir=log_dir, finding=finding)


def repro_model_case(path: str | Path, record: CaseRecord, *, out: str | Path | None = None,
                     name: str | None = None, layer: str | None = None, model: str = "auto",
                     backends: list[Any] | None = None, allowed_plugins: Any = (),
                     timeout: float = SCRIPT_TIMEOUT_S, log_dir: Path | None = None,
                     finding: int | None = None) -> ReproScript:
    """:func:`repro_case` of a model case (network or API level): its smallest failing model
    per backend, computed on audee's workers."""
    from audee.backends.pool import Pool
    from audee.settings import TIMEOUT_S

    f = pick_finding(record, finding)
    run, _ = _roles(record, f)
    check_builtin(record, run)
    refs = {r.label: r for r in (backends or record.backends)}
    missing = [b for b in run if b not in refs]
    if missing:
        raise AudeeError(f"the failure involves {', '.join(missing)}, not among --backends", field="--backends")
    plugins = [refs[b].target for b in run if refs[b].target not in BUILTIN_TARGETS
               and refs[b].target not in set(allowed_plugins)]
    if plugins:
        raise AudeeError(f"--backends names the plugin {plugins[0]!r}: a repro script runs built-in backends only",
                         field="--backends")
    case_dir = Path(path).resolve().parent
    out_dir = Path(out) if out is not None else RunStore(case_dir.parent).repro_dir  # cases/ is in a run directory
    with tempfile.TemporaryDirectory(prefix="audee-repro-") as tmp:
        with Pool([refs[b] for b in run], log_dir or Path(tmp), timeout=TIMEOUT_S) as pool:
            pool.start_or_fail(source=str(path))
            return write_repro(record, out_dir, name or default_name(record, f), model=model, layer=layer,
                               pool=pool, finding=finding, timeout=timeout)


# ---- one script per unique bug of a run ---------------------------------------------------------
def _finding_of(findings: list[Finding], sig: Any, record: CaseRecord) -> int | None:
    """The index of the finding that shows ``sig``: the one with that signature, else (a
    signature the case merged from several findings: the pairwise deviations of three
    backends apart on one layer are one disagreement) the first member of it, the same kind,
    layer API and parameters with its backends among the merged ones; each finding signed once."""
    from audee.triage.signature import signatures_of

    signed = [signatures_of(f, record.spec, record.meta) for f in findings]
    slug = sig.slug()
    exact = next((i for i, sigs in enumerate(signed) if any(s.slug() == slug for s in sigs)), None)
    if exact is not None:
        return exact
    return next((i for i, sigs in enumerate(signed) for s in sigs
                 if (s.kind, s.api, s.params) == (sig.kind, sig.api, sig.params)
                 and set(s.backends) <= set(sig.backends)), None)


def write_bug_repros(store: RunStore, pool: Any, rows: list[ResultRow]) -> list[Path]:
    """For every unique bug (signature) of a run's results rows whose script is not written
    yet, write ``<slug>.py`` into the run's repro folder from the bug's first case file, on
    ``pool`` (the run's workers, still up: they compute one-layer inputs and check the
    smallest model still fails).  A bug that needs a plugin backend gets no script (logged);
    nothing here stops the run."""
    import logging

    from audee.triage.signature import Signature

    log = logging.getLogger(__name__)
    written: list[Path] = []
    first: dict[str, tuple[ResultRow, Signature]] = {}  # a bug's slug -> its first row and signature
    for row in sorted(rows, key=lambda r: r.id):
        for d in row.signatures:
            if row.case_file is not None:
                sig = Signature.from_json(d)
                first.setdefault(sig.slug(), (row, sig))
    for slug, (row, sig) in first.items():
        if (store.repro_dir / f"{slug}.py").is_file():
            continue
        try:
            record = store.load_case(row.case_file)
            findings = [Finding.from_json(f) for f in record.verdict.get("findings", [])]
            index = _finding_of(findings, sig, record)
            if index is None:
                log.info("no repro script for %s: no finding of %s shows it", slug, row.id)
                continue
            check_one_interpreter(record, findings[index])
            written.append(level_of(record).bug_repro(record, store.repro_dir, slug, pool, index))
        except AudeeError as exc:
            log.info("no repro script for %s: %s", slug, exc)
        except Exception:  # a broken script writer must not cost the run its results
            log.exception("writing the repro script for %s failed", slug)
    return written
