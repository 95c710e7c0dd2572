import numpy as np


def conv2d_nhwc(x, wt, N, H, W, C, K, KH, KW, stride, OH, OW):
    xs = x.astype(np.float64)
    ws = wt.astype(np.float64)  # (KH, KW, C, K)
    out = np.zeros((N, OH, OW, K))
    for r in range(KH):
        for s in range(KW):
            window = xs[:, r : r + stride * (OH - 1) + 1 : stride, s : s + stride * (OW - 1) + 1 : stride, :]
            out += np.einsum("nhwc,ck->nhwk", window, ws[r, s])
    return out.astype(np.float32)
