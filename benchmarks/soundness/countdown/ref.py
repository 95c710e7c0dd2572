import numpy as np


def countdown(y, n, stride, len):
    out = y.astype(np.float32).copy()
    for t in range(stride):  # the launch's threads: stride is the grid's size
        i, left = t, n
        while left > 0 and i < len:
            out[i] += 1.0
            i += stride
            left -= 1
    return out
