"""Fitness functions (the paper's sections 2.4.3-2.4.4): what the search maximizes."""
from audee.fitness.functions import (FITNESSES, inconsistency_fitness, largest_pair, nan_fitness, precision_fitness,
                                     relative_inconsistency_fitness)

__all__ = ["FITNESSES", "inconsistency_fitness", "largest_pair", "nan_fitness", "precision_fitness",
           "relative_inconsistency_fitness"]
