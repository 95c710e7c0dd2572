import numpy as np


def row_sums(A, **_):
    return A.astype(np.float64).sum(axis=1).astype(np.float32)
