"""Network-level mutation (the paper's section 2.3): redraw layer parameters from the
API configs, sometimes with crafty invalid values.

A variant redraws some parameters with valid values and, with probability
``invalid_prob``, gives exactly one parameter a crafty invalid value, so that a rejection
or crash is attributable to that one value.

Variant ``i`` of a run draws from ``np.random.default_rng([rng_seed, i])`` alone, so it
is the same whatever else is generated, skipped or sharded.  A variant whose draws were
all *valid* but that no backend can build is redrawn (``validate``); a variant that
carries an *invalid* draw is never touched: that value was drawn to be tested.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from audee.apis import ApiConfig
from audee.mutation.base import NETWORK_FIXED, Mutation, couple_params, draw_value, outside_contract
from audee.mutation.operators import STRUCTURAL, ShapeError, infer_shapes
from audee.settings import OPERATORS
from audee.cases.spec import LayerSpec, ModelSpec

Validate = Callable[[ModelSpec], "str | None"]
log = logging.getLogger(__name__)


def log_unconfigured(spec: ModelSpec, apis: dict[str, ApiConfig]) -> dict[str, list[str]]:
    """Say once per run, one line per layer API, which layers of ``spec`` have no API
    config: they run as they are, their parameters never redrawn (a user's model may hold
    any ``keras.layers`` layer; a config is what mutation needs, not what running needs)."""
    from audee.apis.coverage import unconfigured

    found = unconfigured(spec, apis)
    for api, layers in found.items():
        log.info("%s has no API config: %s %s run%s unmutated", api, "layer" if len(layers) == 1 else "layers",
                 ", ".join(layers), "s" if len(layers) == 1 else "")
    return found


@dataclass
class Variant:
    index: int
    spec: ModelSpec
    mutations: list[Mutation]

    @property
    def invalid(self) -> bool:
        return any(m.invalid for m in self.mutations)


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return False
    return a != b


def _mutate_layer(layer: LayerSpec, cfg: ApiConfig, apis: dict[str, ApiConfig], rng: np.random.Generator,
                  param_rate: float) -> list[Mutation]:
    """Redraw (valid values) each mutable parameter of one layer with ``param_rate``."""
    muts = []
    for name, pcfg in cfg.params.items():
        if not pcfg.mutable or name in layer.fixed or name in NETWORK_FIXED:
            continue
        if pcfg.type == "layer":  # a wrapper: mutate the wrapped layer's own parameters
            inner = layer.params.get(name)
            if isinstance(inner, dict) and inner.get("api") in apis:
                sub = LayerSpec(f"{layer.name}.{name}", inner["api"], dict(inner.get("params", {})), [])
                for m in _mutate_layer(sub, apis[inner["api"]], apis, rng, param_rate):
                    muts.append(m)
                inner["params"] = sub.params
            continue
        if rng.random() >= param_rate:
            continue
        old = layer.params.get(name)
        new = draw_value(pcfg, rng, invalid=False)
        for _ in range(5):
            if _differs(new, old):
                break
            new = draw_value(pcfg, rng, invalid=False)
        if not _differs(new, old):
            continue
        layer.params[name] = new
        muts.append(Mutation(layer.name, name, old, new, False))
    couple_params(layer.params, muts, rng)
    return muts


def _inject_invalid(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator,
                    muts: list[Mutation]) -> None:
    """Give exactly one parameter a crafty invalid value: preferably one already redrawn,
    else any mutable parameter that has invalid values."""
    def has_invalid(layer: LayerSpec, name: str) -> bool:
        p = apis[layer.api].params.get(name)
        return p is not None and p.mutable and bool(p.invalid) and name not in layer.fixed

    pool = [(spec.layer(m.layer), m.param) for m in muts
            if "." not in m.layer and has_invalid(spec.layer(m.layer), m.param)]
    if not pool:
        pool = [(ls, n) for ls in spec.layers if ls.api in apis for n in apis[ls.api].params if has_invalid(ls, n)]
    if not pool:
        return
    layer, name = pool[int(rng.integers(len(pool)))]
    old = next((m.old for m in muts if m.layer == layer.name and m.param == name), layer.params.get(name))
    new = draw_value(apis[layer.api].params[name], rng, invalid=True)
    layer.params[name] = new
    muts[:] = [m for m in muts if not (m.layer == layer.name and m.param == name)]
    muts.append(Mutation(layer.name, name, old, new, True))


def _draw(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator, layer_rate: float,
          invalid_prob: float, param_rate: float, max_layers: int) -> tuple[ModelSpec, list[Mutation]]:
    new = spec.copy()
    mutable = [ls for ls in new.layers if ls.api in apis]
    muts: list[Mutation] = []
    chosen = [ls for ls in mutable if rng.random() < layer_rate]
    if max_layers and len(chosen) > max_layers:  # deep nets: a few layers, so merges still fit
        chosen = [chosen[i] for i in sorted(rng.choice(len(chosen), max_layers, replace=False))]
    for layer in chosen:
        muts += _mutate_layer(layer, apis[layer.api], apis, rng, param_rate)
    tries = 0
    while not muts and mutable and tries < 20:  # every variant changes something
        layer = mutable[int(rng.integers(len(mutable)))]
        muts += _mutate_layer(layer, apis[layer.api], apis, rng, 1.0)
        tries += 1
    if rng.random() < invalid_prob:
        _inject_invalid(new, apis, rng, muts)
    return new, muts


def _draw_operator(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator,
                   operators: dict[str, float], layer_rate: float, invalid_prob: float, param_rate: float,
                   max_layers: int) -> tuple[ModelSpec, list[Mutation]]:
    """One operator, drawn by weight; one that finds no place in ``spec`` leaves the draw
    to the others (a parameter redraw in the end)."""
    unknown = sorted(set(operators) - set(OPERATORS))
    if unknown:
        raise ValueError(f"unknown mutation operator {unknown[0]!r} (known: {', '.join(OPERATORS)})")
    weights = {k: float(w) for k, w in operators.items() if w > 0}
    while weights:
        names = sorted(weights)
        p = np.array([weights[n] for n in names])
        op = names[int(rng.choice(len(names), p=p / p.sum()))]
        if op == "redraw":
            break
        new = spec.copy()
        muts = STRUCTURAL[op](new, apis, rng, invalid_prob=invalid_prob)
        if muts:
            return new, muts
        del weights[op]
    return _draw(spec, apis, rng, layer_rate, invalid_prob, param_rate, max_layers)


def mutate_spec(spec: ModelSpec, apis: dict[str, ApiConfig], rng: np.random.Generator, *,
                layer_rate: float = 0.5, invalid_prob: float = 0.1, param_rate: float = 0.5,
                validate: Validate | None = None, max_redraws: int = 5, index: int = 0,
                max_layers: int = 3, operators: dict[str, float] | None = None) -> Variant:
    """One variant of ``spec``: each layer is chosen with ``layer_rate``, at most
    ``max_layers`` of them (0: no cap), and each chosen layer redraws each parameter with
    ``param_rate``.  With ``validate``, valid-only variants that cannot be
    built are redrawn up to ``max_redraws`` times; the last error is kept in
    ``spec.meta['build_error']`` if none builds.

    A valid-only draw whose shapes do not fit together (:func:`audee.mutation.operators.infer_shapes`,
    pure Python: a kernel larger than its input, a residual ``Add`` of two sizes) is redrawn
    before any backend is asked, as one no backend could build would be.

    ``operators`` (weights by name, :data:`audee.settings.OPERATORS`): each draw
    applies one operator picked by weight (``redraw`` is the parameter redraw above);
    None draws parameter redraws exactly as before operators existed."""
    for attempt in range(max_redraws + 1):
        if operators is None:
            new, muts = _draw(spec, apis, rng, layer_rate, invalid_prob, param_rate, max_layers)
        else:
            new, muts = _draw_operator(spec, apis, rng, operators, layer_rate, invalid_prob, param_rate,
                                       max_layers)
        _mark_outside(new, muts, apis)
        error = None
        if not any(m.invalid for m in muts):
            error = _shape_error(new)
            if error is None and validate is not None:
                error = validate(new)
        if error is None or attempt == max_redraws:
            break
    new.name = f"{spec.name}-v{index}"
    new.meta = {**spec.meta, "mutations": [m.to_json() for m in muts], "redraws": attempt}
    if error is not None:
        new.meta["build_error"] = error
    return Variant(index, new, muts)


def _mark_outside(spec: ModelSpec, muts: list[Mutation], apis: dict[str, ApiConfig]) -> None:
    """Mark the redrawn values the layer's input puts outside its contract (an axis list
    naming one axis twice at the rank the layer meets, :func:`audee.mutation.base.outside_contract`),
    where the pure-Python shape inference knows that rank."""
    try:
        shapes = infer_shapes(spec)
    except ShapeError:
        return
    for m in muts:
        if m.invalid or m.op != "redraw" or "." in m.layer or m.layer not in spec.layer_names():
            continue
        layer = spec.layer(m.layer)
        p = apis[layer.api].params.get(m.param) if layer.api in apis else None
        ins = [shapes.get(i) for i in layer.inputs]
        if p is None or not ins or ins[0] is None:
            continue
        why = outside_contract(m.param, p, layer.params.get(m.param), len(ins[0]) + 1)
        if why:
            m.mark_outside(why)


def _shape_error(spec: ModelSpec) -> str | None:
    """Why ``spec``'s shapes do not fit together, or None (unknown APIs pass)."""
    try:
        infer_shapes(spec)
    except ShapeError as exc:
        return f"shapes: {exc}"
    return None


def generate_variants(spec: ModelSpec, apis: dict[str, ApiConfig], *, n: int, rng_seed: int,
                      start: int = 0, **kwargs: Any) -> Iterator[Variant]:
    """Variants ``start .. start+n-1``; variant i depends only on (rng_seed, i)."""
    for i in range(start, start + n):
        yield mutate_spec(spec, apis, np.random.default_rng([rng_seed, i]), index=i, **kwargs)
