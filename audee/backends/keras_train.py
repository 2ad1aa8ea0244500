"""The training step on each Keras backend, inside its worker.

The same Keras model, weights, inputs and targets; each framework's own autodiff:

* TensorFlow: ``tf.GradientTape`` around ``model(xs, training=True)`` and the loss, traced
  once per model and loss (``tf.function``, as the forward call is);
* PyTorch: ``torch.autograd.grad`` of the loss (eager, as the forward call is);
* JAX: ``jax.value_and_grad`` over ``model.stateless_call(..., training=True)``, jitted.

Then one Keras optimizer step per ``steps`` (``optimizer.apply`` on TensorFlow and torch,
``optimizer.stateless_apply`` on JAX: what each backend's Keras trainer does).  A failure
is tagged with its phase: ``train`` (the forward pass in training mode or the loss),
``gradient`` (differentiation), ``update`` (the optimizer).  A weight the loss does not
reach gets a zero gradient on every backend (TensorFlow and torch say None, JAX zeros).
"""
from __future__ import annotations

import time
import traceback
from typing import Any, Callable

import numpy as np

from audee.backends.base import BackendError, Phase
from audee.backends.keras_build import BuiltModel
from audee.train.setup import PROBE_LOSS, TrainSetup, make_targets

_LOSS_CLASSES = {"categorical_crossentropy": "CategoricalCrossentropy",
                 "sparse_categorical_crossentropy": "SparseCategoricalCrossentropy",
                 "binary_crossentropy": "BinaryCrossentropy", "mean_squared_error": "MeanSquaredError",
                 "mean_absolute_error": "MeanAbsoluteError", "huber": "Huber", "log_cosh": "LogCosh",
                 "hinge": "Hinge"}
_FROM_LOGITS = ("categorical_crossentropy", "sparse_categorical_crossentropy", "binary_crossentropy")
_OPTIMIZERS = {"sgd": "SGD", "adam": "Adam", "rmsprop": "RMSprop", "adagrad": "Adagrad"}


def make_loss(keras: Any, setup: TrainSetup) -> Callable[[Any, Any], Any]:
    """The setup's loss as a Keras loss object (the probe: the mean of output times targets)."""
    if setup.loss == PROBE_LOSS:
        def probe(y_true: Any, y_pred: Any) -> Any:
            return keras.ops.mean(keras.ops.cast(y_pred, "float32") * keras.ops.cast(y_true, "float32"))
        return probe
    cls = getattr(keras.losses, _LOSS_CLASSES[setup.loss])
    return cls(from_logits=setup.from_logits) if setup.loss in _FROM_LOGITS else cls()


def make_optimizer(keras: Any, setup: TrainSetup) -> Any:
    cls = getattr(keras.optimizers, _OPTIMIZERS[setup.optimizer])
    return cls() if setup.learning_rate is None else cls(learning_rate=setup.learning_rate)


def _failure(phase: str, exc: BaseException) -> BackendError:
    return BackendError(phase, f"{type(exc).__name__}: {exc}", traceback.format_exc())  # cleaned and bounded there


def _output_shape(built: BuiltModel, batch: int, run: Callable[[], list]) -> tuple[int, ...]:
    """The model output's shape for a batch: the functional model's static shape, or one
    inference run where it has unknown dimensions besides the batch."""
    shape = tuple(built.model.outputs[built.output_index].shape)
    if all(d is not None for d in shape[1:]):
        return (batch, *(int(d) for d in shape[1:]))
    return tuple(np.shape(run()[built.output_index]))


def _per_layer(built: BuiltModel, trainable: list, non_trainable: list | None = None) -> dict[str, list]:
    """Flat trainable (and non-trainable) values as ``{layer: [one per weight]}`` in
    ``layer.get_weights()`` order; without ``non_trainable``, None for those weights."""
    out = {}
    for name, slots in built.slots.items():
        if not slots:
            continue
        out[name] = [(trainable[i] if t else (non_trainable[i] if non_trainable is not None else None))
                     for t, i in slots]
    return out


def _layer_weights(built: BuiltModel) -> dict[str, list[np.ndarray]]:
    return {n: list(built.layers[n].get_weights()) for n in built.order if built.layers[n].weights}


def _np(x: Any) -> np.ndarray:
    """A framework array as numpy (a torch tensor detached; bfloat16 through ml_dtypes)."""
    if hasattr(x, "detach"):
        import torch

        t = x.detach().cpu()
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    return np.asarray(x)


def _float_positions(xs: list[np.ndarray]) -> list[int]:
    return [i for i, a in enumerate(xs) if np.issubdtype(np.asarray(a).dtype, np.floating)]


def _reply(built: BuiltModel, losses: list[float], grads: list, input_grads: dict, outs: list, targets: np.ndarray,
           weights_after: dict[str, list], layers: bool, want_input_grads: bool, seconds: float) -> dict[str, Any]:
    tv = built.trainable_variables
    grads = [np.zeros(tuple(v.shape), _np_dtype(v)) if g is None else _np(g) for g, v in zip(grads, tv)]
    reply: dict[str, Any] = {
        "losses": np.asarray(losses, dtype=np.float64),
        "grads": _per_layer(built, grads),
        "weights": {n: [_np(w) for w in ws] for n, ws in weights_after.items()},
        "output": _np(outs[built.output_index]),
        "targets": targets,
        "run_s": seconds,
    }
    if want_input_grads:
        reply["input_grads"] = {k: _np(v) for k, v in input_grads.items()}
    if layers:
        reply["layers"] = {n: _np(o) for n, o in zip(built.order, outs)}
    return reply


def _np_dtype(v: Any) -> Any:
    from audee.backends.keras_build import numpy_dtype

    return numpy_dtype(str(v.dtype)) or np.float32


def _split_steps(setup: TrainSetup, step: Callable[[], tuple], apply: Callable[[list], None],
                 forward: Callable[[], Any], snapshot: Callable[[], dict]) -> tuple[list[float], list, dict, list, dict]:
    """``setup.steps`` steps: ``step()`` -> (loss, weight grads, input grads, outputs);
    ``apply(grads)`` the update; ``snapshot()`` the weights, taken after the first update
    (the update the oracle judges against the first step's gradient).  The first step's
    gradients and outputs are kept.  A failure of ``step`` is told apart by running
    ``forward()`` (forward pass and loss alone): it fails too (phase ``train``) or not
    (``gradient``)."""
    losses: list[float] = []
    first: tuple | None = None
    after: dict = {}
    for _ in range(setup.steps):
        try:
            loss, grads, in_grads, outs = step()
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001 - a framework's failure, tagged with its phase
            try:
                forward()
            except Exception as exc2:  # noqa: BLE001
                raise _failure(Phase.TRAIN, exc2) from exc2
            raise _failure(Phase.GRADIENT, exc) from exc
        losses.append(float(np.asarray(_np(loss)).astype(np.float64)))
        if first is None:
            first = (grads, in_grads, outs)
        try:
            apply(grads)
        except Exception as exc:  # noqa: BLE001
            raise _failure(Phase.UPDATE, exc) from exc
        if len(losses) == 1:
            after = snapshot()
    assert first is not None
    return losses, first[0], first[1], first[2], after


def _targets(built: BuiltModel, setup: TrainSetup, batch: int, run: Callable[[], list]) -> np.ndarray:
    try:
        return make_targets(setup, _output_shape(built, batch, run))
    except Exception as exc:  # noqa: BLE001 - a loss that does not fit the output is the case's
        raise _failure(Phase.TRAIN, exc) from exc


# ---- TensorFlow -----------------------------------------------------------------------------
def train_tensorflow(backend: Any, built: BuiltModel, inputs: dict[str, np.ndarray],
                     setup: TrainSetup, *, layers: bool = False, input_grads: bool = False,
                     mode: str = "compiled") -> dict[str, Any]:
    import tensorflow as tf

    keras = backend.keras
    xs_np = backend._ordered(built, inputs)
    names = [i.name for i in built.spec.inputs]
    floats = _float_positions(xs_np) if input_grads else []
    targets = _targets(built, setup, int(np.shape(xs_np[0])[0]), lambda: backend.run(built, inputs))
    model, tv = built.model, built.trainable_variables
    device = "/GPU:0" if backend.device.startswith("cuda") else "/CPU:0"
    key = ("tf", setup.loss, setup.from_logits, tuple(floats), mode)
    fns = built.__dict__.setdefault("train_fns", {})
    if key not in fns:
        loss_fn = make_loss(keras, setup)
        traced = (lambda f: f) if mode == "eager" else \
            tf.function(autograph=False, reduce_retracing=True, jit_compile=mode == "xla")

        @traced
        def grad_step(xs: list, y: Any) -> Any:
            with tf.device(device):
                with tf.GradientTape() as tape:
                    for i in floats:
                        tape.watch(xs[i])
                    outs = model(xs, training=True)
                    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                    loss = loss_fn(y, outs[built.output_index])
                grads = tape.gradient(loss, tv + [xs[i] for i in floats])
            return loss, grads, outs

        @traced
        def forward(xs: list, y: Any) -> Any:
            outs = model(xs, training=True)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            return loss_fn(y, outs[built.output_index])

        fns[key] = (grad_step, forward)
    grad_step, forward = fns[key]
    xs = [tf.convert_to_tensor(a) for a in xs_np]
    y = tf.convert_to_tensor(targets)
    optimizer = make_optimizer(keras, setup)

    sparse: dict[int, Any] = {}  # an Embedding's gradient comes as IndexedSlices: applied so, compared dense

    def step() -> tuple:
        loss, grads, outs = grad_step(xs, y)
        grads = list(grads)
        sparse.clear()
        for k, g in enumerate(grads):
            if isinstance(g, tf.IndexedSlices):
                sparse[k] = g
                grads[k] = tf.convert_to_tensor(g)
        return loss, grads[:len(tv)], {names[i]: g for i, g in zip(floats, grads[len(tv):])}, list(outs)

    def apply(grads: list) -> None:
        optimizer.apply([sparse.get(k, tf.zeros_like(v.value) if g is None else g)
                         for k, (g, v) in enumerate(zip(grads, tv))], tv)

    t = time.perf_counter()
    losses, grads, in_grads, outs, after = _split_steps(setup, step, apply, lambda: forward(xs, y),
                                                        lambda: _layer_weights(built))
    seconds = time.perf_counter() - t
    return _reply(built, losses, grads, in_grads, outs, targets, after, layers, input_grads, seconds)


# ---- PyTorch --------------------------------------------------------------------------------
def train_torch(backend: Any, built: BuiltModel, inputs: dict[str, np.ndarray],
                setup: TrainSetup, *, layers: bool = False, input_grads: bool = False,
                mode: str = "compiled") -> dict[str, Any]:
    """Eager autograd, as Keras' torch trainer (``mode`` is the same either way: the
    ``torch-compile`` mode trains as ``torch`` does)."""
    import torch

    keras = backend.keras
    xs_np = backend._ordered(built, inputs)
    names = [i.name for i in built.spec.inputs]
    floats = _float_positions(xs_np) if input_grads else []
    targets = _targets(built, setup, int(np.shape(xs_np[0])[0]), lambda: backend.run(built, inputs))
    model, tv = built.model, built.trainable_variables
    dev = built.torch_device
    loss_fn = make_loss(keras, setup)
    optimizer = make_optimizer(keras, setup)
    y = torch.from_numpy(np.ascontiguousarray(targets)).to(dev)

    def tensors() -> list:
        xs = [torch.from_numpy(np.ascontiguousarray(a)).to(dev) for a in xs_np]
        for i in floats:
            xs[i].requires_grad_(True)
        return xs

    def forward() -> Any:
        with torch.no_grad():
            outs = model(tensors(), training=True)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            return loss_fn(y, outs[built.output_index])

    def step() -> tuple:
        xs = tensors()
        with torch.enable_grad():
            outs = model(xs, training=True)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            loss = loss_fn(y, outs[built.output_index])
            wrt = [v.value for v in tv] + [xs[i] for i in floats]
            if wrt and loss.requires_grad:
                grads = list(torch.autograd.grad(loss, wrt, allow_unused=True))
            else:
                grads = [None] * len(wrt)
        return (loss.detach(), grads[:len(tv)], {names[i]: g for i, g in zip(floats, grads[len(tv):])},
                [o.detach() for o in outs])

    def apply(grads: list) -> None:
        with torch.no_grad():
            optimizer.apply([torch.zeros_like(v.value) if g is None else g for g, v in zip(grads, tv)], tv)

    t = time.perf_counter()
    losses, grads, in_grads, outs, after = _split_steps(setup, step, apply, forward, lambda: _layer_weights(built))
    seconds = time.perf_counter() - t
    return _reply(built, losses, grads, in_grads, outs, targets, after, layers, input_grads, seconds)


# ---- JAX ------------------------------------------------------------------------------------
def train_jax(backend: Any, built: BuiltModel, inputs: dict[str, np.ndarray],
              setup: TrainSetup, *, layers: bool = False, input_grads: bool = False,
              mode: str = "compiled") -> dict[str, Any]:
    """As Keras' JAX trainer: the forward pass, the gradient and the optimizer's
    ``stateless_apply`` in one jitted step (compiled once per model, loss and optimizer);
    a failing step is run again in parts to name its phase."""
    import jax

    keras = backend.keras
    xs_np = backend._ordered(built, inputs)
    names = [i.name for i in built.spec.inputs]
    floats = _float_positions(xs_np) if input_grads else []
    targets = _targets(built, setup, int(np.shape(xs_np[0])[0]), lambda: backend.run(built, inputs))
    model = built.model
    jit = mode != "eager" and built.keras_jits  # uncompiled where Keras' fit would not jit the model
    key = ("jax", setup.loss, setup.from_logits, tuple(floats), setup.optimizer, setup.learning_rate, jit)
    fns = built.__dict__.setdefault("train_fns", {})
    if key not in fns:
        loss_fn = make_loss(keras, setup)
        optimizer = make_optimizer(keras, setup)
        optimizer.build(built.trainable_variables)
        opt_init = [v.value for v in optimizer.variables]

        def objective(tv: list, fxs: list, ntv: list, xs: list, y: Any) -> Any:
            xs = list(xs)
            for i, x in zip(floats, fxs):
                xs[i] = x
            outs, ntv2 = model.stateless_call(tv, ntv, xs, training=True)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            return loss_fn(y, outs[built.output_index]), (outs, ntv2)

        grad = jax.value_and_grad(objective, argnums=(0, 1), has_aux=True)

        def train_step(tv: list, fxs: list, ntv: list, xs: list, y: Any, opt_vars: list) -> Any:
            (loss, (outs, ntv2)), (g_tv, g_x) = grad(tv, fxs, ntv, xs, y)
            tv2, opt2 = optimizer.stateless_apply(opt_vars, g_tv, tv)
            return loss, g_tv, g_x, outs, tv2, ntv2, opt2

        wrap = jax.jit if jit else (lambda f: f)
        fns[key] = (wrap(train_step), wrap(grad), wrap(objective), opt_init)
    train_step, grad, objective, opt_init = fns[key]
    state = {"tv": list(built.tv), "ntv": list(built.ntv), "opt": list(opt_init)}
    fxs = [xs_np[i] for i in floats]

    def step() -> tuple:
        try:
            loss, g_tv, g_x, outs, tv2, ntv2, opt2 = train_step(state["tv"], fxs, state["ntv"], xs_np, targets,
                                                                state["opt"])
        except Exception as exc:  # noqa: BLE001 - which part failed: the update, if the gradient alone runs
            try:
                grad(state["tv"], fxs, state["ntv"], xs_np, targets)
            except Exception:  # noqa: BLE001 - the forward pass or the gradient (_split_steps tells)
                raise exc from None
            raise _failure(Phase.UPDATE, exc) from exc
        state["next"] = (list(tv2), list(ntv2), list(opt2))
        return loss, list(g_tv), {names[i]: g for i, g in zip(floats, g_x)}, list(outs)

    def apply(grads: list) -> None:
        state["tv"], state["ntv"], state["opt"] = state.pop("next")

    t = time.perf_counter()
    losses, grads, in_grads, outs, after = _split_steps(
        setup, step, apply, lambda: objective(state["tv"], fxs, state["ntv"], xs_np, targets),
        lambda: _per_layer(built, state["tv"], state["ntv"]))
    seconds = time.perf_counter() - t
    return _reply(built, losses, grads, in_grads, outs, targets, after, layers, input_grads, seconds)


__all__ = ["make_loss", "make_optimizer", "train_jax", "train_tensorflow", "train_torch"]
