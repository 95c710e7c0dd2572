import numpy as np


def transpose(src, rows, cols):
    return np.ascontiguousarray(src.T)
