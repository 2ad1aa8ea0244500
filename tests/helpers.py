"""Small specs and inputs shared by tests (kept tiny so framework runs stay fast)."""
from __future__ import annotations

import numpy as np

from audee.cases.spec import ModelSpec


def tiny_cnn(name: str = "tiny") -> ModelSpec:
    return ModelSpec.from_json({
        "name": name,
        "inputs": [{"name": "image", "shape": [12, 12, 1], "range": [0, 1]}],
        "layers": [
            {"name": "conv", "api": "Conv2D", "params": {"filters": 4, "kernel_size": 3, "activation": "relu"},
             "inputs": ["image"]},
            {"name": "pool", "api": "MaxPooling2D", "params": {"pool_size": 2}, "inputs": ["conv"]},
            {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["pool"]},
            {"name": "logits", "api": "Dense", "params": {"units": 5}, "inputs": ["flat"], "fixed": ["units"]},
            {"name": "softmax", "api": "Softmax", "params": {}, "inputs": ["logits"]},
        ],
        "output": "softmax", "logits": "logits"})


def tiny_inputs(n: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    return {"image": np.random.default_rng(seed).random((n, 12, 12, 1), dtype=np.float32)}
