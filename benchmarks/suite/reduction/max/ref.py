import numpy as np


def max(x, out, n):  # noqa: A001 - the operator's name
    return np.array([np.maximum(out[0], x.max())], dtype=np.int32)
