"""The float64 reference of a test case, run beside it and judged.

Called by :meth:`audee.engine.execute.Executor.judge` once a case's outcomes are in:

1. the case's model widened to float64 (:func:`audee.equivalence.rules.widened`, the one
   way audee makes a wider model: every layer under the ``float64`` policy, float weights
   and inputs cast up) is built and run at once on the **candidates**: the configured
   backend (``--reference-backend``; a worker of its own when the run does not test it),
   then every built-in Keras backend of the run (:data:`KERAS_BACKENDS`) in the run's
   order, JAX's float64 computed by ``jax-x64`` (x64 on in that worker only:
   :data:`audee.backends.registry.FLOAT64_TWIN`); the pool starts the workers the run
   lacks (:func:`reference_refs`), and a run where no backend can compute it stops before
   its first case (:func:`reference_workers`);
2. the reference is the first candidate whose answer really is float64 (a plugin may
   answer float32; TensorFlow's CPU has no float64 for some NCHW convolutions: the next
   one is taken; the model is ``exact``, so Keras keeps float64 as float64 where it would
   narrow it off TensorFlow, and an answer a backend still computed in float32 is refused:
   :func:`computed_in_float32`; a candidate that has answered :data:`NEVER_AFTER` models in another
   dtype and none in float64 is asked no more); every other candidate that answered
   float64 cross-checks it in float32's tolerance (the deviation oracle judges float64
   arrays as float32); one out of it marks the reference ``disputed`` (it judges nothing)
   unless another backend corroborates the reference (:func:`disputed`);
3. each backend's error against the reference (:func:`audee.oracle.precision.reference_scores`)
   goes into the results row (:class:`audee.records.reference.ReferenceRun`), names the
   culprit of the case's deviations and inconsistencies, and makes ``precision``
   findings (:func:`audee.oracle.precision.precision_findings`), diagnosed per layer by
   :mod:`audee.reference.diagnose`;
4. a float16 or bfloat16 case also gets a float32 reference (the same model widened to
   float32), recorded as ``lower``: how far the reduced dtype moved each backend;
5. the reference decides the odd backends of the case's findings before the majority does
   (:mod:`audee.oracle.pairs`): those out of tolerance against it, and ``nonfinite``, those
   non-finite where it is finite (:func:`nonfinite_odd`).

An op case (:mod:`audee.engine.opexec`) gets one too: the call on its float tensors widened to
float64 (:func:`widened_call`) on the same candidates (:meth:`Reference.submit_op`,
:meth:`Reference.collect_op`), judged per output by :func:`audee.oracle.ops.float64_verdicts`.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audee.backends.registry import BUILTIN, BackendRef, float64_twin, parse_backends
from audee.backends.info import base_name, keras_frameworks
from audee.cases.case import Finding, Outcome, TestCase
from audee.core.errors import AudeeError
from audee.equivalence.rules import widened
from audee.oracle.compute_dtype import layer_compute_dtype, reduced_precision
from audee.oracle.deviation import TENSORS, compare
from audee.oracle.ops import restore, value_compare
from audee.oracle.pairs import nonfinite_by_float64
from audee.oracle.precision import mark_culprits, precision_findings, reference_scores
from audee.reference.diagnose import diagnose_precision
from audee.records.reference import ReferenceRun
from audee.settings import PRECISION_FACTOR, FuzzSettings
from audee.cases.spec import ModelSpec, Weights, weights_key
from audee.core.floats import float32_valued, is_float, nudged

log = logging.getLogger(__name__)

#: the built-in Keras backends, those the default reference is taken from (in the run's order)
KERAS_BACKENDS = keras_frameworks()
#: a candidate that has answered this many models in another dtype, and none in the asked one,
#: is asked no more (JAX without x64 answers every float64 model in float32: a compile per case saved)
NEVER_AFTER = 3


def candidates(labels: list[str], backend: str = "auto") -> list[str]:
    """The workers asked for the reference of a run on ``labels``, the preferred first:
    ``backend`` (a label or a name of the run's, else a backend of its own: the run need not
    test it), then the run's built-in Keras backends in its order.  Each is the backend that
    computes its float64 (:func:`audee.backends.registry.float64_twin`: JAX's is ``jax-x64``,
    a worker beside the run's ``jax``).  Empty: nothing the run names can compute one."""
    keras = [label for label in labels if base_name(label) in KERAS_BACKENDS]
    first: list[str] = []
    if backend != "auto":
        first = [label for label in labels if backend in (label, base_name(label))][:1] or [backend]
    out: list[str] = []
    for label in first + keras:
        twin = float64_twin(label)
        if twin not in out:
            out.append(twin)
    return out


def reference_refs(refs: list[BackendRef], backend: str = "auto") -> list[BackendRef]:
    """The workers the reference needs beyond the run's ``refs`` (:func:`candidates` the run
    does not test): the Pool starts them beside the run's (``Pool(reference=...)``), so a run
    that asks for a reference gets one, or stops at the start with one line (exit 4)."""
    have = {r.label for r in refs}
    envs = {r.env: r.python for r in refs if r.env is not None and r.python is not None}  # jax@prev's jax-x64@prev
    return [parse_backends(label, envs=envs)[0] for label in candidates([r.label for r in refs], backend)
            if label not in have]


def reference_workers(cfg: FuzzSettings, refs: list[BackendRef], field: str = "--reference") -> list[BackendRef]:
    """The reference workers of a run with settings ``cfg`` on the backends ``refs`` (none
    when it asks for no reference); an :class:`AudeeError` naming ``field`` when nothing can
    compute it, said before the first case."""
    precision = cfg.precision
    if precision.reference == "none":
        return []
    if not candidates([r.label for r in refs], precision.reference_backend):
        raise AudeeError("no backend of the run computes the float64 reference (a built-in Keras backend: "
                         f"{', '.join(KERAS_BACKENDS)}); name one with --reference-backend", field=field)
    return reference_refs(refs, precision.reference_backend)


def widened_inputs(inputs: dict[str, np.ndarray], dtype: str) -> dict[str, np.ndarray]:
    """Float inputs cast to ``dtype`` (token ids stay as they are)."""
    return {k: (v.astype(dtype) if is_float(v) else v) for k, v in inputs.items()}


def reduced(spec: ModelSpec) -> bool:
    """Whether some layer computes in float16 or bfloat16 (its ``dtype`` policy)."""
    return any(reduced_precision(layer_compute_dtype(ls.params)) for ls in spec.layers)


@dataclass
class Wide:
    """A case's model widened to one dtype: what the reference runs."""

    spec: ModelSpec
    weights: Weights
    inputs: dict[str, np.ndarray]
    dtype: str

    @classmethod
    def of(cls, case: TestCase, dtype: str) -> "Wide":
        spec, weights = widened(case.spec, case.weights, dtype)
        spec.exact = dtype == "float64"  # float64 computed as float64 (Keras narrows it off TensorFlow)
        return cls(spec, weights, widened_inputs(case.inputs, dtype), dtype)

    def rows(self, rows: list[int]) -> dict[str, np.ndarray]:
        return {k: v[rows] for k, v in self.inputs.items()}


@dataclass
class Reference:
    """The precision oracle's settings (``--reference``, ``--reference-backend``,
    ``--precision-factor``) and its run on one case (:meth:`judge`)."""

    backend: str = "auto"
    factor: float = PRECISION_FACTOR
    # per (candidate, dtype): how many models it answered in the dtype asked, and in another
    _answered: dict[tuple[str, str], list[int]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_settings(cls, cfg: FuzzSettings) -> "Reference | None":
        """The reference a run's settings ask for (None: ``none``): its backend from the
        ``precision`` section, its factor from ``judging``."""
        if cfg.precision.reference == "none":
            return None
        return cls(cfg.precision.reference_backend, cfg.judging.precision_factor)

    @classmethod
    def recorded(cls, meta: dict[str, Any]) -> "Reference | None":
        """The reference a case file's provenance says the case was judged with (its
        ``reference`` record: the backend that computed it first, the same factor); None
        when it had none."""
        got = meta.get("reference")
        if not isinstance(got, dict):
            return None
        run = ReferenceRun.model_validate(got)
        return cls(run.backend or "auto", run.factor if run.factor is not None else PRECISION_FACTOR)

    def workers(self, refs: list[BackendRef]) -> list[BackendRef]:
        """The workers to start beside ``refs`` for this reference, built-ins only: a
        reference read from a case file (:meth:`recorded`) never starts code the file names."""
        builtin = set(BUILTIN.values())
        return [r for r in reference_refs(refs, self.backend) if r.target in builtin]

    def run(self, ex: Any, case: TestCase, dtype: str = "float64") -> tuple[ReferenceRun, Wide, dict[str, np.ndarray]]:
        """The reference of ``case`` in ``dtype``: its record (errors not yet judged), the
        widened model, and the reference's tensors (empty when no backend computed it)."""
        wide = Wide.of(case, dtype)
        rec = ReferenceRun(dtype=dtype)
        refused: dict[str, str] = {}
        cands = []
        for b in candidates(ex.pool.labels, self.backend):
            right, other = self._answered.get((b, dtype), [0, 0])
            if b not in ex.pool.workers:
                refused[b] = "no worker: not started beside the run's (reference_refs)"
            elif right == 0 and other >= NEVER_AFTER:
                refused[b] = f"not asked: answered {other} models in another dtype than {dtype}, none in it"
            else:
                cands.append(b)
        if not cands:
            rec.refused = refused or {"-": "no Keras backend in the run"}
            return rec, wide, {}
        # built where it runs (a worker builds a spec it has not seen), not through the
        # Executor's cache: that one holds every backend's build of a spec
        got = ex.pool_run(wide.spec, wide.weights, weights_key(wide.weights), wide.inputs, labels=cands)
        answers: dict[str, dict[str, np.ndarray]] = {}
        for b in cands:
            r = got.get(b)
            tally = self._answered.setdefault((b, dtype), [0, 0])
            if not isinstance(r, dict):
                refused[b] = _why(r)
            elif str(np.asarray(r["logits"]).dtype) != dtype:
                refused[b] = f"answered {np.asarray(r['logits']).dtype}, not {dtype}"
                tally[1] += 1
            else:
                answers[b] = {t: np.asarray(r[t]) for t in TENSORS if r.get(t) is not None}
                tally[0] += 1
        for b in computed_in_float32(ex.pool_run, wide.spec, wide.weights, wide.inputs,
                                     {b: a["logits"] for b, a in answers.items()}):
            refused[b] = "computed in float32: float32 numbers in a float64 array, unmoved by a float64 nudge"
            del answers[b]
        if refused:
            rec.refused = refused
        if not answers:
            return rec, wide, {}
        rec.backend = next(b for b in cands if b in answers)
        tensors = answers[rec.backend]
        checks = {}
        for b, theirs in answers.items():
            if b != rec.backend:
                scores = [compare(theirs[t], tensors[t], ex.tolerances) for t in TENSORS
                          if t in theirs and t in tensors]
                checks[b] = max((float(s["score"]) for s in scores if s is not None), default=0.0)
        if checks:
            rec.checks = checks
        return rec, wide, tensors

    def submit_op(self, pool: Any, call: dict[str, Any], tensors: dict[str, np.ndarray]) -> dict[str, int]:
        """Send an op call, its float tensors widened to float64 (:func:`widened_call`), to
        every candidate worker (:func:`candidates`; the run's own workers answer it after the
        run's call): each one's ticket for :meth:`collect_op`."""
        wide_call, wide = widened_call(call, tensors)
        labels = [b for b in candidates(pool.labels, self.backend) if b in pool.workers]
        return pool.submit_op(wide_call, wide, labels) if labels else {}

    def collect_op(self, pool: Any, tickets: dict[str, int], tol: Any) -> OpReference:
        """The op call's reference from the candidates' answers (``tickets``, in candidate
        order): the first whose float outputs are float64; every other one that answered in
        float64 cross-checks it in float32's tolerance (``checks``, :func:`disputed`, as a
        model's reference)."""
        rec = ReferenceRun(dtype="float64", factor=self.factor)
        got = pool.collect_op(tickets) if tickets else {}
        refused = {b: (_why(r) if not isinstance(r, dict) else f"answered {', '.join(r.get('dtypes', []))}")
                   for b, r in got.items() if not _float64_outputs(r)}
        answers = {b: r for b, r in got.items() if b not in refused}
        if refused or not got:
            rec.refused = refused or {"-": "no Keras backend in the run"}
        if not answers:
            return OpReference(rec)
        rec.backend = next(iter(answers))
        mine = answers[rec.backend]
        outs, dts = list(mine["outputs"]), list(mine["dtypes"])
        checks = {}
        for b, r in answers.items():
            if b == rec.backend or len(r["outputs"]) != len(outs):
                continue
            scores = [value_compare(restore(x, d), restore(y, e), tol) for x, d, y, e in
                      zip(r["outputs"], r["dtypes"], outs, dts)]
            checks[b] = max((float(c["score"]) for c in scores if c is not None), default=0.0)
        if checks:
            rec.checks = checks
        return OpReference(rec, outs, dts)

    def judge(self, ex: Any, case: TestCase, outcomes: dict[str, Outcome], findings: list[Finding], *,
              diagnose: bool = True) -> tuple[ReferenceRun, list[Finding]]:
        """Run the reference of ``case``, record every backend's error against it, name the
        culprit of ``findings`` (the case's, changed in place) and return the record and the
        ``precision`` findings (diagnosed per layer when ``diagnose``)."""
        ordered = [outcomes[b] for b in ex.pool.labels if b in outcomes]
        rec, wide, tensors = self.run(ex, case)
        rec.factor = self.factor
        if reduced(case.spec):
            lower, _, low = self.run(ex, case, "float32")
            if low:
                lower.errors = _errors(reference_scores(ordered, low, ex.tolerances))
            rec.lower = lower
        if not tensors:
            return rec, []
        scores = reference_scores(ordered, tensors, ex.tolerances)
        rec.errors = _errors(scores)
        rec.max_rel = {b: float(s["max_rel"]) for b, s in scores.items()}
        if scores:  # the tensor of the backend furthest off
            rec.tensor = max(scores.values(), key=lambda s: s["score"])["tensor"]
        rec.disputed = disputed(rec)
        if not rec.usable:
            return rec, []
        rec.nonfinite = nonfinite_odd(ordered, tensors)
        mark_culprits(findings, rec.errors)
        found = precision_findings(scores, self.factor, rec.backend, wide.dtype)
        if diagnose and found:
            layers = {}
            for f in found:
                try:
                    layers[f.detail.backend] = diagnose_precision(ex, case, wide, rec.backend, f)
                except Exception:  # noqa: BLE001 - a diagnosis that breaks leaves the finding as judged
                    log.exception("diagnosing precision of %s on case %s", f.detail.backend, case.id)
            rec.layers = layers
        return rec, found


#: the dtypes an op call's reference computes in float64 (complex ones stay: a complex128 input
#: is the case's own)
WIDENED_OP = ("float16", "bfloat16", "float32")


def computed_in_float32(pool_run: Any, spec: ModelSpec, weights: Weights, inputs: dict[str, np.ndarray],
                        answers: dict[str, np.ndarray]) -> list[str]:
    """The backends of ``answers`` (each one's float64 output of ``spec`` on ``inputs``) that
    computed it in float32 (TensorFlow's bilinear resize, whatever the policy): an answer of
    float32 numbers (:func:`audee.core.floats.float32_valued`) that a second run on inputs
    and weights nudged below float32's resolution (:func:`audee.core.floats.nudged`) leaves
    bit for bit as it was.  An exact computation on widened float32 values (a max, a shift
    by an integer, a normalization of one element, which is its beta) answers float32
    numbers too, but moves.  One more run, only where an answer is
    suspect; ``pool_run`` runs it (``Executor.pool_run``)."""
    suspect = [b for b, a in answers.items() if float32_valued(a)]
    if not suspect:
        return []
    moved = {name: list(nudged(dict(enumerate(arrays))).values()) for name, arrays in weights.items()}
    again = pool_run(spec, moved, weights_key(moved), nudged(inputs), labels=suspect)
    return [b for b in suspect if isinstance(again.get(b), dict) and again[b].get("logits") is not None
            and np.array_equal(np.asarray(again[b]["logits"]), answers[b], equal_nan=True)]


def widened_call(call: dict[str, Any], tensors: dict[str, np.ndarray]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """An op call (:meth:`audee.cases.opcase.OpCase.call`) with its float tensors widened to float64:
    their declared dtypes and their arrays (integers and booleans unchanged), and a float
    ``dtype`` argument too (``cumsum(x, dtype="float16")`` would round the reference back);
    ``exact``: computed in float64 where Keras would narrow it (``Backend.keeping_float64``)."""
    dtypes = {k: ("float64" if v in WIDENED_OP else v) for k, v in call.get("dtypes", {}).items()}
    kwargs = dict(call.get("kwargs", {}))
    if kwargs.get("dtype") in WIDENED_OP:
        kwargs["dtype"] = "float64"
    return {**call, "dtypes": dtypes, "kwargs": kwargs, "exact": True}, widened_inputs(tensors, "float64")


@dataclass
class OpReference:
    """An op call's float64 reference as computed: its record (errors not yet judged), its
    outputs and their Keras dtypes (empty when no candidate computed it)."""

    record: ReferenceRun
    outputs: list[np.ndarray] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)


def _float64_outputs(reply: Any) -> bool:
    """Whether an op reply's float outputs are all float64 (a call whose outputs are integers
    only counts too: its float inputs were widened)."""
    return isinstance(reply, dict) and all(d in ("float64", "complex128") or d not in _FLOATS
                                           for d in reply.get("dtypes", []))


_FLOATS = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")


def nonfinite_odd(outcomes: list[Outcome], tensors: dict[str, np.ndarray]) -> list[str] | None:
    """The backends of ``outcomes`` non-finite where their patterns differ and the reference
    ``tensors`` are finite (:func:`audee.oracle.pairs.nonfinite_by_float64` over the logits
    and the output together); None where it cannot tell."""
    ok = [o for o in outcomes if o.ok]
    arrays: dict[str, list[np.ndarray]] = {o.backend: [] for o in ok}
    ref: list[np.ndarray] = []
    for t in TENSORS:
        theirs = {o.backend: getattr(o, t) for o in ok}
        if t not in tensors or any(a is None or np.shape(a) != np.shape(tensors[t]) for a in theirs.values()):
            continue
        ref.append(np.asarray(tensors[t], dtype=np.float64).ravel())
        for b, a in theirs.items():
            arrays[b].append(np.asarray(a).astype(np.float64).ravel())
    if not ref:
        return None
    odd = nonfinite_by_float64({b: np.concatenate(a) for b, a in arrays.items()}, np.concatenate(ref))
    return list(odd) if odd else None


def disputed(rec: ReferenceRun) -> bool:
    """Whether a cross-check overrules the reference: some other float64 answer is out of
    float32's tolerance of it, and no backend but the reference's own (nor a dissenting
    one) is within tolerance of it in its own dtype.  A float64 run that carries the same
    bug as its float32 run (Keras-on-torch's AveragePooling2D and UpSampling2D, measured)
    cannot overrule a reference the other backends corroborate; an ill-conditioned case
    (every backend out, two float64 runs apart) is disputed."""
    dissent = {b for b, s in rec.checks.items() if s > 1.0}
    if not dissent:
        return False
    return not any(e <= 1.0 for b, e in rec.errors.items() if b != rec.backend and b not in dissent)


def _errors(scores: dict[str, dict[str, Any]]) -> dict[str, float]:
    return {b: float(s["score"]) for b, s in scores.items()}


def _why(reply: Any) -> str:
    """One line: why a candidate gave no reference."""
    if reply is None:
        return "not run"
    message = getattr(reply, "message", None) or getattr(reply, "kind", None) or str(reply)
    return " ".join(str(message).split())[:200]


__all__ = ["KERAS_BACKENDS", "OpReference", "Reference", "Wide", "candidates", "reduced", "reference_refs",
           "reference_workers", "widened_call"]
