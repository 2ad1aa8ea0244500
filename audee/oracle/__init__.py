"""Oracles: crash, NaN and inconsistency checks over the outcomes of one test case."""
from audee.oracle.crash import crash_findings
from audee.oracle.distance import layer_distance, layer_distances
from audee.oracle.inconsistency import inconsistency_findings
from audee.oracle.nan import nan_findings

__all__ = ["crash_findings", "nan_findings", "inconsistency_findings", "layer_distance", "layer_distances"]
