"""TensorFlow 2.21 (CPU): the gradient of tf.nn.conv2d_transpose / conv3d_transpose with respect
to its input has the wrong shape when the output is empty (a 0 in output_shape): d loss / d x
comes back with the OUTPUT's shape, (1, 4, 0, 5) for an x of (1, 2, 1, 3), instead of zeros of
x's shape.  The backward op of a transposed convolution is a forward Conv2D/Conv3D of the
output gradient; with a zero-size input it returns a tensor of the wrong shape, so the next
op of the backward pass fails ("Cannot reshape a tensor with 0 elements to shape [16,24]").
Keras reaches it through Conv3DTranspose(padding='same', output_padding=...) whose output size
formula gives a 0 (kernel 2, stride 2, input size 1, output_padding 0 on that axis: torch,
JAX and TensorFlow all compute that empty output alike); torch and JAX then train it (the
gradient is zeros of the input's shape), TensorFlow cannot differentiate it.

    python tf_conv_transpose_empty_output_grad_shape.py   # prints REPRODUCED and exits 1 while the bug is there

Found by audee (training campaign experiments/campaigns/train-cpu.yaml, API-level case
api-Conv3DTranspose-v00002: Conv3DTranspose(30, (3, 2, 2), strides 2, 'same',
output_padding (1, 0, 0)) behind a Reshape adapter, float16; a divergent acceptance in the
gradient phase, TensorFlow the one that refuses; the run classed it 'harness' because
TensorFlow's filtered traceback ended in audee's frame).  Upstream: not found (queries:
"conv2d_transpose gradient wrong shape empty output zero size tensor GradientTape",
"tensorflow Conv2D zero-size input returns input unchanged wrong output shape empty tensor");
related: tensorflow/tensorflow#123894 (open PR: zero-sized Conv2D output in shape inference and
conv kernels), #21875 (closed: conv3d_transpose input gradient shape, other cause).
"""
import sys

import numpy as np
import tensorflow as tf

bad = []
cases = (("conv2d_transpose", tf.nn.conv2d_transpose, (1, 2, 1, 3), (2, 2, 5, 3), (1, 4, 2, 5)),
         ("conv2d_transpose", tf.nn.conv2d_transpose, (1, 2, 1, 3), (2, 2, 5, 3), (1, 4, 0, 5)),
         ("conv3d_transpose", tf.nn.conv3d_transpose, (1, 2, 2, 1, 3), (3, 2, 2, 5, 3), (1, 4, 4, 2, 5)),
         ("conv3d_transpose", tf.nn.conv3d_transpose, (1, 2, 2, 1, 3), (3, 2, 2, 5, 3), (1, 4, 4, 0, 5)))
for name, op, xs, fs, out_shape in cases:
    x = tf.constant(np.ones(xs, "float32"))
    f = tf.constant(np.ones(fs, "float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = op(x, f, out_shape, strides=2, padding="SAME")
        loss = tf.reduce_sum(y)
    g = tape.gradient(loss, x)
    ok = tuple(g.shape) == xs
    print(f"{name} x {xs} -> y {tuple(y.shape)}: d loss / d x has shape {tuple(g.shape)}{'' if ok else '  WRONG (x is ' + str(xs) + ')'}")
    if not ok:
        bad.append(f"{name} to {out_shape}")
if bad:
    print("REPRODUCED: the input gradient of an empty transposed convolution has the output's shape:", ", ".join(bad))
    sys.exit(1)
print("NOT REPRODUCED")
