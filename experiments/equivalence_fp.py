"""The equivalence oracle's false-positive rate and findings (issue 27): every rule on the
seven unmutated seeds, valid network variants and valid API-level models, on the four
default backends (tensorflow, torch, jax, onnxruntime).

Every case is an ``audee fuzz`` case with ``--equivalence all --invalid-prob 0``: network
variants (``audee.fuzz.fuzz``) and API-level models of the APIs the rules rewrite
(``audee.fuzz.fuzz_apis``).  A rule's status per case is read from the results rows
(``equivalence``: pass, fail, accumulated, harness); every failing finding from its case
file, and each is put into a class by :data:`EXPLAINED` (first match wins): a bug of a
backend (``bug``), a documented limitation (``limitation``), or the rule's own imprecision
(``imprecision``: a false positive).  Findings no entry explains are listed as
``unexplained``.

    python experiments/equivalence_fp.py [--budget 1800] [--work /tmp/equivalence_fp] \\
        [--rules all|RULE,...] [--also DIR ...] [--out experiments/results/equivalence_fp]

Resumable (a rerun with the same --work skips the cases done), in rounds over every seed
and API so that a run cut short by --budget still covers all of them; ``--analyse-only``
writes the tables from what is done.  Writes ``OUT.json`` and ``OUT.md``.

``--rules`` runs some rules only (the cases are drawn the same whatever the rules: the same
seeds, APIs, rounds and ``--rng`` give the same cases), so rules added later run over the
cases of an earlier run into another ``--work``; ``--also DIR`` (repeated) merges other work
directories into the analysis: a case is counted once, and each rule's statuses and findings
come from the first directory (``--work`` first) that ran the rule (``runs.json`` records the
rules of each run; a directory without them ran every rule its rows name).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from fp_rounds import BACKENDS, explain as explain_by, run_dirs, run_round

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind
from audee.settings import EQUIVALENCE_RULES, parse_rules
from audee.store import RunStore
#: network variants per seed in each round (the big CNNs cost seconds per build and rewrite)
ROUNDS = [{"lenet5": 10, "simplernn": 6, "lstm": 6, "gru": 6, "resnet20": 2, "vgg16": 2, "mobilenetv2": 1},
          {"lenet5": 30, "simplernn": 14, "lstm": 14, "gru": 14, "resnet20": 4, "vgg16": 4, "mobilenetv2": 2},
          {"lenet5": 60, "simplernn": 25, "lstm": 25, "gru": 25, "resnet20": 6, "vgg16": 6, "mobilenetv2": 3}]
API_ROUNDS = [5, 10, 20]  # API-level models per API in each round
#: the APIs the rules rewrite (every API gets the batch rules and float64)
APIS = ["AveragePooling1D", "AveragePooling2D", "BatchNormalization", "Conv1D", "Conv2D", "Conv2DTranspose",
        "Conv3D", "Cropping2D", "Dense", "DepthwiseConv1D", "DepthwiseConv2D", "GRU", "GlobalAveragePooling2D",
        "GlobalMaxPooling1D", "LSTM", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "SeparableConv1D",
        "SeparableConv2D", "SimpleRNN", "UpSampling2D", "ZeroPadding2D",
        # the axis rule's: normalizations and softmax over axes not written as the trailing ones
        "GroupNormalization", "LayerNormalization", "RMSNormalization", "Softmax", "UnitNormalization"]

#: (class, explanation, {finding field: regex}): the first entry whose every regex matches (re.search) a
#: finding explains it.  Fields: rule, backend, reason, message (a refused rewrite's error), dtype_policy
#: (the case's), layer_api, activation and data_format (of the layer blamed, else the first rewritten one).
#: Classes: bug (of a backend, a converter or Keras), limitation (documented or explicit 'unsupported'),
#: imprecision (the rule's own: a false positive; "fixed" says how the rule was corrected after this run)
EXPLAINED: list[tuple[str, str, dict[str, str]]] = [
    ("bug", "Keras 3.15's LayerNormalization with an axis list mixing signs ([1, -1]) sorts it as written and "
            "reshapes gamma and beta from that order (findings row 111, keras_layernorm_mixed_sign_axes.py; fixed "
            "after 3.15.1 by keras-team/keras#23329): every backend alike",
     {"rule": "axis", "reason": "values", "layer_api": "LayerNormalization",
      "mutations": r"\.axis=\[(\d+, -\d+|-\d+, \d+)"}),
    ("bug", "Keras' RMSNormalization(axis=k) multiplies by its scale along the last axis (findings row 110, "
            "keras_rmsnorm_scale_axis.py; still on Keras' master): every backend alike (torch, axes consecutive: "
            "row 76's F.rms_norm over the last axis too)",
     {"rule": "axis", "reason": "values", "layer_api": "RMSNormalization"}),
    ("bug", "TensorFlow's Eigen Conv3D with padding='same' and a stride larger than the kernel samples from offset 1 "
            "where SAME's padding would be negative (float64 always; oneDNN's float32 is right): findings row 29, "
            "tf_conv3d_same_negative_padding.py; new",
     {"rule": "float64", "backend": "tensorflow", "reason": "values", "layer_api": "Conv3D"}),
    ("limitation", "tf2onnx has no conversion for TensorFlow's Log1p (ONNX has no such op; the formula's "
                   "keras.ops.log1p): a converter gap, the class of findings row 4 (Bucketize, Expm1)",
     {"backend": "onnxruntime", "reason": "rejected", "message": "No Op registered for (Log1p|Expm1)"}),
    ("imprecision", "fixed: the rank rule reshaped back to (..., filters) after a layer whose activation changes "
                    "the last axis (glu halves it); the reshape now keeps whatever size comes (-1)",
     {"rule": "rank", "reason": "rejected", "activation": "glu", "message": "Reshape"}),
    ("bug", "tf2onnx's BiasAdd NCHW with a non-constant bias (findings row 7) in the rewrite's channels_first "
            "depthwise + 1x1 convolutions: onnxruntime computes another shape",
     {"rule": "separable", "backend": "onnxruntime", "reason": "shape|rejected", "data_format": "channels_first"}),
    ("imprecision", "fixed: a Softmax over axes that reach the batch (axis=[-2, -1] on a rank-2 input) has no "
                    "independent rows; the batch rules no longer apply to a model with a layer whose axis may be 0",
     {"rule": "batch_", "layer_api": "Softmax"}),
    ("imprecision", "fixed: a layer whose activation works along the last axis (softmax) computes something else in "
                    "the other data_format; the channels rule no longer rewrites such layers",
     {"rule": "channels", "activation": "softmax|log_softmax|sparsemax|glu"}),
    ("imprecision", "fixed: audee's shape inference reads channels_last layouts only, so the unit axis was put in the "
                    "wrong place of a channels_first layer; the rank rule now rewrites channels_last layers only",
     {"rule": "rank", "data_format": "channels_first"}),
    ("imprecision", "fixed: the float32 model overflows inside a layer (an LSTM's state under an unbounded "
                    "activation) where the float64 model does not; NaN/Inf in the float32 model only is no longer "
                    "a finding of the float64 rule",
     {"rule": "float64", "reason": "nonfinite"}),
    ("limitation", "onnxruntime has no float64 kernel for the op (NOT_IMPLEMENTED: Could not find an "
                   "implementation for Conv/MaxPool/AveragePool/LeakyRelu/LSTM... of type double)",
     {"rule": "float64", "backend": "onnxruntime", "reason": "rejected", "message": "Could not find an implementation"}),
    ("limitation", "TensorFlow's CPU kernels without float64 (or without NCHW) variants: Conv2D/Conv3D and "
                   "Conv2DCustomBackpropInput 'only support NHWC', DepthwiseConv2dNative 'only supports equal length "
                   "strides', MaxPool3D and AvgPool3D take float16/bfloat16/float32 only, the transposed convolution refuses dilation ('Current CPU implementations do not yet support dilation rates larger than 1'); float32 runs through oneDNN, which has them",
     {"rule": "float64", "backend": "tensorflow|onnxruntime", "reason": "rejected",  # (onnxruntime converts in TF)
      "message": "only supports? (the )?N(D)?HWC|NHWC tensor format|only supports equal length strides|"
                 "not in list of allowed values|No OpKernel was registered to support Op '(AvgPool3D|MaxPool3D)'|"
                 "do not yet support dilation rates larger than 1"}),
    ("limitation", "Keras on TensorFlow runs grouped (and channels_first 3-D) convolutions on the CPU through a nested "
                   "XLA function (keras/src/backend/tensorflow/nn.py, _conv_xla); tf2onnx cannot convert the "
                   "PartitionedCall, so onnxruntime never gets the model",
     {"backend": "onnxruntime", "reason": "rejected", "message": "PartitionedCall"}),
    ("limitation", "TensorFlow has no float16 MaxPool3D/AvgPool3D CPU kernel (No OpKernel was registered ... T=DT_HALF)",
     {"rule": "rank", "backend": "tensorflow", "reason": "rejected", "message": "No OpKernel was registered"}),
    ("limitation", "PyTorch's CPU avg_pool3d/max_pool3d are not implemented for float16 (NotImplementedError)",
     {"rule": "rank", "backend": "torch", "reason": "rejected", "message": "NotImplementedError|not implemented"}),
    ("bug", "TensorFlow (oneDNN) computes tf.einsum('...a,ab->...b') wrong in float16 on the CPU: EinsumDense "
            "under a float16 policy is off by the output's own magnitude (TF_ENABLE_ONEDNN_OPTS=0 is right)",
     {"rule": "dense_einsum", "backend": "tensorflow", "reason": "values|nonfinite", "dtype_policy": "float16"}),
    ("bug", "tf2onnx converts a channels_first convolution with a bias (1-D, or depthwise) into a graph "
            "onnxruntime refuses (ShapeInferenceError in the converted BiasAdd) or computes in another shape "
            "(a SeparableConv1D's (44, 1) output becomes (44, 44); the other three backends agree with the "
            "channels_last model): the converter, not the model; findings row 7 (BiasAdd NCHW with a "
            "non-constant bias, the harness's weights-as-inputs conversion)",
     {"rule": "channels", "backend": "onnxruntime", "reason": "rejected|shape|values"}),
    ("bug", "tf2onnx converts TF's float64 ResizeBilinear/Bicubic (which return float32) into an ONNX Resize that "
            "keeps float64 under the declared float32: an invalid graph (findings row 24, "
            "tf2onnx_resize_float64_dtype.py; new)",
     {"rule": "float64", "backend": "onnxruntime", "reason": "rejected",
      "message": "(clip_by_value/Minimum|Resize(Bilinear|Bicubic|Area)).*(inconsistent|bound to different types|"
                 "elem type differs)"}),
    ("imprecision", "fixed: a Dense whose activation changes the last axis (glu halves it) no longer fits the "
                    "dense_conv rewrite's reshape back to (units,); the reshape now keeps whatever size comes",
     {"rule": "dense_conv", "reason": "rejected", "message": "Reshape"}),
]


def run(rnd: int, work: Path, batch: int, rng: int, deadline: float, rules: str = "all",
        seeds: list[str] | None = None) -> bool:
    """One round over every API and seed (resumed); False once past the deadline.  No masks
    are drawn (``call_mask`` 0): every run of this experiment draws the same cases (masks came
    after its first run)."""
    variants = {n: k for n, k in ROUNDS[rnd].items() if seeds is None or n in seeds}
    return run_round(work, batch, rng, deadline, APIS, API_ROUNDS[rnd], variants,
                     {"equivalence": rules, "call_mask": 0.0})


_dirs = run_dirs


def explain(f: dict[str, Any]) -> tuple[str, str]:
    return explain_by(f, EXPLAINED)


def rules_run(work: Path) -> set[str]:
    """The rules the runs into ``work`` ran (``runs.json``'s ``rules``; a directory whose runs
    do not record them ran every rule its rows name)."""
    runs_file = work / "runs.json"
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else []
    if runs and all("rules" in r for r in runs):
        return {x for r in runs for x in r["rules"]}
    return {rule for _, d in _dirs(work) for row in RunStore(d).rows() for rule in (row.equivalence or {})}


def _merged_rows(works: list[Path]) -> list[tuple[str, str, list[tuple[Path, Any, set[str]]]]]:
    """Each case once: (group name, case id, [(its run directory, its row, the rules taken from
    that directory)]), the rules of each directory that ran them first (``works`` in order)."""
    cases: dict[tuple[str, str], list[tuple[Path, Any, set[str]]]] = {}
    for work in works:
        ran = rules_run(work)
        for group_name, d in _dirs(work):
            for row in RunStore(d).rows():
                got = cases.setdefault((group_name, row.id), [])
                taken = {r for _, _, rs in got for r in rs}
                got.append((d, row, ran - taken))
    return [(g, cid, entries) for (g, cid), entries in cases.items()]


def analyse(work: Path, also: list[Path] | None = None) -> dict[str, Any]:
    per_rule = {r: {"applied": 0, "pass": 0, "fail": 0, "accumulated": 0, "harness": 0,
                    "findings": 0, "by_class": {}, "seeds": 0, "variants": 0, "api": 0} for r in EQUIVALENCE_RULES}
    findings: list[dict[str, Any]] = []
    accumulated: list[dict[str, Any]] = []
    cases = {"seeds": 0, "variants": 0, "api": 0, "judged": 0, "not_run": 0}
    for group_name, case_id, entries in _merged_rows([work, *(also or [])]):
        group = "api" if group_name.startswith("api:") else "seeds" if case_id.endswith("-seed") else "variants"
        cases[group] += 1
        statuses = {rule: status for _, row, rules in entries for rule, status in (row.equivalence or {}).items()
                    if rule in rules}
        if not statuses:
            cases["not_run"] += 1  # no backend ran it (or no rule applied)
            continue
        cases["judged"] += 1
        for rule, status in statuses.items():
            p = per_rule[rule]
            p["applied"] += 1
            p[group] += 1
            p[status] = p.get(status, 0) + 1
        for d, row, rules in entries:
            if not row.case_file or not rules:
                continue
            rec = RunStore(d).load_case(row.case_file)
            policy = row.dtype or "float32"
            for f in rec.verdict_obj().findings:
                if f.kind not in (Kind.EQUIVALENCE, Kind.EQUIVALENCE_ACCUMULATED) or f.detail.rule not in rules:
                    continue
                det = f.detail
                names = set(rec.model_spec.layer_names())
                pinned = det.layer if det.layer in names else next((x for x in det.rewritten if x in names), None)
                params = rec.model_spec.layer(pinned).params if pinned else {}
                item = {"case": row.id, "group": group, "rule": det.rule, "backend": det.backend,
                        "reason": det.reason, "score": det.score, "first_layer": det.first_layer, "layer": det.layer,
                        "layer_api": rec.model_spec.layer(pinned).api if pinned else None,
                        "activation": params.get("activation"), "data_format": params.get("data_format"),
                        "phase": det.phase, "message": (det.message or "")[:3000], "dtype_policy": policy,
                        "ill_conditioned": det.ill_conditioned, "cleared": det.cleared,
                        "own": {k: v.to_json() for k, v in det.own.items()},
                        "mutations": row.mutations, "case_file": str(d / row.case_file)}
                if f.kind == Kind.EQUIVALENCE_ACCUMULATED:
                    accumulated.append(item)
                    continue
                item["class"], item["explanation"] = explain(item)
                findings.append(item)
                per_rule[det.rule]["findings"] += 1
                by = per_rule[det.rule]["by_class"]
                by[item["class"]] = by.get(item["class"], 0) + 1
    for p in per_rule.values():
        p["fp_rate"] = (p["by_class"].get("imprecision", 0) + p["by_class"].get("unexplained", 0)) / p["applied"] \
            if p["applied"] else 0.0
    return {"backends": BACKENDS, "rules": list(EQUIVALENCE_RULES), "cases": cases, "per_rule": per_rule,
            "findings": findings, "accumulated": accumulated}


def recheck(res: dict[str, Any], work: Path) -> None:
    """Each case with an imprecision or unexplained finding judged again under the rules as
    they are now (``remains``: the same rule still fails on the same backend); kept in
    ``work/recheck.json`` for later analyses."""
    from audee.cases.case import Kind as K
    from audee.engine.execute import Executor
    from audee.store.caserecord import CaseRecord

    todo = [f for f in res["findings"] if f["class"] in ("imprecision", "unexplained")]
    if not todo:
        return
    with Pool(parse_backends(BACKENDS), Path("/tmp")) as pool:
        pool.start_or_fail()
        done: dict[tuple[str, str], list] = {}
        for f in todo:
            key = (f["case_file"], f["rule"])
            if key not in done:
                rec = CaseRecord.from_file(f["case_file"])
                result = Executor(pool, tolerances=rec.tolerances or None, equivalence=[f["rule"]]).run(rec.test_case())
                done[key] = [(g.detail.rule, g.backends[0]) for g in result.verdict.findings if g.kind == K.EQUIVALENCE]
            f["remains"] = (f["rule"], f["backend"]) in done[key]
            print(f"recheck {f['case']} {f['rule']} {f['backend']}: {'remains' if f['remains'] else 'gone'}",
                  flush=True)
    (work / "recheck.json").write_text(json.dumps({"|".join((f["case_file"], f["rule"], f["backend"])): f["remains"]
                                                   for f in todo}, indent=1))


def apply_recheck(res: dict[str, Any], work: Path) -> None:
    """The last recheck's answers (``work/recheck.json``) on the findings."""
    path = work / "recheck.json"
    got = json.loads(path.read_text()) if path.exists() else {}
    for f in res["findings"]:
        key = "|".join((f["case_file"], f["rule"], f["backend"]))
        if key in got:
            f["remains"] = got[key]


def _signature(f: dict[str, Any]) -> tuple:
    msg = re.sub(r"'[^']*'|\d+", "#", (f["message"] or "").splitlines()[0] if f["message"] else "")[:90]
    return (f["rule"], f["backend"], f["reason"], f["layer_api"] or "-", f["dtype_policy"], msg)


NOTES = """## Notes

**Size.** 7 unmutated seeds, 90 valid network variants and 460 valid API-level models (20 of each of the 23 APIs the
rules rewrite), on the four default backends; 547 judged by at least one rule. The 15 rules of the first version ran
on all of them (`/tmp/equivalence_fp`: three invocations in an earlier session, 150 cases; one this session, stopped
by hand after round 2's API-level models). The five later rules (`roundtrip_keras`, `roundtrip_config`,
`roundtrip_json`, `go_backwards`, `formula`) ran on the same draw with `--rules` into `/tmp/eqnew` (`call_mask` 0 in
both, so the cases are the same): every seed's round-0 variants, LeNet-5's round-1 variants and all 460 API-level
models (the recurrent seeds' later variants cost 40 s a case with three round trips of an unrolled RNN on four
backends); `--also` merges the two directories, a case counted once, each rule's status from the directory that ran
it. A case with every rule costs 3-6 s as a one-layer API model and 15-40 s as a variant on this 2-core machine (each
rule's equivalent model is built, converted and compiled on every backend).

**False positives.** Six rule preconditions were too wide; each was fixed and every case of those findings judged
again under the fixed rules (`--recheck`, `recheck.json`: none remains). Before the fixes, 32 findings in 8 cases: rank
16 (channels_first layouts audee's shape inference does not read; a Conv2D whose glu activation halves the last
axis, reshaped back to the filters), dense_conv 4 (glu halves the Dense output), batch_single 4 (a Softmax over axes
reaching the batch), channels 4 (a softmax activation follows the last axis, the channels in one layout and the width
in the other), float64 4 (an LSTM's float32 state overflows where float64's does not). No rule needed a wider
tolerance. After the fixes every rule's false-positive rate is 0 (last column).

**Bugs (real, reported by the rules on one backend; `findings/README.md`).**

1. Row 19, TensorFlow 2.21 (oneDNN, CPU): float16 `tf.einsum('...a,ab->...b')` reads rows at the wrong stride;
   Keras' `EinsumDense` under a float16 policy (`dense_einsum`, 10 findings).
2. Row 7, tf2onnx 1.17.0: BiasAdd NCHW with a non-constant bias; channels_first 1-D, depthwise and separable
   convolutions with a bias (`channels` 27 findings, `separable` 1).
3. Row 24 (new this session), tf2onnx: TF's float64 ResizeBilinear/Bicubic/Area return float32, the converted
   Resize keeps float64 under the declared float32: an invalid graph (`float64`, UpSampling2D bilinear/bicubic).
4. Row 29 (new this session), TensorFlow's Eigen Conv3D with padding='same' and a stride beyond the kernel samples
   from offset 1 where SAME's padding would be negative (float64; oneDNN's float32 is right) (`float64`, Conv3D).
5. Rows 20-21, Keras' TF `ops.add` bias layout guess and the oneDNN remapper that hides it in graphs (`channels`,
   found while the rules were written, on `tensorflow-eager`).

**Limitations** (explicit refusals of the equivalent model, classed `limitation`): onnxruntime has no float64
kernel for Conv, pooling, LeakyRelu, LSTM, Resize...; TensorFlow's CPU kernels without a float64 or NCHW variant
(MaxPool3D/AvgPool3D float64, Conv2DCustomBackpropInput NHWC only, dilated transposed convolutions, depthwise
unequal strides); Keras runs grouped and channels_first 3-D convolutions on TensorFlow's CPU through a nested XLA
function tf2onnx cannot convert; TensorFlow's MaxPool3D and PyTorch's avg_pool3d have no float16 CPU kernel;
tf2onnx converts no Log1p (the `formula` rule's softplus/log_sigmoid in `keras.ops`), the class of row 4.
"""


def markdown(res: dict[str, Any], command: str, seconds: float | None, notes: str = NOTES) -> str:
    c = res["cases"]
    lines = ["# Equivalence oracle: rules on seeds, valid variants and API-level models", "",
             f"Command: `{command}`" + (f" ({seconds / 60:.0f} min)" if seconds else ""), "",
             f"Backends: {res['backends']}; each run's rules (`--rules`, every rule by default; merged work "
             f"directories: {', '.join(res.get('also') or []) or 'none'}), `--invalid-prob 0`. Cases: "
             f"{c['seeds']} unmutated seeds, {c['variants']} network variants, {c['api']} API-level models "
             f"({c['judged']} judged by at least one rule; {c['not_run']} run by no backend or rewritten by no rule). "
             "A rule's status per case: pass (every backend agrees with itself), fail (an `equivalence` finding on "
             "some backend), accumulated (only `equivalence_accumulated`: no rewritten layer differs alone, "
             "not a failure), harness (audee could not run the rewrite; logged). FP rate: failing findings that "
             "are the rule's own imprecision or unexplained, per case the rule applied to.", "",
             "| rule | applied (seeds / variants / API) | pass | fail | accumulated | harness | findings | "
             "bug | limitation | imprecision + unexplained | FP rate | FP after the fixes (rechecked) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for rule, p in res["per_rule"].items():
        if not p["applied"]:
            continue  # a rule this run did not select (--rules), or one no case could take
        by = p["by_class"]
        false = [f for f in res["findings"] if f["rule"] == rule and f["class"] in ("imprecision", "unexplained")]
        left = [f for f in false if f.get("remains", True)]
        after = f"{len(left)} ({100 * len(left) / p['applied']:.1f}%)" if p["applied"] else "-"
        lines.append(f"| {rule} | {p['applied']} ({p['seeds']} / {p['variants']} / {p['api']}) | {p['pass']} | "
                     f"{p['fail']} | {p['accumulated']} | {p['harness']} | {p['findings']} | {by.get('bug', 0)} | "
                     f"{by.get('limitation', 0)} | {by.get('imprecision', 0) + by.get('unexplained', 0)} | "
                     f"{100 * p['fp_rate']:.1f}% | {after} |")
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for f in res["findings"]:
        groups.setdefault(_signature(f), []).append(f)
    lines += ["", "## Findings, grouped (rule, backend, reason, layer API, dtype policy, error)", "",
              "| rule | backend | reason | layer | dtype | findings | class | explanation / error | first case |",
              "|---|---|---|---|---|---:|---|---|---|"]
    for key, fs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        f = fs[0]
        what = f["explanation"] or (f["message"].splitlines()[0][:160] if f["message"] else
                                    f"score {f['score']:.3g}, first layer {f['first_layer']}, own "
                                    f"{json.dumps(f['own'])[:120]}" if f["score"] else "")
        rechecked = [x["remains"] for x in fs if "remains" in x]
        klass = f["class"] + (f" ({sum(rechecked)} of {len(rechecked)} remain now)" if rechecked else "")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {len(fs)} | {klass} | "
                     f"{what.replace('|', '/')} | {f['case']} |")
    if res["accumulated"]:
        lines += ["", "## Accumulated (not failures)", "",
                  "| case | rule | backend | score | first layer | cleared | ill-conditioned |", "|---|---|---|---:|---|---|---|"]
        for a in res["accumulated"]:
            lines.append(f"| {a['case']} | {a['rule']} | {a['backend']} | {a['score'] or 0:.3g} | {a['first_layer']} | "
                         f"{a['cleared']} | {', '.join(a['ill_conditioned'] or []) or '-'} |")
    return "\n".join(lines) + "\n\n" + notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=1800.0, help="seconds: no new seed or API starts after it")
    ap.add_argument("--rounds", type=int, default=len(ROUNDS), help="rounds to run (each resumes the one before)")
    ap.add_argument("--batch", type=int, default=4, help="input rows per case")
    ap.add_argument("--rng", type=int, default=0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/equivalence_fp"))
    ap.add_argument("--seeds", default=None,
                    help="the seeds whose network variants this invocation runs (default: all; the API-level "
                         "models always run): the same draw, the slow seeds left to another invocation")
    ap.add_argument("--rules", default="all", help="the rules to run: all, or a list (the same cases are drawn)")
    ap.add_argument("--also", type=Path, action="append", default=[],
                    help="another work directory merged into the analysis (repeat; see the module docstring)")
    ap.add_argument("--out", type=Path, default=Path("experiments/results/equivalence_fp"))
    ap.add_argument("--notes", type=Path, default=None,
                    help="the hand-written notes to end OUT.md with (default: those of the record of every rule)")
    ap.add_argument("--analyse-only", action="store_true")
    ap.add_argument("--recheck", action="store_true",
                    help="judge the cases of imprecision and unexplained findings again under the current rules")
    args = ap.parse_args()
    try:
        rules = parse_rules(args.rules)
    except ValueError as exc:
        ap.error(f"--rules: {exc}")
    t0 = time.time()
    if not args.analyse_only:
        args.work.mkdir(parents=True, exist_ok=True)
        for rnd in range(min(args.rounds, len(ROUNDS))):
            if not run(rnd, args.work, args.batch, args.rng, t0 + args.budget, ",".join(rules),
                       args.seeds.split(",") if args.seeds else None):
                print(f"budget of {args.budget:.0f} s reached in round {rnd}", flush=True)
                break
    runs_file = args.work / "runs.json"  # every run into this work directory: command and seconds
    runs = json.loads(runs_file.read_text()) if runs_file.exists() else []
    if not args.analyse_only:
        runs.append({"command": "python " + " ".join(sys.argv), "seconds": round(time.time() - t0),
                     "rules": list(rules)})
        runs_file.write_text(json.dumps(runs, indent=1))
    res = analyse(args.work, args.also)
    res["runs"] = runs
    res["also"] = [str(d) for d in args.also]
    if args.recheck:
        recheck(res, args.work)
    apply_recheck(res, args.work)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=1, default=float))
    merged = runs + [r for d in args.also if (d / "runs.json").exists()
                     for r in json.loads((d / "runs.json").read_text())]
    command = "; ".join(r["command"] for r in merged) or "python " + " ".join(sys.argv)
    seconds = sum(r["seconds"] for r in merged) or None
    notes = args.notes.read_text() if args.notes else NOTES
    args.out.with_suffix(".md").write_text(markdown(res, command, seconds, notes))
    print(args.out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
