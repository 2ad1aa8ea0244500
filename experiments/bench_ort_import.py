"""What importing onnxruntime costs torch's TorchScript ONNX exporter in the same process.

A worker that exports a Keras-on-torch model and runs the graph on onnxruntime (``torch-onnx-ts``,
and the floor ``bench_vs_nnsmith.py`` holds audee to) has onnxruntime's pybind11 extension loaded
while torch exports.  Measured on this stack, that alone makes every later export cost more CPU:
the exporter walks the traced graph from Python through torch's pybind11 bindings node by node
(``_split_tensor_list_constants``, the symbolic functions), and those calls get slower once
onnxruntime's extension is imported (loading ``libonnxruntime.so`` alone with ``ctypes`` does not
do it).  This script measures it side by side: the same API-level specs exported in fresh
processes, with and without ``import onnxruntime`` first, alternating, one thread each, and
prints CPU seconds per export and the ratio.

    python experiments/bench_ort_import.py [--apis ConvLSTM3D,LSTM,MultiHeadAttention,GRU,Dense] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r'''
import json, os, sys, time
from audee.backends.worker import limit_threads
limit_threads(1)
if sys.argv[1] == "1":
    import onnxruntime  # noqa: F401 - the point
from audee.backends.torch_onnx_backend import TorchOnnxTsBackend
TorchOnnxTsBackend.prepare_process("cpu")
from audee.apis import load_api_configs
from audee.mutation.apilevel import generate_case
configs = load_api_configs()
backend = TorchOnnxTsBackend("cpu")
out = {}
for i, api in enumerate(["Softmax"] + sys.argv[2].split(",")):  # the first export's one-time costs
    case = generate_case(api, configs, 0, 0, batch=32, max_steps=4)
    try:
        model = backend.build(case.spec)
    except Exception:  # noqa: BLE001 - a draw no backend builds: not an export
        continue
    t = time.process_time()
    try:
        backend.export(model, tuple((32, *x.shape) for x in case.spec.inputs))
    except Exception:  # noqa: BLE001 - a refused export costs what it cost
        pass
    if i:
        out[api] = time.process_time() - t
print("RESULT " + json.dumps(out))
'''


def one(with_ort: bool, apis: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    got = subprocess.run([sys.executable, "-P", "-c", CHILD, "1" if with_ort else "0", apis], env=env,
                         capture_output=True, text=True)
    line = next((ln for ln in got.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"the child exited {got.returncode}:\n{got.stderr[-2000:]}")
    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apis", default="ConvLSTM3D,LSTM,MultiHeadAttention,GRU,Dense")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for with_ort in (False, True):
            runs[with_ort].append(one(with_ort, args.apis))
    print(f"CPU seconds per TorchScript export, mean of {args.rounds} fresh processes each (load "
          f"{os.getloadavg()[0]:.2f}):")
    print(f"{'api':<22} {'torch alone':>12} {'+ onnxruntime':>14} {'ratio':>7}")
    totals = [0.0, 0.0]
    for api in args.apis.split(","):
        if api not in runs[False][0]:
            continue
        a = sum(r[api] for r in runs[False]) / args.rounds
        b = sum(r[api] for r in runs[True]) / args.rounds
        totals[0] += a
        totals[1] += b
        print(f"{api:<22} {a:12.3f} {b:14.3f} {b / a:7.2f}")
    print(f"{'all':<22} {totals[0]:12.3f} {totals[1]:14.3f} {totals[1] / totals[0]:7.2f}")


if __name__ == "__main__":
    main()
