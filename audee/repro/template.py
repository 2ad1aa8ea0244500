"""The text of a standalone model repro script (see :mod:`audee.repro`): the model
level's body in the one scaffold (:mod:`audee.repro.scaffold`: header, data check, a child
process per backend, exit codes), each backend's lines from its description.

The script imports numpy and the frameworks only: a maintainer runs it without audee.
Its placeholders (``__HEADER__``, ``__MODEL__``, ...) are filled by
:func:`audee.repro.write_repro` through :func:`audee.repro.source.fill`: the header as
comments, every value from the case file as a JSON string literal, never as code.
Its comparison functions (``label_flips``,
``normalized_error`` — :mod:`audee.oracle.deviation`'s formula, inline —, ``nonfinite``) are
importable for tests, which hold them equal to the package's (``tests/test_decisions.py``;
``relative_tie_margin`` too).

The data file is checked before anything runs (the scaffold's ``check_data``): a truncated
or foreign ``.npz`` is reported as bad data (exit 3), never as a verdict.
"""
from audee.cases.kinds import Kind
from audee.repro.scaffold import compose

#: the failure kinds the script's ``judge`` tells apart (a deviation by its closing tolerance
#: check, which any other pair would reach too): :func:`audee.repro.write_repro` refuses a
#: failure of a kind not here rather than write a script that judges it as a deviation
JUDGED_KINDS = (Kind.HARD_CRASH, Kind.DIVERGENT_ACCEPTANCE, Kind.NAN, Kind.EQUIVALENCE, Kind.INCONSISTENCY,
                Kind.DEVIATION, Kind.DECLARED_OUTPUT)

CONSTANTS = r'''
MODEL = json.loads(__MODEL__)
CASE = json.loads(__CASE__)
# an equivalence finding: the equivalent model (weights "v/..."), the original rows it runs
# in order, the dtype its float inputs are cast to, and each original layer's equivalent
EQUIV = json.loads(__EQUIV__)
RUNS = CASE.get("backends")
TITLE = CASE.get("title")
MERGE = {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate", "Dot"}
POSITIONAL = {"MultiHeadAttention", "GroupQueryAttention"}  # call(query, value): one argument per input
'''

BODY = r'''
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


# ---- one backend, in this (child) process ------------------------------------------------------
def child(backend, out):
    """Build, load weights, run; save every layer's output (or the error) to ``out``."""
    code = BACKEND_CODE[backend.partition("@")[0]]  # "torch@cuda" runs torch
    # a converter or runtime runs the Keras model of one framework (BACKEND_CODE[...]["keras"])
    os.environ["KERAS_BACKEND"] = code["keras"]
    os.environ.update(code["env"])
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
        if device != "cpu" and code["gpu"] is not None:
            code["gpu"](full)
        info["versions"]["keras"] = keras.__version__
        for mod in code["modules"]:
            module = __import__(mod)
            info["versions"][mod] = getattr(module, "__version__", None) or _dist_version(mod)
    except ImportError as exc:
        environment_broken(backend, exc)
    data = np.load(DATA)
    info["declared"] = {}  # what Keras declares each layer computes: [shape (None: any length), dtype]
    outs, info["error"] = forward(keras, code["run"], MODEL, "w", [data["x/" + i["name"]] for i in MODEL["inputs"]],
                                  data, info["declared"])
    arrays = {f"y/{s['name']}": np.asarray(o) for s, o in zip(MODEL["layers"], outs)}
    # each output's own dtype: a bfloat16 one is written as float32 (write_result)
    info["dtypes"] = {s["name"]: str(np.asarray(o).dtype) for s, o in zip(MODEL["layers"], outs)}
    if EQUIV is not None:  # the same backend on the equivalent model (where it refused the model too)
        xs = [data["x/" + i["name"]][EQUIV["rows"]] for i in MODEL["inputs"]]
        xs = [x.astype(EQUIV["input_dtype"]) if EQUIV["input_dtype"] and np.issubdtype(x.dtype, np.floating) else x
              for x in xs]
        eq_outs, info["equiv_error"] = forward(keras, code["run"], EQUIV["model"], "v", xs, data)
        arrays.update({f"z/{s['name']}": np.asarray(o) for s, o in zip(EQUIV["model"]["layers"], eq_outs)})
    write_result(out, info=np.array(json.dumps(info)), **arrays)


def _dist_version(module):
    import importlib.metadata as md
    try:
        return md.version(module.replace("_", "-"))
    except md.PackageNotFoundError:
        return "?"


def forward(keras, run, spec, prefix, xs, data, declared=None):
    """Build ``spec``, load its weights (``<prefix>/<layer>/<k>``) and ``run`` it on ``xs``
    (the backend's own lines): every layer's output, and None; or [] and the error (a clean
    rejection: the error is the finding).  ``declared``, where given, gets each layer's
    declared output: its symbolic tensor's shape and dtype."""
    at, outs = {"phase": "build"}, []
    try:
        model, layers = build(keras, spec)
        if declared is not None:
            declared.update({s["name"]: [list(t.shape), str(t.dtype)] for s, t in zip(spec["layers"], model.outputs)})
        at["phase"] = "weights"
        for lname, layer in layers.items():
            if layer.weights:
                layer.set_weights([data[f"{prefix}/{lname}/{k}"] for k in range(len(layer.weights))])
        if spec.get("roundtrip"):  # saved and loaded with its weights in; the loaded model runs
            at["phase"] = "build"
            model = round_trip(keras, model, spec["roundtrip"])
        outs = run(keras, model, spec, xs, at)
        outs = [keras.ops.convert_to_numpy(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
    except Exception as exc:  # a clean rejection: the error is the finding
        return [], {"phase": at["phase"], "message": f"{type(exc).__name__}: {exc}"[:2000]}
    return outs, None


def read_result(out):
    """What a child wrote: versions, error, every layer's output (and the equivalent model's)."""
    with np.load(out) as z:
        info = json.loads(str(z["info"]))
        info["layers"] = {k[2:]: z[k] for k in z.files if k.startswith("y/")}
        info["equiv_layers"] = {k[2:]: z[k] for k in z.files if k.startswith("z/")}
    return info


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


def codes(a):
    """Per element 0 finite, 1 NaN, 2 +Inf, 3 -Inf: the NaN oracle tells NaN from Inf."""
    a = np.asarray(a)
    if not np.issubdtype(a.dtype, np.floating):
        return np.zeros(a.shape, np.int8)
    return (np.isnan(a) * 1 + np.isposinf(a) * 2 + np.isneginf(a) * 3).astype(np.int8)


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
        masks = {b"".join(codes(layers[s["name"]]).tobytes() for s in MODEL["layers"]) for layers in ran.values()}
        # what the oracle judged: the backends' NaN/Inf patterns differ, NaN apart from +Inf and
        # -Inf (one backend's NaN where every backend has the same, an overflow on all of them,
        # is no finding; a NaN where the others have an Inf is)
        differ = len(masks) > 1
        hit = any(pattern.get(b) for b in CASE["failing"]) and differ
        why = ("the same pattern on every backend that ran" if not differ
               else "inputs finite" if inputs_finite else "the inputs hold NaN/Inf")
        return hit, lines + [f"NaN/Inf on {', '.join(b for b in pattern if pattern[b]) or 'no backend'} ({why}"
                             + (", the backends' patterns differ)" if differ else ")")]
    if kind == "equivalence":
        return judge_equivalence(results, ran, lines)
    if kind == "declared_output":
        return judge_declared(results, ran, lines)
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


def judge_declared(results, ran, lines):
    """The layer's output on each failing backend against the output Keras declares for it
    (the functional model's symbolic tensor: shape, a None taking any length, and dtype)."""
    layer, off = CASE["layer"], []
    for b in CASE["failing"]:
        if b not in ran:
            return False, lines + [f"{b} must run the model to compare {layer} with its declaration"]
        shape, dtype = results[b]["declared"][layer]
        y = ran[b][layer]
        got = results[b].get("dtypes", {}).get(layer, str(y.dtype))  # as computed, before the file's float32
        fits = len(shape) == y.ndim and all(d is None or d == g for d, g in zip(shape, y.shape)) and got == dtype
        lines.append(f"  {b}: {layer} declared {tuple(shape)} {dtype}, computed {tuple(y.shape)} {got}")
        if not fits:
            off.append(b)
    hit = len(off) == len(CASE["failing"])
    return hit, lines + [f"{', '.join(off) or 'no backend'} computes {layer} unlike its declaration"]


def judge_equivalence(results, ran, lines):
    """One backend, the model and its equivalent (EQUIV): the equivalent refused, the model
    refused where the equivalent runs (CASE's ``refused``), or the compared layer's non-finite
    pattern or values differ beyond the tolerance."""
    b = CASE["backends"][0]
    err = results[b].get("equiv_error")
    if CASE["refused"]:  # recorded: the model refused where its equivalent runs (a rule that moves axes only)
        refused = results[b].get("error")
        if not refused or err or not results[b].get("equiv_layers"):
            return False, lines + [f"{b} does not refuse the model while it runs its equivalent"]
        return True, lines + [f"{b} refuses the model ({refused['phase']} error: {refused['message'][:300]}) "
                              f"but runs its equivalent ({EQUIV['rule']})"]
    if b not in ran:
        return False, lines + [f"{b} must run the model to compare it with its equivalent"]
    if err:
        lines.append(f"  {b} refuses the equivalent model ({EQUIV['rule']}): {err['phase']} error: {err['message']}")
        return True, lines + [f"{b} runs the model but not its equivalent"]
    layer = CASE["layer"]
    ya = ran[b][layer][EQUIV["rows"]]
    yb = results[b]["equiv_layers"][EQUIV["map"][layer]]
    if ya.shape != yb.shape:
        return True, lines + [f"{layer}: shapes differ: model {ya.shape}, equivalent {yb.shape}"]
    if not ya.size:  # a batch of zero rows: its shape was the whole check
        return False, lines + [f"{layer}: shapes agree ({ya.shape}) and hold no values"]
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


def verdict(results):
    """Whether the failure reproduces, and the rest of the verdict line (the lines saying why
    printed first)."""
    hit, lines = judge(results)
    print("\n".join(lines))
    return hit, ": " + CASE["expect"] + ("" if hit else " (no longer on these versions)")
'''

SCRIPT = compose(constants=CONSTANTS, body=BODY, data=True, backends=True)
