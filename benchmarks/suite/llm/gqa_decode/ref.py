import numpy as np


def gqa_decode(q, k, v, HQ, HKV, S, D):
    group = HQ // HKV
    kk = np.repeat(k.astype(np.float64), group, axis=1)  # (B, HQ, S, D): head h reads kv head h // group
    vv = np.repeat(v.astype(np.float64), group, axis=1)
    logits = np.einsum("bhd,bhsd->bhs", q.astype(np.float64), kk) / np.sqrt(D)
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhs,bhsd->bhd", p, vv).astype(np.float32)
