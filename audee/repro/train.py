"""Standalone repro scripts of training-phase findings.

``audee repro CASE.pkl`` on a case of ``--phase train`` writes ``<name>.py`` and
``<name>.npz``: plain Python importing numpy and the frameworks only, which builds the
model from an embedded JSON spec (Keras' functional API, each layer's call arguments
honoured), loads its weights and inputs, and runs **one training step on each backend in
its own process** (``KERAS_BACKEND`` set before keras is imported): the same targets
(made by the same numpy code from the recorded seed), the loss, each framework's own
gradient (``tf.GradientTape``, ``torch.autograd.grad``, ``jax.value_and_grad`` over
``stateless_call``) and the optimizer's first step.  It judges what was recorded:

* a pair's ``loss``, ``output`` or ``gradient`` out of tolerance (the deviation oracle's
  formula, inline: ``|a - b| / (atol + rtol * s)``, each weight's gradient one row);
* a backend's ``update`` off the Keras rule applied to its own gradient;
* ``train_nan``: NaN/Inf on a recorded backend where another stays finite.

The model is the smallest that still fails, checked on audee's workers first: the
finding's layer alone, fed backend ``a``'s training-mode input to it and trained with the
probe loss (or, for the loss, the output layer with the case's loss), else the whole
model with the case's setup.  The script is the training level's body in the one scaffold
(:mod:`audee.repro.scaffold`).  Exit codes as the inference scripts': 0 reproduces, 1 does
not, 2 the environment is broken, 3 the data file is bad.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from audee.backends.info import keras_frameworks
from audee.cases.case import Kind, TestCase
from audee.core.errors import AudeeError
from audee.repro.scaffold import compose
from audee.repro.source import Comment, Data, fill
from audee.cases.kinds import TRAINING_FAILURES
from audee.cases.spec import ModelSpec, one_layer_spec
from audee.core.bounded import utf8
from audee.store.atomic import write_atomic, write_via
from audee.store.caserecord import CaseRecord
from audee.engine.train import TrainExecutor
from audee.train.setup import TrainSetup, train_spec

#: the backends a standalone training script runs: the Keras frameworks as they are
BUILTIN = keras_frameworks()


@dataclass
class TrainRepro:
    script: Path
    data: Path
    model: str                 # "one-layer" or "model"
    kind: str
    backends: list[str]
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return f"{self.kind} on {', '.join(self.backends)}, {self.model}"


def write_train_repro(record: CaseRecord, out_dir: Path, name: str, pool: Any, finding: int | None = None
                      ) -> TrainRepro:
    """Write the script for one training-phase finding of ``record`` (``finding``: its
    index in the verdict, default the first failure of a training kind), the smallest
    model checked on ``pool`` (the case's backends)."""
    findings = record.verdict_obj().findings
    picked = findings[finding] if finding is not None else next(
        (f for f in findings if f.is_failure and f.kind in TRAINING_FAILURES), None)
    if picked is None or picked.kind not in TRAINING_FAILURES:
        raise AudeeError("no training-phase deviation or NaN finding to write a script for", source=record.source)
    backends = sorted({b for f in findings if f.kind == picked.kind for b in f.backends} | set(picked.backends)) \
        if picked.kind == Kind.TRAIN_NAN else list(picked.backends)
    run = [b for b in (picked.backends if picked.kind == Kind.TRAIN_DEVIATION and len(picked.backends) == 2
                       else [r.label for r in record.backends]) if b.partition("@")[0] in BUILTIN]
    # an update off the Keras rule is one backend's, anything else needs two (a train_nan has no quantity)
    alone = getattr(picked.detail, "quantity", None) == "update"
    if not set(picked.backends) <= set(run) or len(run) < (1 if alone else 2):
        raise AudeeError("a finding that involves a plugin or a converter cannot be in a standalone script",
                         source=record.source)
    case = record.test_case()
    setup = TrainSetup.from_json(record.meta["train"])
    ts = train_spec(case.spec)
    ex = TrainExecutor(pool, tolerances=record.tolerances or None, diagnose=False)
    candidates = _candidates(ex, case, ts.spec, setup, picked, run)
    notes: list[str] = []
    chosen = None
    for label, spec, weights, inputs, s in candidates:
        probe = TestCase(f"{case.id}-{label}", spec, weights, inputs, {"train": s.to_json()})
        now = ex.run(probe)
        if any(f.kind == picked.kind and set(f.backends) & set(picked.backends) for f in now.verdict.findings):
            chosen = (label, spec, weights, inputs, s)
            break
        notes.append(f"the {label} no longer fails")
    if chosen is None:
        label, spec, weights, inputs, s = candidates[-1]
        notes.append("written for the whole model: the script will say it does not reproduce")
    else:
        label, spec, weights, inputs, s = chosen
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    script, data = out_dir / f"{name}.py", out_dir / f"{name}.npz"
    arrays = {f"w/{n}/{k}": np.asarray(a) for n, ws in weights.items() for k, a in enumerate(ws)}
    arrays |= {f"x/{n}": np.asarray(a) for n, a in inputs.items()}
    write_via(data, lambda f: np.savez(f, **arrays))
    tol = (record.tolerances or {}).get("float32") or {}
    d = picked.detail
    case_json = {"kind": picked.kind, "quantity": getattr(d, "quantity", None), "backends": run,
                 "recorded": list(picked.backends), "setup": s.to_json(), "rtol": float(tol.get("rtol", 1e-3)),
                 "atol": float(tol.get("atol", 1e-5)), "layer": d.layer,
                 "data": {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()}}
    header = _header(record, picked, label, s, run)
    text = fill(TEMPLATE, {"HEADER": Comment(header), "MODEL": Data(_model_json(spec)), "CASE": Data(case_json),
                           "DATA": Data(os.path.basename(data))})
    write_atomic(script, utf8(text))
    os.chmod(script, 0o755)
    return TrainRepro(script, data, label, picked.kind, list(picked.backends), notes)


def _candidates(ex: TrainExecutor, case: TestCase, spec: ModelSpec, setup: TrainSetup, f: Any,
                run: list[str]) -> list[tuple[str, ModelSpec, dict, dict, TrainSetup]]:
    """The models to try, smallest first: the finding's layer alone (fed backend ``a``'s
    training-mode input; the probe loss, or the case's for the loss and for an update),
    then the whole model with the case's setup."""
    whole = ("model", spec, case.weights, case.inputs, setup)
    d = f.detail
    layer = d.layer
    if layer is None or layer not in spec.layer_names():
        return [whole]
    once = TrainSetup(setup.loss, setup.optimizer, setup.learning_rate, 1, setup.target_seed, setup.from_logits)
    source = run[0]
    got = ex._train_on(spec, case.weights, case.inputs, once, [source], layers=True)
    if got.get(source) is None or not got[source].ok:
        return [whole]
    fed = {r: (got[source].layers[r] if r in got[source].layers else case.inputs[r]) for r in spec.layer(layer).reads}
    try:
        alone = one_layer_spec(spec, layer, fed)
    except Exception:  # noqa: BLE001 - a layer that cannot stand alone: the whole model
        return [whole]
    weights = {layer: case.weights[layer]} if layer in case.weights else {}
    loss_own = bool(getattr(d, "loss_own", None)) and layer == spec.output
    s = setup if loss_own else setup.probe()
    if getattr(d, "quantity", None) == "update":
        s = TrainSetup(setup.probe().loss, setup.optimizer, setup.learning_rate, 1, setup.probe().target_seed)
    return [("one-layer model", alone, weights, fed, s), whole]


def _model_json(spec: ModelSpec) -> dict[str, Any]:
    return {"inputs": [{"name": i.name, "shape": list(i.shape), "dtype": i.dtype} for i in spec.inputs],
            "layers": [{"name": n, "api": spec.layer(n).api, "params": spec.layer(n).params,
                        "inputs": spec.layer(n).inputs} | ({"call": spec.layer(n).call} if spec.layer(n).call else {})
                       for n in spec.topological_order()],
            "output": spec.output}


def _header(record: CaseRecord, f: Any, model: str, setup: TrainSetup, run: list[str]) -> list[str]:
    """The script's header lines (written as comments: they hold the case file's text)."""
    d = f.detail
    versions = "; ".join(f"{b}: " + ", ".join(f"{k} {v}" for k, v in (record.versions.get(b) or {}).items())
                         for b in run)
    what = {"update": "the optimizer's first step off the Keras update rule applied to the backend's own gradient",
            "loss": "the loss differs between the backends", "output": "the training-mode output differs",
            "gradient": "the gradients differ", "weights": "the moving statistics differ",
            }.get(getattr(d, "quantity", None) or "", "")
    if f.kind == Kind.TRAIN_NAN:
        what = "NaN/Inf in the training step on some backends only"
    return [f"Repro ({f.kind}): one training step of a Keras model on {', '.join(run)}, each backend in its own",
            f"process: {what}.", "",
            f"Recorded by audee on case {record.id} ({', '.join(f.backends)}; layer {d.layer or '-'}); the {model},",
            f"loss {setup.loss}, optimizer {setup.optimizer}, {setup.steps} step(s).",
            f"Versions: {versions}.",
            "Run: python {this file}   (or --backend NAME --out FILE.npz for one backend alone)",
            "Exit: 0 reproduces, 1 does not, 2 environment broken, 3 bad data."]


CONSTANTS = r'''
MODEL = json.loads(__MODEL__)
CASE = json.loads(__CASE__)
RUNS = CASE.get("backends")
TITLE = None
POSITIONAL = ("MultiHeadAttention", "GroupQueryAttention")
MERGE = ("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot")
LOSSES = {"categorical_crossentropy": "CategoricalCrossentropy",
          "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
          "binary_crossentropy": "BinaryCrossentropy", "mean_squared_error": "MeanSquaredError",
          "mean_absolute_error": "MeanAbsoluteError", "huber": "Huber", "log_cosh": "LogCosh", "hinge": "Hinge"}
OPTIMIZERS = {"sgd": "SGD", "adam": "Adam", "rmsprop": "RMSprop", "adagrad": "Adagrad"}
DEFAULTS = {"sgd": {"learning_rate": 0.01}, "adam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999,
                                                    "epsilon": 1e-7},
            "rmsprop": {"learning_rate": 0.001, "rho": 0.9, "epsilon": 1e-7},
            "adagrad": {"learning_rate": 0.001, "initial_accumulator_value": 0.1, "epsilon": 1e-7}}
'''

BODY = r'''
def make_layer(keras, api, params, name):
    params = dict(params)
    for key, value in params.items():
        if isinstance(value, dict) and "api" in value:
            params[key] = make_layer(keras, value["api"], value.get("params", {}), f"{name}_{key}")
    return getattr(keras.layers, api)(**params, name=name)


def called_with(call, fixed):
    def wrapped(*args, **kwargs):
        kwargs.update(fixed)
        return call(*args, **kwargs)
    return wrapped


def build(keras):
    tensors, inputs, layers = {}, [], {}
    for i in MODEL["inputs"]:
        tensors[i["name"]] = keras.Input(shape=tuple(i["shape"]), dtype=i["dtype"], name=i["name"])
        inputs.append(tensors[i["name"]])
    for spec in MODEL["layers"]:
        name, args = spec["name"], [tensors[n] for n in spec["inputs"]]
        layers[name] = make_layer(keras, spec["api"], spec["params"], name)
        call = {k: v for k, v in spec.get("call", {}).items() if v is not None and k != "mask"}
        mask = spec.get("call", {}).get("mask")  # called with mask = (that model input != 0)
        kw = {"mask": keras.ops.not_equal(tensors[mask], 0)} if mask else {}
        if call:  # called with these whatever mode the model runs in (training=True: batch statistics)
            object.__setattr__(layers[name], "call", called_with(layers[name].call, call))
        if spec["api"] in POSITIONAL:
            tensors[name] = layers[name](*args, **kw)
        else:
            tensors[name] = layers[name](args if len(args) > 1 or spec["api"] in MERGE else args[0], **kw)
    return keras.Model(inputs, tensors[MODEL["output"]]), layers


def make_targets(shape):
    """audee.train.setup.make_targets: the same targets on every backend."""
    s = CASE["setup"]
    g = np.random.default_rng([s["target_seed"], len(shape)])
    if s["loss"] in ("categorical_crossentropy", "sparse_categorical_crossentropy"):
        ids = g.integers(0, shape[-1], size=shape[:-1])
        return ids.astype(np.int32) if s["loss"].startswith("sparse") else np.eye(shape[-1], dtype=np.float32)[ids]
    if s["loss"] == "binary_crossentropy":
        return g.integers(0, 2, size=shape).astype(np.float32)
    if s["loss"] == "hinge":
        return np.where(g.random(shape) < 0.5, -1.0, 1.0).astype(np.float32)
    return g.standard_normal(shape).astype(np.float32)


def child(backend, out):
    """One training step on ``backend``, in this process (a framework missing: ENV_BROKEN)."""
    os.environ["KERAS_BACKEND"] = backend
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import keras
        __import__(backend)
    except ImportError as exc:
        environment_broken(backend, exc)
    train(keras, backend, out)


def train(keras, backend, out):
    """One training step on ``backend``: loss, every trainable weight's gradient, the
    weights after the optimizer's step, written to ``out``."""
    s = CASE["setup"]
    data = np.load(DATA, allow_pickle=False)
    model, layers = build(keras)
    for name, layer in layers.items():
        n = sum(1 for k in CASE["data"] if k.startswith(f"w/{name}/"))
        if n:
            layer.set_weights([data[f"w/{name}/{k}"] for k in range(n)])
    xs = [data["x/" + i["name"]] for i in MODEL["inputs"]]
    y = make_targets((xs[0].shape[0],) + tuple(int(d) for d in model.outputs[0].shape[1:]))
    if s["loss"] == "probe":
        def loss_fn(t, p):
            return keras.ops.mean(keras.ops.cast(p, "float32") * keras.ops.cast(t, "float32"))
    else:
        cls = getattr(keras.losses, LOSSES[s["loss"]])
        loss_fn = cls(from_logits=s["from_logits"]) if "crossentropy" in s["loss"] else cls()
    opt_cls = getattr(keras.optimizers, OPTIMIZERS[s["optimizer"]])
    optimizer = opt_cls() if s["learning_rate"] is None else opt_cls(learning_rate=s["learning_rate"])
    tv = model.trainable_variables
    floats = [i for i, x in enumerate(xs) if np.issubdtype(x.dtype, np.floating)]  # their gradients too
    if backend == "tensorflow":
        import tensorflow as tf

        @tf.function(autograph=False)
        def step(xs, y):
            with tf.GradientTape() as tape:
                for i in floats:
                    tape.watch(xs[i])
                yhat = model(xs, training=True)
                loss = loss_fn(y, yhat)
            return loss, tape.gradient(loss, tv + [xs[i] for i in floats]), yhat

        loss, grads, yhat = step([tf.convert_to_tensor(x) for x in xs], tf.convert_to_tensor(y))
        grads, gx = list(grads[:len(tv)]), list(grads[len(tv):])
        dense = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        if tv:
            optimizer.apply([tf.zeros_like(v.value) if g is None else g for g, v in zip(grads, tv)], tv)
        grads = dense
        after = [np.asarray(v.value) for v in tv]
    elif backend == "torch":
        import torch

        t = [torch.from_numpy(np.ascontiguousarray(x)) for x in xs]
        for i in floats:
            t[i].requires_grad_(True)
        yhat = model(t, training=True)
        loss = loss_fn(torch.from_numpy(y), yhat)
        wrt = [v.value for v in tv] + [t[i] for i in floats]
        grads = list(torch.autograd.grad(loss, wrt, allow_unused=True)) if wrt and loss.requires_grad else \
            [None] * len(wrt)
        grads, gx = grads[:len(tv)], grads[len(tv):]
        if tv:
            with torch.no_grad():
                optimizer.apply([torch.zeros_like(v.value) if g is None else g for g, v in zip(grads, tv)], tv)

        def host(t):  # NumPy reads no torch bfloat16: as float32, as the other backends' are read
            return None if t is None else (t.detach().float() if t.dtype == torch.bfloat16 else t.detach())

        loss, grads, gx, yhat = host(loss), [host(g) for g in grads], [host(g) for g in gx], host(yhat)
        after = [host(v.value).numpy() for v in tv]
    else:
        import jax

        tvs = [v.value for v in tv]
        ntvs = [v.value for v in model.non_trainable_variables]

        def objective(tvs, fxs, ntvs, xs, y):
            xs = list(xs)
            for i, x in zip(floats, fxs):
                xs[i] = x
            yhat, _ = model.stateless_call(tvs, ntvs, xs, training=True)
            return loss_fn(y, yhat), yhat

        from keras.src.trainers.trainer import model_supports_jit

        compiled = jax.jit if model_supports_jit(model) else (lambda f: f)  # as Keras' fit: no jit where a layer declares none
        (loss, yhat), (grads, gx) = compiled(jax.value_and_grad(objective, argnums=(0, 1), has_aux=True))(
            tvs, [xs[i] for i in floats], ntvs, xs, y)
        after = list(tvs)
        if tv:
            optimizer.build(tv)
            after, _ = optimizer.stateless_apply([v.value for v in optimizer.variables], grads, tvs)
        after = [np.asarray(a) for a in after]
    arrays = {"loss": np.asarray(loss, dtype=np.float64), "out": np.asarray(yhat)}
    for i, g in zip(floats, gx):
        arrays[f"gx/{i}"] = np.zeros(xs[i].shape, np.float32) if g is None else np.asarray(g)
    for k, (v, g, a) in enumerate(zip(tv, grads, after)):
        arrays[f"g/{k}"] = np.zeros(tuple(v.shape), np.float32) if g is None else np.asarray(g)
        arrays[f"u/{k}"] = np.asarray(a)
        arrays[f"w/{k}"] = np.asarray(data[_weight_key(layers, v)]) if _weight_key(layers, v) else np.asarray(a)
    write_result(out, **arrays)


def _weight_key(layers, variable):
    for name, layer in layers.items():
        for k, w in enumerate(layer.weights):
            if w is variable:
                return f"w/{name}/{k}"
    return None


def score(a, b):
    """|a - b| / (atol + rtol * s), s the largest |value| on either side (one row)."""
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if a.shape != b.shape:
        return float("inf")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return 0.0
    s = max(np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0))
    return float((np.abs(a - b) / (CASE["atol"] + CASE["rtol"] * s)).max(initial=0.0))


def update_score(w0, got, want):
    """audee.oracle.train.update_score: |got - want| / (atol + rtol * u + 4 ulps of the
    weight), u the largest |reference update|: the update judged at its own scale."""
    try:
        ulp = float(np.finfo(np.asarray(got).dtype).eps)
    except ValueError:
        ulp = 2.0 ** -7
    w0, got, want = (np.asarray(x, np.float64).ravel() for x in (w0, got, want))
    u = np.abs(want - w0).max(initial=0.0)
    r = 4 * ulp * np.abs(w0).max(initial=0.0)
    return float((np.abs(got - want) / (CASE["atol"] + CASE["rtol"] * u + r)).max(initial=0.0))


def reference(w, g, dtype):
    """The Keras update rule's first step (audee.train.setup.reference_update)."""
    s, c = CASE["setup"], DEFAULTS[CASE["setup"]["optimizer"]]
    k = lambda x: np.asarray(x, dtype=dtype)  # noqa: E731
    lr = k(s["learning_rate"] if s["learning_rate"] is not None else c["learning_rate"])
    w, g = np.asarray(w).astype(dtype), np.asarray(g).astype(dtype)
    if s["optimizer"] == "sgd":
        return w - g * lr
    if s["optimizer"] == "adam":
        alpha = lr * np.sqrt(k(1.0) - k(c["beta_2"])) / (k(1.0) - k(c["beta_1"]))
        m, v = g * k(1.0 - c["beta_1"]), (g * g) * k(1.0 - c["beta_2"])
        return w - (m * alpha) / (np.sqrt(v) + k(c["epsilon"]))
    if s["optimizer"] == "rmsprop":
        return w - (lr * g) / np.sqrt(k(1.0 - c["rho"]) * (g * g) + k(c["epsilon"]))
    return w - (lr * g) / np.sqrt(k(c["initial_accumulator_value"]) + g * g + k(c["epsilon"]))


def read_result(out):
    """What a child wrote: its loss, output, gradients and weights before and after."""
    with np.load(out) as z:
        return {"arrays": {k: z[k] for k in z.files}}


def verdict(results):
    """Whether the finding reproduces (None: no verdict, what it needs did not run)."""
    ran = {}
    for b, r in results.items():
        if "arrays" not in r or r["exit"] != 0:
            print(f"{b}: the training step failed (exit {r['exit']}):\n{r['tail']}")
        else:
            ran[b] = r["arrays"]
    if not ran:
        print("ENVIRONMENT: no backend ran the training step")
        return None, ""
    for b, r in ran.items():
        print(f"{b}: loss {float(r['loss']):.9g}")
    kind, quantity = CASE["kind"], CASE["quantity"]
    if kind == "train_nan":
        # the oracle's rule: the quantities holding NaN/Inf differ between the backends
        sets = {b: {k for k, v in r.items() if not np.isfinite(np.asarray(v, np.float64)).all()}
                for b, r in ran.items()}
        differ = set.union(*sets.values()) - set.intersection(*sets.values())
        for b, q in sets.items():
            print(f"{b}: non-finite {', '.join(sorted(q)) or 'nothing'}")
        hit = any(sets[b] & differ for b in CASE["recorded"] if b in sets) and len(ran) > 1
    elif quantity == "update":
        hit = False
        for b in CASE["recorded"]:
            r = ran.get(b)
            if r is None:
                continue
            worst = max((update_score(r[f"w/{k}"], r[f"u/{k}"], reference(r[f"w/{k}"], r[f"g/{k}"], r[f"u/{k}"].dtype))
                         for k in range(sum(1 for x in r if x.startswith("g/")))), default=0.0)
            print(f"{b}: its update against the Keras rule on its own gradient: score {worst:.3g}")
            hit = hit or worst > 1.0
    else:
        a, b = CASE["recorded"][:2]
        if a not in ran or b not in ran:
            print("a recorded backend did not run")
            return None, ""
        ra, rb = ran[a], ran[b]
        worst = {"loss": score(ra["loss"], rb["loss"]), "output": score(ra["out"], rb["out"])}
        worst["gradient"] = max((score(ra[k], rb[k]) for k in ra if k.startswith(("g/", "gx/"))), default=0.0)
        print(f"{a} vs {b}: output score {worst['output']:.3g}, loss score {worst['loss']:.3g}, worst gradient "
              f"score {worst['gradient']:.3g} "
              f"(rtol {CASE['rtol']:g}, atol {CASE['atol']:g}; > 1 is out of tolerance)")
        hit = max(worst.values()) > 1.0
    return hit, ""
'''

TEMPLATE = compose(constants=CONSTANTS, body=BODY, data=True)

__all__ = ["TrainRepro", "write_train_repro"]
