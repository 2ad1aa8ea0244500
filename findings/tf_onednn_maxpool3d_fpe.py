"""TensorFlow 2.21 (CPU, eager, oneDNN on: the default): tf.nn.max_pool3d with a window one
wider than the input's width (VALID padding, so an empty output) kills the process with
SIGFPE instead of returning an empty tensor or raising.  With TF_ENABLE_ONEDNN_OPTS=0 the
same call returns shape (8, 1, 1, 0, 3); inside tf.function it raises a clean "Negative
dimension size" error; a window larger than the depth (not the width) returns an empty
tensor.  audee reached it through keras.layers.AdaptiveMaxPooling3D(output_size=(1, 1, 1))
on (8, 6, 2, 8, 3) in the tensorflow-eager backend (Keras' two-pool gather always builds a
window one wider than the input, finding 1).  Known: tensorflow/tensorflow#94120, fixed by
the open pull request tensorflow/tensorflow#99921 (oneDNN 3D max pooling with a 0 output
dimension); earlier reports of max_pool3d FPEs: #65120, #46834.

    python findings/tf_onednn_maxpool3d_fpe.py     # exit 1 and REPRODUCED while the bug is there
"""
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN on, as on the CPUs where TensorFlow turns it on by default (AVX-512 VNNI/BF16, AMX): on others
# (an AVX2 CPU) TensorFlow 2.21 leaves it off, and its own kernels compute this right
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
CALL = ("import tensorflow as tf; x = tf.zeros([8, 1, 1, 8, 3]); "
        "print(tf.nn.max_pool3d(x, ksize=[1, 1, 1, 9, 1], strides=[1, 1, 1, 1, 1], padding='VALID').shape)")
if __name__ == "__main__":
    p = subprocess.run([sys.executable, "-c", CALL], capture_output=True, text=True)
    import tensorflow as tf
    print("tensorflow", tf.__version__)
    if p.returncode == -8:
        print("REPRODUCED: eager tf.nn.max_pool3d killed by SIGFPE")
        sys.exit(1)
    print(f"NOT REPRODUCED: exit {p.returncode}, stdout {p.stdout.strip()!r}")
