import numpy as np


def total(gdata, **_):
    return np.array([gdata.astype(np.float64).sum()], dtype=np.float32)
