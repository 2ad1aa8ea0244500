"""The API level: small models around one layer API at a time (``audee fuzz --api``), ids
``api-<API>-v<i>`` from the stream ``(rng, crc32(API), i)`` (:mod:`audee.mutation.apilevel`);
``--pack K`` runs K cases per build (:mod:`audee.engine.packed`)."""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

from audee.backends.info import max_steps
from audee.cases.case import TestCase
from audee.levels.base import SPECIAL_STREAM, by_api, nonempty, unbuildable
from audee.levels.models import ModelLevel
from audee.mutation import special
from audee.oracle.compute_dtype import consumer_compute_dtypes

API_META = ("dtype", "data_format", "rank", "input_shapes", "adapters", "params", "derived", "invalid_param",
            "redraws", "build_error")


class ApiLevel(ModelLevel):
    name = "api"
    label = "API"
    settings = ("variants", "batch", "invalid_prob", "call_training", "call_mask", "call_causal", "dtypes", "max_redraws",
                "special_inputs", "pack", "refusal_memo")

    def case_id(self, target: str, index: int) -> str:
        from audee.mutation.apilevel import case_id

        return case_id(target, index)

    def indices(self, cfg: Any) -> Sequence[int]:
        return range(cfg.variants)

    def target_names(self) -> Sequence[str]:
        from audee.apis import load_api_configs

        return list(load_api_configs())

    def runner(self, pool: Any, cfg: Any) -> Any:
        """The model levels' executor, remembering converters' explicit refusals of an API and
        dtype policy (``refusal_memo``; :mod:`audee.engine.refusals`) unless cases are packed."""
        from audee.engine.refusals import RefusalMemo

        ex = super().runner(pool, cfg)
        if cfg.api.refusal_memo == "on" and cfg.api.pack == 1:
            ex.refusals = RefusalMemo()
        return ex

    def drive(self, loop: Any, runner: Any, todo: list[tuple[str, int]], context: dict[str, Any]) -> None:
        from audee.apis import load_api_configs

        configs = load_api_configs()
        memo = getattr(runner, "refusals", None)  # the training phase's runner has none
        if memo is not None:
            memo.restore(loop.store.rows())  # a resumed run skips what it skipped before
        # --pack K > 1 runs K cases per build (audee.engine.packed: a planner stands in for the executor
        # while cases are made; rows and case files as an unpacked run's, timings apart)
        if loop.cfg.pack > 1:
            from audee.engine.packed import run_packed

            for result, extra in run_packed(runner, todo, lambda planner, part: self.cases(
                    planner, part, loop.cfg, loop.store, {"configs": configs}), loop.cfg.pack):
                loop.record(result, extra)
            return
        loop.pipelined(self.cases(runner, todo, loop.cfg, loop.store, {"configs": configs}))

    def cases(self, runner: Any, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[TestCase, dict[str, Any]]]:
        """Each API-level case to run, with its row's provenance, made when asked for."""
        from audee.apis import load_api_configs
        from audee.mutation.apilevel import case_id, case_rng, cast_weights, generate_case

        configs = context.get("configs") or load_api_configs()
        steps = max_steps(b.label for b in cfg.backends)  # a backend that unrolls recurrent loops: short sequences
        validate = unbuildable(runner)
        dtypes = cfg.dtype_weights()
        for api, index in todo:
            got = generate_case(api, configs, cfg.rng, index, batch=cfg.batch, invalid_prob=cfg.invalid_prob,
                                call_training=cfg.call_training, call_mask=cfg.call_mask, call_causal=cfg.call_causal,
                                dtypes=dtypes, validate=validate, max_redraws=cfg.max_redraws, max_steps=steps)
            cid = case_id(api, index)
            store.write_variant(cid, got.spec)
            inputs, specials = special.inject(got.inputs, got.spec.inputs,
                                              case_rng(cfg.rng, api, index, stream=SPECIAL_STREAM),
                                              cfg.special_inputs, masks=got.spec.mask_inputs(),
                                              dtypes=consumer_compute_dtypes(got.spec))
            case = TestCase(cid, got.spec, {}, inputs)
            weight_seed = int(case_rng(cfg.rng, api, index, stream=2).integers(2 ** 31))
            runner.complete_weights(case, weight_seed)
            case.weights = cast_weights(case.weights, got.meta["dtype"])
            extra = {"seed": f"api:{api}", "api": api, "variant": index, "rng": cfg.rng,
                     "mutations": [m.to_json() for m in got.mutations], "weight_seed": weight_seed,
                     "invalid": got.invalid, **{k: got.meta[k] for k in API_META if k in got.meta},
                     **nonempty({"special_inputs": specials})}
            yield case, extra

    def summary(self, rows: Iterable[Any]) -> dict[str, Any]:
        rows = list(rows)
        return {"by_api": by_api(rows)} if any(r.api is not None for r in rows) else {}


LEVEL = ApiLevel()
