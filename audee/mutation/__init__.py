"""Strategies that generate test cases: network-level mutation (parameter redraws and
structural operators, see docs/mutation.md); input- and weight-level mutation live with
the search engine, audee.search."""
from audee.mutation.base import Mutation, draw_value
from audee.mutation.network import Variant, generate_variants, mutate_spec
from audee.mutation.operators import apply_mutations
from audee.settings import OPERATORS

__all__ = ["Mutation", "OPERATORS", "Variant", "apply_mutations", "draw_value", "generate_variants", "mutate_spec"]
