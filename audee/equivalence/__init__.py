"""Equivalent models: EAGLE's equivalence rules as a single-backend oracle.

``rules.py``: each rule rewrites a spec (or the inputs) into an equivalent model;
``check.py``: the equivalent models run beside the original on each backend, compared
layer by layer, and judged (:mod:`audee.oracle.equivalence`); docs/oracles.md, "Equivalent
models".
"""
from audee.equivalence.rules import RULES, Rewrite, Rule, apply_rule, rules_named

__all__ = ["RULES", "Rewrite", "Rule", "apply_rule", "rules_named"]
