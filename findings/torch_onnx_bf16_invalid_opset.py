"""PyTorch 2.13's ONNX exporter (torch.onnx.export(..., dynamo=True), onnxscript 0.7.2's torchlib)
writes bfloat16 Conv, AveragePool, MaxPool and Elu nodes into a graph stamped with an opset
where those ops do not take bfloat16 (they do only from opset 22): at the default opset (20)
and at 18 the exported model is invalid ONNX.  onnx 1.23.2's checker refuses it ("X typestr:
T, has unsupported type: tensor(bfloat16)") and onnxruntime 1.31.1 will not load it
(INVALID_GRAPH "Type Error: Type 'tensor(bfloat16)' of input parameter ... of operator (Conv)
... is invalid").  The export itself succeeds without a warning.  Exported at opset 22 the
same modules make a valid graph, which onnxruntime's CPU provider then refuses with its
explicit NOT_IMPLEMENTED "Could not find an implementation for Conv(22)" (no bfloat16
kernels on the CPU: a runtime limitation, not this bug); so it does for the valid bfloat16
Where, Pad and Expand the exporter writes for Keras Masking, ZeroPadding3D and RepeatVector /
UpSampling1D (printed last, for reference: microsoft/onnxruntime#13262).

audee reached it through Keras layers with dtype='bfloat16' on the torch backend
(AveragePooling1D, Conv2D/Conv3D, MaxPooling2D after a Conv2D, ELU) in the torch-onnx
backend (opset 18).  The torchlib relaxation is deliberate: microsoft/onnxscript#1894
("Include bfloat16 as part of the float types ... even though it is opset18 for now");
users meet it as microsoft/onnxruntime#25740 ("Cannot run bfloat16 convolution", open).

    python findings/torch_onnx_bf16_invalid_opset.py   # exit 1 and REPRODUCED while the bug is there

Needs torch, onnxscript, onnx, onnxruntime.
"""
import logging
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

BF16 = torch.bfloat16
MODULES = {  # name: (module, input shape)
    "Conv1d": (torch.nn.Conv1d(2, 4, 1).to(BF16), (2, 2, 7)),
    "AvgPool1d": (torch.nn.AvgPool1d(3, 3), (2, 2, 7)),
    "MaxPool2d": (torch.nn.MaxPool2d(2), (2, 1, 4, 4)),
    "ELU": (torch.nn.ELU(), (2, 5)),
}


class Where(torch.nn.Module):
    def forward(self, x):
        return torch.where(x != 0.5, x, torch.zeros_like(x))


class Pad(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.pad(x, (1, 1, 1, 1, 1, 1))


class Expand(torch.nn.Module):
    def forward(self, x):
        return x[:, None, :].expand(-1, 7, -1)


VALID = {"where": (Where(), (2, 6)), "pad": (Pad(), (2, 3, 3, 3, 1)), "expand": (Expand(), (2, 4))}


def check(module, shape, opset):
    """(opset stamped, checker verdict, onnxruntime verdict) of the export at ``opset`` (None: the default)."""
    x = torch.rand(shape).to(BF16)
    program = torch.onnx.export(module.eval(), (x,), dynamo=True, opset_version=opset, verbose=False)
    proto = program.model_proto
    stamped = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    try:
        onnx.checker.check_model(proto, full_check=True)
        checker = "valid"
    except Exception as exc:  # noqa: BLE001
        checker = "INVALID: " + str(exc).splitlines()[0][:110]
    try:
        ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        runtime = "loads"
    except Exception as exc:  # noqa: BLE001
        runtime = str(exc).split(" : ", 3)[-1].splitlines()[0][:110]
    return stamped, checker, runtime


if __name__ == "__main__":
    import onnxscript

    print(f"torch {torch.__version__}, onnxscript {onnxscript.__version__}, onnx {onnx.__version__}, "
          f"onnxruntime {ort.__version__}")
    invalid = []
    for name, (module, shape) in MODULES.items():
        for opset in (None, 18, 22):
            stamped, checker, runtime = check(module, shape, opset)
            asked = "default" if opset is None else opset
            print(f"  {name:9s} opset {asked} (stamped {stamped}): checker {checker}\n"
                  f"  {'':9s} onnxruntime: {runtime}")
            if checker.startswith("INVALID"):
                invalid.append(f"{name}@{stamped}")
    print("for reference, valid bfloat16 graphs onnxruntime's CPU provider has no kernel for (a limitation):")
    for name, (module, shape) in VALID.items():
        stamped, checker, runtime = check(module, shape, 18)
        print(f"  {name:9s} opset 18: checker {checker}; onnxruntime: {runtime}")
    if invalid:
        print(f"REPRODUCED: the exporter wrote bfloat16 nodes invalid at the graph's opset: {', '.join(invalid)}")
        sys.exit(1)
    print("NOT REPRODUCED: every exported graph is valid ONNX at its opset")
