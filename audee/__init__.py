"""audee: find bugs in deep-learning frameworks by differential testing of mutated DNNs.

Importing this package must stay cheap and must not import any DL framework: backends
import theirs inside their own worker processes.
"""
__version__ = "0.2.0"
