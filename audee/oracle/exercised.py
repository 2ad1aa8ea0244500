"""What one test case exercised: every layer API of its model and each parameter value
those layers are built with (the report aggregates them: :mod:`audee.report.coverage`).

Kept apart from the report so that writing a results row imports no pandas."""
from __future__ import annotations

import json
from typing import Any

from audee.cases.spec import ModelSpec

API_ONLY = ""  # the parameter name of an (api, "", "") triple: the API itself ran


def _value(v: Any) -> str:
    """A parameter value as compact, stable text (a nested layer argument by its API)."""
    if isinstance(v, dict) and "api" in v:
        return str(v["api"])
    return json.dumps(v, sort_keys=True, separators=(",", ":"), default=str)


def exercised(spec: ModelSpec) -> list[list[str]]:
    """Sorted unique ``[api, param, value]`` triples of ``spec``: every layer's API (with
    ``param`` empty) and each parameter value it is built with."""
    seen: set[tuple[str, str, str]] = set()
    for layer in spec.layers:
        seen.add((layer.api, API_ONLY, ""))
        for name, value in layer.params.items():
            seen.add((layer.api, name, _value(value)))
            if isinstance(value, dict) and "api" in value:  # a wrapped layer (Bidirectional(LSTM))
                seen.add((str(value["api"]), API_ONLY, ""))
                for inner, v in (value.get("params") or {}).items():
                    seen.add((str(value["api"]), inner, _value(v)))
        for name, value in layer.call.items():  # how it is called (training=True): "call.training"
            seen.add((layer.api, f"call.{name}", _value(True if name == "mask" else value)))  # a mask: its input's
            # name is no value to count
    return [list(t) for t in sorted(seen)]
