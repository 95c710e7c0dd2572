import numpy as np


def sum(x, n):  # noqa: A001 - the operator's name
    return np.array([x.astype(np.float64).sum()], dtype=np.float32)
