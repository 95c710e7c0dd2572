import numpy as np


def batched_gemm(A, B, M, N, K):
    return np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.float32)
