"""TensorFlow MirrorPad (tf.pad mode REFLECT/SYMMETRIC) refuses a 0-sized dim even with 0 padding
on it: tf.pad(zeros((0,4)), [[0,0],[1,1]], 'REFLECT') -> 'paddings must be less than the dimension
size: 0, 0 not less than 0'; np.pad gives (0,6). Breaks keras.ops.stft / MelSpectrogram on TF."""
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np, tensorflow as tf
bad = 0
for mode in ("REFLECT", "SYMMETRIC", "CONSTANT"):
    want = np.pad(np.zeros((0, 4)), ((0, 0), (1, 1)), mode=mode.lower() if mode != "CONSTANT" else "constant").shape
    try:
        got = tuple(tf.pad(tf.zeros((0, 4)), [[0, 0], [1, 1]], mode=mode).shape)
    except Exception as e:
        got = f"{type(e).__name__}: {' '.join(str(e).split())[-75:]}"
    ok = got == want; bad += not ok
    print(f"{'ok ' if ok else 'BAD'} tf.pad(zeros((0,4)), [[0,0],[1,1]], {mode:9s}) got {got} want {want}")
print("TF", tf.__version__)
if bad:
    print(f"REPRODUCED {bad} pad mode(s) fail on a 0-row input"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
