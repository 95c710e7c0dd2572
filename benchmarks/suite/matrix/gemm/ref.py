import numpy as np


def gemm(A, B, M, N, K):
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
