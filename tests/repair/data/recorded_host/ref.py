import numpy as np


def axpy(x, y, n):
    w = np.array([0.5, 2.0, -1.0], dtype=np.float32)[np.arange(n) % 3]
    return (w * x + y).astype(np.float32)
