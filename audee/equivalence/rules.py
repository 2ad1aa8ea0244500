"""EAGLE's equivalence rules over model specs (Wang et al., ICSE 2022).

A rule takes a spec and its weights and returns an *equivalent* model (:class:`Rewrite`):
another spec, the weights mapped onto it, and the map from each original layer to the
rewritten model's layer whose output must equal it; or None when it does not apply.  A
spec may hold no code layers (``Lambda``), so every rewrite is made of Keras layers.

Every rule rewrites each layer it applies to in place: the replacement's last layer takes
the original layer's name (so the layer map is the identity on the original names, the
rewritten model's output and logits layers are the original's, and the layers downstream
keep their inputs); the layers it adds are named ``<layer>__eq<what>`` (weights move with
the layer that holds them).  Applied to the one-layer model of a layer
(:func:`audee.cases.spec.one_layer_spec`), a rule rewrites that layer the same way: the
oracle's own-layer check (``audee.equivalence.check``) compares a layer with and without
the rule on the same input.

A few rules rewrite the inputs instead of the spec (batch independence: the rows run in
another order, one alone, or none): :attr:`Rewrite.order`; the float64 rule casts float inputs
(:attr:`Rewrite.input_dtype`).  Each rule says where it applies and what it is judged with
(``docs/oracles.md``, "Equivalent models"); names are :data:`audee.settings.EQUIVALENCE_RULES`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np

from audee.apis.owned_layers import ACTIVATION_ALIASES, ACTIVATION_FORMULAS
from audee.mutation.operators import MAX_UNROLL, ShapeError, infer_shapes
from audee.oracle.equivalence import ROW_ORDERS
from audee.cases.spec import InputSpec, LayerSpec, ModelSpec, Weights
from audee.core.floats import is_float

Shape = tuple[int, ...]

#: the rows a batch rule runs, in order, for a batch of n (see :class:`Rewrite`)
ORDERS = tuple(dict.fromkeys(ROW_ORDERS.values()))


@dataclass
class Rewrite:
    """An equivalent model of a spec: what runs beside the original on each backend."""

    rule: str
    spec: ModelSpec
    weights: Weights
    layer_map: dict[str, str]        # original layer -> the rewritten model's layer whose output must equal it
    rewritten: list[str]             # the original layers the rule changed (those it can blame), model order
    order: str | None = None         # batch rules: the original rows run, in this order (ORDERS); None: all, as given
    input_dtype: str | None = None   # float inputs cast to this dtype (the float64 rule)

    def rows(self, n: int) -> list[int]:
        """The original batch rows the rewritten model's rows are, in order (batch of n)."""
        if self.order == "reversed":
            return list(range(n))[::-1]
        if self.order == "first":
            return [0] if n else []
        if self.order == "empty":
            return []
        return list(range(n))

    def map_inputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The rewritten model's inputs for the original's ``inputs``."""
        n = int(next(iter(inputs.values())).shape[0]) if inputs else 0
        rows = self.rows(n)
        out = {}
        for k, v in inputs.items():
            v = np.asarray(v)
            if self.order is not None:
                v = v[rows]
            if self.input_dtype is not None and np.issubdtype(v.dtype, np.floating):
                v = v.astype(self.input_dtype)
            out[k] = v
        return out


@dataclass
class Context:
    """What a layer rule may read about the model it rewrites."""

    spec: ModelSpec
    shapes: dict[str, Shape | None]
    taken: set[str] = field(default_factory=set)

    def name(self, layer: str, what: str) -> str:
        """A fresh layer name ``<layer>__eq<what>``."""
        base = f"{layer}__eq{what}"
        name, k = base, 2
        while name in self.taken:
            name, k = f"{base}{k}", k + 1
        self.taken.add(name)
        return name

    def in_shape(self, ls: LayerSpec) -> Shape | None:
        return self.shapes.get(ls.inputs[0]) if len(ls.inputs) == 1 else None

    def out_shape(self, ls: LayerSpec) -> Shape | None:
        return self.shapes.get(ls.name)

    def nonnegative(self, ref: str) -> bool:
        """Whether the tensor ``ref`` is >= 0 wherever it is not NaN: the output of a layer
        ending in an activation whose range is [0, ...)."""
        try:
            ls = self.spec.layer(ref)
        except KeyError:
            return False
        p = ls.params
        if ls.api == "ReLU":
            slope, thr = p.get("negative_slope", 0.0), p.get("threshold", 0.0)
            return slope in (0, 0.0, None) and isinstance(thr, (int, float)) and thr >= 0
        if ls.api in ("Softmax",):
            return True
        act = p.get("activation")
        return isinstance(act, str) and act in NONNEGATIVE_ACTIVATIONS


#: activations that are not elementwise (they reduce or split the last axis): a layer under one computes
#: something else in the other data_format (found by the experiment: DepthwiseConv2D with softmax)
AXIS_ACTIVATIONS = frozenset({"softmax", "log_softmax", "sparsemax", "glu"})
#: activations whose values are >= 0 (or NaN): max pooling's padding with zeros is exact after them
NONNEGATIVE_ACTIVATIONS = frozenset({"relu", "relu6", "sigmoid", "hard_sigmoid", "softmax", "softplus", "exponential"})


class Rule:
    """One equivalence rule.  ``name`` (a setting's value), ``eagle`` (EAGLE's rule
    number), ``where`` (the layers it applies to), ``tolerance`` (how the two models are
    compared: ``dtype`` is the deviation oracle's tolerance of the compared values' dtype,
    ``float32`` float32's whatever the dtypes, ``exact`` any difference), ``nonfinite_exact`` (whether NaN/Inf
    propagate alike through both models: False where the rewrite multiplies by inserted
    zeros, ``inf * 0`` being NaN), ``widens`` (the rewrite computes in a wider dtype: a
    NaN/Inf of the original where the rewrite stays finite is the narrower dtype's overflow)."""

    name: ClassVar[str] = ""
    eagle: ClassVar[str] = ""
    where: ClassVar[str] = ""
    tolerance: ClassVar[str] = "dtype"
    nonfinite_exact: ClassVar[bool] = True
    widens: ClassVar[bool] = False  # the rewrite computes in a wider dtype: the original may overflow alone
    #: the rewrite keeps every layer's class, parameters and dtype and only moves axes, so a backend that
    #: refuses the original but runs the rewrite refuses something its own layer computes: the rewrite
    #: runs where the original was refused too (a refusal of a dtype or of an invalid value is shared)
    witnesses_refusals: ClassVar[bool] = False
    #: the two models are compared on what each backend accepts (a refusal on one side where the
    #: other runs) and on their shapes, never on values: the rule holds for a layer random by design
    #: too, which draws other values in each model (:func:`audee.apis.call_args.random_values`)
    acceptance_only: ClassVar[bool] = False

    def apply(self, spec: ModelSpec, weights: Weights) -> Rewrite | None:
        raise NotImplementedError


Replacement = tuple[list[LayerSpec], Weights]


class LayerRule(Rule):
    """A rule that rewrites single layers: :meth:`layer` gives a layer's replacement (the
    last one named as the layer) and its weights, or None."""

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        raise NotImplementedError

    def apply(self, spec: ModelSpec, weights: Weights) -> Rewrite | None:
        ctx = Context(spec, safe_shapes(spec), set(spec.layer_names()) | set(spec.input_names))
        layers: list[LayerSpec] = []
        new_weights: Weights = {}
        changed: list[str] = []
        for ls in spec.layers:
            got = None
            try:
                got = self.layer(ls, weights.get(ls.name), ctx)
            except (ValueError, TypeError, KeyError, IndexError, ShapeError):
                got = None  # a parameter the rule cannot read (a crafty invalid value): left as it is
            if got is None:
                layers.append(ls)
                if ls.name in weights:
                    new_weights[ls.name] = list(weights[ls.name])
                continue
            repl, ws = got
            assert repl[-1].name == ls.name, f"{self.name}: the replacement of {ls.name} must end in it"
            layers += repl
            new_weights.update(ws)
            changed.append(ls.name)
        if not changed:
            return None
        new = ModelSpec(spec.name, list(spec.inputs), layers, spec.output, spec.logits, dict(spec.meta))
        return Rewrite(self.name, new, new_weights, {n: n for n in spec.layer_names()}, changed)


def safe_shapes(spec: ModelSpec) -> dict[str, Shape | None]:
    """Every tensor's shape without the batch (None where unknown; {} when the spec does not infer)."""
    try:
        return infer_shapes(spec)
    except (ShapeError, ValueError, TypeError, KeyError, IndexError):
        return {}


# ---- small helpers ------------------------------------------------------------------------------
def _tup(value: Any, n: int, default: Any = None) -> tuple:
    if value is None:
        value = default
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"expected {n} values, got {value!r}")
        out = tuple(value)
    else:
        out = (value,) * n
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in out):
        raise ValueError(f"expected positive ints, got {value!r}")
    return out


def _padding(p: dict[str, Any]) -> str:
    pad = p.get("padding", "valid")
    if not isinstance(pad, str):
        raise ValueError(f"padding {pad!r}")
    return pad.lower()


def _channels_first(p: dict[str, Any]) -> bool:
    fmt = p.get("data_format")
    if fmt not in (None, "channels_first", "channels_last"):
        raise ValueError(f"data_format {fmt!r}")
    return fmt == "channels_first"


def _helper(ls: LayerSpec, api: str, params: dict[str, Any], name: str, inputs: list[str]) -> LayerSpec:
    """A layer added by a rule, under the dtype policy of the layer it stands beside."""
    if "dtype" in ls.params:
        params = {**params, "dtype": ls.params["dtype"]}
    return LayerSpec(name, api, params, inputs)


def _feeder(ls: LayerSpec, api: str, params: dict[str, Any], name: str, inputs: list[str]) -> LayerSpec:
    """A layer added by a rule to move ``ls``'s input (a permutation, a reshape, a reversal,
    a zero padding), which passes it on in the dtype it came in (``autocast: False``), so that
    the layer casts it, or not, as it did in the model: Keras' GroupNormalization and
    LayerNormalization never cast their input and normalize a float32 input in float32 under a
    float16 policy, and a float16 Permute before them rounded a row at 4437 +- 0.02 to one value
    (every backend "broke" the axis rule: the api-cpu campaign, rng 3029)."""
    return _helper(ls, api, {**params, "autocast": False}, name, inputs)


def _renamed(ls: LayerSpec, name: str, inputs: list[str], params: dict[str, Any] | None = None,
             api: str | None = None) -> LayerSpec:
    """``ls`` under another name, inputs or parameters, called as it was (``call``: its
    training flag, its mask)."""
    return LayerSpec(name, api or ls.api, dict(ls.params if params is None else params), inputs, list(ls.fixed),
                     dict(ls.call))


def _spatial(api: str) -> int:
    """Spatial dims of an N-D conv / pooling API name (``Conv2D`` -> 2)."""
    for n in (1, 2, 3):
        if api.endswith(f"{n}D"):
            return n
    raise ValueError(api)


def same_padding(n: int | None, k: int, s: int, d: int) -> tuple[int, int]:
    """TensorFlow's (and Keras') ``padding="same"`` on one axis: (before, after), the extra
    one after.  With stride 1 it is (k_eff - 1) split, whatever the size; else it needs ``n``."""
    keff = (k - 1) * d + 1
    if s == 1:
        total = keff - 1
    else:
        if n is None:
            raise ValueError("same padding with a stride needs the input size")
        out = -(-n // s)
        total = max((out - 1) * s + keff - n, 0)
    return total // 2, total - total // 2


CONVS = ("Conv1D", "Conv2D", "Conv3D")
DEPTHWISE = ("DepthwiseConv1D", "DepthwiseConv2D")
SEPARABLE = ("SeparableConv1D", "SeparableConv2D")
MAX_POOLS = ("MaxPooling1D", "MaxPooling2D", "MaxPooling3D")
AVG_POOLS = ("AveragePooling1D", "AveragePooling2D", "AveragePooling3D")
GLOBAL_POOLS = tuple(f"Global{k}Pooling{n}D" for k in ("Average", "Max") for n in (1, 2, 3))
RNNS = ("SimpleRNN", "LSTM", "GRU")
WITH_ACTIVATION = CONVS + DEPTHWISE + SEPARABLE + ("Dense", "EinsumDense", "Conv1DTranspose", "Conv2DTranspose",
                                                   "Conv3DTranspose")


def _pool_params(p: dict[str, Any], n: int) -> tuple[tuple, tuple]:
    k = _tup(p.get("pool_size"), n, 2)
    st = p.get("strides")
    st = k if st is None else _tup(st, n)
    return k, st


def _spatial_of(shape: Shape | None, cf: bool) -> tuple[int, ...] | None:
    if shape is None:
        return None
    return tuple(shape[1:]) if cf else tuple(shape[:-1])


# ---- padding: built-in "same" against ZeroPadding + "valid" (EAGLE rule 2) -------------------------
class PaddingRule(LayerRule):
    name = "padding"
    eagle = "2"
    nonfinite_exact = False  # a max-pooling window of NaN and padding: each framework decides (TF drops NaN)
    where = ("Conv1D/2D/3D, DepthwiseConv1D/2D, SeparableConv1D/2D with padding='same' (and Conv1D 'causal'); "
             "MaxPooling1D/2D/3D with padding='same' whose input is non-negative (the output of a relu-like "
             "activation: zero padding then equals the -inf padding of max pooling); a stride > 1 needs the "
             "input size (shape inference)")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        p = ls.params
        if ls.api in CONVS + DEPTHWISE + SEPARABLE:
            n = _spatial(ls.api)
            pad = _padding(p)
            k = _tup(p.get("kernel_size"), n)
            st = _tup(p.get("strides"), n, 1)
            d = _tup(p.get("dilation_rate"), n, 1)
        elif ls.api in MAX_POOLS:
            n = _spatial(ls.api)
            pad = _padding(p)
            k, st = _pool_params(p, n)
            d = (1,) * n
            if pad == "same" and not ctx.nonnegative(ls.inputs[0]):
                return None
        else:
            return None
        if pad not in ("same", "causal") or len(ls.inputs) != 1:
            return None
        cf = _channels_first(p)
        if pad == "causal":
            if ls.api != "Conv1D":
                return None
            pads = [((k[0] - 1) * d[0], 0)]
        else:
            size = _spatial_of(ctx.in_shape(ls), cf)
            pads = [same_padding(size[i] if size else None, k[i], st[i], d[i]) for i in range(n)]
        if not any(a or b for a, b in pads):
            return None
        padding: Any = list(pads[0]) if n == 1 else [list(x) for x in pads]
        zp = _feeder(ls, f"ZeroPadding{n}D", {"padding": padding, **({"data_format": p["data_format"]}
                                                                      if p.get("data_format") else {})},
                     ctx.name(ls.name, "pad"), list(ls.inputs))
        layer = _renamed(ls, ls.name, [zp.name], {**p, "padding": "valid"})
        return [zp, layer], ({ls.name: list(weights)} if weights else {})


# ---- N-D as (N+1)-D with a unit dimension (EAGLE rule 3) -----------------------------------------
class RankRule(LayerRule):
    name = "rank"
    eagle = "3"
    where = ("Conv1D/2D, DepthwiseConv1D, SeparableConv1D, MaxPooling1D/2D and AveragePooling1D/2D (padding "
             "'valid' or 'same') as the (N+1)-D layer on the input reshaped with a leading unit spatial "
             "dimension (kernel, stride and dilation 1 there), reshaped back; needs the input and output "
             "shapes (shape inference)")

    UP = {"Conv1D": "Conv2D", "Conv2D": "Conv3D", "DepthwiseConv1D": "DepthwiseConv2D",
          "SeparableConv1D": "SeparableConv2D", "MaxPooling1D": "MaxPooling2D", "MaxPooling2D": "MaxPooling3D",
          "AveragePooling1D": "AveragePooling2D", "AveragePooling2D": "AveragePooling3D"}

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        up = self.UP.get(ls.api)
        if up is None or len(ls.inputs) != 1:
            return None
        p = dict(ls.params)
        n = _spatial(ls.api)
        if _padding(p) not in ("same", "valid"):
            return None
        if _channels_first(p):  # shape inference reads channels_last layouts only
            return None
        cf = False
        src, dst = ctx.in_shape(ls), ctx.out_shape(ls)
        if src is None or dst is None or len(src) != n + 1 or len(dst) != n + 1:
            return None
        new = dict(p)
        if "Pooling" in ls.api:
            k, st = _pool_params(p, n)
            new["pool_size"] = [1, *k]
            new["strides"] = [1, *st]
        else:
            k = _tup(p.get("kernel_size"), n)
            new["kernel_size"] = [1, *k]
            new["strides"] = [1, *_tup(p.get("strides"), n, 1)]
            new["dilation_rate"] = [1, *_tup(p.get("dilation_rate"), n, 1)]
        unit_in = (src[0], 1, *src[1:]) if cf else (1, *src)
        r_in = _feeder(ls, "Reshape", {"target_shape": list(unit_in)}, ctx.name(ls.name, "unit"), list(ls.inputs))
        body = _renamed(ls, ctx.name(ls.name, ""), [r_in.name], new, api=up)
        # -1: the layer's activation may change the last axis (glu halves it) where shape inference does not
        r_out = _helper(ls, "Reshape", {"target_shape": [*dst[:-1], -1]}, ls.name, [body.name])
        # kernels gain the unit axis in front: (k, Cin, F) -> (1, k, Cin, F); a separable layer's depthwise
        # (k, C, m) and pointwise (1, C*m, F) kernels alike; biases stay
        kernels = 2 if ls.api.startswith("Separable") else 1
        ws = {body.name: [w.reshape((1, *w.shape)) if i < kernels else w for i, w in enumerate(weights)]} \
            if weights else {}
        return [r_in, body, r_out], ws


# ---- DepthwiseConv as a grouped Conv (EAGLE rule 4) ---------------------------------------------
class DepthwiseRule(LayerRule):
    name = "depthwise"
    eagle = "4"
    where = ("DepthwiseConv1D/2D as Conv1D/2D with groups = channels and filters = channels x "
             "depth_multiplier, the kernel (k..., C, m) reshaped to (k..., 1, C*m)")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api not in DEPTHWISE or not weights:
            return None
        p = dict(ls.params)
        kernel = weights[0]
        c, m = int(kernel.shape[-2]), int(kernel.shape[-1])
        new = {k: v for k, v in p.items() if k not in ("depth_multiplier", "depthwise_initializer",
                                                       "depthwise_regularizer", "depthwise_constraint")}
        new.update(filters=c * m, groups=c)
        body = _renamed(ls, ls.name, list(ls.inputs), new, api="Conv" + ls.api[len("DepthwiseConv"):])
        w = [kernel.reshape((*kernel.shape[:-2], 1, c * m)), *weights[1:]]
        return [body], {ls.name: w}


# ---- SeparableConv as depthwise then a 1x1 convolution (EAGLE rule 5) --------------------------------
class SeparableRule(LayerRule):
    name = "separable"
    eagle = "5"
    where = "SeparableConv1D/2D as DepthwiseConv1D/2D (no bias, no activation) then a 1x1 Conv1D/2D"

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api not in SEPARABLE or not weights or len(weights) < 2:
            return None
        p = dict(ls.params)
        n = _spatial(ls.api)
        keep = ("kernel_size", "strides", "padding", "data_format", "dilation_rate", "depth_multiplier", "dtype")
        dw = _renamed(ls, ctx.name(ls.name, "dw"), list(ls.inputs),
                      {k: p[k] for k in keep if k in p} | {"use_bias": False}, api=f"DepthwiseConv{n}D")
        pw_params = {k: p[k] for k in ("filters", "data_format", "activation", "use_bias", "dtype") if k in p}
        pw = _renamed(ls, ls.name, [dw.name], pw_params | {"kernel_size": 1}, api=f"Conv{n}D")
        return [dw, pw], {dw.name: [weights[0]], ls.name: list(weights[1:])}


# ---- a dilated convolution as an undilated one with a zero-inserted kernel (EAGLE rule 6) ------------
class DilationRule(LayerRule):
    name = "dilation"
    eagle = "6"
    where = ("Conv1D/2D/3D and DepthwiseConv1D/2D with a dilation_rate > 1 and strides 1, as the undilated layer "
             "with kernel size (k-1)*d+1 and zeros between the kernel taps")
    nonfinite_exact = False  # an Inf under an inserted zero tap is NaN in the rewrite

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api not in CONVS + DEPTHWISE or not weights:
            return None
        p = dict(ls.params)
        n = _spatial(ls.api)
        d = _tup(p.get("dilation_rate"), n, 1)
        if max(d) == 1 or max(_tup(p.get("strides"), n, 1)) != 1:
            return None
        k = _tup(p.get("kernel_size"), n)
        kernel = weights[0]
        if tuple(kernel.shape[:n]) != k:
            return None
        big = tuple((ki - 1) * di + 1 for ki, di in zip(k, d))
        z = np.zeros(big + kernel.shape[n:], kernel.dtype)
        z[tuple(slice(None, None, di) for di in d)] = kernel
        new = dict(p, kernel_size=list(big) if n > 1 else big[0], dilation_rate=1)
        return [_renamed(ls, ls.name, list(ls.inputs), new)], {ls.name: [z, *weights[1:]]}


# ---- channels_first against channels_last with Permute around it (EAGLE rule 8) -------------------
class ChannelsRule(LayerRule):
    name = "channels"
    eagle = "8"
    where = ("every layer with a data_format (Conv*, DepthwiseConv*, SeparableConv*, pooling, global pooling, "
             "UpSampling, ZeroPadding, Cropping) whose rank its API fixes, without an activation over the last "
             "axis (softmax, log_softmax, sparsemax, glu): the other data_format between two Permute layers")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        api = ls.api
        layout = api in CONVS + DEPTHWISE + SEPARABLE + MAX_POOLS + AVG_POOLS + GLOBAL_POOLS or \
            api[:-2] in ("UpSampling", "ZeroPadding", "Cropping")
        if not layout or len(ls.inputs) != 1 or ls.params.get("activation") in AXIS_ACTIVATIONS:
            return None
        p = dict(ls.params)
        cf = _channels_first(p)
        n = _spatial(api)
        to_cf = tuple([n + 1] + list(range(1, n + 1)))      # (.., C) -> (C, ..)
        to_cl = tuple(list(range(2, n + 2)) + [1])          # (C, ..) -> (.., C)
        before, after = (to_cl, to_cf) if cf else (to_cf, to_cl)
        pin = _feeder(ls, "Permute", {"dims": list(before)}, ctx.name(ls.name, "perm"), list(ls.inputs))
        flat = api in GLOBAL_POOLS and not p.get("keepdims", False)
        body = _renamed(ls, ls.name if flat else ctx.name(ls.name, ""), [pin.name],
                        dict(p, data_format="channels_last" if cf else "channels_first"))
        out = [pin, body]
        if not flat:
            out.append(_helper(ls, "Permute", {"dims": list(after)}, ls.name, [body.name]))
        return out, ({body.name: list(weights)} if weights else {})


@lru_cache(maxsize=1)
def image_layers() -> frozenset[str]:
    """The image preprocessing layers that take a data_format (their API configs: category
    ``preprocessing``, a ``data_format`` parameter, rank-4 input)."""
    from audee.apis.config import load_api_configs

    return frozenset(api for api, cfg in load_api_configs().items()
                     if cfg.category == "preprocessing" and "data_format" in cfg.params and cfg.ranks == [4])


class ImageChannelsRule(LayerRule):
    """The channels rule for image preprocessing layers, judged on acceptance: a layer that
    takes data_format must run channels_first images wherever it runs the same images
    channels_last (Keras' RandomColorJitter built its hue and saturation steps without its
    data_format and split the width as the colors: refused on every backend alike, which no
    cross-backend oracle sees).  Values are not compared: most of these layers are random in
    training, and the others' layouts are the channels rule's business."""

    name = "image_channels"
    eagle = "8"
    where = ("an image preprocessing layer (its API config: category preprocessing, a data_format, rank 4) called "
             "on channels_first images: channels_last between two Permute layers; judged on acceptance only")
    witnesses_refusals = True
    acceptance_only = True

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api not in image_layers() or len(ls.inputs) != 1 or ls.params.get("data_format") != "channels_first":
            return None
        pin = _feeder(ls, "Permute", {"dims": [2, 3, 1]}, ctx.name(ls.name, "perm"), list(ls.inputs))
        body = _renamed(ls, ctx.name(ls.name, ""), [pin.name], dict(ls.params, data_format="channels_last"))
        out = _helper(ls, "Permute", {"dims": [3, 1, 2]}, ls.name, [body.name])
        return [pin, body, out], ({body.name: list(weights)} if weights else {})


# ---- Dense as a 1x1 convolution or an EinsumDense (EAGLE rule 14's API redundancy) ------------------
class DenseConvRule(LayerRule):
    name = "dense_conv"
    eagle = "14"
    where = ("Dense on a rank-2..5 input (shape inference) as a 1x1 Conv1D/2D/3D on its last axis (a rank-2 "
             "input reshaped to one step and back)")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api != "Dense" or not weights or len(ls.inputs) != 1 or ls.params.get("lora_rank"):
            return None
        src = ctx.in_shape(ls)
        if src is None or not 1 <= len(src) <= 4:
            return None
        p = dict(ls.params)
        units = int(weights[0].shape[-1])
        conv = {k: p[k] for k in ("activation", "use_bias", "dtype") if k in p} | {"filters": units, "kernel_size": 1}
        kernel = weights[0]
        if len(src) == 1:
            r_in = _feeder(ls, "Reshape", {"target_shape": [1, int(src[0])]}, ctx.name(ls.name, "step"),
                           list(ls.inputs))
            body = _renamed(ls, ctx.name(ls.name, ""), [r_in.name], conv, api="Conv1D")
            # -1: an activation may change the last axis (glu halves it)
            r_out = _helper(ls, "Reshape", {"target_shape": [-1]}, ls.name, [body.name])
            return [r_in, body, r_out], {body.name: [kernel.reshape((1, *kernel.shape)), *weights[1:]]}
        n = len(src) - 1
        body = _renamed(ls, ls.name, list(ls.inputs), conv, api=f"Conv{n}D")
        return [body], {ls.name: [kernel.reshape((1,) * n + kernel.shape), *weights[1:]]}


class DenseEinsumRule(LayerRule):
    name = "dense_einsum"
    eagle = "14"
    where = "Dense as EinsumDense('...a,ab->...b') with the same kernel and bias"

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api != "Dense" or not weights or len(ls.inputs) != 1 or ls.params.get("lora_rank"):
            return None
        p = dict(ls.params)
        units = int(weights[0].shape[-1])
        use_bias = p.get("use_bias", True) is not False
        new = {k: p[k] for k in ("activation", "dtype") if k in p} | {
            "equation": "...a,ab->...b", "output_shape": units, "bias_axes": "b" if use_bias else None}
        return [_renamed(ls, ls.name, list(ls.inputs), new, api="EinsumDense")], {ls.name: list(weights)}


# ---- an activation inside a layer against a separate Activation layer --------------------------------
class ActivationRule(LayerRule):
    name = "activation"
    eagle = "7"
    where = ("Dense, EinsumDense, Conv*, ConvTranspose*, DepthwiseConv*, SeparableConv* with an activation other "
             "than linear: the layer with activation 'linear', then Activation(activation)")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        act = ls.params.get("activation")
        if ls.api not in WITH_ACTIVATION or not isinstance(act, str) or act in ("linear", ""):
            return None
        body = _renamed(ls, ctx.name(ls.name, ""), list(ls.inputs), dict(ls.params, activation="linear"))
        out = _helper(ls, "Activation", {"activation": act}, ls.name, [body.name])
        return [body, out], ({body.name: list(weights)} if weights else {})


# ---- BatchNormalization's documented formula (EAGLE rule 7) ------------------------------------------
class BatchNormRule(LayerRule):
    name = "batchnorm"
    eagle = "7"
    where = ("BatchNormalization over the last axis of a rank-3 or rank-4 input (inference): its documented "
             "formula gamma * (x - mean) / sqrt(var + epsilon) + beta folded into one scale and shift per channel, "
             "a 1x1 DepthwiseConv1D/2D (one product and one sum per value; folded in float64)")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api != "BatchNormalization" or not weights or len(ls.inputs) != 1:
            return None
        p = ls.params
        if p.get("axis", -1) not in (-1,) or p.get("dtype") not in (None, "float32") or p.get("renorm") \
                or ls.call.get("training"):  # batch statistics: not the inference formula
            return None
        src = ctx.in_shape(ls)
        if src is None or len(src) not in (2, 3):
            return None
        it = iter(weights)
        gamma = next(it) if p.get("scale", True) else None
        beta = next(it) if p.get("center", True) else None
        mean, var = next(it), next(it)
        eps = float(p.get("epsilon", 1e-3))
        wide = np.float64
        with np.errstate(all="ignore"):
            a = (1.0 if gamma is None else gamma.astype(wide)) / np.sqrt(var.astype(wide) + eps)
            b = (0.0 if beta is None else beta.astype(wide)) - mean.astype(wide) * a
        c = int(mean.shape[0])
        n = len(src) - 1
        a = np.broadcast_to(a, (c,)).astype(mean.dtype)
        b = np.broadcast_to(b, (c,)).astype(mean.dtype)
        body = LayerSpec(ls.name, f"DepthwiseConv{n}D", {"kernel_size": 1, "use_bias": True}, list(ls.inputs))
        return [body], {ls.name: [a.reshape((1,) * n + (c, 1)), b]}


# ---- padding then cropping as the identity (EAGLE rule 14) -------------------------------------------
class PadCropRule(LayerRule):
    name = "pad_crop"
    eagle = "14"
    where = ("after every Conv*/DepthwiseConv*/SeparableConv*/pooling layer whose output shape is known: "
             "ZeroPadding(1) then Cropping(1) of the same rank and data_format, the identity (1-D: channels_last "
             "only, Cropping1D has no data_format)")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api not in CONVS + DEPTHWISE + SEPARABLE + MAX_POOLS + AVG_POOLS:
            return None
        n = _spatial(ls.api)
        out = ctx.out_shape(ls)
        if out is None or len(out) != n + 1:
            return None
        fmt = {"data_format": ls.params["data_format"]} if ls.params.get("data_format") else {}
        if n == 1:  # Cropping1D has no data_format: it crops axis 1, the steps of channels_last only
            if _channels_first(ls.params):
                return None
            fmt = {}
        body = _renamed(ls, ctx.name(ls.name, ""), list(ls.inputs))
        zp = _helper(ls, f"ZeroPadding{n}D", {"padding": 1, **fmt}, ctx.name(ls.name, "pad"), [body.name])
        crop = _helper(ls, f"Cropping{n}D", {"cropping": 1, **fmt}, ls.name, [zp.name])
        return [body, zp, crop], ({body.name: list(weights)} if weights else {})


# ---- RNNs: unroll=True against the loop (EAGLE rule 10's RNN family) -----------------------------------
class UnrollRule(LayerRule):
    name = "rnn_unroll"
    eagle = "10"
    where = f"SimpleRNN, LSTM, GRU with unroll=False over a known number of steps (at most {MAX_UNROLL}): unroll=True"

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api not in RNNS or ls.params.get("unroll"):
            return None
        src = ctx.in_shape(ls)
        if src is None or len(src) != 2 or src[0] > MAX_UNROLL:
            return None
        body = _renamed(ls, ls.name, list(ls.inputs), dict(ls.params, unroll=True))
        return [body], ({ls.name: list(weights)} if weights else {})


# ---- save and load (EAGLE rule 16): the model round-tripped inside each backend's worker --------------
class RoundTripRule(Rule):
    """The same spec flagged ``roundtrip``: the worker that builds it puts the weights in,
    saves and loads the Keras model this rule's way and runs the loaded model (the ONNX
    backends convert the loaded model).  Not a spec rewrite: the round trip is Keras' own code
    on each backend."""

    how: ClassVar[str] = "keras"
    tolerance = "exact"  # the same model, the same kernels: measured bit-identical on the four default backends

    def apply(self, spec: ModelSpec, weights: Weights) -> Rewrite | None:
        if spec.roundtrip:
            return None
        new = ModelSpec(spec.name, list(spec.inputs), list(spec.layers), spec.output, spec.logits, dict(spec.meta),
                        roundtrip=self.how)
        names = spec.layer_names()
        return Rewrite(self.name, new, weights, {n: n for n in names}, names)


class RoundTripKerasRule(RoundTripRule):
    name = "roundtrip_keras"
    eagle = "16"
    where = ("every model: saved to a .keras file with its weights and loaded back (keras.models.load_model) in the "
             "worker that built it")
    how = "keras"


class RoundTripConfigRule(RoundTripRule):
    name = "roundtrip_config"
    eagle = "16"
    where = ("every model: Model.from_config(model.get_config()) in the worker that built it, then "
             "set_weights(get_weights())")
    how = "config"


class RoundTripJsonRule(RoundTripRule):
    name = "roundtrip_json"
    eagle = "16"
    where = ("every model: keras.models.model_from_json(model.to_json()) in the worker that built it, then "
             "set_weights(get_weights())")
    how = "json"


# ---- go_backwards on the time-reversed sequence (EAGLE rule 10) ----------------------------------------
#: layers that put a mask on their output (an RNN under one would see the mask unreversed)
MASKING = ("Masking",)


def _masks(spec: ModelSpec) -> bool:
    """Whether a mask reaches some layer: made by a layer (Masking, mask_zero), or a call
    argument naming a mask input (the rewrite would have to reverse it too)."""
    return any(ls.api in MASKING or ls.params.get("mask_zero") or "mask" in ls.call for ls in spec.layers)


class GoBackwardsRule(LayerRule):
    name = "go_backwards"
    eagle = "10"
    where = ("SimpleRNN, LSTM, GRU (and Bidirectional of one, without a backward_layer) on a rank-3 input, in a "
             "model without a mask (Masking, mask_zero, a call's mask): go_backwards flipped on the input reversed in time "
             "(AudeeReverse(axis=1)); Keras returns the sequence in processing order, so the outputs (the last "
             "state, or return_sequences' whole sequence) are the same as they are")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if len(ls.inputs) != 1 or _masks(ctx.spec):
            return None
        src = ctx.in_shape(ls)
        if src is None or len(src) != 2:
            return None
        p = dict(ls.params)
        if ls.api in RNNS:
            if p.get("return_state") or p.get("stateful"):
                return None
            new = dict(p, go_backwards=not p.get("go_backwards", False))
        elif ls.api == "Bidirectional":
            inner = p.get("layer")
            if not isinstance(inner, dict) or inner.get("api") not in RNNS or p.get("backward_layer") is not None:
                return None
            ip = dict(inner.get("params", {}))
            if ip.get("go_backwards") or ip.get("return_state") or ip.get("stateful"):
                return None
            # Keras makes the backward layer with go_backwards=True whatever the forward one has (and
            # refuses two alike): the flipped pair is given explicitly, each with its own weights' slot
            new = dict(p, layer={"api": inner["api"], "params": dict(ip, go_backwards=True)},
                       backward_layer={"api": inner["api"], "params": dict(ip, go_backwards=False)})
        else:
            return None
        rev = _feeder(ls, "AudeeReverse", {"axis": 1}, ctx.name(ls.name, "rev"), list(ls.inputs))
        body = _renamed(ls, ls.name, [rev.name], new)
        return [rev, body], ({ls.name: list(weights)} if weights else {})


# ---- a layer over another axis against the same layer over the trailing axes (EAGLE rule 10's transpose) ----
#: the layers whose ``axis`` parameter names the axes they work along (normalize, or softmax over), with an
#: output of the input's shape; their weights, if any, hold one value per position of those axes
AXIS_LAYERS = frozenset({"LayerNormalization", "RMSNormalization", "BatchNormalization", "GroupNormalization",
                         "UnitNormalization", "Softmax"})
#: the layers whose ``attention_axes`` name the axes they attend over, between the batch and the features
ATTENTION_AXIS_LAYERS = frozenset({"MultiHeadAttention"})


def _axes(axis: Any, rank: int) -> tuple[list[int], list[int]] | None:
    """``axis`` (an int or a list) of a rank-``rank`` input (batch included) as the layer
    stores it (a list sorted as written: Keras' build sorts the values it was given) and
    as positive axes in that order; None where it names the batch, an axis twice or one
    out of range (an input outside the layer's contract: not this rule's to judge)."""
    raw = [axis] if isinstance(axis, int) and not isinstance(axis, bool) else axis
    if not isinstance(raw, (list, tuple)) or not raw or not all(isinstance(a, int) and not isinstance(a, bool)
                                                                 for a in raw):
        return None
    stored = sorted(raw) if isinstance(axis, (list, tuple)) else list(raw)
    pos = [a + rank if a < 0 else a for a in stored]
    if any(not 0 < a < rank for a in pos) or len(set(pos)) != len(pos):
        return None
    return stored, pos


class AxisRule(LayerRule):
    name = "axis"
    eagle = "10"
    where = ("LayerNormalization, RMSNormalization, BatchNormalization, GroupNormalization, UnitNormalization and "
             "Softmax whose axis is not written as the trailing axes (-1, or [-m, ..., -1]): the input permuted so "
             "that those axes come last in order (Permute), the layer over the trailing axes, permuted back; "
             "weights with one value per position of several axes are transposed from the order the layer stores "
             "its axes in (sorted as written) to the axes' order; MultiHeadAttention whose attention_axes are not "
             "written as the axes just before the features, in order: every input permuted alike so that they "
             "are, the layer over them, permuted back (weights as they are); a model with a mask is left alone")
    witnesses_refusals = True

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        if ls.api in ATTENTION_AXIS_LAYERS and not _masks(ctx.spec):
            return _attention_axes_last(ls, weights, ctx)
        if ls.api not in AXIS_LAYERS or len(ls.inputs) != 1 or _masks(ctx.spec):
            return None
        src = ctx.in_shape(ls)
        axis = ls.params.get("axis", -1)
        if src is None or (ls.api in ("BatchNormalization", "GroupNormalization") and not isinstance(axis, int)):
            return None
        rank = len(src) + 1
        got = _axes(axis, rank)
        if got is None:
            return None
        _, pos = got
        m = len(pos)
        trailing: Any = -1 if isinstance(axis, int) else list(range(-m, 0))
        if axis == trailing:
            return None
        order = sorted(pos)
        perm = [a for a in range(1, rank) if a not in order] + order  # Keras' Permute: 1-based, no batch
        out: list[LayerSpec] = []
        inputs = list(ls.inputs)
        if perm != list(range(1, rank)):
            pin = _feeder(ls, "Permute", {"dims": perm}, ctx.name(ls.name, "perm"), inputs)
            out.append(pin)
            inputs = [pin.name]
        back = [perm.index(a) + 1 for a in range(1, rank)]
        body_name = ls.name if back == list(range(1, rank)) else ctx.name(ls.name, "")
        out.append(_renamed(ls, body_name, inputs, dict(ls.params, axis=trailing)))
        if body_name != ls.name:
            out.append(_helper(ls, "Permute", {"dims": back}, ls.name, [body_name]))
        return out, ({body_name: ws} if (ws := _axis_weights(weights or [], src, pos)) else {})


def _attention_axes_last(ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
    """A MultiHeadAttention over ``attention_axes`` not written as the axes just before the
    features in order (positive): every input (query, value, key) permuted alike so that the
    other axes come first and the attention axes next, the layer over those axes, its output
    permuted back.  The projections act on the features alone, so the weights stay as they are."""
    shapes = [ctx.shapes.get(i) for i in ls.inputs]
    if not shapes or any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:  # type: ignore[arg-type]
        return None
    rank = len(shapes[0]) + 1  # type: ignore[arg-type]
    # a negative axis counts from the features as Keras counts it (``rank + axis``); unset, the batch, the
    # features, an axis twice or one out of range: outside the layer's contract, not this rule's to judge
    got = _axes(ls.params.get("attention_axes"), rank)
    if got is None or max(got[1]) >= rank - 1:
        return None
    pos = got[1]
    m = len(pos)
    trailing = list(range(rank - 1 - m, rank - 1))
    written = ls.params.get("attention_axes")
    if list(written if isinstance(written, (list, tuple)) else [written]) == trailing:
        return None
    out_dims = ls.params.get("output_shape")
    extra = len(out_dims) - 1 if isinstance(out_dims, (list, tuple)) and out_dims else 0
    perm = [a for a in range(1, rank - 1) if a not in pos] + sorted(pos) + [rank - 1]
    out: list[LayerSpec] = []
    inputs = list(ls.inputs)
    if perm != list(range(1, rank)):
        inputs = []
        for k, name in enumerate(ls.inputs):
            pin = _feeder(ls, "Permute", {"dims": perm}, ctx.name(ls.name, f"perm{k}"), [name])
            out.append(pin)
            inputs.append(pin.name)
    back = [perm.index(a) + 1 for a in range(1, rank - 1)] + list(range(rank - 1, rank + extra))
    body_name = ls.name if back == list(range(1, rank + extra)) else ctx.name(ls.name, "")
    out.append(_renamed(ls, body_name, inputs, dict(ls.params, attention_axes=trailing)))
    if body_name != ls.name:
        out.append(_helper(ls, "Permute", {"dims": back}, ls.name, [body_name]))
    return out, ({body_name: list(weights)} if weights else {})


def _axis_weights(weights: list[np.ndarray], src: Shape, pos: list[int]) -> list[np.ndarray]:
    """A layer's weights over the axes ``pos`` (in the order the layer stores them) in the
    axes' own order, as the same layer over the trailing axes holds them.  A weight of the
    axes' own shape where the stored one differs (a Keras that canonicalizes its axes) stays;
    one of neither shape is a ValueError (the layer is left alone)."""
    stored = [src[a - 1] for a in pos]
    ordered = [src[a - 1] for a in sorted(pos)]
    out = []
    for w in weights:
        if len(pos) == 1 or np.ndim(w) != len(pos):
            out.append(w)
        elif list(np.shape(w)) == stored:
            out.append(np.transpose(w, np.argsort(pos)))
        elif list(np.shape(w)) == ordered:
            out.append(w)
        else:
            raise ValueError(f"a weight of shape {np.shape(w)} over axes {pos}")
    return out


# ---- a normalization or activation against its documented formula (EAGLE rule 7) ------------------------
#: the Keras normalization layers the formula layer computes, with the parameters it takes from them
NORMS = {"LayerNormalization": "layer_norm", "BatchNormalization": "batch_norm", "GroupNormalization": "group_norm",
         "UnitNormalization": "unit_norm"}


def _activation_formula(act: Any) -> str | None:
    """The formula name of a Keras activation name (None: no formula for it)."""
    if not isinstance(act, str):
        return None
    act = ACTIVATION_ALIASES.get(act, act)
    return act if act in ACTIVATION_FORMULAS else None


class FormulaRule(LayerRule):
    name = "formula"
    eagle = "7"
    nonfinite_exact = False  # a formula's NaN/Inf (exp overflowing in a branch where() drops) is its own
    where = ("float32 layers (no dtype policy, or float32): LayerNormalization (no rms_scaling), "
             "BatchNormalization (inference; no renorm), GroupNormalization, UnitNormalization; Activation and "
             "the activation parameter of Dense, EinsumDense, Conv*, ConvTranspose*, DepthwiseConv*, SeparableConv* "
             "for " + ", ".join(ACTIVATION_FORMULAS) + " (swish, hard_swish as their aliases): each as "
             "AudeeFormula, the documented formula written with keras.ops (the layer's weights as they are); "
             "compared with the deviation oracle's tolerance of the dtype (a formula re-associates)")

    def layer(self, ls: LayerSpec, weights: list[np.ndarray] | None, ctx: Context) -> Replacement | None:
        p = ls.params
        if p.get("dtype") not in (None, "float32") or len(ls.inputs) != 1:
            return None
        formula = NORMS.get(ls.api)
        if formula is not None:
            if p.get("rms_scaling") or p.get("renorm") or ls.call.get("training"):
                return None
            fp: dict[str, Any] = {"formula": formula, "axis": p.get("axis", -1)}
            if formula != "unit_norm":
                fp |= {"epsilon": p.get("epsilon", 1e-3), "center": p.get("center", True) is not False,
                       "scale": p.get("scale", True) is not False}
            if formula == "group_norm":
                fp["groups"] = p.get("groups", 32)
            return [_helper(ls, "AudeeFormula", fp, ls.name, list(ls.inputs))], \
                ({ls.name: list(weights)} if weights else {})
        if ls.api == "Activation":
            f = _activation_formula(p.get("activation"))
            if f is None:
                return None
            return [_helper(ls, "AudeeFormula", {"formula": f}, ls.name, list(ls.inputs))], {}
        f = _activation_formula(p.get("activation"))
        if ls.api not in WITH_ACTIVATION or f is None:
            return None
        body = _renamed(ls, ctx.name(ls.name, ""), list(ls.inputs), dict(p, activation="linear"))
        out = _helper(ls, "AudeeFormula", {"formula": f}, ls.name, [body.name])
        return [body, out], ({body.name: list(weights)} if weights else {})


# ---- the whole model under a float64 dtype policy (EAGLE rule 12) -------------------------------------
class Float64Rule(Rule):
    name = "float64"
    eagle = "12"
    where = ("a float32 model (no layer with a dtype policy other than float32, float inputs float32): every "
             "layer under the float64 policy, float weights and inputs cast to float64; compared with float32's "
             "tolerance (the float32 model's own rounding); a float32 overflow the float64 model does not make "
             "is no finding")
    tolerance = "float32"
    widens = True

    def apply(self, spec: ModelSpec, weights: Weights) -> Rewrite | None:
        def policy(params: dict[str, Any]) -> bool:
            inner = [v.get("params", {}) for v in params.values() if isinstance(v, dict) and "api" in v]
            return params.get("dtype") in (None, "float32") and all(policy(i) for i in inner)

        floats = [i for i in spec.inputs if not i.is_integer]
        if any(i.dtype != "float32" for i in floats) or not all(policy(ls.params) for ls in spec.layers):
            return None
        new, new_weights = widened(spec, weights, "float64")
        names = spec.layer_names()
        return Rewrite(self.name, new, new_weights, {n: n for n in names}, names, input_dtype="float64")


def widened(spec: ModelSpec, weights: Weights, dtype: str = "float64") -> tuple[ModelSpec, Weights]:
    """``spec`` with every layer (a wrapper's inner layers too) under the ``dtype`` policy,
    its float inputs declared ``dtype`` and its float weights cast to it: the one way audee
    makes a wider model (the float64 rule here; the float64 and float32 references of
    :mod:`audee.reference`).  Cast float inputs with ``astype(dtype)`` to feed it."""
    def wide(params: dict[str, Any]) -> dict[str, Any]:
        out = {k: ({**v, "params": wide(dict(v.get("params", {})))} if isinstance(v, dict) and "api" in v else v)
               for k, v in params.items()}
        out["dtype"] = dtype
        return out

    inputs = [InputSpec(i.name, i.shape, i.dtype if i.is_integer else dtype, i.range) for i in spec.inputs]
    layers = [LayerSpec(ls.name, ls.api, wide(dict(ls.params)), list(ls.inputs), list(ls.fixed), call=dict(ls.call))
              for ls in spec.layers]
    return ModelSpec(spec.name, inputs, layers, spec.output, spec.logits, dict(spec.meta)), widened_weights(weights, dtype)


def widened_weights(weights: Weights, dtype: str = "float64") -> Weights:
    """:func:`widened`'s weights: the float ones cast to ``dtype`` (a search widens each individual's)."""
    return {k: [np.asarray(w).astype(dtype) if is_float(w) else w for w in ws] for k, ws in weights.items()}


# ---- batch independence (EAGLE rule 15): an inputs rewrite -------------------------------------------
class BatchRule(Rule):
    """The same model on the rows in another order, on one row alone, or on none: each row's
    outputs must not depend on the rest of the batch, and a batch of zero rows is a batch."""

    order: ClassVar[str] = "reversed"
    tolerance = "dtype"

    def apply(self, spec: ModelSpec, weights: Weights) -> Rewrite | None:
        if across_batch(spec):
            return None
        names = spec.layer_names()
        return Rewrite(self.name, spec, weights, {n: n for n in names}, names, order=self.order)


def across_batch(spec: ModelSpec) -> bool:
    """Whether a layer may compute across the batch axis: an ``axis``/``axes`` parameter that
    is (or, the input's rank unknown, may be) axis 0 — a ``Softmax(axis=[-2, -1])`` on a
    rank-2 input normalizes over the batch, and its rows are not independent."""
    shapes = safe_shapes(spec)
    for ls in spec.layers:
        for key in ("axis", "axes"):
            value = ls.params.get(key)
            if value is None:
                continue
            axes = value if isinstance(value, (list, tuple)) else [value]
            src = shapes.get(ls.inputs[0]) if ls.inputs else None
            for a in axes:
                if not isinstance(a, int) or isinstance(a, bool):
                    return True
                if a == 0 or (a < -1 and (src is None or a + len(src) + 1 <= 0)):
                    return True
    return False


class BatchPermutedRule(BatchRule):
    name = "batch_permuted"
    eagle = "15"
    where = ("every model whose layers compute within rows (no axis parameter reaching the batch axis): the batch "
             "run in reversed row order, each row's outputs compared with its own")
    order = ROW_ORDERS[name]


class BatchSingleRule(BatchRule):
    name = "batch_single"
    eagle = "15"
    where = "every model whose layers compute within rows: the first row of the batch run alone (a batch of one)"
    order = ROW_ORDERS[name]


class BatchEmptyRule(BatchRule):
    """A batch of zero rows: every output has zero rows and the original's other dimensions.
    Frameworks promise it (PyTorch's modules accept an empty batch, pytorch/pytorch#12013;
    Keras' convolutions were fixed for it, keras-team/keras#22564), yet it takes paths no
    full batch takes: kernels that return early on an empty input, reductions that check for
    emptiness, reshapes with -1, rewrites by the graph optimizer.  Its run holds no values,
    so the rule judges acceptance and shapes only."""

    name = "batch_empty"
    eagle = "15"
    where = ("every model whose layers compute within rows: the batch of zero rows, whose outputs must have zero "
             "rows and the original's other dimensions")
    order = ROW_ORDERS[name]
    acceptance_only = True  # no values: a random model's case is judged as any other


#: every rule, in the order they are listed and run
RULES: dict[str, Rule] = {r.name: r for r in (
    PaddingRule(), RankRule(), DepthwiseRule(), SeparableRule(), DilationRule(), ChannelsRule(),
    DenseConvRule(), DenseEinsumRule(), ActivationRule(), BatchNormRule(), PadCropRule(), UnrollRule(),
    Float64Rule(), BatchPermutedRule(), BatchSingleRule(), BatchEmptyRule(), RoundTripKerasRule(), RoundTripConfigRule(),
    RoundTripJsonRule(), GoBackwardsRule(), FormulaRule(), AxisRule(), ImageChannelsRule())}


def rules_named(names: list[str] | tuple[str, ...]) -> list[Rule]:
    """The rules of ``names`` (settings have checked them), in :data:`RULES` order."""
    return [r for n, r in RULES.items() if n in set(names)]


def apply_rule(name: str, spec: ModelSpec, weights: Weights) -> Rewrite | None:
    """The rewrite of ``spec`` by the rule ``name`` (None when it does not apply)."""
    return RULES[name].apply(spec, weights)


__all__ = ["Context", "LayerRule", "ORDERS", "RULES", "Rewrite", "Rule", "apply_rule", "rules_named",
           "safe_shapes", "same_padding"]
