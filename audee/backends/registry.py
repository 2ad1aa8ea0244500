"""Backend names -> classes.  Built-ins are aliases for dotted paths, so plugins
(``package.module:ClassName``) load exactly like them.  ``name@cuda`` picks a device,
``name@cuda:tf32`` a GPU in reduced-precision (TF32) mode.

This module owns a backend's placement: the device syntax (``cpu``, ``cuda``,
``cuda:N``, each optionally ``:full`` or ``:tf32``), the precision modes, and the label a
backend gets in results.  Settings, case files and the CLI all parse through it."""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

from audee.backends.info import BUILTIN_INFO
from audee.core.errors import AudeeError

#: every built-in backend's name -> its class; the backends and their facts are declared
#: once, in :mod:`audee.backends.info`
BUILTIN = {name: info.target for name, info in BUILTIN_INFO.items()}
DEFAULT_BACKENDS = ("tensorflow", "torch", "jax", "onnxruntime")
#: a backend whose worker answers a float64 model in float32 (JAX without ``jax_enable_x64``
#: casts every float64 array down) -> the backend that computes its float64: a worker of its
#: own beside the run's, so the run's results stay those of the framework as users run it
FLOAT64_TWIN = {"jax": "jax-x64"}

#: precision modes of a worker's float32 computation.  ``full``: IEEE float32 everywhere
#: (TF32 off in cuBLAS/cuDNN for torch and TensorFlow, XLA's "highest" matmul precision for
#: JAX), the default on every device, so that a GPU is judged like a CPU.  ``tf32``: the
#: GPU's reduced-precision matmuls and convolutions (10-bit mantissa inputs), a mode to
#: test, judged with the deviation oracle's ``tf32`` tolerances (docs/oracles.md).
PRECISIONS = ("full", "tf32")
DEFAULT_PRECISION = "full"
_PLACEMENT = re.compile(r"(?P<device>cpu|cuda(?::\d+)?)(?::(?P<precision>[a-z0-9]+))?")


@dataclass(frozen=True)
class BackendRef:
    """A backend as named on the command line: its target class and device."""

    label: str    # unique name in results: "tensorflow", "torch@cuda", "mypkg.faults:Faulty"
    target: str   # dotted path "module:Class"
    device: str   # "cpu" or "cuda[:N]"
    precision: str = DEFAULT_PRECISION  # one of PRECISIONS


def parse_placement(text: str, default_precision: str | None = None) -> tuple[str, str]:
    """``cpu`` / ``cuda`` / ``cuda:N``, optionally ``:full`` or ``:tf32`` -> (device,
    precision).  ``default_precision`` applies to a GPU named without a mode; a CPU always
    computes in full precision (TF32 is a GPU mode).  ValueError on anything else."""
    m = _PLACEMENT.fullmatch(text.strip())
    if not m:
        raise ValueError(f"unknown device {text!r} (cpu, cuda, cuda:N; a GPU may add :full or :tf32)")
    device, precision = m.group("device"), m.group("precision")
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} in {text!r} ({', '.join(PRECISIONS)})")
    if device == "cpu":
        if precision not in (None, DEFAULT_PRECISION):
            raise ValueError(f"{text!r}: {precision} is a GPU mode (a CPU computes float32 in full precision)")
        return device, DEFAULT_PRECISION
    precision = precision or default_precision or DEFAULT_PRECISION
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r} ({', '.join(PRECISIONS)})")
    return device, precision


def backend_label(name: str, device: str, precision: str = DEFAULT_PRECISION) -> str:
    """A backend's unique name in results: ``torch``, ``torch@cuda``, ``torch@cuda:tf32``."""
    if device == "cpu":
        return name
    return f"{name}@{device}" + ("" if precision == DEFAULT_PRECISION else f":{precision}")


def float64_twin(label: str) -> str:
    """The label of the backend that computes ``label``'s float64 (:data:`FLOAT64_TWIN`), on
    the same placement: ``jax@cuda`` -> ``jax-x64@cuda``; any other label is its own."""
    name, at, place = label.partition("@")
    return FLOAT64_TWIN.get(name, name) + at + place


def parse_backends(text: str | list[str], default_device: str = "cpu",
                   default_precision: str | None = None) -> list[BackendRef]:
    """Backends as named on the command line or in a campaign: ``name[@device[:precision]]``,
    comma-separated.  ``default_device`` / ``default_precision`` (``--device``,
    ``--gpu-precision``) apply where a name gives none; a CPU is always full precision."""
    if default_precision is not None and default_precision not in PRECISIONS:
        raise AudeeError(f"unknown precision {default_precision!r} ({', '.join(PRECISIONS)})", field="--gpu-precision")
    items = text.split(",") if isinstance(text, str) else list(text)
    refs: list[BackendRef] = []
    for raw in (i.strip() for i in items):
        if not raw:
            continue
        name, _, place = raw.partition("@")
        try:
            device, precision = parse_placement(place or default_device, default_precision)
        except ValueError as exc:
            raise AudeeError(f"{exc} in {raw!r}", field="--backends") from None
        target = BUILTIN.get(name, name)
        if ":" not in target:
            raise AudeeError(f"unknown backend {name!r}: use one of {', '.join(BUILTIN)} "
                             "or a plugin as package.module:ClassName", field="--backends")
        label = backend_label(name, device, precision)
        if label in {r.label for r in refs}:
            raise AudeeError(f"backend {label!r} named twice", field="--backends")
        refs.append(BackendRef(label, target, device, precision))
    if not refs:
        raise AudeeError("no backend named", field="--backends")
    return refs


def load_class(target: str) -> type:
    """Import ``module:Class`` (inside a worker process)."""
    module, _, cls = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        # no field: the parent's one line (Pool.start_or_fail) says where the name came from
        raise AudeeError(f"cannot load backend class {target!r}: {exc}") from None
    return obj
