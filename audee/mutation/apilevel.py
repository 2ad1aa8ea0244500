"""API-level test cases: a small model built around one layer API at a time.

Network mutation (:mod:`audee.mutation.network`) only reaches the APIs the seeds contain;
here every configured API (``api_configs/``) gets models of its own: the layer
alone on an input of a rank it takes, or a short chain where an adapter (a Dense
projection + Reshape, a Permute, a pooling or a 1x1 convolution) produces the rank and
size it needs.  Merge layers get two or three inputs of compatible shapes; wrapper layers
(a ``type: layer`` parameter, e.g. Bidirectional) a drawn inner layer.  Each case draws a
model dtype policy (float32 mostly; float16, bfloat16, mixed_float16), input shapes with
odd, even and size-1 dims, both data formats where the config has one, the API's
parameters with :func:`audee.mutation.base.draw_value` and, with ``invalid_prob``,
exactly one crafty invalid value; a valid draw that the drawn rank puts outside the
layer's contract (``axis=[1, -1]`` on a rank-2 input names one axis twice) is marked
invalid too (:func:`audee.mutation.base.outside_contract`), never counted as a bug.

Case ``i`` of API ``A`` draws from ``np.random.default_rng([rng, crc32(A), i])`` alone, so
it is the same whatever else a run generates, skips or shards.  A case of valid draws that
no backend can build is redrawn (``validate``, up to ``max_redraws``); one carrying an
invalid value is never redrawn: that value was drawn to be tested.

The ModelSpec has no model-level dtype: the policy travels as each layer's ``dtype``
parameter (Keras casts the float32 model input to the first layer's compute dtype).
"""
from __future__ import annotations

import math
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import numpy as np

from audee.apis import ApiConfig, ParamConfig
from audee.apis.call_args import draw_masks
from audee.mutation.base import Mutation, _py, couple_params, draw_value, outside_contract
from audee.cases.spec import InputSpec, LayerSpec, ModelSpec, Weights

Validate = Callable[[ModelSpec], "str | None"]

# input ranks (batch axis included, as the configs' ``rank``) for a config naming none
CATEGORY_RANKS: dict[str, list[int]] = {
    "conv": [4], "pool": [4], "norm": [2, 3, 4], "activation": [2, 3, 4], "reshape": [3, 4],
    "merge": [2, 3, 4], "recurrent": [3], "core": [2, 3, 4], "embedding": [2], "wrapper": [3],
    "regularization": [2, 3, 4],
}
SPATIAL = (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16)   # odd, even and size-1 spatial dims
CHANNELS = (1, 2, 3, 4, 5, 8, 16)
FEATURES = (1, 2, 3, 5, 8, 16, 32)
MAX_ELEMENTS = 4096                              # per input row: small models, many per second
ALONE_PROB = 0.6                                  # the layer alone; else behind an adapter
SUBTRACT_INPUTS = {"Subtract": 2}                # merge APIs taking a fixed number of inputs
#: wrappers whose call loops over the input's axis 1 (time) as the recurrent layers do
TIME_WRAPPERS = frozenset({"Bidirectional", "TimeDistributed"})


@dataclass
class ApiCase:
    """One API-level test case: the model, its inputs and what was drawn (``meta``: the
    results row's and case file's provenance, as ``mutations`` are for network variants)."""

    api: str
    index: int
    spec: ModelSpec
    inputs: dict[str, np.ndarray]
    mutations: list[Mutation]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def invalid(self) -> bool:
        return any(m.invalid for m in self.mutations)


def case_id(api: str, index: int) -> str:
    return f"api-{api}-v{index:05d}"


def case_rng(rng: int, api: str, index: int, stream: int | None = None) -> np.random.Generator:
    """The random stream of case ``index`` of ``api`` (``stream``: a second, independent one)."""
    key = [rng, zlib.crc32(api.encode()), index] + ([] if stream is None else [stream])
    return np.random.default_rng(key)


def api_ranks(cfg: ApiConfig, apis: dict[str, ApiConfig] | None = None) -> list[int]:
    """The input ranks (batch included) ``cfg`` takes: ``ranks`` (when configs carry it),
    else ``rank``, else a default by category (a wrapper: its inner layers' ranks)."""
    ranks = getattr(cfg, "ranks", None)
    if ranks:
        return [int(r) for r in ranks]
    if cfg.rank:
        return [int(cfg.rank)]
    inner = _layer_param(cfg)
    if inner is not None and apis:
        got = sorted({r for a in inner.apis if a in apis for r in api_ranks(apis[a], apis)})
        if got:
            return [r + 1 for r in got] if cfg.api == "TimeDistributed" else got
    return list(CATEGORY_RANKS.get(cfg.category, [2, 3, 4]))


def loops_over_time(cfg: ApiConfig) -> bool:
    """Whether the layer's call runs a Python loop over its input's time axis (axis 1 after
    the batch): a tracing exporter unrolls it, so the graph grows with the sequence."""
    return cfg.category == "recurrent" or cfg.api in TIME_WRAPPERS


def _layer_param(cfg: ApiConfig) -> ParamConfig | None:
    return next((p for p in cfg.params.values() if p.type == "layer"), None)


def _drawable(p: ParamConfig) -> bool:
    return p.mutable and not getattr(p, "skip", "") and p.type != "layer"


def parse_dtype_weights(weights: dict[str, float] | None) -> tuple[list[str], np.ndarray]:
    """Policies and normalized probabilities (default: float32 0.7, the others 0.1 each)."""
    from audee.settings import DTYPE_WEIGHTS

    w = dict(DTYPE_WEIGHTS if weights is None else weights)
    names = sorted(w)
    p = np.array([float(w[n]) for n in names])
    return names, p / p.sum()


# ---- shapes ----------------------------------------------------------------------------------------
def _draw_shape(rank: int, rng: np.random.Generator, channels_first: bool = False) -> tuple[int, ...]:
    """A shape without the batch axis for an input of ``rank`` (batch included)."""
    for _ in range(50):
        if rank <= 2:
            shape: tuple[int, ...] = (int(rng.choice(FEATURES)),)
        else:
            spatial = [int(rng.choice(SPATIAL if rank < 5 else SPATIAL[:8])) for _ in range(rank - 2)]
            ch = int(rng.choice(CHANNELS if rank < 5 else CHANNELS[:4]))
            shape = (ch, *spatial) if channels_first else (*spatial, ch)
        if math.prod(shape) <= MAX_ELEMENTS:
            return shape
    return (2,) * (rank - 1)


@dataclass
class _Chain:
    """A partial model: inputs, layers, and the tensor (name, shape) feeding the API layer."""

    inputs: list[InputSpec] = field(default_factory=list)
    layers: list[LayerSpec] = field(default_factory=list)
    adapters: list[str] = field(default_factory=list)

    def input(self, shape: tuple[int, ...], dtype: str = "float32",
              rng_range: tuple[float, float] | None = None) -> str:
        name = f"x{len(self.inputs)}"
        self.inputs.append(InputSpec(name, tuple(shape), dtype, rng_range))
        return name

    def layer(self, api: str, params: dict[str, Any], src: str, dtype: str) -> str:
        name = f"a{len(self.layers)}_{api.lower()}"
        self.layers.append(LayerSpec(name, api, {**params, "dtype": dtype}, [src]))
        self.adapters.append(api)
        return name


def _adapted(chain: _Chain, target: tuple[int, ...], rng: np.random.Generator, dtype: str) -> str:
    """A tensor of shape ``target`` (batch excluded): a model input itself, or a short
    adapter chain from an input of another rank or size."""
    kinds = ["dense"] if math.prod(target) <= MAX_ELEMENTS else []
    if len(target) >= 2:
        kinds.append("permute")
    if 2 <= len(target) <= 4 and math.prod(target) * 2 ** (len(target) - 1) <= 4 * MAX_ELEMENTS:
        kinds.append("pool")
    if 2 <= len(target) <= 4:
        kinds.append("conv")
    if rng.random() < ALONE_PROB or not kinds:
        return chain.input(target)
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "dense":
        src = chain.input((int(rng.choice(FEATURES)),))
        out = chain.layer("Dense", {"units": int(math.prod(target))}, src, dtype)
        return chain.layer("Reshape", {"target_shape": list(target)}, out, dtype) if len(target) > 1 else out
    if kind == "permute":
        perm = [int(v) + 1 for v in rng.permutation(len(target))]
        if perm == sorted(perm):
            perm = perm[1:] + perm[:1]
        shape = [0] * len(target)
        for j, p in enumerate(perm):
            shape[p - 1] = target[j]
        src = chain.input(tuple(shape))
        return chain.layer("Permute", {"dims": perm}, src, dtype)
    k = len(target) - 1
    if kind == "pool":
        src = chain.input(tuple(2 * d for d in target[:-1]) + (target[-1],))
        api = f"{'Max' if rng.random() < 0.5 else 'Average'}Pooling{k}D"
        return chain.layer(api, {"pool_size": 2}, src, dtype)
    src = chain.input(tuple(target[:-1]) + (int(rng.choice(CHANNELS)),))
    return chain.layer(f"Conv{k}D", {"filters": int(target[-1]), "kernel_size": 1}, src, dtype)


# ---- parameters ------------------------------------------------------------------------------------
def _derived(api: str, name: str, rank: int, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    """A value for a parameter that is not drawn but that the layer needs from the input
    shape (``mutable: false``): None where Keras' default serves."""
    if api == "Permute" and name == "dims":
        perm = [int(v) + 1 for v in rng.permutation(rank - 1)]
        return perm
    if api == "Reshape" and name == "target_shape":
        n = math.prod(shape)
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        first = int(rng.choice(divisors))
        return [first, n // first] if rng.random() < 0.7 else [n]
    if api == "EinsumDense":  # equation, output_shape and bias_axes are coupled to the input rank
        units = int(rng.integers(1, 17))
        bias = bool(rng.random() < 0.5)
        if rank == 2:
            coupled = {"equation": "ab,bc->ac", "output_shape": units, "bias_axes": "c" if bias else None}
        else:
            coupled = {"equation": "abc,cd->abd", "output_shape": [int(shape[0]), units],
                       "bias_axes": "d" if bias else None}
        return coupled.get(name)
    return None


def _draw_params(cfg: ApiConfig, rng: np.random.Generator, layer: str, apis: dict[str, ApiConfig],
                 dtype: str) -> tuple[dict[str, Any], list[Mutation], list[tuple[dict, str, ParamConfig, str]]]:
    """Valid draws of every drawable parameter (a wrapper's inner layer too); the slots an
    invalid value could go in, as (params dict, name, config, mutation layer)."""
    params: dict[str, Any] = {}
    muts: list[Mutation] = []
    slots: list[tuple[dict, str, ParamConfig, str]] = []
    for name, p in cfg.params.items():
        if p.type == "layer" and p.mutable and not getattr(p, "skip", ""):
            choices = [a for a in p.apis if a in apis]
            if not choices:
                continue
            inner_api = choices[int(rng.integers(len(choices)))]
            sub = f"{layer}.{name}"
            inner, inner_muts, inner_slots = _draw_params(apis[inner_api], rng, sub, apis, dtype)
            inner["dtype"] = dtype
            params[name] = {"api": inner_api, "params": inner}
            muts.append(Mutation(layer, name, None, inner_api, False))
            muts += inner_muts
            slots += inner_slots
            continue
        if not _drawable(p):
            continue
        value = draw_value(p, rng, invalid=False)
        params[name] = value
        muts.append(Mutation(layer, name, None, value, False))
        if p.invalid:
            slots.append((params, name, p, layer))
    return params, muts, slots


def _mark_short_input(cfg: ApiConfig, shape: tuple[int, ...], params: dict[str, Any], muts: list[Mutation],
                      lname: str) -> None:
    """Mark the parameter whose valid value the drawn input is too short for (the config's
    ``min_length``) as outside the contract: the draw stays, only its record says so."""
    rule = cfg.min_length
    why = rule.outside(shape, params) if rule is not None else None
    if why:
        for m in muts:
            if m.layer == lname and m.param == rule.param and not m.invalid:
                m.mark_outside(why)


# ---- one case --------------------------------------------------------------------------------------
def _layer_at(mlayer: str, lname: str, cfg: ApiConfig, params: dict[str, Any], rank: int,
              apis: dict[str, ApiConfig]) -> tuple[ApiConfig, int] | None:
    """The config of the layer a mutation names (``lname``, or a wrapper's inner layer
    ``lname.layer``) and the rank of the input it sees (a wrapper's ``rank_offset`` applied),
    or None where the path names no drawn layer."""
    if mlayer != lname and not mlayer.startswith(lname + "."):
        return None
    for name in mlayer[len(lname):].split(".")[1:]:
        p, inner = cfg.params.get(name), params.get(name)
        if p is None or p.type != "layer" or not isinstance(inner, dict) or inner.get("api") not in apis:
            return None
        cfg, params, rank = apis[inner["api"]], inner.get("params") or {}, rank + p.rank_offset
    return cfg, rank


def _draw_case(api: str, cfg: ApiConfig, apis: dict[str, ApiConfig], rng: np.random.Generator,
               invalid_prob: float, dtypes: tuple[list[str], np.ndarray], max_steps: int | None = None
               ) -> tuple[ModelSpec, list[Mutation], dict[str, Any]]:
    names, probs = dtypes
    dtype = str(names[int(rng.choice(len(names), p=probs))])
    lname = f"t_{api.lower()}"
    params, muts, slots = _draw_params(cfg, rng, lname, apis, dtype)
    couple_params(params, muts, rng)
    invalid = None
    if slots and rng.random() < invalid_prob:
        where, pname, pcfg, mlayer = slots[int(rng.integers(len(slots)))]
        value = draw_value(pcfg, rng, invalid=True)
        where[pname] = value
        muts = [m for m in muts if not (m.layer == mlayer and m.param == pname)]
        muts.append(Mutation(mlayer, pname, None, value, True))
        invalid = {"layer": mlayer, "param": pname, "value": _py(value)}
    data_format = params.get("data_format")
    channels_first = data_format == "channels_first"
    ranks = api_ranks(cfg, apis)
    rank = int(ranks[int(rng.integers(len(ranks)))])
    for m in muts:  # a valid draw the drawn rank makes invalid (an axis list naming one axis twice)
        at = None if m.invalid else _layer_at(m.layer, lname, cfg, params, rank, apis)
        why = outside_contract(m.param, at[0].params[m.param], m.new, at[1]) \
            if at is not None and m.param in at[0].params else None
        if why:
            m.mark_outside(why)
    chain = _Chain()
    derived: dict[str, Any] = {}
    if cfg.ids is not None:  # integer token ids in [0, the bounding parameter's value)
        vocab = params.get(cfg.ids)
        high = int(vocab) if isinstance(vocab, int) and not isinstance(vocab, bool) and vocab > 0 else 1
        shape = _draw_shape(rank, rng)
        srcs = [chain.input(shape, "int32", (0, high))]
    elif cfg.inputs == "many" or (isinstance(cfg.inputs, int) and cfg.inputs > 1):
        n = cfg.inputs if isinstance(cfg.inputs, int) else SUBTRACT_INPUTS.get(api, int(rng.integers(2, 4)))
        shape = _draw_shape(rank, rng)
        srcs = []
        for _ in range(n):
            s = shape
            if api == "Concatenate" and rng.random() < 0.5:  # inputs may differ along the joined axis
                s = (*shape[:-1], int(rng.choice(CHANNELS)))
            srcs.append(_adapted(chain, s, rng, dtype))
    else:
        shape = _draw_shape(rank, rng, channels_first)
        if cfg.channels is not None and len(shape) > 1:  # an RGB augmentation: its channel axis is fixed
            shape = (cfg.channels, *shape[1:]) if channels_first else (*shape[:-1], cfg.channels)
        if max_steps is not None and shape and loops_over_time(cfg):  # no draw more: other cases stay as they were
            shape = (min(shape[0], max_steps), *shape[1:])
        srcs = [_adapted(chain, shape, rng, dtype)]
    _mark_short_input(cfg, shape, params, muts, lname)
    coupled_seed = int(rng.integers(2 ** 31))  # coupled parameters (EinsumDense) share one draw
    for name, p in cfg.params.items():
        if p.type != "layer" and not _drawable(p):
            value = _derived(api, name, rank, shape, np.random.default_rng(coupled_seed))
            if value is None and p.values and not getattr(p, "skip", ""):
                value = p.values[int(rng.integers(len(p.values)))]  # a fixed parameter: one of its valid values
            if value is not None:
                params[name] = value
                derived[name] = value
    chain.layers.append(LayerSpec(lname, api, {**params, "dtype": dtype}, srcs))
    spec = ModelSpec(f"api-{api}", chain.inputs, chain.layers, lname, lname)
    meta = {"api": api, "dtype": dtype, "data_format": data_format, "rank": rank, "shape": list(shape),
            "input_shapes": {i.name: list(i.shape) for i in chain.inputs}, "adapters": chain.adapters,
            "params": _py(params), "derived": _py(derived), "invalid_param": invalid}
    return spec, muts, meta


def make_inputs(spec: ModelSpec, rng: np.random.Generator, batch: int) -> dict[str, np.ndarray]:
    """Deterministic random data for ``spec``'s inputs: 0/1 rows for a mask's input
    (:func:`audee.apis.call_args.draw_masks`), token ids inside each other integer input's
    range, else float32 values of mixed scale (standard normal, a few large)."""
    out = {}
    masks = spec.mask_inputs()
    for inp in spec.inputs:
        shape = (batch, *inp.shape)
        if inp.name in masks:
            out[inp.name] = draw_masks(shape, rng, inp.dtype, masks[inp.name])
        elif inp.is_integer:
            lo, hi = inp.range or (0, 1)
            out[inp.name] = rng.integers(int(lo), max(int(hi), int(lo) + 1), size=shape).astype(inp.dtype)
        else:
            x = rng.standard_normal(shape)
            x *= np.where(rng.random(shape) < 0.05, 10.0, 1.0)
            out[inp.name] = x.astype(np.float32)
    return out


#: the random stream of a case's call arguments (``call_training``), apart from its model's
CALL_STREAM = 3
#: the random stream of a case's mask (``call_mask``), apart from its model's and its training flag's
MASK_STREAM = 4
#: the random stream of a case's causal flag (``call_causal``), apart from its model's, its training flag's and mask's
CAUSAL_STREAM = 5


def _call_training(spec: ModelSpec, muts: list[Mutation], meta: dict[str, Any], lname: str,
                   value: bool | None) -> None:
    """Call the API's layer with ``training=value`` (None: leave it to the model's mode),
    where its call takes one.  A layer random in training mode is called so too: its values
    then differ on every backend and are not compared, its acceptance and declared outputs
    are (:func:`audee.apis.call_args.random_values`)."""
    from audee.apis.call_args import takes_training

    layer = spec.layer(lname)
    if value is None or not takes_training(layer.api):
        return
    layer.call = {"training": value}
    muts.append(Mutation(lname, "call.training", None, value, False))
    meta["call"] = {"training": value}


def _call_causal(spec: ModelSpec, muts: list[Mutation], meta: dict[str, Any], lname: str) -> None:
    """Call the API's layer with ``use_causal_mask=True``, where its call takes it (an attention
    layer: each query position attends to the value positions up to its own only)."""
    from audee.apis.call_args import takes_causal_mask

    layer = spec.layer(lname)
    if not takes_causal_mask(layer.api):
        return
    layer.call = {**layer.call, "use_causal_mask": True}
    muts.append(Mutation(lname, "call.use_causal_mask", None, True, False))
    meta["call"] = {**meta.get("call", {}), "use_causal_mask": True}


def _call_mask(spec: ModelSpec, muts: list[Mutation], meta: dict[str, Any], lname: str, shape: tuple[int, ...]
               ) -> None:
    """Call the API's layer with a mask, where its call takes one: a new integer input
    ``<layer>_mask`` of the shape the layer takes for its input ``shape``
    (:func:`audee.apis.call_args.mask_shape`), fed 0/1 rows by :func:`make_inputs`."""
    from audee.apis.call_args import mask_shape, takes_mask

    layer = spec.layer(lname)
    if not takes_mask(layer.api):
        return
    want = mask_shape(layer.api, layer.params, shape)
    if not want:
        return
    name = f"{lname}_mask"
    spec.inputs.append(InputSpec(name, want, "int32"))
    layer.call = {**layer.call, "mask": name}
    muts.append(Mutation(lname, "call.mask", None, name, False))
    meta["call"] = {**meta.get("call", {}), "mask": list(want)}


def generate_case(api: str, apis: dict[str, ApiConfig], rng_seed: int, index: int, *, batch: int = 8,
                  invalid_prob: float = 0.1, dtypes: dict[str, float] | None = None,
                  validate: Validate | None = None, max_redraws: int = 5, call_training: float = 0.0,
                  call_mask: float = 0.0, call_causal: float = 0.0, max_steps: int | None = None) -> ApiCase:
    """Case ``index`` of ``api``: a model, its inputs and the draw record.  With
    ``validate`` (an error message or None), valid-only draws no backend builds are
    redrawn up to ``max_redraws`` times; the last error stays in ``meta['build_error']``.
    ``call_training``: the probability the layer is called with a drawn ``training`` flag
    (from the case's own stream :data:`CALL_STREAM`: every other draw stays as it was).
    ``call_mask``: the probability a layer whose call takes a mask is called with one
    (drawn from :data:`MASK_STREAM`; the mask's input comes after the others, whose data
    stay as they were).  ``call_causal``: the probability an attention layer is called with
    ``use_causal_mask=True`` (drawn from :data:`CAUSAL_STREAM`).  ``max_steps``: the longest time axis a layer that loops over it
    (:func:`loops_over_time`) is given (None: as drawn), for a run whose backend unrolls the
    loop (``BackendInfo.max_steps``)."""
    cfg = apis[api]
    rng = case_rng(rng_seed, api, index)
    weights = parse_dtype_weights(dtypes)
    flag = True if cfg.training else None  # a layer that computes in training only
    if call_training > 0 and flag is None:
        g = case_rng(rng_seed, api, index, stream=CALL_STREAM)
        if g.random() < call_training:
            flag = bool(g.random() < 0.5)
    masked = call_mask > 0 and case_rng(rng_seed, api, index, stream=MASK_STREAM).random() < call_mask
    causal = call_causal > 0 and case_rng(rng_seed, api, index, stream=CAUSAL_STREAM).random() < call_causal
    error = None
    for attempt in range(max_redraws + 1):
        spec, muts, meta = _draw_case(api, cfg, apis, rng, invalid_prob, weights, max_steps)
        _call_training(spec, muts, meta, spec.output, flag)
        if masked:
            _call_mask(spec, muts, meta, spec.output, tuple(meta["shape"]))
        if causal:
            _call_causal(spec, muts, meta, spec.output)
        error = None
        if validate is not None and not any(m.invalid for m in muts):
            error = validate(spec)
        if error is None or attempt == max_redraws:
            break
    meta["redraws"] = attempt
    if error is not None:
        meta["build_error"] = error
    spec.name = case_id(api, index)
    spec.meta = {"api": api, "mutations": [m.to_json() for m in muts], "redraws": attempt}
    inputs = make_inputs(spec, case_rng(rng_seed, api, index, stream=1), batch)
    return ApiCase(api, index, spec, inputs, muts, meta)


def cast_weights(weights: Weights, dtype: str) -> Weights:
    """Weights in the variables' dtype: float16 under the float16 policy (numpy has no
    bfloat16; bfloat16 and mixed_float16 variables take float32 values)."""
    if dtype != "float16":
        return weights
    return {k: [a.astype(np.float16) if np.issubdtype(a.dtype, np.floating) else a for a in v]
            for k, v in weights.items()}


__all__ = ["ApiCase", "api_ranks", "loops_over_time", "case_id", "case_rng", "cast_weights", "generate_case", "make_inputs"]
