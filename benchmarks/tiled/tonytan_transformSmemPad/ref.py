import numpy as np


def transpose(**kw):
    return np.ascontiguousarray(kw["in"].T)
