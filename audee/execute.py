"""Run one test case on every backend and judge it with the oracles.

This is the loop body of every search: build (cached per spec in the workers, so a
spec already seen costs nothing), run the batch on all backends at once, apply the
crash, NaN and inconsistency oracles, and — only for failing cases — fetch per-layer
outputs for the diagnosis.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audee.backends.pool import Pool, WorkerFailure
from audee.case import Finding, Kind, Outcome, TestCase, Verdict
from audee.oracle import crash_findings, inconsistency_findings, layer_distances, nan_findings
from audee.settings import TIE_MARGIN
from audee.spec import ModelSpec, weights_key
from audee.weights import Shapes, adapt_weights

DIAGNOSE_INPUTS = 8  # inputs for which per-layer outputs are fetched on a failure


@dataclass
class Result:
    case: TestCase
    verdict: Verdict
    outcomes: dict[str, Outcome]
    pairs: dict[str, dict] = field(default_factory=dict)      # per backend pair: distance, flips, ties
    layer_distances: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0


class Executor:
    """Runs test cases on a :class:`Pool`; remembers each spec's weight shapes so a spec
    already built costs one round trip per backend, not two."""

    def __init__(self, pool: Pool, *, tie_margin: float = TIE_MARGIN, diagnose: bool = True):
        self.pool = pool
        self.tie_margin = tie_margin
        self.diagnose = diagnose
        self._built: dict[str, dict[str, Any]] = {}

    # ---- building ------------------------------------------------------------------------------
    def build(self, spec: ModelSpec) -> dict[str, Shapes | WorkerFailure]:
        key = spec.key()
        if key not in self._built or any(isinstance(v, WorkerFailure) and v.hard for v in self._built[key].values()):
            self._built[key] = {label: (r["shapes"] if isinstance(r, dict) else r)
                                for label, r in self.pool.build(spec).items()}
            if len(self._built) > 64:
                self._built.pop(next(iter(self._built)))
        return self._built[key]

    def shapes(self, spec: ModelSpec) -> Shapes | None:
        """Weight shapes from the first backend that builds ``spec`` (None if none does)."""
        for got in self.build(spec).values():
            if not isinstance(got, WorkerFailure):
                return {k: [(r, tuple(s)) for r, s in v] for k, v in got.items()}
        return None

    # ---- running -------------------------------------------------------------------------------
    def complete_weights(self, case: TestCase, weight_seed: int) -> None:
        """Fill weights for layers the case has none for (new or reshaped layers)."""
        shapes = self.shapes(case.spec)
        if shapes is not None:
            case.weights = adapt_weights(case.weights, shapes, weight_seed)

    def run(self, case: TestCase) -> Result:
        t0 = time.perf_counter()
        built = self.build(case.spec)
        outcomes = {label: Outcome(label, failure=got) for label, got in built.items() if isinstance(got, WorkerFailure)}
        ready = [label for label, got in built.items() if not isinstance(got, WorkerFailure)]
        if ready:
            wkey = weights_key(case.weights)
            for label, got in self.pool.run(case.spec, case.weights, wkey, case.inputs, labels=ready).items():
                if isinstance(got, WorkerFailure):
                    outcomes[label] = Outcome(label, failure=got)
                    if got.hard:
                        self._built.pop(case.spec.key(), None)  # the worker restarted: cache gone
                else:
                    outcomes[label] = Outcome(label, logits=got["logits"], output=got["output"],
                                              nonfinite=got["nonfinite"], run_s=got["run_s"])
        ordered = [outcomes[label] for label in self.pool.labels if label in outcomes]
        findings: list[Finding] = crash_findings(ordered) + nan_findings(ordered)
        incons, pairs = inconsistency_findings(ordered, self.tie_margin)
        findings += incons
        result = Result(case, Verdict(findings), {o.backend: o for o in ordered}, pairs)
        if self.diagnose and incons:
            self._diagnose(result, incons)
        result.seconds = time.perf_counter() - t0
        return result

    def _diagnose(self, result: Result, incons: list[Finding]) -> None:
        """Per-layer distances (Definition 4) for the pairs that flipped labels, on a few
        of the flipped inputs: the data localization starts from."""
        case = result.case
        rows = sorted({i for f in incons for i in f.detail["inputs"][:DIAGNOSE_INPUTS]})[:DIAGNOSE_INPUTS]
        sub = {k: v[rows] for k, v in case.inputs.items()}
        labels = sorted({b for f in incons for b in f.backends})
        got = self.pool.run(case.spec, case.weights, weights_key(case.weights), sub, labels=labels, layers=True)
        for f in incons:
            a, b = f.backends
            ra, rb = got.get(a), got.get(b)
            if isinstance(ra, dict) and isinstance(rb, dict):
                d = layer_distances(ra["layers"], rb["layers"])
                result.layer_distances[f.detail["pair"]] = d
                f.detail["layer_distances"] = d


def seed_batch(inputs: dict[str, np.ndarray], index: int, size: int) -> tuple[dict[str, np.ndarray], list[int]]:
    """A deterministic window of ``size`` seed inputs for test case ``index``; successive
    cases rotate through the seed set so every input gets used."""
    n = int(next(iter(inputs.values())).shape[0])
    size = min(size, n)
    start = (index * size) % n
    rows = [(start + k) % n for k in range(size)]
    return {k: v[rows] for k, v in inputs.items()}, rows


__all__ = ["Executor", "Result", "seed_batch", "Kind"]
