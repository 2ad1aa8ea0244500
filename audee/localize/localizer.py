"""The localize-fix loop (the paper's Algorithm 2), for every finding kind.

Each kind picks a target layer and a *probe*: the target alone, fed the layer input it
saw in the case, judged for that kind of failure:

* inconsistency: the first layer (topological order) whose change rate exceeds t1; the
  failure is present while the one-layer change rate reaches t2 (amplified by the GA
  before a replacement is said to remove it).  The model is then fixed and the loop goes
  on with later layers (the paper's localize-fix strategy);
* deviation: the first layer that deviates on its own input (the deviation oracle's
  ``own_layers``); present while the layer alone is out of tolerance;
* NaN: the first layer where the backends' non-finite patterns differ; present while
  the failing backend still yields NaN/Inf there;
* hard crash and divergent acceptance: the first layer that fails alone on the failing
  backend; present while that backend still crashes or rejects it (a replacement every
  backend rejects removes nothing);
* regression (one backend under two releases): the layer the finding names, else the first
  layer whose two releases differ alone, fed the older release's layer input; present while
  the version pair still differs there, whatever oracle sees it (a replacement both releases
  reject removes nothing).

Every constructor parameter of the target is a candidate (:func:`param_spaces`: the API
config's, pinned ones included, and the constructor's others), each replaced by its
alternatives one at a time; the evidence on each and the ranking rule are in
:mod:`audee.localize.evidence`.  When no parameter removes a failure but sanitizing the
special values in the layer input does, the input is the trigger.

The one-layer change rate: both backends get the *same* layer input (d_pre = 0), so the
paper's formula reduces to d / eps; audee uses a scale-aware eps, the float precision
floor of the layer's output (``precision`` x mean |output|).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from audee.backends.pool import Pool, WorkerFailure
from audee.cases.case import Kind, TestCase
from audee.engine.execute import Executor
from audee.cases.kinds import CRASHES
from audee.localize.evidence import Candidate, rank
from audee.localize.onelayer import ParamSpace, param_spaces, same_value
from audee.localize.rates import change_rates, cradle_flags
from audee.oracle.deviation import compare
from audee.oracle.distance import layer_distances, relative_distance
from audee.records.localization import LocalizationReport, RateRow, Round, Source, Trial, Trigger
from audee.search.engine import Search, SearchConfig
from audee.settings import LocalizeSettings
from audee.triage.signature import normalize_error
from audee.cases.spec import ModelSpec, one_layer_spec, Weights, weights_key
from audee.core.floats import is_float, numpy_float

# t1, t2 (the paper's thresholds), precision, GA size, rounds...: one pydantic model in
# audee.settings (types, ranges, defaults), shared with `audee localize` flags and campaigns.
LocalizeConfig = LocalizeSettings

REMOVED, FAILS, UNBUILDABLE, CRASH, NAN = "removed", "fails", "unbuildable", "crash", "nan"
INPUT = "<input>"  # the pseudo-parameter for the layer input's special values

#: the report the loop fills in (its parts, Trial, Source, Round, are audee.records.localization's)
Report = LocalizationReport


def sanitized(arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[str]]:
    """Layer inputs with their special values made ordinary: NaN/Inf to 0, subnormals and
    -0.0 to 0, magnitudes beyond 1e4 x the typical one clipped; and what was changed."""
    out, what = {}, []
    for k, a in arrays.items():
        if not is_float(a):
            out[k] = a
            continue
        b = numpy_float(a).copy()  # a bfloat16 layer's output as float32, exactly
        bad = ~np.isfinite(b)
        if bad.any():
            what.append(f"{k}: {int(bad.sum())} NaN/Inf")
            b[bad] = 0
        tiny = (b != 0) & (np.abs(b) < np.finfo(b.dtype).tiny)
        if tiny.any():
            what.append(f"{k}: {int(tiny.sum())} subnormal")
            b[tiny] = 0
        negzero = (b == 0) & np.signbit(b)
        if negzero.any():
            what.append(f"{k}: {int(negzero.sum())} -0.0")
            b[negzero] = 0.0
        typical = float(np.median(np.abs(b))) if b.size else 0.0
        cap = 1e4 * max(typical, 1.0)
        big = np.abs(b) > cap
        if big.any():
            what.append(f"{k}: {int(big.sum())} beyond {cap:.3g}")
            b = np.clip(b, -cap, cap)
        out[k] = b
    return out, what


class Probe:
    """The target layer alone on its recorded input, judged for one failure kind."""

    def __init__(self, loc: "Localizer", spec: ModelSpec, weights: Weights, target: str,
                 layer_inputs: dict[str, np.ndarray], kind: str, labels: list[str], bad: str | None = None,
                 rule: str | None = None):
        self.loc, self.spec, self.weights, self.target = loc, spec, weights, target
        self.layer_inputs, self.kind, self.labels, self.bad = layer_inputs, kind, labels, bad
        self.rule = rule  # equivalence: the rule whose equivalent model the layer alone must match

    def judge(self, override: dict[str, Any], confirm: bool = True,
              inputs: dict[str, np.ndarray] | None = None) -> Trial:
        """One experiment: ``override`` on the target; ``confirm``: amplify before saying
        an inconsistency is removed (the paper's GA step)."""
        param, new = next(iter(override.items())) if override else ("", None)
        trial = Trial(self.target, param, self.spec.layer(self.target).params.get(param), new, FAILS)
        try:
            case = self.loc._one_layer_case(self.spec, self.weights, self.target, inputs or self.layer_inputs,
                                            override)
        except Exception as exc:  # noqa: BLE001 - the one-layer spec is not even valid
            trial.verdict, trial.detail = UNBUILDABLE, str(exc)[:200]
            return trial
        if self.kind == Kind.EQUIVALENCE:
            return self._judge_equivalence(case, trial)
        r = self.loc.ex.run(case)
        kinds = r.verdict.kinds()
        if self.kind == Kind.REGRESSION:
            return self._judge_regression(r, kinds, trial)
        bad_out = r.outcomes.get(self.bad) if self.bad else None
        if self.kind in CRASHES:
            if Kind.CONSISTENT_REJECTION in kinds:
                trial.verdict, trial.detail = UNBUILDABLE, _first_error(r)
            elif bad_out is not None and not bad_out.ok:
                trial.verdict = FAILS
                trial.detail = normalize_error(bad_out.failure.message or bad_out.failure.kind) or ""
            elif any(not o.ok for o in r.outcomes.values()):
                trial.verdict, trial.detail = CRASH, _first_error(r)  # another backend fails now
            else:
                trial.verdict = REMOVED
            return trial
        if Kind.CONSISTENT_REJECTION in kinds:
            trial.verdict, trial.detail = UNBUILDABLE, _first_error(r)
        elif Kind.HARD_CRASH in kinds or Kind.DIVERGENT_ACCEPTANCE in kinds:
            trial.verdict, trial.detail = CRASH, _first_error(r)
        elif self.kind == Kind.NAN:
            nan = any(f.kind == Kind.NAN and self.bad in f.backends for f in r.verdict.findings)
            trial.verdict = FAILS if nan else REMOVED
        elif Kind.NAN in kinds:
            trial.verdict = NAN
        elif self.kind == Kind.DEVIATION:
            a, b = (r.outcomes[x] for x in self.labels[:2])
            got = compare(a.logits, b.logits, self.loc.ex.tolerances)
            trial.rate = float(got["score"]) if got is not None else float("inf")
            trial.verdict = FAILS if got is None or got["score"] > 1.0 else REMOVED
        else:
            a, b = (r.outcomes[x] for x in self.labels[:2])
            trial.rate = self.loc.direct_rate(a.logits, b.logits)
            if trial.rate < self.loc.cfg.t2 and confirm:
                trial.rate = self.loc.one_layer_rate(case, self.labels[:2], enough=self.loc.cfg.t2)
            trial.verdict = FAILS if trial.rate >= self.loc.cfg.t2 else REMOVED
        return trial


    def _judge_regression(self, r: Any, kinds: list[str], trial: Trial) -> Trial:
        """The layer alone under both releases: still a ``regression`` of the version pair
        (fails), none (removed), or both releases refuse it alike (unbuildable).  A crash or a
        refusal of one release is the regression itself, so it fails rather than crashes."""
        pair = sorted(self.labels[:2])
        found = [f for f in r.verdict.findings if f.kind == Kind.REGRESSION and sorted(f.backends) == pair]
        if found:
            trial.verdict = FAILS
            score = found[0].detail.score
            if score is not None:
                trial.rate = float(score)
        elif Kind.CONSISTENT_REJECTION in kinds or any(not r.outcomes[b].ok for b in pair if b in r.outcomes):
            trial.verdict, trial.detail = UNBUILDABLE, _first_error(r)
        else:
            trial.verdict = REMOVED
        return trial

    def _judge_equivalence(self, case: TestCase, trial: Trial) -> Trial:
        """The layer alone and its equivalent by the probe's rule on the failing backend:
        still an ``equivalence`` finding (fails), none (removed), or the layer alone no
        longer runs there (unbuildable)."""
        r = self.loc.equivalence_executor(self.rule).run(case)
        out = r.outcomes.get(self.bad)
        if out is None or not out.ok:
            trial.verdict, trial.detail = UNBUILDABLE, _first_error(r)
            return trial
        found = [f for f in r.verdict.findings
                 if f.kind == Kind.EQUIVALENCE and f.detail.rule == self.rule and self.bad in f.backends]
        trial.verdict = FAILS if found else REMOVED
        if found and found[0].detail.score is not None:
            trial.rate = float(found[0].detail.score)
        elif found:
            trial.detail = found[0].detail.reason or ""
        return trial


class Localizer:
    def __init__(self, pool: Pool, apis: dict[str, Any], cfg: LocalizeConfig | None = None,
                 tolerances: Any = None):
        self.pool = pool
        self.apis = apis
        self.cfg = cfg or LocalizeConfig()
        self.ex = Executor(pool, diagnose=False, tolerances=tolerances)
        self._equivalence: dict[str | None, Executor] = {}  # rule -> its executor (equivalence_executor)

    # ---- shared pieces -------------------------------------------------------------------------
    def _layers(self, spec: ModelSpec, weights: Weights, inputs: dict[str, np.ndarray],
                labels: list[str]) -> dict[str, dict | WorkerFailure]:
        self.ex.build(spec)
        return self.pool.run(spec, weights, weights_key(weights), inputs, labels=labels, layers=True)

    def _one_layer_case(self, spec: ModelSpec, weights: Weights, layer: str, layer_inputs: dict[str, np.ndarray],
                        override: dict[str, Any]) -> TestCase:
        s1 = one_layer_spec(spec, layer, layer_inputs, override)
        case = TestCase(f"{layer}-{override}", s1, {layer: weights[layer]} if layer in weights else {},
                        dict(layer_inputs))
        self.ex.complete_weights(case, self.cfg.rng)
        return case

    def direct_rate(self, a: np.ndarray | None, b: np.ndarray | None) -> float:
        """The one-layer change rate on the case input itself (no amplification)."""
        if a is None or b is None or a.shape != b.shape:
            return float("inf")
        return float(relative_distance(a, b).max()) / self.cfg.precision

    # ---- candidates and evidence ---------------------------------------------------------------
    def examine(self, probe: Probe, rnd: Round) -> list[Candidate]:
        """Try every parameter's alternatives on ``probe``; the candidates, with the
        masking test run on them when more than one parameter removes the failure."""
        layer = probe.spec.layer(probe.target)
        spaces = param_spaces(layer, self.apis.get(layer.api), self.cfg.max_values)
        verdicts: dict[str, list[tuple[Any, Trial]]] = {}
        cands: list[Candidate] = []
        for i, ps in enumerate(spaces):
            c = Candidate(probe.target, layer.api, ps.name, ps.current, ps.origin, order=i,
                          default=None if _missing(ps) else ps.default)
            rates = []
            for value in ps.values:
                t = probe.judge({ps.name: value})
                t.old = ps.current
                rnd.trials.append(t)
                verdicts.setdefault(ps.name, []).append((value, t))
                if t.verdict == REMOVED:
                    c.removing.append(value)
                    rates.append(t.rate)
                elif t.verdict == FAILS:
                    c.failing.append(value)
                if not _missing(ps) and same_value(value, ps.default) and t.verdict in (REMOVED, FAILS):
                    c.default_removes = t.verdict == REMOVED
            if c.removing:
                finite = [r for r in rates if r == r]
                c.best_rate = min(finite) if finite else float("nan")
                cands.append(c)
        if len(cands) > 1 and self.cfg.mask_contexts:
            self.masking_test(probe, cands, spaces, verdicts, rnd)
        return cands

    def masking_test(self, probe: Probe, cands: list[Candidate], spaces: list[ParamSpace],
                     verdicts: dict[str, list[tuple[Any, Trial]]], rnd: Round) -> None:
        """Each candidate keeps its value while another parameter moves to a value that
        still fails (a context); does each of the candidate's removing values (at most
        three) alone then remove the failure?  ``toggles / contexts`` over all of them."""
        names = {c.param for c in cands}
        for c in cands:
            contexts = [(p, v) for p in [*(x for x in names if x != c.param),
                                         *(s.name for s in spaces if s.name not in names)]
                        for v, t in verdicts.get(p, []) if t.verdict == FAILS][: self.cfg.mask_contexts]
            for p, v in contexts:
                for fix in c.removing[:3]:
                    t = probe.judge({c.param: fix, p: v}, confirm=False)
                    t.param, t.old, t.new, t.context = c.param, c.old, fix, {p: v}
                    rnd.trials.append(t)
                    if t.verdict in (REMOVED, FAILS):
                        c.contexts += 1
                        c.toggles += t.verdict == REMOVED

    def conclude(self, probe: Probe, rnd: Round, report: Report, kind: str) -> list[Candidate]:
        """Examine the probe, rank the candidates and record the named sources.  When the
        layer input holds special values, sanitizing them is one more candidate (the
        input), ranked by the same rule: named first, the input is the trigger."""
        cands = self.examine(probe, rnd)
        clean, what = sanitized(probe.layer_inputs)
        if what:
            t = probe.judge({}, inputs=clean)
            t.param, t.new, t.detail = INPUT, "sanitized", "; ".join(what)
            rnd.trials.append(t)
            if t.verdict == REMOVED:
                layer = probe.spec.layer(probe.target)
                cands.append(Candidate(probe.target, layer.api, INPUT, "special values", "input",
                                       removing=["sanitized"], order=len(cands) + 1000))
        ranked = rank(cands)
        rnd.candidates = [c.to_record() for c in ranked]
        for c in ranked:
            if c.named and c.param == INPUT:
                report.trigger = Trigger(layer=probe.target, sanitized=what)
            elif c.named:
                report.sources.append(Source(c.layer, c.api, c.param, c.old, c.fix, kind, c.best_rate))
        return [c for c in ranked if c.param != INPUT]

    # ---- inconsistency ---------------------------------------------------------------------------
    def rate_table(self, spec: ModelSpec, weights: Weights, inputs: dict[str, np.ndarray],
                   pair: list[str]) -> tuple[list[RateRow], dict[str, np.ndarray]] | str:
        """Per layer (topological order): distance and change rate between the pair, and
        the first backend's layer outputs; or why the model does not run."""
        got = self._layers(spec, weights, inputs, pair)
        failed = [f"{b}: {got[b].message}" for b in pair if isinstance(got[b], WorkerFailure)]
        if failed:
            return "; ".join(failed)
        la, lb = got[pair[0]]["layers"], got[pair[1]]["layers"]
        dists = layer_distances(la, lb)
        rates = change_rates(spec, dists)
        table = [RateRow(layer=n, api=spec.layer(n).api, distance=dists[n], rate=rates[n])
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
            rates = {row.layer: row.rate for row in table}
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
            layer_inputs = {ref: (la[ref] if ref in la else inputs[ref]) for ref in layer.reads}
            probe = Probe(self, spec, weights, target, layer_inputs, Kind.INCONSISTENCY, pair)
            base = self._one_layer_case(spec, weights, target, layer_inputs, {})
            rnd.baseline_rate = self.one_layer_rate(base, pair, enough=self.cfg.t2)
            rnd.baseline = FAILS if rnd.baseline_rate >= self.cfg.t2 else REMOVED
            if rnd.baseline != FAILS:
                continue  # the layer alone agrees: its rate is inherited, nothing to replace
            ranked = self.conclude(probe, rnd, report, Kind.INCONSISTENCY)
            fixed = self._fix(spec, weights, target, ranked, pair)
            if fixed is None:
                continue  # nothing removes it (or no fix builds): move on to later layers
            spec, weights = fixed

    def _fix(self, spec: ModelSpec, weights: Weights, layer: str, ranked: list[Candidate],
             labels: list[str]) -> tuple[ModelSpec, Weights] | None:
        """The model with the best candidate's fix that still builds on every backend."""
        for c in ranked:
            new = spec.copy()
            new.layer(layer).params[c.param] = c.fix
            built = self.ex.build(new)
            if any(isinstance(built.get(b), WorkerFailure) for b in labels):
                continue
            case = TestCase("fix", new, dict(weights), {})
            self.ex.complete_weights(case, self.cfg.rng)
            return new, case.weights
        return None

    # ---- deviation -------------------------------------------------------------------------------
    def localize_deviation(self, case: TestCase, pair: list[str], inputs: dict[str, np.ndarray],
                           layers: list[str], report: Report) -> None:
        """Each layer that deviates on its own input (fed the first backend's layer input)."""
        got = self._layers(case.spec, case.weights, inputs, pair[:1])[pair[0]]
        if isinstance(got, WorkerFailure):
            report.note = f"{pair[0]} does not run the model ({got.message})"
            return
        outs = got["layers"]
        for target in layers[:2]:
            layer = case.spec.layer(target)
            layer_inputs = {r: (outs[r] if r in outs else inputs[r]) for r in layer.reads}
            probe = Probe(self, case.spec, case.weights, target, layer_inputs, Kind.DEVIATION, pair)
            rnd = Round(target, [])
            report.rounds.append(rnd)
            base = probe.judge({})
            rnd.baseline, rnd.baseline_rate = base.verdict, base.rate
            if base.verdict == FAILS:
                self.conclude(probe, rnd, report, Kind.DEVIATION)

    # ---- equivalence -----------------------------------------------------------------------------
    def equivalence_executor(self, rule: str | None) -> Executor:
        """An executor that runs ``rule``'s equivalent model beside each case (no diagnosis)."""
        if rule not in self._equivalence:
            self._equivalence[rule] = Executor(self.pool, diagnose=False, tolerances=self.ex.tolerances,
                                               equivalence=[rule] if rule else [])
        return self._equivalence[rule]

    def localize_equivalence(self, case: TestCase, bad: str, rule: str, inputs: dict[str, np.ndarray],
                             layer: str | None, rewritten: list[str], report: Report) -> None:
        """An ``equivalence`` finding: the layer that differs from its equivalent alone on
        the failing backend (the oracle's ``layer``, else the first rewritten layer whose
        one-layer model and rewrite differ there), then the parameters whose replacement
        makes the two agree."""
        spec, weights = case.spec, case.weights
        got = self._layers(spec, weights, inputs, [bad])[bad]
        if isinstance(got, WorkerFailure):
            report.note = f"{bad} does not run the model ({got.message})"
            return
        outs = got["layers"]

        def probe(name: str) -> Probe:
            feed = {r: (outs[r] if r in outs else inputs[r]) for r in spec.layer(name).reads}
            return Probe(self, spec, weights, name, feed, Kind.EQUIVALENCE, [bad], bad, rule=rule)

        order = spec.topological_order()
        tried = [layer] if layer else [n for n in order if n in set(rewritten)]
        target = None
        for name in tried:
            if probe(name).judge({}).verdict == FAILS:
                target = name
                break
        rnd = Round(target, [])
        report.rounds.append(rnd)
        if target is None:
            report.note = (report.note + "; " if report.note else "") + \
                "no rewritten layer differs from its equivalent alone"
            return
        p = probe(target)
        rnd.baseline = p.judge({}).verdict
        self.conclude(p, rnd, report, Kind.EQUIVALENCE)

    # ---- NaN and crash ---------------------------------------------------------------------------
    def localize_by_replacement(self, case: TestCase, kind: str, bad: str, ref: str | None,
                                inputs: dict[str, np.ndarray], report: Report, first_layer: str | None) -> None:
        """NaN, crash and rejection cases: the first failing layer alone, then the
        parameters whose replacement makes it pass on the failing backend."""
        spec, weights = case.spec, case.weights
        source = ref or bad
        got = self._layers(spec, weights, inputs, [source])[source]
        if isinstance(got, WorkerFailure):
            report.note = f"no backend runs the model to provide layer inputs ({got.message})"
            return
        outs = got["layers"]
        labels = [bad] + ([ref] if ref else [])
        if kind == Kind.NAN:  # feed the failing backend's own layer input
            got_bad = self._layers(spec, weights, inputs, [bad])[bad]
            if isinstance(got_bad, dict):
                outs = got_bad["layers"]
        target = first_layer
        if target is None:  # the first layer that fails alone on the failing backend
            for name in spec.topological_order():
                layer_inputs = {r: (outs[r] if r in outs else inputs[r]) for r in spec.layer(name).reads}
                if Probe(self, spec, weights, name, layer_inputs, kind, labels, bad).judge({}).verdict == FAILS:
                    target = name
                    break
        rnd = Round(target, [])
        report.rounds.append(rnd)
        if target is None:
            report.note = "no single layer reproduces the failure alone"
            return
        layer_inputs = {r: (outs[r] if r in outs else inputs[r]) for r in spec.layer(target).reads}
        probe = Probe(self, spec, weights, target, layer_inputs, kind, labels, bad)
        base = probe.judge({})
        rnd.baseline = base.verdict
        if kind in CRASHES:
            report.error = base.detail or report.error
        if base.verdict != FAILS:
            report.note = f"{target} alone does not reproduce the {kind}"
            return
        self.conclude(probe, rnd, report, kind)


def _missing(ps: ParamSpace) -> bool:
    from audee.localize.onelayer import MISSING

    return ps.default is MISSING


def _first_error(result: Any) -> str:
    for o in result.outcomes.values():
        if o.failure is not None:
            return (o.failure.message or o.failure.kind)[:200]
    return ""
