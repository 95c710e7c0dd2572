"""numpy references of the examples whose tests cannot be built from their code (specs beside them)."""

import numpy as np


def softmax(x: np.ndarray, rows: int, cols: int, stream: int) -> np.ndarray:
    """softmax_warp.cu: a row-wise softmax."""
    shifted = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def vector_add(a: np.ndarray, b: np.ndarray, n: int, queue: int) -> np.ndarray:
    """vector_add.mlu: c = a + b."""
    return a + b
