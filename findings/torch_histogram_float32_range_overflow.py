"""PyTorch 2.13 (reached through Keras 3.15.1's ops.histogram on the torch backend): the CPU
torch.histogram of float32 data whose range (max - min) times the bin count exceeds float32's
max (about 3.4e38) puts values in the wrong bin: [-2.42e38, -1.27, -1.73] with 9 bins gives
[1, 2, 0, ..., 0] where NumPy, JAX, TF (and torch in float64) give [1, 0, ..., 0, 2]: the two
values just below the maximum land in bin 1 instead of bin 8.  With range 1e37 (x 9 < 3.4e38) it is
right, from 1e38 on wrong (an overflow of (x - min) * bins before dividing by the range, presumably).
The edges are right.  Keras' torch backend calls torch.histogram directly
(keras/src/backend/torch/numpy.py, histogram, line 2392).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python torch_histogram_float32_range_overflow.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (tensorflow 2.21.0, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op histogram` with special inputs: a near-max
value, 9 bins; 1 case).
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for big in [1e37, 1e38, 2.420862369222063e38]:
    x = np.array([-big, -1.2656192779541016, -1.7261693477630615], "float32")
    rc, _ = np.histogram(x, bins=9)
    c, _ = ops.histogram(x, bins=9)
    c = ops.convert_to_numpy(c).astype(int)
    ok = np.array_equal(c, rc)
    print(f"{keras.backend.backend():10s} histogram([-{big:.3g}, -1.27, -1.73], bins=9): counts {c.tolist()} "
          f"(numpy {rc.tolist()}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"range {big:.3g}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
