"""A layer's computed output against the output Keras declares for it.

Keras builds a functional model from declarations: each layer's ``compute_output_spec``
(``compute_output_shape`` and its compute dtype) gives the symbolic tensor every later layer
is built from.  A layer that then computes another shape or dtype breaks the model after it
(a Dense built for 272 features fed 264) or hands its consumers a dtype they were not built
for, on every backend alike where the declaration itself is wrong.  Backends compared with
each other agree there, so only this contract sees it: ``MelSpectrogram`` declaring
``(L + stride + 1) // stride`` frames where it computes ``L // stride + 1``.

Each Keras worker compares every layer's output with its model's declaration as it runs
(:func:`audee.backends.worker._undeclared`: ``Outcome.declared``); a backend that runs no
model Keras built (a converter's graph) declares nothing and is not judged here.
"""
from __future__ import annotations

from audee.cases.case import Finding, Kind, Outcome


def declared_findings(outcomes: list[Outcome], order: list[str]) -> list[Finding]:
    """One ``declared_output`` finding for the first layer (in ``order``, the model's) whose
    output some backend computes in another shape or dtype than Keras declares; its backends
    are those that do.  Later layers are built from the wrong declaration, so their own
    mismatches follow from it: the first is the one to fix."""
    declaring = [o for o in outcomes if o.ok and o.declared is not None]
    off = {o.backend: o.declared for o in declaring if o.declared}
    if not off:
        return []
    pos = {name: i for i, name in enumerate(order)}
    layer = min((name for d in off.values() for name in d), key=lambda name: (pos.get(name, len(pos)), name))
    hit = {b: d[layer] for b, d in off.items() if layer in d}
    declared = next(iter(hit.values()))[0]
    return [Finding(Kind.DECLARED_OUTPUT, list(hit),
                    {"layer": layer, "declared": declared, "computed": {b: got for b, (_, got) in hit.items()},
                     "declaring": [o.backend for o in declaring]})]


def declared_groups(f: Finding) -> dict[str, tuple]:
    """Each backend that ran a model Keras built, grouped by what it computes at the finding's
    layer: its shape and dtype where they differ from the declaration, else ``declared``
    (:func:`audee.oracle.odd.mark_odd` names the minority)."""
    d = f.detail
    return {b: (("computed", repr(d.computed[b])) if b in d.computed else ("declared",)) for b in d.declaring}


def shape_text(shape_dtype: list) -> str:
    """``[shape, dtype]`` as a reader writes it: ``(None, 8, 34) float32``."""
    shape, dtype = shape_dtype
    dims = ", ".join("None" if s is None else str(s) for s in shape)
    return f"({dims}{',' if len(shape) == 1 else ''}) {dtype}"


__all__ = ["declared_findings", "declared_groups", "shape_text"]
