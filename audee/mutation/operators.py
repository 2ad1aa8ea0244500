"""Structural mutation operators (LEMON / Muffin style) over a ModelSpec.

Each operator takes a copy of a spec, the API configs and a numpy Generator, changes the
spec in place and returns the :class:`~audee.mutation.base.Mutation` records that say
exactly what it did (``None`` when the spec offers it no place to act).  The records
are complete: :func:`apply_mutations` replays them on the seed and gives the variant back.

Shapes come from :func:`infer_shapes`, a pure-Python shape inference over the configured
APIs (no framework in the parent process), so an operator rejects its own impossible
draws (a 5x5 kernel on a 2x2 map, a huge tensor) before any backend is asked; what slips
through is redrawn by ``mutate_spec``'s ``validate`` callback.  Inserted and replacing
layers are wrapped in adapters (Reshape, global pooling, cropping, padding, upsampling,
a Dense on the last axis) so that every consumer sees the shape it saw in the seed.
"""
from __future__ import annotations

import copy
import math
import re
from typing import Any, Callable

import numpy as np

from audee.apis import ApiConfig
from audee.apis.keras_layers import snake_name
from audee.mutation.base import NETWORK_FIXED, Mutation, couple_params, draw_value
from audee.cases.opcase import ACTIVATIONS
from audee.cases.spec import LayerSpec, ModelSpec

Shape = tuple[int, ...]  # without the batch axis

# every keras.activations function: one list, kept with the calls a case may name (audee.cases.opcase)
ACTIVATION_PARAMS = ("activation", "recurrent_activation")
NO_INSERT = frozenset({"Embedding"})  # needs integer token ids: only a model input has them
MAX_ELEMENTS = 1 << 18  # per-sample elements of any new tensor (beyond the seed's largest)
MAX_UNROLL = 100  # an unrolled RNN over more steps takes minutes to build
LOCAL_TRIES = 30  # draws an operator makes before it gives up on a spec

PRESERVING = frozenset({"Activation", "ReLU", "ELU", "LeakyReLU", "PReLU", "Softmax", "BatchNormalization",
                        "LayerNormalization", "Dropout", "GaussianNoise", "SpatialDropout2D", "GaussianDropout",
                        "AlphaDropout", "ActivityRegularization"})
ELEMENTWISE_MERGES = frozenset({"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"})
RNNS = frozenset({"LSTM", "GRU", "SimpleRNN"})
RANK_OVERRIDE = {"Permute": 4, "Reshape": None}  # Permute's config takes 3 dims: a rank-4 input


class ShapeError(ValueError):
    """A layer cannot take its input (size below one, wrong rank, mismatched merge)."""


# ---- shape inference -------------------------------------------------------------------------
def _tup(value: Any, n: int, default: Any = None) -> tuple:
    if value is None:
        value = default
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ShapeError(f"expected {n} values, got {value!r}")
        return tuple(value)
    return (value,) * n


def _pos(*values: Any) -> None:
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ShapeError(f"expected a positive int, got {v!r}")


def _conv_len(n: int, k: int, s: int, d: int, padding: str) -> int:
    keff = (k - 1) * d + 1
    out = -(-n // s) if padding == "same" else (n - keff) // s + 1
    if padding not in ("same", "valid") or out < 1:
        raise ShapeError(f"output size {out} (input {n}, kernel {k}, stride {s}, dilation {d}, {padding})")
    return out


def _deconv_len(n: int, k: int, s: int, d: int, padding: str, output_padding: int | None = None) -> int:
    """Keras' ``compute_conv_transpose_output_length``."""
    keff = (k - 1) * d + 1
    if padding not in ("same", "valid"):
        raise ShapeError(f"padding {padding!r}")
    if output_padding is None:
        return n * s if padding == "same" else n * s + max(keff - s, 0)
    pad = keff // 2 if padding == "same" else 0
    return (n - 1) * s + keff - 2 * pad + output_padding


def _rank(s: Shape, want: int, api: str) -> None:
    if len(s) + 1 != want:
        raise ShapeError(f"{api} takes rank-{want} input, got rank {len(s) + 1}")


def layer_shape(api: str, params: dict[str, Any], ins: list[Shape]) -> Shape | None:
    """The output shape of one layer (batch left out); None for an API it does not know.
    Raises :class:`ShapeError` where Keras would refuse the input."""
    p = params
    s = ins[0]
    if api in PRESERVING:
        if api == "SpatialDropout2D":
            _rank(s, 4, api)
        return s
    if api in ELEMENTWISE_MERGES or api == "Concatenate":
        if len(ins) < 2 or (api == "Subtract" and len(ins) != 2):
            raise ShapeError(f"{api} of {len(ins)} inputs")
        if api == "Concatenate":
            if any(len(x) != len(s) or x[:-1] != s[:-1] for x in ins):
                raise ShapeError(f"Concatenate of shapes {ins}")
            return s[:-1] + (sum(x[-1] for x in ins),)
        if any(x != s for x in ins):
            raise ShapeError(f"{api} of shapes {ins}")
        return s
    if api == "Dense":
        _pos(p.get("units"))
        return s[:-1] + (p["units"],)
    if api in ("Conv1D", "Conv2D", "Conv3D", "SeparableConv2D", "DepthwiseConv2D",
               "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose"):
        nd = int(api[4]) if api.startswith("Conv") else 2
        _rank(s, nd + 2, api)
        k = _tup(p.get("kernel_size"), nd)
        st = _tup(p.get("strides"), nd, 1)
        d = _tup(p.get("dilation_rate"), nd, 1)
        _pos(*k, *st, *d)
        if max(st) > 1 and max(d) > 1:
            raise ShapeError("strides > 1 with dilation_rate > 1")
        pad = p.get("padding", "valid")
        if api.endswith("Transpose"):
            op = p.get("output_padding")
            ops = (None,) * nd if op is None else _tup(op, nd)
            spatial = tuple(_deconv_len(n, *a, pad, o) for n, a, o in zip(s[:-1], zip(k, st, d), ops))
        else:
            spatial = tuple(_conv_len(n, *a, pad) for n, a in zip(s[:-1], zip(k, st, d)))
        if p.get("data_format") == "channels_first":
            raise ShapeError("channels_first inside a network")
        if api == "DepthwiseConv2D":
            _pos(p.get("depth_multiplier", 1))
            return spatial + (s[-1] * p.get("depth_multiplier", 1),)
        if api == "SeparableConv2D":
            _pos(p.get("depth_multiplier", 1))
        _pos(p.get("filters"))
        groups = p.get("groups") or 1
        _pos(groups)
        if p["filters"] % groups or s[-1] % groups:
            raise ShapeError(f"groups {groups} must divide both filters {p['filters']} and channels {s[-1]}")
        return spatial + (p["filters"],)
    if "Pooling" in api and not api.startswith("Global"):
        nd = int(api[-2])
        _rank(s, nd + 2, api)
        k = _tup(p.get("pool_size"), nd, 2)
        st = _tup(p.get("strides"), nd, None)
        st = tuple(k[i] if st[i] is None else st[i] for i in range(nd))
        _pos(*k, *st)
        return tuple(_conv_len(n, a, b, 1, p.get("padding", "valid")) for n, a, b in zip(s[:-1], k, st)) + (s[-1],)
    if api.startswith("Global") and "Pooling" in api:
        nd = int(api[-2])
        _rank(s, nd + 2, api)
        return (1,) * nd + (s[-1],) if p.get("keepdims") else (s[-1],)
    if api == "Flatten":
        return (math.prod(s),)
    if api == "Reshape":
        t = list(p.get("target_shape") or [])
        known = math.prod(x for x in t if x != -1)
        if t.count(-1) == 1 and known > 0 and math.prod(s) % known == 0:
            t[t.index(-1)] = math.prod(s) // known
        if not t or any(not isinstance(x, int) or x < 1 for x in t) or math.prod(t) != math.prod(s):
            raise ShapeError(f"cannot reshape {s} to {p.get('target_shape')}")
        return tuple(t)
    if api == "Permute":
        dims = list(p.get("dims") or [])
        if sorted(dims) != list(range(1, len(s) + 1)):
            raise ShapeError(f"Permute dims {dims} for rank {len(s) + 1}")
        return tuple(s[i - 1] for i in dims)
    if api == "RepeatVector":
        _rank(s, 2, api)
        _pos(p.get("n"))
        return (p["n"],) + s
    if api[:-2] in ("Cropping", "ZeroPadding", "UpSampling"):
        nd = int(api[-2])
        _rank(s, nd + 2, api)
        if api.startswith("UpSampling"):
            size = _tup(p.get("size"), nd, 2)
            _pos(*size)
            return tuple(n * f for n, f in zip(s[:-1], size)) + (s[-1],)
        key, default = ("cropping", 0) if api.startswith("Cropping") else ("padding", 1)
        raw = p.get(key, default)
        if nd == 1:
            pairs = [_tup(raw, 2)]
        else:
            pairs = [_tup(x, 2) for x in _tup(raw, nd)]
        if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for pr in pairs for v in pr):
            raise ShapeError(f"{key} {raw!r}")
        sign = -1 if api.startswith("Cropping") else 1
        out = tuple(n + sign * (a + b) for n, (a, b) in zip(s[:-1], pairs)) + (s[-1],)
        if min(out) < 1:
            raise ShapeError(f"{api} leaves size {out}")
        return out
    if api in RNNS or api == "Bidirectional":
        _rank(s, 3, api)
        inner = p.get("layer") if api == "Bidirectional" else {"api": api, "params": p}
        if not isinstance(inner, dict) or inner.get("api") not in RNNS:
            raise ShapeError(f"{api} wraps {inner!r}")
        ip = inner.get("params", {})
        _pos(ip.get("units"))
        if ip.get("unroll") and s[0] > MAX_UNROLL:
            raise ShapeError(f"unroll over {s[0]} steps")
        units = ip["units"] * (2 if api == "Bidirectional" and p.get("merge_mode", "concat") == "concat" else 1)
        return (s[0], units) if ip.get("return_sequences") else (units,)
    if api == "Embedding":
        _rank(s, 2, api)
        _pos(p.get("output_dim"))
        return s + (p["output_dim"],)
    return None


def infer_shapes(spec: ModelSpec) -> dict[str, Shape | None]:
    """Every input's and layer's output shape (None where an API is unknown upstream).
    Raises :class:`ShapeError` naming the first layer that cannot take its input."""
    shapes: dict[str, Shape | None] = {i.name: tuple(i.shape) for i in spec.inputs}
    for name in spec.topological_order():
        ls = spec.layer(name)
        ins = [shapes[i] for i in ls.inputs]
        if any(x is None for x in ins):
            shapes[name] = None
            continue
        try:
            shapes[name] = layer_shape(ls.api, ls.params, ins)  # type: ignore[arg-type]
        except ShapeError as exc:
            raise ShapeError(f"layer {name!r} ({ls.api}): {exc}") from None
    return shapes


def _fits(spec: ModelSpec, limit: int) -> dict[str, Shape | None] | None:
    """Shapes of ``spec`` if it infers and no tensor grew past ``limit`` elements."""
    try:
        shapes = infer_shapes(spec)
    except ShapeError:
        return None
    if any(s is not None and math.prod(s) > limit for s in shapes.values()):
        return None
    return shapes


# ---- adapters ------------------------------------------------------------------------------
Step = tuple[str, dict[str, Any]]


def _split(n: int) -> tuple[int, int]:
    a = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return a, n // a


def to_rank(s: Shape, rank: int | None) -> tuple[list[Step], Shape]:
    """Adapters that bring ``s`` to ``rank`` (batch included): global pooling down to
    features, a Reshape merging or splitting spatial axes otherwise."""
    if rank is None or len(s) + 1 == rank:
        return [], s
    k = rank - 1
    if k < len(s):
        if k == 1 and 1 <= len(s) - 1 <= 3:
            return [(f"GlobalAveragePooling{len(s) - 1}D", {})], (s[-1],)
        new = (math.prod(s[:len(s) - k + 1]),) + tuple(s[len(s) - k + 1:])
        return [("Reshape", {"target_shape": list(new)})], new
    spatial, ch = (list(s[:-1]), s[-1]) if len(s) > 1 else ([s[0]], 1)
    while len(spatial) < k - 1:
        i = int(np.argmax(spatial))
        spatial[i:i + 1] = list(_split(spatial[i]))
    new = tuple(spatial) + (ch,)
    return [("Reshape", {"target_shape": list(new)})], new


def fit(src: Shape, dst: Shape) -> list[Step]:
    """Adapters from ``src`` to exactly ``dst``: a Reshape where sizes agree, else rank by
    pooling or Reshape, spatial size by cropping, upsampling and zero padding, and the last
    axis by a Dense."""
    if src == dst:
        return []
    if math.prod(src) == math.prod(dst):
        return [("Reshape", {"target_shape": list(dst)})]
    steps: list[Step] = []
    s = src
    if len(s) > len(dst):
        more, s = to_rank(s, len(dst) + 1)
        steps += more
    elif len(s) < len(dst):
        s = (1,) * (len(dst) - len(s)) + s
        steps.append(("Reshape", {"target_shape": list(s)}))
    nd = len(dst) - 1
    if nd and s[:-1] != dst[:-1]:
        crop = [(max(a - b, 0) // 2, max(a - b, 0) - max(a - b, 0) // 2) for a, b in zip(s[:-1], dst[:-1])]
        if any(sum(c) for c in crop):
            steps.append((f"Cropping{nd}D", {"cropping": [list(c) for c in crop] if nd > 1 else list(crop[0])}))
            s = tuple(a - sum(c) for a, c in zip(s[:-1], crop)) + (s[-1],)
        up = [b // a if b > a and b % a == 0 else 1 for a, b in zip(s[:-1], dst[:-1])]
        if max(up) > 1:
            steps.append((f"UpSampling{nd}D", {"size": up if nd > 1 else up[0]}))
            s = tuple(a * u for a, u in zip(s[:-1], up)) + (s[-1],)
        pad = [((b - a) // 2, b - a - (b - a) // 2) for a, b in zip(s[:-1], dst[:-1])]
        if any(sum(x) for x in pad):
            steps.append((f"ZeroPadding{nd}D", {"padding": [list(x) for x in pad] if nd > 1 else list(pad[0])}))
            s = dst[:-1] + (s[-1],)
    if s[-1] != dst[-1]:
        steps.append(("Dense", {"units": dst[-1]}))
    return steps


# ---- graph edits ---------------------------------------------------------------------------
def _unique(spec: ModelSpec, base: str) -> str:
    taken = set(spec.layer_names()) | set(spec.input_names)
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


class _Edit:
    """Collects what an operator adds, removes and rewires, applying each change at once."""

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.added: list[dict[str, Any]] = []
        self.removed: list[str] = []
        self.rewired: list[list[str]] = []

    def remove(self, name: str) -> int:
        idx = self.spec.layer_names().index(name)
        del self.spec.layers[idx]
        self.removed.append(name)
        return idx

    def add(self, api: str, params: dict[str, Any], inputs: list[str], base: str, at: int,
            fixed: list[str] | None = None) -> tuple[str, int]:
        name = _unique(self.spec, base)
        ls = LayerSpec(name, api, copy.deepcopy(params), list(inputs), list(fixed or []))
        after = self.spec.layers[at - 1].name if at > 0 else None
        self.spec.layers.insert(at, ls)
        self.added.append({**copy.deepcopy(ls.to_json()), "after": after})
        return name, at + 1

    def chain(self, steps: list[Step], src: str, base: str, at: int) -> tuple[str, int]:
        for api, params in steps:
            src, at = self.add(api, params, [src], f"{base}_{snake_name(api)}", at)
        return src, at

    def rewire(self, old: str, new: str, skip: set[str]) -> None:
        for ls in self.spec.layers:
            if ls.name not in skip and old in ls.inputs:
                ls.inputs = [new if i == old else i for i in ls.inputs]
                self.rewired.append([ls.name, old, new])
        if self.spec.output == old:
            self.spec.output = new
            self.rewired.append(["@output", old, new])

    def record(self, layer: str, param: str, old: Any, new: Any, op: str) -> Mutation:
        return Mutation(layer, param, old, new, False, op=op, added=self.added, removed=self.removed,
                        rewired=self.rewired)


def _float_nodes(spec: ModelSpec, shapes: dict[str, Shape | None]) -> list[str]:
    ints = {i.name for i in spec.inputs if i.is_integer}
    return [n for n in spec.input_names + spec.topological_order() if n not in ints and shapes.get(n) is not None]


def _consumers(spec: ModelSpec, name: str) -> list[str]:
    return [ls.name for ls in spec.layers if name in ls.inputs]


def draw_params(cfg: ApiConfig, apis: dict[str, ApiConfig], rng: np.random.Generator, shape: Shape,
                keep: dict[str, Any] | None = None) -> dict[str, Any]:
    """Valid parameters for a new layer: ``keep`` where the config types them so, a draw
    (:func:`draw_value`) for every other mutable one; Reshape and Permute get a target
    that fits ``shape``."""
    if cfg.api == "Reshape":
        return {"target_shape": [int(x) for x in rng.permutation(list(shape))]}
    if cfg.api == "Permute":
        return {"dims": [int(x) + 1 for x in rng.permutation(len(shape))]}
    params: dict[str, Any] = {}
    for name, pcfg in cfg.params.items():
        if keep and name in keep and pcfg.type_ok(keep[name]):
            params[name] = copy.deepcopy(keep[name])
        elif pcfg.type == "layer":
            inner = [a for a in pcfg.apis if a in apis]
            if inner:
                api = inner[int(rng.integers(len(inner)))]
                params[name] = {"api": api, "params": draw_params(apis[api], apis, rng, shape)}
        elif pcfg.mutable and name not in NETWORK_FIXED:
            params[name] = draw_value(pcfg, rng, invalid=False)
    couple_params(params, [], rng)
    return params


def _invalid_param(spec: ModelSpec, layer: str, apis: dict[str, ApiConfig], rng: np.random.Generator,
                   invalid_prob: float) -> list[Mutation]:
    """With ``invalid_prob``, one crafty invalid value on the new layer, recorded apart
    (a redraw marked invalid) so signatures and replays see the value under test."""
    if rng.random() >= invalid_prob:
        return []
    ls = spec.layer(layer)
    names = [n for n, p in apis[ls.api].params.items() if p.mutable and p.invalid and p.type != "layer"]
    if not names:
        return []
    name = names[int(rng.integers(len(names)))]
    old = ls.params.get(name)
    ls.params[name] = draw_value(apis[ls.api].params[name], rng, invalid=True)
    return [Mutation(layer, name, old, ls.params[name], True)]


def _limit(shapes: dict[str, Shape | None]) -> int:
    return max([MAX_ELEMENTS] + [math.prod(s) for s in shapes.values() if s is not None])


# ---- the operators -------------------------------------------------------------------------
Operator = Callable[..., "list[Mutation] | None"]


def op_insert(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator, *,
              invalid_prob: float = 0.0) -> list[Mutation] | None:
    """Insert a layer of any configured API after some node, with adapters into the API's
    rank and back to the node's shape; a merge takes the node and an earlier node of the
    same shape (or the node twice)."""
    try:
        shapes = infer_shapes(spec)
    except ShapeError:
        return None
    points = _float_nodes(spec, shapes)
    insertable = sorted(a for a in apis if a not in NO_INSERT)
    if not points or not insertable:
        return None
    limit = _limit(shapes)
    order = spec.input_names + spec.topological_order()
    for _ in range(LOCAL_TRIES):
        anchor = points[int(rng.integers(len(points)))]
        cfg = apis[insertable[int(rng.integers(len(insertable)))]]
        s = shapes[anchor]
        assert s is not None
        work = spec.copy()
        edit = _Edit(work)
        at = 0 if anchor in spec.input_names else work.layer_names().index(anchor) + 1
        base = f"ins_{snake_name(cfg.api)}"
        if cfg.inputs == "many":
            same = [n for n in points if shapes[n] == s and order.index(n) < order.index(anchor)]
            other = ([anchor] + same)[int(rng.integers(len(same) + 1))]
            params = draw_params(cfg, apis, rng, s)
            new, at = edit.add(cfg.api, params, [anchor, other], base, at)
            in_shapes = [s, s]
        else:
            steps, s_in = to_rank(s, RANK_OVERRIDE.get(cfg.api, cfg.rank))
            src, at = edit.chain(steps, anchor, base, at)
            params = draw_params(cfg, apis, rng, s_in)
            new, at = edit.add(cfg.api, params, [src], base, at)
            in_shapes = [s_in]
        try:
            s_out = layer_shape(cfg.api, params, in_shapes)
        except ShapeError:
            continue
        if s_out is None:
            continue
        tail, at = edit.chain(fit(s_out, s), new, base, at)
        edit.rewire(anchor, tail, skip={ls["name"] for ls in edit.added})
        if _fits(work, limit) is None:
            continue
        extra = _invalid_param(work, new, apis, rng, invalid_prob)
        _commit(spec, work)
        return [edit.record(new, "api", None, cfg.api, "insert")] + extra
    return None


def op_replace(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator, *,
               invalid_prob: float = 0.0) -> list[Mutation] | None:
    """Replace a layer by another API of its category (parameters both configs type alike
    are kept, the rest drawn), with adapters so its consumers see the same shape."""
    try:
        shapes = infer_shapes(spec)
    except ShapeError:
        return None
    keep_out = {spec.output, spec.logits_layer}
    cands = [ls for ls in spec.layers if ls.api in apis and not ls.fixed and ls.name not in keep_out
             and shapes.get(ls.name) is not None and all(shapes.get(i) is not None for i in ls.inputs)
             and any(a != ls.api and c.category == apis[ls.api].category and a not in NO_INSERT
                     and (c.inputs == "many") == (apis[ls.api].inputs == "many") for a, c in apis.items())]
    if not cands:
        return None
    limit = _limit(shapes)
    for _ in range(LOCAL_TRIES):
        old = cands[int(rng.integers(len(cands)))]
        cat, many = apis[old.api].category, apis[old.api].inputs == "many"
        others = sorted(a for a, c in apis.items() if a != old.api and c.category == cat and a not in NO_INSERT
                        and (c.inputs == "many") == many)
        cfg = apis[others[int(rng.integers(len(others)))]]
        work = spec.copy()
        edit = _Edit(work)
        at = edit.remove(old.name)
        base = f"{old.name}_as_{snake_name(cfg.api)}"
        ins = [shapes[i] for i in old.inputs]
        if many:
            params = draw_params(cfg, apis, rng, ins[0], keep=old.params)  # type: ignore[arg-type]
            new, at = edit.add(cfg.api, params, list(old.inputs), base, at)
            in_shapes = ins
        else:
            steps, s_in = to_rank(ins[0], RANK_OVERRIDE.get(cfg.api, cfg.rank))  # type: ignore[arg-type]
            src, at = edit.chain(steps, old.inputs[0], base, at)
            params = draw_params(cfg, apis, rng, s_in, keep=old.params)
            new, at = edit.add(cfg.api, params, [src], base, at)
            in_shapes = [s_in]
        try:
            s_out = layer_shape(cfg.api, params, in_shapes)  # type: ignore[arg-type]
        except ShapeError:
            continue
        if s_out is None:
            continue
        tail, at = edit.chain(fit(s_out, shapes[old.name]), new, base, at)  # type: ignore[arg-type]
        edit.rewire(old.name, tail, skip=set())
        if _fits(work, limit) is None:
            continue
        extra = _invalid_param(work, new, apis, rng, invalid_prob)
        _commit(spec, work)
        return [edit.record(new, "api", old.api, cfg.api, "replace")] + extra
    return None


def op_remove(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator, **_: Any) -> list[Mutation] | None:
    """Remove a layer and feed its consumers its first input, through adapters where the
    shapes differ (the model output, the logits layer and fixed layers stay)."""
    try:
        shapes = infer_shapes(spec)
    except ShapeError:
        return None
    keep_out = {spec.output, spec.logits_layer}
    ints = {i.name for i in spec.inputs if i.is_integer}
    cands = [ls for ls in spec.layers if not ls.fixed and ls.name not in keep_out and ls.inputs[0] not in ints
             and shapes.get(ls.name) is not None and shapes.get(ls.inputs[0]) is not None]
    limit = _limit(shapes)
    for _ in range(min(LOCAL_TRIES, 2 * len(cands))):
        old = cands[int(rng.integers(len(cands)))]
        work = spec.copy()
        edit = _Edit(work)
        at = edit.remove(old.name)
        tail, at = edit.chain(fit(shapes[old.inputs[0]], shapes[old.name]), old.inputs[0],  # type: ignore[arg-type]
                              f"rm_{old.name}", at)
        edit.rewire(old.name, tail, skip=set())
        if _fits(work, limit) is None:
            continue
        _commit(spec, work)
        return [edit.record(old.name, "api", old.api, None, "remove")]
    return None


def op_activation(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator,
                  **_: Any) -> list[Mutation] | None:
    """Set an activation parameter (activation, recurrent_activation) to another name from
    the whole keras.activations list."""
    cands = [(ls, n) for ls in spec.layers if ls.api in apis for n in ACTIVATION_PARAMS
             if n in apis[ls.api].params and apis[ls.api].params[n].type == "str" and n not in ls.fixed]
    if not cands:
        return None
    ls, name = cands[int(rng.integers(len(cands)))]
    old = ls.params.get(name)
    choices = [a for a in ACTIVATIONS if a != old]
    new = choices[int(rng.integers(len(choices)))]
    ls.params[name] = new
    return [Mutation(ls.name, name, old, new, False, op="activation")]


def op_duplicate(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator,
                 **_: Any) -> list[Mutation] | None:
    """Copy a chain of one to four single-input layers whose output shape survives a second
    pass, and run the copy right after the original (fresh weights for the copy)."""
    try:
        shapes = infer_shapes(spec)
    except ShapeError:
        return None
    limit = _limit(shapes)
    cands: list[list[str]] = []
    for name in spec.topological_order():
        chain = [name]
        while len(chain) <= 4:
            ls = spec.layer(chain[-1])
            if len(ls.inputs) != 1 or ls.name == spec.logits_layer or ls.api == "Embedding" \
                    or shapes.get(ls.name) is None:
                break
            s = shapes[ls.name]
            try:
                for n in chain:
                    s = layer_shape(spec.layer(n).api, spec.layer(n).params, [s])  # type: ignore[list-item]
                    if s is None:
                        break
            except ShapeError:
                s = None
            if s is not None and s == shapes[ls.name]:
                cands.append(list(chain))
            nxt = _consumers(spec, ls.name)
            if len(nxt) != 1 or ls.name == spec.output:
                break
            chain.append(nxt[0])
    if not cands:
        return None
    for _ in range(min(LOCAL_TRIES, 2 * len(cands))):
        chain = cands[int(rng.integers(len(cands)))]
        work = spec.copy()
        edit = _Edit(work)
        at = work.layer_names().index(chain[-1]) + 1
        src = chain[-1]
        copies = []
        for n in chain:
            ls = work.layer(n)
            src, at = edit.add(ls.api, ls.params, [src], f"{n}_dup", at, fixed=ls.fixed)
            copies.append(src)
        edit.rewire(chain[-1], src, skip=set(copies))
        if _fits(work, limit) is None:
            continue
        _commit(spec, work)
        return [edit.record(copies[0], "block", list(chain), copies, "duplicate")]
    return None


def _commit(spec: ModelSpec, work: ModelSpec) -> None:
    spec.layers, spec.output = work.layers, work.output


STRUCTURAL: dict[str, Operator] = {
    "insert": op_insert, "replace": op_replace, "remove": op_remove,
    "activation": op_activation, "duplicate": op_duplicate,
}


# ---- replay -------------------------------------------------------------------------------
def apply_mutations(spec: ModelSpec, mutations: list[Mutation | dict[str, Any]]) -> ModelSpec:
    """Replay recorded mutations (objects or their JSON) on a copy of ``spec``: the seed
    and a variant's record give the variant's layers and output back."""
    out = spec.copy()
    for raw in mutations:
        m = raw if isinstance(raw, Mutation) else Mutation.from_json(raw)
        for name in m.removed:
            del out.layers[out.layer_names().index(name)]
        for a in m.added:
            at = 0 if a["after"] is None else out.layer_names().index(a["after"]) + 1
            out.layers.insert(at, LayerSpec(a["name"], a["api"], copy.deepcopy(a["params"]), list(a["inputs"]),
                                            list(a.get("fixed", []))))
        for consumer, old, new in m.rewired:
            if consumer == "@output":
                out.output = new
            else:
                ls = out.layer(consumer)
                ls.inputs = [new if i == old else i for i in ls.inputs]
        if m.op in ("redraw", "activation"):
            if "." in m.layer:  # a wrapped layer's parameter (Bidirectional.layer)
                outer, key = m.layer.split(".", 1)
                out.layer(outer).params[key]["params"][m.param] = copy.deepcopy(m.new)
            else:
                out.layer(m.layer).params[m.param] = copy.deepcopy(m.new)
    return out
