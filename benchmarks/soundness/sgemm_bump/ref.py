import numpy as np


def sgemm(M, N, K, alpha, A, B, beta, C):
    a = A.reshape(M, K).astype(np.float64)
    b = B.reshape(K, N).astype(np.float64)
    return (alpha * (a @ b) + beta * C.reshape(M, N)).astype(np.float32).reshape(-1)
