import numpy as np


def attention(Q, K, V, S, D):
    q, k, v = (t.astype(np.float64) for t in (Q, K, V))
    logits = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(D)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bqk,bkd->bqd", p, v).astype(np.float32)
