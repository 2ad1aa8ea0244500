"""tf2onnx 1.17 converts `tf.one_hot` to an ONNX OneHot only when its output is float32; for
any other dtype (float16, bfloat16, float64, int32) it falls back to a rewrite that handles
rank-1 ids only ("onehot op: only rank1 is supported"), swallows that error and leaves the
TensorFlow node in the graph with its 4 inputs, so onnxruntime refuses the model
(INVALID_GRAPH: "has input size 4 not in range [min=3, max=3]").  Keras'
CategoryEncoding(output_mode="one_hot") under a float16/bfloat16/float64 policy, on ids of
rank 2, meets it.

    python findings/tf2onnx_onehot_rank2_dtype.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: tensorflow 2.21.0, tf2onnx 1.17.0, onnxruntime 1.31.1, CPU.  Not found upstream
(related only: onnx/tensorflow-onnx#852 and pull request #1675, the dtype fallback itself).
Found by audee (the api-cpu campaign, rng 2818: CategoryEncoding one_hot, bfloat16 policy,
rank-2 ids, onnxruntime refusing what TensorFlow runs).
"""
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import onnxruntime as ort
import tensorflow as tf
import tf2onnx

logging.getLogger("tf2onnx").setLevel(logging.ERROR)
ids = np.array([[0, 3, 1], [2, 2, 0]], np.int32)
failed = []
print("tensorflow", tf.__version__, "tf2onnx", tf2onnx.__version__, "onnxruntime", ort.__version__)
for dt in [tf.float32, tf.float16, tf.float64, tf.int32]:
    for rank in (2, 1):
        x = ids if rank == 2 else ids[0]
        sig = [tf.TensorSpec((None, 3) if rank == 2 else (None,), tf.int32)]
        f = tf.function(lambda i, dt=dt: tf.one_hot(i, 4, dtype=dt), input_signature=sig)
        proto, _ = tf2onnx.convert.from_function(f, input_signature=sig, opset=15)
        try:
            s = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
            y = s.run(None, {s.get_inputs()[0].name: x})[0]
            ok = np.array_equal(np.asarray(y, np.float64), tf.one_hot(x, 4, dtype=tf.float64).numpy())
            print(f"{dt.name:8s} ids of rank {rank}: {'= TensorFlow' if ok else 'differs from TensorFlow'}")
            if not ok:
                failed.append(f"{dt.name} rank {rank}")
        except Exception as e:  # onnxruntime's refusal of the graph
            print(f"{dt.name:8s} ids of rank {rank}: onnxruntime refuses: {str(e).splitlines()[0][:120]}")
            failed.append(f"{dt.name} rank {rank}")
if failed:
    print("REPRODUCED: tf2onnx's one_hot graph fails on onnxruntime for " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
