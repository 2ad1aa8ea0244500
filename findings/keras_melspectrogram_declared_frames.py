#!/usr/bin/env python3
"""Keras 3.15's MelSpectrogram declares another number of frames than it computes.
compute_output_shape says (L + sequence_stride + 1) // sequence_stride frames for a signal of L
samples; the layer pads fft_length // 2 on each side (center=True) and computes
L // sequence_stride + 1.  The two agree only while (L + 1) % sequence_stride != 0: with
sequence_stride=1 the declaration is always one frame too many.  In a functional model every layer
after it is built from the declaration, so a Flatten + Dense behind it is built for 272 features and
fed 264: the model builds and then fails at predict on every backend.  TensorFlow, torch and JAX
compute the same frames, so no comparison between them sees it.  Keras' own test
(mel_spectrogram_test.py, test_output_shape) asserts the formula with L=16000/16001 and strides
128/64, where the two agree.  Found by audee's declared-output oracle (a layer's computed output
against its symbolic one).

    KERAS_BACKEND=jax python keras_melspectrogram_declared_frames.py
    # prints REPRODUCED and exits 1 while the declared and computed frames differ; else NOT
    # REPRODUCED, 0

Upstream: not reported (queries: "MelSpectrogram compute_output_shape wrong number of frames",
"keras MelSpectrogram layer output shape mismatch symbolic sequence_stride"); Keras' master of
2026-08-21 has the same formula.  Nearest keras-team/keras#22535 (fft_length >= sequence_length
checked only for eager inputs; fixed by #22549), another gap between the symbolic and eager paths.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} on {keras.backend.backend()}: MelSpectrogram, declared against computed frames")
off = 0
for samples, fft, stride in [(32, 4, 1), (63, 16, 2), (16000, 2048, 128)]:
    layer = keras.layers.MelSpectrogram(fft_length=fft, sequence_stride=stride, num_mel_bins=8, sampling_rate=16000)
    declared = layer(keras.Input(shape=(samples,))).shape
    computed = tuple(keras.ops.convert_to_numpy(layer(np.zeros((2, samples), np.float32) + 0.5)).shape)
    off += declared[-1] != computed[-1]
    print(f"  L={samples}, fft_length={fft}, sequence_stride={stride}: declared {declared}, computed {computed}")
inputs = keras.Input(shape=(32,))
hidden = keras.layers.Flatten()(keras.layers.MelSpectrogram(fft_length=4, sequence_stride=1, num_mel_bins=8,
                                                            sampling_rate=16000)(inputs))
model = keras.Model(inputs, keras.layers.Dense(2)(hidden))
try:
    model.predict(np.ones((2, 32), np.float32), verbose=0)
    print("  Flatten + Dense behind it: predict runs")
except Exception as exc:  # noqa: BLE001 - the consequence: the Dense was built from the declaration
    print(f"  Flatten + Dense behind it: predict fails: {type(exc).__name__}: {' '.join(str(exc).split())[:150]}")
print("REPRODUCED: MelSpectrogram declares (L + stride + 1) // stride frames and computes L // stride + 1" if off
      else "NOT REPRODUCED")
sys.exit(1 if off else 0)
