"""The training level: one training step per backend that trains (``--phase train``,
:mod:`audee.train`) of the cases another level makes (network variants or API-level
models).  A record is a training step's when its ``meta["phase"]`` says so (the registry
decides): it re-runs on :class:`audee.engine.train.TrainExecutor`, its script trains one step
(:mod:`audee.repro.train`), its localizer is :mod:`audee.localize.train`.  Its cases, ids
and provenance are its source level's; a run of it is ``LEVEL.over(source)``.

Special inputs (``special_inputs``) are the training level's own: a training step's loss is
a mean over the batch, so one row holding NaN, an infinity or a value near the dtype's
maximum makes the loss non-finite on every backend, and then every gradient of the batch is
undefined and goes unjudged (the whole step compared on its forward pass alone).  The source
makes its cases without them; each case (the seed case never) then gets
:data:`TRAIN_SPECIAL_KINDS`, the kinds a correct step trains on with a finite loss (zero and
all-equal rows, offsets, tiny and subnormal values, signed zeros; ids out of range), from
its own stream ``(rng, crc32(case id), SPECIAL_STREAM)``, recorded in its row."""
from __future__ import annotations

import json
import tempfile
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from audee.backends.pool import Pool
from audee.cases.case import NONFINITE_SPECIALS
from audee.core.errors import AudeeError
from audee.levels.base import SPECIAL_STREAM, Level, Localized, Pipelined, judging
from audee.mutation import special
from audee.oracle.compute_dtype import consumer_compute_dtypes
from audee.engine.train import TrainExecutor

#: the special kinds a training step's inputs draw: every kind but those that make a correct
#: framework's batch loss non-finite (NaN, infinities, values near the dtype's maximum)
TRAIN_SPECIAL_KINDS = tuple(k for k in special.KINDS if k not in NONFINITE_SPECIALS + ("near_max",))


def without_specials(cfg: Any) -> Any:
    """``cfg`` with ``special_inputs`` 0: what the source level makes its cases with."""
    return cfg.model_copy(update={"special": cfg.special.model_copy(update={"special_inputs": 0.0})})


def train_specials(cases: Iterable[tuple[Any, dict[str, Any]]], cfg: Any
                   ) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Each case of ``cases`` with the training phase's special inputs (module docstring),
    what was done recorded in its row's ``special_inputs``."""
    for case, extra in cases:
        if cfg.special_inputs > 0 and extra.get("variant", 0) >= 0:
            g = np.random.default_rng([cfg.rng, zlib.crc32(case.id.encode()), SPECIAL_STREAM])
            case.inputs, done = special.inject(case.inputs, case.spec.inputs, g, cfg.special_inputs,
                                               TRAIN_SPECIAL_KINDS, masks=case.spec.mask_inputs(),
                                               dtypes=consumer_compute_dtypes(case.spec))
            if done:
                extra = {**extra, "special_inputs": done}
        yield case, extra


class _TrainLoop:
    """The fuzz loop as a source level drives it in the training phase: the settings without
    special inputs, each case given the training phase's on its way to the runner."""

    def __init__(self, loop: Any):
        self._loop = loop
        self.cfg = without_specials(loop.cfg)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loop, name)

    def pipelined(self, cases: Iterable[tuple[Any, dict[str, Any]]]) -> None:
        self._loop.pipelined(train_specials(cases, self._loop.cfg))


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
        return train_specials(self._source().cases(runner, todo, without_specials(cfg), store, context), cfg)

    def drive(self, loop: Any, runner: Any, todo: list[tuple[str, int]], context: dict[str, Any]) -> None:
        self._source().drive(_TrainLoop(loop), runner, todo, context)

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
