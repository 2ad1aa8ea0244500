"""Keras 3 on TensorFlow, PyTorch and JAX: one class per framework, each with its own
compiled call (``model.predict`` costs 100+ ms a call on TF; a compiled call about 1 ms).

``make_layer`` is the extension point for plugins: override it to swap one layer's
implementation (fault injection, a patched kernel) and keep everything else.
"""
from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np

from audee.backends.base import Backend
from audee.backends.keras_build import BuiltModel, default_layer
from audee.spec import LayerSpec, ModelSpec, Weights


class KerasBackend(Backend):
    """Shared part: building the Keras model; subclasses provide the compiled call."""

    keras_backend: ClassVar[str] = ""

    @classmethod
    def prepare_process(cls, device: str) -> None:
        os.environ["KERAS_BACKEND"] = cls.keras_backend
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        if device == "cpu":
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            os.environ["JAX_PLATFORMS"] = "cpu"
            os.environ["KERAS_TORCH_DEVICE"] = "cpu"
        elif device.startswith("cuda"):
            os.environ["KERAS_TORCH_DEVICE"] = device
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

    @property
    def keras(self) -> Any:
        import keras  # noqa: PLC0415 - imported in the worker only, after prepare_process

        return keras

    def versions(self) -> dict[str, str]:
        import importlib.metadata as md

        return {"keras": md.version("keras"), self.framework: md.version(self.framework_dist)}

    framework: ClassVar[str] = ""
    framework_dist: ClassVar[str] = ""

    def make_layer(self, layer: LayerSpec) -> Any:
        """Instantiate one spec layer as a Keras layer (plugins override this)."""
        return default_layer(self.keras, layer)

    def build(self, spec: ModelSpec) -> BuiltModel:
        built = BuiltModel(spec, self.keras, self.make_layer)
        self.compile(built)
        return built

    def compile(self, built: BuiltModel) -> None:
        """Attach the compiled forward call to ``built.fn``."""
        raise NotImplementedError

    def weight_shapes(self, model: BuiltModel) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
        return model.weight_shapes()

    def set_weights(self, model: BuiltModel, weights: Weights) -> None:
        model.check_weights(weights)
        model.set_weights(weights)

    @staticmethod
    def _ordered(model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [inputs[i.name] for i in model.spec.inputs]


class TensorflowBackend(KerasBackend):
    name = "tensorflow"
    keras_backend = "tensorflow"
    framework = "tensorflow"
    framework_dist = "tensorflow-cpu"

    def versions(self) -> dict[str, str]:
        import tensorflow as tf

        return {"keras": self.keras.__version__, "tensorflow": tf.__version__}

    def compile(self, built: BuiltModel) -> None:
        import tensorflow as tf

        model = built.model
        device = "/GPU:0" if self.device.startswith("cuda") else "/CPU:0"

        @tf.function(reduce_retracing=True, autograph=False)
        def fn(xs: list) -> list:
            with tf.device(device):
                return model(xs, training=False)

        built.fn = fn

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        outs = model.fn(self._ordered(model, inputs))
        return [np.asarray(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]


class TorchBackend(KerasBackend):
    name = "torch"
    keras_backend = "torch"
    framework = "torch"
    framework_dist = "torch"

    def versions(self) -> dict[str, str]:
        import torch

        return {"keras": self.keras.__version__, "torch": torch.__version__}

    def compile(self, built: BuiltModel) -> None:
        import torch

        built.model.eval()
        built.torch_device = torch.device(self.device if self.device.startswith("cuda") else "cpu")

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        import torch

        xs = [torch.from_numpy(np.ascontiguousarray(a)).to(model.torch_device) for a in self._ordered(model, inputs)]
        with torch.no_grad():
            outs = model.model(xs, training=False)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [o.detach().cpu().numpy() for o in outs]


class JaxBackend(KerasBackend):
    """JAX: ``jax.jit`` over ``stateless_call``; weights are jit arguments, so swapping
    them costs a host-to-device copy and no retrace."""

    name = "jax"
    keras_backend = "jax"
    framework = "jax"
    framework_dist = "jax"

    def versions(self) -> dict[str, str]:
        import jax
        import jaxlib

        return {"keras": self.keras.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__}

    def compile(self, built: BuiltModel) -> None:
        import jax

        model = built.model

        def forward(tv: list, ntv: list, xs: list) -> list:
            outs, _ = model.stateless_call(tv, ntv, xs, training=False)
            return outs

        built.fn = jax.jit(forward)
        built.tv = [v.value for v in model.trainable_variables]
        built.ntv = [v.value for v in model.non_trainable_variables]

    def set_weights(self, model: BuiltModel, weights: Weights) -> None:
        import jax.numpy as jnp

        model.check_weights(weights)
        tv, ntv = model.flat_variables({k: [jnp.asarray(a) for a in v] for k, v in weights.items()})
        model.tv, model.ntv = tv, ntv

    def run(self, model: BuiltModel, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        outs = model.fn(model.tv, model.ntv, self._ordered(model, inputs))
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        return [np.asarray(o) for o in outs]
