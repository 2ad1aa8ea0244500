"""The localize-fix loop (the paper's Algorithm 2), for inconsistency, NaN and crash cases.

Inconsistency: compute per-layer distances between the two backends and change rates;
take the first layer (topological order) whose rate exceeds t1; for each of its
parameters and each alternative value from its API config, rebuild that layer alone,
feed it the layer input it saw in the case, and amplify its distance with the GA.  A
value under which the one-layer change rate stays below t2 is a source of the
inconsistency.  Fix the model with the best such value and continue with later layers
until no layer exceeds t1.

The one-layer change rate: both backends get the *same* layer input (d_pre = 0), so the
paper's formula reduces to d / eps; audee uses a scale-aware eps, the float precision
floor of the layer's output (``precision`` x mean |output|), so that rates mean the same
for small and large activations and a GA cannot win by inflating values.

NaN: the first layer whose output holds NaN/Inf on the failing backend; a parameter is a
source when a replacement removes the NaN from that layer fed the same input.  Crash:
the first layer that, alone, fails on the failing backend; a parameter is a source when
a replacement makes it run.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from audee.backends.pool import Pool, WorkerFailure
from audee.case import Kind, TestCase
from audee.execute import Executor
from audee.localize.onelayer import alternatives, one_layer_spec
from audee.localize.rates import change_rates, cradle_flags
from audee.oracle.distance import layer_distances, relative_distance
from audee.search.engine import Search, SearchConfig
from audee.settings import LocalizeSettings
from audee.spec import ModelSpec, Weights, weights_key


# t1, t2 (the paper's thresholds), precision, GA size, rounds...: one pydantic model in
# audee.settings (types, ranges, defaults), shared with `audee localize` flags and campaigns.
LocalizeConfig = LocalizeSettings


@dataclass
class Trial:
    layer: str
    param: str
    old: Any
    new: Any
    verdict: str                # consistent | inconsistent | crash | nan | unbuildable | fixed | still-fails
    rate: float = float("nan")
    detail: str = ""


@dataclass
class Source:
    layer: str
    api: str
    param: str
    old: Any
    new: Any
    kind: str                   # inconsistency | nan | crash
    rate: float = float("nan")

    def signature(self) -> tuple:
        return (self.layer, self.param)


@dataclass
class Round:
    layer: str | None
    table: list[dict[str, Any]]           # per layer: distance, change rate
    trials: list[Trial] = field(default_factory=list)
    baseline_rate: float = float("nan")   # the layer alone with its original parameters


@dataclass
class Report:
    case_id: str
    kind: str
    backends: list[str]
    rounds: list[Round] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    cradle: list[str] = field(default_factory=list)
    reproduced: bool = True
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return _jsonable(d)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    if isinstance(x, np.generic):
        return x.item()
    return x


class Localizer:
    def __init__(self, pool: Pool, apis: dict[str, Any], cfg: LocalizeConfig | None = None):
        self.pool = pool
        self.apis = apis
        self.cfg = cfg or LocalizeConfig()
        self.ex = Executor(pool, diagnose=False)

    # ---- shared pieces -------------------------------------------------------------------------
    def _layers(self, spec: ModelSpec, weights: Weights, inputs: dict[str, np.ndarray],
                labels: list[str]) -> dict[str, dict | WorkerFailure]:
        self.ex.build(spec)
        return self.pool.run(spec, weights, weights_key(weights), inputs, labels=labels, layers=True)

    def _params(self, layer: Any) -> list[tuple[str, Any, Any]]:
        """(name, config, current value) for every configured, mutable parameter."""
        api = self.apis.get(layer.api)
        if api is None:
            return []
        out = []
        for name, pcfg in api.params.items():
            if getattr(pcfg, "mutable", True) is False or pcfg.type == "layer" or name in layer.fixed:
                continue
            out.append((name, pcfg, layer.params.get(name)))
        return out

    def _one_layer_case(self, spec: ModelSpec, weights: Weights, layer: str, layer_inputs: dict[str, np.ndarray],
                        override: dict[str, Any]) -> TestCase:
        s1 = one_layer_spec(spec, layer, layer_inputs, override)
        case = TestCase(f"{layer}-{override}", s1, {layer: weights[layer]} if layer in weights else {},
                        dict(layer_inputs))
        self.ex.complete_weights(case, self.cfg.rng)
        return case

    # ---- inconsistency ---------------------------------------------------------------------------
    def rate_table(self, spec: ModelSpec, weights: Weights, inputs: dict[str, np.ndarray],
                   pair: list[str]) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]] | str:
        """Per layer (topological order): distance and change rate between the pair, and
        the first backend's layer outputs; or why the model does not run."""
        got = self._layers(spec, weights, inputs, pair)
        failed = [f"{b}: {got[b].message}" for b in pair if isinstance(got[b], WorkerFailure)]
        if failed:
            return "; ".join(failed)
        la, lb = got[pair[0]]["layers"], got[pair[1]]["layers"]
        dists = layer_distances(la, lb)
        rates = change_rates(spec, dists)
        table = [{"layer": n, "api": spec.layer(n).api, "distance": dists[n], "rate": rates[n]}
                 for n in spec.topological_order() if n in rates]
        return table, la

    def one_layer_rate(self, case: TestCase, pair: list[str], enough: float | None = None) -> float:
        """Largest one-layer change rate on the case's layer inputs, amplified by the GA.

        With ``enough``, stop as soon as a rate reaches it: amplification can only raise
        the rate, so a replacement already inconsistent on the case input needs no search."""
        got = self.pool.run(case.spec, case.weights, weights_key(case.weights), case.inputs, labels=pair)
        if not all(isinstance(got[b], dict) for b in pair):
            return float("inf")
        rel = relative_distance(got[pair[0]]["logits"], got[pair[1]]["logits"])
        best = float(rel.max()) / self.cfg.precision
        if enough is not None and best >= enough:
            return best
        for row in np.argsort(-rel)[:2]:
            x = {k: v[row:row + 1] for k, v in case.inputs.items()}
            cfg = SearchConfig(level="input", fitness="relative-inconsistency", population=self.cfg.ga_population,
                               parents=max(2, self.cfg.ga_population // 3), max_iter=self.cfg.ga_iter,
                               budget_s=60.0, input_scale=0.05, relative_scale=0.2, rng=self.cfg.rng + int(row))
            # amplification only: no failure is recorded, no layer profile traced
            out = Search(self.ex, TestCase(case.id, case.spec, case.weights, x), cfg, pair,
                         case_prefix="amplify", profile_layers=False).run()
            if np.isfinite(out.best_fitness):
                best = max(best, out.best_fitness / self.cfg.precision)
            if enough is not None and best >= enough:
                break
        return best

    def localize_inconsistency(self, case: TestCase, pair: list[str], inputs: dict[str, np.ndarray],
                               report: Report) -> None:
        spec, weights = case.spec, case.weights
        handled: set[str] = set()
        for _ in range(self.cfg.max_rounds):
            got = self.rate_table(spec, weights, inputs, pair)
            if isinstance(got, str):
                report.note = "the (fixed) model fails to run: " + got
                return
            table, la = got
            rates = {row["layer"]: row["rate"] for row in table}
            if not report.rounds:
                report.cradle = cradle_flags(rates)
            target = next((n for n in spec.topological_order()
                           if n not in handled and rates.get(n, 0.0) > self.cfg.t1), None)
            rnd = Round(target, table)
            report.rounds.append(rnd)
            if target is None:
                return
            handled.add(target)
            layer = spec.layer(target)
            layer_inputs = {ref: (la[ref] if ref in la else inputs[ref]) for ref in layer.inputs}
            base = self._one_layer_case(spec, weights, target, layer_inputs, {})
            rnd.baseline_rate = self.one_layer_rate(base, pair)
            found: list[tuple[Trial, Any]] = []
            for pname, pcfg, current in self._params(layer):
                for value in alternatives(pcfg, current, self.cfg.max_values):
                    trial = Trial(target, pname, current, value, "inconsistent")
                    try:
                        c1 = self._one_layer_case(spec, weights, target, layer_inputs, {pname: value})
                    except Exception as exc:  # the one-layer spec is not even valid
                        trial.verdict, trial.detail = "unbuildable", str(exc)[:200]
                        rnd.trials.append(trial)
                        continue
                    r = self.ex.run(c1)
                    kinds = r.verdict.kinds()
                    if Kind.CONSISTENT_REJECTION in kinds:
                        trial.verdict, trial.detail = "unbuildable", _first_error(r)
                    elif Kind.HARD_CRASH in kinds or Kind.DIVERGENT_ACCEPTANCE in kinds:
                        trial.verdict, trial.detail = "crash", _first_error(r)
                    elif Kind.NAN in kinds:
                        trial.verdict = "nan"
                    else:
                        trial.rate = self.one_layer_rate(c1, pair, enough=self.cfg.t2)
                        if trial.rate < self.cfg.t2:
                            trial.verdict = "consistent"
                            found.append((trial, value))
                    rnd.trials.append(trial)
            found.sort(key=lambda tv: tv[0].rate)
            for trial, _ in found:
                report.sources.append(Source(target, layer.api, trial.param, trial.old, trial.new,
                                             "inconsistency", trial.rate))
            fixed = self._fix(spec, weights, target, [t for t, _ in found], pair)
            if fixed is None:
                continue  # nothing removes it (or no fix builds): move on to later layers
            spec, weights = fixed

    def _fix(self, spec: ModelSpec, weights: Weights, layer: str, trials: list[Trial],
             labels: list[str]) -> tuple[ModelSpec, Weights] | None:
        """The model with the best replacement that still builds on every backend."""
        for trial in trials:
            new = spec.copy()
            new.layer(layer).params[trial.param] = trial.new
            built = self.ex.build(new)
            if any(isinstance(built.get(b), WorkerFailure) for b in labels):
                continue
            case = TestCase("fix", new, dict(weights), {})
            self.ex.complete_weights(case, self.cfg.rng)
            return new, case.weights
        return None

    # ---- NaN and crash ---------------------------------------------------------------------------
    def localize_by_replacement(self, case: TestCase, kind: str, bad: str, ref: str | None,
                                inputs: dict[str, np.ndarray], report: Report, first_layer: str | None) -> None:
        """NaN and crash cases: find the first failing layer alone, then the parameter whose
        replacement makes that layer pass on the failing backend."""
        spec, weights = case.spec, case.weights
        source = ref or bad
        got = self._layers(spec, weights, inputs, [source])[source]
        if isinstance(got, WorkerFailure):
            report.note = f"no backend runs the model to provide layer inputs ({got.message})"
            return
        outs = got["layers"]
        target = first_layer
        if target is None:  # crash: the first layer that fails alone on the failing backend
            for name in spec.topological_order():
                layer_inputs = {r: (outs[r] if r in outs else inputs[r]) for r in spec.layer(name).inputs}
                c = self._one_layer_case(spec, weights, name, layer_inputs, {})
                if self._fails(c, bad, kind):
                    target = name
                    break
        rnd = Round(target, [])
        report.rounds.append(rnd)
        if target is None:
            report.note = "no single layer reproduces the failure alone"
            return
        layer = spec.layer(target)
        if kind == Kind.NAN:  # feed the failing backend's own layer input (finite by definition)
            got_bad = self._layers(spec, weights, inputs, [bad])[bad]
            if isinstance(got_bad, dict):
                outs = got_bad["layers"]
        layer_inputs = {r: (outs[r] if r in outs else inputs[r]) for r in layer.inputs}
        for pname, pcfg, current in self._params(layer):
            for value in alternatives(pcfg, current, self.cfg.max_values):
                trial = Trial(target, pname, current, value, "still-fails")
                c = self._one_layer_case(spec, weights, target, layer_inputs, {pname: value})
                if not self._fails(c, bad, kind):
                    trial.verdict = "fixed"
                    report.sources.append(Source(target, layer.api, pname, current, value,
                                                 "nan" if kind == Kind.NAN else "crash"))
                rnd.trials.append(trial)

    def _fails(self, case: TestCase, bad: str, kind: str) -> bool:
        r = self.ex.run(case)
        if kind == Kind.NAN:
            return any(f.kind == Kind.NAN and bad in f.backends for f in r.verdict.findings)
        o = r.outcomes.get(bad)
        return o is not None and not o.ok


def _first_error(result: Any) -> str:
    for o in result.outcomes.values():
        if o.failure is not None:
            return (o.failure.message or o.failure.kind)[:200]
    return ""
