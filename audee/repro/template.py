"""The text of a standalone repro script (see :mod:`audee.repro`).

The script imports numpy and the frameworks only: a maintainer runs it without audee.
Its placeholders (``__HEADER__``, ``__MODEL__``, ...) are filled by
:func:`audee.repro.write_repro` through :func:`audee.repro.source.fill`: the header as
comments, every value from the case file as a JSON string literal, never as code.
Its comparison functions (``label_flips``,
``normalized_error`` — :mod:`audee.oracle.deviation`'s formula, inline —, ``nonfinite``) are
importable for tests, which hold them equal to the package's (``tests/test_decisions.py``;
``relative_tie_margin`` too).

The data file is checked before anything runs (``check_data``: every array the script
was written with, its shape and dtype, plain numbers, no pickles, no entry larger than
its array): a truncated or foreign ``.npz`` is reported as bad data (exit 3), never as a
verdict.
"""

SCRIPT = r'''#!/usr/bin/env python3
# -*- coding: utf-8 -*-
__HEADER__
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

MODEL = json.loads(__MODEL__)
CASE = json.loads(__CASE__)
# an equivalence finding: the equivalent model (weights "v/..."), the original rows it runs
# in order, the dtype its float inputs are cast to, and each original layer's equivalent
EQUIV = json.loads(__EQUIV__)
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), json.loads(__DATA__))
MERGE = {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot"}
POSITIONAL = {"MultiHeadAttention", "GroupQueryAttention"}  # call(query, value): one argument per input
ENV_BROKEN = 2  # exit code: a framework cannot be imported (here or in a child)
BAD_DATA = 3    # exit code: the data file is missing or not the one written with this script


# ---- audee's own layers (AudeeReverse, AudeeFormula) and the model round trips, verbatim -------
__OWNED__


# ---- the model: keras.layers.<api>(**params, name=...) in a functional graph -----------------
def make_layer(keras, api, params, name):
    params = dict(params)
    for key, value in params.items():  # a layer argument (Bidirectional, TimeDistributed)
        if isinstance(value, dict) and "api" in value:
            params[key] = make_layer(keras, value["api"], value.get("params", {}), f"{name}_{key}")
    if api in OWNED_LAYERS:  # defined above: a closed set of names, no code from the data
        return owned_layer(keras, api, params, name)
    return getattr(keras.layers, api)(**params, name=name)


def called_with(call, fixed):
    """A layer's call that always gets ``fixed`` (a functional model passes its own
    ``training`` to every layer that takes one)."""
    def wrapped(*args, **kwargs):
        kwargs.update(fixed)
        return call(*args, **kwargs)
    return wrapped


def build(keras, model=None):
    """A model returning every layer's output (MODEL["layers"] is in topological order)."""
    model = MODEL if model is None else model
    tensors, inputs, layers = {}, [], {}
    for i in model["inputs"]:
        tensors[i["name"]] = keras.Input(shape=tuple(i["shape"]), dtype=i["dtype"], name=i["name"])
        inputs.append(tensors[i["name"]])
    for spec in model["layers"]:
        name, args = spec["name"], [tensors[n] for n in spec["inputs"]]
        layers[name] = make_layer(keras, spec["api"], spec["params"], name)
        call = {k: v for k, v in spec.get("call", {}).items() if v is not None and k != "mask"}
        mask = spec.get("call", {}).get("mask")  # called with mask = (that model input != 0)
        kw = {"mask": keras.ops.not_equal(tensors[mask], 0)} if mask else {}
        if call:  # called with these (training=True: batch statistics) whatever mode the model runs in
            object.__setattr__(layers[name], "call", called_with(layers[name].call, call))
        if spec["api"] in POSITIONAL:
            tensors[name] = layers[name](*args, **kw)
        else:
            tensors[name] = layers[name](args if len(args) > 1 or spec["api"] in MERGE else args[0], **kw)
    return keras.Model(inputs, [tensors[s["name"]] for s in model["layers"]]), layers


# ---- the data file, checked before anything runs ------------------------------------------------
def check_data():
    """None when DATA holds exactly the arrays this script was written with (CASE["data"]:
    names, shapes, dtypes; plain numbers, no pickled objects), else what is wrong."""
    want = CASE["data"]
    if not os.path.exists(DATA):
        return "missing: keep it next to this script"
    try:
        with zipfile.ZipFile(DATA) as zf:
            members = {info.filename: info for info in zf.infolist()}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        return f"not a readable .npz file ({type(exc).__name__}: {exc})"
    extra = sorted(set(members) - {key + ".npy" for key in want})
    if extra:
        return f"holds entries this script was not written with: {', '.join(extra[:4])}"
    for key, (shape, dtype) in want.items():
        info = members.get(key + ".npy")
        if info is None:
            return f"no array {key!r}"
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if info.file_size > size + 65536:  # the .npy header is small: anything more is not this array
            return f"{key}: {info.file_size} bytes where {size} are expected"
    key = "the file"
    try:
        with np.load(DATA, allow_pickle=False) as z:
            for key, (shape, dtype) in want.items():
                got = z[key]
                if list(got.shape) != list(shape) or str(got.dtype) != dtype:
                    return f"{key}: {got.dtype} {list(got.shape)} where {dtype} {list(shape)} is expected"
    except Exception as exc:  # a truncated or corrupt entry, a pickled object array
        return f"{key}: cannot be read ({type(exc).__name__}: {exc})"
    return None


def bad_data(problem):
    """Say that the data is bad, and no verdict; the exit code."""
    print(f"BAD DATA: {os.path.basename(DATA)}: {problem}")
    print("No verdict: this script needs the weights and inputs it was written with beside it "
          "(write them again with `audee repro`, or copy the original file)")
    return BAD_DATA


# ---- one backend, in this (child) process ------------------------------------------------------
def run_backend(backend, out):
    """Build, load weights, run; save every layer's output (or the error) to ``out``."""
    name = backend.partition("@")[0].replace("onnxruntime-fed", "onnxruntime")  # "torch@cuda" runs torch
    name, _, mode = name.partition("-")  # an execution mode: "torch-compile" runs torch under torch.compile
    # the converters and runtimes run the Keras model of one framework: tf2onnx's graph on
    # onnxruntime or OpenVINO and the TFLite converter take TensorFlow's, torch-onnx torch's
    os.environ["KERAS_BACKEND"] = "tensorflow" if name in ("onnxruntime", "openvino", "litert") else name
    if mode == "noonednn":  # TensorFlow's own CPU kernels instead of oneDNN's (read at import)
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    device = CASE["devices"].get(backend, "cpu")
    full = CASE.get("precisions", {}).get(backend, "full") == "full"  # tf32: the GPU's TF32 math mode
    if device == "cpu":
        os.environ.update(CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu", KERAS_TORCH_DEVICE="cpu")
    else:
        os.environ["KERAS_TORCH_DEVICE"] = device
        os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest" if full else "tensorfloat32"
        if full:
            os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # no TF32 in cuBLAS / cuDNN
        else:
            os.environ.pop("NVIDIA_TF32_OVERRIDE", None)
    info = {"versions": {}, "error": None}
    try:
        import keras
        if device != "cpu" and name == "torch":
            import torch
            if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # torch >= 2.9
                for switch in (torch.backends.cuda.matmul, torch.backends.cudnn.conv, torch.backends.cudnn.rnn):
                    switch.fp32_precision = "ieee" if full else "tf32"
            else:
                torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = not full
        elif device != "cpu" and name == "tensorflow":
            import tensorflow as tf
            tf.config.experimental.enable_tensor_float_32_execution(not full)
        info["versions"]["keras"] = keras.__version__
        fw = {"onnxruntime": ["tensorflow", "tf2onnx", "onnxruntime"], "openvino": ["tensorflow", "tf2onnx", "openvino"],
              "litert": ["tensorflow", "ai_edge_litert"]}.get(name, [name])
        if (name, mode) == ("torch", "onnx"):
            fw = ["torch", "onnxscript", "onnx", "onnxruntime"]
        for mod in fw:
            module = __import__(mod)
            info["versions"][mod] = getattr(module, "__version__", None) or _dist_version(mod)
    except ImportError as exc:
        print(f"{backend}: cannot import a framework: {exc}", file=sys.stderr)
        sys.exit(ENV_BROKEN)
    data = np.load(DATA)
    outs, info["error"] = forward(keras, name, mode, MODEL, "w", [data["x/" + i["name"]] for i in MODEL["inputs"]],
                                  data)
    arrays = {f"y/{s['name']}": np.asarray(o) for s, o in zip(MODEL["layers"], outs)}
    if EQUIV is not None and info["error"] is None:  # the same backend on the equivalent model
        xs = [data["x/" + i["name"]][EQUIV["rows"]] for i in MODEL["inputs"]]
        xs = [x.astype(EQUIV["input_dtype"]) if EQUIV["input_dtype"] and np.issubdtype(x.dtype, np.floating) else x
              for x in xs]
        eq_outs, info["equiv_error"] = forward(keras, name, mode, EQUIV["model"], "v", xs, data)
        arrays.update({f"z/{s['name']}": np.asarray(o) for s, o in zip(EQUIV["model"]["layers"], eq_outs)})
    np.savez(out + ".tmp.npz", info=np.array(json.dumps(info)), **arrays)
    os.replace(out + ".tmp.npz", out)


def _dist_version(module):
    import importlib.metadata as md
    try:
        return md.version(module.replace("_", "-"))
    except md.PackageNotFoundError:
        return "?"


def forward(keras, name, mode, spec, prefix, xs, data):
    """Build ``spec``, load its weights (``<prefix>/<layer>/<k>``) and run ``xs``: every
    layer's output, and None; or [] and the error (a clean rejection: the error is the finding)."""
    phase, outs = "build", []
    try:
        model, layers = build(keras, spec)
        phase = "weights"
        for lname, layer in layers.items():
            if layer.weights:
                layer.set_weights([data[f"{prefix}/{lname}/{k}"] for k in range(len(layer.weights))])
        if spec.get("roundtrip"):  # saved and loaded with its weights in; the loaded model runs
            phase = "build"
            model = round_trip(keras, model, spec["roundtrip"])
        if name in ("onnxruntime", "openvino"):  # tf2onnx from the TensorFlow backend, then the runtime
            import onnx
            import tensorflow as tf
            import tf2onnx
            phase = "convert"
            ws = list(model.trainable_variables) + list(model.non_trainable_variables)
            n_x, n_tv = len(spec["inputs"]), len(model.trainable_variables)
            sig = [tf.TensorSpec((None, *i["shape"]), i["dtype"], name=i["name"]) for i in spec["inputs"]]
            sig += [tf.TensorSpec(v.shape, v.dtype, name=f"audee_w{k}") for k, v in enumerate(ws)]

            def call(*args):  # the weights as graph inputs, as audee converts (one export, any weights)
                ys = model.stateless_call(list(args[n_x:n_x + n_tv]), list(args[n_x + n_tv:]), list(args[:n_x]),
                                          training=False)[0]
                return {f"y{k}": tf.identity(y) for k, y in enumerate(ys if isinstance(ys, (list, tuple)) else [ys])}

            fn = tf.function(call, input_signature=sig, autograph=False)
            proto, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=15)
            # then written into the graph as constants (as audee bakes them), with the tensors
            # the traced call captured (tf2onnx lists those as graph inputs too)
            values = {f"audee_w{k}": keras.ops.convert_to_numpy(v.value) for k, v in enumerate(ws)}
            values.update({inner.name: np.asarray(outer.numpy()) for outer, inner
                           in fn.get_concrete_function().graph.captures if outer.dtype.name != "resource"})
            baked = [g for g in proto.graph.input if g.name in values]
            proto.graph.initializer.extend(onnx.numpy_helper.from_array(
                values[g.name].astype(onnx.helper.tensor_dtype_to_np_dtype(g.type.tensor_type.elem_type)), g.name)
                for g in baked)
            kept = [g for g in proto.graph.input if g.name not in values]
            del proto.graph.input[:]
            proto.graph.input.extend(kept)
            feed = {i["name"]: x for i, x in zip(spec["inputs"], xs)}
            names = [f"y{k}" for k in range(len(spec["layers"]))]
            if name == "onnxruntime":
                import onnxruntime as ort
                session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
                phase = "run"
                outs = session.run(names, feed)
            else:  # OpenVINO's CPU plugin, in float32 (no bfloat16 inference on CPUs that have it)
                import openvino as ov
                core = ov.Core()
                compiled = core.compile_model(core.read_model(proto.SerializeToString()), "CPU",
                                              {"INFERENCE_PRECISION_HINT": "f32"})
                phase = "run"
                got = compiled(feed)
                ports = {n: port for port in compiled.outputs for n in port.get_names()}
                outs = [np.asarray(got[ports[n]]) for n in names]
        elif name == "litert":  # the TFLite converter (builtin ops only), then the LiteRT interpreter
            import tensorflow as tf
            from ai_edge_litert.interpreter import Interpreter
            phase = "convert"
            tv = [tf.constant(v.value) for v in model.trainable_variables]  # the weights as constants
            ntv = [tf.constant(v.value) for v in model.non_trainable_variables]

            def call(*args):
                ys = model.stateless_call(tv, ntv, list(args), training=False)[0]
                return {f"y{k}": tf.identity(y) for k, y in enumerate(ys if isinstance(ys, (list, tuple)) else [ys])}

            sig = [tf.TensorSpec(np.shape(x), tf.as_dtype(np.asarray(x).dtype), name=i["name"])
                   for x, i in zip(xs, spec["inputs"])]
            concrete = tf.function(call, input_signature=sig, autograph=False).get_concrete_function()
            converter = tf.lite.TFLiteConverter.from_concrete_functions([concrete], tf.Module())
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
            interpreter = Interpreter(model_content=converter.convert())
            runner = interpreter.get_signature_runner()
            phase = "run"
            got = runner(**{i["name"]: np.ascontiguousarray(x) for i, x in zip(spec["inputs"], xs)})
            outs = [np.asarray(got[f"y{k}"]) for k in range(len(got))]
        elif name == "jax":  # jitted, as deployed ("jax-eager": op by op)
            import jax
            phase = "run"
            fn = lambda tv, ntv, xs: model.stateless_call(tv, ntv, xs, training=False)[0]  # noqa: E731
            args = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], xs)
            if mode == "eager":
                with jax.disable_jit():
                    outs = fn(*args)
            else:
                outs = jax.jit(fn)(*args)
        elif name == "tensorflow":  # a traced graph ("tensorflow-eager": eagerly; "tensorflow-xla": XLA)
            import tensorflow as tf
            phase = "run"
            if mode == "eager":
                outs = model(xs, training=False)
            else:
                outs = tf.function(lambda xs: model(xs, training=False), autograph=False,
                                   jit_compile=mode == "xla")(xs)
        elif (name, mode) == ("torch", "onnx"):  # torch.onnx.export(dynamo=True), opset 18, then an ORT session
            import ctypes
            import onnxruntime as ort
            import torch
            phase = "convert"

            class Call(torch.nn.Module):
                def forward(self, *args):
                    ys = model(list(args), training=False)
                    return tuple(ys) if isinstance(ys, (list, tuple)) else (ys,)

            names = [f"y{k}" for k in range(len(spec["layers"]))]
            program = torch.onnx.export(Call(), tuple(torch.from_numpy(x) for x in xs), dynamo=True, opset_version=18,
                                        input_names=[i["name"] for i in spec["inputs"]], output_names=names)
            session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
            phase = "run"
            feed = {i["name"]: ort.OrtValue.ortvalue_from_numpy(x) for i, x in zip(spec["inputs"], xs)}

            def fetch(v):  # onnxruntime has no numpy type for bfloat16: its bytes, read by torch
                if v.data_type() != "tensor(bfloat16)":
                    return v.numpy()
                raw = bytearray(ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes()))
                flat = torch.frombuffer(raw, dtype=torch.bfloat16) if raw else torch.zeros(0, dtype=torch.bfloat16)
                return flat.reshape(v.shape())

            outs = [fetch(v) for v in session.run_with_ort_values(names, feed)]
        else:  # torch eagerly ("torch-compile": under torch.compile)
            import torch
            phase = "run"
            call = torch.compile(model, dynamic=False) if mode == "compile" else model
            with torch.no_grad():
                outs = call([keras.ops.convert_to_tensor(x) for x in xs], training=False)
        outs = [keras.ops.convert_to_numpy(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
    except Exception as exc:  # a clean rejection: the error is the finding
        return [], {"phase": phase, "message": f"{type(exc).__name__}: {exc}"[:2000]}
    return outs, None


def run_all():
    """Each backend in its own process: outputs, or how it failed."""
    results = {}
    for backend in CASE["backends"]:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.npz")
            cmd = [sys.executable, os.path.abspath(__file__), "--backend", backend, "--out", out]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=CASE["timeout"])
            except subprocess.TimeoutExpired:
                results[backend] = {"died": f"timed out after {CASE['timeout']} s"}
                continue
            if p.returncode == ENV_BROKEN:
                results[backend] = {"broken": (p.stderr.strip().splitlines() or ["?"])[-1]}
            elif p.returncode == BAD_DATA:
                results[backend] = {"bad_data": (p.stdout.strip().splitlines() or ["?"])[0]}
            elif not os.path.exists(out):
                how = f"killed by signal {-p.returncode}" if p.returncode < 0 else f"exited with code {p.returncode}"
                results[backend] = {"died": how, "tail": p.stderr[-1500:]}
            else:
                with np.load(out) as z:
                    info = json.loads(str(z["info"]))
                    info["layers"] = {k[2:]: z[k] for k in z.files if k.startswith("y/")}
                    info["equiv_layers"] = {k[2:]: z[k] for k in z.files if k.startswith("z/")}
                results[backend] = info
    return results


# ---- the comparisons -----------------------------------------------------------------------------
def label_flips(a, b, tie_margin, rel_margin=0.0):
    """Rows whose predicted labels (argmax) differ, both rows finite, and neither side's
    top two outputs closer than the tie margin: ``tie_margin``, or ``rel_margin`` times the
    row's largest |value| on both sides (a floating-point tie)."""
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    if a.shape[1] == 0:  # an empty output: no label, nothing to flip
        return np.flatnonzero(np.zeros(len(a), bool))

    def top2_gap(x):
        if x.shape[1] < 2:
            return np.full(len(x), np.inf)
        top = np.sort(x, axis=1)[:, -2:]
        with np.errstate(invalid="ignore", over="ignore"):
            return top[:, 1] - top[:, 0]

    finite = np.isfinite(a).all(1) & np.isfinite(b).all(1)
    margin = np.full(len(a), float(tie_margin))
    if rel_margin > 0:
        scale = np.maximum(np.abs(a).max(1, initial=0.0), np.abs(b).max(1, initial=0.0)).astype(np.float64)
        margin = np.maximum(margin, rel_margin * scale)
    with np.errstate(invalid="ignore", over="ignore"):
        tie = np.minimum(top2_gap(a), top2_gap(b)) < margin
    return np.flatnonzero((a.argmax(1) != b.argmax(1)) & finite & ~tie)


def relative_tie_margin(a, b, compute):
    """The relative tie margin of a pair: the rtol of the reduced precision it is judged in
    (the lowest of the arrays' dtypes and the pair's compute mode: float16, bfloat16, tf32),
    else 0 (float32 keeps the absolute tie margin alone)."""
    order = ("bfloat16", "float16", "tf32")
    known = [str(x.dtype) for x in (a, b) if str(x.dtype) in order[:2]] + (["tf32"] if compute == "tf32" else [])
    return float(CASE["tie_rtol"][min(known, key=order.index)]) if known else 0.0


def normalized_error(a, b, rtol, atol):
    """Per element |a - b| / (atol + rtol * s), s = the largest |value| of the row on either
    side; above 1 is out of tolerance.  Rows with NaN/Inf are left out (NaN is its own finding).
    Returns the errors of the rows kept, (rows, elements), and which rows those are."""
    a = a.reshape(len(a), -1).astype(np.float64)
    b = b.reshape(len(b), -1).astype(np.float64)
    keep = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    a, b = a[keep], b[keep]
    s = np.maximum(np.abs(a).max(axis=1, initial=0.0), np.abs(b).max(axis=1, initial=0.0))[:, None]
    diff = np.abs(a - b)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = np.where(diff == 0, 0.0, diff / (atol + rtol * s))
    return err, np.flatnonzero(keep)


def nonfinite(layers):
    """Layers (model order) whose output holds NaN or Inf, with how many such values."""
    return [(s["name"], int((~np.isfinite(layers[s["name"]])).sum())) for s in MODEL["layers"]
            if np.issubdtype(layers[s["name"]].dtype, np.floating) and not np.isfinite(layers[s["name"]]).all()]


# ---- the verdict -----------------------------------------------------------------------------------
def judge(results):
    """(reproduces, lines saying why) for the failure this script was written for."""
    kind, lines = CASE["kind"], []
    ran = {b: r["layers"] for b, r in results.items() if "layers" in r and not r.get("error")}
    for b, r in results.items():
        vers = ", ".join(f"{k} {v}" for k, v in r.get("versions", {}).items())
        state = ("ran" if b in ran else f"{r['error']['phase']} error: {r['error']['message']}" if r.get("error")
                 else f"died: {r['died']}")
        lines.append(f"  {b:<12} {state}" + (f"   [{vers}]" if vers else ""))
    if kind in ("hard_crash", "divergent_acceptance"):
        bad = CASE["failing"]
        if kind == "hard_crash":
            hit = all("died" in results[b] for b in bad)
            return hit, lines + [f"{', '.join(bad)} {'died' if hit else 'did not die'}"]
        ok = [b for b in CASE["backends"] if b not in bad]
        hit = all(results[b].get("error") for b in bad) and any(b in ran for b in ok)
        return hit, lines + [f"{', '.join(bad)} {'rejected' if hit else 'did not reject'} what {', '.join(ok)} ran"]
    if kind == "nan":
        inputs_finite = all(np.isfinite(x).all() for k, x in np.load(DATA).items()
                            if k.startswith("x/") and np.issubdtype(x.dtype, np.floating))
        pattern = {b: nonfinite(layers) for b, layers in ran.items()}
        for b, layers in pattern.items():
            lines.append(f"  {b}: " + (", ".join(f"{n} ({c} non-finite)" for n, c in layers) or "all finite"))
        masks = {b"".join(np.packbits(~np.isfinite(layers[s["name"]])).tobytes() for s in MODEL["layers"])
                 for layers in ran.values()}
        differ = len(masks) > 1
        hit = any(pattern.get(b) for b in CASE["failing"]) and (inputs_finite or differ)
        why = "inputs finite" if inputs_finite else "the inputs hold NaN/Inf, and the backends' patterns differ"
        return hit, lines + [f"NaN/Inf on {', '.join(b for b in pattern if pattern[b]) or 'no backend'} ({why})"]
    if kind == "equivalence":
        return judge_equivalence(results, ran, lines)
    a, b = CASE["pair"]
    if a not in ran or b not in ran:
        return False, lines + [f"{a} and {b} must both run to compare them"]
    ya, yb = ran[a][CASE["layer"]], ran[b][CASE["layer"]]
    if ya.shape != yb.shape:
        return kind == "inconsistency", lines + [f"{CASE['layer']}: shapes differ: {a} {ya.shape}, {b} {yb.shape}"]
    diff = np.abs(ya.astype(np.float64) - yb.astype(np.float64))
    lines.append(f"  {CASE['layer']}: max |{a} - {b}| = {np.nanmax(diff):.6g}, max |{a}| = {np.nanmax(np.abs(ya)):.6g}")
    if kind == "inconsistency":
        modes = [CASE["precisions"].get(x, "full") for x in (a, b)]
        rel = relative_tie_margin(ya, yb, "tf32" if "tf32" in modes else "full")
        rows = label_flips(ya, yb, CASE["tie_margin"], rel)
        la, lb = ya.reshape(len(ya), -1).argmax(1), yb.reshape(len(yb), -1).argmax(1)
        for r in rows[:8]:
            lines.append(f"  input {r}: label {la[r]} on {a}, {lb[r]} on {b}")
        return len(rows) > 0, lines + [f"{len(rows)} of {len(ya)} inputs change label (tie margin {CASE['tie_margin']})"]
    err, rows = normalized_error(ya, yb, CASE["rtol"], CASE["atol"])
    if not rows.size:
        return False, lines + ["no input is finite on both backends: nothing to compare"]
    score = err.max(axis=1, initial=0.0)
    for r in np.argsort(-score)[:4]:
        lines.append(f"  input {rows[r]}: largest |{a} - {b}| / (atol + rtol * max |value| of the row) = {score[r]:.4g}")
    lines.append(f"  tolerance: rtol {CASE['rtol']:g}, atol {CASE['atol']:g} (above 1 is out of tolerance)")
    n_out = int((err > 1).sum())
    return n_out > 0, lines + [f"{n_out} of {err.size} values out of tolerance on {CASE['layer']}"]


def judge_equivalence(results, ran, lines):
    """One backend, the model and its equivalent (EQUIV): the equivalent refused, or the
    compared layer's non-finite pattern or values differ beyond the tolerance."""
    b = CASE["backends"][0]
    if b not in ran:
        return False, lines + [f"{b} must run the model to compare it with its equivalent"]
    err = results[b].get("equiv_error")
    if err:
        lines.append(f"  {b} refuses the equivalent model ({EQUIV['rule']}): {err['phase']} error: {err['message']}")
        return True, lines + [f"{b} runs the model but not its equivalent"]
    layer = CASE["layer"]
    ya = ran[b][layer][EQUIV["rows"]]
    yb = results[b]["equiv_layers"][EQUIV["map"][layer]]
    if ya.shape != yb.shape:
        return True, lines + [f"{layer}: shapes differ: model {ya.shape}, equivalent {yb.shape}"]
    fa, fb = np.isfinite(ya), np.isfinite(yb)
    differ = (fa != fb) | (~fa & ~fb & ~((ya == yb) | (np.isnan(ya) & np.isnan(yb))))
    if differ.any():
        return True, lines + [f"{layer}: {int(differ.sum())} values non-finite in one model only (or NaN against Inf)"]
    diff = np.abs(ya.astype(np.float64) - yb.astype(np.float64))
    lines.append(f"  {layer}: max |model - equivalent| = {np.nanmax(diff, initial=0.0):.6g}, "
                 f"max |model| = {np.nanmax(np.abs(ya), initial=0.0):.6g}")
    e, rows = normalized_error(ya, yb, CASE["rtol"], CASE["atol"])
    if not rows.size:
        return False, lines + ["no input is finite in both models: nothing to compare"]
    score = e.max(axis=1, initial=0.0)
    for r in np.argsort(-score)[:4]:
        lines.append(f"  input {EQUIV['rows'][rows[r]]}: largest |model - equivalent| / (atol + rtol * max |value| "
                     f"of the row) = {score[r]:.4g}")
    lines.append(f"  tolerance: rtol {CASE['rtol']:g}, atol {CASE['atol']:g} (above 1 is out of tolerance)")
    n_out = int((e > 1).sum())
    return n_out > 0, lines + [f"{n_out} of {e.size} values out of tolerance on {layer} ({b}, rule {EQUIV['rule']})"]


def main():
    problem = check_data()  # first: bad data is never a verdict
    if problem is not None:
        return bad_data(problem)
    if "--backend" in sys.argv:
        run_backend(sys.argv[sys.argv.index("--backend") + 1], sys.argv[sys.argv.index("--out") + 1])
        return 0
    results = run_all()
    changed = [r["bad_data"] for r in results.values() if "bad_data" in r]
    if changed:  # the file changed while the backends ran
        return bad_data(changed[0].split(": ", 2)[-1])
    broken = {b: r["broken"] for b, r in results.items() if "broken" in r}
    print(CASE["title"])
    if broken:
        print("ENVIRONMENT: " + "; ".join(broken.values()))
        return 2
    hit, lines = judge(results)
    print("\n".join(lines))
    print(("REPRODUCED: " if hit else "NOT REPRODUCED: ") + CASE["expect"]
          + ("" if hit else " (no longer on these versions)"))
    return 0 if hit else 1


if __name__ == "__main__":
    sys.exit(main())
'''
