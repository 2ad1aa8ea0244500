"""What the call levels share (the op level, the activation level): a case is one function
call as data (:class:`audee.cases.opcase.OpCase`), run by :class:`audee.engine.opexec.OpExecutor` on the
Keras workers, judged by the op oracles, re-run and scripted as a call
(:func:`audee.repro.ops.write_op_repro`); its case record holds the call
(``CaseRecord.op``), no model: nothing to localize.  A call level adds its name, its ids and
its cases."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Sequence

from audee.backends.pool import Pool
from audee.cases.case import Finding
from audee.core.errors import AudeeError
from audee.levels.base import Localized, Pipelined, by_api, judging
from audee.engine.opexec import OpExecutor
from audee.reference.run import Reference
from audee.settings import DEFAULT_EQUIVALENCE

log = logging.getLogger(__name__)

REFUSAL = ("an op-level case (one keras.ops call) has no layers to localize: its repro script "
           "(audee repro) is the minimal case")


def _undefined() -> dict[str, Any]:
    """Per op, what its contract leaves undefined (the op configs')."""
    from audee.apis import load_op_configs

    return {n: c.undefined for n, c in load_op_configs().items()}


def refuse_model_judgements(cfg: Any, *, phase: bool = True) -> None:
    """Model judgements asked of call cases (equivalent models other than the default's, and
    unless ``phase`` is False a training phase): one line naming the flag.  The default rules
    apply where a case has the layer they rewrite; an op call has none, as most models do."""
    asked = (("equivalence", "--equivalence", ("none", DEFAULT_EQUIVALENCE)),
             *((("phase", "--phase", ("inference",)),) if phase else ()))
    for name, flag, off in asked:
        if getattr(cfg, name) not in off:  # each judges a model; an op call is none
            raise AudeeError(f"{flag} {getattr(cfg, name)} judges models, not keras.ops calls (--op)", field=flag)


class CallLevel(Pipelined):
    #: what runs and judges the level's cases (the gradient phase's: audee.engine.opgrad.OpGradExecutor)
    executor: type[OpExecutor] = OpExecutor

    def check(self, cfg: Any) -> None:
        """Model judgements asked of op cases: one line naming the flag (``--reference float64``
        judges a call too: the call on its tensors widened to float64; ``--phase train`` of a
        call is its gradient phase: the registry runs the ``opgrad`` level instead)."""
        refuse_model_judgements(cfg)

    def indices(self, cfg: Any) -> Sequence[int]:
        return range(cfg.variants)

    def runner(self, pool: Any, cfg: Any) -> OpExecutor:
        ex = self.executor(pool, **judging(cfg), undefined=_undefined(), reference=Reference.from_settings(cfg))
        if not pool.op_labels:  # no row can be written without a backend: one line, not a results-row traceback
            raise AudeeError(f"no backend of the run calls keras.ops functions (--op needs a Keras backend: "
                             f"tensorflow, torch, jax or their modes; got {', '.join(pool.labels)})",
                             field="--backends")
        models_only = [label for label in pool.labels if label not in pool.op_labels]
        if models_only:
            log.info("op stage: %s run models only (no keras.ops calls): left out of op cases", ", ".join(models_only))
        if len(pool.op_labels) < 2:
            log.warning("op stage: %d backend runs keras.ops calls: nothing to compare", len(pool.op_labels))
        return ex

    def rerun(self, record: Any, *, refs: list[Any], log_dir: Path, timeout: float,
              tie_margin: float | None) -> Any:
        """The call again, judged as recorded (beside its float64 reference, if it had one)."""
        reference = Reference.recorded(record.meta)
        with Pool(refs, log_dir, timeout=timeout, reference=reference.workers(refs) if reference else []) as pool:
            pool.start_or_fail(source=str(record.source))
            return self.executor(pool, tolerances=record.tolerances or None, undefined=_undefined(),
                                 reference=reference).run(record.op_case())

    def repro_case(self, path: str | Path, record: Any, **options: Any) -> Any:
        """The op per backend, nothing to shrink (:mod:`audee.repro.ops`)."""
        from audee.repro import ReproScript, default_name, pick_finding
        from audee.store.runstore import RunStore

        finding, out, name = options.get("finding"), options.get("out"), options.get("name")
        f = pick_finding(record, finding)
        index = finding if finding is not None else [Finding.from_json(x).to_json() for x in
                                                     record.verdict["findings"]].index(f.to_json())
        out_dir = Path(out) if out is not None else RunStore(Path(path).resolve().parent.parent).repro_dir
        script = self.write_script(record, out_dir, name or default_name(record, f), index)
        return ReproScript(script, script, f.kind, list(f.backends), "op", None, [])

    def write_script(self, record: Any, out_dir: Path, name: str, index: int) -> Path:
        """The standalone script of the record's finding ``index`` (:func:`audee.repro.ops.write_op_repro`)."""
        from audee.repro.ops import write_op_repro

        return write_op_repro(record, out_dir, name, index)

    def bug_repro(self, record: Any, out_dir: Path, name: str, pool: Any, index: int) -> Path:
        script = self.write_script(record, out_dir, name, index)
        log.info("repro script %s: keras.ops.%s", script, record.op["op"])
        return script

    def localize(self, path: str | Path, cfg: Any, **options: Any) -> Localized:
        raise AudeeError(REFUSAL, source=str(path))

    def localize_refusal(self) -> str | None:
        return REFUSAL

    def summary(self, rows: Iterable[Any]) -> dict[str, Any]:
        rows = list(rows)
        return {"by_api": by_api(rows)} if any(r.api is not None for r in rows) else {}
