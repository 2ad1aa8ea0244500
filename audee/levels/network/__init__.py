"""The network level: a seed and its variants (``audee fuzz --seed``), ids
``<seed>-seed`` and ``<seed>-v<i>``; variant ``i`` drawn from the stream ``(rng, i)``
(:func:`audee.mutation.network.mutate_spec`), special input values from its own stream."""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from audee.cases.case import TestCase
from audee.engine.execute import seed_batch
from audee.levels.base import SPECIAL_STREAM, nonempty, unbuildable
from audee.levels.models import ModelLevel
from audee.mutation import special
from audee.oracle.compute_dtype import consumer_compute_dtypes


class NetworkLevel(ModelLevel):
    name = "network"
    label = "network"
    settings = ("variants", "batch", "layer_rate", "invalid_prob", "max_layers", "operators", "max_redraws",
                "special_inputs")

    def case_id(self, target: str, index: int) -> str:
        return f"{target}-seed" if index < 0 else f"{target}-v{index:05d}"

    def indices(self, cfg: Any) -> Sequence[int]:
        return range(-1, cfg.variants)  # the seed itself, then its variants

    def drive(self, loop: Any, runner: Any, todo: list[tuple[str, int]], context: dict[str, Any]) -> None:
        from audee.apis import load_api_configs
        from audee.mutation.network import log_unconfigured

        apis = load_api_configs()
        log_unconfigured(context["seed"].spec, apis)  # layers without an API config run unmutated: one line per API
        loop.pipelined(self.cases(runner, todo, loop.cfg, loop.store, {**context, "apis": apis}))

    def searcher(self) -> Any:
        from audee.search.runner import run_searches

        return run_searches

    def cases(self, runner: Any, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[TestCase, dict[str, Any]]]:
        """Each network-level case to run, with its row's provenance, made when asked for
        (``context``: the ``seed``, its ``inputs``, the ``apis`` configs)."""
        from audee.apis import load_api_configs
        from audee.mutation.network import mutate_spec

        seed, inputs = context["seed"], context["inputs"]
        apis = context.get("apis") or load_api_configs()
        validate = unbuildable(runner)
        for target, index in todo:
            case_id = self.case_id(target, index)
            batch, rows = seed_batch(inputs, max(index, 0), cfg.batch)
            if index < 0:
                spec, mutations, meta = seed.spec, [], {}
            else:
                variant = mutate_spec(seed.spec, apis, np.random.default_rng([cfg.rng, index]),
                                      layer_rate=cfg.layer_rate, invalid_prob=cfg.invalid_prob,
                                      max_layers=cfg.max_layers, operators=cfg.operator_weights(),
                                      validate=validate, max_redraws=cfg.max_redraws, index=index)
                spec = variant.spec
                mutations = [m.to_json() for m in variant.mutations]
                meta = {"invalid": variant.invalid}
            store.write_variant(case_id, spec)
            if index >= 0:
                batch, meta["special_inputs"] = special.inject(
                    batch, spec.inputs, np.random.default_rng([cfg.rng, index, SPECIAL_STREAM]), cfg.special_inputs,
                    masks=spec.mask_inputs(), dtypes=consumer_compute_dtypes(spec))
            case = TestCase(case_id, spec, dict(seed.weights or {}), batch)
            weight_seed = seed.weight_seed + 7919 * (index + 1)
            runner.complete_weights(case, weight_seed)
            extra = {"seed": seed.name, "variant": index, "rng": cfg.rng, "mutations": mutations,
                     "input_rows": rows, "weight_seed": weight_seed, **nonempty(meta)}
            yield case, extra


LEVEL = NetworkLevel()
