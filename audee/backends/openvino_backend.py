"""OpenVINO: the ONNX graph tf2onnx makes of the Keras model (as for ``onnxruntime``),
read and compiled by OpenVINO's CPU plugin instead of onnxruntime.

The two share the converter and the graph, so a disagreement between ``onnxruntime`` and
``openvino`` is one of the runtimes (their frontends, graph transformations and kernels),
and one with the Keras backends that both share is the converter's.  Weights are baked in
as constants, as in a deployed model; a new weight set is a new compile, never a new
conversion.  The CPU plugin may compute float32 models in bfloat16 on CPUs that have it
(its ``INFERENCE_PRECISION_HINT``); audee asks for ``f32``, so it is judged as float32.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from audee.backends.onnx_backend import OnnxRuntimeBackend


class OpenVinoSession:
    """A compiled OpenVINO model behind onnxruntime's ``run(output names, feed)``."""

    def __init__(self, compiled: Any):
        self.compiled = compiled
        self.ports = {name: port for port in compiled.outputs for name in port.get_names()}

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        got = self.compiled(feed)
        return [np.asarray(got[self.ports[n]]) for n in names]


class OpenVinoBackend(OnnxRuntimeBackend):
    name = "openvino"

    def versions(self) -> dict[str, str]:
        import openvino

        got = super().versions()
        got.pop("onnxruntime", None)
        return {**got, "openvino": openvino.__version__.split("-")[0]}

    def precision_state(self) -> dict[str, str]:
        return {"mode": self.precision, "INFERENCE_PRECISION_HINT": "f32"}

    def session(self, proto: Any) -> OpenVinoSession:
        import openvino as ov

        if self.device != "cpu":
            raise RuntimeError("audee runs OpenVINO on its CPU plugin only")
        core = ov.Core()
        config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32"}
        if os.environ.get("AUDEE_THREADS"):
            config["INFERENCE_NUM_THREADS"] = int(os.environ["AUDEE_THREADS"])
        return OpenVinoSession(core.compile_model(core.read_model(proto.SerializeToString()), "CPU", config))
