import numpy as np


def gemv(A, x, rows, cols):
    return (A.astype(np.float64) @ x.astype(np.float64)).astype(np.float32)
