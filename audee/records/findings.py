"""Each finding kind's detail, as a declared type.

A :class:`audee.cases.case.Finding` carries a *detail*: what its oracle measured, then what the
Executor's diagnosis and :func:`audee.oracle.odd.mark_odd` added.  Its shape depends on the
kind, so each kind has one model here (which kind has which: the finding kind table,
:data:`audee.cases.kinds.KINDS`), and code writes and reads a detail through its fields, never by key.

Why these rules:

* **same JSON as the dicts before them**: :meth:`Detail.to_json` dumps exactly the keys that
  were written (``exclude_unset``), in the order the writers add them (fields are declared
  in that order), so case files, repro scripts and bug signatures do not change.  A key
  added later (``ill_conditioned``, ``layer_distances``, ``odd`` ...) is absent until set;
  its default (None) is what a reader sees meanwhile.
* **old files load**: every field has a default, so a detail written before a field
  existed still validates; an unknown key is kept (``extra="allow"``) and dumped again.
* **plain values**: numpy scalars and arrays are turned into Python numbers and lists on
  construction (:func:`plain`); NaN and Inf floats stay floats (the case file is a pickle,
  and the JSON writers allow them).
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator


def plain(x: Any) -> Any:
    """``x`` with numpy scalars and arrays made Python numbers and lists, through dicts,
    lists and tuples (tuples stay tuples)."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain(v) for v in x]
    if isinstance(x, tuple):
        return tuple(plain(v) for v in x)
    return x


class Record(BaseModel):
    """A part of a detail: open to keys it does not declare (an old or newer file's), dumped
    with the keys that were written only."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _plain_values(cls, data: Any) -> Any:
        return plain(dict(data)) if isinstance(data, Mapping) else data

    def to_json(self) -> dict[str, Any]:
        """The JSON form: the keys written (on construction or by assignment), unknown ones included."""
        return plain(self.model_dump(exclude_unset=True))

    def written(self, name: str) -> bool:
        """Whether ``name`` was written (a declared field set, or an unknown key kept): a
        reader that lists what a detail holds, as ``key in dict`` did."""
        return name in self.model_fields_set or name in (self.model_extra or {})


class Detail(Record):
    """A finding's detail of a kind without a declared type (an unknown kind): every key kept."""


# ---- crashes and rejections ------------------------------------------------------------------------
class Phase:
    """Where in a test case a backend failed; crash oracles tell these apart."""

    BUILD = "build"
    CONVERT = "convert"
    WEIGHTS = "weights"
    RUN = "run"
    # the training phase (audee.train): the forward pass in training mode and the loss,
    # the gradients, the optimizer's update
    TRAIN = "train"
    GRADIENT = "gradient"
    UPDATE = "update"
    #: the phases that compute on the case's values (build, convert and weights see only its
    #: shapes): a failure there may be the answer to a value outside the contract (an id out
    #: of range), in a training step as in a forward pass
    ON_VALUES = frozenset({RUN, TRAIN, GRADIENT, UPDATE})
    #: every phase, in the order a case goes through them
    ALL = (BUILD, CONVERT, WEIGHTS, RUN, TRAIN, GRADIENT, UPDATE)


class BackendError(Record):
    """One backend's clean error (``traceback`` only for a divergent acceptance)."""

    phase: str | None = None
    message: str | None = None
    traceback: str | None = None


class HardCrashDetail(Detail):
    """``hard_crash``: a signal, abort, exit or timeout on one backend."""

    how: str | None = None            # the failure kind: signal, exit, timeout
    phase: str | None = None          # build, convert, weights, run
    message: str | None = None
    log_tail: str | None = None       # the worker's last log lines
    odd: list[str] | None = None      # audee.oracle.odd: the backends the float64 reference or the majority names
    odd_rule: str | None = None       # ... and why


class DivergentAcceptanceDetail(Detail):
    """``divergent_acceptance``: some backends ran the case, the others raised a clean error."""

    accepted: list[str] = []
    errors: dict[str, BackendError] = {}
    odd: list[str] | None = None
    odd_rule: str | None = None
    #: backend -> layer name -> what its program shows of how it computes the layer, the
    #: rejecting ones' included (a converted graph a runtime refuses at run; NanDetail.program)
    program: dict[str, dict[str, list[str]]] = {}


class ConsistentRejectionDetail(Detail):
    """``consistent_rejection``: every backend raised a clean error (expected, no failure)."""

    errors: dict[str, BackendError] = {}
    odd: list[str] | None = None
    odd_rule: str | None = None


# ---- non-finite values -----------------------------------------------------------------------------
class NanExample(Record):
    """An element where two backends' non-finite patterns differ: the array (``example``
    only), its index, and each backend's code there (``finite``, ``nan``, ``+inf``,
    ``-inf``) under the backend's label (kept as undeclared keys: :meth:`codes`)."""

    array: str | None = None
    index: list[int] = []

    def codes(self) -> dict[str, Any]:
        """Backend label -> its code at :attr:`index`."""
        return dict(self.model_extra or {})


class NanPattern(Record):
    """One backend pair's pattern difference (``audee.oracle.nan.pair_pattern``), refined
    per layer (``diagnose_patterns``) and judged by the conditioning rule (``execute``)."""

    first_layer: str | None = None
    first_layer_from: str | None = None   # layer-lists | layers | output
    elements: int = 0
    example: NanExample | None = None
    arrays: list[str] = []
    rows: list[int] | None = None         # the batch rows where the output arrays' patterns differ (older records: None)
    layer_elements: int | None = None
    layer_example: NanExample | None = None
    cleared: str | None = None            # audee.oracle.nan.CLEARED: why it is no evidence
    own_layer: str | None = None          # the layer where it stands
    overflow_boundary: bool = False
    overflow_evidence: str | None = None  # float64 | scale | scaled (the layer scaled into range)
    #: where it stands: side -> the float64 results of its layer it is finite with where the
    #: pair differs and they fit the dtype (audee.oracle.nan.float64_nan_within); None: no evidence
    float64_within: dict[str, list[str]] | None = None
    #: side -> why its per-layer diagnosis never came back (``{"jax": "worker exited with code 9: ..."}``):
    #: never judged, so set aside by the odd rule as a cleared pair is, and never a difference that stood
    lost: dict[str, str] | None = None


class NanDetail(Detail):
    """``nan`` and ``nan_propagated`` (:func:`audee.oracle.nan.nan_findings`)."""

    first_layer: dict[str, str] = {}          # backend -> its first non-finite layer
    layers: dict[str, list[str]] = {}         # backend -> its non-finite layers
    strong: bool = False
    finite_backends: list[str] = []
    input_nonfinite: bool = False
    input_overflow_scale: bool = False
    #: the batch rows whose input holds a NaN/Inf (or a value its reader's cast makes one);
    #: None where unknown (older records) or none
    input_nonfinite_rows: list[int] | None = None
    patterns: dict[str, NanPattern] = {}      # "a|b" -> how the pair's patterns differ
    #: backend -> {"nan", "+inf", "-inf"} in its output: every backend that ran (records made before
    #: kept only the non-finite ones: a backend of the finding without a count is finite)
    counts: dict[str, dict[str, int]] = {}
    ran: int = 2                              # backends that ran
    #: backend -> layer name -> what its program shows of how it computes the layer
    #: (audee.backends.info.PROGRAM_FACTS; a converter's graph, where it has any)
    program: dict[str, dict[str, list[str]]] = {}
    agreed: bool = False
    overflow_boundary: bool = False
    odd: list[str] | None = None
    odd_rule: str | None = None

    def standing(self) -> list[NanPattern]:
        """The pairs' patterns no rule cleared (every pair's where all were cleared): what the
        finding is judged on."""
        return [p for p in self.patterns.values() if p.cleared is None] or list(self.patterns.values())

    def departure(self, order: Sequence[str], backends: Iterable[str]) -> str | None:
        """The layer the finding is pinned on, which its signature blames and its repro script
        runs alone: the earliest layer (in ``order``, the model's) where a standing pair's
        patterns first differ; a pair the conditioning rule cleared (one element at the
        overflow boundary) does not place it while another stands.  Without a pair's layer,
        the first of ``backends`` to go non-finite, where it did (a NaN the input carried
        passes layers alike on every backend, so a backend's first non-finite layer need
        not be where they part: TensorFlow finite at a layer where the others hold NaN)."""
        order = list(order)
        standing = self.standing()
        differ = [p.first_layer for p in standing if isinstance(p.first_layer, str)]
        if differ:
            return min(differ, key=lambda n: order.index(n) if n in order else len(order))
        return next((self.first_layer[b] for b in backends if b in self.first_layer), None)


# ---- label flips and deviations --------------------------------------------------------------------
class InconsistencyDetail(Detail):
    """``inconsistency`` (:func:`audee.oracle.inconsistency.inconsistency_findings`): labels
    differ between a pair; ``shape_mismatch`` or ``labels``; ``layer_distances`` after the
    diagnosis."""

    pair: str | None = None
    distance: float | None = None
    inputs: list[int] | None = None           # flipped rows (at most 64); None: not recorded
    n_flips: int | None = None
    ties: int = 0
    input_distance: dict[str, float] = {}     # row -> its distance
    shape_mismatch: dict[str, list[int]] | None = None
    labels: dict[str, list[int]] | None = None
    layer_distances: dict[str, float] | None = None
    odd: list[str] | None = None
    odd_rule: str | None = None
    culprit: list[str] | None = None          # the float64 reference's verdict (audee.oracle.precision.culprit)
    reference_errors: dict[str, float] | None = None  # the pair's errors against the reference
    #: backend -> layer name -> what its program shows of how it computes the layer (NanDetail.program)
    program: dict[str, dict[str, list[str]]] = {}

    @property
    def flips(self) -> int:
        """How many rows flipped (``n_flips``; the recorded rows where an old detail lacks it)."""
        return self.n_flips if self.n_flips is not None else len(self.inputs or [])


class ToleranceDetail(Record):
    """The tolerance a comparison was judged with."""

    rtol: float | None = None
    atol: float | None = None


class OwnScore(Record):
    """A layer judged on its own input: its deviation, and (when out of tolerance) how far
    rounding noise moves it (``self_score``)."""

    score: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    self_score: float | None = None


class DeviationDetail(Detail):
    """``deviation`` and ``deviation_accumulated`` (:mod:`audee.oracle.deviation`), with the
    per-layer judgement of ``audee.engine.execute`` and, for a reduced-precision pair, the label
    flips folded into it (``label_flips``, ``flip_inputs``)."""

    pair: str | None = None
    tensor: str | None = None                 # logits | output
    score: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    n_out: int | None = None
    n: int | None = None
    rows: list[int] | None = None             # rows out of tolerance, worst first
    dtype: str | None = None                  # the precision judged as
    tolerance: ToleranceDetail | None = None
    first_layer: str | None = None
    own_layers: list[str] = []
    own: dict[str, OwnScore] = {}
    ill_conditioned: list[str] | None = None
    label_flips: int | None = None
    flip_inputs: list[int] | None = None
    odd: list[str] | None = None
    odd_rule: str | None = None
    culprit: list[str] | None = None          # the float64 reference's verdict (audee.oracle.precision.culprit)
    reference_errors: dict[str, float] | None = None  # the pair's errors against the reference
    #: backend -> layer name -> what its program shows of how it computes the layer (NanDetail.program)
    program: dict[str, dict[str, list[str]]] = {}
    #: for a blamed layer computing in a reduced-precision dtype (float16, bfloat16): each backend of the pair -> the
    #: backends whose float64 recomputation of the layer its output is within tolerance of
    #: (audee.engine.execute.Executor._float64_scores); None where not recomputed
    float64_within: dict[str, list[str]] | None = None
    #: on rows of subnormal or tiny values: the backends of the pair whose values a backend that keeps
    #: subnormals reproduces once it flushes them to zero (audee.engine.flush_probe); None where not probed
    flush_like: list[str] | None = None


# ---- the training phase (audee/oracle/train.py) ---------------------------------------------------
class TrainDeviationDetail(Detail):
    """``train_deviation`` and ``train_deviation_accumulated``: one backend pair's training
    step out of tolerance (:mod:`audee.oracle.train`), with the per-layer judgement of
    :mod:`audee.engine.train`.  ``quantity``: what deviates first, in the order the step
    computes it: ``output`` (the forward pass in training mode), ``loss``, ``gradient``,
    ``weights`` (after the optimizer's steps).  Per-layer scores are kept for the layers
    out of tolerance only.  ``layer``: the layer a signature pins (the first that deviates
    on its own input, else ``first_layer``)."""

    pair: str | None = None
    quantity: str | None = None               # output | loss | gradient | weights
    score: float | None = None                # the largest normalized error over every quantity
    max_abs: float | None = None              # ... of the quantity named
    max_rel: float | None = None
    step: int | None = None                   # the first step whose loss is out of tolerance
    dtype: str | None = None
    tolerance: ToleranceDetail | None = None
    scores: dict[str, float] = {}             # quantity -> its largest score (output, loss, gradient, weights)
    losses: dict[str, list[float]] = {}       # backend -> the loss of every step
    gradients: dict[str, float] = {}          # layer -> its weights' gradient score (out of tolerance)
    input_gradients: dict[str, float] = {}    # model input -> its gradient score (out of tolerance)
    weights: dict[str, float] = {}            # layer -> its updated weights' score (out of tolerance)
    first_layer: str | None = None            # the gradient's first (backward) or the output's first layer out
    forward_first_layer: str | None = None    # the first layer whose training-mode output is out of tolerance
    own_layers: list[str] = []
    own: dict[str, OwnScore] = {}
    ill_conditioned: list[str] | None = None
    loss_own: bool | None = None              # the loss alone (its value or its gradient) deviates
    layer: str | None = None
    setup: dict[str, Any] = {}                # audee.train.setup.TrainSetup
    odd: list[str] | None = None
    odd_rule: str | None = None


class TrainNanDetail(Detail):
    """``train_nan``: NaN/Inf in the training step's output, loss, gradients or updated
    weights on some backends and not on others (the same quantities non-finite on every
    backend are no finding).  Quantities are named ``output``, ``loss@<step>``,
    ``grad:<layer>/<k>``, ``input_grad:<input>``, ``weights:<layer>/<k>``."""

    nonfinite: dict[str, list[str]] = {}      # backend -> its non-finite quantities (the first 32)
    first: dict[str, str] = {}                # backend -> its first non-finite quantity
    differ: list[str] = []                    # quantities non-finite on some backends only (the first 32)
    finite_backends: list[str] = []
    strong: bool = False                      # some backend is finite everywhere
    input_nonfinite: bool = False
    forward_first_layer: dict[str, str] = {}  # backend -> its first non-finite layer in training mode
    backward_layer: str | None = None         # the layer whose backward pass alone makes the non-finite gradient
    backward: dict[str, str] = {}             # each layer judged alone on the backward walk -> blamed, or why not
    layer: str | None = None
    losses: dict[str, list[float]] = {}
    setup: dict[str, Any] = {}
    odd: list[str] | None = None
    odd_rule: str | None = None


# ---- equivalent models (audee/oracle/equivalence.py) -------------------------------------------------
class EquivalenceDetail(Detail):
    """``equivalence`` and ``equivalence_accumulated`` (:mod:`audee.oracle.equivalence`): one
    backend's outputs of a test case and of its equivalent model (a rule of
    :mod:`audee.equivalence.rules`) differ: beyond tolerance (``values``), in their
    non-finite patterns (``nonfinite``), in shape (``shape``), or the backend ran the case
    and refused or died on its equivalent (``rejected``, ``crashed``).  The per-layer
    judgement of ``audee.equivalence.check`` adds ``first_layer``, the rewritten layers
    judged alone with and without the rule (``own``) and the layer blamed (``layer``)."""

    rule: str | None = None
    backend: str | None = None
    reason: str | None = None                 # values | nonfinite | shape | rejected | crashed | original_rejected
    tensor: str | None = None                 # logits | output
    score: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    n_out: int | None = None
    n: int | None = None
    rows: list[int] | None = None             # original rows out of tolerance (or whose patterns differ)
    dtype: str | None = None
    tolerance: ToleranceDetail | None = None
    pattern: dict[str, Any] | None = None     # nonfinite: audee.oracle.nan.compare_codes of the tensor
    shapes: dict[str, list[int]] | None = None  # shape: the original's and the rewrite's
    phase: str | None = None                  # rejected, crashed: the rewrite's failure; original_rejected: the original's
    message: str | None = None
    rewritten: list[str] = []                 # the original layers the rule changed (at most 32)
    first_layer: str | None = None            # the first mapped layer out of tolerance (or whose patterns differ)
    own: dict[str, OwnScore] = {}             # rewritten layers judged alone, with and without the rule
    layer: str | None = None                  # the layer that differs alone and well-conditioned: the one blamed
    ill_conditioned: list[str] | None = None
    cleared: str | None = None                # equivalence_accumulated: why (accumulated, ill_conditioned, overflow)
    odd: list[str] | None = None
    odd_rule: str | None = None


# ---- precision against a float64 reference (audee/oracle/precision.py) -------------------------------
class PrecisionDetail(Detail):
    """``precision`` and ``precision_accumulated``: one backend's error against the float64
    reference (:mod:`audee.reference`) is out of its dtype's tolerance and
    :data:`audee.settings.PRECISION_FACTOR` times the best backend's; ``precision_accumulated``
    when no layer judged alone loses accuracy on its own input (or only ill-conditioned ones do).  The per-layer judgement of ``audee.reference.diagnose`` adds each layer's
    error along the whole model (``layer_errors``), ``first_layer``, the layers judged on the
    reference's input (``own``) and the layer blamed (``layer``)."""

    backend: str | None = None
    reference: str | None = None              # the backend that computed the reference
    reference_dtype: str | None = None        # float64
    tensor: str | None = None                 # logits | output
    score: float | None = None                # the backend's error against the reference (> 1: out of tolerance)
    max_abs: float | None = None
    max_rel: float | None = None
    n_out: int | None = None
    n: int | None = None
    rows: list[int] | None = None             # rows out of tolerance, worst first
    dtype: str | None = None                  # the precision judged as (the backend's)
    tolerance: ToleranceDetail | None = None
    best: str | None = None                   # the most accurate other backend
    best_score: float | None = None
    factor: float | None = None               # score / best_score
    errors: dict[str, float] = {}             # every backend's error against the reference
    layer_errors: dict[str, float] | None = None  # layer -> the backend's error there, along the whole model
    first_layer: str | None = None            # the first layer out of tolerance along the whole model
    own: dict[str, OwnScore] = {}             # layers fed the reference's input, against the reference
    layer: str | None = None                  # the first layer out of tolerance on the reference's input: blamed
    ill_conditioned: list[str] | None = None
    odd: list[str] | None = None
    odd_rule: str | None = None


# ---- one backend under two releases (audee/oracle/regression.py) -----------------------------------
class RegressionDetail(Detail):
    """``regression``: one backend in two environments (a version pair, ``torch`` and
    ``torch@prev``) computes a case differently.  The older release is the reference, the
    newer side is judged (``newer``, ``odd``); where the reported versions do not order the
    two (``newer`` None) the finding names both.  ``seen``: the kinds the oracles saw between
    the two (``deviation``, ``inconsistency``, ``nan``, ``divergent_acceptance``, ...), each
    finding's detail in ``evidence``; the numbers and the layer of the first (the most telling
    by the main-failure order) are copied up."""

    pair: str | None = None                   # "a|b", sorted
    older: str | None = None
    newer: str | None = None
    versions: dict[str, dict[str, str]] = {}  # each side's label -> the versions its worker reported
    changed: dict[str, list[str]] = {}        # package -> [older's, newer's] (or the pair's order, unordered)
    component: str | None = None              # "keras 3.15.1 vs 3.14.1 on torch"
    seen: list[str] = []                      # the kinds the difference was seen as, most telling first
    tensor: str | None = None                 # the first's tensor or output (logits, output, out0, grad:x, ...)
    score: float | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    rows: list[int] | None = None
    first_layer: str | None = None
    layer: str | None = None                  # the layer it pins (deviating on its own input, else the first)
    message: str | None = None                # a side's error, where one raised and the other did not
    phase: str | None = None                  # ... and its phase
    raised: str | None = None                 # ... and that side's label
    input_nonfinite: bool = False             # NaN/Inf in the input the pair computed differently on
    evidence: list[dict[str, Any]] = []       # [{"kind": ..., "detail": ...}] of every finding seen
    odd: list[str] | None = None
    odd_rule: str | None = None


class DeclaredOutputDetail(Detail):
    """``declared_output`` (:mod:`audee.oracle.declared`): a layer's computed output differs in
    shape or dtype from the output Keras declares for it in the functional model (the symbolic
    tensor its ``compute_output_spec`` gives, batch axis open).  Every other layer is built from
    that declaration, so a wrong one breaks the model after it; where every Keras backend
    computes alike and against the declaration, the layer's own declaration is wrong, on all of
    them, which no comparison between backends can see.  ``layer``: the first such layer in
    model order; ``declared``: its declared shape (None: any length) and dtype; ``computed``:
    each mismatching backend's shape and dtype; ``declaring``: the backends that ran the model
    Keras built and so could be compared with its declarations."""

    layer: str | None = None
    declared: list[Any] | None = None          # [shape (None: any length), dtype]
    computed: dict[str, list[Any]] = {}        # backend -> [shape, dtype]
    declaring: list[str] = []
    odd: list[str] | None = None
    odd_rule: str | None = None


#: what a finding's detail may be
AnyDetail = (Detail | HardCrashDetail | DivergentAcceptanceDetail | ConsistentRejectionDetail | NanDetail
             | InconsistencyDetail | DeviationDetail | TrainDeviationDetail | TrainNanDetail | EquivalenceDetail
             | PrecisionDetail | RegressionDetail | DeclaredOutputDetail)


__all__ = ["AnyDetail", "BackendError", "DeclaredOutputDetail", "Detail", "DeviationDetail", "DivergentAcceptanceDetail",
           "ConsistentRejectionDetail", "HardCrashDetail", "InconsistencyDetail", "NanDetail", "NanExample",
           "NanPattern", "OwnScore", "PrecisionDetail", "Record", "RegressionDetail", "ToleranceDetail", "plain",
           "TrainDeviationDetail", "TrainNanDetail"]
