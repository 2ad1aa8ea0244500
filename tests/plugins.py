"""Plugin backends that misbehave on purpose, for the crash-oracle tests.

They wrap the JAX backend (the fastest framework to import) and fail only in ``run``,
so building and the hello handshake work as for a healthy backend.
"""
from __future__ import annotations

import os
import time

from audee.backends.keras_backends import JaxBackend


class AbortingBackend(JaxBackend):
    """Calls os.abort() (SIGABRT) when a batch is run, as a native framework crash would."""

    name = "aborting"

    def run(self, model, inputs):
        os.abort()


class SleepingBackend(JaxBackend):
    """Hangs when a batch is run, as a deadlocked kernel would."""

    name = "sleeping"

    def run(self, model, inputs):
        time.sleep(3600)
        return []


class RaisingBackend(JaxBackend):
    """Raises a clean Python error when a batch is run (divergent acceptance)."""

    name = "raising"

    def run(self, model, inputs):
        raise ValueError("refusing this batch on purpose")


class HangingBackend(JaxBackend):
    """Says so in its worker log, then hangs when a batch is run (for the cleanup tests)."""

    name = "hanging"

    def run(self, model, inputs):
        print("hanging: run started", flush=True)
        time.sleep(3600)
        return []
