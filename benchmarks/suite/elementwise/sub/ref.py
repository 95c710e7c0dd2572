import numpy as np


def sub(a, b, n):
    # Difference of two halves is exact in float32; rounding it once to half matches __hsub.
    return (a.astype(np.float32) - b.astype(np.float32)).astype(np.float16)
