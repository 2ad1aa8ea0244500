"""Probe: a layer called in training mode against the output Keras declares for it.

The declared-output oracle (docs/oracles.md, "Declared outputs") judges inference.  Layers
that compute another way in training (batch statistics, dropout and noise, the image
augmentation layers, recurrent dropout) might return another dtype or shape there under a
low-precision policy.  This builds each of them under float32, float16, bfloat16 and
mixed_float16, calls the model with ``training=True`` and compares the output's shape and
dtype with the symbolic output's.  A layer that refuses a policy is printed apart (a crash
is the fuzzer's finding, not this probe's).

    KERAS_BACKEND=torch .venv/bin/python experiments/probes/declared_in_training.py
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
import keras  # noqa: E402
from keras import layers as L  # noqa: E402

SEQ, IMG, VEC = (4, 4), (6, 6, 3), (5,)
LAYERS = {  # name -> (constructor taking a dtype policy, input shape)
    "BatchNormalization": (lambda p: L.BatchNormalization(dtype=p), SEQ),
    "BatchNormalization(renorm)": (lambda p: L.BatchNormalization(renorm=True, dtype=p), SEQ),
    "BatchNormalization(axis=1)": (lambda p: L.BatchNormalization(axis=1, dtype=p), SEQ),
    "Dropout": (lambda p: L.Dropout(0.5, dtype=p), SEQ),
    "Dropout(noise_shape)": (lambda p: L.Dropout(0.5, noise_shape=(None, 1, 4), dtype=p), SEQ),
    "GaussianNoise": (lambda p: L.GaussianNoise(0.3, dtype=p), SEQ),
    "GaussianDropout": (lambda p: L.GaussianDropout(0.3, dtype=p), SEQ),
    "AlphaDropout": (lambda p: L.AlphaDropout(0.3, dtype=p), SEQ),
    "SpatialDropout1D": (lambda p: L.SpatialDropout1D(0.3, dtype=p), SEQ),
    "ActivityRegularization": (lambda p: L.ActivityRegularization(l1=0.1, dtype=p), SEQ),
    "GroupNormalization": (lambda p: L.GroupNormalization(groups=2, dtype=p), SEQ),
    "UnitNormalization": (lambda p: L.UnitNormalization(dtype=p), SEQ),
    "SpectralNormalization": (lambda p: L.SpectralNormalization(L.Dense(3, dtype=p), dtype=p), VEC),
    "LSTM(dropout)": (lambda p: L.LSTM(3, dropout=0.3, recurrent_dropout=0.3, return_sequences=True, dtype=p), SEQ),
    "GRU(dropout)": (lambda p: L.GRU(3, dropout=0.3, recurrent_dropout=0.3, dtype=p), SEQ),
    "SimpleRNN(dropout)": (lambda p: L.SimpleRNN(3, dropout=0.3, recurrent_dropout=0.3, dtype=p), SEQ),
    "Bidirectional(LSTM(dropout))": (lambda p: L.Bidirectional(L.LSTM(3, dropout=0.3), dtype=p), SEQ),
    "RandomFlip": (lambda p: L.RandomFlip(dtype=p), IMG),
    "RandomRotation": (lambda p: L.RandomRotation(0.2, dtype=p), IMG),
    "RandomZoom": (lambda p: L.RandomZoom(0.2, dtype=p), IMG),
    "RandomContrast": (lambda p: L.RandomContrast(0.2, dtype=p), IMG),
    "RandomBrightness": (lambda p: L.RandomBrightness(0.2, dtype=p), IMG),
    "RandomTranslation": (lambda p: L.RandomTranslation(0.2, 0.2, dtype=p), IMG),
    "RandomCrop": (lambda p: L.RandomCrop(3, 3, dtype=p), IMG),
    "RandomGrayscale": (lambda p: L.RandomGrayscale(dtype=p), IMG),
    "RandomSharpness": (lambda p: L.RandomSharpness(0.2, dtype=p), IMG),
    "RandomShear": (lambda p: L.RandomShear(0.2, 0.2, dtype=p), IMG),
    "RandomErasing": (lambda p: L.RandomErasing(dtype=p), IMG),
    "RandomGaussianBlur": (lambda p: L.RandomGaussianBlur(dtype=p), IMG),
    "RandomColorJitter": (lambda p: L.RandomColorJitter(brightness_factor=0.2, dtype=p), IMG),
    "RandomPerspective": (lambda p: L.RandomPerspective(dtype=p), IMG),
    "RandomPosterization": (lambda p: L.RandomPosterization(4, value_range=(0, 255), dtype=p), IMG),
    "RandomInvert": (lambda p: L.RandomInvert(dtype=p), IMG),
    "RandomHue": (lambda p: L.RandomHue(0.2, value_range=(0, 255), dtype=p), IMG),
    "RandomSaturation": (lambda p: L.RandomSaturation(0.2, value_range=(0, 255), dtype=p), IMG),
    "RandomColorDegeneration": (lambda p: L.RandomColorDegeneration(0.2, dtype=p), IMG),
    "RandAugment": (lambda p: L.RandAugment(dtype=p), IMG),
    "AugMix": (lambda p: L.AugMix(dtype=p), IMG),
    "CutMix": (lambda p: L.CutMix(dtype=p), IMG),
    "MixUp": (lambda p: L.MixUp(dtype=p), IMG),
    "Solarization": (lambda p: L.Solarization(addition_factor=0.2, dtype=p), IMG),
    "RandomElasticTransform": (lambda p: L.RandomElasticTransform(dtype=p), IMG),
}
POLICIES = ("float32", "float16", "bfloat16", "mixed_float16")


def main() -> int:
    rng = np.random.default_rng(0)
    checked = differ = refused = 0
    for name, (make, shape) in LAYERS.items():
        for policy in POLICIES:
            x = (rng.random((8, *shape)) * (255 if shape == IMG else 1)).astype("float32")
            try:
                inp = keras.Input(shape)
                out = make(policy)(inp, training=True)
                y = keras.Model(inp, out)(x, training=True)
            except Exception as exc:
                refused += 1
                print(f"refused  {name} {policy}: {type(exc).__name__}: {' '.join(str(exc).split())[:110]}")
                continue
            checked += 1
            declared, computed = tuple(out.shape), tuple(y.shape)
            fits = len(declared) == len(computed) and all(d is None or d == c for d, c in zip(declared, computed))
            dtype = keras.backend.standardize_dtype(y.dtype)
            if not fits or dtype != str(out.dtype):
                differ += 1
                print(f"DIFFERS  {name} {policy}: declared {declared} {out.dtype}, computed {computed} {dtype}")
    print(f"{keras.backend.backend()}: {checked} checked, {differ} unlike their declaration, {refused} refused")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
