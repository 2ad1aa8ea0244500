"""``torch-onnx``: the Keras model on the torch backend, exported by PyTorch's own ONNX
exporter (``torch.onnx.export(..., dynamo=True)``: ``torch.export``, then onnxscript's
translation and optimizer), run in onnxruntime.

A second, independent path into ONNX beside tf2onnx: the same Keras layers, another
framework's ops, another converter, the same runtime.  As for ``onnxruntime``, the stateless
call is exported with every weight as a graph input (the batch axis dynamic), so a new
weight set is baked in as constants and a new session, never a new export.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from audee.backends.keras_backends import TorchBackend, apply_precision_env
from audee.backends.keras_build import BuiltModel
from audee.backends.onnx_backend import OnnxModel, OnnxRuntimeBackend
from audee.spec import ModelSpec


class TorchOnnxBackend(OnnxRuntimeBackend):
    name = "torch-onnx"
    converter = "torch.onnx"
    opset = 18  # the dynamo exporter's lowest

    def __init__(self, device: str = "cpu", precision: str = "full"):
        super().__init__(device, precision)
        self.keras_side = TorchBackend("cpu")  # the export traces on the CPU

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        TorchBackend.prepare_process("cpu")
        apply_precision_env(device, precision)

    def versions(self) -> dict[str, str]:
        import onnx
        import onnxruntime
        import onnxscript

        return {**self.keras_side.versions(), "onnxscript": onnxscript.__version__, "onnx": onnx.__version__,
                "onnxruntime": onnxruntime.__version__}

    def variable_value(self, variable: Any) -> np.ndarray:
        """As numpy, bfloat16 included (``convert_to_numpy`` has no numpy type for torch's bfloat16)."""
        from audee.backends.keras_backends import _torch_to_numpy

        return _torch_to_numpy(variable.value)

    def output_names(self, om: OnnxModel) -> list[str]:
        """``audee_y<k>`` for layer k: the exporter names its own values after the modules
        that make them (``conv2d_1``), and a graph output named after a layer collided with
        one of those ("Duplicate definition of name" on ResNet-20, MobileNet-V2, VGG-16)."""
        return [f"audee_y{k}" for k in range(len(om.built.order))]

    def build(self, spec: ModelSpec) -> OnnxModel:
        keras = self.keras_side.keras
        built = BuiltModel(spec, keras, self.make_layer, init_weights=self.init_weights)
        variables = list(built.model.trainable_variables) + list(built.model.non_trainable_variables)
        return OnnxModel(built, [f"audee_w{k}" for k in range(len(variables))], (None, None, variables))

    def export(self, om: OnnxModel) -> Any:
        """``torch.onnx.export`` of the stateless call, inputs then weights, on zeros of
        batch 2 with the batch axis marked dynamic (``torch.export`` specializes a size 1)."""
        import torch

        built = om.built
        model, spec = built.model, built.spec
        n_x, n_tv = len(spec.inputs), len(built.trainable_variables)
        variables = om.conversion[2]

        class Stateless(torch.nn.Module):
            def forward(self, *args: Any) -> tuple:
                outs, _ = model.stateless_call(list(args[n_x:n_x + n_tv]), list(args[n_x + n_tv:]),
                                               list(args[:n_x]), training=False)
                return tuple(outs) if isinstance(outs, (list, tuple)) else (outs,)

        xs = [torch.zeros((2, *i.shape), dtype=getattr(torch, i.dtype)) for i in spec.inputs]
        ws = [v.value.detach() for v in variables]
        batch = torch.export.Dim("batch")
        shapes = tuple([{0: batch}] * n_x + [None] * len(ws))
        program = torch.onnx.export(Stateless(), tuple(xs + ws), dynamo=True, opset_version=self.opset,
                                    input_names=[i.name for i in spec.inputs] + om.weight_inputs,
                                    output_names=self.output_names(om), dynamic_shapes=(shapes,), verbose=False)
        return program.model_proto

