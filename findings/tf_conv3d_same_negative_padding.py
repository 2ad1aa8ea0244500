"""TensorFlow 2.21 (CPU): tf.nn.conv3d with padding='SAME' and a stride larger than the kernel
samples the wrong positions when SAME's total padding would be negative: a 1x1x1 identity
kernel with stride 3 over 6 (or 9) depth values returns x[1], x[4] where x[0], x[3] are right
(SAME pads max(0, ...) = 0, so SAME equals VALID here).  The Eigen kernel (float64 always;
float32/float16 when oneDNN is off, TF_ENABLE_ONEDNN_OPTS=0) is wrong; oneDNN's float32 and
float16 are right, and tf.nn.conv2d / conv1d are right (the conv2d case was fixed in 2016,
tensorflow/tensorflow#1991).  Reached by Keras Conv3D(kernel_size 1, strides 3, padding='same')
under a float64 policy (or on a TensorFlow without oneDNN, where MaxPooling3D / AveragePooling3D
with pool 1, strides 3, 'same' sample from offset 1 too).

    python tf_conv3d_same_negative_padding.py                          # float64 wrong
    TF_ENABLE_ONEDNN_OPTS=0 python tf_conv3d_same_negative_padding.py  # float32 wrong too
    # prints REPRODUCED and exits 1 while the bug is there

Found by audee's equivalence oracle (rule float64: api-Conv3D-v00016, Conv3D(34, 1, strides 3,
'same') on a 4x3x4 input; the float64 model off its float32 twin by 1369 times the tolerance on
TensorFlow alone).  Upstream: not found for Conv3D (query: "tensorflow conv3d SAME padding
stride larger than kernel wrong output offset float64 CPU"); the same class for Conv2D:
tensorflow/tensorflow#14601 (closed), fixed by tensorflow/tensorflow#1991.
"""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import sys

import numpy as np
import tensorflow as tf

bad = []
for n in (5, 6, 7, 9):
    x = np.arange(float(n))
    want = x[::3]
    for dtype in ("float32", "float64"):
        got3 = tf.nn.conv3d(x.reshape(1, n, 1, 1, 1).astype(dtype), np.ones((1, 1, 1, 1, 1), dtype),
                            [1, 3, 1, 1, 1], "SAME").numpy().ravel()
        got2 = tf.nn.conv2d(x.reshape(1, n, 1, 1).astype(dtype), np.ones((1, 1, 1, 1), dtype),
                            [1, 3, 1, 1], "SAME").numpy().ravel()
        ok = np.array_equal(got3, want)
        print(f"n={n} {dtype}: conv3d SAME stride 3 -> {got3.tolist()}  conv2d -> {got2.tolist()}  want "
              f"{want.tolist()}  {'ok' if ok else 'WRONG'}")
        if not ok:
            bad.append(f"n={n} {dtype}")
# the 3-D pooling kernels pad alike where oneDNN is off (float32 only: no float64 kernel)
x = np.arange(6.0, dtype="float32").reshape(1, 6, 1, 1, 1)
for pool in (tf.nn.max_pool3d, tf.nn.avg_pool3d):
    got = pool(x, 1, [1, 3, 1, 1, 1], "SAME").numpy().ravel()
    print(f"{pool.__name__} ksize 1, stride 3, SAME over 6 -> {got.tolist()}  want [0.0, 3.0]"
          f"  {'ok' if got.tolist() == [0.0, 3.0] else 'WRONG'}")
    if got.tolist() != [0.0, 3.0]:
        bad.append(f"{pool.__name__} float32")
print(f"REPRODUCED: {', '.join(bad)}" if bad else "NOT REPRODUCED")
sys.exit(1 if bad else 0)
