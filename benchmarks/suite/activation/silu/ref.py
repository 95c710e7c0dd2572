import numpy as np


def silu(x, n):
    v = x.astype(np.float64)
    return (v / (1.0 + np.exp(-v))).astype(np.float32)
