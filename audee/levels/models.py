"""What the two model levels (network variants and API-level models) share: a case is a
model run by :class:`audee.engine.execute.Executor`, re-run by :func:`audee.repro.rerun.rerun_model`,
scripted by :func:`audee.repro.write_repro` and localized by Algorithm 2
(:func:`audee.localize.run.localize_case`).  The training level reuses the re-run with its
own runner."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from audee.engine.execute import Executor
from audee.levels.base import Localized, Pipelined, judging
from audee.localize.run import localize_case, localized, render
from audee.repro import repro_model_case, write_repro
from audee.repro.rerun import rerun_model
from audee.reference.run import Reference

log = logging.getLogger(__name__)


class ModelLevel(Pipelined):
    """The model levels' runner, re-run, scripts and localizer."""

    def runner(self, pool: Any, cfg: Any) -> Executor:
        return Executor(pool, **judging(cfg), equivalence=cfg.equivalence_rules(),
                        reference=Reference.from_settings(cfg))

    def rerun(self, record: Any, *, refs: list[Any], log_dir: Path, timeout: float,
              tie_margin: float | None) -> Any:
        return rerun_model(record, refs=refs, log_dir=log_dir, timeout=timeout, tie_margin=tie_margin)

    def repro_case(self, path: str | Path, record: Any, **options: Any) -> Any:
        return repro_model_case(path, record, **options)

    def bug_repro(self, record: Any, out_dir: Path, name: str, pool: Any, index: int) -> Path:
        script = write_repro(record, out_dir, name, pool=pool, finding=index)
        log.info("repro script %s: %s", script.script, script.describe())
        return script.script

    def localize(self, path: str | Path, cfg: Any, **options: Any) -> Localized:
        report = localize_case(path, cfg, **options)
        return Localized(report.to_json(), render(report, top_k=cfg.top_k), report.reproduced, localized(report))
