"""Backend names -> classes.  Built-ins are aliases for dotted paths, so plugins
(``package.module:ClassName``) load exactly like them.  ``name@cuda`` picks a device,
``name@cuda:tf32`` a GPU in reduced-precision (TF32) mode, ``name@prev`` the environment
``prev`` (another Python interpreter, declared with ``--env prev=/path/to/python``: the
worker runs there, say under another Keras), ``name@prev@cuda`` both.

This module owns a backend's placement: the device syntax (``cpu``, ``cuda``,
``cuda:N``, each optionally ``:full`` or ``:tf32``), the precision modes, the environment
a worker runs in (its name's syntax, :func:`parse_envs`), and the label a backend gets in
results (:func:`backend_label`, read back by :func:`split_label`).  Settings, case files and
the CLI all parse through it."""
from __future__ import annotations

import importlib
import os
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

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
#: an environment's name: short, lower case, never a device's (``cpu``, ``cuda``: a label
#: ``torch@cuda`` names a device, ``torch@prev`` an environment)
ENV_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass(frozen=True)
class BackendRef:
    """A backend as named on the command line: its target class, device and environment."""

    label: str    # unique name in results: "tensorflow", "torch@cuda", "torch@prev", "mypkg.faults:Faulty"
    target: str   # dotted path "module:Class"
    device: str   # "cpu" or "cuda[:N]"
    precision: str = DEFAULT_PRECISION  # one of PRECISIONS
    env: str | None = None     # the environment it runs in (None: audee's own interpreter)
    python: str | None = None  # that environment's interpreter, as the user declared it (never a case file's)

    def to_json(self) -> dict[str, Any]:
        """As ``config.json`` records it: the four fields every audee wrote, the environment
        and its interpreter only where there is one (a run directory of an older audee resumes)."""
        out: dict[str, Any] = {"label": self.label, "target": self.target, "device": self.device,
                               "precision": self.precision}
        if self.env is not None:
            out["env"] = self.env
            out["python"] = self.python
        return out


def check_env_name(name: str) -> str:
    """``name`` if it can name an environment (:data:`ENV_NAME`, not a device); ValueError otherwise."""
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name) or _PLACEMENT.fullmatch(name):
        raise ValueError(f"{str(name)[:40]!r} cannot name an environment (lower-case letters, digits, _ and -, "
                         "starting with a letter, at most 32; not cpu or cuda)")
    return name


def split_label(label: str) -> tuple[str, str | None, str]:
    """A result label's parts: (backend name, environment or None, placement text or "").
    ``torch@prev@cuda:tf32`` -> ``("torch", "prev", "cuda:tf32")``, ``torch@cuda`` ->
    ``("torch", None, "cuda")``: after the name, a part that is no placement is an environment."""
    name, _, rest = str(label).partition("@")
    if not rest:
        return name, None, ""
    first, at, more = rest.partition("@")
    if at or not _PLACEMENT.fullmatch(first):
        return name, first, more
    return name, None, rest


def unplaced(label: str) -> str:
    """A result label without its device and precision, its environment kept: ``jax@cuda``
    -> ``jax``, ``torch@prev@cuda:tf32`` -> ``torch@prev``.  What a triaged bug names: a
    Keras backend's bug seen on a GPU is the bug its entry describes on the CPU."""
    name, env, _ = split_label(label)
    return name if env is None else f"{name}@{env}"


def device_kind(label: str) -> str:
    """Where a result label's backend computes: ``gpu`` for a CUDA placement (``torch@cuda``,
    ``jax@prev@cuda:1:tf32``), else ``cpu``.  A CPU kernel's bug (oneDNN, Eigen, XLA's CPU
    compiler) is not the one a GPU run shows."""
    return "gpu" if split_label(label)[2].startswith("cuda") else "cpu"


def env_of(label: str) -> str | None:
    """The environment a result label runs in (None: audee's own interpreter)."""
    return split_label(label)[1]


def default_env_label(label: str) -> str | None:
    """The same backend on the same placement in audee's own environment (``torch@prev@cuda``
    -> ``torch@cuda``): the other side of a version pair; None for a label without an environment."""
    name, env, place = split_label(label)
    return None if env is None else name + (f"@{place}" if place else "")


def check_python(path: str, name: str) -> str:
    """An environment's interpreter as the user gave it, made absolute (not resolved: a
    virtual environment's ``bin/python`` is a link, and where it is decides its packages);
    ValueError when it is no executable file."""
    text = str(path).strip()
    if not text:
        raise ValueError(f"environment {name!r}: no interpreter given (NAME=/path/to/python)")
    full = os.path.abspath(os.path.expanduser(text))
    if not os.path.isfile(full) or not os.access(full, os.X_OK):
        raise ValueError(f"environment {name!r}: {text} is not an executable file (a Python interpreter, e.g. "
                         ".venv-prev/bin/python, built by `make env-prev`)")
    return full


def parse_envs(items: Iterable[str] | Mapping[str, str] | None, field: str = "--env") -> dict[str, str]:
    """Environments as the user declares them: ``NAME=/path/to/python`` items (``--env``,
    repeatable) or a mapping (a campaign's ``envs:``) -> {name: absolute interpreter path};
    a one-line :class:`AudeeError` naming ``field`` on a bad name, a missing interpreter or a
    name given twice."""
    pairs: list[tuple[str, str]]
    if items is None:
        return {}
    if isinstance(items, Mapping):
        pairs = [(str(k), str(v)) for k, v in items.items()]
    else:
        pairs = []
        for item in items:
            name, eq, path = str(item).partition("=")
            if not eq:
                raise AudeeError(f"expected NAME=/path/to/python, got {str(item)!r}", field=field)
            pairs.append((name.strip(), path))
    out: dict[str, str] = {}
    for name, path in pairs:
        try:
            check_env_name(name)
            python = check_python(path, name)
        except ValueError as exc:
            raise AudeeError(str(exc), field=field) from None
        if name in out:
            raise AudeeError(f"environment {name!r} declared twice", field=field)
        out[name] = python
    return out


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


def gpu_index(device: str) -> int | None:
    """The GPU a device names, as an index among the visible ones (``cuda`` and ``cuda:0``
    are one device, the first); None for a CPU.  Frameworks that take a device index refuse
    a bare ``cuda`` (torch's ``set_per_process_memory_fraction``), so they get this number."""
    if not device.startswith("cuda"):
        return None
    _, _, n = device.partition(":")
    return int(n) if n.isdigit() else 0


def backend_label(name: str, device: str, precision: str = DEFAULT_PRECISION, env: str | None = None) -> str:
    """A backend's unique name in results: ``torch``, ``torch@cuda``, ``torch@cuda:tf32``,
    ``torch@prev`` (in the environment ``prev``), ``torch@prev@cuda``."""
    out = name + (f"@{env}" if env is not None else "")
    if device == "cpu":
        return out
    return f"{out}@{device}" + ("" if precision == DEFAULT_PRECISION else f":{precision}")


def float64_twin(label: str) -> str:
    """The label of the backend that computes ``label``'s float64 (:data:`FLOAT64_TWIN`), on
    the same placement and in the same environment: ``jax@cuda`` -> ``jax-x64@cuda``; any
    other label is its own."""
    name, at, place = label.partition("@")
    return FLOAT64_TWIN.get(name, name) + at + place


def parse_backends(text: str | list[str], default_device: str = "cpu",
                   default_precision: str | None = None, envs: Mapping[str, str] | None = None) -> list[BackendRef]:
    """Backends as named on the command line or in a campaign:
    ``name[@env][@device[:precision]]``, comma-separated.  ``default_device`` /
    ``default_precision`` (``--device``, ``--gpu-precision``) apply where a name gives none; a
    CPU is always full precision.  ``envs``: the environments declared (:func:`parse_envs`),
    name -> interpreter; a name none declares is a one-line error."""
    if default_precision is not None and default_precision not in PRECISIONS:
        raise AudeeError(f"unknown precision {default_precision!r} ({', '.join(PRECISIONS)})", field="--gpu-precision")
    items = text.split(",") if isinstance(text, str) else list(text)
    envs = dict(envs or {})
    refs: list[BackendRef] = []
    for raw in (i.strip() for i in items):
        if not raw:
            continue
        name, env, place = split_label(raw)
        try:
            device, precision = parse_placement(place or default_device, default_precision)
        except ValueError as exc:
            raise AudeeError(f"{exc} in {raw!r}", field="--backends") from None
        if env is not None and env not in envs:
            declared = ", ".join(sorted(envs)) or "none"
            raise AudeeError(f"unknown device or environment {env!r} in {raw!r} (devices: cpu, cuda, cuda:N; "
                             f"environments declared: {declared}): to run it in an environment, give "
                             f"--env {env}=/path/to/python (or envs: in a campaign file)", field="--backends")
        target = BUILTIN.get(name, name)
        if ":" not in target:
            raise AudeeError(f"unknown backend {name!r}: use one of {', '.join(BUILTIN)} "
                             "or a plugin as package.module:ClassName", field="--backends")
        label = backend_label(name, device, precision, env)
        if label in {r.label for r in refs}:
            raise AudeeError(f"backend {label!r} named twice", field="--backends")
        refs.append(BackendRef(label, target, device, precision, env, envs.get(env) if env is not None else None))
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
