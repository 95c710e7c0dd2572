import numpy as np


def block_sums(d_in, size, **_):
    n = int(size)
    blocks = (n + 255) // 256
    x = np.zeros(blocks * 256, dtype=np.float64)
    x[:n] = d_in[:n]
    return x.reshape(blocks, 256).sum(axis=1).astype(np.float32)
