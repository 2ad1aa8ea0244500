"""Coverage of the Keras layer API by the API configs: which constructor parameters each
config draws, deliberately skips, may ignore, or misses, and which Keras layers have no
config and are not excluded (with a reason) in ``api_configs/README.md``.

A parameter is *exempt* when it never changes an inference output given the weights audee
sets (``EXEMPT`` and ``EXEMPT_SUFFIXES`` say why, one reason each); everything else must be
configured, or skipped with the config's own reason.  Importing keras takes seconds, so
only the functions here that need it import it (``KERAS_BACKEND`` defaults to jax).
"""
from __future__ import annotations

import inspect
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from audee.apis.config import ApiConfig
from audee.core.paths import api_configs_dir
from audee.cases.spec import ModelSpec

EXEMPT: dict[str, str] = {
    "name": "a label: no effect on the computation",
    "trainable": "training only: inference computes the same with frozen weights",
    "dtype": "model-level: another branch draws the model's dtype policy for API-level fuzzing",
    "autocast": "acts only under a mixed dtype policy, which is model-level (see dtype)",
    "seed": "seeds training-time randomness (dropout, noise) only",
    "activity_regularizer": "adds a loss only",
    "input_shape": "Sequential shape hint; audee builds functional models from keras.Input",
    "input_dim": "Sequential shape hint; audee builds functional models from keras.Input",
}
EXEMPT_SUFFIXES: dict[str, str] = {
    "_initializer": "initial weights: audee sets every weight itself",
    "_regularizer": "adds a loss only",
    "_constraint": "applied after optimizer steps only",
}
BASE_FORWARDED = ("input_shape", "input_dim")  # popped from **kwargs by keras.layers.Layer.__init__
STATUSES = ("configured", "skipped", "exempt", "missing", "not_in_keras")
_BACKTICKED = re.compile(r"`([A-Z][A-Za-z0-9]*)`")


def exempt_reason(param: str) -> str | None:
    """Why ``param`` never changes an inference output, or None if it may."""
    if param in EXEMPT:
        return EXEMPT[param]
    return next((why for suffix, why in EXEMPT_SUFFIXES.items() if param.endswith(suffix)), None)


def _keras() -> Any:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras

    return keras


def constructor_params(cls: type) -> list[str]:
    """The keyword arguments ``cls(...)`` takes: its ``__init__``'s named parameters, plus
    the base ``Layer`` ones when it forwards ``**kwargs``."""
    sig = inspect.signature(cls.__init__).parameters
    names = [n for n, p in sig.items() if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind == p.VAR_KEYWORD for p in sig.values()):
        base = inspect.signature(_keras().layers.Layer.__init__).parameters
        extra = [n for n, p in base.items() if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        names += [n for n in [*extra, *BASE_FORWARDED] if n not in names]
    return names


def op_params(fn: Any) -> list[str]:
    """The named arguments of a ``keras.ops`` function (positional, ``*x`` too, and keyword)."""
    return [n for n, p in inspect.signature(fn).parameters.items() if p.kind != p.VAR_KEYWORD]  # *x: positional


def keras_op_functions() -> dict[str, Any]:
    """Every public function under ``keras.ops`` by op name: its name at the top level when
    re-exported there, else ``image.<f>`` / ``linalg.<f>`` / ``nn.<f>`` / ``numpy.<f>``
    (the names op configs and ``audee fuzz --op`` use)."""
    keras = _keras()
    out: dict[str, Any] = {}
    top = set()
    for name in dir(keras.ops):
        f = getattr(keras.ops, name)
        if not name.startswith("_") and callable(f) and not inspect.isclass(f):
            top.add(f)
            out[name] = f
    for mod in ("image", "linalg", "nn", "numpy"):
        m = getattr(keras.ops, mod)
        for name in dir(m):
            f = getattr(m, name)
            if not name.startswith("_") and callable(f) and not inspect.isclass(f) and f not in top:
                out[f"{mod}.{name}"] = f
    return dict(sorted(out.items()))


def coverage_rows(configs: Mapping[str, ApiConfig]) -> list[dict[str, str]]:
    """One row per (API, parameter): ``{"api", "param", "status", "reason"}``; status is one
    of ``STATUSES`` (``not_in_keras``: the config names a parameter Keras does not take).
    Op configs (``keras.ops``) are checked against the function's signature, their
    positional ``args`` and keyword ``params`` together."""
    keras = _keras()
    ops = keras_op_functions() if any(c.namespace == "ops" for c in configs.values()) else {}
    rows = []
    for api in sorted(configs):
        cfg = configs[api]
        target = getattr(keras.layers, api, None) if cfg.namespace == "layers" else ops.get(api)
        if target is None:
            rows.append({"api": api, "param": "", "status": "not_in_keras",
                         "reason": f"no such keras.{cfg.namespace} " + ("function" if cfg.namespace == "ops" else "API")})
            continue
        params = op_params(target) if cfg.namespace == "ops" else constructor_params(target)
        given = {**cfg.args, **cfg.params}
        for name in params:
            pcfg = given.get(name)
            if pcfg is not None and pcfg.skip:
                rows.append({"api": api, "param": name, "status": "skipped", "reason": pcfg.skip})
            elif pcfg is not None:
                rows.append({"api": api, "param": name, "status": "configured", "reason": ""})
            elif exempt_reason(name) and cfg.namespace == "layers":
                rows.append({"api": api, "param": name, "status": "exempt", "reason": exempt_reason(name) or ""})
            else:
                rows.append({"api": api, "param": name, "status": "missing", "reason": "not in the config"})
        for name in given:
            if name not in params:
                rows.append({"api": api, "param": name, "status": "not_in_keras",
                             "reason": f"keras.{cfg.namespace}.{api} takes no such parameter"})
    return rows


def keras_layer_names() -> list[str]:
    """Every public ``keras.layers`` class that is a Layer, aliases removed (the name kept
    is the class's own, e.g. MaxPooling2D over MaxPool2D)."""
    keras = _keras()
    by_class: dict[type, list[str]] = {}
    for name in dir(keras.layers):
        obj = getattr(keras.layers, name)
        if inspect.isclass(obj) and issubclass(obj, keras.layers.Layer):
            by_class.setdefault(obj, []).append(name)
    return sorted(obj.__name__ if obj.__name__ in names else sorted(names)[0] for obj, names in by_class.items())


def excluded_layers(readme: str | Path | None = None, names: re.Pattern[str] = _BACKTICKED) -> dict[str, str]:
    """Layers the README excludes, with the reason: every backticked CamelCase name (``names``)
    on a bullet of its ``## Excluded`` section; the reason is the bullet's text before the colon."""
    path = Path(readme) if readme else api_configs_dir() / "README.md"
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    section = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip().lower().startswith("excluded")
            continue
        if section and line.lstrip().startswith(("- ", "* ")):
            text = line.lstrip()[2:]
            reason = text.split(":", 1)[0].strip(" *")
            for name in names.findall(text.split(":", 1)[1] if ":" in text else text):
                out[name] = reason
    return out


def uncovered_layers(configs: Mapping[str, ApiConfig], excluded: Mapping[str, str] | None = None) -> list[str]:
    """Keras layers with no config that the README does not exclude."""
    excluded = excluded_layers() if excluded is None else excluded
    return [n for n in keras_layer_names() if n not in configs and n not in excluded]


_OP_NAME = re.compile(r"`([a-z][a-z0-9_.]*)`")


def excluded_ops(readme: str | Path | None = None) -> dict[str, str]:
    """The ``keras.ops`` functions ``api_configs/ops/README.md`` excludes, with the reason."""
    return excluded_layers(readme or api_configs_dir() / "ops" / "README.md", _OP_NAME)


def uncovered_ops(configs: Mapping[str, ApiConfig], excluded: Mapping[str, str] | None = None) -> list[str]:
    """``keras.ops`` functions with no op config that the ops README does not exclude."""
    excluded = excluded_ops() if excluded is None else excluded
    return [n for n in keras_op_functions() if n not in configs and n not in excluded]


def render_coverage(rows: Iterable[Mapping[str, str]], uncovered: Iterable[str] = (), *, what: str = "layers",
                    excluded: Mapping[str, list[str]] | None = None) -> str:
    """A table, one line per API (counts per status, the missing parameters named), then
    the uncovered Keras layers (or ops: ``what``), the excluded ones by reason, and a
    summary line."""
    rows = list(rows)
    per_api: dict[str, list[Mapping[str, str]]] = {}
    for r in rows:
        per_api.setdefault(r["api"], []).append(r)
    head = f"{'api':<28} {'configured':>10} {'skipped':>7} {'exempt':>6} {'missing':>7}  gaps"
    lines = [head, "-" * len(head)]
    for api, rs in per_api.items():
        c = Counter(r["status"] for r in rs)
        gaps = [r["param"] or "(API)" for r in rs if r["status"] == "missing"]
        gaps += [f"{r['param'] or '(API)'} (not in keras)" for r in rs if r["status"] == "not_in_keras"]
        lines.append(f"{api:<28} {c['configured']:>10} {c['skipped']:>7} {c['exempt']:>6} {c['missing']:>7}  "
                     + (", ".join(gaps) or "-"))
    uncovered = list(uncovered)
    if uncovered:
        lines.append(f"keras {what} with no config and no exclusion"
                     + (" (in a model they run unmutated)" if what == "layers" else "") + f": {', '.join(uncovered)}")
    for reason, names in (excluded or {}).items():
        lines.append(f"excluded ({reason}): {', '.join(names)}")
    total = Counter(r["status"] for r in rows)
    lines.append(f"{len(per_api)} {'ops' if what == 'ops' else 'APIs'}, {len(rows)} parameters: "
                 + ", ".join(f"{total[s]} {s}" for s in STATUSES) + f"; {len(uncovered)} keras {what} uncovered"
                 + (f", {sum(len(v) for v in excluded.values())} excluded with a reason" if excluded else ""))
    return "\n".join(lines)


def unconfigured(spec: ModelSpec, apis: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{API: [layer names]}`` of the layers of ``spec`` that have no API config: they run
    as they are, their parameters never redrawn (wrapped layers included, named
    ``outer.param``)."""
    out: dict[str, list[str]] = {}
    for layer in spec.layers:
        if layer.api not in apis:
            out.setdefault(layer.api, []).append(layer.name)
        for key, value in layer.params.items():
            if isinstance(value, dict) and isinstance(value.get("api"), str) and value["api"] not in apis:
                out.setdefault(value["api"], []).append(f"{layer.name}.{key}")
    return dict(sorted(out.items()))


def seed_coverage(spec: Any, configs: Mapping[str, ApiConfig]) -> list[dict[str, str]]:
    """One row per layer of a seed's spec (wrapped layers as ``outer.param``): ``{"layer",
    "api", "status", "reason"}``, status ``mutated`` (a config draws its parameters) or
    ``unmutated`` (no config: the layer runs as it is).  No Keras import."""
    bare = {name: api for api, names in unconfigured(spec, configs).items() for name in names}
    rows = []
    for layer in spec.layers:
        names = [layer.name] + [f"{layer.name}.{k}" for k, v in layer.params.items()
                                if isinstance(v, dict) and "api" in v]
        for name in names:
            api = layer.api if name == layer.name else str(layer.params[name.split(".", 1)[1]]["api"])
            if name in bare:
                rows.append({"layer": name, "api": api, "status": "unmutated",
                             "reason": "no API config: runs as it is, its parameters never redrawn"})
            else:
                rows.append({"layer": name, "api": api, "status": "mutated", "reason": ""})
    return rows


def render_seed_coverage(rows: Iterable[Mapping[str, str]]) -> str:
    """A seed's layers, one line each, then a summary line."""
    rows = list(rows)
    lines = [f"{r['layer']:<28} {r['api']:<28} {r['status']}" + (f"  ({r['reason']})" if r["reason"] else "")
             for r in rows]
    bare = sorted({r["api"] for r in rows if r["status"] == "unmutated"})
    lines.append(f"{len(rows)} layers: {len(rows) - sum(r['status'] == 'unmutated' for r in rows)} mutated, "
                 f"{sum(r['status'] == 'unmutated' for r in rows)} unmutated"
                 + (f" (no config: {', '.join(bare)})" if bare else ""))
    return "\n".join(lines)
