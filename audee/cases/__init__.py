"""What a test case is, as plain data: a DNN as a spec and its weights, a test case, its outcome
and verdict, the finding kinds, an op call, many cases packed as one model."""
