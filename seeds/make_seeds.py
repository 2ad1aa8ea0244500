"""Regenerate the seven seed DNNs: spec.json, inputs.npz and seed.json (and, with
--train, weights.npz for the trained seeds).  Deterministic: fixed numpy and Keras seeds.

    python seeds/make_seeds.py                            # specs, inputs, metadata
    python seeds/make_seeds.py --train                    # also retrain lenet5, simplernn, lstm, gru
    python seeds/make_seeds.py --out DIR                  # write the seed directories under DIR instead
    python seeds/make_seeds.py --digits F                 # another copy of digits.csv.gz, or a scikit-learn wheel

The digits are scikit-learn's bundled copy of the UCI handwritten digits, shipped as
seeds/data/digits.csv.gz (checked by SHA-256; the same file can be read straight out of
a scikit-learn wheel, which need not be installed): see seeds/README.md.
"""
from __future__ import annotations

import argparse
import gzip
import json
import hashlib
import os
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE  # where the seed directories are written (--out)
sys.path.insert(0, str(HERE.parent))

from audee.cases.spec import InputSpec, LayerSpec, ModelSpec, save_weights  # noqa: E402


class Builder:
    """Append layers to a spec by name; returns each new layer's name for wiring."""

    def __init__(self, name: str, inputs: list[InputSpec]):
        self.spec = ModelSpec(name, inputs, [], output="")
        self.count: dict[str, int] = {}

    def add(self, api: str, inputs: str | list[str], name: str | None = None, fixed: list[str] | None = None,
            **params: Any) -> str:
        if name is None:
            base = re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])", "_", api).lower()  # ReLU -> relu, Conv2D -> conv2d
            self.count[base] = self.count.get(base, 0) + 1
            name = f"{base}_{self.count[base]}"
        self.spec.layers.append(LayerSpec(name, api, params, [inputs] if isinstance(inputs, str) else list(inputs),
                                          fixed or []))
        return name

    def head(self, x: str, classes: int) -> ModelSpec:
        logits = self.add("Dense", x, name="logits", fixed=["units"], units=classes)
        self.add("Softmax", logits, name="softmax")
        self.spec.output, self.spec.logits = "softmax", "logits"
        return ModelSpec.from_json(self.spec.to_json())


def lenet5() -> ModelSpec:
    b = Builder("lenet5", [InputSpec("image", (28, 28, 1), "float32", (0.0, 1.0))])
    x = b.add("Conv2D", "image", name="conv1", filters=6, kernel_size=5, padding="same", activation="relu")
    x = b.add("MaxPooling2D", x, name="pool1", pool_size=2)
    x = b.add("Conv2D", x, name="conv2", filters=16, kernel_size=5, padding="valid", activation="relu")
    x = b.add("MaxPooling2D", x, name="pool2", pool_size=2)
    x = b.add("Flatten", x, name="flatten")
    x = b.add("Dense", x, name="fc1", units=120, activation="relu")
    x = b.add("Dense", x, name="fc2", units=84, activation="relu")
    return b.head(x, 10)


IMAGE32 = InputSpec("image", (32, 32, 3), "float32", (0.0, 1.0))


def resnet20() -> ModelSpec:
    """The CIFAR ResNet-20 (He et al. 2016): 3 stages x 3 basic blocks, 16/32/64 filters."""
    b = Builder("resnet20", [IMAGE32])
    x = b.add("Conv2D", "image", filters=16, kernel_size=3, padding="same", use_bias=False)
    x = b.add("BatchNormalization", x)
    x = b.add("Activation", x, activation="relu")
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(3):
            strides = 2 if stage > 0 and block == 0 else 1
            y = b.add("Conv2D", x, filters=filters, kernel_size=3, strides=strides, padding="same", use_bias=False)
            y = b.add("BatchNormalization", y)
            y = b.add("Activation", y, activation="relu")
            y = b.add("Conv2D", y, filters=filters, kernel_size=3, padding="same", use_bias=False)
            y = b.add("BatchNormalization", y)
            shortcut = x
            if strides > 1:
                shortcut = b.add("Conv2D", x, filters=filters, kernel_size=1, strides=strides, use_bias=False)
                shortcut = b.add("BatchNormalization", shortcut)
            x = b.add("Add", [y, shortcut])
            x = b.add("Activation", x, activation="relu")
    x = b.add("GlobalAveragePooling2D", x)
    return b.head(x, 10)


def vgg16() -> ModelSpec:
    """VGG-16, the CIFAR variant: 13 3x3 convs with BN + ReLU, 5 max-pools, 512-wide head."""
    b = Builder("vgg16", [IMAGE32])
    x = "image"
    for v in (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"):
        if v == "M":
            x = b.add("MaxPooling2D", x, pool_size=2)
        else:
            x = b.add("Conv2D", x, filters=v, kernel_size=3, padding="same")
            x = b.add("BatchNormalization", x)
            x = b.add("ReLU", x)
    x = b.add("Flatten", x)
    x = b.add("Dense", x, units=512, activation="relu")
    x = b.add("Dropout", x, rate=0.5)
    return b.head(x, 10)


def mobilenetv2() -> ModelSpec:
    """MobileNet-V2 for 32x32 inputs (Sandler et al. 2018) at width multiplier 0.5:
    inverted residual blocks (1x1 expansion, 3x3 depthwise, linear 1x1 projection)."""
    b = Builder("mobilenetv2", [IMAGE32])

    def ch(c: float) -> int:
        return max(8, int(c * 0.5 + 4) // 8 * 8)

    x = b.add("Conv2D", "image", filters=ch(32), kernel_size=3, padding="same", use_bias=False)
    x = b.add("BatchNormalization", x)
    x = b.add("ReLU", x, max_value=6.0)
    cin = ch(32)
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)):
        cout = ch(c)
        for i in range(n):
            stride = s if i == 0 else 1
            y = x
            if t != 1:
                y = b.add("Conv2D", y, filters=cin * t, kernel_size=1, use_bias=False)
                y = b.add("BatchNormalization", y)
                y = b.add("ReLU", y, max_value=6.0)
            y = b.add("DepthwiseConv2D", y, kernel_size=3, strides=stride, padding="same", use_bias=False)
            y = b.add("BatchNormalization", y)
            y = b.add("ReLU", y, max_value=6.0)
            y = b.add("Conv2D", y, filters=cout, kernel_size=1, use_bias=False)
            y = b.add("BatchNormalization", y)
            x = b.add("Add", [y, x]) if stride == 1 and cin == cout else y
            cin = cout
    x = b.add("Conv2D", x, filters=640, kernel_size=1, use_bias=False)
    x = b.add("BatchNormalization", x)
    x = b.add("ReLU", x, max_value=6.0)
    x = b.add("GlobalAveragePooling2D", x)
    return b.head(x, 10)


VOCAB, SEQ = 200, 40


def rnn(kind: str) -> ModelSpec:
    b = Builder(kind.lower(), [InputSpec("tokens", (SEQ,), "int32", (0, VOCAB))])
    x = b.add("Embedding", "tokens", name="embedding", fixed=["input_dim"], input_dim=VOCAB, output_dim=32)
    x = b.add(kind, x, name=kind.lower(), units=32)
    return b.head(x, 2)


# ---- data ------------------------------------------------------------------------------------
DIGITS = HERE / "data" / "digits.csv.gz"
DIGITS_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"  # scikit-learn 1.x


def load_digits(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The 1797 8x8 digits (values 0..16 -> [0, 1]) and labels, from digits.csv.gz or
    from a scikit-learn wheel (``pip download --no-deps scikit-learn``)."""
    try:
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as whl:
                raw = whl.read("sklearn/datasets/data/digits.csv.gz")
        else:
            raw = path.read_bytes()
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        sys.exit(f"{path}: cannot read the digits: {exc}")
    if hashlib.sha256(raw).hexdigest() != DIGITS_SHA256:
        sys.exit(f"{path}: not the expected digits.csv.gz (SHA-256 differs)")
    text = gzip.decompress(raw).decode()
    data = np.loadtxt(text.splitlines(), delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8) / 16.0, data[:, -1].astype(np.int64)


def resize_bilinear(img: np.ndarray, size: int) -> np.ndarray:
    h, w = img.shape
    ys = (np.arange(size) + 0.5) * h / size - 0.5
    xs = (np.arange(size) + 0.5) * w / size - 0.5
    y0 = np.clip(np.floor(ys).astype(int), 0, h - 1)
    x0 = np.clip(np.floor(xs).astype(int), 0, w - 1)
    y1, x1 = np.clip(y0 + 1, 0, h - 1), np.clip(x0 + 1, 0, w - 1)
    wy = np.clip(ys - y0, 0, 1)[:, None]
    wx = np.clip(xs - x0, 0, 1)[None, :]
    top = img[np.ix_(y0, x0)] * (1 - wx) + img[np.ix_(y0, x1)] * wx
    bot = img[np.ix_(y1, x0)] * (1 - wx) + img[np.ix_(y1, x1)] * wx
    return top * (1 - wy) + bot * wy


def digits28(images8: np.ndarray) -> np.ndarray:
    """8x8 digits -> 20x20 (bilinear) centred in 28x28, like MNIST's layout."""
    out = np.zeros((len(images8), 28, 28, 1), np.float32)
    for i, im in enumerate(images8):
        out[i, 4:24, 4:24, 0] = np.clip(resize_bilinear(im, 20), 0, 1)
    return out


def synthetic_images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Smooth random colour fields with one filled shape; label = shape x colour class."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32] / 32.0
    imgs = np.empty((n, 32, 32, 3), np.float32)
    labels = rng.integers(0, 10, n)
    for i in range(n):
        field = np.zeros((32, 32, 3))
        for _ in range(3):
            fy, fx, ph = rng.uniform(0.5, 3, 2).tolist() + [rng.uniform(0, 6.3)]
            field += rng.uniform(-0.3, 0.3, 3) * np.sin(2 * np.pi * (fy * yy + fx * xx) + ph)[..., None]
        field = 0.5 + field / 2
        shape, colour = divmod(int(labels[i]), 5)
        cy, cx, r = rng.uniform(0.3, 0.7), rng.uniform(0.3, 0.7), rng.uniform(0.12, 0.25)
        mask = ((yy - cy) ** 2 + (xx - cx) ** 2 < r * r) if shape == 0 else \
            ((abs(yy - cy) < r) & (abs(xx - cx) < r))
        rgb = np.eye(3)[colour % 3] * 0.8 + 0.1 * (colour // 3)
        field[mask] = rgb
        imgs[i] = np.clip(field, 0, 1)
    return imgs, labels


def synthetic_tokens(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Token sequences; label 1 when ids in [1, 50) outnumber ids in [50, 100)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, VOCAB, (n, SEQ)).astype(np.int32)
    pos = ((x >= 1) & (x < 50)).sum(1)
    neg = ((x >= 50) & (x < 100)).sum(1)
    return x, (pos > neg).astype(np.int64)


# ---- training -----------------------------------------------------------------------------------
def train(spec: ModelSpec, x: np.ndarray, y: np.ndarray, epochs: int, lr: float, seed: int) -> tuple[dict, float]:
    import keras

    from audee.backends.keras_build import BuiltModel

    keras.utils.set_random_seed(seed)
    built = BuiltModel(spec, keras)
    model = keras.Model(built.inputs, built.model.outputs[built.output_index])
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=True)
    return built.get_weights(), model


def calibrate_and_probe(spec: ModelSpec, weight_seed: int, x: np.ndarray, y: np.ndarray, seed: int) -> tuple[dict, Any]:
    """Make an untrained deep seed classify something without shipping its big weights.

    Weights start from audee.cases.weights.init_weights (what audee uses at run time); then
    (1) every BatchNormalization gets the mean/variance its input actually has on the data
    (one training-mode pass with momentum 0), so signal flows instead of dying in ReLUs;
    (2) the logits layer is fitted on the frozen features (a linear probe).  Only the BN
    and logits arrays are returned: they are small, and the rest is re-created at run time.
    """
    import keras

    from audee.backends.keras_build import BuiltModel
    from audee.cases.weights import init_weights

    keras.utils.set_random_seed(seed)
    built = BuiltModel(spec, keras)
    built.set_weights(init_weights(built.weight_shapes(), weight_seed))
    bns = [built.layers[n] for n in built.order if spec.layer(n).api == "BatchNormalization"]
    for bn in bns:
        bn.momentum = 0.0
    built.model(x[:512], training=True)  # momentum 0: moving statistics = this batch's statistics
    for bn, n in zip(bns, [n for n in built.order if spec.layer(n).api == "BatchNormalization"]):
        bn.momentum = spec.layer(n).params.get("momentum", 0.99)
    feats_at = built.order[built.order.index("logits") - 1]
    features = keras.Model(built.inputs, built.model.outputs[built.order.index(feats_at)])
    f = np.concatenate([np.asarray(features(x[i:i + 256], training=False)) for i in range(0, len(x), 256)])
    head_in = keras.Input(f.shape[1:])
    probe = keras.Model(head_in, keras.layers.Softmax()(built.layers["logits"](head_in)))
    probe.compile(optimizer=keras.optimizers.Adam(3e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    probe.fit(f, y, epochs=60, batch_size=64, verbose=0)
    keep = {n for n in built.order if spec.layer(n).api == "BatchNormalization"} | {"logits"}
    return {n: w for n, w in built.get_weights().items() if n in keep}, probe


def write(name: str, spec: ModelSpec, inputs: dict[str, np.ndarray], labels: np.ndarray, meta: dict) -> Path:
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    spec.save(d / "spec.json")
    np.savez_compressed(d / "inputs.npz", **inputs, labels=labels)
    (d / "seed.json").write_text(json.dumps(meta, indent=1) + "\n")
    return d


def _accuracy(spec: ModelSpec, wseed: int, partial: dict, x: np.ndarray, y: np.ndarray) -> float:
    """Accuracy of the seed as audee will run it: shipped arrays plus run-time init."""
    import keras

    from audee.backends.keras_build import BuiltModel
    from audee.cases.weights import adapt_weights

    built = BuiltModel(spec, keras)
    built.set_weights(adapt_weights(partial, built.weight_shapes(), wseed))
    out = np.asarray(built.model(x, training=False)[built.output_index])
    return float((out.argmax(1) == y).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--digits", default=str(DIGITS), help="digits.csv.gz or a scikit-learn wheel")
    ap.add_argument("--out", default=str(HERE), help="directory for the seed directories (default: seeds/)")
    args = ap.parse_args()
    global OUT
    OUT = Path(args.out)
    if args.train:
        os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    report = {}

    images8, digit_labels = load_digits(Path(args.digits))
    x28 = digits28(images8)
    order = np.random.default_rng(0).permutation(len(x28))
    train_idx, seed_idx = order[500:], order[:500]
    spec = lenet5()
    meta = {"description": "LeNet-5 (ReLU variant) on 28x28 grey digits",
            "data": "real: 500 held-out UCI handwritten digits (8x8, via scikit-learn) upscaled to 28x28",
            "weights": "trained: 30 epochs Adam on the other 1297 digits", "weight_seed": 1, "classes": 10,
            "input_scale": {"image": 1 / 255}}
    d = write("lenet5", spec, {"image": np.round(x28[seed_idx] * 255).astype(np.uint8)}, digit_labels[seed_idx], meta)
    if args.train:
        w, model = train(spec, x28[train_idx], digit_labels[train_idx], 30, 2e-3, 1)
        save_weights(w, d / "weights.npz")
        report["lenet5"] = float(model.evaluate(x28[seed_idx], digit_labels[seed_idx], verbose=0)[1])

    imgs, img_labels = synthetic_images(120, seed=7)
    imgs8 = np.round(imgs * 255).astype(np.uint8)
    train_imgs, train_labels = synthetic_images(1500, seed=8)
    train_imgs = np.round(train_imgs * 255).astype(np.float32) / 255
    for name, fn, desc in (("resnet20", resnet20, "CIFAR ResNet-20: 3 stages x 3 basic blocks, 16/32/64 filters"),
                           ("vgg16", vgg16, "VGG-16, CIFAR variant: 13 conv 3x3 + BN + ReLU, 512-wide head"),
                           ("mobilenetv2", mobilenetv2, "MobileNet-V2 for 32x32 inputs, width multiplier 0.5")):
        spec, wseed = fn(), len(name)
        d = write(name, spec, {"image": imgs8}, img_labels,
                  {"description": desc,
                   "data": "synthetic: 120 smooth random colour fields with one shape (numpy seed 7)",
                   "weights": f"init: audee.cases.weights.init_weights seed {wseed}; BatchNorm statistics calibrated "
                              "on 1500 other synthetic images and the logits layer fitted on the frozen features "
                              "(linear probe); only those arrays ship in weights.npz",
                   "weight_seed": wseed, "classes": 10, "input_scale": {"image": 1 / 255}})
        if args.train:
            w, probe = calibrate_and_probe(spec, wseed, train_imgs, train_labels, 5)
            save_weights(w, d / "weights.npz")
            report[name] = _accuracy(spec, wseed, w, imgs8.astype(np.float32) / 255, img_labels)

    tok_train, lab_train = synthetic_tokens(3000, seed=11)
    tok_seed, lab_seed = synthetic_tokens(200, seed=12)
    for kind in ("SimpleRNN", "LSTM", "GRU"):
        name = kind.lower()
        spec = rnn(kind)
        d = write(name, spec, {"tokens": tok_seed}, lab_seed,
                  {"description": f"Embedding(200, 32) -> {kind}(32) -> Dense(2) text classifier",
                   "data": "synthetic: 200 token sequences (vocabulary 200, length 40); label 1 when ids in "
                           "[1, 50) outnumber ids in [50, 100)",
                   "weights": "trained: 20 epochs Adam on 3000 other synthetic sequences", "weight_seed": 3,
                   "classes": 2})
        if args.train:
            w, model = train(spec, tok_train, lab_train, 20, 3e-3, 3)
            save_weights(w, d / "weights.npz")
            report[name] = float(model.evaluate(tok_seed, lab_seed, verbose=0)[1])
    if report:
        print(json.dumps({"held_out_accuracy": report}, indent=1))


if __name__ == "__main__":
    main()
