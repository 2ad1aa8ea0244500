"""Evaluate a population on the backends, as cheaply as the level allows.

Input level: the whole population is one batch, so a generation costs one compiled call
per backend.  Weight levels: each individual's weights are swapped into the already
built model (no rebuild, no ONNX re-export) and its input run; the whole generation goes
to each backend in one request (``run_many``), so the workers run their individuals back
to back, all at once, instead of waiting on one round trip per individual.
Besides the fitness, each individual gets the failure kinds that can be seen without a
second run (NaN/Inf rows, label flips, logits out of the deviation oracle's tolerance,
backend failures); the engine confirms those with a full oracle run before writing a
case file.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from audee.backends.pool import Pool, WorkerFailure, pickled
from audee.equivalence.rules import widened_weights
from audee.fitness import (inconsistency_fitness, largest_pair, nan_fitness, precision_fitness,
                           relative_inconsistency_fitness)
from audee.oracle.deviation import (FULL, Tolerances, as_tolerances, deviation_score, finite_rows, pair_compute,
                                    relative_tie_margin)
from audee.oracle.labels import label_flips
from audee.reference.run import widened_inputs
from audee.search.encoding import Encoding
from audee.cases.spec import ModelSpec, weights_key

_counter = itertools.count()


@dataclass
class ReferenceLane:
    """The float64 reference a ``precision`` search evaluates each generation on: the
    backend that computes it (:meth:`audee.reference.run.Reference.run` found it on the
    search's seed case) and the widened model.  At input level the whole population is one
    more batched call on that backend, sent with the others; at weight levels one
    ``run_many`` request of the widened weight sets after them."""

    label: str
    spec: ModelSpec
    dtype: str = "float64"

    def weights(self, weights: Any) -> Any:
        """Weights cast to the reference's dtype (``widened``'s, the one way to widen)."""
        return widened_weights(weights, self.dtype)

    def inputs(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return widened_inputs(inputs, self.dtype)


@dataclass
class Evaluation:
    fitness: float
    pair: str = ""
    suspect: list[str] = field(default_factory=list)  # "crash", "nan", "inconsistency", "deviation"
    ref: tuple[str, int] = ("", 0)                      # (kept-run tag, row) in the workers


class PopulationEvaluator:
    def __init__(self, pool: Pool, spec: ModelSpec, encoding: Encoding, *, fitness: str, labels: list[str],
                 tie_margin: float, nan_backend: str | None = None, layer: str | None = None,
                 tolerances: Tolerances | dict[str, Any] | None = None, reference: ReferenceLane | None = None):
        if fitness not in ("nan", "precision") and len(labels) < 2:
            raise ValueError("the inconsistency fitness needs two or more backends")
        if fitness == "precision" and reference is None:
            raise ValueError("the precision fitness needs the float64 reference (a ReferenceLane)")
        self.reference = reference
        self.pool = pool
        self.spec = spec
        self.encoding = encoding
        self.fitness = fitness
        self.labels = labels
        self.nan_backend = nan_backend or labels[0]
        self.layer = layer or spec.logits_layer
        self.tie_margin = tie_margin
        self.tolerances = as_tolerances(tolerances)
        self.modes = pool.precisions  # each backend's compute mode: pairs with a TF32 one are judged as tf32
        self.base_wkey = weights_key(encoding.base_weights)
        self.evaluations = 0
        self.lanes: dict[str, float] = {}  # each backend's forward seconds in the last generation

    def evaluate(self, population: list[np.ndarray], meanwhile: Callable[[], Any] | None = None) -> list[Evaluation]:
        """Each individual's evaluation.  ``meanwhile`` is called once, when all backends
        but one have answered: the parent's own work (the next generation's draws) then runs
        on the cores the finished backends left.  Called right after the sends, it competed
        with every backend: in a weight-level LeNet-5 generation the draws (19 CPU ms) kept
        PyTorch, the longest lane, at three quarters of a core."""
        meanwhile = meanwhile or _nothing
        if not population:
            meanwhile()
            return []
        self.evaluations += len(population)
        if not self.encoding.mutates_weights:
            batch = [self.encoding.inputs_of(g) for g in population]
            inputs = {k: np.concatenate([b[k] for b in batch]) for k in batch[0]}
            tag = f"pop-{next(_counter)}"
            tickets = self.pool.submit_run(self.spec, self.encoding.base_weights, self.base_wkey, inputs,
                                           self.send_order(), self._layers, tag)
            ref_ticket = self._submit_reference(inputs)
            got: dict[str, Any] = {}
            pairs: dict[tuple[str, str], _Pair] = {}
            for label in _last_lane_calls(self.pool.as_answered(tickets), len(tickets), meanwhile):
                got.update(self.pool.collect_run({label: tickets[label]}))
                self._judge_pairs(got, pairs)  # while the other backends compute
            self.lanes = {b: r["run_s"] for b, r in got.items() if isinstance(r, dict)}
            ref = self._collect_reference(ref_ticket)
            evals = self._judge({b: got[b] for b in self.labels}, len(population), pairs, ref)
            for i, e in enumerate(evals):
                e.ref = (tag, i)
            return evals
        tags = [f"ind-{next(_counter)}" for _ in population]
        batched = self._run_many(population, tags, meanwhile)
        stacked = _stacked(batched) if batched is not None else None
        refs = self._reference_many(population)
        if stacked is not None:  # one judgement over all individuals: every oracle and fitness is row-wise
            evals = self._judge(stacked, len(population), None, _rows(refs))
            for e, tag in zip(evals, tags):
                e.ref = (tag, 0)
            return evals
        out = []
        for i, (genes, tag) in enumerate(zip(population, tags)):
            if batched is not None:
                replies = {label: got[i] for label, got in batched.items()}
            else:  # one request per individual (a worker died on the batch: find which one)
                replies = self._run(self.encoding.inputs_of(genes), self.encoding.weights_of(genes), tag, tag)
            (e,) = self._judge(replies, 1, None, refs[i] if refs is not None else None)
            e.ref = (tag, 0)
            out.append(e)
        return out

    def _run_many(self, population: list[np.ndarray], tags: list[str],
                  meanwhile: Callable[[], Any]) -> dict[str, list] | None:
        """Every individual of a weight-level generation in one request per backend
        (``run_many``: the workers run their individuals back to back, all backends at
        once); None when a worker failed the request as a whole."""
        key = self.spec.key()
        items = [{"weights_key": tag, "weights": self.encoding.weights_of(genes),
                  "inputs": self.encoding.inputs_of(genes), "layers": self._layers, "keep": tag}
                 for genes, tag in zip(population, tags)]
        msg = {"op": "call", "name": "run_many", "kwargs": {"spec": self.spec.to_json(), "key": key, "items": items}}
        payload = pickled(msg)
        for label in self.send_order():
            worker = self.pool.workers[label]  # each individual keeps its own time limit
            worker.submit(msg, timeout=worker.timeout * len(items), pickled=payload)
        got = {label: self.pool.workers[label].result()
               for label in _last_lane_calls(self.pool.as_answered(self.labels), len(self.labels), meanwhile)}
        got = {label: got[label] for label in self.labels}
        if any(isinstance(r, WorkerFailure) or "error" in r for r in got.values()):
            return None
        self.lanes = {label: sum(r.get("run_s", 0.0) for r in reply["value"]) for label, reply in got.items()}
        return {label: [_reply(r) for r in reply["value"]] for label, reply in got.items()}

    def _submit_reference(self, inputs: dict[str, np.ndarray]) -> dict[str, int] | None:
        """An input-level generation on the reference backend, widened (None: no reference)."""
        if self.reference is None:
            return None
        lane = self.reference
        wide = lane.weights(self.encoding.base_weights)
        return self.pool.submit_run(lane.spec, wide, f"{self.base_wkey}-{lane.dtype}", lane.inputs(inputs),
                                    [lane.label])

    def _collect_reference(self, ticket: dict[str, int] | None) -> np.ndarray | None:
        """The reference's logits of a generation (None: none, or it failed: no fitness)."""
        if ticket is None:
            return None
        got = self.pool.collect_run(ticket)[self.reference.label]
        return np.asarray(got["logits"]) if isinstance(got, dict) else None

    def _reference_many(self, population: list[np.ndarray]) -> list[np.ndarray | None] | None:
        """A weight-level generation on the reference backend: each individual's widened
        weights and input in one ``run_many`` request; each one's logits (None where it failed)."""
        if self.reference is None:
            return None
        lane = self.reference
        items = [{"weights_key": f"ref-{next(_counter)}", "weights": lane.weights(self.encoding.weights_of(genes)),
                  "inputs": lane.inputs(self.encoding.inputs_of(genes)), "layers": False, "keep": None}
                 for genes in population]
        worker = self.pool.workers[lane.label]
        ticket = worker.submit({"op": "call", "name": "run_many",
                                "kwargs": {"spec": lane.spec.to_json(), "key": lane.spec.key(), "items": items}},
                               timeout=worker.timeout * len(items))
        reply = worker.result(ticket)
        if isinstance(reply, WorkerFailure) or "error" in reply:
            return [None] * len(population)
        return [np.asarray(r["logits"]) if isinstance(r, dict) and "error" not in r else None
                for r in reply["value"]]

    def send_order(self) -> list[str]:
        """The backends, the one that computed longest in the last generation first: its
        request goes out first, so the generation's longest lane starts earliest (on two
        cores, sending LeNet-5's weight sets to four workers takes several milliseconds,
        and the others start computing meanwhile)."""
        return sorted(self.labels, key=lambda b: -self.lanes.get(b, 0.0))

    @property
    def _layers(self) -> list[str] | bool:
        """The per-layer output each run returns besides the logits: the searched layer's."""
        return [self.layer] if self.layer != self.spec.logits_layer else False

    def _run(self, inputs: dict[str, np.ndarray], weights: Any, wkey: str, tag: str) -> dict[str, Any]:
        return self.pool.run(self.spec, weights, wkey, inputs, labels=self.labels, layers=self._layers, keep=tag)

    def _value(self, reply: dict) -> np.ndarray:
        return reply["layers"][self.layer] if "layers" in reply else reply["logits"]

    def _judge_pairs(self, replies: dict[str, Any], pairs: dict[tuple[str, str], "_Pair"]) -> None:
        """Add to ``pairs`` every pair of answered backends not judged yet (in the
        backends' order, whatever order they answered in)."""
        ok = [b for b in self.labels if b in replies and not isinstance(replies[b], WorkerFailure)]
        for a, b in itertools.combinations(ok, 2):
            if (a, b) not in pairs:
                pairs[(a, b)] = self._pair(a, b, replies[a], replies[b])

    def _pair(self, a: str, b: str, ra: dict, rb: dict) -> "_Pair":
        """One pair's row-wise judgement: label flips, and the logits' deviation scores
        with the rows out of tolerance (the deviation oracle's rule: finite on both sides)."""
        compute = pair_compute(self.modes.get(a, FULL), self.modes.get(b, FULL))
        oa, ob = ra["output"], rb["output"]
        rel = relative_tie_margin(oa, ob, self.tolerances, compute) if oa.shape == ob.shape else 0.0
        flips = label_flips(oa, ob, self.tie_margin, rel).flips
        la, lb = ra["logits"], rb["logits"]
        scores = deviation_score(la, lb, self.tolerances, compute)
        out = (scores > 1.0) & finite_rows(la, lb) if la.shape == lb.shape else np.zeros(len(scores), bool)
        return _Pair(flips, scores, out)

    def _judge(self, replies: dict[str, Any], n: int, pairs: dict[tuple[str, str], "_Pair"] | None = None,
               reference: np.ndarray | None = None) -> list[Evaluation]:
        """``pairs``: pairs already judged (:meth:`_judge_pairs`, as answers came);
        ``reference``: the float64 reference's logits (the precision fitness)."""
        evals = [Evaluation(0.0) for _ in range(n)]
        ok = {b: r for b, r in replies.items() if not isinstance(r, WorkerFailure)}
        if len(ok) < len(replies):
            for e in evals:
                e.suspect.append("crash")
        for r in ok.values():
            for rows in r["nonfinite_rows"].values():
                for i in rows:
                    if "nan" not in evals[i].suspect:
                        evals[i].suspect.append("nan")
        deviations: dict[tuple[str, str], np.ndarray] = {}  # the logits' per-row scores, pair by pair
        if len(ok) >= 2:
            for a, b in itertools.combinations(ok, 2):
                pair = (pairs or {}).get((a, b)) or self._pair(a, b, ok[a], ok[b])
                for i in np.flatnonzero(pair.flips):
                    if "inconsistency" not in evals[i].suspect:
                        evals[i].suspect.append("inconsistency")
                deviations[(a, b)] = pair.scores
                for i in np.flatnonzero(pair.out):
                    if "deviation" not in evals[i].suspect:
                        evals[i].suspect.append("deviation")
        if self.fitness == "precision":
            if reference is not None and ok:
                values, who = precision_fitness({b: r["logits"] for b, r in ok.items()}, reference,
                                                self.tolerances, self.modes)
                for e, v, b in zip(evals, values, who):
                    e.fitness, e.pair = float(v), b
                    if v > 1.0 and "precision" not in e.suspect:  # out of tolerance against float64
                        e.suspect.append("precision")
        elif self.fitness == "nan":
            if self.nan_backend in ok:
                for e, v in zip(evals, nan_fitness(self._value(ok[self.nan_backend]))):
                    e.fitness = float(v)
        elif len(ok) >= 2:
            if self.fitness == "inconsistency" and self.layer == self.spec.logits_layer:
                values, pairs = largest_pair(deviations)  # the fitness is the logits' deviation
            elif self.fitness == "relative-inconsistency":
                values, pairs = relative_inconsistency_fitness({b: self._value(r) for b, r in ok.items()})
            else:
                values, pairs = inconsistency_fitness({b: self._value(r) for b, r in ok.items()},
                                                      self.tolerances, self.modes)
            for e, v, p in zip(evals, values, pairs):
                e.fitness, e.pair = float(v), p
        return evals


class _Pair(NamedTuple):
    """One pair of backends judged row by row (:meth:`PopulationEvaluator._pair`)."""

    flips: np.ndarray   # bool: a label flip
    scores: np.ndarray  # the logits' deviation score
    out: np.ndarray     # bool: out of the deviation oracle's tolerance


def _rows(refs: list[np.ndarray | None] | None) -> np.ndarray | None:
    """Individuals' one-row reference logits as one batch (None if any is missing)."""
    if refs is None or any(r is None for r in refs):
        return None
    return np.concatenate(refs)


def _nothing() -> None:
    pass


def _last_lane_calls(labels: Iterator[str], n: int, meanwhile: Callable[[], Any]) -> Iterator[str]:
    """``labels`` as they come, calling ``meanwhile`` once when at most one of the ``n`` is
    still to come, before waiting for it: the parent's own work (the next generation's
    draws) then takes the core the finished backends left, instead of competing with
    every backend for the cores."""
    done = 0
    for label in labels:
        if done == n - 1:
            meanwhile()
        done += 1
        yield label
    if done < n:  # fewer came than expected: the parent's work still gets done
        meanwhile()


def _stacked(batched: dict[str, list]) -> dict[str, dict] | None:
    """A weight-level generation's answers as one batch, row i the individual i: None when
    an individual failed on some backend or ran other than one input row (then each is
    judged alone)."""
    out: dict[str, dict] = {}
    for label, replies in batched.items():
        if any(isinstance(r, WorkerFailure) or np.shape(r["logits"])[:1] != (1,) for r in replies):
            return None
        first = replies[0]
        out[label] = {
            "output": np.concatenate([r["output"] for r in replies]),
            "logits": np.concatenate([r["logits"] for r in replies]),
            "nonfinite_rows": {"any": [i for i, r in enumerate(replies) if any(r["nonfinite_rows"].values())]},
            **({"layers": {n: np.concatenate([r["layers"][n] for r in replies]) for n in first["layers"]}}
               if "layers" in first else {}),
        }
    return out


def _reply(r: dict) -> dict | WorkerFailure:
    """One item of a ``run_many`` answer as ``Pool.run`` gives it (a clean failure as a
    :class:`WorkerFailure`)."""
    if "error" in r:
        e = r["error"]
        return WorkerFailure("error", e.get("phase", "run"), e["message"], e.get("traceback", ""))
    return r
