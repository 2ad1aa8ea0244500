"""The other execution mode of each Keras framework, each a backend of its own.

audee's default backends run each framework one way: TensorFlow as a traced graph,
PyTorch eagerly, JAX jitted.  Users run the other ways too (eager TensorFlow in custom
loops, XLA through ``jit_compile=True``, ``torch.compile``, JAX op by op), and the bugs of
graph compilers live exactly between a function and its compiled version (EAGLE's Rule 1,
Opera).  Each mode here is the default backend with one thing changed, so a pair of the
two modes of one framework differs only in that thing:

* ``tensorflow-eager``: the Keras model called eagerly, no ``tf.function``;
* ``tensorflow-xla``: ``tf.function(jit_compile=True)``, what Keras uses on accelerators;
* ``tensorflow-noonednn``: the traced graph with oneDNN off (``TF_ENABLE_ONEDNN_OPTS=0``):
  TensorFlow's own CPU kernels instead of oneDNN's (they accept different models);
* ``torch-compile``: the Keras torch model under ``torch.compile`` (Inductor, C++ on the CPU);
* ``jax-eager``: ``stateless_call`` op by op, without ``jax.jit``;
* ``jax-x64``: jitted JAX with 64-bit types on (``jax_enable_x64``): the float64 reference's
  JAX worker (``registry.FLOAT64_TWIN``); without it JAX casts a float64 model to float32.

An op-level case (``audee fuzz --op``) is called the way each backend runs its model
(``call_op``): traced by ``tf.function`` on ``tensorflow`` (and ``tensorflow-noonednn``),
eagerly on ``tensorflow-eager``, compiled by XLA on ``tensorflow-xla``, eagerly on ``torch``,
under ``torch.compile`` on ``torch-compile``, jitted on ``jax`` (and ``jax-x64``), op by op on
``jax-eager``.  So each mode's pair with its reference (``BackendInfo.reference``) is
"compiled equals eager" for one op, as it is for a model.

A compiled mode compiles once per model and input signature (``compile_for``), never per
weight set: weights stay variables (TensorFlow, torch) or arguments (JAX).
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from audee.backends.keras_backends import JaxBackend, TensorflowBackend, TorchBackend, traced_call
from audee.backends.keras_build import BuiltModel


class TensorflowEagerBackend(TensorflowBackend):
    """The Keras model called eagerly: every op dispatched on its own, no graph, no Grappler."""

    name = "tensorflow-eager"
    train_mode = "eager"  # the training step too (audee/backends/keras_train.py)

    def compile(self, built: BuiltModel) -> None:
        built.fn = None
        built.assign_fns = {}

    def compile_for(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> None:
        """Nothing to trace: eager execution has no ahead-of-time step."""

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The call eagerly, as a user calls ``keras.ops`` outside a ``tf.function``: the
        reference-free side of ``tensorflow``'s traced call."""
        return fn(*args, **kwargs)

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        import tensorflow as tf

        device = "/GPU:0" if self.device.startswith("cuda") else "/CPU:0"
        with tf.device(device):
            outs = model.model(self._ordered(model, inputs), training=False)
        return [np.asarray(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]


class TensorflowXlaBackend(TensorflowBackend):
    """The forward call compiled by XLA (``jit_compile=True``): TensorFlow's graph lowered
    to HLO, fused and code-generated, as Keras does with ``jit_compile`` on a GPU."""

    name = "tensorflow-xla"
    train_mode = "xla"

    def compile(self, built: BuiltModel) -> None:
        import tensorflow as tf

        model = built.model
        device = "/GPU:0" if self.device.startswith("cuda") else "/CPU:0"

        @tf.function(autograph=False, jit_compile=True)  # static per signature (TensorflowBackend.compile)
        def fn(xs: list) -> list:
            with tf.device(device):
                return model(xs, training=False)

        built.fn = fn
        built.concrete = {}
        built.assign_fns = {}

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The op compiled by XLA, its tensors the function's inputs (traced once per call:
        each case has its own shapes)."""
        import tensorflow as tf

        return traced_call(fn, args, kwargs, tf.is_tensor,
                           lambda f: tf.function(f, autograph=False, jit_compile=True))


class TensorflowNoOneDnnBackend(TensorflowBackend):
    """The default traced graph on TensorFlow's own CPU kernels: oneDNN off for the whole
    process (read once, at TensorFlow's import, hence set in :meth:`prepare_process`)."""

    name = "tensorflow-noonednn"  # its script's environment, set by TensorflowBackend.prepare_process


class TorchCompileBackend(TorchBackend):
    """The Keras torch model under ``torch.compile`` (TorchDynamo + Inductor).  Compiled for
    each input signature on its first call (``compile_for``), with ``dynamic=False`` so a new
    batch size is a new, fully static compile rather than a guess at symbolic shapes; weights
    are parameters, so a new weight set reuses the compiled code."""

    name = "torch-compile"

    def compile(self, built: BuiltModel) -> None:
        import torch

        super().compile(built)
        built.fn = torch.compile(built.model, dynamic=False, fullgraph=False)

    def compile_for(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> None:
        """Inductor compiles on the first call: made here, on zeros of these inputs' shapes
        and dtypes, so its seconds count as ``compile`` and not as the case's run."""
        self._call(model, {k: np.zeros_like(v) for k, v in inputs.items()})

    def _call(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> Any:
        import torch

        xs = [torch.from_numpy(np.ascontiguousarray(a)).to(model.torch_device) for a in self._ordered(model, inputs)]
        with torch.no_grad():
            return model.fn(xs, training=False)

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The op under ``torch.compile`` (Inductor), its tensors the compiled function's
        inputs, ``dynamic=False`` as for models.  TorchDynamo's caches are cleared first:
        every case's function has the same code object, and past the recompile limit
        (``torch._dynamo.config.recompile_limit``, 8) Dynamo would run it eagerly without a
        word; a graph break leaves the rest of the call eager, as for a model."""
        import torch

        torch._dynamo.reset()
        with torch.no_grad():
            return traced_call(fn, args, kwargs, torch.is_tensor, lambda f: torch.compile(f, dynamic=False))

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        from audee.backends.keras_backends import _torch_to_numpy

        outs = self._call(model, inputs)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [_torch_to_numpy(o) for o in outs]


class JaxEagerBackend(JaxBackend):
    """``stateless_call`` without ``jax.jit``: each op dispatched and run on its own by
    JAX's eager path, with no XLA fusion across ops."""

    name = "jax-eager"
    train_mode = "eager"

    def compile(self, built: BuiltModel) -> None:
        super().compile(built)
        model = built.model

        def forward(tv: list, ntv: list, xs: list) -> list:
            outs, _ = model.stateless_call(tv, ntv, xs, training=False)
            return outs

        built.fn = forward

    def compile_for(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> None:
        """Nothing to compile ahead: eager JAX compiles each primitive when first met."""

    def call_op(self, fn: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """The call op by op, as the model runs here (``jax.disable_jit``: the jitted
        helpers inside ``jax.numpy`` too): the reference of ``jax``'s jitted call."""
        import jax

        with jax.disable_jit():
            return fn(*args, **kwargs)

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        import jax

        xs = self._ordered(model, inputs)
        with jax.disable_jit():
            outs = model.fn(model.tv, model.ntv, xs)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [np.asarray(o) for o in outs]



class JaxX64Backend(JaxBackend):
    """Jitted JAX with ``jax_enable_x64`` set before JAX is first imported: a float64 model
    computes in float64 (without it JAX casts every float64 array to float32).  Its own
    worker, so the run's ``jax`` results stay those of JAX as users run it: with x64 on,
    Python scalars and some integer ops default to 64 bits."""

    name = "jax-x64"

    def declared_outputs(self, model: Any) -> None:
        """None: x64 mode widens the default integer and scalar dtypes, which Keras'
        declarations do not follow; the mode keeps the arithmetic, not that contract."""
        return None

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        super().prepare_process(device, precision)
        os.environ["JAX_ENABLE_X64"] = "1"   # read at JAX's import (jax.config's jax_enable_x64)
