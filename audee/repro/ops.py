"""Standalone repro scripts of op-level cases: a few lines calling one
``keras.ops`` function on each backend.

The script embeds the call (op, arguments, each tensor's values as JSON: NaN and Inf
included) and runs each backend in its own process (``KERAS_BACKEND`` is read once per
process), re-invoking itself with ``--backend NAME``; then it judges the recorded finding
as the oracle did (:mod:`audee.oracle.ops`: crashes and rejections by who raised,
non-finite patterns, values with the recorded tolerance, integers exactly, shapes and
dtypes) and exits 0 when it reproduces, 1 when it does not, 2 when a framework is missing.
The script is the op level's body in the one scaffold (:mod:`audee.repro.scaffold`).
Built-in backends need numpy and the frameworks only; a plugin backend (``module:Class``,
an injected op bug) is imported from its module in its child, so its script needs that
module on the path, and nothing else of audee's.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from audee.backends.info import keras_frameworks
from audee.cases.case import Finding, Kind
from audee.core.errors import AudeeError
from audee.repro.scaffold import compose
from audee.repro.source import Code, Comment, Data, fill
from audee.repro.template import SCRIPT as MODEL_SCRIPT
from audee.core.bounded import utf8
from audee.store.atomic import write_atomic
from audee.store.caserecord import BUILTIN_TARGETS, CaseRecord

KERAS_OF = {name: name for name in keras_frameworks()}  # the Keras frameworks as they are


def _function(name: str) -> str:
    """The text of one function of the model scripts' template (its comparisons are held
    equal to the package's by ``tests/test_decisions.py``): shared, not copied."""
    m = re.search(rf"^def {name}\(.*?(?=^\S)", MODEL_SCRIPT, re.M | re.S)
    assert m is not None, name
    return m.group(0).rstrip() + "\n"


OP_CONSTANTS = r'''
CALL = json.loads(__CALL__)
TENSORS = json.loads(__TENSORS__)     # name -> [dtype as stored, shape, values]
BACKENDS = json.loads(__BACKENDS__)   # label -> {"keras": KERAS_BACKEND, "plugin": "module:Class" or null}
CASE = json.loads(__CASE__)           # the finding: kind, backends, output, tolerance
RUNS = list(BACKENDS)
TITLE = None
'''

OP_BODY = r'''
def call(label):
    """keras.ops.<op>(*args, **kwargs) on one backend (activations.<name>: keras.activations):
    its outputs, flattened."""
    os.environ["KERAS_BACKEND"] = BACKENDS[label]["keras"]
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import keras
    ops = keras.ops
    fn = keras if CALL["op"].startswith("activations.") else ops
    for part in CALL["op"].split("."):
        fn = getattr(fn, part)
    if BACKENDS[label].get("plugin"):
        import importlib
        module, cls = BACKENDS[label]["plugin"].split(":")
        fn = getattr(importlib.import_module(module), cls)("cpu").op_function(CALL["op"])

    def arg(v):
        if isinstance(v, dict) and set(v) == {"tensor"}:
            dtype, shape, values = TENSORS[v["tensor"]]
            t = ops.convert_to_tensor(np.array(values, dtype=dtype).reshape(shape))
            want = CALL["dtypes"].get(v["tensor"], dtype)
            return ops.cast(t, want) if want != dtype else t
        if isinstance(v, list):
            items = [arg(x) for x in v]
            return tuple(items) if all(isinstance(x, (int, float)) for x in items) else items
        return v

    out = fn(*[arg(a) for a in CALL["args"]], **{k: arg(v) for k, v in CALL["kwargs"].items()})
    flat = []

    def walk(o):
        if isinstance(o, (tuple, list)):
            for x in o:
                walk(x)
        elif isinstance(o, (bool, int, float)):
            flat.append((np.asarray(o), str(np.asarray(o).dtype)))
        else:
            dtype = keras.backend.standardize_dtype(o.dtype)
            flat.append((np.asarray(ops.convert_to_numpy(ops.cast(o, "float32") if dtype == "bfloat16" else o)),
                         dtype))
    walk(out)
    return flat


def child(label, out):
    """The call on one backend, in this process: its outputs and dtypes, or its error."""
    try:
        flat = call(label)
    except ImportError as exc:
        environment_broken(label, exc)
    except Exception as exc:  # the op refused the call: that is a result
        write_result(out, info=np.array(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]})))
        return
    write_result(out, info=np.array(json.dumps({"dtypes": [d for _, d in flat]})),
                 **{f"o{i}": a for i, (a, _) in enumerate(flat)})


def read_result(out):
    """What a child wrote: the outputs and their dtypes, or the error."""
    with np.load(out) as z:
        got = json.loads(str(z["info"]))
        if "error" in got:
            return got
        return {"outputs": [z[f"o{i}"] for i in range(len(got["dtypes"]))], "dtypes": got["dtypes"]}


__NORMALIZED_ERROR__

def codes(a):
    """Per element: 0 finite, 1 NaN, 2 +Inf, 3 -Inf."""
    a = np.asarray(a, np.float64)
    return np.where(np.isnan(a), 1, np.where(np.isposinf(a), 2, np.where(np.isneginf(a), 3, 0)))


def judge(results):
    kind, backends = CASE["kind"], CASE["backends"]
    for label, r in results.items():
        what = r.get("crash") or r.get("error") or ", ".join(f"{d}{list(a.shape)}" for a, d in
                                                               zip(r["outputs"], r["dtypes"]))
        print(f"  {label:<20} {what}")
    if kind == "hard_crash":
        return any("crash" in results[b] for b in backends)
    if kind == "divergent_acceptance":
        raised = {b for b, r in results.items() if "error" in r}
        return bool(raised) and raised != set(results) and raised == set(CASE["raised"])
    if len(backends) < 2:  # one backend ran (the others refused): its non-finite values are the finding
        r = results.get(backends[0], {})
        return kind == "nan" and "outputs" in r and bool(codes(r["outputs"][CASE["output"]]).any())
    a, b = backends[:2]
    ra, rb = results[a], results[b]
    if "outputs" not in ra or "outputs" not in rb:
        return False
    k = CASE["output"]
    if CASE.get("tensor") == "outputs":
        return len(ra["outputs"]) != len(rb["outputs"])
    xa, xb = ra["outputs"][k], rb["outputs"][k]
    if xa.shape != xb.shape or ra["dtypes"][k] != rb["dtypes"][k]:
        return CASE.get("tensor", "").endswith((":shape", ":dtype")) or kind == "deviation"
    if kind == "nan":
        return bool((codes(xa) != codes(xb)).any())
    fa, fb = xa.astype(np.float64).reshape(1, -1), xb.astype(np.float64).reshape(1, -1)
    both = np.isfinite(fa) & np.isfinite(fb)
    err, _ = normalized_error(np.where(both, fa, 0), np.where(both, fb, 0), CASE["rtol"], CASE["atol"])
    score = float(err.max(initial=0.0))
    print(f"  {a} vs {b}, output {k}: largest normalized error {score:.3g} (above 1: out of tolerance)")
    return score > 1.0


def verdict(results):
    """Whether the finding reproduces: a child that died or exited nonzero crashed."""
    settled = {label: ({"crash": f"exit {r['exit']}: {r.get('tail', '').strip()[-300:]}"}
                       if "died" in r or r["exit"] != 0 else r) for label, r in results.items()}
    return judge(settled), ""
'''

OP_SCRIPT = compose(constants=OP_CONSTANTS, body=OP_BODY, data=False,
                    doc="An audee op-level repro: one keras.ops call on each backend in its own process.")


def _tensor_json(a: np.ndarray) -> list[Any]:
    return [str(a.dtype), list(a.shape), np.asarray(a).reshape(-1).tolist()]


def _case_json(record: CaseRecord, f: Finding) -> dict[str, Any]:
    d = f.detail
    out: dict[str, Any] = {"kind": f.kind, "backends": list(f.backends)}
    if f.kind == Kind.DIVERGENT_ACCEPTANCE:
        out["raised"] = sorted(d.errors)
    if f.kind == Kind.NAN:  # the first pair whose patterns differ, on the output its backends name
        pair = next(iter(d.patterns), "|".join(f.backends[:2]))
        out["backends"] = pair.split("|")
        names = [n for ls in d.layers.values() for n in ls if n.startswith("out")]
        out["output"] = int(names[0][3:]) if names else 0
    if f.kind == Kind.DEVIATION:
        out["backends"] = str(d.pair).split("|")
        tensor = str(d.tensor or "out0")
        out["tensor"] = tensor
        out["output"] = int(tensor.split(":")[0][3:]) if tensor.startswith("out") and tensor != "outputs" else 0
        tol = d.tolerance
        out["rtol"], out["atol"] = (float(tol.rtol), float(tol.atol)) if tol is not None else (0.0, 0.0)
    return out


def write_op_repro(record: CaseRecord, out_dir: Path, name: str, finding: int) -> Path:
    """``out_dir/<name>.py`` for finding ``finding`` of op record ``record``: the call on
    the finding's backends (and the others of the case for context)."""
    from audee import __version__

    f = Finding.from_json(record.verdict["findings"][finding])
    if not f.is_failure:
        raise AudeeError(f"finding {finding} ({f.kind}) is not a failure", source=record.source or None)
    refs = {b.label: b for b in record.backends}
    backends = {}
    for label, ref in refs.items():
        builtin = ref.target in BUILTIN_TARGETS
        keras = KERAS_OF.get(label) or next((k for k in KERAS_OF if k in ref.target.lower()), None)
        if keras is None:
            if label in f.backends:
                raise AudeeError(f"backend {label!r} runs no keras.ops call", source=record.source or None)
            continue
        backends[label] = {"keras": keras, "plugin": None if builtin else ref.target}
    case = _case_json(record, f)
    versions = ", ".join(f"{b}: " + ", ".join(f"{k} {v}" for k, v in (record.versions.get(b) or {}).items())
                         for b in backends)
    header = [f"keras.ops.{record.op['op']}: {f.kind} on {', '.join(case['backends'])}", "",
              f"audee {__version__} op-level repro: keras.ops.{record.op['op']} called on each backend in its own "
              "process.", f"Recorded: case {record.id}; {versions}",
              f"Run: python {name}.py   (exit 0: reproduces, 1: does not, 2: a framework is missing)"]
    text = fill(OP_SCRIPT, {
        "HEADER": Comment(header), "NORMALIZED_ERROR": Code(_function("normalized_error")),
        "CALL": Data(record.op), "TENSORS": Data({k: _tensor_json(v) for k, v in record.inputs.items()}),
        "BACKENDS": Data(backends), "CASE": Data(case)})
    path = Path(out_dir) / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, utf8(text))
    return path
