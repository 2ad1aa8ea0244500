"""Keras 3.15.1 on TensorFlow: ops.corrcoef(x) on a 1-D x raises ("In[0] ndims must be >= 2",
from tf.matmul), where numpy, torch and JAX return the scalar 1.0 (one variable).  Keras
3.15.1's docstring asks for "A 2D tensor of shape (N, D)", so a 1-D input is OUTSIDE its
contract; but upstream's symbolic spec now declares the 1-D case ("A 1D input yields a
scalar", keras-team/keras#23424, merged after 3.15.1), which makes the TF failure a bug there.
keras/src/backend/tensorflow/numpy.py, corrcoef: tf.matmul(x_centered, x_centered,
adjoint_b=True) needs rank 2; a reshape of a 1-D x to (1, D) would do.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_corrcoef_1d.py; done
    # prints REPRODUCED and exits 1 on tensorflow while it refuses 1-D input

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 return 1.0).  Found
by audee (op-level fuzzing, `audee fuzz --op corrcoef`: a float16 vector of 5).  Upstream:
the TF failure itself not found (query: "keras corrcoef 1-D input tensorflow matmul ndims must
be >= 2").
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for x in (np.array([1.0, 3.0, 2.0, 5.0], dtype="float32"), np.array([[1.0, 3.0, 2.0, 5.0], [2.0, 1.0, 0.0, 4.0]], "float32")):
    ref = np.corrcoef(x)
    try:
        y = ops.convert_to_numpy(ops.corrcoef(x))
        ok = y.shape == np.shape(ref) and np.allclose(y, ref, atol=1e-5)
        got = f"shape {y.shape} {np.round(y, 4).tolist()}"
    except Exception as e:
        ok, got = False, f"raises {type(e).__name__}: {str(e).split('}}')[-1].strip().splitlines()[0][:40]}"
    print(f"{keras.backend.backend():10s} corrcoef of {x.shape}: {got}  numpy shape {np.shape(ref)} {np.round(ref, 4).tolist()}")
    if not ok:
        failed.append(str(x.shape))
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
