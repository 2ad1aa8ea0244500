"""The gradient phase of the call levels (``audee fuzz --op ... --phase train``, and
``--activation``): each case of its source level (one ``keras.ops`` or ``keras.activations``
call) is called and differentiated on every Keras backend, a drawn cotangent pulled back
through it (:mod:`audee.engine.opgrad`), the outputs and the gradient of each floating tensor
argument judged by the op oracles' rules (:mod:`audee.oracle.opgrad`).

Why a level of its own, and not the training level over the op level: a call has no model,
loss, optimizer or update, so nothing of :class:`audee.levels.train.TrainLevel`'s runner,
re-run, script or localizer applies, while everything of the call levels' does (their
cases, ids, oracles, conditioning, case records and the refusal to localize).  It is a call
level with another executor and another script; the registry picks it for a record of phase
``train`` that holds a call, and for ``--phase train`` over a call level (``Entry.call``),
so no command asks what kind of case it holds.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence

from audee.levels.base import Level
from audee.levels.calls import CallLevel, refuse_model_judgements
from audee.engine.opgrad import GRADIENT, OpGradExecutor

__all__ = ["GRADIENT_STREAM", "LEVEL", "OpGradLevel"]

GRADIENT_STREAM = 11  # the random stream of a case's cotangent seed, apart from its call's and its special values'


class OpGradLevel(CallLevel):
    name = "opgrad"
    executor = OpGradExecutor

    def __init__(self, source: Level | None = None):
        self.source = source  # the call level whose cases are differentiated (a run's; None for a record's)

    @property
    def label(self) -> str:
        return getattr(self.source, "label", "op")

    @property
    def settings(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(getattr(self.source, "settings", ()))

    def over(self, source: Level) -> "OpGradLevel":
        """This level over ``source``'s calls (a fuzz run's)."""
        return OpGradLevel(source)

    def _source(self) -> Level:
        if self.source is None:
            raise ValueError("the gradient phase makes no cases of its own: run it over a call level (over())")
        return self.source

    def check(self, cfg: Any) -> None:
        """The call levels' refusals but the phase: ``--phase train`` is what this level is."""
        refuse_model_judgements(cfg, phase=False)

    def case_id(self, target: str, index: int) -> str:
        return self._source().case_id(target, index)

    def target_names(self) -> Sequence[str]:
        return self._source().target_names()

    def indices(self, cfg: Any) -> Sequence[int]:
        return self._source().indices(cfg)

    def cases(self, runner: Any, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
        """The source level's cases, each with its cotangent seed drawn from the case's own
        stream (``(rng, crc32(target), index)``, :data:`GRADIENT_STREAM`): the same call, the
        same cotangent, on every backend and in every re-run."""
        from audee.mutation.apilevel import case_rng

        made = self._source().cases(runner, todo, cfg, store, context)
        for (target, index), (case, meta) in zip(todo, made):
            seed = int(case_rng(cfg.rng, target, index, stream=GRADIENT_STREAM).integers(2 ** 31 - 1))
            case.meta = {**case.meta, "train": {GRADIENT: {"seed": seed}}}
            yield case, {**meta, "train": {GRADIENT: {"seed": seed}}}

    def write_script(self, record: Any, out_dir: Path, name: str, index: int) -> Path:
        """A script that differentiates the call on each backend (:mod:`audee.repro.opgrad`)."""
        from audee.repro.opgrad import write_opgrad_repro

        return write_opgrad_repro(record, out_dir, name, index)


LEVEL = OpGradLevel()
