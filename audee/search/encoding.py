"""Chromosomes at three levels (the paper's section 2.4.2) and the Cauchy noise model.

A chromosome is one flat float64 vector: the flattened input (``input``), all weights
concatenated (``weight``), or both (``input-weight``).  Decoding rounds and clips integer
inputs (token ids) into their range, so every individual is a valid input.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import numpy as np

from audee.cases.spec import InputSpec, Weights

LEVELS = ("input", "weight", "input-weight")


@dataclass
class Segment:
    kind: str          # "input" or "weight"
    name: str          # input name, or layer name
    index: int         # weight index within the layer (0 for inputs)
    shape: tuple[int, ...]
    dtype: str
    start: int
    stop: int


class Encoding:
    """Maps gene vectors to (inputs, weights) and back, for one seed input and weight set."""

    def __init__(self, level: str, inputs: dict[str, np.ndarray], weights: Weights, input_specs: list[InputSpec],
                 *, special: bool = False, masks: Collection[str] = ()):
        """``special``: input genes may hold special values (NaN, +-Inf, integer ids out of
        range, :mod:`audee.mutation.special`) that :meth:`repair` then keeps.  ``masks``:
        the inputs a layer's mask is made from (``spec.mask_inputs()``), kept 0/1 whatever
        ``special`` says."""
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r} (one of {', '.join(LEVELS)})")
        self.level = level
        self.special = special
        self.masks = frozenset(masks)
        self.input_specs = {i.name: i for i in input_specs}
        self.base_inputs = {k: np.asarray(v) for k, v in inputs.items()}
        self.base_weights = weights
        self.segments: list[Segment] = []
        pos = 0
        if level in ("input", "input-weight"):
            for name, arr in self.base_inputs.items():
                self.segments.append(Segment("input", name, 0, arr.shape, str(arr.dtype), pos, pos + arr.size))
                pos += arr.size
        if level in ("weight", "input-weight"):
            for lname in sorted(weights):
                for k, arr in enumerate(weights[lname]):
                    self.segments.append(Segment("weight", lname, k, arr.shape, str(arr.dtype), pos, pos + arr.size))
                    pos += arr.size
        self.size = pos
        self._repairs = self._repair_rules()

    @property
    def mutates_weights(self) -> bool:
        return self.level != "input"

    def encode(self) -> np.ndarray:
        genes = np.empty(self.size, np.float64)
        for s in self.segments:
            src = self.base_inputs[s.name] if s.kind == "input" else self.base_weights[s.name][s.index]
            genes[s.start:s.stop] = np.asarray(src, np.float64).ravel()
        return genes

    def scales(self, input_scale: float, weight_scale: float) -> np.ndarray:
        """Per-gene Cauchy scale: a fraction of the input's range, or of each weight
        array's spread, so one noise setting suits images, token ids and weights."""
        out = np.empty(self.size, np.float64)
        for s in self.segments:
            if s.kind == "input":
                spec = self.input_specs.get(s.name)
                width = (spec.range[1] - spec.range[0]) if spec is not None and spec.range else 1.0
                out[s.start:s.stop] = input_scale * width
            else:
                arr = self.base_weights[s.name][s.index]
                spread = float(np.std(arr)) if arr.size > 1 else float(abs(arr).mean()) if arr.size else 0.0
                out[s.start:s.stop] = weight_scale * (spread if spread > 0 else 0.05)
        return out

    def repair(self, genes: np.ndarray) -> np.ndarray:
        """Keep every individual a valid test case: integer inputs become integers inside
        [low, high); float genes stay finite in their dtype (an input or weight that is
        itself Inf would make any NaN trivial).  Done in the genes, so that crossover and
        selection see what is actually run.  With ``special``, input genes keep their
        non-finite values and integer ids may leave their range (they were put there to be
        tested); they stay inside the dtype.  A mask's input stays 0/1."""
        for start, stop, integer, lo, hi, keep in self._repairs:
            seg = genes[start:stop]
            if integer:
                np.clip(np.rint(seg), lo, hi, out=seg)
            elif keep:
                finite = np.isfinite(seg)
                seg[finite] = np.clip(seg[finite], lo, hi)
            else:
                np.clip(seg, lo, hi, out=seg)  # float64 genes + finite noise: never NaN
        return genes

    def _repair_rules(self) -> list[tuple[int, int, bool, float, float, bool]]:
        """The gene ranges :meth:`repair` touches: (start, stop, integer, low, high, keep
        non-finite), worked out once (repair runs on every new individual); neighbouring
        segments under the same rule (the weights of one dtype) are one range."""
        rules: list[tuple[int, int, bool, float, float, bool]] = []
        for s in self.segments:
            spec = self.input_specs.get(s.name) if s.kind == "input" else None
            keep = self.special and s.kind == "input"
            if spec is not None and spec.name in self.masks:
                rule = (True, 0.0, 1.0, False)
            elif spec is not None and spec.is_integer:
                lo, hi = spec.range if spec.range and not keep else (-(2 ** 31), 2 ** 31)
                rule = (True, float(lo), float(hi - 1), keep)
            elif np.issubdtype(np.dtype(s.dtype), np.floating):
                big = float(np.finfo(np.dtype(s.dtype)).max)
                rule = (False, -big, big, keep)
            else:
                continue
            if rules and rules[-1][1] == s.start and rules[-1][2:] == rule:
                rules[-1] = (rules[-1][0], s.stop, *rule)
            else:
                rules.append((s.start, s.stop, *rule))
        return rules

    def inputs_of(self, genes: np.ndarray) -> dict[str, np.ndarray]:
        genes = np.asarray(genes)  # plain arrays out, whatever container the search uses
        out = dict(self.base_inputs)
        for s in self.segments:
            if s.kind == "input":
                out[s.name] = genes[s.start:s.stop].reshape(s.shape).astype(s.dtype)
        return out

    def with_inputs(self, genes: np.ndarray, inputs: dict[str, np.ndarray]) -> np.ndarray:
        """``genes`` with their input segments replaced by ``inputs`` (the inverse of
        :meth:`inputs_of` on those segments)."""
        out = np.array(genes, np.float64)
        for s in self.segments:
            if s.kind == "input" and s.name in inputs:
                out[s.start:s.stop] = np.asarray(inputs[s.name], np.float64).ravel()
        return out

    def weights_of(self, genes: np.ndarray) -> Weights:
        if not self.mutates_weights:
            return self.base_weights
        genes = np.asarray(genes)
        out = {k: list(v) for k, v in self.base_weights.items()}
        for s in self.segments:
            if s.kind == "weight":
                out[s.name][s.index] = genes[s.start:s.stop].reshape(s.shape).astype(s.dtype)
        return out


def cauchy_noise(rng: np.random.Generator, scales: np.ndarray, gene_rate: float = 1.0,
                 genes: np.ndarray | None = None, relative: float = 0.0) -> np.ndarray:
    """Standard Cauchy noise on a ``gene_rate`` share of genes.

    The scale is the per-gene absolute scale plus ``relative * |gene|``: with a relative
    term, values can grow geometrically over generations, which is how a search climbs
    to the overflow that produces Inf and NaN (additive noise alone grows linearly).
    """
    return scaled_noise(cauchy_draw(rng, scales.shape[0], gene_rate), scales, genes, relative)


def cauchy_draw(rng: np.random.Generator, size: int, gene_rate: float = 1.0) -> np.ndarray:
    """The random part of :func:`cauchy_noise`: standard Cauchy values, 0 outside the
    ``gene_rate`` share of genes.  It depends on no gene, so a search can draw it ahead."""
    noise = rng.standard_cauchy(size)
    if gene_rate < 1.0:
        noise *= rng.random(size) < gene_rate
    return noise


def scaled_noise(draw: np.ndarray, scales: np.ndarray, genes: np.ndarray | None = None,
                 relative: float = 0.0) -> np.ndarray:
    """:func:`cauchy_draw`'s values at the per-gene scale (plus ``relative * |gene|``)."""
    if relative and genes is not None:
        scales = scales + relative * np.abs(genes)
    return draw * scales
