import numpy as np


def absmax(x, result, n):
    return np.array([max(float(result[0]), float(np.abs(x).max()))], dtype=np.float32)
