"""The settings models: one definition of every setting, its type, range and default.

Shared defaults are module constants so oracles, search, localization, the CLI and
campaign configs all read the same value.

Every user-facing setting lives in one pydantic model here (``FuzzSettings``,
``SearchSettings``, ``LocalizeSettings``, ``CampaignSettings``): its type, its range
(``ge``/``gt``/``le``), its default (defined once) and its description, which is also the
``--help`` text of the command-line flag derived from it (:func:`add_model_options`).
Unknown keys are refused (``extra='forbid'``).  :func:`validate_settings` validates a
mapping against a model and turns a pydantic error into audee's one error format,
``file: field.path: message`` (a :class:`ConfigError`; exit code 2 on the command line).

A run's settings (:class:`FuzzSettings`) are one frozen object in sections, each the
settings one part of audee reads, so a part takes its section and nothing else:

- ``run`` (:class:`RunSettings`): variants, rng, batch, max_redraws, timeout, threads, phase
  (the fuzz loop, the levels, the backend pool; the backends and ``--out`` are
  ``audee.fuzz.FuzzConfig``'s own);
- ``judging`` (:class:`JudgingSettings`): tie_margin, the deviation tolerances as one
  :class:`ToleranceSettings` (float32/float16/bfloat16/tf32 rtol and atol), precision_factor;
- ``network`` (:class:`NetworkSettings`): layer_rate, max_layers, operators;
- ``api`` (:class:`ApiSettings`): invalid_prob (the network and op levels read it too),
  dtypes, pack, call_training, call_mask, call_causal, refusal_memo;
- ``train`` (:class:`TrainSettings`): steps, losses, optimizers, learning_rate;
- ``precision`` (:class:`PrecisionSettings`): reference, reference_backend (the float64
  reference; its factor is judging's);
- ``equivalents`` (:class:`EquivalenceSettings`): equivalence (the rules);
- ``special`` (:class:`SpecialSettings`): special_inputs.

The op level reads only settings the sections above hold (variants, invalid_prob,
special_inputs), so it has no section of its own; a search plan is :class:`SearchPlan`.
Flags, campaign keys and ``config.json`` name every setting flat, as before the sections
(``--tie-margin``, ``float32_rtol:``): a flat key is put into its section
(:data:`FLAT_PATHS`), an error names the flat key, ``config.json`` is written flat
(:meth:`FuzzSettings.flat`), so a run directory of any audee resumes; every setting also
reads flat (``cfg.tie_margin``, read-only).  Named profiles (:data:`PROFILES`: ``smoke``,
``paper``, ``ci``) are sets of flat settings, chosen by ``--profile`` or ``profile:``; a
setting given explicitly wins.
"""
from __future__ import annotations

import argparse
import math
import re
import types
import typing
from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from audee.core.errors import ConfigError
from audee.train.setup import LOSSES, OPTIMIZERS

TIE_MARGIN = 1e-5       # label flips whose top-two outputs are closer than this are ties
TIMEOUT_S = 120.0       # seconds a backend may take on one request before it counts as hung
# the longest request limit: a week; the OS refuses a wait of more than 2**31 ms (24.8 days),
# so a unit's `timeout: 1000000000` was an OverflowError traceback hours into a campaign
MAX_TIMEOUT_S = 7 * 24 * 3600.0
MAX_VARIANTS = 1_000_000    # network-level variants per run (ids are listed up front)
MAX_PACK = 256              # API-level cases per build (audee/engine/packed.py)
MAX_UNITS = 100_000         # units per campaign (all are expanded when it loads)
# the search's relative Cauchy scale with the NaN fitness when none is given: with 0 (additive
# noise only) values grow linearly: 60 s GA searches found NaN on 7 of 14 network variants
# of the seven seeds, with 0.5 on 10 of 14 (experiments/nan_defaults.py, docs/search.md)
NAN_RELATIVE_SCALE = 0.5
# the deviation oracle's default tolerances per dtype, (rtol, atol): two backends' values a
# and b deviate where |a - b| > atol + rtol * s, s the row's largest |value| on both sides.
# Why these values: docs/oracles.md and audee/oracle/deviation.py (the one owner of the rule)
# "tf32": float32 values from a GPU backend in TF32 mode (torch@cuda:tf32), float16's precision
TOLERANCES = {"float32": (1e-3, 1e-5), "float16": (1e-2, 1e-3), "bfloat16": (5e-2, 1e-2), "tf32": (1e-2, 1e-3)}
# API-level fuzzing (audee fuzz --api): the model dtype policies a case draws from, and how often
DTYPE_WEIGHTS = {"float32": 0.7, "float16": 0.1, "bfloat16": 0.1, "mixed_float16": 0.1}
# network-level mutation operators and their default weights (audee/mutation/operators.py,
# docs/mutation.md): the paper's parameter redraw most often, the structural operators of
# LEMON and Muffin besides, so that every configured API can enter a seed's variants
OPERATORS = ("redraw", "insert", "replace", "remove", "activation", "duplicate")
OPERATOR_WEIGHTS = "redraw:3,insert:1,replace:1,remove:0.5,activation:1,duplicate:0.5"
# the training phase (audee/train/): the losses and optimizers a case draws from, by default
# every one the training step knows, alike (names: audee.train.setup.LOSSES, OPTIMIZERS)
TRAIN_LOSSES = ",".join(LOSSES)
TRAIN_OPTIMIZERS = ",".join(OPTIMIZERS)
# the equivalence oracle's rules (audee/equivalence/rules.py: EAGLE's equivalent models; one
# rewrite per rule runs beside each test case on every backend; docs/oracles.md, "Equivalent models")
EQUIVALENCE_RULES = ("padding", "rank", "depthwise", "separable", "dilation", "channels", "dense_conv",
                     "dense_einsum", "activation", "batchnorm", "pad_crop", "rnn_unroll", "float64",
                     "batch_permuted", "batch_single", "batch_empty", "roundtrip_keras", "roundtrip_config", "roundtrip_json",
                     "go_backwards", "formula", "axis", "image_channels")
# the rules every model-level run judges unless told otherwise: those that cost little (one more
# model only where a case has the layer they rewrite; a batch of zero rows, which holds no values)
# and see bugs no cross-backend oracle can, measured without a false positive
# (experiments/results/equivalence_axis.md, experiments/results/batch_empty.md)
DEFAULT_EQUIVALENCE = "axis,image_channels,batch_empty"

# the precision oracle (audee/oracle/precision.py): a backend out of tolerance against the
# float64 reference is a `precision` finding when its error is also this many times the best
# backend's on the case (equally wrong backends are an ill-conditioned case, not one backend's bug);
# the same order of magnitude the conditioning rule asks of a layer (oracle/deviation.CONDITIONING_FACTOR)
PRECISION_FACTOR = 10.0

Level = Literal["input", "weight", "input-weight"]
Fitness = Literal["inconsistency", "nan", "relative-inconsistency", "precision"]
SearchKind = Literal["ga", "random"]

M = TypeVar("M", bound=BaseModel)


class FieldError(ValueError):
    """A cross-field check that blames one field (reported under that field's name)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def parse_duration(text: Any) -> float:
    """'300', '300s', '5m', '1.5h' (or a number of seconds) -> seconds; ValueError otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", str(text)) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"expected a duration like 300s, 5m or 1h, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def check_backend_name(name: str) -> str:
    """A backend as named in a campaign or on the command line: a built-in name or a plugin
    ``package.module:ClassName``, optionally in an environment (``@prev``: its name's syntax
    here, its declaration the campaign's ``envs:``) and ``@cpu``/``@cuda``/``@cuda:N``, a GPU
    with a precision mode (``@cuda:tf32``; :func:`audee.backends.registry.parse_placement`)."""
    from audee.backends.registry import BUILTIN, check_env_name, parse_placement, split_label

    base, env, device = split_label(name.strip())
    if env is not None:
        try:
            check_env_name(env)
        except ValueError:
            raise ValueError(f"unknown device or environment {env[:40]!r} in {name.strip()[:80]!r} (devices: cpu, "
                             "cuda, cuda:N; an environment: a name envs: declares)") from None
    if device:
        parse_placement(device)
    if base not in BUILTIN and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", base):
        raise ValueError(f"unknown backend {base!r}: use one of {', '.join(BUILTIN)} "
                         "or a plugin as package.module:ClassName")
    return name.strip()


BackendName = Annotated[str, AfterValidator(check_backend_name)]
Name = Annotated[str, Field(min_length=1)]
Duration = Annotated[float, Field(gt=0)]


def _flag(name: str, flag: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"flag": flag or "--" + name.replace("_", "-"), **extra}


class _Settings(BaseModel):
    # strict: no silent "3" -> 3 or true -> 1; an int is still a valid float
    model_config = ConfigDict(extra="forbid", strict=True)

    def given(self) -> dict[str, Any]:
        """The settings set explicitly (not filled in from defaults)."""
        return {k: getattr(self, k) for k in self.model_fields_set}

    @classmethod
    def flat_fields(cls) -> dict[str, Any]:
        """Every setting by the name a flag or a flat key gives it: a section's fields
        (:class:`FuzzSettings`) in place of the section."""
        out: dict[str, Any] = {}
        for name, f in cls.model_fields.items():
            sub = _section_of(cls, name)
            out.update(sub.flat_fields() if sub is not None else {name: f})
        return out


def parse_dtypes(text: str) -> dict[str, float]:
    """'float32:0.7,float16' -> {policy: weight} (weight 1 where none is given); ValueError
    naming the bad item otherwise."""
    return parse_weights(text, tuple(DTYPE_WEIGHTS), "dtype policy")


def parse_operators(text: str) -> dict[str, float]:
    """'redraw:3,insert' -> {operator: weight} (weight 1 where none is given), operators of
    :data:`OPERATORS`; ValueError naming the bad item otherwise."""
    return parse_weights(text, OPERATORS, "mutation operator")


def parse_rules(text: str) -> tuple[str, ...]:
    """'padding,channels' -> the rules named (``all``: every one of :data:`EQUIVALENCE_RULES`;
    ``none`` or empty: none), in their listed order; ValueError naming an unknown rule."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names in ([], ["none"]):
        return ()
    if names == ["all"]:
        return EQUIVALENCE_RULES
    for name in names:
        if name not in EQUIVALENCE_RULES:
            raise ValueError(f"unknown equivalence rule {name!r} (all, none, or some of "
                             f"{', '.join(EQUIVALENCE_RULES)})")
    return tuple(r for r in EQUIVALENCE_RULES if r in names)


def parse_weights(text: str, known: tuple[str, ...], what: str) -> dict[str, float]:
    """'a:0.7,b' -> {name: weight} over ``known`` names (weight 1 where none is given)."""
    out: dict[str, float] = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, _, weight = item.partition(":")
        if name not in known:
            raise ValueError(f"unknown {what} {name!r} (one of {', '.join(known)})")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise ValueError(f"expected a number as the weight of {name}, got {weight!r}") from None
        if not (w >= 0 and w < float("inf")):
            raise ValueError(f"the weight of {name} must be >= 0, got {weight!r}")
        out[name] = w
    if not out or sum(out.values()) <= 0:
        raise ValueError(f"needs at least one {what} with a positive weight, got {text!r}")
    if not math.isfinite(sum(out.values())):  # the draw divides by the sum: inf would make every share NaN
        raise ValueError(f"the weights sum to more than a float holds, got {text!r}: use smaller weights")
    return out


def _unwrap(tp: Any) -> Any:
    """The model (or None) a field annotation holds, through Optional/list/Annotated."""
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType, list, dict):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            tp = args[-1] if args else None
        else:
            return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


# ---- fuzz (a run of `audee fuzz`, a campaign unit): its settings in sections ------------------------
class _Section(_Settings):
    """One section of :class:`FuzzSettings`: the settings one part of audee reads, together."""

    model_config = ConfigDict(frozen=True)


class RunSettings(_Section):
    """What a run is: how many cases, from which random stream, on how many inputs, how long
    and on how many threads a backend may work, and which phase (inference or training) runs.
    Read by the fuzz loop (``audee/fuzz.py``), the levels and the backend pool."""

    variants: int = Field(50, ge=0, le=MAX_VARIANTS,
                          description="number of network-level variants (on the command line: 0 when --level "
                                      "is given and --variants is not)")
    rng: int = Field(0, ge=0, description="random seed: the same value gives the same variants")
    batch: int = Field(32, ge=1, le=1_000_000, description="seed inputs per test case")
    max_redraws: int = Field(5, ge=0, description="redraws of a variant no backend can build")
    timeout: float = Field(TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S,
                           description="seconds a backend may take on one request before it counts as hung")
    threads: int | None = Field(None, ge=0, json_schema_extra=_flag("threads", "--threads-per-backend"),
                                description="CPU threads each backend may use (default: the cores shared out among "
                                            "the backends, since all of them compute at once; 0: each framework's "
                                            "own default)")
    phase: Literal["inference", "train"] = Field(
        "inference", description="inference: every case runs forward (training=False); train: every case runs a "
                                 "training step on each backend that trains (the Keras backends and their plugins; "
                                 "converters are skipped): the forward pass in training mode, a loss, the gradients "
                                 "and --steps optimizer updates, judged on loss, gradients and updated weights "
                                 "(docs/oracles.md, 'The training phase')")

class ToleranceSettings(_Section):
    """The deviation oracle's tolerances per dtype and compute mode, one object: out of
    tolerance where |a - b| > atol + rtol * (the row's largest |value| on both backends)
    (``audee/oracle/deviation.py``, the one owner of the rule, reads :meth:`table`)."""

    float32_rtol: float = Field(TOLERANCES["float32"][0], ge=0,
                                description="deviation oracle: relative tolerance for float32 outputs, a share of "
                                            "the row's largest |value|")
    float32_atol: float = Field(TOLERANCES["float32"][1], ge=0,
                                description="deviation oracle: absolute tolerance for float32 outputs")
    float16_rtol: float = Field(TOLERANCES["float16"][0], ge=0,
                                description="deviation oracle: relative tolerance for float16 outputs")
    float16_atol: float = Field(TOLERANCES["float16"][1], ge=0,
                                description="deviation oracle: absolute tolerance for float16 outputs")
    bfloat16_rtol: float = Field(TOLERANCES["bfloat16"][0], ge=0,
                                 description="deviation oracle: relative tolerance for bfloat16 outputs")
    bfloat16_atol: float = Field(TOLERANCES["bfloat16"][1], ge=0,
                                 description="deviation oracle: absolute tolerance for bfloat16 outputs")
    tf32_rtol: float = Field(TOLERANCES["tf32"][0], ge=0,
                             description="deviation oracle: relative tolerance for float32 outputs of a pair with a "
                                         "GPU backend in TF32 mode")
    tf32_atol: float = Field(TOLERANCES["tf32"][1], ge=0,
                             description="deviation oracle: absolute tolerance for float32 outputs of a pair with a "
                                         "GPU backend in TF32 mode")
    def table(self) -> dict[str, dict[str, float]]:
        """``{dtype: {"rtol": .., "atol": ..}}``, as case files record them
        (:class:`audee.oracle.deviation.Tolerances` reads this form)."""
        return {dt: {"rtol": float(getattr(self, f"{dt}_rtol")), "atol": float(getattr(self, f"{dt}_atol"))}
                for dt in TOLERANCES}


class JudgingSettings(_Section):
    """How two backends' outputs are judged: the tie margin of label flips, the deviation
    tolerances and the precision oracle's factor.  Every level's runner and its case files
    read them from here (``audee/levels/base.judging``, ``audee/reference/run.Reference``)."""

    tie_margin: float = Field(TIE_MARGIN, ge=0,
                              description="label flips where a backend's top-two outputs are closer than this "
                                          "count as floating-point ties, not inconsistencies (0: the paper's plain "
                                          "definition)")
    tolerances: ToleranceSettings = Field(default_factory=ToleranceSettings,
                                          description="the deviation oracle's tolerances per dtype")
    precision_factor: float = Field(
        PRECISION_FACTOR, ge=1, description="precision oracle: a backend out of tolerance against the reference is "
                                            "a precision finding when its error is also this many times the best "
                                            "backend's on the case (the same factor as the conditioning rule's: "
                                            "docs/oracles.md)")

class NetworkSettings(_Section):
    """The network level's mutation of a seed (``audee/levels/network``, ``audee/mutation``)."""

    layer_rate: float = Field(0.5, ge=0, le=1, description="probability a layer's parameters are redrawn")
    max_layers: int = Field(3, ge=0, description="at most this many layers change per variant (0: no cap)")
    operators: str = Field(OPERATOR_WEIGHTS,
                           description="network-level mutation operators, each with an optional weight: redraw "
                                       "(the paper's parameter redraw), insert, replace, remove, activation, "
                                       "duplicate; e.g. redraw alone, or redraw:3,insert:1 (docs/mutation.md)")
    @field_validator("operators")
    @classmethod
    def _operators(cls, v: str) -> str:
        parse_operators(v)
        return v


class ApiSettings(_Section):
    """The API level's cases (``audee/levels/api``, ``audee/mutation/apilevel.py``,
    ``audee/engine/packed.py``); ``invalid_prob`` is read by the network and op levels too."""

    invalid_prob: float = Field(0.1, ge=0, le=1, description="probability a variant tests one crafty invalid value")
    dtypes: str = Field(",".join(f"{k}:{v:g}" for k, v in DTYPE_WEIGHTS.items()),
                        description="API-level cases: model dtype policies to draw from, each with an optional "
                                    "weight, e.g. float32,float16 or float32:0.7,bfloat16:0.3 (of "
                                    + ", ".join(DTYPE_WEIGHTS) + ")")
    pack: int = Field(1, ge=1, le=MAX_PACK,
                      description="API-level cases per build: K cases side by side in one model, built, "
                                  "converted and compiled once, each judged on its own; a failing case is "
                                  "found by bisection and confirmed alone, rows and case files as unpacked. "
                                  "1 (each case alone) is the default: measured on CPU, a one-layer model "
                                  "costs about as much to convert and compile inside a pack as alone, and "
                                  "the third of cases that fail somewhere cost more packed (bisection, "
                                  "confirmation): packs of 4-32 ran at 0.44-0.97x the cases/s of K=1 "
                                  "(experiments/bench_pack.py, experiments/results/bench_pack.md)")
    call_training: float = Field(0.0, ge=0, le=1,
                                 description="API-level cases: probability the layer is called with a drawn "
                                             "training flag (true/false, whatever mode the model runs in) where "
                                             "its call takes one; a layer random in training is judged then on "
                                             "acceptance and declared outputs only, its values left out "
                                             "(docs/mutation.md)")
    call_mask: float = Field(0.3, ge=0, le=1,
                             description="API-level cases: probability a layer whose call takes a mask (recurrent "
                                         "layers, GlobalAveragePooling1D, BatchNormalization, Softmax, "
                                         "TimeDistributed) is called with one, made from an integer input of 0/1 "
                                         "rows, padded sequences mostly (docs/mutation.md)")
    call_causal: float = Field(0.3, ge=0, le=1,
                               description="API-level cases: probability an attention layer (Attention, "
                                           "AdditiveAttention, MultiHeadAttention, GroupQueryAttention) is called "
                                           "with use_causal_mask=True: each query position attends to the value "
                                           "positions up to its own only (docs/mutation.md)")
    refusal_memo: Literal["on", "off"] = Field(
        "on", description="API-level cases: on: once a converter or compiled mode refused an API under a dtype "
                          "policy with an explicit 'unsupported' error (a limitation, not a crash) in two cases "
                          "and converted it in none, the run's later cases of that API and policy leave that "
                          "backend out at build time, so it does not convert them again; each such row records "
                          "the skip, its reason and the cases that saw the refusal (docs/backends.md, 'Refusals "
                          "remembered'); off: every case converts on every backend (with --pack above 1 the memo "
                          "is off)")
    @field_validator("refusal_memo", mode="before")
    @classmethod
    def _memo_switch(cls, v: Any) -> Any:
        """YAML reads a bare ``off``/``on`` as a boolean: the same switch."""
        return ("on" if v else "off") if isinstance(v, bool) else v

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: str) -> str:
        parse_dtypes(v)
        return v


class TrainSettings(_Section):
    """The training phase, after Muffin (``audee/train``, ``audee/levels/train``)."""

    steps: int = Field(1, ge=1, le=1000, description="training phase: optimizer steps per case (the loss of every "
                                                     "step is compared: a trajectory)")
    losses: str = Field(TRAIN_LOSSES, description="training phase: the losses a case draws from, each with an "
                                                  "optional weight, e.g. mean_squared_error or "
                                                  "categorical_crossentropy:2,huber (of " + ", ".join(LOSSES) + ")")
    optimizers: str = Field(TRAIN_OPTIMIZERS, description="training phase: the optimizers a case draws from, each "
                                                          "with an optional weight (of " + ", ".join(OPTIMIZERS) + ")")
    learning_rate: float | None = Field(None, gt=0, allow_inf_nan=False, description="training phase: the optimizers' learning rate "
                                                                "(default: each Keras optimizer's own)")
    @field_validator("losses")
    @classmethod
    def _losses(cls, v: str) -> str:
        parse_weights(v, LOSSES, "loss")
        return v

    @field_validator("optimizers")
    @classmethod
    def _optimizers(cls, v: str) -> str:
        parse_weights(v, OPTIMIZERS, "optimizer")
        return v


class PrecisionSettings(_Section):
    """The precision oracle's float64 reference, after Predoo (``audee/reference``); its
    factor is judging's (:class:`JudgingSettings`)."""

    reference: Literal["none", "float64"] = Field(
        "none", description="precision oracle: float64 runs each test case once more under the float64 dtype "
                            "policy (weights and inputs cast up; float16/bfloat16 cases in float32 too) on "
                            "--reference-backend; each backend's error against it is recorded, deviations and "
                            "inconsistencies name their culprit, and a backend far worse than the best gets a "
                            "precision finding (docs/oracles.md, 'The float64 reference')")
    reference_backend: str = Field(
        "auto", description="precision oracle: the backend that computes the reference (auto: the first built-in "
                            "Keras backend of the run, in --backends order, that runs the model in float64; the "
                            "others that do cross-check it)")
    @field_validator("reference_backend")
    @classmethod
    def _reference_backend(cls, v: str) -> str:
        return v.strip() if v.strip() == "auto" else check_backend_name(v)


class EquivalenceSettings(_Section):
    """The equivalence oracle: EAGLE's equivalent models, judged on each backend alone
    (``audee/equivalence``)."""

    equivalence: str = Field(DEFAULT_EQUIVALENCE,
                             description="equivalence oracle: rules whose equivalent model runs beside each test "
                                         "case on every backend, compared with the original on the same backend "
                                         "(all, none, or a list: " + ", ".join(EQUIVALENCE_RULES) + "; the "
                                         "default's rules apply only to the layers they rewrite; docs/oracles.md, "
                                         "Equivalent models)")
    @field_validator("equivalence")
    @classmethod
    def _equivalence(cls, v: str) -> str:
        parse_rules(v)
        return v


class SpecialSettings(_Section):
    """Special input values (``audee/mutation/special.py``) in network, API-level and op cases."""

    special_inputs: float = Field(0.0, ge=0, le=1,
                                  description="probability each input row of a network or API-level variant "
                                              "carries a special value (NaN, +-Inf, near the dtype's maximum, a "
                                              "large offset, tiny, subnormal, signed zero, ties, one NaN/Inf among "
                                              "finite values, a NaN tie, a domain's edge; ids out of range "
                                              "or negative), and each float input a batch-wide offset over the "
                                              "rows left alone (what batch statistics see), "
                                              "audee/mutation/special.py; the seed case never")

#: the order the fuzz settings' flags are listed in (`audee fuzz --help`) and ``config.json``
#: holds them: the order of the flat model they came from, so the help text and the file stay
FLAG_ORDER = ("variants", "rng", "batch", "layer_rate", "max_layers", "invalid_prob", "max_redraws", "timeout",
              "tie_margin", "threads", "float32_rtol", "float32_atol", "float16_rtol", "float16_atol",
              "bfloat16_rtol", "bfloat16_atol", "tf32_rtol", "tf32_atol", "operators", "special_inputs",
              "dtypes", "pack", "equivalence", "reference", "reference_backend", "precision_factor", "phase",
              "steps", "losses", "optimizers", "learning_rate", "call_training", "call_mask", "call_causal",
              "refusal_memo")

#: named profiles: each a set of fuzz settings by their flat names, chosen with ``--profile``
#: or a campaign's ``profile:``; a setting given explicitly wins over the profile's
PROFILES: dict[str, dict[str, Any]] = {
    # a few tiny cases from one random stream: does the setup run at all
    "smoke": {"variants": 2, "rng": 0, "batch": 2, "max_redraws": 1},
    # the Audee paper's setting (docs/search.md: 50 network-level variants first; the paper's
    # plain label-flip definition, no tie margin; its parameter redraw as the one operator; its
    # cross-backend oracles only, no equivalent models)
    "paper": {"variants": 50, "rng": 0, "tie_margin": 0.0, "operators": "redraw", "equivalence": "none"},
    # what the test suite's fuzz runs use: a few cases on a small batch
    "ci": {"variants": 3, "rng": 0, "batch": 4},
}


def apply_profile(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its ``profile`` key replaced by that profile's settings, under the
    settings ``data`` gives itself; a :class:`FieldError` on ``profile`` for an unknown name."""
    if "profile" not in data:
        return data
    rest = {k: v for k, v in data.items() if k != "profile"}
    name = data["profile"]
    if not isinstance(name, str) or name not in PROFILES:
        raise FieldError("profile", f"unknown profile {name!r} (one of {', '.join(PROFILES)})")
    return {**PROFILES[name], **rest}


class FuzzSettings(_Settings):
    """A run's settings (`audee fuzz` flags, a campaign's unit settings), in sections, each
    the settings one part of audee reads: ``cfg.judging.tolerances``, ``cfg.train.steps``.
    Given flat, as flags and campaign keys name them (``tie_margin``, ``float32_rtol``), each
    key is put into its section; every setting reads flat too (``cfg.tie_margin``, read-only).
    Frozen: a run's settings are passed down whole and never changed on the way."""

    model_config = ConfigDict(frozen=True)

    run: RunSettings = Field(default_factory=RunSettings, description="the run: cases, rng, batch, timeout")
    judging: JudgingSettings = Field(default_factory=JudgingSettings, description="how outputs are judged")
    network: NetworkSettings = Field(default_factory=NetworkSettings, description="the network level")
    api: ApiSettings = Field(default_factory=ApiSettings, description="the API level")
    train: TrainSettings = Field(default_factory=TrainSettings, description="the training phase")
    precision: PrecisionSettings = Field(default_factory=PrecisionSettings, description="the float64 reference")
    equivalents: EquivalenceSettings = Field(default_factory=EquivalenceSettings,
                                             description="the equivalence oracle")
    special: SpecialSettings = Field(default_factory=SpecialSettings, description="special input values")

    @model_validator(mode="before")
    @classmethod
    def _into_sections(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = apply_profile(data)
        out = {k: v for k, v in data.items() if k not in FLAT_PATHS}
        for key, value in data.items():
            path = FLAT_PATHS.get(key)
            if path is None:
                continue
            node = out
            for part in path[:-1]:
                sub = node.get(part)
                if isinstance(sub, BaseModel):
                    sub = sub.model_dump(exclude_unset=True)
                if sub is None:
                    sub = {}
                if not isinstance(sub, dict):  # a section given as something else: its own error
                    break
                node[part] = sub = dict(sub)
                node = sub
            else:
                node[path[-1]] = value
        return out

    @model_validator(mode="after")
    def _train_fits(self) -> Any:
        if self.run.phase == "train" and self.api.pack > 1:
            raise FieldError("pack", "the training phase trains each case alone (--pack 1)")
        if self.run.phase == "train" and self.precision.reference != "none":
            raise FieldError("reference", "the float64 reference judges inference (--phase inference)")
        return self

    @classmethod
    def flat_fields(cls) -> dict[str, Any]:
        """Every setting by its flat name, in :data:`FLAG_ORDER` (a subclass's own after)."""
        fields = super().flat_fields()
        rank = {n: i for i, n in enumerate(FLAG_ORDER)}
        return dict(sorted(fields.items(), key=lambda kv: rank.get(kv[0], len(rank))))

    def given(self) -> dict[str, Any]:
        """The settings set explicitly, by their flat names (a section's by its keys)."""
        out = {k: getattr(self, k) for k in self.model_fields_set if k not in FuzzSettings.model_fields}
        for name, path in FLAT_PATHS.items():
            node: Any = self
            for part in path[:-1]:
                node = getattr(node, part)
            if path[-1] in node.model_fields_set:
                out[name] = getattr(node, path[-1])
        return out

    def flat(self) -> dict[str, Any]:
        """Every setting by its flat name, in :data:`FLAG_ORDER`: ``config.json``'s form."""
        return {name: getattr(self, name) for name in FLAG_ORDER}

    def tolerances(self) -> dict[str, dict[str, float]]:
        """The deviation oracle's tolerances as case files record them (:meth:`ToleranceSettings.table`)."""
        return self.judging.tolerances.table()

    def equivalence_rules(self) -> tuple[str, ...]:
        """``equivalence`` as the rule names, in :data:`EQUIVALENCE_RULES` order."""
        return parse_rules(self.equivalents.equivalence)

    def loss_weights(self) -> dict[str, float]:
        """``losses`` as {loss: weight}."""
        return parse_weights(self.train.losses, LOSSES, "loss")

    def optimizer_weights(self) -> dict[str, float]:
        """``optimizers`` as {optimizer: weight}."""
        return parse_weights(self.train.optimizers, OPTIMIZERS, "optimizer")

    def dtype_weights(self) -> dict[str, float]:
        """``dtypes`` as {policy: weight}."""
        return parse_dtypes(self.api.dtypes)

    def operator_weights(self) -> dict[str, float]:
        """``operators`` as {operator: weight}."""
        return parse_operators(self.network.operators)


def _section_of(model: type[BaseModel], name: str) -> type[BaseModel] | None:
    """The section model field ``name`` of ``model`` holds, or None."""
    f = model.model_fields.get(name)
    sub = _unwrap(f.annotation) if f is not None else None
    return sub if sub is not None and issubclass(sub, _Section) else None


def _flat_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name in model.model_fields:
        sub = _section_of(model, name)
        out.update(_flat_paths(sub, prefix + (name,)) if sub is not None else {name: prefix + (name,)})
    return out


#: each flat setting name (a flag's dest, a campaign key) -> its place in the sections
FLAT_PATHS: dict[str, tuple[str, ...]] = _flat_paths(FuzzSettings)


def _flat_alias(name: str, path: tuple[str, ...]) -> property:
    def get(self: FuzzSettings) -> Any:
        node: Any = self
        for part in path:
            node = getattr(node, part)
        return node
    return property(get, doc=f"``{'.'.join(path)}``, read flat")


for _name, _path_of in FLAT_PATHS.items():
    setattr(FuzzSettings, _name, _flat_alias(_name, _path_of))


# ---- search (the paper's Algorithm 1) -------------------------------------------------------------
class _SearchFields(_Settings):
    """The settings of one search run shared by `audee fuzz --level`, --search-config files
    and a campaign's ``search:`` mapping.  Frozen, as :class:`FuzzSettings`."""

    model_config = ConfigDict(frozen=True)

    level: Level = Field("input", description="what the search mutates: input, weight or input-weight")
    fitness: Fitness = Field("inconsistency", json_schema_extra={"choices": ["inconsistency", "nan", "precision"]},
                             description="precision: the largest error of any backend's logits against the float64 "
                                         "reference (Predoo's fitness; the search stage runs the reference whether or "
                                         "not --reference is given); "
                                         "inconsistency: logits distance between backends (largest pair); nan: "
                                         "max-min spread of the logits on --nan-backend")
    population: int = Field(20, ge=1, le=100_000, description="population size n")
    parents: int = Field(6, ge=1, description="top m kept each generation (at most the population)")
    crossover_rate: float = Field(0.5, ge=0, le=1, description="r1: share of genes from the first parent")
    mutation_rate: float = Field(0.8, ge=0, le=1, description="r2: probability a child gets Cauchy noise")
    input_scale: float = Field(0.1, ge=0, description="Cauchy scale as a share of the input range")
    weight_scale: float = Field(0.1, ge=0, description="Cauchy scale as a share of each weight's std")
    relative_scale: float | None = Field(None, ge=0,
                                         description="extra Cauchy scale proportional to |gene|, letting values grow "
                                                     "geometrically (default: 0.5 with the nan fitness, which must "
                                                     "reach float overflow, else 0)")
    gene_rate: float = Field(1.0, ge=0, le=1, description="share of genes a mutation perturbs")
    special_rate: float = Field(0.0, ge=0, le=1,
                                description="probability a mutated child's input also gets a special value "
                                            "(NaN, +-Inf, near the dtype's maximum, a large offset, tiny, "
                                            "subnormal, signed zero, ties; ids out of range or negative; with "
                                            "the nan fitness no NaN or Inf), audee/mutation/special.py")
    max_iter: int | None = Field(None, ge=1, description="maximum generations (default: no cap, the budget ends "
                                                         "the search)")
    budget_s: Duration = Field(60.0, json_schema_extra=_flag("budget_s", "--budget", metavar="DURATION",
                                                              duration=True),
                               description="wall-clock budget per search run, e.g. 300s, 5m, 1h")
    stop_at_first: bool = Field(False, description="stop a search run at its first recorded failure")
    layer: str | None = Field(None, description="layer the fitness reads (default: the logits layer)")
    nan_backend: str | None = Field(None, description="backend the NaN fitness reads (default: the first)")
    max_cases_per_generation: int = Field(5, ge=1, description="failures confirmed and written per generation")
    max_cases_per_kind: int = Field(3, ge=1, description="failures written per search run and failure kind")

    @field_validator("budget_s", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return parse_duration(v) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _parents_fit(self) -> Any:
        if self.parents > self.population:
            raise FieldError("parents", f"must be between 1 and population ({self.population}), got {self.parents}")
        if self.relative_scale is None:  # the default depends on the fitness; not marked as given
            object.__setattr__(self, "relative_scale", NAN_RELATIVE_SCALE if self.fitness == "nan" else 0.0)
        return self


class SearchSettings(_SearchFields):
    """One search run (the engine's SearchConfig)."""

    search: SearchKind = Field("ga", description="ga or random")
    rng: int = Field(0, ge=0, description="random seed of the search")

    def check(self) -> None:
        """Validate again (a ``model_copy(update=...)`` is not validated)."""
        type(self).model_validate(self.model_dump())


SEARCH_KINDS = ("ga", "random")
#: the SearchSettings a run's flags or search file give (the rng is the run's)
SEARCH_FLAGS = [n for n in SearchSettings.model_fields if n not in ("search", "rng")]


class SearchPlan(_Settings):
    """A run's search stage, the one shape of it: the settings of each search run, the
    kinds run on each target, how many targets, which seed input.  `audee fuzz --level`
    (:meth:`from_options`), campaign units and the experiments all make one; checks
    against the run's backends run with ``context={"backends": labels}``.
    ``SearchPlan(config, searches, on_consistent, input_index)``."""

    model_config = ConfigDict(frozen=True)

    config: SearchSettings = Field(description="the settings of each search run")
    searches: list[SearchKind] = Field(["ga"], min_length=1, json_schema_extra=_flag("searches", "--search"),
                                       description="search kinds run on every target: ga, random or ga,random")
    on_consistent: int = Field(1, ge=1, json_schema_extra=_flag("on_consistent", "--ga-on-consistent"),
                               description="K: search the first K variants that showed no failure")
    input_index: int | None = Field(None, ge=0, json_schema_extra=_flag("input_index", "--input-index"),
                                    description="seed input to start from (default: one per target)")

    def __init__(self, config: Any = None, searches: Any = None, on_consistent: Any = None,
                 input_index: Any = None, /, **data: Any):
        for key, value in (("config", config), ("searches", searches), ("on_consistent", on_consistent),
                           ("input_index", input_index)):
            if value is not None:
                data[key] = value
        super().__init__(**data)

    @field_validator("searches", mode="before")
    @classmethod
    def _kinds(cls, v: Any) -> Any:
        items = [s.strip() for s in v.split(",") if s.strip()] if isinstance(v, str) else v
        if not isinstance(items, list) or not items or any(s not in SEARCH_KINDS for s in items):
            raise ValueError(f"expected ga, random or ga,random, got {v!r}")
        return items

    @model_validator(mode="after")
    def _fits_backends(self, info: ValidationInfo) -> Any:
        labels = (info.context or {}).get("backends")
        if labels is None:
            return self
        if self.config.fitness == "inconsistency" and len(labels) < 2:
            raise FieldError("backends", "the inconsistency fitness needs two or more backends (or use --fitness nan)")
        if self.config.nan_backend is not None and self.config.nan_backend not in labels:
            raise FieldError("nan_backend", f"{self.config.nan_backend!r} is not among --backends")
        return self

    @classmethod
    def from_options(cls, file_values: dict[str, Any], settings: dict[str, Any], plan: dict[str, Any],
                     backends: list[str], rng: int = 0) -> "SearchPlan | None":
        """The plan `audee fuzz` flags ask for (None without --level, in the flags or the
        search file): ``settings`` the SearchSettings flags given, over ``file_values``;
        ``plan`` the plan's own (searches, on_consistent, input_index).  Errors name the flag."""
        if "level" not in settings and "level" not in file_values:
            for name in ("searches", "on_consistent", "input_index", *SEARCH_FLAGS):
                if name in plan or name in settings:
                    model = cls if name in cls.model_fields else SearchSettings
                    raise ConfigError(f"{flag_of(model, name)} needs --level (input, weight or input-weight)",
                                      field="--level")
            return None
        checked = {k: v for k, v in plan.items() if v is not None}
        config = validate_settings(SearchSettings, {**file_values, **settings, "rng": rng}, flags=True)
        return validate_settings(cls, {"config": config, **checked}, flags=True, context={"backends": backends})

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config.model_dump(), "searches": list(self.searches),
                "on_consistent": self.on_consistent, "input_index": self.input_index}


# ---- localization (the paper's Algorithm 2) -------------------------------------------------------
class _LocalizeFields(_Settings):
    t1: float = Field(1000.0, ge=0, description="inconsistency threshold on change rates")
    t2: float = Field(2.0, ge=0, description="consistency threshold for a replaced parameter")
    precision: float = Field(1e-5, gt=0, description="relative float floor used as eps in one-layer change rates")
    ga_iter: int = Field(6, ge=1, description="GA generations amplifying a one-layer distance")
    ga_population: int = Field(8, ge=2, description="GA population amplifying a one-layer distance")
    max_rounds: int = Field(8, ge=1, description="localize-fix rounds")
    max_inputs: int = Field(4, ge=1, description="failing inputs used")
    max_values: int = Field(4, ge=1, description="alternative values tried per numeric parameter")
    mask_contexts: int = Field(3, ge=0, description="masking test: contexts tried per candidate parameter "
                                                    "(0: no masking test)")
    top_k: int = Field(3, ge=1, description="candidates shown with their evidence per localized layer")
    max_cases: int = Field(50, ge=0, description="campaign RQ2 stage: unique inconsistencies localized per unit")
    consistent: int = Field(10, ge=0, description="campaign RQ2 stage: consistent cases whose top-1 change rate "
                                                  "is measured per backend pair")


class LocalizeSettings(_LocalizeFields):
    """The localize-fix loop (the Localizer's LocalizeConfig)."""

    rng: int = Field(0, ge=0, description="random seed of the amplifying GA")


# ---- campaigns ----------------------------------------------------------------------------------
class CampaignSearch(_SearchFields):
    """A run's ``search:`` mapping: search settings (the rng is the unit's) and the plan."""

    level: Level = Field(description="what the search mutates: input, weight or input-weight")
    search: list[SearchKind] = Field(["ga"], min_length=1, description="ga, random or [ga, random]")
    budget: Duration | None = Field(None, description="wall-clock budget per search run (same as budget_s)")
    ga_on_consistent: int = Field(1, ge=1, description="search the first K variants that showed no failure")
    input_index: int | None = Field(None, ge=0, description="seed input to start from (default: one per target)")

    @field_validator("search", mode="before")
    @classmethod
    def _one_kind(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("budget", mode="before")
    @classmethod
    def _duration2(cls, v: Any) -> Any:
        return parse_duration(v) if isinstance(v, str) else v


class CampaignLocalize(_LocalizeFields):
    """A run's ``localize:`` mapping (``true``: every default); the rng is the unit's."""


class CampaignRun(FuzzSettings):
    """One entry of ``runs``: seeds x backend sets x rngs, each a unit; unit settings inline."""

    seeds: list[Name] | None = Field(None, min_length=1, description="seed names or paths (or apis)")
    apis: list[Name] | Literal["all"] | None = Field(None, min_length=1,
                                                     description="API-level fuzzing instead of seeds: layer API "
                                                                 "names (see `audee apis`) or all; variants is "
                                                                 "the number of cases per API")
    api_group: int = Field(1, ge=1, description="with apis: APIs per unit (consecutive in name order)")
    ops: list[Name] | Literal["all"] | None = Field(None, min_length=1,
                                                    description="op-level fuzzing instead of seeds: keras.ops names "
                                                                "(see `audee apis --ops`) or all; variants is the "
                                                                "number of calls per op (docs/ops.md)")
    op_group: int = Field(1, ge=1, description="with ops: ops per unit (consecutive in name order)")
    backends: list[Annotated[list[BackendName], Field(min_length=1)]] = Field(
        min_length=1, description="backend sets, each a list of backend names")
    rngs: list[Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1,
                                                           description="one unit per rng (default: [rng])")
    search: CampaignSearch | None = Field(None, description="a search stage for every unit")
    localize: CampaignLocalize | None = Field(None, description="the RQ2 localization stage for every unit")
    inputs: Name | dict[Name, Name] | None = Field(
        None, description="with seeds: an .npz of inputs for every seed of the run, or {seed: .npz} (default: the "
                          "seed's own, an inputs.npz beside a user's spec or .keras model, else generated)")

    @field_validator("localize", mode="before")
    @classmethod
    def _localize_flag(cls, v: Any) -> Any:
        if v is True:
            return {}
        return None if v is False else v

    @model_validator(mode="after")
    def _seeds_or_apis(self) -> Any:
        if sum(x is not None for x in (self.seeds, self.apis, self.ops)) != 1:
            raise FieldError("seeds", "a run names seeds, apis or ops (exactly one of them)")
        if self.phase == "train" and self.search is not None and self.search.fitness != "inconsistency":
            raise FieldError("search", "the training phase searches the gradient distance: fitness inconsistency")
        if self.apis is not None or self.ops is not None:
            level = "an API-level run (apis:)" if self.apis is not None else "an op-level run (ops:)"
            for name in ("search", "localize", "inputs"):
                if getattr(self, name) is not None:
                    raise FieldError(name, f"not available for {level}; use seeds")
            if self.ops is not None and "api_group" in self.model_fields_set:
                raise FieldError("api_group", "only with apis (ops: op_group)")
        elif isinstance(self.inputs, dict):
            for seed in self.inputs:
                if seed not in self.seeds:
                    raise FieldError(f"inputs.{seed}", f"not a seed of this run ({', '.join(self.seeds)})")
        elif "api_group" in self.model_fields_set:
            raise FieldError("api_group", "only with apis")
        if self.ops is None and "op_group" in self.model_fields_set:
            raise FieldError("op_group", "only with ops")
        return self

    @field_validator("backends")
    @classmethod
    def _no_twice(cls, sets: list[list[str]]) -> list[list[str]]:
        for s in sets:
            if len(set(s)) != len(s):
                raise ValueError(f"a backend is named twice in {s}")
        return sets

    def unit_settings(self) -> dict[str, Any]:
        return {k: v for k, v in self.given().items() if k in FLAT_PATHS}


class ShardSettings(_Settings):
    """How a campaign shard shares its node: `audee campaign` flags, or the top level of a
    campaign file (a flag wins).  The rule itself: audee/core/cpus.py, audee/backends/pool.py."""

    parallel_units: int | None = Field(None, ge=1,
                                       description="units a shard runs at once, each on its own set of backend "
                                                   "workers in its own process (default: the task's CPUs // the "
                                                   "backends per unit, at least 1; the CPUs are the affinity mask, "
                                                   "SLURM_CPUS_PER_TASK and the cgroup quota, whichever is least)")
    shards_per_gpu: int = Field(1, ge=1,
                                description="campaign shards sharing one GPU on a node: each GPU worker gets "
                                            "1 / (this x units at once x the unit's GPU workers on that device) "
                                            "of the device's memory (AUDEE_GPU_MEM_FRACTION set in the "
                                            "environment overrides the share)")


class CampaignSettings(ShardSettings):
    """A campaign YAML file."""

    name: Name = Field(description="campaign name")
    defaults: FuzzSettings = Field(default_factory=FuzzSettings, description="unit settings every run starts from")
    runs: list[CampaignRun] = Field(min_length=1, description="the runs, each expanded into units")
    envs: dict[str, str] = Field(default_factory=dict,
                                 description="environments a backend may run in (torch@prev): name -> a Python "
                                             "interpreter, relative to the directory audee runs in "
                                             "(.venv-prev/bin/python; docs/backends.md, Environments)")

    @field_validator("defaults", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return {} if v is None else v

    @field_validator("envs")
    @classmethod
    def _envs(cls, envs: dict[str, str]) -> dict[str, str]:
        """Each name an environment's, each interpreter an executable file (made absolute)."""
        from audee.backends.registry import check_env_name, check_python

        out = {}
        for name, path in envs.items():
            try:
                out[check_env_name(name)] = check_python(path, name)
            except ValueError as exc:
                raise FieldError(name, str(exc)) from None
        return out

    @model_validator(mode="after")
    def _envs_declared(self) -> Any:
        """Every environment a backend names is declared in ``envs``."""
        from audee.backends.registry import env_of

        for k, run in enumerate(self.runs):
            for j, backends in enumerate(run.backends):
                for i, b in enumerate(backends):
                    env = env_of(b)
                    if env is not None and env not in self.envs:
                        declared = ", ".join(sorted(self.envs)) or "none"
                        raise FieldError(f"runs[{k}].backends[{j}][{i}]",
                                         f"unknown device or environment {env!r} in {b!r} (devices: cpu, cuda, "
                                         f"cuda:N; environments: those envs: declares, {declared})")
        return self

    @model_validator(mode="before")
    @classmethod
    def _profile(cls, data: Any) -> Any:
        """A top-level ``profile:`` is the defaults' (a run's own settings, or its own
        ``profile:``, win over it)."""
        if not isinstance(data, dict) or "profile" not in data:
            return data
        data = dict(data)
        name = data.pop("profile")
        if not isinstance(name, str) or name not in PROFILES:
            raise FieldError("profile", f"unknown profile {name!r} (one of {', '.join(PROFILES)})")
        defaults = data.get("defaults") or {}
        if isinstance(defaults, dict):
            if "profile" in defaults:
                raise FieldError("profile", "a profile at the top and another in defaults: give one")
            data["defaults"] = {"profile": name, **defaults}
        return data


# ---- resuming a run ----------------------------------------------------------------------------
#: the settings a rerun into an existing run directory may change: none of them changes what
#: a case computes or how it is judged.  ``variants``: more extends the run (the ids are
#: stable, ``<seed>-v<i>``), fewer runs none; a campaign unit already finished
#: (``DONE.json``) is not extended, so there it must stay.  ``timeout``: how long a request
#: may take before it counts as hung (raised after hangs, the usual reason to rerun).
#: ``threads``: CPU threads per worker.  Progress bars, verbosity and log files are no
#: settings of the run.  Every other setting in ``config.json`` (backends, rng, batch, the
#: mutation, judging and oracle settings, the phase, the search plan, the seed or APIs and
#: the inputs' content) must be the same: a rerun with another is refused in one line naming
#: it (exit 2), ``config.json`` untouched; another --out holds a run with other settings
RESUME_FREE = ("variants", "timeout", "threads")

#: what an audee from before a setting existed did, as that setting's value: a run directory whose
#: ``config.json`` lacks the setting ran with this, so a rerun with another value would mix cases
#: drawn (or backends run) two ways under one ``config.json``, and is refused like any other
#: change.  A setting an old file lacks that is not here is not compared (its older behaviour is
#: not one value): the rerun logs that it resumes without it.
RESUME_ABSENT: dict[str, Any] = {
    "special_inputs": 0.0, "pack": 1, "equivalence": "none", "reference": "none", "phase": "inference",
    "call_training": 0.0, "call_mask": 0.0, "call_causal": 0.0, "refusal_memo": "off",
}


# ---- environment variables ----------------------------------------------------------------------
#: the smallest per-worker memory cap (MiB) ``AUDEE_WORKER_MEMORY_MB`` may set: a framework
#: holds 300-800 MiB once imported (JAX 310, torch 590, Keras on TensorFlow 810, measured on
#: CPU); a smaller cap ends every worker at its first request, each case a "memory cap" crash
MIN_WORKER_MEMORY_MB = 512
#: the largest cap: a petabyte; beyond it the number is a typo, not a machine
MAX_WORKER_MEMORY_MB = 1 << 30


def _env_number(text: str, *, integer: bool = False) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise ValueError(f"expected {'an integer' if integer else 'a number'}, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text!r}")
    return value


def _memory_mb(text: str) -> None:
    mb = _env_number(text)
    if not MIN_WORKER_MEMORY_MB <= mb <= MAX_WORKER_MEMORY_MB:
        raise ValueError(f"a worker's memory cap in MiB must be between {MIN_WORKER_MEMORY_MB} (a framework "
                         f"alone holds 300-800 MiB) and {MAX_WORKER_MEMORY_MB}, got {text!r}")


def _fraction(text: str) -> None:
    share = _env_number(text)
    if not 0 < share <= 1:
        raise ValueError(f"a share of the GPU's memory must be > 0 and <= 1, got {text!r}")


def _threads(text: str) -> None:
    if _env_number(text, integer=True) < 1:
        raise ValueError(f"CPU threads per worker must be >= 1, got {text!r}")


def _directory(text: str) -> None:
    from pathlib import Path

    if not Path(text).is_dir():
        raise ValueError(f"not a directory: {text!r}")


#: every environment variable audee reads, and its check (ValueError: why it is refused).
#: Validated like flags before any command runs (:func:`check_environment`); an empty
#: value is unset, as the readers treat it
ENVIRONMENT: dict[str, Any] = {
    "AUDEE_WORKER_MEMORY_MB": _memory_mb,    # backends/worker.py memory_cap
    "AUDEE_GPU_MEM_FRACTION": _fraction,     # backends/pool.py worker_env, keras_backends.py (torch)
    "AUDEE_THREADS": _threads,               # backends/worker.py and the runtimes' sessions
    "AUDEE_SEEDS": _directory,               # paths.py seeds_dir
    "AUDEE_API_CONFIGS": _directory,         # paths.py api_configs_dir
}


def check_environment(environ: Any = None) -> None:
    """Every variable of :data:`ENVIRONMENT` that is set, checked: a bad one is a
    :class:`ConfigError` naming it (one line, exit 2), before any worker starts or case runs."""
    import os

    env = os.environ if environ is None else environ
    for name, check in ENVIRONMENT.items():
        text = env.get(name)
        if text:
            try:
                check(text)
            except ValueError as exc:
                raise ConfigError(str(exc), source="environment", field=name) from None


# ---- one error format ---------------------------------------------------------------------------
def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(model: type[BaseModel] | None, loc: tuple) -> type[BaseModel] | None:
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        f = model.model_fields.get(part)
        model = _unwrap(f.annotation) if f is not None else None
    return model


def _message(err: dict[str, Any], model: type[BaseModel] | None, loc: tuple) -> str:
    t, ctx, got = err["type"], err.get("ctx") or {}, err.get("input")
    bounds = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"), "less_than_equal": ("<=", "le"),
              "less_than": ("<", "lt")}
    if t in bounds:
        op, key = bounds[t]
        return f"must be {op} {ctx[key]}, got {got!r}"
    if t == "extra_forbidden":
        parent = _model_at(model, loc[:-1])
        known = f" (known: {', '.join(sorted(_fields(parent)))})" if parent is not None else ""
        return "unknown setting" + known
    if t == "missing":
        return "required"
    if t in ("int_type", "int_parsing", "int_from_float"):
        return f"expected an integer, got {got!r}"
    if t in ("float_type", "float_parsing"):
        return f"expected a number, got {got!r}"
    if t == "finite_number":
        return f"expected a finite number, got {got!r}"
    if t in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {got!r}"
    if t == "string_type":
        return f"expected a string, got {got!r}"
    if t == "list_type":
        return f"expected a list, got {got!r}"
    if t in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a mapping, got {got!r}"
    if t == "literal_error":
        return f"expected {ctx.get('expected')}, got {got!r}"
    if t == "too_short":
        return "must not be empty" if ctx.get("min_length") == 1 else f"needs at least {ctx.get('min_length')} items"
    if t in ("string_too_short",):
        return "must not be empty"
    if t == "value_error" and "error" in ctx:
        return str(ctx["error"])
    return err["msg"]


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s settings by their flat names (a plain model's fields as they are)."""
    flat = getattr(model, "flat_fields", None)
    return flat() if flat is not None else dict(model.model_fields)


def _flat_loc(model: type[BaseModel] | None, loc: tuple) -> tuple:
    """``loc`` without the section names (``judging.tolerances.float32_rtol`` ->
    ``float32_rtol``): a setting is named as its flag and flat key name it."""
    out: list[Any] = []
    for i, part in enumerate(loc):
        sub = _section_of(model, part) if model is not None and isinstance(part, str) else None
        if sub is not None and i + 1 < len(loc):
            model = sub
            continue
        out.append(part)
        model = _model_at(model, (part,))
    return tuple(out)


def settings_error(exc: ValidationError, model: type[BaseModel], source: str | None = None, *,
                   prefix: str = "", flags: bool = False) -> ConfigError:
    """The first error of ``exc`` as audee's one-line error: ``source: field.path: message``.

    ``prefix`` is where the model sits in the file (``runs[0].search``); ``flags`` names a
    top-level field by its command-line flag (``--max-layers``) instead of its key."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    ctx = err.get("ctx") or {}
    if isinstance(ctx.get("error"), FieldError):
        loc = loc + (ctx["error"].field,)
    message = _message(err, model, loc)
    loc = _flat_loc(model, loc)
    if flags and loc and isinstance(loc[0], str):
        f = _fields(model).get(loc[0])
        extra = f.json_schema_extra if f is not None and isinstance(f.json_schema_extra, dict) else {}
        head = extra.get("flag") or "--" + loc[0].replace("_", "-")
        field = head + _path(loc[1:]) if len(loc) > 1 else head
    else:
        field = _path(loc)
    if prefix:
        field = f"{prefix}.{field}" if field and not field.startswith("[") else prefix + field
    return ConfigError(message, source=source, field=field or None)


def validate_settings(model: type[M], data: Any, source: str | None = None, *, prefix: str = "",
                      flags: bool = False, context: dict[str, Any] | None = None) -> M:
    """``model`` validated from ``data`` (``context``: for checks against the run, such as
    its backends), or a :class:`ConfigError` in the one format."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise settings_error(exc, model, source, prefix=prefix, flags=flags) from None


# ---- command-line flags derived from the models -------------------------------------------------
def _cli_type(annotation: Any) -> tuple[Any, tuple | None]:
    tp = annotation
    while True:
        origin = typing.get_origin(tp)
        if origin is Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            tp = [a for a in typing.get_args(tp) if a is not type(None)][0]
        elif origin is Literal:
            return str, typing.get_args(tp)
        else:
            return tp, None


def flag_of(model: type[BaseModel], name: str) -> str:
    extra = _fields(model)[name].json_schema_extra
    return (extra or {}).get("flag") if isinstance(extra, dict) and extra.get("flag") else "--" + name.replace("_", "-")


def add_model_options(parser: Any, model: type[BaseModel], *, only: list[str] | None = None,
                      exclude: tuple[str, ...] = (), help_suffix: dict[str, str] | None = None) -> list[str]:
    """Add one option per field of ``model`` to an argparse parser (or group): the field
    ``max_layers`` becomes ``--max-layers`` (dest ``max_layers``), its help the field's
    description and default, its type the field's.  Every default is None, so a flag not
    given is told apart from one given with the default value; validate what was given
    with the model.  Returns the field names added."""
    fields = _fields(model)
    names = only if only is not None else [n for n in fields if n not in exclude]
    for name in names:
        f = fields[name]
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        tp, choices = _cli_type(f.annotation)
        default = f.get_default(call_default_factory=True)
        shown = "off" if default is False else ("none" if default is None else f"{default:g}"
                                                if isinstance(default, float) else str(default))
        text = (f.description or "") + (help_suffix or {}).get(name, "")
        if default is not None and "(default" not in text:
            text += f" (default: {shown})"
        kwargs: dict[str, Any] = {"dest": name, "default": None, "help": text.replace("%", "%%")}
        if tp is bool:
            kwargs.update(action="store_true")
        else:
            kwargs["type"] = str if extra.get("duration") else tp
            if extra.get("choices") or choices:
                kwargs["choices"] = extra.get("choices") or choices
            if extra.get("metavar"):
                kwargs["metavar"] = extra["metavar"]
        parser.add_argument(flag_of(model, name), **kwargs)
    return names


def given_options(args: argparse.Namespace, names: list[str]) -> dict[str, Any]:
    """The options of ``names`` the user gave (not None)."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}
