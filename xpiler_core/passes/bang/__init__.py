"""Cambricon BANG C passes: task binding, matmul/pool/element-wise tensorization, reductions, double buffering, and BANG → CUDA detensorization."""
