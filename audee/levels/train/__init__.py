"""The training level: one training step per backend that trains (``--phase train``,
:mod:`audee.train`) of the cases another level makes (network variants or API-level
models).  A record is a training step's when its ``meta["phase"]`` says so (the registry
decides): it re-runs on :class:`audee.engine.train.TrainExecutor`, its script trains one step
(:mod:`audee.repro.train`), its localizer is :mod:`audee.localize.train`.  Its cases, ids
and provenance are its source level's; a run of it is ``LEVEL.over(source)``."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

from audee.backends.pool import Pool
from audee.core.errors import AudeeError
from audee.levels.base import Level, Localized, Pipelined, judging
from audee.engine.train import TrainExecutor


class TrainLevel(Pipelined):
    name = "train"
    settings = ("losses", "optimizers", "learning_rate", "steps")

    def __init__(self, source: Level | None = None):
        self.source = source  # the level whose cases are trained (a run's; None for a record's)

    @property
    def label(self) -> str:
        return getattr(self.source, "label", "network")

    def over(self, source: Level) -> "TrainLevel":
        """This level over ``source``'s cases (a fuzz run's)."""
        return TrainLevel(source)

    def _source(self) -> Level:
        if self.source is None:
            raise ValueError("the training level makes no cases of its own: run it over a source level (over())")
        return self.source

    def check(self, cfg: Any) -> None:
        self._source().check(cfg)  # what its source refuses (an op call trains nothing)

    def case_id(self, target: str, index: int) -> str:
        return self._source().case_id(target, index)

    def indices(self, cfg: Any) -> Sequence[int]:
        return self._source().indices(cfg)

    def cases(self, runner: Any, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
        return self._source().cases(runner, todo, cfg, store, context)

    def drive(self, loop: Any, runner: Any, todo: list[tuple[str, int]], context: dict[str, Any]) -> None:
        self._source().drive(loop, runner, todo, context)

    def searcher(self) -> Any:
        """The training phase's GA: the gradient-distance fitness (:mod:`audee.search.train`)."""
        from audee.search.train import run_train_searches

        return run_train_searches

    def runner(self, pool: Any, cfg: Any) -> TrainExecutor:
        ex = TrainExecutor(pool, **judging(cfg), losses=cfg.loss_weights(), optimizers=cfg.optimizer_weights(),
                           learning_rate=cfg.learning_rate, steps=cfg.steps, rng=cfg.rng)
        if not ex.trainers:  # no row can be written without a backend: one line, not a results-row traceback
            why = "; ".join(f"{b}: {w}" for b, w in ex.support().items())
            raise AudeeError(f"no backend of the run trains (--phase train needs a Keras backend; {why})",
                             field="--backends")
        return ex

    def rerun(self, record: Any, *, refs: list[Any], log_dir: Path, timeout: float,
              tie_margin: float | None) -> Any:
        """Its recorded setup again (the case's meta), on the trainers."""
        from audee.repro.rerun import rerun_model

        return rerun_model(record, refs=refs, log_dir=log_dir, timeout=timeout, tie_margin=tie_margin,
                           runner=lambda pool, tie, tolerances: TrainExecutor(pool, tie_margin=tie,
                                                                              tolerances=tolerances))

    def repro_case(self, path: str | Path, record: Any, **options: Any) -> Any:
        """A script that trains one step, written on the case's workers (``audee repro`` then
        runs it as any other)."""
        from audee.repro.train import write_train_repro

        out = Path(options["out"]) if options.get("out") else Path(path).resolve().parent.parent / "repro"
        refs = options.get("backends") or record.backend_refs(allowed_plugins=options.get("allowed_plugins", ()))
        with tempfile.TemporaryDirectory(prefix="audee-repro-") as tmp:
            with Pool(refs, Path(tmp)) as pool:
                pool.start_or_fail(source=str(path))
                return write_train_repro(record, out, options.get("name") or f"{record.id}-train", pool,
                                         options.get("finding"))

    def bug_repro(self, record: Any, out_dir: Path, name: str, pool: Any, index: int) -> Path:
        from audee.repro.train import write_train_repro

        return write_train_repro(record, out_dir, name, pool, index).script

    def localize(self, path: str | Path, cfg: Any, **options: Any) -> Localized:
        """The layer from the per-layer judgement, the parameter by Algorithm 2's idea on it
        alone (:func:`audee.localize.train.localize_train_case`)."""
        from audee.localize.train import localize_train_case

        found = localize_train_case(path, backends=options.get("backends"),
                                    allowed_plugins=options.get("allowed_plugins", ()),
                                    timeout=options["timeout"], max_values=cfg.max_values)
        doc = json.loads(json.dumps(found.to_json(), default=str))
        return Localized(doc, found.render(cfg.top_k), found.reproduced, bool(found.layer))


LEVEL = TrainLevel()
