""".keras import: a user's model becomes a spec + weights that reproduce it (real Keras).

Keras is never imported in the test process: the models are built and saved by a
subprocess (KERAS_BACKEND=tensorflow), and the import itself runs in a tensorflow
worker, as ``audee fuzz --seed model.keras`` does.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from audee.backends.pool import Pool, WorkerFailure
from audee.backends.registry import parse_backends
from audee.mutation.seeds import check_inputs
from audee.cases.spec import ModelSpec, weights_key
from audee.cases.weights import as_dtype

ROOT = Path(__file__).resolve().parent.parent

MAKE_MODELS = textwrap.dedent("""
    import os, sys
    import numpy as np
    import keras
    L = keras.layers
    out = sys.argv[1]
    keras.utils.set_random_seed(0)

    # functional: a residual block (Add skip) and a softmax classifier head
    x = keras.Input((12, 12, 3), name="image")
    y = L.Conv2D(8, 3, padding="same", name="conv-a")(x)   # '-' is not a spec name: renamed
    y = L.BatchNormalization(name="bn")(y)
    y = L.ReLU(max_value=6.0)(y)
    y = L.Conv2D(8, 3, padding="same", use_bias=False)(y)
    s = L.Conv2D(8, 1, name="shortcut")(x)
    y = L.Add()([y, s])
    y = L.Activation("relu")(y)
    y = L.MaxPooling2D()(y)
    y = L.Flatten()(y)
    y = L.Dropout(0.3)(y)
    y = L.Dense(5, activation="softmax", name="classes")(y)
    m = keras.Model(x, y, name="resblock")
    # non-trivial BN statistics, so the import must carry the moving averages
    bn = m.get_layer("bn")
    bn.set_weights([np.linspace(0.5, 1.5, 8), np.linspace(-0.2, 0.2, 8), np.linspace(-0.1, 0.3, 8),
                    np.linspace(0.4, 2.0, 8)])
    xs = np.random.default_rng(1).random((16, 12, 12, 3)).astype("float32")
    m.save(os.path.join(out, "resblock.keras"))
    np.savez(os.path.join(out, "resblock_ref.npz"), image=xs, out=m.predict(xs, verbose=0))

    # Sequential text classifier: integer tokens -> Embedding -> LSTM -> Dense(softmax)
    seq = keras.Sequential([keras.Input((10,), dtype="int32"), L.Embedding(30, 6), L.LSTM(4),
                            L.Dense(3, activation="softmax")], name="textcls")
    tokens = np.random.default_rng(2).integers(0, 30, (16, 10)).astype("int32")
    seq.save(os.path.join(out, "textcls.keras"))
    np.savez(os.path.join(out, "textcls_ref.npz"), tokens=tokens, out=seq.predict(tokens, verbose=0))

    # dtypes as the user made them: a float16 input, per-layer policies, a bfloat16 layer
    h = keras.Input((6, 6, 2), dtype="float16", name="half")
    y = L.Conv2D(3, 3, dtype="float16", name="c16")(h)
    y = L.BatchNormalization(dtype="mixed_float16", name="bn_mixed")(y)
    y = L.Flatten(name="flat32")(y)                      # Keras' default float32 policy
    y = L.Dense(4, dtype="bfloat16", name="d_bf16")(y)
    m = keras.Model(h, y, name="dtypes")
    m.get_layer("bn_mixed").set_weights([np.linspace(0.5, 1.5, 3), np.linspace(-0.2, 0.2, 3),
                                         np.linspace(-0.1, 0.3, 3), np.linspace(0.4, 2.0, 3)])
    xh = np.random.default_rng(3).random((8, 6, 6, 2)).astype("float16")
    m.save(os.path.join(out, "dtypes.keras"))
    np.savez(os.path.join(out, "dtypes_ref.npz"), half=xh, out=np.asarray(m(xh)).astype("float32"))

    # unsupported models
    a = keras.Input((4,), name="a")
    keras.Model(a, [L.Dense(2)(a), L.Dense(3)(a)]).save(os.path.join(out, "two_outputs.keras"))
    inner = keras.Sequential([keras.Input((4,)), L.Dense(2)], name="inner")
    keras.Model(a, L.Dense(2)(inner(a))).save(os.path.join(out, "nested.keras"))
    d = L.Dense(4)
    keras.Model(a, d(d(a))).save(os.path.join(out, "shared.keras"))
    seq_out = L.LSTM(3, return_state=True)(L.Reshape((2, 2))(a))
    keras.Model(a, L.Dense(2)(seq_out[0])).save(os.path.join(out, "states.keras"))
    print("ok")
""")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("keras_models")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-c", MAKE_MODELS, str(out)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends("tensorflow"), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield p


def _import(pool: Pool, path: Path) -> tuple[ModelSpec, dict]:
    got = pool.call("tensorflow", "import_keras", path=str(path))
    return ModelSpec.from_json(got["spec"], source=str(path)), got["weights"]


def _check_reproduces(pool: Pool, spec: ModelSpec, weights: dict, ref: dict, input_name: str) -> dict:
    inputs = check_inputs(spec, {input_name: ref[input_name]}, "ref.npz")
    got = pool.run(spec, weights, weights_key(weights), inputs, layers=True)["tensorflow"]
    assert not isinstance(got, WorkerFailure), got
    if str(got["output"].dtype) != "float32":   # the model's own precision, bit for bit on the same framework
        np.testing.assert_array_equal(got["output"].astype(np.float32), ref["out"])
        return got
    np.testing.assert_allclose(got["output"], ref["out"], rtol=1e-5, atol=1e-6)
    logits = got["logits"]
    soft = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(soft / soft.sum(1, keepdims=True), ref["out"], rtol=1e-5, atol=1e-6)
    return got


def test_functional_model_with_skip_connection(pool, models):
    spec, weights = _import(pool, models / "resblock.keras")
    # JSON round trip: what a case file stores rebuilds the same spec
    again = ModelSpec.loads(json.dumps(spec.to_json()))
    assert again.to_json() == spec.to_json() and again.key() == spec.key()
    assert spec.input_names == ["image"] and spec.inputs[0].shape == (12, 12, 3)
    apis = [layer.api for layer in spec.layers]
    assert apis.count("Conv2D") == 3 and "Add" in apis and "BatchNormalization" in apis
    add = next(layer for layer in spec.layers if layer.api == "Add")
    assert len(add.inputs) == 2 and "shortcut" in add.inputs
    assert "conv_a" in spec.layer_names()                                  # renamed to an identifier
    # the softmax Dense is split: linear Dense (logits, same weights) + Softmax (output)
    assert spec.logits == "classes" and spec.layer("classes").api == "Dense"
    assert "activation" not in spec.layer("classes").params and "units" in spec.layer("classes").fixed
    assert spec.layer(spec.output).api == "Softmax" and spec.layer(spec.output).inputs == ["classes"]
    assert spec.layer("re_lu").params == {"max_value": 6.0}
    for layer in spec.layers:                                               # constructor data only
        assert not {"name", "trainable", "dtype", "kernel_initializer"} & set(layer.params)
    assert [a.shape for a in weights["bn"]] == [(8,)] * 4 and weights["classes"][0].shape == (8 * 6 * 6, 5)
    ref = dict(np.load(models / "resblock_ref.npz"))
    _check_reproduces(pool, spec, weights, ref, "image")


def test_sequential_rnn_model(pool, models):
    spec, weights = _import(pool, models / "textcls.keras")
    inp = spec.inputs[0]
    assert inp.dtype == "int32" and inp.shape == (10,) and inp.range is None   # no range made up
    assert [layer.api for layer in spec.layers] == ["Embedding", "LSTM", "Dense", "Softmax"]
    assert spec.layers[0].fixed == ["input_dim"]
    ref = dict(np.load(models / "textcls_ref.npz"))
    _check_reproduces(pool, spec, weights, {**ref, inp.name: ref["tokens"]}, inp.name)
    # the user's token ids are taken as they are, also beyond the Embedding's 30 ids
    tokens = ref["tokens"].copy()
    tokens[0, :3] = [30, 31, 1000]
    taken = check_inputs(spec, {inp.name: tokens}, "tokens.npz")[inp.name]
    assert taken.dtype == np.int32
    np.testing.assert_array_equal(taken, tokens)


def test_dtype_policies_and_input_dtypes_arrive_as_they_are(pool, models):
    spec, weights = _import(pool, models / "dtypes.keras")
    again = ModelSpec.loads(json.dumps(spec.to_json()))
    assert again.to_json() == spec.to_json()
    assert [(i.name, i.dtype, i.range) for i in spec.inputs] == [("half", "float16", None)]
    assert {layer.name: layer.params.get("dtype") for layer in spec.layers} == {
        "c16": "float16", "bn_mixed": "mixed_float16", "flat32": None, "d_bf16": "bfloat16"}
    # weights in their variables' dtypes; bfloat16 widened to float32, exactly
    assert [a.dtype for a in weights["c16"]] == [np.float16] * 2
    assert [a.dtype for a in weights["bn_mixed"]] == [np.float32] * 4
    assert [a.dtype for a in weights["d_bf16"]] == [np.float32] * 2
    np.testing.assert_array_equal(weights["d_bf16"][0], as_dtype(weights["d_bf16"][0], "bfloat16").astype(np.float32))
    got = _check_reproduces(pool, spec, weights, dict(np.load(models / "dtypes_ref.npz")), "half")
    assert str(got["output"].dtype) == "bfloat16" and got["layers"]["c16"].dtype == np.float16
    assert got["layers"]["flat32"].dtype == np.float32


@pytest.mark.parametrize("name, message", [
    ("two_outputs", "2 outputs"),
    ("nested", "nested model"),
    ("shared", "applied more than once"),
    ("states", "returns 3 tensors"),
    ("missing", "no such file"),
])
def test_unsupported_models_name_the_file(pool, models, name, message):
    path = models / f"{name}.keras"
    text = pool.call("tensorflow", "import_keras", path=str(path))["refused"]
    assert "\n" not in text and f"{name}.keras" in text and message in text, text


@pytest.fixture
def small_tmpdir(tmp_path, monkeypatch):
    """A 1 MiB TMPDIR (a tmpfs: root only) for this test's processes and their workers."""
    import shutil
    import tempfile

    small = tmp_path / "small"
    small.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a size-limited TMPDIR needs root to mount a tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    monkeypatch.setenv("TMPDIR", str(small))
    monkeypatch.setattr(tempfile, "tempdir", str(small))
    try:
        yield small
    finally:
        subprocess.run(["umount", str(small)], check=True)


@pytest.mark.fresh_workers  # its worker's own temp dir is watched as it ends
def test_a_model_whose_assets_fill_tmpdir_is_refused_and_leaves_no_extraction(models, small_tmpdir, tmp_path):
    """Keras extracts a .keras file's members into a temp dir to load its assets; when that
    fills TMPDIR the import is refused in one line and nothing extracted stays behind, not
    even in the worker's own temp dir while the worker lives on."""
    import zipfile

    big = tmp_path / "big_assets.keras"
    big.write_bytes((models / "textcls.keras").read_bytes())
    with zipfile.ZipFile(big, "a") as zf:  # 2 MiB that do not compress: more than TMPDIR holds
        zf.writestr("assets/blob.bin", np.random.default_rng(0).bytes(2 << 20), zipfile.ZIP_STORED)
    with Pool(parse_backends("tensorflow"), tmp_path / "logs", timeout=300) as p:
        assert p.start() == {}
        own = p.workers["tensorflow"].tmp
        assert own is not None and own.parent == small_tmpdir
        text = p.call("tensorflow", "import_keras", path=str(big))["refused"]
        assert "\n" not in text and "big_assets.keras" in text and "No space left on device" in text, text
        assert list(own.iterdir()) == []  # the partial extraction is gone with the failure
        spec, _ = _import(p, models / "textcls.keras")  # and the worker still imports
        assert spec.name == "textcls"
    assert list(small_tmpdir.iterdir()) == []
