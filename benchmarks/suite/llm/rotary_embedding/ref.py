import numpy as np


def rotary_embedding(x, cos_t, sin_t, H, D):
    half = D // 2
    v = x.astype(np.float64)
    c = cos_t.astype(np.float64)[:, None, :]  # (S, 1, D/2) broadcasts over heads
    s = sin_t.astype(np.float64)[:, None, :]
    x1, x2 = v[..., :half], v[..., half:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1).astype(np.float32)
