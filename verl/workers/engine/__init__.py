"""Training engines: model + optimizer + parallelism behind one small interface."""
