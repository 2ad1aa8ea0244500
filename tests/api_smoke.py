"""Build and call configured Keras layer APIs on small inputs, in a process of its own.

``python -m tests.api_smoke draws N [API ...]`` instantiates each API with N parameter sets
drawn by ``audee.mutation.draw_value`` (each mutable parameter redrawn with probability 0.5,
as network mutation does) and calls it on a small input of an accepted rank;
``python -m tests.api_smoke values [API ...]`` builds each API once per listed valid value
(and range end) of each parameter, the rest at a working base.  Both print one JSON list of
``{"api", "params", "rank", "error"}`` (error null when it ran).  Run by
``tests/test_api_configs.py`` in a subprocess, so pytest itself never imports keras.
"""
from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Any

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "jax")

from audee.apis import ApiConfig, ParamConfig, load_api_configs  # noqa: E402
from audee.mutation import draw_value  # noqa: E402
from audee.cases.spec import LayerSpec  # noqa: E402

SIZES = {2: 8, 3: 8, 4: 8, 5: 8, 6: 7}  # every non-batch dimension of a rank's test input
BATCH = 2

# What an API needs to build at all, for parameters that are required and not drawn.
_CONV = {"filters": 8, "kernel_size": 3}
BASE: dict[str, dict[str, Any]] = {
    **{f"Conv{d}D": _CONV for d in (1, 2, 3)}, **{f"Conv{d}DTranspose": _CONV for d in (1, 2, 3)},
    **{f"SeparableConv{d}D": _CONV for d in (1, 2)}, **{f"DepthwiseConv{d}D": {"kernel_size": 3} for d in (1, 2)},
    **{f"ConvLSTM{d}D": {"filters": 4, "kernel_size": 3} for d in (1, 2, 3)},
    **{f"AveragePooling{d}D": {"pool_size": 2} for d in (1, 2, 3)},
    **{f"Adaptive{k}Pooling{d}D": {"output_size": 2} for k in ("Max", "Average") for d in (1, 2, 3)},
    "Dense": {"units": 4}, "EinsumDense": {"equation": "ab,bc->ac", "output_shape": 4, "bias_axes": "c"},
    "Activation": {"activation": "relu"}, "Dropout": {"rate": 0.5}, "AlphaDropout": {"rate": 0.5},
    "GaussianDropout": {"rate": 0.5}, "GaussianNoise": {"stddev": 0.5},
    **{f"SpatialDropout{d}D": {"rate": 0.5} for d in (1, 2, 3)},
    "SimpleRNN": {"units": 4}, "LSTM": {"units": 4}, "GRU": {"units": 4},
    "Embedding": {"input_dim": 16, "output_dim": 4}, "ReversibleEmbedding": {"input_dim": 16, "output_dim": 4},
    "RepeatVector": {"n": 2}, "Dot": {"axes": -1},
    "MultiHeadAttention": {"num_heads": 2, "key_dim": 4},
    "GroupQueryAttention": {"head_dim": 4, "num_query_heads": 2, "num_key_value_heads": 1},
    "Rescaling": {"scale": 0.5}, "Resizing": {"height": 4, "width": 4}, "CenterCrop": {"height": 4, "width": 4},
    "Normalization": {"mean": 0.0, "variance": 1.0}, "Discretization": {"bin_boundaries": [-1.0, 0.0, 1.0]},
    "CategoryEncoding": {"num_tokens": 8}, "GroupNormalization": {"groups": 2},
    "STFTSpectrogram": {"frame_length": 4}, "MelSpectrogram": {"fft_length": 4, "sequence_stride": 2},
    "RandomRotation": {"factor": 0.2}, "RandomZoom": {"height_factor": 0.2},
    "RandomTranslation": {"height_factor": 0.2, "width_factor": 0.2}, "RandomContrast": {"factor": 0.5},
    "RandomBrightness": {"factor": 0.5}, "RandomCrop": {"height": 4, "width": 4}, "RandomSharpness": {"factor": 0.5},
    "RandomPosterization": {"factor": 4},
    # the RGB augmentations (``channels: 3``: their test input has three channels)
    "RandomGrayscale": {"factor": 0.5}, "RandomHue": {"factor": 0.5}, "RandomSaturation": {"factor": 0.5},
    "RandomColorDegeneration": {"factor": 0.5},
    # no saturation or hue step at base: Keras 3.15.1 builds them channels_last whatever data_format says
    "RandomColorJitter": {"brightness_factor": 0.2, "contrast_factor": 0.5},
    "RandAugment": {"num_ops": 2, "factor": 0.5}, "AugMix": {"num_chains": 2, "chain_depth": 2, "factor": 0.3},
}

# Values that only make sense together with others (checked in ``values`` mode with these set).
CONTEXT: dict[tuple[str, str], dict[str, Any]] = {
    **{(f"Conv{d}DTranspose", "output_padding"): {"strides": 3} for d in (1, 2, 3)},
    ("Resizing", "crop_to_aspect_ratio"): {"pad_to_aspect_ratio": False},
    ("GroupQueryAttention", "num_key_value_heads"): {"num_query_heads": 4},
    ("MultiHeadAttention", "attention_axes"): {"_rank": 4},
    ("Dot", "axes"): {"_rank": 3},
    ("Permute", "dims"): {"_rank_of_dims": True},
}


def _rank_dependent(api: str, rank: int) -> dict[str, Any]:
    """Parameters whose working value follows from the input rank."""
    n = SIZES[rank]
    if api == "Permute":
        return {"dims": list(range(rank - 1, 0, -1))}
    if api == "Reshape":
        return {"target_shape": [n, -1]}
    if api == "EinsumDense":
        return ({"equation": "abc,cd->abd", "output_shape": [n, 4], "bias_axes": "d"} if rank == 3 else
                {"equation": "ab,bc->ac", "output_shape": 4, "bias_axes": "c"})
    return {}


def _inner_layer(pcfg: ParamConfig, apis: dict[str, ApiConfig], rng: np.random.Generator) -> dict[str, Any]:
    """A wrapped layer as a spec holds it: one of the APIs it may wrap, with drawn parameters."""
    api = pcfg.apis[int(rng.integers(len(pcfg.apis)))]
    return {"api": api, "params": {**BASE.get(api, {}), **_draws(apis[api], rng)}}


def _draws(cfg: ApiConfig, rng: np.random.Generator) -> dict[str, Any]:
    return {name: draw_value(p, rng, invalid=False) for name, p in cfg.params.items()
            if p.mutable and p.type != "layer" and rng.random() < 0.5}


def _rank_for(cfg: ApiConfig, params: dict[str, Any], apis: dict[str, ApiConfig], k: int) -> int:
    inner = next((v for v in params.values() if isinstance(v, dict) and "api" in v), None)
    if cfg.api == "TimeDistributed" and inner is not None:
        inner_ranks = apis[inner["api"]].ranks or [2]
        return inner_ranks[0] + 1
    if cfg.api == "SpectralNormalization" and inner is not None:
        return (apis[inner["api"]].ranks or [2])[0]
    ranks = cfg.ranks or [3]
    return ranks[k % len(ranks)]


def _inputs(cfg: ApiConfig, params: dict[str, Any], rank: int, rng: np.random.Generator) -> list[np.ndarray]:
    shape = (BATCH,) + (SIZES[rank],) * (rank - 1)
    if cfg.channels is not None and rank > 2:  # an RGB augmentation: its channel axis is fixed
        axis = 1 if params.get("data_format") == "channels_first" else rank - 1
        shape = shape[:axis] + (cfg.channels,) + shape[axis + 1:]
    if cfg.api in ("Embedding", "ReversibleEmbedding", "CategoryEncoding"):
        high = params.get("input_dim", params.get("num_tokens", 8))
        high = high if isinstance(high, int) and high > 0 else 8
        return [rng.integers(0, high, size=shape).astype("int32")]
    n = 2 if cfg.inputs in (2, "many") else 1
    return [rng.normal(size=shape).astype("float32") for _ in range(n)]


def run_one(keras: Any, cfg: ApiConfig, params: dict[str, Any], rank: int, rng: np.random.Generator) -> str | None:
    """Build ``cfg.api`` with ``params`` (nested layers built as audee builds them) and call it; the error or None."""
    from audee.backends.keras_build import default_layer

    try:
        layer = default_layer(keras, LayerSpec("smoke", cfg.api, json.loads(json.dumps(params)), ["x"]))
        xs = _inputs(cfg, params, rank, rng)
        if cfg.api in ("MultiHeadAttention", "GroupQueryAttention"):
            out = layer(xs[0], xs[1])
        elif len(xs) > 1:
            out = layer(xs)
        else:
            out = layer(xs[0])
        if isinstance(out, (list, tuple)):
            return f"returned {len(out)} tensors"
        np.asarray(out)
    except Exception as e:  # noqa: BLE001 - any failure is the result
        text = " ".join(str(e).replace("\x1b[1m", "").replace("\x1b[0m", "").split())
        return f"{type(e).__name__}: {text[:500]}"
    return None


def draws(apis: dict[str, ApiConfig], names: list[str], n: int, seed: int = 0) -> list[dict[str, Any]]:
    import keras

    rows = []
    for api in names:
        print(api, file=sys.stderr, flush=True)
        cfg = apis[api]
        for k in range(n):
            rng = np.random.default_rng([seed, zlib.crc32(api.encode()), k])
            params: dict[str, Any] = dict(BASE.get(api, {}))
            params.update(_draws(cfg, rng))
            for name, p in cfg.params.items():
                if p.type == "layer":
                    params[name] = _inner_layer(p, apis, rng)
            rank = _rank_for(cfg, params, apis, k)
            params.update(_rank_dependent(api, rank))  # non-mutable, so never drawn
            rows.append({"api": api, "params": params, "rank": rank,
                         "error": run_one(keras, cfg, params, rank, rng)})
    return rows


def _candidates(p: ParamConfig) -> list[Any]:
    out = list(p.values)
    if p.range is not None:
        out += list(p.range)
        if p.dims:
            out.append([p.range[0]] * (p.dims - 1) + [p.range[1]])
    if p.nullable:
        out.append(None)
    if p.type == "bool":
        out += [False, True]
    return out


def values(apis: dict[str, ApiConfig], names: list[str]) -> list[dict[str, Any]]:
    """Each listed valid value of each parameter on its own: valid for at least one accepted rank."""
    import keras

    rows = []
    seen: set[tuple[str, str]] = set()  # a long shared list (the activations) is checked in full once
    for api in names:
        print(api, file=sys.stderr, flush=True)
        cfg = apis[api]
        rng = np.random.default_rng([0, zlib.crc32(api.encode())])
        base = dict(BASE.get(api, {}))
        for name, p in cfg.params.items():
            if p.type == "layer":
                for inner in p.apis:
                    params = {**base, name: {"api": inner, "params": dict(BASE.get(inner, {}))}}
                    rank = _rank_for(cfg, params, apis, 0)
                    rows.append({"api": api, "params": params, "rank": rank,
                                 "error": run_one(keras, cfg, params, rank, rng)})
                continue
            if not p.mutable and not p.values:
                continue
            ctx = dict(CONTEXT.get((api, name), {}))
            ranks = [ctx.pop("_rank")] if "_rank" in ctx else (cfg.ranks or [3])
            by_len = ctx.pop("_rank_of_dims", False)
            cands = _candidates(p)
            key = (p.type, json.dumps(p.values))
            if len(p.values) > 8 and key in seen:
                cands = cands[:2] + [None] * p.nullable
            seen.add(key)
            for v in cands:
                params = {**base, **_inner_defaults(cfg, apis), **ctx, name: v}
                tried = [len(v) + 1] if by_len and isinstance(v, list) else ranks
                errors = []
                for rank in tried:
                    full = {**params, **_rank_dependent(api, rank), name: v}
                    err = run_one(keras, cfg, full, rank, rng)
                    if err is None:
                        break
                    errors.append(err)
                else:
                    rows.append({"api": api, "params": params, "rank": tried, "error": " | ".join(errors)})
                    continue
                rows.append({"api": api, "params": params, "rank": rank, "error": None})
    return rows


def _inner_defaults(cfg: ApiConfig, apis: dict[str, ApiConfig]) -> dict[str, Any]:
    return {name: {"api": p.apis[0], "params": dict(BASE.get(p.apis[0], {}))}
            for name, p in cfg.params.items() if p.type == "layer"}


def main(argv: list[str]) -> None:
    apis = load_api_configs()
    mode, rest = argv[0], argv[1:]
    if mode == "draws":
        n, names = int(rest[0]), rest[1:] or sorted(apis)
        rows = draws(apis, names, n)
    else:
        rows = values(apis, rest or sorted(apis))
    print(json.dumps(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
