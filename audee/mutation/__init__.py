"""Strategies that generate test cases: network-level mutation of layer parameters
(input- and weight-level mutation live with the search engine, audee.search)."""
from audee.mutation.network import Mutation, Variant, draw_value, generate_variants, mutate_spec

__all__ = ["Mutation", "Variant", "draw_value", "generate_variants", "mutate_spec"]
