"""Standalone repro scripts of an op call's gradient phase: the call and its
vector-Jacobian product on each backend, each framework's own autodiff written out
(``tf.GradientTape``, ``torch.autograd.grad``, ``jax.vjp``), the cotangent of output ``k``
drawn by the text of :func:`audee.cases.opcase.cotangent` from the recorded seed.

The script is the op level's (:mod:`audee.repro.ops`) with another ``call``: the op called
each backend's own way (its ``OP_CALLS`` lines: traced, jitted, compiled, as its run did), a
child answers the call's outputs followed by its gradients, and the op script's judgement reads
the finding's output or gradient (``grad:<tensor>``) among them by its index.
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from audee.core.bounded import utf8
from audee.cases.case import Finding, Kind
from audee.core.errors import AudeeError
from audee.cases.opcase import GRAD_DTYPES, cotangent
from audee.repro.ops import KERAS_OF, OP_BODY, OP_CONSTANTS, _case_json, _function, _tensor_json, op_code
from audee.repro.scaffold import compose
from audee.repro.source import Code, Comment, Data, fill
from audee.store.atomic import write_atomic
from audee.store.caserecord import BUILTIN_TARGETS, CaseRecord

GRAD_CONSTANTS = OP_CONSTANTS + r'''GRAD = json.loads(__GRAD__)           # the cotangents' seed, the tensors differentiated, the float dtypes
'''

GRAD_CALL = r'''
__COTANGENT__

def call(label):
    """keras.ops.<op>(*args, **kwargs) on one backend and its vector-Jacobian product: the
    call's outputs, flattened, then the gradient of each tensor of GRAD["wrt"], the
    cotangent of output k cotangent(GRAD["seed"], k, its shape) in its dtype."""
    framework = BACKENDS[label]["keras"]
    os.environ["KERAS_BACKEND"] = framework
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import keras
    ops = keras.ops
    fn = keras if CALL["op"].startswith("activations.") else ops
    for part in CALL["op"].split("."):
        fn = getattr(fn, part)
    run = OP_CALLS.get(label)  # the backend's own way to call it (eagerly, traced, compiled), as in its run
    if BACKENDS[label].get("plugin"):
        import importlib
        module, cls = BACKENDS[label]["plugin"].split(":")
        backend = getattr(importlib.import_module(module), cls)("cpu")
        fn, run = backend.op_function(CALL["op"]), backend.call_op
    run = run or (lambda f, a, k: f(*a, **k))
    native = {}
    for name, (dtype, shape, values) in TENSORS.items():
        t = ops.convert_to_tensor(np.array(values, dtype=dtype).reshape(shape))
        want = CALL["dtypes"].get(name, dtype)
        native[name] = ops.cast(t, want) if want != dtype else t
    wrt = GRAD["wrt"]

    def flat(o):
        return [x for y in o for x in flat(y)] if isinstance(o, (tuple, list)) else [o]

    def f(*ws):
        sub = dict(native)
        sub.update(zip(wrt, ws))

        def arg(v):
            if isinstance(v, dict) and set(v) == {"tensor"}:
                return sub[v["tensor"]]
            if isinstance(v, list):
                items = [arg(x) for x in v]
                return tuple(items) if all(isinstance(x, (int, float)) for x in items) else items
            return v

        return flat(run(fn, [arg(a) for a in CALL["args"]], {k: arg(v) for k, v in CALL["kwargs"].items()}))

    def cot(k, o):
        if o is None or isinstance(o, (bool, int, float)):
            return None
        d = keras.backend.standardize_dtype(o.dtype)
        if d not in GRAD["dtypes"]:
            return None
        c = cotangent(GRAD["seed"], k, tuple(o.shape))
        return ops.cast(ops.convert_to_tensor(c if d == "float64" else c.astype(np.float32)), d)

    ws = [native[n] for n in wrt]
    grads = [None] * len(ws)
    if framework == "tensorflow":
        import tensorflow as tf
        with tf.GradientTape() as tape:
            tape.watch(ws)
            outs = f(*ws)
        pulled = [(o, c) for k, o in enumerate(outs) if (c := cot(k, o)) is not None]
        if pulled and ws:
            grads = tape.gradient([o for o, _ in pulled], ws, output_gradients=[c for _, c in pulled])
        grads = [tf.zeros_like(w) if g is None else tf.convert_to_tensor(g) for g, w in zip(grads, ws)]
    elif framework == "torch":
        import torch
        ws = [w.detach().requires_grad_(True) for w in ws]
        with torch.enable_grad():
            outs = f(*ws)
        pulled = [(o, c) for k, o in enumerate(outs)
                  if torch.is_tensor(o) and o.requires_grad and (c := cot(k, o)) is not None]
        if pulled and ws:
            grads = torch.autograd.grad([o for o, _ in pulled], ws, grad_outputs=[c for _, c in pulled],
                                        allow_unused=True)
        grads = [torch.zeros_like(w) if g is None else g.detach() for g, w in zip(grads, ws)]
        outs = [o.detach() if torch.is_tensor(o) else o for o in outs]
    else:
        import jax
        import jax.numpy as jnp
        outs = f(*ws)
        cots = {k: c for k, o in enumerate(outs) if (c := cot(k, o)) is not None}
        if cots and ws:
            _, pull = jax.vjp(lambda *xs: tuple(f(*xs)[k] for k in cots), *ws)
            grads = list(pull(tuple(cots.values())))
        grads = [jnp.zeros_like(w) if g is None else g for g, w in zip(grads, ws)]
    result = []
    for o in list(outs) + list(grads):
        if isinstance(o, (bool, int, float)):
            result.append((np.asarray(o), str(np.asarray(o).dtype)))
        else:
            dtype = keras.backend.standardize_dtype(o.dtype)
            result.append((np.asarray(ops.convert_to_numpy(ops.cast(o, "float32") if dtype == "bfloat16" else o)),
                           dtype))
    return result

'''

_REST = OP_BODY[OP_BODY.index("\ndef child(label, out):"):]
GRAD_SCRIPT = compose(constants=GRAD_CONSTANTS, body="__OP_CODE__\n" + GRAD_CALL + _REST, data=False,
                      doc="An audee op-gradient repro: one keras.ops call and its vector-Jacobian product on each "
                          "backend in its own process.")


def output_names(record: CaseRecord) -> list[str]:
    """Each recorded output's name, in the order a child answers them: ``out<k>``, then
    ``grad:<tensor>`` per tensor differentiated."""
    from audee.oracle.opgrad import grad_name

    wrt = list(((record.meta.get("train") or {}).get("gradient") or {}).get("wrt", []))
    n = max((len(o.get("outputs", [])) for o in record.outputs.values()), default=len(wrt)) - len(wrt)
    return [f"out{k}" for k in range(max(n, 0))] + [grad_name(t) for t in wrt]


def _grad_case_json(record: CaseRecord, f: Finding) -> dict[str, Any]:
    """The op script's finding, its output the index of the output or gradient it names."""
    out = _case_json(record, f)
    names = output_names(record)
    d = f.detail
    if f.kind == Kind.NAN:
        pair = out["backends"]
        named = [n for b in pair for n in d.layers.get(b, []) if n in names] or \
                [n for ls in d.layers.values() for n in ls if n in names]
        out["output"] = names.index(named[0]) if named else 0
    if f.kind == Kind.DEVIATION:
        tensor = str(d.tensor or "out0")
        base = tensor.rsplit(":", 1)[0] if tensor.endswith((":shape", ":dtype")) else tensor
        out["output"] = names.index(base) if base in names else 0
    return out


def write_opgrad_repro(record: CaseRecord, out_dir: Path, name: str, finding: int) -> Path:
    """``out_dir/<name>.py`` for finding ``finding`` of the gradient-phase op record ``record``."""
    from audee import __version__

    f = Finding.from_json(record.verdict["findings"][finding])
    if not f.is_failure:
        raise AudeeError(f"finding {finding} ({f.kind}) is not a failure", source=record.source or None)
    grad = ((record.meta.get("train") or {}).get("gradient") or {})
    if "seed" not in grad:
        raise AudeeError("not a gradient-phase op case (no train.gradient.seed)", source=record.source or None,
                         field="train.gradient.seed")
    backends = {}
    for label, ref in {b.label: b for b in record.backends}.items():
        keras = KERAS_OF.get(label) or next((k for k in KERAS_OF if k in ref.target.lower()), None)
        if keras is None:
            if label in f.backends:
                raise AudeeError(f"backend {label!r} runs no keras.ops call", source=record.source or None)
            continue
        backends[label] = {"keras": keras, "plugin": None if ref.target in BUILTIN_TARGETS else ref.target}
    case = _grad_case_json(record, f)
    versions = ", ".join(f"{b}: " + ", ".join(f"{k} {v}" for k, v in (record.versions.get(b) or {}).items())
                         for b in backends)
    what = output_names(record)[case.get("output", 0)] if output_names(record) else "out0"
    header = [f"keras.ops.{record.op['op']} gradient: {f.kind} on {', '.join(case['backends'])} ({what})", "",
              f"audee {__version__} op-gradient repro: keras.ops.{record.op['op']} and its vector-Jacobian product "
              "on each backend in its own process.", f"Recorded: case {record.id}; {versions}",
              f"Run: python {name}.py   (exit 0: reproduces, 1: does not, 2: a framework is missing)"]
    text = fill(GRAD_SCRIPT, {
        "HEADER": Comment(header), "NORMALIZED_ERROR": Code(_function("normalized_error")),
        "COTANGENT": Code(inspect.getsource(cotangent)),
        "OP_CODE": Code(op_code([b for b in backends if not backends[b]["plugin"]])),
        "CALL": Data(record.op), "TENSORS": Data({k: _tensor_json(v) for k, v in record.inputs.items()}),
        "BACKENDS": Data(backends), "CASE": Data(case),
        "GRAD": Data({"seed": int(grad["seed"]), "wrt": list(grad.get("wrt", [])), "dtypes": list(GRAD_DTYPES)})})
    path = Path(out_dir) / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, utf8(text))
    return path
