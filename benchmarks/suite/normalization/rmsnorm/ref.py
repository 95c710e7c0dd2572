import numpy as np

EPS = 1e-6


def rmsnorm(x, w, cols):
    v = x.astype(np.float64)
    scale = 1.0 / np.sqrt((v * v).mean(axis=1, keepdims=True) + EPS)
    return (v * scale * w.astype(np.float64)).astype(np.float16)
