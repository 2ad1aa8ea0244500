"""The op level: one ``keras.ops`` call as data (``audee fuzz --op``, docs/ops.md), ids
``op-<op>-v<i>`` (:mod:`audee.mutation.oplevel`); run, judged, re-run and scripted as every
call level's (:class:`audee.levels.calls.CallLevel`)."""
from __future__ import annotations

from typing import Any, Iterator

from audee.levels.base import SPECIAL_STREAM, nonempty
from audee.levels.calls import REFUSAL, CallLevel

__all__ = ["LEVEL", "REFUSAL", "OpLevel"]


class OpLevel(CallLevel):
    name = "op"
    label = "op"
    settings = ("variants", "invalid_prob", "special_inputs")

    def case_id(self, target: str, index: int) -> str:
        from audee.mutation.oplevel import op_case_id

        return op_case_id(target, index)

    def target_names(self) -> Sequence[str]:
        from audee.apis import load_op_configs

        return list(load_op_configs())

    def cases(self, runner: Any, todo: list[tuple[str, int]], cfg: Any, store: Any,
              context: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
        """Each op-level case to run, with its row's provenance: the drawn call, then special
        values in its tensors (``--special-inputs``, their own random stream,
        :func:`audee.mutation.oplevel.place_specials`)."""
        from audee.apis import load_op_configs
        from audee.mutation.apilevel import case_rng
        from audee.mutation.oplevel import generate_op_case, op_case_id, place_specials

        configs = context.get("configs") or load_op_configs()
        for op, index in todo:
            case = generate_op_case(op, configs, cfg.rng, index, invalid_prob=cfg.invalid_prob)
            case.id = op_case_id(op, index)
            specials = place_specials(case, configs.get(op), case_rng(cfg.rng, op, index, stream=SPECIAL_STREAM),
                                      cfg.special_inputs)
            bad = next((m for m in case.mutations if m.invalid), None)
            first = next(iter(case.dtypes.values()), None)
            case.meta = {"seed": f"op:{op}", "api": op, "variant": index, "rng": cfg.rng,
                         "mutations": [m.to_json() for m in case.mutations], "invalid": case.invalid,
                         **({"dtype": first} if first else {}), **case.describe(),
                         **({"invalid_param": {"param": bad.param, "value": bad.new}} if bad else {}),
                         **nonempty({"special_inputs": specials})}
            yield case, dict(case.meta)


LEVEL = OpLevel()
