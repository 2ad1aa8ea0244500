"""Keras 3.15.1: CategoryEncoding(num_tokens=4) on ids outside its contract gives a different
answer on every backend, though its docstring says "All inputs to the layer must integers in
the range 0 <= value < num_tokens, or an error will be thrown":

  * float, non-integer ids (e.g. a float32 Input fed -0.7, 2.5): TensorFlow 2.21 and torch 2.13
    truncate toward zero (-0.7 -> 0, 2.5 -> 2); JAX 0.10.2 count/one_hot drop them (zeros:
    jax.nn.one_hot compares floats exactly, with a DeprecationWarning) while JAX multi_hot
    truncates -- the torch-vs-jax deviation audee found;
  * a negative int id: TF raises (count/multi_hot, "must be non-negative"), torch/JAX drop it;
  * an id >= num_tokens: torch raises RuntimeError, TF and JAX drop it.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_category_encoding_invalid_ids.py; done
    # prints REPRODUCED and exits 1 on a backend that accepts an id outside [0, num_tokens)
    # without the error the docstring promises (every backend, for some mode and id, today)

Found by audee (API-level fuzzing of CategoryEncoding with float32 inputs).  Upstream: the JAX
half is known (jax-ml/jax#25484, deprecation PR jax-ml/jax#25590); nothing found in
keras-team/keras for the missing validation / cross-backend divergence.
"""
import sys
import warnings
import numpy as np
import keras

warnings.simplefilter("ignore")
cases = {"float [-0.7, 2.5]": np.array([[-0.7, 2.5]], "float32"),
         "int [-1, 1]": np.array([[-1, 1]], "int32"), "int [4, 1]": np.array([[4, 1]], "int32")}
accepted = []  # (mode, ids) the layer answered without the promised error
for mode in ["count", "multi_hot", "one_hot"]:
    for name, x in cases.items():
        try:
            y = keras.ops.convert_to_numpy(keras.layers.CategoryEncoding(4, output_mode=mode)(x))
            got = str(y.astype(int).tolist()).replace(" ", "")
            accepted.append(f"{mode} {name}")
        except Exception as e:
            got = f"raises {type(e).__name__}"
        print(f"{keras.backend.backend():10s} {mode:9s} ids {name:18s} -> {got}")
if accepted:
    print(f"REPRODUCED on {keras.backend.backend()}: ids outside [0, 4) accepted without an error: "
          + ", ".join(accepted))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: every id outside [0, 4) raises")
