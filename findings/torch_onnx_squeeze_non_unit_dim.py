"""torch.onnx.export(dynamo=True) (torch 2.13, onnxscript 0.7.2): `x.squeeze(dim)` of a
dimension whose size is not 1 -- a no-op in PyTorch ("If input is of shape (A x 1 x B),
squeeze(input, 0) leaves the tensor unchanged") -- is exported as ONNX `Squeeze(x, axes=[dim])`,
which the ONNX spec makes an error ("If an axis is selected with shape entry not equal to one,
an error is raised"): onnxruntime refuses the exported model, `[ShapeInferenceError] Dimension
of input 0 must be 1 instead of 3`.  The shapes are static in the export, so torchlib's
`aten_squeeze_dim` (onnxscript/function_libs/torch_lib/ops/core.py, trace_only) could emit
Identity there; it emits Squeeze unconditionally.

Keras' torch backend meets it in every `keras.ops.take` with axis=None or more than one index
(`torch.index_select(x, 0, indices).squeeze(0)`, a no-op squeeze before a reshape), hence
ContrastLimitedAdaptiveHistogramEqualization, whose bilinear lookups are four `take`s: its
torch.onnx export fails in onnxruntime for any image size and tile grid (1x4x4x1 with a 1x1
grid: "Dimension of input 0 must be 1 instead of 16").

Upstream: onnxscript's own tests skip the case ("this Aten overload only support squeeze dim
with size 1", tests/function_libs/torch_lib/ops_test_data.py, unchanged on main a39c0a5,
2026-08-21); no issue found for the dynamo exporter (queries: "torch.onnx dynamo export
squeeze(dim) non-1 dimension Squeeze node Dimension of input 0 must be 1", "onnxscript
torchlib aten_squeeze_dim dimension not 1 no-op squeeze should be identity").  The TorchScript
exporter's twin was pytorch/pytorch#36796 (closed), which that exporter handles with an If.

    python findings/torch_onnx_squeeze_non_unit_dim.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: torch 2.13.0+cpu, onnxscript 0.7.2, onnx 1.23.2, onnxruntime 1.31.1.  Found by audee
(the compilers campaign, rng 2811: torch-onnx refusing a CLAHE model that torch runs).
"""
import contextlib
import io
import sys

import numpy as np
import onnxruntime as ort
import torch


class SqueezeNoOp(torch.nn.Module):
    def forward(self, x):
        return x.squeeze(0) * 2.0  # dim 0 has size 3: torch leaves the shape alone


class TakeLikeKeras(torch.nn.Module):  # keras' torch `take(x, indices)` with axis=None
    def forward(self, x, i):
        return torch.index_select(x.reshape(-1), 0, i).squeeze(0)


refused = []
print("torch", torch.__version__, "onnxruntime", ort.__version__)
for mod, args in [(SqueezeNoOp(), (torch.ones(3, 2),)),
                  (TakeLikeKeras(), (torch.arange(6.0).reshape(3, 2), torch.tensor([5, 0, 2])))]:
    name = type(mod).__name__
    want = mod(*args)
    with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
        program = torch.onnx.export(mod, args, dynamo=True, opset_version=18)
    ops = [n.op_type for n in program.model_proto.graph.node]
    try:
        session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
        (got,) = session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)})
        print(f"{name}: torch {tuple(want.shape)}, onnxruntime {got.shape}, "
              f"max |d| {float(np.abs(got - want.numpy()).max()):.3g} (graph {ops})")
    except Exception as e:  # onnxruntime's Fail / InvalidGraph
        print(f"{name}: torch {tuple(want.shape)}; graph {ops}; onnxruntime: {str(e).splitlines()[0][:160]}")
        refused.append(name)
if refused:
    print("REPRODUCED: torch.onnx exports a no-op squeeze as an ONNX Squeeze onnxruntime refuses ("
          + ", ".join(refused) + ")")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
