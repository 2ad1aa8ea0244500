"""Search: the engine that evolves inputs and/or weights (DEAP GA, random baseline)."""
