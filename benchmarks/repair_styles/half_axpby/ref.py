import numpy as np


def axpby(x, y, n):
    return (2.0 * x.astype(np.float32) - 0.5 * y.astype(np.float32)).astype(np.float16)
