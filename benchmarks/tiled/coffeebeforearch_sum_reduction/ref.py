import numpy as np


def block_sums(v, **_):
    return v.astype(np.int64).reshape(-1, 256).sum(axis=1).astype(np.int32)
