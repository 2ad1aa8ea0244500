"""API configs: one YAML file per Keras layer API (the paper's section 2.3, Figure 2), and
one per ``keras.ops`` function (``api_configs/ops/``), in one schema.

Each parameter has a type, the valid values or range that network mutation draws from,
and crafty invalid values (0 or negative sizes, None for strings, out-of-range rates).
An op config adds ``args``: the op's positional arguments in order, each a parameter of
the same schema whose type may also be ``tensor`` (an array with its ``dtypes`` and its
``shape`` rule relative to the first tensor, :data:`SHAPE_RULES`, and its mathematical
``domain``, whose edges special values reach) or ``tensors`` (a list of them); its keyword
arguments are ``params`` as for a layer, where ``axis`` is an int drawn within the first
tensor's rank.  Every file is schema-checked when loaded; a
malformed one is refused with a one-line error naming the file and the field path.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from audee.core.errors import ConfigError, SpecError
from audee.core.paths import api_configs_dir
from audee.core.yamlio import read_yaml_mapping

CATEGORIES = ("conv", "pool", "norm", "activation", "reshape", "merge", "recurrent", "core", "embedding",
              "wrapper", "regularization", "attention", "preprocessing")
#: an op config's category: the ``keras.src.ops`` module that defines the function
OP_CATEGORIES = ("op.numpy", "op.nn", "op.linalg", "op.image", "op.math", "op.core", "op.einops")
TYPES = ("int", "float", "bool", "str", "layer", "tensor", "tensors", "axis")
TENSOR_TYPES = ("tensor", "tensors")
TOP_KEYS = {"api", "category", "inputs", "rank", "ranks", "params", "note", "keras_min_version", "ids",
            "args", "derive", "undefined", "distinct", "min_length", "value_indices", "normalizes",
            "groups", "training", "channels"}
PARAM_KEYS = {"type", "range", "values", "invalid", "dims", "nullable", "mutable", "note", "apis", "skip",
              "dtypes", "shape", "count", "spread", "domain", "rank_offset"}
#: the dtypes an op's tensors may be drawn in (Keras names; bfloat16 travels as float32 and is cast in the worker)
OP_DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
#: how a tensor argument's shape follows the op's first tensor (``free``: its own draw in ``ranks``)
SHAPE_RULES = ("free", "same", "broadcast", "index", "matmul", "square", "vector", "scalar", "last")
OWN_SHAPES = ("free", "square", "vector", "scalar")  # drawn without another tensor (the first tensor's)
#: why an op's gradient is not compared (the op's gradient phase, audee/oracle/opgrad.py): not
#: differentiable where an argument is 0, or where tied values share the cotangent
GRADIENT_UNDEFINED = ("gradient_at_zero", "gradient_at_ties")
#: why an op's result is intentionally not compared (undefined by the op's contract)
UNDEFINED = ("tie_indices", "values", "empty_segments", *GRADIENT_UNDEFINED)
LIST_VALUE_TYPES = ("int", "float")  # draw_value stringifies str values, and a bool is drawn as a coin


@dataclass(frozen=True)
class Interval:
    """One interval of a domain: ``low``/``high`` (±inf allowed) and whether each is in it."""

    low: float
    high: float
    low_closed: bool
    high_closed: bool


def parse_domain(text: Any) -> list[Interval]:
    """A domain written as intervals joined by ``|``: ``(0, inf)``, ``[-1, 1]``, ``(-inf, 0) |
    (0, inf)``; ``[``/``]`` include a bound, ``(``/``)`` exclude it.  ValueError says what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"expected intervals such as '(0, inf)' or '[-1, 1] | (2, inf)', got {text!r}")
    out = []
    for part in text.split("|"):
        p = part.strip()
        if len(p) < 5 or p[0] not in "([" or p[-1] not in ")]" or p.count(",") != 1:
            raise ValueError(f"{p!r} is not an interval such as '(0, inf)' or '[-1, 1]'")
        try:
            lo, hi = (float(v.strip()) for v in p[1:-1].split(","))
        except ValueError:
            raise ValueError(f"{p!r}: bounds must be numbers or inf") from None
        if math.isnan(lo) or math.isnan(hi) or not lo < hi:
            raise ValueError(f"{p!r}: expected low < high")
        if p[0] == "[" and math.isinf(lo) or p[-1] == "]" and math.isinf(hi):
            raise ValueError(f"{p!r}: an infinite bound is never in a domain (use '(' or ')')")
        out.append(Interval(lo, hi, p[0] == "[", p[-1] == "]"))
    return out


@dataclass
class ParamConfig:
    name: str
    type: str
    range: list[float] | None = None
    values: list[Any] = field(default_factory=list)
    invalid: list[Any] = field(default_factory=list)
    dims: int | None = None
    nullable: bool = False
    mutable: bool = True
    apis: list[str] = field(default_factory=list)
    note: str = ""
    skip: str = ""  # why the parameter is deliberately never drawn (then mutable is False)
    dtypes: list[str] = field(default_factory=list)  # a tensor's dtypes (empty: the first tensor's)
    shape: str = "free"  # a tensor's shape rule (SHAPE_RULES)
    count: list[int] | None = None  # ``tensors``: how many, [low, high]
    spread: bool = False  # ``tensors``: passed as separate positional arguments (the op takes ``*x``)
    #: a tensor's mathematical domain (``"(0, inf)"``, ``"[-1, 1]"``, ``"(-inf, 0) | (0, inf)"``) as
    #: :class:`Interval` s: the special kind ``domain_edge`` draws values at its bounds
    domain: list[Interval] = field(default_factory=list)
    #: a ``layer`` parameter's wrapped layer sees an input of the wrapper's rank plus this
    #: (TimeDistributed: -1, the time axis taken off), so its parameters are checked at that rank
    rank_offset: int = 0

    @property
    def bounds(self) -> list[float]:
        """The finite bounds of the tensor's domain, sorted, each once."""
        return sorted({b for i in self.domain for b in (i.low, i.high) if math.isfinite(b)})

    def is_invalid_value(self, value: Any) -> bool:
        return any(_same(value, v) for v in self.invalid)

    def type_ok(self, value: Any) -> bool:
        """Whether ``value`` has the parameter's type (range is not checked: a mutated spec
        may carry any value the config lists)."""
        if value is None:
            return self.nullable
        if self.type in TENSOR_TYPES:  # drawn arrays: their dtype and shape are the draw's, not a value's
            return True
        if self.type == "axis":
            return _is_int(value) or isinstance(value, (list, tuple)) and all(_is_int(v) for v in value)
        if not self.type:  # a skipped parameter declared without a type: never drawn, never checked
            return True
        if isinstance(value, (list, tuple)) and self.type in LIST_VALUE_TYPES:
            if self.type == "int" and self.dims is not None and len(value) == self.dims \
                    and all(_is_int(v) for v in value):
                return True
            # a per-dimension / per-side form: the nested shape of one of the listed list values
            shape = _shape(value, self._leaf_ok)
            return shape is not None and any(_shape(v, self._leaf_ok) == shape for v in self.values
                                             if isinstance(v, (list, tuple)))
        return self._leaf_ok(value)

    def _leaf_ok(self, value: Any) -> bool:
        if self.type == "int":
            return _is_int(value)
        if self.type == "float":
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.type == "bool":
            return isinstance(value, bool)
        if self.type == "str":
            return isinstance(value, str)
        return isinstance(value, dict) and isinstance(value.get("api"), str)


@dataclass(frozen=True)
class MinLength:
    """The input's first axis after the batch must be longer than ``param``'s value divided
    by ``divide`` (a reflect padding of ``fft_length // 2`` needs more samples than it pads):
    TensorFlow and torch refuse a shorter input while JAX's padding reflects twice and runs,
    a difference on an input outside the contract that no backend documents as valid."""

    param: str
    divide: int
    why: str

    def outside(self, shape: Any, params: dict[str, Any]) -> str | None:
        """``why`` when ``shape`` (without the batch axis) is too short for ``params``, else None."""
        value = params.get(self.param)
        if not _is_int(value) or value <= 0 or not shape or not _is_int(shape[0]):
            return None
        return self.why if shape[0] <= value // self.divide else None


@dataclass
class ApiConfig:
    api: str
    category: str
    inputs: int | str
    params: dict[str, ParamConfig]
    rank: int | None = None
    note: str = ""
    source: str = ""
    ranks: list[int] = field(default_factory=list)  # input ranks (batch included); [rank] if only rank is given
    #: the parameter whose value bounds the integer ids the layer takes, [0, value): its input
    #: is int32 token ids, not float data (Embedding's input_dim, CategoryEncoding's num_tokens)
    ids: str | None = None
    #: an op config (``keras.ops``): its positional arguments in order (empty for a layer)
    args: dict[str, ParamConfig] = field(default_factory=dict)
    #: an op's coupled draw that a schema cannot say (:data:`audee.mutation.oplevel.DERIVE`), or None
    derive: str | None = None
    #: what in an op's result its contract leaves undefined (:data:`UNDEFINED`), not compared
    undefined: list[str] = field(default_factory=list)
    #: an op's axis arguments that must name different axes (``diagonal``'s ``axis1`` and ``axis2``):
    #: a combination of valid values the contract excludes, marked when drawn (audee.mutation.oplevel)
    distinct: list[str] = field(default_factory=list)
    #: a layer's input too short for a parameter's value, outside its contract though every
    #: value is valid (:class:`MinLength`), or None
    min_length: MinLength | None = None
    #: why the layer turns input values into integer indices (a cast then a gather), or "":
    #: a NaN or Inf becomes an undefined index, so a refusal on such input answers its values
    value_indices: str = ""
    #: the parameter naming the axes the layer normalizes each slice of its input over
    #: (LayerNormalization: ``axis``), or "": a slice of one element makes its output a
    #: constant computed from terms at the input's scale (audee.oracle.slices)
    normalizes: str = ""
    #: with ``normalizes``, the parameter splitting that one axis into groups, each normalized
    #: over together with every other non-batch axis (GroupNormalization: ``groups``, -1 one
    #: group per channel), or "": the slices are those of the ``normalizes`` axes alone
    groups: str = ""
    #: the layer computes in training only (a random augmentation, the identity in
    #: inference): API-level cases call it with ``training=True``, and its values, random
    #: by design, are not compared (:func:`audee.apis.call_args.random_values`)
    training: bool = False
    #: the number of channels the layer's image input must have (a color augmentation reads
    #: RGB: RandomHue, RandomGrayscale), or None: any; the API level draws the other axes
    channels: int | None = None

    @property
    def namespace(self) -> str:
        """Where Keras holds what the config configures: ``ops`` (a ``keras.ops`` function,
        category ``op.*``) or ``layers`` (a ``keras.layers`` class)."""
        return "ops" if self.category in OP_CATEGORIES else "layers"

    def __post_init__(self) -> None:
        if not self.ranks and self.rank is not None:
            self.ranks = [self.rank]

    def check_params(self, params: dict[str, Any], *, source: str, where: str) -> None:
        """Refuse a known parameter whose value has the wrong type and is not one of the
        config's invalid values; unknown parameters pass (Keras has many we do not mutate)."""
        for name, value in params.items():
            pcfg = self.params.get(name)
            if pcfg is None or pcfg.type_ok(value) or pcfg.is_invalid_value(value):
                continue
            raise SpecError(f"{value!r} is not a valid {pcfg.type}" + (f" (or list of {pcfg.dims})" if pcfg.dims else ""),
                            source=source, field=f"{where}.{name}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shape(value: Any, leaf_ok: Any) -> tuple | None:
    """The nested shape of a list value whose leaves pass ``leaf_ok`` (``[[1, 2], [0, 3]]``:
    ``(2, 2)``), None if a leaf fails or it is empty or ragged; equal shapes mean the same
    per-dimension / per-side form."""
    if isinstance(value, (list, tuple)):
        inner = {_shape(v, leaf_ok) for v in value}
        if len(inner) != 1 or None in inner:  # empty, ragged, or a bad leaf
            return None
        return (len(value),) + inner.pop()
    return () if leaf_ok(value) else None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _err(source: str, fld: str, msg: str) -> ConfigError:
    return ConfigError(msg, source=source, field=fld)


def _check_param(name: str, raw: Any, source: str, section: str = "params") -> ParamConfig:
    where = f"{section}.{name}"
    if not isinstance(raw, dict):
        raise _err(source, where, f"expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - PARAM_KEYS)
    if unknown:
        raise _err(source, f"{where}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(PARAM_KEYS))})")
    skip = raw.get("skip")
    if "skip" in raw and not (isinstance(skip, str) and skip.strip()):
        raise _err(source, f"{where}.skip", "expected the reason the parameter is not drawn (a non-empty string)")
    t = raw.get("type", "" if skip else None)
    if t not in TYPES and not (skip and t == ""):
        raise _err(source, f"{where}.type", f"expected one of {', '.join(TYPES)}, got {t!r}")
    p = ParamConfig(name, t)
    if "rank_offset" in raw:
        if not _is_int(raw["rank_offset"]) or t != "layer":
            raise _err(source, f"{where}.rank_offset", "expected an int (layer parameters only): the wrapped layer's "
                                                       "input rank minus the wrapper's")
        p.rank_offset = raw["rank_offset"]
    if "dims" in raw:
        if not _is_int(raw["dims"]) or raw["dims"] < 1 or t != "int":
            raise _err(source, f"{where}.dims", "expected a positive int (int parameters only)")
        p.dims = raw["dims"]
    for key in ("nullable", "mutable"):
        if key in raw:
            if not isinstance(raw[key], bool):
                raise _err(source, f"{where}.{key}", f"expected true or false, got {raw[key]!r}")
            setattr(p, key, raw[key])
    if skip:
        if raw.get("mutable") is True:
            raise _err(source, f"{where}.mutable", "a skipped parameter is never drawn (skip implies mutable: false)")
        p.skip, p.mutable = skip.strip(), False
    if "range" in raw:
        r = raw["range"]
        if t not in ("int", "float", "tensor", "tensors"):
            raise _err(source, f"{where}.range", "only int, float and tensor parameters have a range")
        num = (lambda v: _is_int(v)) if t == "int" else (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
        if not (isinstance(r, list) and len(r) == 2 and all(num(v) for v in r) and r[0] <= r[1]):
            raise _err(source, f"{where}.range", f"expected [low, high] with low <= high, got {r!r}")
        p.range = list(r)
    if "values" in raw:
        vals = raw["values"]
        if not isinstance(vals, list) or not vals:
            raise _err(source, f"{where}.values", "expected a non-empty list")
        p.values = list(vals)  # list entries define the per-dimension / per-side forms type_ok accepts
        for i, v in enumerate(vals):
            if isinstance(v, list) and t not in LIST_VALUE_TYPES:
                raise _err(source, f"{where}.values[{i}]", f"list values are for int and float parameters, got {v!r}")
            if isinstance(v, list) and _shape(v, p._leaf_ok) is None:
                raise _err(source, f"{where}.values[{i}]", f"{v!r} is not a (nested, non-ragged) list of {t}")
            if not p.type_ok(v) or v is None:
                raise _err(source, f"{where}.values[{i}]", f"{v!r} is not a {t}")
    if t == "str" and not p.values and not p.skip:
        raise _err(source, f"{where}.values", "a str parameter needs its valid values")
    if t in ("int", "float") and p.mutable and p.range is None and not p.values:
        raise _err(source, f"{where}.range", "a mutable number needs a range or values (or mutable: false)")
    if "invalid" in raw:
        if not isinstance(raw["invalid"], list):
            raise _err(source, f"{where}.invalid", "expected a list")
        p.invalid = list(raw["invalid"])
        for i, v in enumerate(p.invalid):
            if t in TENSOR_TYPES and v not in OP_DTYPES:  # a tensor's invalid: dtypes outside the op's contract
                raise _err(source, f"{where}.invalid[{i}]", f"a tensor's invalid values are dtypes ({', '.join(OP_DTYPES)}), "
                                                            f"got {v!r}")
            if isinstance(v, dict) and t != "int" or isinstance(v, list) and t not in LIST_VALUE_TYPES:
                raise _err(source, f"{where}.invalid[{i}]", f"expected a scalar, got {v!r}")
    if "dtypes" in raw:
        d = raw["dtypes"]
        if t not in TENSOR_TYPES or not (isinstance(d, list) and d and all(x in OP_DTYPES for x in d)):
            raise _err(source, f"{where}.dtypes", f"a tensor's dtypes: a non-empty list of {', '.join(OP_DTYPES)}")
        p.dtypes = list(d)
    if "shape" in raw:
        if t not in TENSOR_TYPES or raw["shape"] not in SHAPE_RULES:
            raise _err(source, f"{where}.shape", f"a tensor's shape rule: one of {', '.join(SHAPE_RULES)}")
        p.shape = raw["shape"]
    if "count" in raw:
        c = raw["count"]
        if t != "tensors" or not (isinstance(c, list) and len(c) == 2 and all(_is_int(v) and v >= 1 for v in c)
                                  and c[0] <= c[1]):
            raise _err(source, f"{where}.count", "a tensor list's size: [low, high], 1 <= low <= high")
        p.count = list(c)
    if "spread" in raw:
        if t != "tensors" or not isinstance(raw["spread"], bool):
            raise _err(source, f"{where}.spread", "a tensor list's spread: true or false (passed as *args)")
        p.spread = raw["spread"]
    if "domain" in raw:
        if t not in TENSOR_TYPES:
            raise _err(source, f"{where}.domain", "only a tensor has a domain")
        try:
            p.domain = parse_domain(raw["domain"])
        except ValueError as e:
            raise _err(source, f"{where}.domain", str(e)) from None
    if t == "layer":
        apis = raw.get("apis")
        if not isinstance(apis, list) or not apis or not all(isinstance(a, str) for a in apis):
            raise _err(source, f"{where}.apis", "a layer parameter lists the APIs it may wrap")
        p.apis = list(apis)
    if "note" in raw:
        p.note = str(raw["note"])
    return p


def load_api_config(path: str | Path) -> ApiConfig:
    path = Path(path)
    source = str(path)
    data = read_yaml_mapping(path)
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise _err(source, unknown[0], f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")
    api = data.get("api")
    if api != path.stem:
        raise _err(source, "api", f"must equal the file name {path.stem!r}, got {api!r}")
    op_config = data.get("category") in OP_CATEGORIES
    if data.get("category") not in CATEGORIES and not op_config:
        raise _err(source, "category", f"expected one of {', '.join(CATEGORIES + OP_CATEGORIES)}, "
                                       f"got {data.get('category')!r}")
    low = 0 if op_config else 2  # an op's tensor may be a scalar; a layer's input has a batch axis and more
    inputs = data.get("inputs", 1)
    if inputs != "many" and not (_is_int(inputs) and inputs >= 1):
        raise _err(source, "inputs", f"expected a positive int or 'many', got {inputs!r}")
    rank = data.get("rank")
    if rank is not None and not (_is_int(rank) and rank >= low):
        raise _err(source, "rank", f"expected an int >= {low}, got {rank!r}")
    ranks = data.get("ranks")
    if ranks is not None:
        if rank is not None:
            raise _err(source, "ranks", "give rank (one input rank) or ranks (several), not both")
        if not (isinstance(ranks, list) and ranks and all(_is_int(r) and r >= low for r in ranks)
                and len(set(ranks)) == len(ranks)):
            raise _err(source, "ranks", f"expected a non-empty list of distinct ints >= {low}, got {ranks!r}")
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise _err(source, "params", "expected a mapping of parameter name to settings")
    ids = data.get("ids")
    if ids is not None and not (isinstance(ids, str) and isinstance(params.get(ids), dict)
                                and params[ids].get("type") == "int"):
        raise _err(source, "ids", f"expected the name of an int parameter bounding the input ids, got {ids!r}")
    args, derive, undefined, distinct = _check_op_keys(data, source, op_config)
    value_indices = data.get("value_indices", "")
    if not isinstance(value_indices, str):
        raise _err(source, "value_indices", "expected why the layer casts input values to indices (a string)")
    normalizes = data.get("normalizes", "")
    if normalizes and not (isinstance(normalizes, str) and isinstance(params.get(normalizes), dict)):
        raise _err(source, "normalizes",
                   f"expected the name of the parameter holding the normalized axes, got {normalizes!r}")
    groups = data.get("groups", "")
    if groups and not (normalizes and isinstance(groups, str) and isinstance(params.get(groups), dict)
                       and params[groups].get("type") == "int"):
        raise _err(source, "groups", f"expected the name of an int parameter splitting the `normalizes` axis, "
                                     f"beside `normalizes`, got {groups!r}")
    training = data.get("training", False)
    if not isinstance(training, bool):
        raise _err(source, "training", f"expected true or false, got {training!r}")
    channels = data.get("channels")
    if channels is not None and not (_is_int(channels) and channels > 0):
        raise _err(source, "channels", f"expected a positive int (the image input's channel count), got {channels!r}")
    return ApiConfig(api, data["category"], inputs, {n: _check_param(n, p, source) for n, p in params.items()},
                     rank if rank is not None else (ranks[0] if ranks and len(ranks) == 1 else None),
                     str(data.get("note", "")), source, list(ranks or []), ids, args, derive, undefined, distinct,
                     _check_min_length(data.get("min_length"), params, source), value_indices.strip(), normalizes, groups, training,
                     channels)


def _check_min_length(raw: Any, params: dict[str, Any], source: str) -> MinLength | None:
    """A layer config's ``min_length`` (:class:`MinLength`): ``param`` an int parameter,
    ``divide`` a positive int, ``why`` words without values."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"param", "divide", "why"}:
        raise _err(source, "min_length", "expected a mapping with exactly param, divide and why")
    param, divide, why = raw["param"], raw["divide"], raw["why"]
    if not (isinstance(params.get(param), dict) and params[param].get("type") == "int"):
        raise _err(source, "min_length.param", f"expected the name of an int parameter, got {param!r}")
    if not (_is_int(divide) and divide >= 1):
        raise _err(source, "min_length.divide", f"expected a positive int, got {divide!r}")
    if not (isinstance(why, str) and why.strip()):
        raise _err(source, "min_length.why", "expected why a shorter input is outside the contract")
    return MinLength(str(param), int(divide), why.strip())


def _check_op_keys(data: dict[str, Any], source: str, op_config: bool) -> tuple[dict[str, ParamConfig], str | None,
                                                                             list[str], list[str]]:
    """An op config's ``args`` (positional, in order), ``derive``, ``undefined`` and
    ``distinct``; a layer config may hold none of them, and a tensor type belongs to an op's
    arguments only."""
    if not op_config:
        for key in ("args", "derive", "undefined", "distinct"):
            if key in data:
                raise _err(source, key, "only an op config (category op.*) has this key")
        for name, raw in (data.get("params") or {}).items():
            if isinstance(raw, dict) and raw.get("type") in (*TENSOR_TYPES, "axis"):
                raise _err(source, f"params.{name}.type", "tensor and axis types are for op configs")
        return {}, None, [], []
    raw_args = data.get("args", {})
    if not isinstance(raw_args, dict):
        raise _err(source, "args", "expected a mapping of positional argument name to settings")
    args = {n: _check_param(n, p, source, "args") for n, p in raw_args.items()}
    both = sorted(set(args) & set(data.get("params") or {}))
    if both:
        raise _err(source, f"params.{both[0]}", "also a positional argument (args): pass it one way")
    for n, a in args.items():
        first = next((x for x in args.values() if x.type in TENSOR_TYPES), None)
        # a tensor list's rule says how its members follow its own first member
        if a is first and a.shape not in OWN_SHAPES + (("same",) if a.type == "tensors" else ()):
            raise _err(source, f"args.{n}.shape", f"the first tensor's shape is its own: one of {', '.join(OWN_SHAPES)}")
    derive = data.get("derive")
    if derive is not None and not (isinstance(derive, str) and derive):
        raise _err(source, "derive", f"expected the name of a coupled draw, got {derive!r}")
    undefined = data.get("undefined", [])
    if not (isinstance(undefined, list) and all(u in UNDEFINED for u in undefined)):
        raise _err(source, "undefined", f"expected a list of {', '.join(UNDEFINED)}, got {undefined!r}")
    distinct = data.get("distinct", [])
    axes = {n for n, raw in {**(data.get("params") or {}), **raw_args}.items()
            if isinstance(raw, dict) and raw.get("type") == "axis"}
    if not (isinstance(distinct, list) and (not distinct or len(distinct) >= 2) and len(set(distinct)) == len(distinct)
            and all(n in axes for n in distinct)):
        raise _err(source, "distinct", f"expected two or more of the op's axis arguments ({', '.join(sorted(axes))}), "
                                       f"got {distinct!r}")
    return args, derive, list(undefined), list(distinct)


def named_axes(value: Any) -> list[int] | None:
    """The axes an axis parameter's value names (an int or a non-empty list of ints, NumPy's
    included), or None when it is not one (a bool is no axis)."""
    def axis(v: Any) -> bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if axis(value):
        return [int(value)]
    if isinstance(value, (list, tuple)) and value and all(axis(v) for v in value):
        return [int(v) for v in value]
    return None


def load_api_configs(directory: str | Path | None = None) -> dict[str, ApiConfig]:
    """All configs in ``directory`` (default: the shipped ``api_configs/``), keyed by API."""
    return dict(_load_dir(str(Path(directory) if directory else api_configs_dir())))


def load_op_configs(directory: str | Path | None = None) -> dict[str, ApiConfig]:
    """All ``keras.ops`` configs (default: ``api_configs/ops/``), keyed by op name (the
    path under ``keras.ops``: ``add``, ``image.resize``); the same loader as the layers'.
    A file there that is no op config (category op.*) is refused."""
    configs = dict(_load_dir(str(Path(directory) if directory else api_configs_dir() / "ops")))
    for name, cfg in configs.items():
        if cfg.namespace != "ops":
            raise ConfigError(f"not an op config (category {cfg.category!r}; expected one of "
                              f"{', '.join(OP_CATEGORIES)})", source=cfg.source, field="category")
    return configs


@lru_cache(maxsize=4)
def _load_dir(directory: str) -> tuple[tuple[str, ApiConfig], ...]:
    d = Path(directory)
    if not d.is_dir():
        raise ConfigError("API config directory not found", source=directory)
    paths = sorted(d.glob("*.yaml"))
    if not paths:  # no config, no mutation: every variant would be the seed itself
        raise ConfigError("no API configs (*.yaml) in this directory (AUDEE_API_CONFIGS)", source=directory)
    return tuple((c.api, c) for c in (load_api_config(p) for p in paths))
