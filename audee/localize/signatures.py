"""Keras constructor defaults per layer API, for parameters the API configs do not cover.

Localization treats every constructor parameter as a candidate (docs/localization.md), so
it needs each parameter's Keras default: the value an unset parameter has, and the first
alternative to try.  Importing Keras in the main process costs seconds and a framework,
so the defaults of the pinned Keras are stored in ``signatures.json`` beside this file;
``python -m audee.localize.signatures`` rewrites it (a test checks it matches Keras).
"""
from __future__ import annotations

import ast
import json
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).resolve().parent / "signatures.json"
REQUIRED = "<required>"  # a parameter without a default
# Parameters that cannot change what an inference computes from given weights, or that
# are not layer behaviour at all: never candidates.
SKIP_SUFFIXES = ("_initializer", "_regularizer", "_constraint")
SKIP = {"self", "kwargs", "args", "name", "trainable", "dtype", "seed", "weights", "lora_rank", "lora_alpha",
        "quantization_config", "synchronized", "renorm_clipping", "renorm_momentum", "input_dim_unused"}


def skipped(param: str) -> bool:
    return param in SKIP or param.endswith(SKIP_SUFFIXES)


def literal_defaults(cls: Any) -> dict[str, Any]:
    """``{parameter: default}`` of a Keras layer class's constructor: literal defaults only
    (numbers, strings, booleans, None, tuples as lists); required ones as :data:`REQUIRED`."""
    import inspect

    out: dict[str, Any] = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if skipped(name) or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        if p.default is inspect.Parameter.empty:
            out[name] = REQUIRED
            continue
        try:
            value = ast.literal_eval(repr(p.default))
        except (ValueError, SyntaxError):
            continue  # an object default (a callable, a config): not a value we can try
        out[name] = _listify(value)
    return out


def _listify(v: Any) -> Any:
    return [_listify(x) for x in v] if isinstance(v, (list, tuple)) else v


@lru_cache(maxsize=1)
def keras_defaults() -> dict[str, dict[str, Any]]:
    """The stored table: ``{api: {parameter: default or REQUIRED}}``; empty (API-config
    parameters only, logged) where an installation lacks the file."""
    if not TABLE.is_file():
        logging.getLogger(__name__).warning("%s is missing: only API-config parameters are candidates", TABLE)
        return {}
    return json.loads(TABLE.read_text())


def defaults_for(api: str) -> dict[str, Any]:
    return keras_defaults().get(api, {})


def build_table(apis: list[str]) -> dict[str, dict[str, Any]]:
    """The table from the installed Keras (any backend)."""
    import keras

    return {api: literal_defaults(getattr(keras.layers, api)) for api in sorted(apis) if hasattr(keras.layers, api)}


def main() -> None:
    import os

    os.environ.setdefault("KERAS_BACKEND", "numpy")
    from audee.apis import load_api_configs

    table = build_table(list(load_api_configs()))
    from audee.store.atomic import write_atomic

    write_atomic(TABLE, (json.dumps(table, indent=1, sort_keys=True) + "\n").encode())
    print(f"{TABLE}: {len(table)} APIs")


if __name__ == "__main__":
    main()
