import numpy as np


def sgemm_colmajor(A, B, C, alpha, beta, **_):
    # the buffers hold column-major matrices: A is [K, M] = (MxK)^T, B is [N, K], C is [N, M]
    a = A.astype(np.float64).T  # M x K
    b = B.astype(np.float64).T  # K x N
    c = C.astype(np.float64).T  # M x N
    out = float(alpha) * (a @ b) + float(beta) * c
    return np.ascontiguousarray(out.T).astype(np.float32)
