import numpy as np


def warp_synchronous(inp, n):
    blocks = -(-int(n) // 128)  # the cases launch just enough blocks
    padded = np.zeros(blocks * 128, dtype=np.float64)
    padded[:n] = inp[:n]
    return padded.reshape(blocks, 128).sum(axis=1).astype(np.float32)
