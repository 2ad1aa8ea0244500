"""Localize a training-phase finding to a layer and a parameter.

The layer comes from the per-layer judgement (:mod:`audee.engine.train`): the layer whose
gradient (or output) deviates on its own input, or the output layer with the loss, or the
layer whose update is off the Keras rule.  The parameter comes from Algorithm 2's
localize-fix idea on that layer alone, trained one step: each constructor parameter of
the layer (:func:`audee.localize.onelayer.param_spaces`: its API config's values, the
Keras default first) is replaced by each alternative value, the one-layer model is
trained on the pair again, fed backend ``a``'s training-mode input to it, and the values
that bring it back within tolerance are counted.  Candidates are ranked by the share of
their values that remove the deviation (then the Keras default's removing it), as the
inference localizer's evidence does (:mod:`audee.localize.evidence`).

``audee localize CASE.pkl`` dispatches here for a case file whose ``phase`` is ``train``.
"""
from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from audee.backends.pool import Pool
from audee.backends.registry import BackendRef
from audee.cases.case import Kind, TestCase
from audee.cases.kinds import TRAINING_FAILURES
from audee.localize.onelayer import param_spaces
from audee.settings import TIMEOUT_S
from audee.cases.spec import one_layer_spec
from audee.store.caserecord import CaseRecord
from audee.engine.train import LOSS_CHECK, TrainExecutor
from audee.train.setup import TrainSetup, train_spec
from audee.cases.weights import adapt_weights


@dataclass
class TrainCandidate:
    """One parameter of the localized layer: the values tried and their one-layer scores."""

    param: str
    current: Any
    default: Any
    scores: dict[str, float] = field(default_factory=dict)   # repr(value) -> score (inf: would not build)
    removing: list[str] = field(default_factory=list)         # the values that bring it within tolerance

    @property
    def share(self) -> float:
        tried = [v for v in self.scores.values() if np.isfinite(v)]
        return len(self.removing) / len(tried) if tried else 0.0


@dataclass
class TrainLocalization:
    case: str
    kind: str
    backends: list[str]
    quantity: str | None = None
    layer: str | None = None
    api: str | None = None
    loss: str | None = None
    baseline: float | None = None
    reproduced: bool = False
    candidates: list[TrainCandidate] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["candidates"] = [{**asdict(c), "share": round(c.share, 3)} for c in self.candidates]
        return d

    def render(self, top_k: int = 3) -> str:
        lines = [f"case {self.case}: {self.kind} on {', '.join(self.backends)}"
                 + (f" ({self.quantity})" if self.quantity else "")]
        if not self.reproduced:
            lines.append("  the case no longer fails on these backends")
            return "\n".join(lines)
        lines.append(f"  layer: {self.layer or '?'} ({self.api or '?'})" + (f", loss {self.loss}" if self.loss else "")
                     + (f"; alone out of tolerance by {self.baseline:.3g}" if self.baseline is not None else ""))
        for c in self.candidates[:top_k]:
            lines.append(f"  {c.param}={c.current!r}: {len(c.removing)} of {len(c.scores)} values remove it"
                         + (f" ({', '.join(c.removing)})" if c.removing else ""))
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)


def localize_train_case(path: str | Path, *, backends: list[BackendRef] | None = None,
                        allowed_plugins: Iterable[str] = (), timeout: float = TIMEOUT_S, max_values: int = 4,
                        log_dir: Path | None = None, apis: dict[str, Any] | None = None) -> TrainLocalization:
    """Train the case again, pick its training-phase failure, and localize it (module docstring)."""
    from audee.apis import load_api_configs

    record = CaseRecord.from_file(path)
    case = record.test_case()
    refs = backends or record.backend_refs(allowed_plugins=allowed_plugins)
    with tempfile.TemporaryDirectory(prefix="audee-localize-") as tmp:
        with Pool(refs, log_dir or Path(tmp), timeout=timeout) as pool:
            pool.start_or_fail(logs=log_dir, source=str(path))
            return localize_train(pool, record, case, apis or load_api_configs(), max_values)


def localize_train(pool: Pool, record: CaseRecord, case: TestCase, apis: dict[str, Any],
                   max_values: int = 4) -> TrainLocalization:
    ex = TrainExecutor(pool, tie_margin=record.tie_margin, tolerances=record.tolerances or None)
    now = ex.run(case)
    found = [f for f in now.verdict.findings if f.kind in TRAINING_FAILURES and f.is_failure]
    pairwise = [f for f in found if len(f.backends) == 2]
    main = (pairwise or found or [None])[0]
    if main is None:
        return TrainLocalization(case.id, "none", [])
    d = main.detail
    out = TrainLocalization(case.id, main.kind, list(main.backends), getattr(d, "quantity", None), d.layer,
                            reproduced=True)
    setup = TrainSetup.from_json(now.train)
    ts = train_spec(case.spec)
    if out.layer is None or out.layer not in ts.spec.layer_names():
        out.note = "no layer to localize (the finding names none)"
        return out
    ls = ts.spec.layer(out.layer)
    out.api = ls.api
    if main.kind != Kind.TRAIN_DEVIATION or len(main.backends) != 2:
        out.note = "parameters are tried for a pair's deviation only; the layer is the finding's"
        return out
    loss_own = bool(d.loss_own) and out.layer == ts.spec.output and not d.own_layers
    alone_setup = setup if loss_own else setup.probe()
    out.loss = setup.loss if loss_own else None
    once = TrainSetup(setup.loss, setup.optimizer, setup.learning_rate, 1, setup.target_seed, setup.from_logits)
    got = ex._train_on(ts.spec, case.weights, case.inputs, once, list(main.backends), layers=True)
    a = main.backends[0]
    if got.get(a) is None or not got[a].ok:
        out.note = f"{a} no longer trains the case"
        return out
    refs = ls.reads
    fed = {r: (got[a].layers[r] if r in got[a].layers else case.inputs[r]) for r in refs}
    keys = ("loss", "output", "gradient", "input_gradient") if loss_own else ("output", "gradient", "input_gradient")
    base = one_layer_spec(ts.spec, out.layer, fed)
    weights = {out.layer: case.weights[out.layer]} if out.layer in case.weights else {}
    first = ex._alone(base, weights, fed, alone_setup, list(main.backends), keys)
    out.baseline = None if first is None else first.entry.score
    if first is None or first.entry.score <= 1.0:
        out.note = "the layer alone is within tolerance: nothing to localize among its parameters" + \
            (f" ({LOSS_CHECK} judged)" if loss_own else "")
        return out
    for space in param_spaces(ls, apis.get(ls.api), max_values):
        c = TrainCandidate(space.name, _plain(space.current), _plain(space.default))
        for value in space.values:
            try:
                spec1 = one_layer_spec(ts.spec, out.layer, fed, override={space.name: value})
            except Exception:  # noqa: BLE001 - a value the spec refuses is not tried
                continue
            w1 = _weights_for(ex, spec1, weights, out.layer)
            score = None if w1 is None else ex._alone(spec1, w1, fed, alone_setup, list(main.backends), keys)
            c.scores[repr(value)] = float("inf") if score is None else float(score.entry.score)
            if score is not None and score.entry.score <= 1.0:
                c.removing.append(repr(value))
        if c.scores:
            out.candidates.append(c)
    out.candidates.sort(key=lambda c: (-c.share, -len(c.removing), c.param))
    return out


def _weights_for(ex: TrainExecutor, spec1: Any, weights: dict, layer: str) -> dict | None:
    """The case's weights for the layer when they still fit it, else fresh ones of its
    new shapes (a changed ``units``); None when no backend builds the layer so."""
    shapes = ex.shapes(spec1)
    if shapes is None:
        return None
    want = [tuple(s) for _, s in shapes.get(layer, [])]
    if [tuple(np.shape(w)) for w in weights.get(layer, [])] == want:
        return weights
    return adapt_weights({}, shapes, 7)


def _plain(v: Any) -> Any:
    return v if isinstance(v, (str, int, float, bool, list, dict, type(None))) else repr(v)


__all__ = ["TrainCandidate", "TrainLocalization", "localize_train", "localize_train_case"]
