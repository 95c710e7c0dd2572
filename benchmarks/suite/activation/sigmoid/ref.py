import numpy as np


def sigmoid(x, n):
    v = x.astype(np.float64)
    return (1.0 / (1.0 + np.exp(-v))).astype(np.float16)
