import numpy as np

BLOCK = 256


def block_scan(x, n):
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, BLOCK):
        out[start : start + BLOCK] = np.cumsum(x[start : start + BLOCK].astype(np.float64))
    return out.astype(np.float32)
