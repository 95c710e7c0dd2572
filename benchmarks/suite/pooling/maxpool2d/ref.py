import numpy as np


def maxpool2d(data, nc, h, w, oh, ow):
    x = np.pad(data, ((0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    out = np.full((nc, oh, ow), -np.inf, dtype=np.float32)
    for r in range(3):
        for s in range(3):
            out = np.maximum(out, x[:, r : r + 2 * (oh - 1) + 1 : 2, s : s + 2 * (ow - 1) + 1 : 2])
    return out.astype(np.float32)
