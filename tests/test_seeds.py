"""Every seed on every backend (real frameworks): builds, and the unmutated seed agrees."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from audee.backends.pool import Pool, WorkerFailure
from audee.backends.registry import DEFAULT_BACKENDS, parse_backends
from audee.cases.case import Outcome
from audee.core.errors import AudeeError
from audee.oracle.deviation import deviation_pairs
from audee.mutation.seeds import check_inputs, list_seeds, load_seed
from audee.cases.weights import adapt_weights

# measured by seeds/make_seeds.py --train (seeds/README.md); chance is 0.1 (10 classes) or 0.5
MIN_ACCURACY = {"lenet5": 0.95, "simplernn": 0.7, "lstm": 0.8, "gru": 0.8,
                "resnet20": 0.4, "vgg16": 0.4, "mobilenetv2": 0.15}
SEEDS = ["lenet5", "resnet20", "vgg16", "mobilenetv2", "simplernn", "lstm", "gru"]
ROOT = Path(__file__).resolve().parents[1]


def test_all_seven_seeds_ship_with_enough_inputs():
    assert set(SEEDS) <= set(list_seeds())
    for name in SEEDS:
        s = load_seed(name)
        n = next(iter(s.inputs.values())).shape[0]
        assert n >= 100, name
        for inp in s.spec.inputs:
            x = s.inputs[inp.name]
            assert x.dtype == np.dtype(inp.dtype)
            if inp.is_integer:
                assert x.min() >= inp.range[0] and x.max() < inp.range[1]
            else:
                assert 0.0 <= x.min() and x.max() <= 1.0
        assert s.spec.logits == "logits" and s.spec.output == "softmax"


def test_bad_inputs_name_file_and_input():
    s = load_seed("lstm")
    with pytest.raises(AudeeError, match=r"mine.npz: tokens: values outside \[0, 200\)"):
        check_inputs(s.spec, {"tokens": np.full((3, 40), 500)}, "mine.npz")
    with pytest.raises(AudeeError, match=r"mine.npz: tokens: shape \[3, 7\] does not fit"):
        check_inputs(s.spec, {"tokens": np.zeros((3, 7), int)}, "mine.npz")
    with pytest.raises(AudeeError, match="no seed named 'nope'"):
        load_seed("nope")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends(",".join(DEFAULT_BACKENDS)), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield p


HEAVY = ("mobilenetv2", "vgg16")  # the two largest seeds, 20-60 s each on 2 cores: make test-slow


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in SEEDS])
def test_seed_builds_and_agrees_on_every_backend(pool, name):
    seed = load_seed(name)
    built = pool.build(seed.spec)
    failures = {b: r.message for b, r in built.items() if isinstance(r, WorkerFailure)}
    assert not failures
    shapes = {b: r["shapes"] for b, r in built.items()}
    assert all(s == shapes["tensorflow"] for s in shapes.values())
    shapes = {k: [(r, tuple(s)) for r, s in v] for k, v in shapes["tensorflow"].items()}
    weights = adapt_weights(seed.weights or {}, shapes, seed.weight_seed)
    x = {k: v[:16] for k, v in seed.inputs.items()}
    got = pool.run(seed.spec, weights, f"{name}-w", x)
    ref = got["tensorflow"]
    scale = float(np.abs(ref["logits"]).mean()) + 1e-6
    for backend, r in got.items():
        assert not isinstance(r, WorkerFailure), (backend, r)
        assert r["nonfinite"] == []
        diff = np.abs(r["logits"] - ref["logits"])
        # float32 rounding accumulates over depth: relative to the logit scale, measured on
        # this stack (first 16 inputs): LeNet-5/RNNs mean <= 2.1e-7, max <= 6.1e-7; ResNet-20
        # 6.4e-7 / 4.8e-6; VGG-16 6.2e-6 / 2.8e-5; MobileNet-V2 (152 layers) 4.7e-5 / 1.7e-4
        assert diff.mean() / scale < 1e-4 and diff.max() / scale < 1e-3, (backend, diff.mean(), diff.max(), scale)
        agree = (r["output"].argmax(1) == ref["output"].argmax(1)).mean()
        assert agree >= 15 / 16, (backend, agree)
    # the deviation oracle with its default tolerances finds nothing on any pair (worst
    # measured score: 0.16, MobileNet-V2, onnxruntime against the others; audee/oracle/deviation.py)
    outcomes = [Outcome(b, logits=r["logits"], output=r["output"]) for b, r in got.items()]
    assert deviation_pairs(outcomes) == []
    if seed.weights is not None and seed.labels is not None:  # trained seeds classify their shipped inputs
        full = pool.run(seed.spec, weights, f"{name}-w", seed.inputs, labels=["tensorflow"])["tensorflow"]
        acc = (full["output"].argmax(1) == seed.labels).mean()
        assert acc >= MIN_ACCURACY[name], (name, acc)


def test_make_seeds_regenerates_the_shipped_files(tmp_path):
    """Offline and deterministic: specs, inputs and metadata come out byte-identical
    (the digits ship as seeds/data/digits.csv.gz; no framework is needed without --train)."""
    import subprocess
    import sys

    from audee.core.paths import seeds_dir

    script = ROOT / "seeds" / "make_seeds.py"  # a tool of the repository, not shipped in the wheel
    proc = subprocess.run([sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in SEEDS:
        for fname in ("spec.json", "inputs.npz", "seed.json"):
            made, shipped = tmp_path / name / fname, seeds_dir() / name / fname
            assert made.read_bytes() == shipped.read_bytes(), f"{name}/{fname} differs from make_seeds.py's output"


@pytest.mark.skipif(bool(os.environ.get("AUDEE_SEEDS")), reason="AUDEE_SEEDS points elsewhere")
def test_the_package_reads_the_top_level_seeds_folder():
    """seeds/ at the top of the repository is the source of truth: the package's
    audee/data/seeds is a link to it (a wheel carries copies: tests/test_wheel.py)."""
    from audee.core.paths import seeds_dir

    assert (ROOT / "audee" / "data" / "seeds").is_symlink()
    assert seeds_dir().resolve() == (ROOT / "seeds").resolve()
    assert {p.name for p in (ROOT / "seeds").iterdir() if (p / "spec.json").is_file()} == set(SEEDS)
