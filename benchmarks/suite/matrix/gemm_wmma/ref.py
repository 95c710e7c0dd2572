import numpy as np


def gemm_wmma(A, B, M, N, K):
    # Products of halves are exact in float; accumulation order differs, hence the tolerance.
    return (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
