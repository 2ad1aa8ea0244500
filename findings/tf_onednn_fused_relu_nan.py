"""TensorFlow on the CPU, in a graph (tf.function, Keras' model.predict/fit/evaluate): grappler's
remapper fuses MatMul / Conv2D / Conv3D / DepthwiseConv2dNative + BiasAdd (or an Add of a 1-D
bias) + Relu or Relu6 into one oneDNN op (_FusedMatMul, _FusedConv2D, ...), and that op turns a
NaN into 0 where eager execution, XLA (jit_compile=True) and every other framework keep NaN:

  - relu(x @ w + b) on rows [inf, -inf], [nan, 1], [1, 2] (w = 1, b = 0.5): eager and XLA
    [nan, nan, 3.5], tf.function [0, 0, 3.5]; Relu6 alike; conv2d/conv3d/depthwise + bias alike;
  - Keras Dense(1, activation="relu") on those rows: model(x) [nan, nan, 3.5], model.predict(x)
    [0, 0, 3.5] (Conv2D/Conv3D with activation="relu" alike);
  - MatMul + Relu without a bias, a lone Relu, and the LeakyRelu / Elu / tanh / sigmoid / gelu
    fusions keep NaN.

Which part: with TF_ENABLE_ONEDNN_OPTS=0 the fused graph keeps NaN (TensorFlow's own Eigen
kernels), and so does the oneDNN build with grappler's remapper off
(tf.config.optimizer.set_experimental_options({"remapping": False})): the fusion hands the
activation to oneDNN as a post-op, and oneDNN's x64 JIT eltwise injector computes relu with
alpha 0 as `vmaxps(x, x, 0)` and clip (relu6) as `vmaxps`/`vminps`: x86 max/min return their
second operand, 0, when the first is NaN (uxlfoundation/oneDNN
src/cpu/x64/injectors/jit_uni_eltwise_injector.cpp, relu_zero_ns_compute_vector_fwd,
clip_compute_vector_fwd).  Leaky relu and elu go through compare + blend there, which keeps
NaN, as seen.  oneDNN's reference (benchdnn) propagates NaN, and oneDNN fixed the same
max-instruction loss for RISC-V only (uxlfoundation/oneDNN#5370, merged 2026-06: "ReLU with
alpha=0 returned 0 for NaN inputs ... Fused ReLU paths in ... convolution also replaced NaN
with 0"); the x64 injector is unchanged.  Not reported for x64 / TensorFlow (queries: "fused
matmul relu NaN", "_FusedConv2D NaN", "oneDNN relu NaN zero", "remapper NaN", "x64 jit eltwise
relu vmaxps NaN returns zero instead of NaN post-op", "tensorflow model.predict relu NaN
becomes 0 but model call eager returns NaN CPU"); related, not the same: tensorflow#40072 and
#32730 (GPU relu NaN -> 0, closed), #119628 (XLA relu6 NaN -> 0, open), openvino#35649
(OpenVINO's CPU Relu, a oneDNN fork); tensorflow#63391 / #63392 ("conv2d op produces output
without nan with nan inputs", a LeNet-5, closed stale without a diagnosis) may be this face.

    python findings/tf_onednn_fused_relu_nan.py
    # prints REPRODUCED and exits 1 while the bug is there
    TF_ENABLE_ONEDNN_OPTS=0 python findings/tf_onednn_fused_relu_nan.py   # NOT REPRODUCED

Versions: tensorflow 2.21.0 (its bundled oneDNN), keras 3.15.1, x86-64 CPU.  Found by audee
(the api-cpu campaign, rng 2813: lenet5-v00004, where fc1 = Dense(120, relu) gives 120 NaN on
torch, JAX and onnxruntime and none on TensorFlow's model.predict).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN on, as on the CPUs where TensorFlow turns it on by default (AVX-512 VNNI/BF16, AMX): on others
# (an AVX2 CPU) TensorFlow 2.21 leaves it off, and its own kernels compute this right
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np
import tensorflow as tf
import keras

tf.get_logger().setLevel("ERROR")

x = np.array([[np.inf, -np.inf], [np.nan, 1.0], [1.0, 2.0]], np.float32)  # x @ [1, 1]: nan, nan, 3
w, b = tf.ones([2, 1]), tf.constant([0.5])
acts = {"relu": tf.nn.relu, "relu6": tf.nn.relu6,
        "leaky_relu": lambda t: tf.nn.leaky_relu(t, 0.2), "elu": tf.nn.elu}
prods = {
    "matmul+bias_add": (lambda t: tf.nn.bias_add(tf.matmul(t, w), b), x),
    "conv2d+bias_add": (lambda t: tf.nn.bias_add(tf.nn.conv2d(t, tf.ones([1, 1, 2, 1]), 1, "VALID"), b),
                        x.reshape(1, 3, 1, 2)),
    "conv3d+bias_add": (lambda t: tf.nn.bias_add(tf.nn.conv3d(t, tf.ones([1, 1, 1, 2, 1]), [1] * 5, "VALID"), b),
                        x.reshape(1, 3, 1, 1, 2)),
}


def nan_mask(y) -> list:
    return np.isnan(np.asarray(y)).ravel().tolist()


print("tensorflow", tf.__version__, "keras", keras.__version__,
      "oneDNN opts", os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)"))
lost = []
for aname, act in acts.items():
    for pname, (prod, arg) in prods.items():
        f = lambda t, prod=prod, act=act: act(prod(t))  # noqa: E731
        eager = f(tf.constant(arg)).numpy().ravel()
        graph = tf.function(f)(tf.constant(arg)).numpy().ravel()
        xla = tf.function(f, jit_compile=True)(tf.constant(arg)).numpy().ravel()
        apart = nan_mask(eager) != nan_mask(graph)
        print(f"{aname:10s} {pname:16s} eager {eager.tolist()}  tf.function {graph.tolist()}  XLA {xla.tolist()}"
              + ("  <- NaN lost" if apart else ""))
        if apart:
            lost.append(f"{pname}+{aname}")

# The Keras face: a Dense(relu) called eagerly and through model.predict (a tf.function).
model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, activation="relu")])
model.layers[0].set_weights([np.ones((2, 1), np.float32), np.full((1,), 0.5, np.float32)])
called, predicted = np.asarray(model(x)).ravel(), model.predict(x, verbose=0).ravel()
print(f"keras Dense(1, relu): model(x) {called.tolist()}  model.predict(x) {predicted.tolist()}")
if nan_mask(called) != nan_mask(predicted):
    lost.append("keras Dense(relu) predict")

# The same graph with grappler's remapper off: no fusion, so no oneDNN post-op.
tf.config.optimizer.set_experimental_options({"remapping": False})
f = lambda t: tf.nn.relu(prods["matmul+bias_add"][0](t))  # noqa: E731
print(f"remapper off: relu(matmul+bias_add) tf.function {tf.function(f)(tf.constant(x)).numpy().ravel().tolist()}")

if lost:
    print("REPRODUCED: TensorFlow's fused (oneDNN) bias + relu/relu6 turns NaN into 0 in a graph ("
          + ", ".join(lost) + ")")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
