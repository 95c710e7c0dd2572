import numpy as np

BLOCK = 256


def ballot_count(x, n):
    blocks = -(-n // BLOCK)
    padded = np.zeros(blocks * BLOCK, dtype=np.float32)
    padded[:n] = x
    return (padded.reshape(blocks, BLOCK) > 0).sum(axis=1).astype(np.int32)
