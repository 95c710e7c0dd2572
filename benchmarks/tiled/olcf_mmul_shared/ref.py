import numpy as np


def mmul(A, B, ds, **_):
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
