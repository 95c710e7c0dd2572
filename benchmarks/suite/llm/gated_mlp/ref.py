import numpy as np


def gated_mlp(x, w_gate, w_up, w_down, M, hidden, inter):
    xv = x.astype(np.float64)
    g = xv @ w_gate.astype(np.float64)
    u = xv @ w_up.astype(np.float64)
    h = g / (1.0 + np.exp(-g)) * u
    return (h @ w_down.astype(np.float64)).astype(np.float32)
