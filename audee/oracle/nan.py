"""NaN oracle: NaN or Inf in any layer's output, with the first layer where it appears.

NaN on one backend while another stays finite on the same case is the strongest signal
(``strong``): the same arithmetic, done differently.
"""
from __future__ import annotations

from audee.case import Finding, Kind, Outcome


def nan_findings(outcomes: list[Outcome]) -> list[Finding]:
    ok = [o for o in outcomes if o.ok]
    bad = [o for o in ok if o.nonfinite]
    if not bad:
        return []
    finite = [o.backend for o in ok if not o.nonfinite]
    return [Finding(Kind.NAN, [o.backend for o in bad],
                    {"first_layer": {o.backend: o.nonfinite[0] for o in bad},
                     "layers": {o.backend: o.nonfinite for o in bad},
                     "strong": bool(finite), "finite_backends": finite})]
