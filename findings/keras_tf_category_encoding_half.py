"""Keras 3.15.1 on TensorFlow 2.21: CategoryEncoding(output_mode='count' or 'multi_hot') under a
float16 or bfloat16 dtype policy raises on integer ids of rank <= 2, where torch 2.13 and
JAX 0.10.2 return the counts.  keras/src/utils/numerical_utils.py takes a TensorFlow-only fast
path for rank <= 2 (tf_utils.tf_encode_categorical_inputs: tf.math.bincount / tf.sparse.bincount
with dtype=float16), whose Bincount kernels take only int32, int64, float32 and float64; the
fast path falls back to the backend-agnostic code only on ValueError, and TensorFlow raises
InvalidArgumentError eagerly and TypeError ("Value passed to parameter 'weights' has DataType
float16 not in list of allowed values") in a graph.  one_hot, mixed_float16 (float32 outputs)
and rank-3 ids (the generic path) are right.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_category_encoding_half.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Found by audee (training campaign experiments/campaigns/train-cpu.yaml, API-level case
api-CategoryEncoding-v00001: CategoryEncoding(num_tokens=8, output_mode='count') under the
float16 policy; a divergent acceptance, tensorflow the one that refuses; the inference phase
meets it alike).  Upstream: not found (queries: "CategoryEncoding float16 bincount weights
DataType float16 not in list of allowed values", "keras CategoryEncoding count mode dtype
float16 tensorflow backend error", "tf.math.bincount half precision weights unsupported
dtype"); related but other causes: keras-team/keras#19567 and #19583 (float32 ids cast in
graph mode, fixed).
"""
import re
import sys

import numpy as np
import keras

ids = np.array([[0, 1, 1, 3]], dtype="int32")
expected = {"count": [[1, 2, 0, 1]], "multi_hot": [[1, 1, 0, 1]]}
failed = []
for dtype in ("float16", "bfloat16", "mixed_float16", "float32"):
    for mode in ("count", "multi_hot"):
        for graph in (False, True):
            layer = keras.layers.CategoryEncoding(num_tokens=4, output_mode=mode, dtype=dtype)
            where = "model.predict" if graph else "eager call"
            try:
                if graph:
                    x = keras.Input((4,), dtype="int32")
                    y = keras.Model(x, layer(x)).predict(ids, verbose=0)
                else:
                    y = keras.ops.convert_to_numpy(layer(ids))
                got = np.asarray(y, dtype="float32").tolist()
                ok = got == expected[mode]
                print(f"{keras.backend.backend():10s} {dtype:13s} {mode:9s} {where:13s} -> {got}{'' if ok else '  WRONG'}")
                if not ok:
                    failed.append(f"{dtype} {mode} {where}")
            except Exception as e:
                text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
                line = next((ln for ln in text.splitlines() if "not in list" in ln or "OpKernel" in ln), text.splitlines()[0])
                print(f"{keras.backend.backend():10s} {dtype:13s} {mode:9s} {where:13s} raises {type(e).__name__}: {line.strip()[:110]}")
                failed.append(f"{dtype} {mode} {where}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
