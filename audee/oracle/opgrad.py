"""The oracles on an op call's gradients (the op level's gradient phase, :mod:`audee.engine.opgrad`):
each backend's vector-Jacobian product of the call, one gradient per floating tensor
argument, judged by the op oracles' rules (:func:`audee.oracle.ops.op_findings`: non-finite
patterns with the call's tensors as the input, values with the dtype's tolerances, shapes
and dtypes), each gradient named ``grad:<tensor>`` in its findings.

What the contract leaves undefined of a gradient is an op config's ``undefined:`` entry
(:data:`GRADIENT_UNDEFINED`), never a silent skip:

* ``gradient_at_zero``: the op is not differentiable where an argument is 0 (``abs``,
  ``relu``-like kinks, ``norm`` at the zero vector: TensorFlow and JAX answer NaN there,
  torch the subgradient 0; ``abs`` at 0: JAX 1, the others 0; ``cbrt``'s infinite slope:
  JAX inf, the others NaN): each framework picks its own answer, so a case whose floating
  tensors hold a 0 has its gradients not compared;
* ``gradient_at_ties``: a selection (``max``, ``min``, ``sort``-like, ``maximum``) whose
  input holds tied values (within a tensor, or two tensors equal at one position):
  how the cotangent is split among the tied elements is each framework's choice
  (``maximum(x, x)``: all to ``x1`` on TensorFlow, half each on torch and JAX).

A factorization's ``values`` (signs and order: ``qr``, ``eigh``) makes its gradient
undefined too.  Each skip is returned with its reason, as the forward oracles' are.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from audee.apis.config import GRADIENT_UNDEFINED
from audee.cases.case import Finding, Outcome
from audee.oracle.deviation import Tolerances
from audee.oracle.ops import has_ties, op_findings

__all__ = ["GRADIENT_UNDEFINED", "INHERITED", "PREFIX", "grad_name", "gradient_findings", "kinks"]

#: what a gradient keeps of the forward ``undefined:`` entries (a factorization's sign choice moves it)
INHERITED = ("values",)
PREFIX = "grad:"


def grad_name(tensor: str) -> str:
    """How a finding names the gradient with respect to ``tensor``."""
    return PREFIX + tensor


def kinks(undefined: Sequence[str], floats: Mapping[str, np.ndarray]) -> list[str]:
    """Why the gradients of a call on ``floats`` (its floating tensors) are undefined by the
    op's contract (``undefined``: its config's list): one reason per kink present."""
    why = []
    if "gradient_at_zero" in undefined and any((np.asarray(a, np.float64) == 0).any() for a in floats.values()):
        why.append("gradients: a floating tensor holds 0, where the op is not differentiable "
                   "(each framework's own subgradient)")
    if "gradient_at_ties" in undefined and (has_ties(dict(floats)) or _tied_across(list(floats.values()))):
        why.append("gradients: tied values, among which each framework splits the cotangent its own way")
    return why


def _tied_across(arrays: list[np.ndarray]) -> bool:
    """Whether two tensors hold an equal value at one position (broadcast): ``maximum(x1, x2)``
    where ``x1 == x2``."""
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            try:
                x, y = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
            except ValueError:
                continue
            if (x == y).any():
                return True
    return False


def gradient_findings(ok: Sequence[Outcome], grads: Mapping[str, list[np.ndarray]],
                      dtypes: Mapping[str, list[str]], wrt: Sequence[str], inputs: Mapping[str, np.ndarray],
                      tolerances: Tolerances | Mapping[str, Any] | None, undefined: Sequence[str],
                      op: str, call: Mapping[str, Any] | None = None) -> tuple[list[Finding], list[str]]:
    """The findings on the gradients of the backends ``ok`` (each answered its gradients:
    their crashes are the forward oracle's) and what was not compared, and why."""
    floats = {n: inputs[n] for n in wrt if n in inputs}
    why = kinks(undefined, floats)
    if why or not wrt:
        return [], why
    kept = [u for u in undefined if u in INHERITED]
    found, skipped = op_findings(list(ok), grads, dtypes, inputs, tolerances, kept, op, call,
                                 names=[grad_name(n) for n in wrt])
    return found, [s if s.startswith(PREFIX) else f"gradients: {s}" for s in skipped]
