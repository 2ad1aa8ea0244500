"""A plugin backend for the pack tests (tests/test_pack.py): a native crash of one case."""
from __future__ import annotations

import os

from audee.backends.keras_backends import JaxBackend


class AbortOnBoom(JaxBackend):
    """JAX, except that running a model that holds a layer whose name ends in ``boom``
    aborts the worker (SIGABRT), as a native framework crash would: one case of a pack
    crashes the whole pack (its layer is there, named ``k<i>_..boom``)."""

    name = "abort-on-boom"

    def run(self, model, inputs):
        if any(name.endswith("boom") for name in model.order):
            os.abort()
        return super().run(model, inputs)
