import numpy as np


def polyval(coeffs, x, n):
    powers = x.astype(np.float64)[:, None] ** np.arange(coeffs.size)[None, :]
    return (powers @ coeffs.astype(np.float64)).astype(np.float32)
