"""Precision against a float64 reference (after Predoo): ``run.py`` runs a test
case once more under the float64 dtype policy and judges every backend against it
(:mod:`audee.oracle.precision`); ``diagnose.py`` finds the layer where a backend loses
accuracy."""
