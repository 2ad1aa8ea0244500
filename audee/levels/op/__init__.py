"""The op level: one ``keras.ops`` call as data (``audee fuzz --op``, docs/ops.md), ids
``op-<op>-v<i>`` (:mod:`audee.mutation.oplevel`), run by :class:`audee.opexec.OpExecutor`
on the Keras workers, scripted by :func:`audee.repro.ops.write_op_repro`.  Its case record
holds the call (``CaseRecord.op``), no model: nothing to localize."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from audee.backends.pool import Pool
from audee.case import Finding
from audee.errors import AudeeError
from audee.levels.base import SPECIAL_STREAM, Localized, Pipelined, by_api, judging, nonempty
from audee.mutation import special
from audee.opexec import OpExecutor

log = logging.getLogger(__name__)

REFUSAL = ("an op-level case (one keras.ops call) has no layers to localize: its repro script "
           "(audee repro) is the minimal case")


def _undefined() -> dict[str, Any]:
    """Per op, what its contract leaves undefined (the op configs')."""
    from audee.apis import load_op_configs

    return {n: c.undefined for n, c in load_op_configs().items()}


class OpLevel(Pipelined):
    name = "op"
    label = "op"
    settings = ("variants", "invalid_prob", "special_inputs")

    def check(self, cfg: Any) -> None:
        """Model judgements asked of op cases: one line naming the flag."""
        for name, flag, off in (("reference", "--reference", "none"), ("equivalence", "--equivalence", "none"),
                                ("phase", "--phase", "inference")):
            if getattr(cfg, name) != off:  # each judges a model; an op call is none
                raise AudeeError(f"{flag} {getattr(cfg, name)} judges models, not keras.ops calls (--op)", field=flag)

    def case_id(self, target: str, index: int) -> str:
        from audee.mutation.oplevel import op_case_id

        return op_case_id(target, index)

    def indices(self, cfg: Any) -> Sequence[int]:
        return range(cfg.variants)

    def runner(self, pool: Any, cfg: Any) -> OpExecutor:
        ex = OpExecutor(pool, **judging(cfg), undefined=_undefined())
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

    def cases(self, runner: Any, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
        """Each op-level case to run, with its row's provenance: the drawn call, then special
        values in its tensors (``--special-inputs``, their own random stream)."""
        from audee.apis import load_op_configs
        from audee.mutation.apilevel import case_rng
        from audee.mutation.oplevel import generate_op_case, op_case_id, wire_array
        from audee.spec import InputSpec

        configs = context.get("configs") or load_op_configs()
        for op, index in todo:
            case = generate_op_case(op, configs, cfg.rng, index, invalid_prob=cfg.invalid_prob)
            case.id = op_case_id(op, index)
            specs = [InputSpec(n, tuple(a.shape[1:]), str(a.dtype)) for n, a in case.tensors.items()
                     if a.ndim and a.dtype != bool]
            tensors, specials = special.inject({s.name: case.tensors[s.name] for s in specs}, specs,
                                               case_rng(cfg.rng, op, index, stream=SPECIAL_STREAM),
                                               cfg.special_inputs)
            case.tensors.update({n: wire_array(a, case.dtypes[n]) for n, a in tensors.items()})
            bad = next((m for m in case.mutations if m.invalid), None)
            first = next(iter(case.dtypes.values()), None)
            case.meta = {"seed": f"op:{op}", "api": op, "variant": index, "rng": cfg.rng,
                         "mutations": [m.to_json() for m in case.mutations], "invalid": case.invalid,
                         **({"dtype": first} if first else {}), **case.describe(),
                         **({"invalid_param": {"param": bad.param, "value": bad.new}} if bad else {}),
                         **nonempty({"special_inputs": specials})}
            yield case, dict(case.meta)

    def rerun(self, record: Any, *, refs: list[Any], log_dir: Path, timeout: float,
              tie_margin: float | None) -> Any:
        """The call again, judged as recorded."""
        with Pool(refs, log_dir, timeout=timeout) as pool:
            pool.start_or_fail(source=str(record.source))
            return OpExecutor(pool, tolerances=record.tolerances or None, undefined=_undefined()).run(record.op_case())

    def repro_case(self, path: str | Path, record: Any, **options: Any) -> Any:
        """The op per backend, nothing to shrink (:mod:`audee.repro.ops`)."""
        from audee.repro import ReproScript, default_name, pick_finding
        from audee.repro.ops import write_op_repro
        from audee.store.runstore import RunStore

        finding, out, name = options.get("finding"), options.get("out"), options.get("name")
        f = pick_finding(record, finding)
        index = finding if finding is not None else [Finding.from_json(x).to_json() for x in
                                                     record.verdict["findings"]].index(f.to_json())
        out_dir = Path(out) if out is not None else RunStore(Path(path).resolve().parent.parent).repro_dir
        script = write_op_repro(record, out_dir, name or default_name(record, f), index)
        return ReproScript(script, script, f.kind, list(f.backends), "op", None, [])

    def bug_repro(self, record: Any, out_dir: Path, name: str, pool: Any, index: int) -> Path:
        from audee.repro.ops import write_op_repro

        script = write_op_repro(record, out_dir, name, index)
        log.info("repro script %s: keras.ops.%s", script, record.op["op"])
        return script

    def localize(self, path: str | Path, cfg: Any, **options: Any) -> Localized:
        raise AudeeError(REFUSAL, source=str(path))

    def localize_refusal(self) -> str | None:
        return REFUSAL

    def summary(self, rows: Iterable[Any]) -> dict[str, Any]:
        rows = list(rows)
        return {"by_api": by_api(rows)} if any(r.api is not None for r in rows) else {}


LEVEL = OpLevel()
