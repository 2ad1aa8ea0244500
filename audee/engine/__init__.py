"""One test case on every backend, judged by the oracles: a model case, an op call, packs of
cases, a training step."""
