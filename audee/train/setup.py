"""What a training step is, as data (no framework): its loss, optimizer and targets, how
the training phase calls the layers, and what a backend answers.

A training-phase test case is the inference case (spec, weights, inputs) plus a
:class:`TrainSetup`: the loss (drawn per case from :data:`LOSSES`), the optimizer (from
:data:`OPTIMIZERS`), the learning rate, the number of steps and the seed of the targets.
Every backend builds the same targets from that seed and the model output's shape
(:func:`make_targets`, numpy only, inside each worker: the same array everywhere, sent
back so the parent can check it), runs the forward pass in training mode, the loss, the
gradient of the loss with respect to every trainable weight with its own autodiff, and
``steps`` optimizer updates (:mod:`audee.backends.keras_train`).

Layers random in training mode (dropout, noise, augmentation; :mod:`audee.apis.call_args`)
draw different masks on every framework, so :func:`train_spec` calls them in inference
mode for the training step (the reason is recorded with the case); a spec that asks for
one in training mode explicitly (``"call": {"training": true}``) is trained, but its
values are not compared (``unjudged``).
"""
from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np

from audee.apis.call_args import random_in_training
from audee.cases.spec import ModelSpec
from audee.core.floats import holds_nonfinite

#: the losses a case draws from (Keras names; each a ``keras.losses`` class in the worker)
LOSSES = ("categorical_crossentropy", "sparse_categorical_crossentropy", "binary_crossentropy",
          "mean_squared_error", "mean_absolute_error", "huber", "log_cosh", "hinge")
#: the loss of a layer judged alone (localization, the own-layer check): the mean of the
#: output times fixed random targets, so each weight's gradient is a fixed random
#: combination of the layer's own derivatives (a vector-Jacobian product), no loss involved
PROBE_LOSS = "probe"
#: the optimizers a case draws from (``keras.optimizers`` classes in the worker)
OPTIMIZERS = ("sgd", "adam", "rmsprop", "adagrad")
#: losses whose targets are classes along the output's last axis
CLASS_LOSSES = ("categorical_crossentropy", "sparse_categorical_crossentropy")
#: the random stream of a case's training setup, apart from its model's and its inputs'
TRAIN_STREAM = 29
#: the target seed of a layer judged alone (the same probe on every backend and run)
PROBE_SEED = 12345


@dataclass(frozen=True)
class TrainSetup:
    """One training step's settings (a case file's and a results row's ``train``).
    ``learning_rate`` None: the optimizer's Keras default; ``from_logits``: the
    cross-entropy losses read the output as logits (a model whose output is its logits
    layer) or as probabilities (a softmax after the logits)."""

    loss: str
    optimizer: str
    learning_rate: float | None = None
    steps: int = 1
    target_seed: int = 0
    from_logits: bool = True

    def __post_init__(self) -> None:
        if self.loss not in LOSSES + (PROBE_LOSS,):
            raise ValueError(f"unknown loss {self.loss!r} (one of {', '.join(LOSSES)})")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r} (one of {', '.join(OPTIMIZERS)})")
        if not isinstance(self.steps, int) or isinstance(self.steps, bool) or self.steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {self.steps!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "TrainSetup":
        known = {k: d[k] for k in ("loss", "optimizer", "learning_rate", "steps", "target_seed", "from_logits")
                 if k in d}
        return cls(**known)

    def probe(self) -> "TrainSetup":
        """The setup of a layer judged alone: the probe loss, one step, the probe targets."""
        return TrainSetup(PROBE_LOSS, self.optimizer, self.learning_rate, 1, PROBE_SEED, True)


def draw_setup(case_id: str, rng: int, losses: Mapping[str, float], optimizers: Mapping[str, float], *,
               learning_rate: float | None = None, steps: int = 1, from_logits: bool = True) -> TrainSetup:
    """Case ``case_id``'s setup, from its own stream ``(rng, crc32(case_id), TRAIN_STREAM)``:
    the same case gets the same loss, optimizer and targets whatever else a run draws."""
    g = np.random.default_rng([rng, zlib.crc32(case_id.encode()), TRAIN_STREAM])
    loss = _pick(g, losses)
    optimizer = _pick(g, optimizers)
    return TrainSetup(loss, optimizer, learning_rate, steps, int(g.integers(2 ** 31)), from_logits)


def _pick(g: np.random.Generator, weights: Mapping[str, float]) -> str:
    names = sorted(weights)
    p = np.array([float(weights[n]) for n in names])
    return str(names[int(g.choice(len(names), p=p / p.sum()))])


def make_targets(setup: TrainSetup, shape: tuple[int, ...]) -> np.ndarray:
    """The targets of a batch whose output has ``shape`` (batch first), from the setup's
    seed: classes along the last axis (one-hot, or their ids for the sparse loss), 0/1 for
    binary cross-entropy, +-1 for the hinge, standard normal values otherwise.  ValueError
    where the loss cannot fit the output (classes of an output without a class axis)."""
    g = np.random.default_rng([setup.target_seed, len(shape)])
    shape = tuple(int(d) for d in shape)
    if setup.loss in CLASS_LOSSES:
        if len(shape) < 2 or shape[-1] < 1:
            raise ValueError(f"loss {setup.loss} needs an output with a class axis, got shape {list(shape)}")
        ids = g.integers(0, shape[-1], size=shape[:-1])
        if setup.loss == "sparse_categorical_crossentropy":
            return ids.astype(np.int32)
        return np.eye(shape[-1], dtype=np.float32)[ids]
    if setup.loss == "binary_crossentropy":
        return g.integers(0, 2, size=shape).astype(np.float32)
    if setup.loss == "hinge":
        return np.where(g.random(shape) < 0.5, -1.0, 1.0).astype(np.float32)
    return g.standard_normal(shape).astype(np.float32)


# ---- the optimizers' first step, as Keras documents it ------------------------------------------
#: each optimizer's Keras 3.15 defaults the first step reads (learning rate, then its constants)
OPTIMIZER_DEFAULTS = {"sgd": {"learning_rate": 0.01}, "adam": {"learning_rate": 0.001, "beta_1": 0.9,
                                                              "beta_2": 0.999, "epsilon": 1e-7},
                      "rmsprop": {"learning_rate": 0.001, "rho": 0.9, "epsilon": 1e-7},
                      "adagrad": {"learning_rate": 0.001, "initial_accumulator_value": 0.1, "epsilon": 1e-7}}


def reference_update(setup: TrainSetup, w: Any, g: Any, dtype: Any = np.float64) -> np.ndarray:
    """The weight ``w`` after the optimizer's first step on the gradient ``g``: the update
    rule of ``keras.optimizers.<Optimizer>.update_step`` with its defaults
    (:data:`OPTIMIZER_DEFAULTS`; the setup's learning rate where given), from zeroed state,
    op by op in ``dtype`` as Keras computes it in the variable's dtype (a float16
    variable's Adam squares its gradient in float16, where small ones vanish).

    A backend's updated weight is judged against this, computed from its own gradient: the
    adaptive optimizers divide by the gradient's magnitude (Adam's first step is about
    ``lr * sign(g)``), so two backends whose gradients differ by rounding in an element near
    zero may move that weight ``2 lr`` apart with no update wrong."""
    c = OPTIMIZER_DEFAULTS[setup.optimizer]
    dt = np.dtype(dtype)

    def k(x: float) -> np.ndarray:
        return np.asarray(x, dtype=dt)

    lr = k(setup.learning_rate if setup.learning_rate is not None else c["learning_rate"])
    w = np.asarray(w).astype(dt)
    g = np.asarray(g).astype(dt)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        if setup.optimizer == "sgd":
            return w - g * lr
        if setup.optimizer == "adam":  # Python-float constants (1 - beta) are cast, as Keras does
            one = k(1.0)
            alpha = lr * np.sqrt(one - k(c["beta_2"])) / (one - k(c["beta_1"]))
            m = g * k(1.0 - c["beta_1"])
            v = (g * g) * k(1.0 - c["beta_2"])
            return w - (m * alpha) / (np.sqrt(v) + k(c["epsilon"]))
        if setup.optimizer == "rmsprop":
            velocity = k(1.0 - c["rho"]) * (g * g)
            return w - (lr * g) / np.sqrt(velocity + k(c["epsilon"]))
        accumulator = k(c["initial_accumulator_value"]) + g * g
        return w - (lr * g) / np.sqrt(accumulator + k(c["epsilon"]))


# ---- how the training phase calls the layers ------------------------------------------------
@dataclass
class TrainSpec:
    """The spec a training step runs (``spec``), and what it changed or cannot judge:
    ``inactive`` the layers called in inference mode because they are random in training
    (layer -> why), ``unjudged`` the layers a spec asks to run random in training mode
    (their values differ on every backend: the case's values are not compared)."""

    spec: ModelSpec
    inactive: dict[str, str] = field(default_factory=dict)
    unjudged: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in (("inactive", self.inactive), ("unjudged", self.unjudged)) if v}


def train_spec(spec: ModelSpec) -> TrainSpec:
    """``spec`` as the training phase runs it: every layer random in training mode and not
    told how to be called gets ``call: {training: false}``."""
    out = spec.copy()
    inactive: dict[str, str] = {}
    unjudged: dict[str, str] = {}
    for layer in out.layers:
        why = random_in_training(layer.api, layer.params)
        if why is None:
            continue
        if layer.call.get("training") is True:
            unjudged[layer.name] = why
        elif layer.call.get("training") is None:
            layer.call = {**layer.call, "training": False}
            inactive[layer.name] = why + ": called in inference mode"
    return TrainSpec(out, inactive, unjudged)


# ---- what a backend answers ------------------------------------------------------------------
@dataclass
class TrainOutcome:
    """What one backend did with a training step: a failure (a ``WorkerFailure`` with its
    phase: ``build``, ``weights``, ``train`` (the forward pass in training mode and the
    loss), ``gradient``, ``update``), or ``unsupported`` (the backend does not train: a
    converter), or the step's values: the loss of every step, the first step's gradient
    of every trainable weight (layer -> one array per weight, None for a weight that is not
    trained) and of every float input, the weights after the first step, the first step's
    model output and (asked for) every layer's output, and the targets it trained on."""

    backend: str
    failure: Any = None
    unsupported: str | None = None
    losses: np.ndarray | None = None
    grads: dict[str, list[np.ndarray | None]] = field(default_factory=dict)
    weights: dict[str, list[np.ndarray]] = field(default_factory=dict)
    input_grads: dict[str, np.ndarray] = field(default_factory=dict)
    output: np.ndarray | None = None
    layers: dict[str, np.ndarray] = field(default_factory=dict)
    targets: np.ndarray | None = None
    run_s: float = 0.0
    precision: str = "full"

    @property
    def ok(self) -> bool:
        return self.failure is None and self.unsupported is None

    @classmethod
    def from_reply(cls, backend: str, reply: Mapping[str, Any], precision: str = "full") -> "TrainOutcome":
        return cls(backend, losses=np.asarray(reply["losses"], dtype=np.float64),
                   grads=dict(reply.get("grads") or {}), weights=dict(reply.get("weights") or {}),
                   input_grads=dict(reply.get("input_grads") or {}), output=reply.get("output"),
                   layers=dict(reply.get("layers") or {}), targets=reply.get("targets"),
                   run_s=float(reply.get("run_s", 0.0)), precision=precision)

    def nonfinite(self) -> list[str]:
        """The quantities holding NaN/Inf, in a fixed order: ``loss@<step>``, then
        ``grad:<layer>/<k>``, ``input_grad:<input>``, ``weights:<layer>/<k>`` (layers in the
        order of the reply, which is the spec's topological order)."""
        out = []
        if self.losses is not None:
            out += [f"loss@{i}" for i, v in enumerate(np.asarray(self.losses).ravel()) if not np.isfinite(v)]
        for kind, table in (("grad", self.grads), ("weights", self.weights)):
            for layer, arrs in table.items():
                out += [f"{kind}:{layer}/{k}" for k, a in enumerate(arrs) if holds_nonfinite(a)]
            if kind == "grad":
                out += [f"input_grad:{name}" for name, a in self.input_grads.items() if holds_nonfinite(a)]
        return out


def quantity_layer(quantity: str) -> str | None:
    """The layer a quantity of :meth:`TrainOutcome.nonfinite` belongs to (None: the loss, an input)."""
    if ":" not in quantity:
        return None
    kind, _, rest = quantity.partition(":")
    return None if kind == "input_grad" else rest.rsplit("/", 1)[0]


__all__ = ["CLASS_LOSSES", "LOSSES", "OPTIMIZER_DEFAULTS", "OPTIMIZERS", "reference_update", "PROBE_LOSS", "PROBE_SEED", "TRAIN_STREAM", "TrainOutcome",
           "TrainSetup", "TrainSpec", "draw_setup", "make_targets", "quantity_layer", "train_spec"]
