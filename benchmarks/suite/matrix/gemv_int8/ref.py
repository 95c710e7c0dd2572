import numpy as np


def gemv_int8(A, x, rows, cols):
    return (A.astype(np.int64) @ x.astype(np.int64)).astype(np.int32)
