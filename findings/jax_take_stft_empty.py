"""JAX: two empty-input shape bugs behind Keras JAX-backend failures on a batch of 0 rows.
(1) jnp.take(a, idx) with an EMPTY `a` (and axis=None) returns shape (0,) instead of idx.shape
    (NumPy: np.take(np.zeros(0), np.zeros((0,16,16,1),int)).shape == (0,16,16,1)).
    -> Keras ContrastLimitedAdaptiveHistogramEqualization on (0,16,16,1) returns (1,16,16,0).
(2) jax.scipy.signal.stft on an empty batch returns the input shape (0,320) instead of (0,33,17)
    (it copies scipy.signal.stft's early-return for x.size == 0).
    -> keras.ops.stft gives (320, 0); MelSpectrogram fails in dot_general."""
import os, sys
os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np, jax, jax.numpy as jnp

bad = 0
def check(name, fn, want):
    global bad
    try:
        got = tuple(fn().shape)
    except Exception as e:
        got = f"{type(e).__name__}: {' '.join(str(e).split())[:70]}"
    ok = got == want; bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {name:52s} got {got} want {want}")

idx0 = np.zeros((0, 16, 16, 1), np.int32)
check("jnp.take(zeros(0), idx(0,16,16,1))", lambda: jnp.take(jnp.zeros(0), idx0), np.take(np.zeros(0), idx0).shape)
check("jnp.take(zeros(0), idx(0,3), axis=0)", lambda: jnp.take(jnp.zeros(0), np.zeros((0, 3), np.int32), axis=0), (0, 3))
check("jnp.take(zeros(5), idx(0,16,16,1)) [control]", lambda: jnp.take(jnp.zeros(5), idx0), (0, 16, 16, 1))
kw = dict(fs=1.0, window=np.ones(64), nperseg=64, noverlap=48, boundary=None, padded=False)
check("jax.scipy.signal.stft(zeros((0,320)))", lambda: jax.scipy.signal.stft(jnp.zeros((0, 320)), **kw)[2], (0, 33, 17))
if "--keras" in sys.argv:
    import keras
    x = np.zeros((0, 16, 16, 1), "float32")
    check("keras CLAHE on (0,16,16,1)", lambda: keras.layers.ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 255))(x), (0, 16, 16, 1))
    check("keras.ops.stft(zeros((0,256)),64,16,64)[0]", lambda: keras.ops.stft(np.zeros((0, 256), "float32"), 64, 16, 64)[0], (0, 17, 33))
    check("keras MelSpectrogram on (0,256)", lambda: keras.layers.MelSpectrogram(fft_length=64, sequence_stride=16, num_mel_bins=8)(np.zeros((0, 256), "float32")), (0, 8, 17))
print("jax", jax.__version__)
if bad:
    print(f"REPRODUCED {bad} check(s) fail with an empty batch"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
