import numpy as np


def relu(data, n):
    return np.where(data > 0, data, np.float32(0)).astype(np.float32)
