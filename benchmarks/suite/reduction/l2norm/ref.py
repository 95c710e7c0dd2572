import numpy as np


def l2norm(x, cols):
    v = x.astype(np.float64)
    norm = np.sqrt((v * v).sum(axis=1, keepdims=True))
    return (v / np.maximum(norm, 1e-12)).astype(np.float32)
