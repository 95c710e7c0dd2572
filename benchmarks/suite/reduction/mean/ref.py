import numpy as np


def mean(x, rows, cols):
    return x.astype(np.float64).mean(axis=1).astype(np.float32)
