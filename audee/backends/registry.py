"""Backend names -> classes.  Built-ins are aliases for dotted paths, so plugins
(``package.module:ClassName``) load exactly like them.  ``name@cuda`` picks a device."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from audee.errors import AudeeError

BUILTIN = {
    "tensorflow": "audee.backends.keras_backends:TensorflowBackend",
    "torch": "audee.backends.keras_backends:TorchBackend",
    "jax": "audee.backends.keras_backends:JaxBackend",
    "onnxruntime": "audee.backends.onnx_backend:OnnxRuntimeBackend",
    "onnxruntime-fed": "audee.backends.onnx_backend:OnnxRuntimeFedBackend",
}
DEFAULT_BACKENDS = ("tensorflow", "torch", "jax", "onnxruntime")


@dataclass(frozen=True)
class BackendRef:
    """A backend as named on the command line: its target class and device."""

    label: str    # unique name in results: "tensorflow", "torch@cuda", "mypkg.faults:Faulty"
    target: str   # dotted path "module:Class"
    device: str   # "cpu" or "cuda[:N]"


def parse_backends(text: str | list[str], default_device: str = "cpu") -> list[BackendRef]:
    items = text.split(",") if isinstance(text, str) else list(text)
    refs: list[BackendRef] = []
    for raw in (i.strip() for i in items):
        if not raw:
            continue
        name, _, device = raw.partition("@")
        device = device or default_device
        if device != "cpu" and not device.startswith("cuda"):
            raise AudeeError(f"unknown device {device!r} in {raw!r} (cpu, cuda, cuda:N)", field="--backends")
        target = BUILTIN.get(name, name)
        if ":" not in target:
            raise AudeeError(f"unknown backend {name!r}: use one of {', '.join(BUILTIN)} "
                             "or a plugin as package.module:ClassName", field="--backends")
        label = name if device == default_device == "cpu" or device == "cpu" else f"{name}@{device}"
        if label in {r.label for r in refs}:
            raise AudeeError(f"backend {label!r} named twice", field="--backends")
        refs.append(BackendRef(label, target, device))
    if not refs:
        raise AudeeError("no backend named", field="--backends")
    return refs


def load_class(target: str) -> type:
    """Import ``module:Class`` (inside a worker process)."""
    module, _, cls = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise AudeeError(f"cannot load backend class {target!r}: {exc}", field="--backends") from None
    return obj
