import numpy as np


def gather(table, idx, num_idx, dim):
    return np.take(table, idx.astype(np.int64), axis=0)
