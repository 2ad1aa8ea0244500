"""The one small interface every backend implements (built-in or plugin).

A backend lives inside its own worker process (``audee.backends.worker``), so it may set
process-wide state such as ``KERAS_BACKEND`` in :meth:`Backend.prepare_process` before any
framework import.  Everything crossing the process boundary is numpy arrays and JSON data.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from audee.spec import ModelSpec, Weights


class Phase:
    """Where in a test case a backend failed; crash oracles tell these apart."""

    BUILD = "build"
    CONVERT = "convert"
    WEIGHTS = "weights"
    RUN = "run"


class BackendError(Exception):
    """A clean, Python-level failure of a framework, tagged with the phase it happened in."""

    def __init__(self, phase: str, message: str, tb: str = ""):
        super().__init__(message)
        self.phase = phase
        self.tb = tb


class Backend(ABC):
    """Build a spec, take weights, run batches and return every layer's output.

    Subclasses set ``name`` and implement the abstract methods.  ``device`` is ``"cpu"`` or
    ``"cuda[:N]"``; ``precision`` is one of :data:`audee.backends.registry.PRECISIONS`
    (``full``: IEEE float32; ``tf32``: the GPU's reduced-precision matmuls and
    convolutions).  A backend raises plain exceptions; the worker tags them with the phase.
    """

    name: ClassVar[str] = "backend"

    def __init__(self, device: str = "cpu", precision: str = "full"):
        self.device = device
        self.precision = precision

    @classmethod
    def prepare_process(cls, device: str, precision: str = "full") -> None:
        """Set process-wide environment before any framework import (called once, first)."""

    def precision_state(self) -> dict[str, str]:
        """The precision mode and the framework switches that implement it, as the
        framework reports them (``audee backends`` shows this; a plugin may add its own)."""
        return {"mode": self.precision}

    @abstractmethod
    def versions(self) -> dict[str, str]:
        """Framework name -> version, for reports and case files."""

    @abstractmethod
    def build(self, spec: ModelSpec) -> Any:
        """Build (and compile / convert) ``spec``; return an opaque model handle."""

    @abstractmethod
    def weight_shapes(self, model: Any) -> dict[str, list[tuple[str, tuple[int, ...]]]]:
        """Layer name -> [(role, shape)] of its weights, in ``layer.get_weights()`` order;
        the role is the variable's short name ('kernel', 'bias', 'moving_mean', ...)."""

    @abstractmethod
    def set_weights(self, model: Any, weights: Weights) -> None:
        """Swap ``weights`` into a built model without rebuilding it."""

    @abstractmethod
    def run(self, model: Any, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run one batch; return every layer's output in ``spec.topological_order()``."""
