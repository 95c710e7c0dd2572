import numpy as np


def avgpool2d(x, H, W):
    oh, ow = H // 2, W // 2
    v = x[:, : 2 * oh, : 2 * ow].astype(np.float64)
    v = v.reshape(x.shape[0], oh, 2, ow, 2)
    return v.mean(axis=(2, 4)).astype(np.float32)
