"""TensorFlow 2.21.0 (CPU, oneDNN on: the default; Keras 3.15.1, numpy): tf.einsum with an
ellipsis, '...a,ab->...b', in float16 returns wrong values once the ellipsis covers more than
one row: on x = [[1, 2, 3], [4, 5, 6]], w = [[1, 0], [0, 1], [1, 1]] it gives [[4, 5], [6, 7]]
instead of [[4, 5], [10, 11]] (row 1 is computed from [2, 3, 4], i.e. the rows are read at the
wrong stride).  The same call with TF_ENABLE_ONEDNN_OPTS=0, the explicit equations
'ia,ab->ib' / 'ija,ab->ijb', tf.matmul, and float32 / float64 / bfloat16 are all right.  The
error is of the size of the output itself.  audee reached it through Keras' EinsumDense
('...a,ab->...b', the dense_einsum rule rewrites Dense into it) under a float16 or
mixed_float16 dtype policy on the tensorflow backend.

    python findings/tf_onednn_einsum_ellipsis_fp16.py     # exit 1 and REPRODUCED while the bug is there

It runs the computation twice in subprocesses: with oneDNN on (default) and with
TF_ENABLE_ONEDNN_OPTS=0, and compares each with a numpy float64 reference.
"""
import json
import os
import subprocess
import sys

import numpy as np

def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith("flags") for w in line.split(":", 1)[1].split()}
    except OSError:
        return set()


# The bug is in oneDNN's AVX-512 kernels (TensorFlow's oneDNN float16 path): on a CPU without AVX-512, TensorFlow
# hands bfloat16 and float16 to its own Eigen kernels and oneDNN runs AVX2 ones, so this machine can
# show neither the bug nor its fix
if "avx512f" not in _cpu_flags():
    print("NOT TESTABLE HERE: this CPU has no AVX-512 (/proc/cpuinfo flags), and the bug needs oneDNN's "
          "AVX-512 kernels (TensorFlow's oneDNN float16 path)")
    sys.exit(2)


CHILD = r"""
import os, json
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf
x = np.array([[1, 2, 3], [4, 5, 6]], np.float16)
w = np.array([[1, 0], [0, 1], [1, 1]], np.float16)
rng = np.random.default_rng(0)
xr = rng.standard_normal((2, 3, 4)).astype(np.float16)
wr = rng.standard_normal((4, 3)).astype(np.float16)
out = {
  "small ...a,ab->...b float16": tf.einsum("...a,ab->...b", x, w).numpy().tolist(),
  "small ia,ab->ib float16": tf.einsum("ia,ab->ib", x, w).numpy().tolist(),
  "small ...a,ab->...b float32": tf.einsum("...a,ab->...b", x.astype(np.float32), w.astype(np.float32)).numpy().tolist(),
  "random (2,3,4)x(4,3) ...a,ab->...b float16": tf.einsum("...a,ab->...b", xr, wr).numpy().tolist(),
}
print(json.dumps({"tf": tf.__version__, "out": out}))
"""


def references():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float64)
    w = np.array([[1, 0], [0, 1], [1, 1]], np.float64)
    rng = np.random.default_rng(0)
    xr = rng.standard_normal((2, 3, 4)).astype(np.float16).astype(np.float64)
    wr = rng.standard_normal((4, 3)).astype(np.float16).astype(np.float64)
    return {"small ...a,ab->...b float16": x @ w, "small ia,ab->ib float16": x @ w,
            "small ...a,ab->...b float32": x @ w, "random (2,3,4)x(4,3) ...a,ab->...b float16": xr @ wr}


def run(onednn):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["TF_ENABLE_ONEDNN_OPTS"] = "1" if onednn else "0"  # on: as where TensorFlow turns it on by default
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"child failed (oneDNN {'on' if onednn else 'off'}): {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    ref = references()
    errs = {}
    for onednn in (True, False):
        got = run(onednn)
        tag = "oneDNN on " if onednn else "oneDNN off"
        if onednn:
            print("tensorflow", got["tf"])
        for name, y in got["out"].items():
            err = float(np.abs(np.asarray(y, np.float64) - ref[name]).max())
            errs[(onednn, name)] = err
            shown = f" -> {y}" if name.startswith("small") else ""
            print(f"{tag} {name}: max |y - ref| = {err:.3g}{shown}")
    print("reference small:", ref["small ...a,ab->...b float16"].tolist())
    key = "small ...a,ab->...b float16"
    # float16 rounding of these small integers is exact; the random case allows float16 rounding (~1e-2)
    bad_on = errs[(True, key)] > 0.5 or errs[(True, "random (2,3,4)x(4,3) ...a,ab->...b float16")] > 0.05
    ok_off = errs[(False, key)] == 0 and errs[(False, "random (2,3,4)x(4,3) ...a,ab->...b float16")] < 0.05
    if bad_on and ok_off:
        print("REPRODUCED: float16 tf.einsum('...a,ab->...b') wrong with oneDNN, right without")
        sys.exit(1)
    print("NOT REPRODUCED")
