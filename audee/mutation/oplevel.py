"""Op-level test cases: one ``keras.ops`` function called on drawn arguments.

An :class:`OpCase` is plain data: the op's name (looked up by the worker in the closed set
of configured ops, never code), its positional and keyword arguments with each tensor as a
reference ``{"tensor": name}`` into ``tensors`` (numpy arrays; a bfloat16 tensor travels as
float32 holding bfloat16 values and is cast in the worker, ``dtypes`` saying so).

A draw follows the op's config (:mod:`audee.apis.config`): the first tensor's rank from
``ranks`` and its dims from 1 to 5 (now and then 0: an empty tensor), its dtype from its
``dtypes``; every other tensor by its shape rule relative to the first (same shape,
broadcastable, matmul-compatible, index ids below the axis' size...); an ``axis`` within
the first tensor's rank; numbers, strings and bools as layer parameters are
(:func:`audee.mutation.base.draw_value`); with ``invalid_prob`` exactly one argument takes a
crafty invalid value (an axis out of range, a config's ``invalid``; for a tensor, a dtype
outside the op's contract, its ``invalid`` dtypes).  What a schema cannot
say (sorted bins, segment ids, a symmetric positive definite matrix, a reshape's new shape)
is a named coupled draw, :data:`DERIVE`.  Case ``i`` of op ``O`` draws from stream
``(rng, crc32(O), i)``; its special values from another stream (:func:`place_specials`).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from audee.apis.config import TENSOR_TYPES, ApiConfig, ParamConfig
from audee.mutation.apilevel import case_rng
from audee.mutation import special
from audee.mutation.base import Mutation, _py, draw_value
from audee.cases.opcase import OpCase, refs
from audee.cases.spec import InputSpec

__all__ = ["DERIVE", "OpCase", "generate_op_case", "op_case_id", "place_specials", "refs", "wire_array"]

MAX_DIM = 5
EMPTY_DIM = 0.03   # chance of a 0-sized dimension (an empty tensor)
NULL_AXIS = 0.25   # chance of None for a nullable axis
#: a tensor dtype's weight in the draw among its config's dtypes (1 when not named): float64 is
#: in every float op's contract but what users run least, and JAX without jax_enable_x64
#: sits its cases out (docs/ops.md, "float64"), so it is drawn at a quarter of the others' rate
DTYPE_WEIGHTS = {"float64": 0.25}


def op_case_id(op: str, index: int) -> str:
    return f"op-{op}-v{index:05d}"


# ---- shapes and values ----------------------------------------------------------------------------
def _dims(rng: np.random.Generator, n: int) -> list[int]:
    return [0 if rng.random() < EMPTY_DIM else int(rng.integers(1, MAX_DIM + 1)) for _ in range(n)]


def own_shape(rule: str, rank: int, rng: np.random.Generator) -> list[int]:
    if rule == "scalar":
        return []
    if rule == "vector":
        return [int(rng.integers(1, MAX_DIM + 2))]
    if rule == "square":
        n = int(rng.integers(1, MAX_DIM + 1))
        return _dims(rng, max(rank, 2) - 2) + [n, n]
    return _dims(rng, rank)


def related_shape(rule: str, first: list[int], rng: np.random.Generator, rank: int) -> list[int]:
    """A tensor's shape by its rule, relative to the first tensor's."""
    if rule in ("free", "scalar", "vector", "square"):
        return own_shape(rule, rank, rng)
    if rule == "same":
        return list(first)
    if rule == "broadcast":
        keep = int(rng.integers(0, len(first) + 1))
        tail = first[len(first) - keep:]
        return [1 if rng.random() < 0.3 else d for d in tail]
    if rule == "last":
        return _dims(rng, max(len(first) - 1, 0)) + first[-1:]
    if rule == "matmul":
        if len(first) <= 1:
            return first + ([int(rng.integers(1, MAX_DIM + 1))] if rng.random() < 0.5 else [])
        return first[:-2] + [first[-1], int(rng.integers(1, MAX_DIM + 1))]
    if rule == "index":
        return _dims(rng, int(rng.integers(0, 3)))
    raise ValueError(f"unknown shape rule {rule!r}")


def values(shape: list[int], dtype: str, rng: np.random.Generator, span: list[float] | None) -> np.ndarray:
    """Random values of ``dtype`` (bfloat16 held as float32, rounded to bfloat16)."""
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)   # an array even of rank 0 (not a numpy bool)
    if dtype.startswith(("int", "uint")):
        lo, hi = span or ((0, 10) if dtype.startswith("uint") else (-10, 10))
        return rng.integers(int(lo), int(hi), size=shape).astype(dtype)
    x = rng.uniform(span[0], span[1], size=shape) if span else rng.standard_normal(shape) * 2.0
    return wire_array(x, dtype)


def wire_array(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` as the array that travels for a tensor of ``dtype``: bfloat16 values in float32."""
    if dtype == "bfloat16":
        import ml_dtypes  # noqa: PLC0415 - numpy's bfloat16, installed with every framework here

        return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    return np.asarray(x).astype(dtype)


# ---- the draw -------------------------------------------------------------------------------------
class _Draw:
    """The state of one case's draw, which coupled draws (:data:`DERIVE`) read and change."""

    def __init__(self, cfg: ApiConfig, rng: np.random.Generator):
        self.cfg, self.rng = cfg, rng
        self.tensors: dict[str, np.ndarray] = {}
        self.dtypes: dict[str, str] = {}
        self.spans: dict[str, list[float] | None] = {}
        self.args: dict[str, Any] = {}     # positional, by name, in order
        self.kwargs: dict[str, Any] = {}
        self.muts: list[Mutation] = []
        self.first: str | None = None

    def tensor(self, name: str, shape: list[int], dtype: str, span: list[float] | None) -> dict[str, str]:
        self.tensors[name] = values(shape, dtype, self.rng, span)
        self.dtypes[name], self.spans[name] = dtype, span
        return {"tensor": name}

    def refill(self, name: str, shape: list[int]) -> None:
        """Tensor ``name`` drawn again in ``shape`` (a coupled draw changed it)."""
        self.tensors[name] = values(shape, self.dtypes[name], self.rng, self.spans[name])

    @property
    def rank(self) -> int:
        return self.tensors[self.first].ndim if self.first else 0

    def shape(self, name: str | None = None) -> list[int]:
        return list(self.tensors[name or self.first].shape) if (name or self.first) else []


def generate_op_case(op: str, configs: dict[str, ApiConfig], rng: int, index: int, *,
                     invalid_prob: float = 0.0) -> OpCase:
    """Case ``index`` of ``op`` (a configured name), reproducible from ``(rng, op, index)``."""
    cfg = configs[op]
    r = case_rng(rng, op, index)
    d = _Draw(cfg, r)
    rank = int(r.choice(cfg.ranks)) if cfg.ranks else 0
    everything = {**{n: ("arg", p) for n, p in cfg.args.items()}, **{n: ("kw", p) for n, p in cfg.params.items()}}
    # the one crafty invalid value: a parameter's (an axis out of range, a config's invalid) or a
    # tensor's dtype outside the op's contract (its ``invalid`` dtypes)
    drawable = [n for n, (_, p) in everything.items() if p.mutable and not p.skip
                and (p.invalid or p.type == "axis")]
    bad = drawable[int(r.integers(len(drawable)))] if drawable and r.random() < invalid_prob else None
    first_dtype: str | None = None
    for name, (where, p) in everything.items():
        if p.skip or (where == "kw" and not p.mutable and p.type not in TENSOR_TYPES and name not in cfg.args):
            continue
        if p.type in TENSOR_TYPES:
            dtype = draw_dtype(p.dtypes, r) if p.dtypes else (first_dtype or "float32")
            if name == bad:  # a dtype outside the contract (Keras's own dtype tests: docs/ops.md)
                dtype = str(r.choice(p.invalid))
                d.muts.append(Mutation(op, f"{name}.dtype", None, dtype, True))
            if p.type == "tensors":
                lo, hi = p.count or [1, 3]
                n = int(r.integers(lo, hi + 1))
                shape0 = own_shape(p.shape if p.shape in ("vector", "square", "scalar") else "free", rank, r)
                items = []
                for k in range(n):
                    shape = shape0 if p.shape == "same" or k == 0 else related_shape(p.shape, shape0, r, rank)
                    items.append(d.tensor(f"{name}{k}", shape, dtype, p.range))
                value: Any = items
                if d.first is None:
                    d.first, first_dtype = f"{name}0", dtype
            elif d.first is None:
                value = d.tensor(name, own_shape(p.shape, rank, r), dtype, p.range)
                d.first, first_dtype = name, dtype
            else:
                value = d.tensor(name, related_shape(p.shape, d.shape(), r, rank), dtype, p.range)
        else:
            value = _draw_scalar(p, d, invalid=name == bad)
            d.muts.append(Mutation(op, name, None, _py(value), name == bad))
        (d.args if where == "arg" else d.kwargs)[name] = value
    if cfg.derive:
        DERIVE[cfg.derive](d)
    _mark_same_axis(cfg, d)
    args = [a for n, p in cfg.args.items() for a in (d.args[n] if p.spread else [d.args[n]])]
    return OpCase(op, [_py(a) for a in args], {k: _py(v) for k, v in d.kwargs.items()}, d.tensors, d.dtypes,
                  d.muts, any(m.invalid for m in d.muts))


def _mark_same_axis(cfg: ApiConfig, d: _Draw) -> None:
    """The config's ``distinct`` axis arguments drawn naming one axis (``axis1=1, axis2=-1`` on
    a matrix), each valid alone: the combination is outside the op's contract, marked on the
    last one's record (:meth:`audee.mutation.base.Mutation.mark_outside`)."""
    values = [_get(d, n) for n in cfg.distinct]
    n = d.rank
    if not values or n == 0 or not all(isinstance(v, int) and -n <= v < n for v in values):
        return
    if len({v % n for v in values}) < len(values):
        last = next((m for m in d.muts if m.param == cfg.distinct[-1] and not m.invalid), None)
        if last is not None:
            last.mark_outside(f"{' and '.join(cfg.distinct)} name one axis")


# ---- special values on the call's tensors -----------------------------------------------------------
def place_specials(case: OpCase, cfg: ApiConfig | None, rng: np.random.Generator, rate: float,
                   kinds: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Special values (:func:`audee.mutation.special.inject`) on every tensor of ``case`` but
    booleans, in place, and their record.  Each tensor of rank 2 or more gets them per row
    (its first axis); a scalar or a vector is one row, so a binary op's scalar operand can
    carry one and a vector's slice kinds see the whole vector.  The call's ``axis`` says
    where the first tensor is reduced (``lone_*`` and ``nan_tie`` place along it), each
    tensor's config ``domain`` where ``domain_edge`` draws; a bfloat16 tensor gets them in
    bfloat16 (its last float before a bound is bfloat16's)."""
    configs = _tensor_configs(cfg, case) if cfg is not None else {}
    first = next(iter(case.tensors), None)
    axis = _call_axis(case, cfg)
    arrays: dict[str, np.ndarray] = {}
    specs, axes, bounds = [], {}, {}
    for name, a in case.tensors.items():
        a = np.asarray(a)
        if a.dtype == bool:
            continue
        dtype = case.dtypes.get(name, str(a.dtype))
        if dtype == "bfloat16":
            import ml_dtypes  # noqa: PLC0415 - installed with every framework here

            a = a.astype(ml_dtypes.bfloat16)
        lifted = a[None] if a.ndim <= 1 else a
        arrays[name] = lifted
        specs.append(InputSpec(name, tuple(lifted.shape[1:]), str(a.dtype)))
        if name == first and isinstance(axis, int) and a.ndim and -a.ndim <= axis < a.ndim:
            ax = axis % a.ndim
            axes[name] = ax if a.ndim == 1 else (ax - 1 if ax else None)
        p = configs.get(name)
        if p is not None and p.domain:
            bounds[name] = p.bounds
    got, done = special.inject(arrays, specs, rng, rate, kinds=kinds, axes=axes, bounds=bounds)
    for name, lifted in got.items():
        back = lifted[0] if np.asarray(case.tensors[name]).ndim <= 1 else lifted
        case.tensors[name] = wire_array(back, case.dtypes.get(name, str(back.dtype)))
    return done


def _tensor_configs(cfg: ApiConfig, case: OpCase) -> dict[str, ParamConfig]:
    """Each tensor of ``case`` and the config of the argument it was drawn for (a tensor
    list's members ``<name><k>`` share theirs)."""
    out: dict[str, ParamConfig] = {}
    for n, p in {**cfg.params, **cfg.args}.items():
        if p.type == "tensor" and n in case.tensors:
            out[n] = p
        elif p.type == "tensors":
            out.update({t: p for t in case.tensors if t.startswith(n) and t[len(n):].isdigit()})
    return out


def _call_axis(case: OpCase, cfg: ApiConfig | None) -> Any:
    """The call's ``axis`` (a keyword, or a positional argument its config names), or None."""
    if "axis" in case.kwargs:
        return case.kwargs["axis"]
    if cfg is not None and "axis" in cfg.args and not any(p.spread for p in cfg.args.values()):
        i = list(cfg.args).index("axis")
        return case.args[i] if i < len(case.args) else None
    return None


def draw_dtype(dtypes: list[str], r: np.random.Generator) -> str:
    """One of a tensor's ``dtypes``, by :data:`DTYPE_WEIGHTS`."""
    w = np.array([DTYPE_WEIGHTS.get(d, 1.0) for d in dtypes])
    return str(dtypes[int(r.choice(len(dtypes), p=w / w.sum()))])


def _draw_scalar(p: ParamConfig, d: _Draw, *, invalid: bool) -> Any:
    """An axis within the first tensor's rank (out of range when invalid), else the layer
    configs' draw."""
    if p.type != "axis":
        if not p.mutable:
            return None
        return draw_value(p, d.rng, invalid=invalid)
    n = d.rank
    if invalid:
        options = [n, -n - 1] + [v for v in p.invalid if isinstance(v, int)]
        return int(options[int(d.rng.integers(len(options)))])
    if p.nullable and (n == 0 or d.rng.random() < NULL_AXIS):
        return None
    return int(d.rng.integers(-n, n)) if n else 0


def _set(d: _Draw, name: str, value: Any) -> None:
    """Argument ``name`` (positional or keyword) set to ``value``, its record following."""
    (d.args if name in d.args else d.kwargs)[name] = value
    for m in d.muts:
        if m.param == name:
            m.new = _py(value)


def _get(d: _Draw, name: str) -> Any:
    return d.args.get(name, d.kwargs.get(name))


# ---- coupled draws: what a schema cannot say -------------------------------------------------------
def _index_axis(d: _Draw) -> None:
    """take / take_along_axis: ids below the size of the axis they index (of the flattened
    tensor when the axis is None); an invalid axis is left for the op to refuse."""
    x = d.shape()
    axis = _get(d, "axis")
    if isinstance(axis, int) and not -len(x) <= axis < len(x):
        return
    size = int(np.prod(x)) if axis is None else x[axis]
    name = "indices"
    shape = d.shape(name)
    if d.cfg.api == "take_along_axis":
        if axis is None:
            shape = [int(d.rng.integers(1, MAX_DIM + 1))]
        else:
            shape = list(x)
            shape[axis] = int(d.rng.integers(1, MAX_DIM + 1))
    d.spans[name] = [0, max(size, 1)]
    d.refill(name, shape)


def _reshape(d: _Draw) -> None:
    x = d.shape()
    new = [int(v) for v in d.rng.permutation(x)] if x else []
    if new and d.rng.random() < 0.3 and 0 not in new:
        new[int(d.rng.integers(len(new)))] = -1
    if d.rng.random() < 0.3 and new:
        new = [int(np.prod(x))]
    _set(d, "newshape", new)


def _broadcast_to(d: _Draw) -> None:
    x = d.shape()
    lead = [int(d.rng.integers(1, 4)) for _ in range(int(d.rng.integers(0, 3)))]
    _set(d, "shape", lead + [int(d.rng.integers(1, 4)) if v == 1 else v for v in x])


def _top_k(d: _Draw) -> None:
    last = d.shape()[-1] if d.shape() else 1
    bad = d.rng.random() < 0.1
    _set(d, "k", last + 1 if bad else int(d.rng.integers(1, last + 1)) if last else 0)
    if bad:
        for m in d.muts:
            m.invalid = m.invalid or m.param == "k"


def _segments(d: _Draw) -> None:
    """segment_*: one sorted id per row of ``data``, ``num_segments`` one past the largest
    (or more: empty segments); unsorted ids when ``sorted`` is False."""
    x = d.shape()
    n = x[0] if x else 1
    if not x:
        d.refill(d.first, [n])
    ids = np.sort(d.rng.integers(0, max(n // 2, 1) + 1, size=n)).astype(np.int32)
    if _get(d, "sorted") is False:
        ids = d.rng.permutation(ids).astype(np.int32)
    d.tensors["segment_ids"] = ids
    _set(d, "num_segments", int(ids.max(initial=0)) + 1 + int(d.rng.integers(0, 2)))


def _sorted_first(d: _Draw) -> None:
    d.tensors[d.first] = np.sort(d.tensors[d.first], axis=-1)


def _sorted_bins(d: _Draw) -> None:
    bins = np.unique(d.tensors["bins"])
    d.tensors["bins"] = bins if bins.size else np.zeros([1], d.tensors["bins"].dtype)


def _even_axis(d: _Draw) -> None:
    x = d.shape()
    axis = _get(d, "axis")
    if isinstance(axis, int) and -len(x) <= axis < len(x):
        x[axis] = 2 * max(x[axis], 1)
        d.refill(d.first, x)


def _class_ids(d: _Draw) -> None:
    """one_hot: class ids below ``num_classes`` (an id at or past it is outside the
    contract: a special value's out-of-range integer says so)."""
    n = _get(d, "num_classes")
    if isinstance(n, int) and n > 0:
        d.spans[d.first] = [0, n]
        d.refill(d.first, d.shape())


def _unit_axis(d: _Draw) -> None:
    """squeeze: the axis it drops has size 1 (NumPy refuses another; an out-of-range axis
    stays the crafty invalid value)."""
    x = d.shape()
    axis = _get(d, "axis")
    if isinstance(axis, int) and -len(x) <= axis < len(x) and x[axis] != 1:
        x[axis] = 1
        d.refill(d.first, x)


def _channel_vectors(d: _Draw) -> None:
    c = d.shape()[-1:]
    for name in ("mean", "variance"):
        d.refill(name, c)


def _matrix(d: _Draw) -> np.ndarray:
    return d.tensors[d.first].astype(np.float64)


def _spd(d: _Draw) -> None:
    a = _matrix(d)
    n = a.shape[-1]
    d.tensors[d.first] = wire_array(a @ np.swapaxes(a, -1, -2) + n * np.eye(n), d.dtypes[d.first])


def _triangular(d: _Draw) -> None:
    a = _matrix(d)
    n = a.shape[-1]
    lower = _get(d, "lower") is not False and _get(d, "upper") is not True
    tri = np.tril(a) if lower else np.triu(a)
    d.tensors[d.first] = wire_array(tri + n * np.eye(n) * np.sign(np.diagonal(tri, axis1=-2, axis2=-1)
                                                                 [..., None] + 0.5), d.dtypes[d.first])


def _lstsq(d: _Draw) -> None:
    m, n = d.shape()
    if m < n:
        d.refill(d.first, [n, m])
        m, n = n, m
    d.refill("b", [m] + ([int(d.rng.integers(1, MAX_DIM + 1))] if d.rng.random() < 0.5 else []))


def _no_uv(d: _Draw) -> None:
    _set(d, "compute_uv", False)


def _symmetric(d: _Draw) -> None:
    a = _matrix(d)
    d.tensors[d.first] = wire_array((a + np.swapaxes(a, -1, -2)) / 2, d.dtypes[d.first])


def _rgb(d: _Draw) -> None:
    d.refill(d.first, d.shape()[:-1] + [3])


def _long_last(d: _Draw) -> None:
    n = _get(d, "sequence_length")
    if isinstance(n, int) and n > 0:
        d.refill(d.first, d.shape()[:-1] + [n + int(d.rng.integers(0, 6))])


#: the coupled draws an op config may name (``derive:``): a closed set of code, chosen by name
DERIVE: dict[str, Callable[[_Draw], None]] = {
    "index_axis": _index_axis, "reshape": _reshape, "broadcast_to": _broadcast_to, "top_k": _top_k,
    "segments": _segments, "sorted_first": _sorted_first, "sorted_bins": _sorted_bins, "even_axis": _even_axis,
    "channel_vectors": _channel_vectors, "spd": _spd, "triangular": _triangular, "lstsq": _lstsq, "no_uv": _no_uv,
    "symmetric": _symmetric, "rgb": _rgb, "long_last": _long_last, "unit_axis": _unit_axis,
    "class_ids": _class_ids,
}
