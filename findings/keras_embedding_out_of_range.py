"""Keras 3.15.1: Embedding with an id outside [-input_dim, input_dim) behaves differently per
backend: TensorFlow 2.21 raises InvalidArgumentError, torch 2.13 raises IndexError (and
onnxruntime 1.31, through tf2onnx, raises "indices element out of data bounds"), while JAX
0.10.2 silently returns a row of NaN (jnp.take's default mode="fill").  A negative id in
[-input_dim, 0) is accepted everywhere and wraps around (row input_dim + id).  The candidate's
"JAX clamps" is wrong: Keras's jax take() uses jnp.take, which fills with NaN.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_embedding_out_of_range.py; done
    # prints REPRODUCED and exits 1 on a backend that returns a value for an id out of range
    # (JAX's NaN row) or a wrong row for an id in range; TF and torch raise and do not reproduce

Found by audee (GRU/SimpleRNN/LSTM models with an Embedding; nan-Embedding-jax and divergent
acceptance on tensorflow/torch/onnxruntime).  Upstream: known -- keras-team/keras#18449
("Invalid behavior for ops.take with torch", closed as stale; a maintainer comment lists torch
IndexError / JAX NaN / TF for out-of-range ids); JAX's NaN fill is documented semantics
(jax-ml/jax#14193, #3774: "Sharp bits: out-of-bounds indexing").
"""
import sys
import numpy as np
import keras

table = np.arange(8, dtype="float32").reshape(4, 2)  # input_dim=4: row i = [2i, 2i+1]
emb = keras.layers.Embedding(4, 2, embeddings_initializer=keras.initializers.Constant(table))
failed = []
for ids in [3, -1, 4, -5, 100]:
    expect = f"row {ids % 4}" if -4 <= ids < 4 else "an error (out of range)"
    try:
        y = keras.ops.convert_to_numpy(emb(np.array([[ids]], "int32")))[0, 0]
        got = f"returns {y.tolist()}"
        ok = -4 <= ids < 4 and np.array_equal(y, table[ids % 4])
    except Exception as e:
        got = f"raises {type(e).__name__}"
        ok = not -4 <= ids < 4
    print(f"{keras.backend.backend():10s} id {ids:4d}: {got:28s} (expected {expect}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"id {ids} {got}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: ids out of range raise, ids in range give their row")
