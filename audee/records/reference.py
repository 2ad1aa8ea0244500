"""The float64 reference's record of a test case: who computed it, every
backend's error against it, and whether the other float64 backends agreed with it.

Written by :mod:`audee.reference` into a case's :class:`~audee.records.rows.ResultRow`
(``reference``) and read back through this type, never by key."""
from __future__ import annotations

from audee.records.findings import Record


class ReferenceRun(Record):
    """One reference run of a case.  ``errors``: each backend's largest row score against it
    (normalized as the deviation oracle normalizes, in the backend's own dtype's tolerance:
    above 1 is out of tolerance); ``checks``: each other backend that computed the model in
    float64 too, its score against the reference in float32's tolerance (above 1, unless
    another backend corroborates the reference: ``disputed``, it judges nothing;
    :func:`audee.reference.run.disputed`); ``refused``: the candidates that
    gave no float64 result, and why (a failure, or an answer in another dtype: JAX without
    x64); ``nonfinite``: the backends non-finite where the backends' patterns differ and
    the reference is finite (the odd ones of a NaN finding); ``layers``: per backend, each
    layer's error along the whole model (a diagnosed case only); ``lower``: a float16/bfloat16 case's float32 reference."""

    backend: str | None = None                # None: no backend computed it
    dtype: str = "float64"
    tensor: str | None = None                 # logits | output: what ``errors`` compares
    errors: dict[str, float] = {}
    max_rel: dict[str, float] = {}
    checks: dict[str, float] = {}
    disputed: bool = False
    refused: dict[str, str] = {}
    layers: dict[str, dict[str, float]] = {}
    nonfinite: list[str] | None = None        # non-finite where it is finite: audee.oracle.pairs.nonfinite_by_float64
    factor: float | None = None               # the precision factor the case was judged with
    lower: "ReferenceRun | None" = None

    @property
    def usable(self) -> bool:
        """Whether it judges the case: computed, and not disputed by a cross-check."""
        return self.backend is not None and not self.disputed and bool(self.errors)


__all__ = ["ReferenceRun"]
