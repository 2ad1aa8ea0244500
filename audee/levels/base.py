"""What a case level is to the rest of audee: the :class:`Level` protocol every level
package implements, and the :class:`Runner` protocol its executor implements.

Plain typing, no framework: the executors (``execute.Executor``, ``opexec.OpExecutor``,
``train.run.TrainExecutor``) declare :class:`Runner`, and the fuzz loop, ``reproduce``,
``repro``, ``localize`` and the CLI hold a :class:`Level` found through the registry
(:mod:`audee.levels`) instead of inspecting a case to choose a path.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Protocol, Sequence


class Runner(Protocol):
    """Runs one level's test cases on a pool: ``submit`` sends a case to every worker and
    returns at once, ``finish`` judges what came back, ``run`` is both.  The fuzz loop keeps
    one case in flight through ``submit``/``finish`` whatever the level."""

    pool: Any

    def submit(self, case: Any) -> Any:
        """Send ``case`` to the workers; its answers are taken by :meth:`finish`."""
        ...

    def finish(self, submitted: Any) -> Any:
        """The judged result of a submitted case (``.case``, ``.verdict``, ``.outcomes``)."""
        ...

    def run(self, case: Any) -> Any:
        """``finish(submit(case))``."""
        ...


@dataclass
class Localized:
    """A level's localization of a case, as ``audee localize`` prints and exits on it."""

    doc: dict[str, Any]   # the JSON form (``--json``)
    text: str             # the human form, top candidates first
    reproduced: bool      # the failure showed up again
    localized: bool       # a layer (and parameter) was named


class Level(Protocol):
    """One case level (network variants, API-level models, ``keras.ops`` calls, training
    steps): everything audee does differently per level, in one object.  A fuzz run asks it
    for its runner and its cases (:class:`audee.fuzz.FuzzLoop`); the commands ask it, through
    :func:`audee.levels.level_of`, how a recorded case is re-run, scripted and localized."""

    name: str
    settings: tuple[str, ...]  # the FuzzSettings fields it reads beyond the run's common ones

    def check(self, cfg: Any) -> None:
        """Refuse settings this level cannot honour (one error line naming the flag)."""
        ...

    def case_id(self, target: str, index: int) -> str:
        """The id of case ``index`` of ``target`` (a seed, an API, an op): resume skips ids
        already in the results table."""
        ...

    def target_names(self) -> Sequence[str]:
        """The targets a run may name (a level its registry entry gives a flag): configured
        APIs, ops, ``keras.activations`` names."""
        ...

    def indices(self, cfg: Any) -> Sequence[int]:
        """The case indices a run makes per target."""
        ...

    def runner(self, pool: Any, cfg: Any) -> Runner:
        """The executor that runs and judges this level's cases on ``pool``."""
        ...

    def cases(self, runner: Runner, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
        """Each case of ``todo`` (target, index) with its row's provenance, made when asked for."""
        ...

    def drive(self, loop: Any, runner: Runner, todo: list[tuple[str, int]], context: dict[str, Any]) -> None:
        """Run ``todo`` through ``loop`` (pipelined; a level may run its cases otherwise)."""
        ...

    def searcher(self) -> Any:
        """The search stage's function (``run_searches``'s signature), or None."""
        ...

    def rerun(self, record: Any, *, refs: list[Any], log_dir: Path, timeout: float,
              tie_margin: float | None) -> Any:
        """A recorded case run and judged again as it was recorded (``audee reproduce``)."""
        ...

    def repro_case(self, path: str | Path, record: Any, **options: Any) -> Any:
        """``audee repro``: the case file's standalone script (an :class:`audee.repro.ReproScript`)."""
        ...

    def bug_repro(self, record: Any, out_dir: Path, name: str, pool: Any, index: int) -> Path:
        """The script of a run's unique bug (its finding ``index``), on the run's workers."""
        ...

    def localize(self, path: str | Path, cfg: Any, **options: Any) -> Localized:
        """``audee localize``: the layer (and parameter) behind the case's main failure."""
        ...

    def localize_refusal(self) -> str | None:
        """Why Algorithm 2 cannot localize this level's cases (None: it can)."""
        ...

    def summary(self, rows: Iterable[Any]) -> dict[str, Any]:
        """What a run summary adds for this level's rows (``by_api``)."""
        ...


SPECIAL_STREAM = 7  # the random stream of a case's special-value inputs, apart from its model's


def judging(cfg: Any) -> dict[str, Any]:
    """What a run's cases are judged with, read from its settings once: the runner's
    keywords, and what each case file records it was judged with (its ``judging`` section)."""
    return {"tie_margin": cfg.judging.tie_margin, "tolerances": cfg.judging.tolerances.table()}


def nonempty(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its empty values (a row keeps only what a case has)."""
    return {k: v for k, v in d.items() if v not in (None, [], {})}


def unbuildable(runner: Any) -> Any:
    """The redraw test of generated models: the error of a spec no backend can build
    (only asked for valid draws; see audee.mutation), else None."""
    def test(spec: Any) -> str | None:
        built = runner.build(spec)
        errors = [g for g in built.values() if not isinstance(g, dict)]
        if len(errors) == len(built) and all(not e.hard for e in errors):
            return errors[0].message
        return None
    return test


def by_api(rows: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per API of an API-level (or op-level) run: cases, failing cases, cases by finding kind."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.api is None:
            continue
        a = out.setdefault(r.api, {"cases": 0, "failing": 0, "by_kind": {}})
        a["cases"] += 1
        a["failing"] += int(r.status == "fail")
        for k in r.kinds:
            a["by_kind"][k] = a["by_kind"].get(k, 0) + 1
    return dict(sorted(out.items()))


class Pipelined:
    """What most levels share: no settings to refuse, cases run one step apart through the
    fuzz loop, no search stage, no summary extras."""

    def check(self, cfg: Any) -> None:
        return None

    def drive(self, loop: Any, runner: Runner, todo: list[tuple[str, int]], context: dict[str, Any]) -> None:
        loop.pipelined(self.cases(runner, todo, loop.cfg, loop.store, context))  # type: ignore[attr-defined]

    def searcher(self) -> Any:
        return None

    def localize_refusal(self) -> str | None:
        return None

    def summary(self, rows: Iterable[Any]) -> dict[str, Any]:
        return {}
