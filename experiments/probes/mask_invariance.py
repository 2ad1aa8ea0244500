"""Probe: a masked layer's output must not depend on the values at its masked steps.

Keras' recurrent layers (SimpleRNN, LSTM, GRU, Bidirectional of one) and
GlobalAveragePooling1D take a ``mask``; what sits at a masked step is padding.  This runs
each with every ``return_sequences`` / ``go_backwards`` / ``unroll`` combination on
trailing, leading, interior and all-zero masks, once on the data and once with the masked
steps replaced by other finite values, and prints every layer whose output moved.  A bug
every Keras backend shares (no cross-backend oracle sees it) would show here; whether an
equivalence rule of this kind is worth building depends on it.

    KERAS_BACKEND=jax .venv/bin/python experiments/probes/mask_invariance.py
"""
from __future__ import annotations

import itertools
import sys
import warnings

import numpy as np

warnings.filterwarnings("ignore")
import keras  # noqa: E402
from keras import layers  # noqa: E402

B, T, F = 4, 6, 3
MASKS = {
    "trailing": [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]],
    "leading": [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 1], [0, 1, 1, 1, 1, 1]],
    "interior": [[1, 0, 1, 0, 1, 1], [1, 1, 0, 0, 1, 1], [0, 1, 0, 1, 0, 1], [1, 1, 1, 1, 1, 0]],
    "all-zero rows": [[0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]],
}


def recurrent(kind: str, **kw) -> keras.layers.Layer:
    if kind.startswith("Bi"):
        return layers.Bidirectional(getattr(layers, kind[2:])(5, **kw))
    return getattr(layers, kind)(5, **kw)


def main() -> int:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((B, T, F)).astype("float32")
    moved = checked = refused = 0
    models = []
    for kind in ("SimpleRNN", "LSTM", "GRU", "BiLSTM", "BiGRU"):
        for rs, gb, un in itertools.product([False, True], repeat=3):
            if kind.startswith("Bi") and gb:
                continue
            kw = dict(return_sequences=rs, go_backwards=gb, unroll=un)
            inp, mk = keras.Input((T, F)), keras.Input((T,), dtype="bool")
            models.append((f"{kind}{kw}", keras.Model([inp, mk], recurrent(kind, **kw)(inp, mask=mk)), False, True))
    for df in ("channels_last", "channels_first"):
        inp = keras.Input((T, F) if df == "channels_last" else (F, T))
        mk = keras.Input((T,), dtype="bool")
        models.append((f"GlobalAveragePooling1D({df})",
                       keras.Model([inp, mk], layers.GlobalAveragePooling1D(data_format=df)(inp, mask=mk)),
                       df == "channels_first", False))
    for name, model, transpose, empty_ok in models:
        for mname, rows in MASKS.items():
            if mname == "all-zero rows" and not empty_ok:  # averaging over no steps: 0/0, undocumented
                continue
            m = np.array(rows, bool)
            y = x.copy()
            y[~m] = rng.standard_normal(y[~m].shape).astype("float32") * 3 + 2
            a_in, b_in = (np.transpose(v, (0, 2, 1)) if transpose else v for v in (x, y))
            try:
                a = np.asarray(model.predict([a_in, m], verbose=0))
                b = np.asarray(model.predict([b_in, m], verbose=0))
            except Exception as exc:  # a backend's refusal is another oracle's finding
                refused += 1
                print(f"refused  {name} mask={mname}: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
                continue
            checked += 1
            d = float(np.abs(a - b).max())
            if not d <= 1e-5:
                moved += 1
                print(f"MOVED    {name} mask={mname}: max |difference| {d:.3g}")
    print(f"{keras.backend.backend()}: {checked} checked, {moved} moved by masked values, {refused} refused")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
