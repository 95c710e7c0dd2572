import numpy as np


def scatter_add(src, idx, out, num_idx, dim):
    acc = out.astype(np.float64)
    np.add.at(acc, idx.astype(np.int64), src.astype(np.float64))
    return acc.astype(np.float32)
