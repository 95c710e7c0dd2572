"""Numpy references for the XpilerBench operators (helper of ``bench_xpilerbench.py``).

Written from the benchmark's per-operator test scripts (``evaluation/cuda_org_test/test_<op>.py`` of
ShouyangDong/xpiler-eval), with their known slips corrected: maxpool is a real max (the scripts'
``maxpool_np`` is an average), conv2dnchw uses the stride as stride (the script passes it as padding),
gelu is the tanh approximation every kernel implements, layernorm divides by ``std + eps`` as the kernels
and scripts do.

``compute(op, params, inputs)`` takes the operator name, the case parameters (``args`` from the file name,
``axis``/``perm`` from the JSON config, plus a few derived values) and the input arrays keyed by *slot*
(``x``, ``a``, ``b``, ``w``, ``A``, ``B``, ...; the runner maps each file's parameter names onto slots), and
returns ``{slot: array}`` for the outputs. Everything is computed in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

Arr = np.ndarray
Ref = Callable[[Mapping[str, Any], Mapping[str, Arr]], dict[str, Arr]]


def _f(x: Arr) -> Arr:
    return np.asarray(x).astype(np.float64)


def _softmax(x: Arr, axis: int = -1) -> Arr:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _gelu_tanh(x: Arr) -> Arr:
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _windows(x: Arr, kh: int, kw: int, sh: int, sw: int, oh: int, ow: int) -> Arr:
    """NHWC input -> (KH*KW, N, OH, OW, C) stack of the pooling/convolution windows."""
    return np.stack(
        [x[:, i : i + sh * oh : sh, j : j + sw * ow : sw, :] for i in range(kh) for j in range(kw)]
    )


def _elementwise(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    op = p["op"]
    if op == "add":
        return {"out": _f(x["a"]) + _f(x["b"])}
    if op == "sub":
        return {"out": _f(x["a"]) - _f(x["b"])}
    v = _f(x["x"])
    table: dict[str, Callable[[Arr], Arr]] = {
        "relu": lambda t: np.maximum(t, 0.0),
        "sigmoid": lambda t: 1.0 / (1.0 + np.exp(-t)),
        "sign": np.sign,
        "sin": np.sin,
        "gelu": _gelu_tanh,
    }
    return {"out": table[op](v)}


def _softmax_ref(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    return {"out": _softmax(_f(x["x"]), -1)}


def _rmsnorm(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v = _f(x["x"])
    return {"out": v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-5)}


def _layernorm(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v = _f(x["x"])
    m = v.mean(-1, keepdims=True)
    s = v.std(-1, keepdims=True)
    return {"out": _f(x["gamma"]) * (v - m) / (s + 1e-5) + _f(x["beta"])}


def _batchnorm(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    def c(k: str) -> Arr:
        return _f(x[k]).reshape(1, -1, 1, 1)

    return {"out": c("gamma") * (_f(x["x"]) - c("mean")) / np.sqrt(c("var") + 1e-5) + c("beta")}


def _instancenorm(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v = _f(x["x"])
    y = (v - v.mean((2, 3), keepdims=True)) / np.sqrt(v.var((2, 3), keepdims=True) + 1e-5)
    if "gamma" in x:
        y = y * _f(x["gamma"]).reshape(1, -1, 1, 1) + _f(x["beta"]).reshape(1, -1, 1, 1)
    return {"out": y}


def _gemv(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    return {"y": _f(x["A"]) @ _f(x["x"])}


def _matmul(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    return {"C": _f(x["A"]) @ _f(x["B"])}


def _dense(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    return {"D": _f(x["A"]) @ _f(x["B"]) + _f(x["bias"])}


def _gatemlp(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    xx = _f(x["X"])
    o1 = xx @ _f(x["A"])
    o2 = xx @ _f(x["B"])
    return {"O": o1 / (1.0 + np.exp(-o1)) * o2}


def _gqa(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    # the scripts: softmax(Q @ K) @ V with K stored [b, h, K, N] and no 1/sqrt(d) scale
    s = _f(x["Q"]) @ _f(x["K"])
    return {"O": _softmax(s, -1) @ _f(x["V"])}


def _mha(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    q, k, v = _f(x["Q"]), _f(x["K"]), _f(x["V"])
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    return {"O": _softmax(s, -1) @ v}


def _conv1d(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v, k = _f(x["x"]), _f(x["w"])
    n_out = v.shape[0] - k.shape[0] + 1
    return {"out": np.array([np.dot(v[i : i + k.shape[0]], k) for i in range(n_out)])}


def _conv2d_nhwc(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v, w = _f(x["x"]), _f(x["w"])  # NHWC, OHWI
    s = int(p["stride"])
    _, kh, kw, _ = w.shape
    oh = (v.shape[1] - kh) // s + 1
    ow = (v.shape[2] - kw) // s + 1
    out = np.zeros((v.shape[0], oh, ow, w.shape[0]))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,oc->nhwo", v[:, i : i + s * oh : s, j : j + s * ow : s, :], w[:, i, j, :])
    return {"out": out}


def _conv2d_nchw(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v, w = _f(x["x"]), _f(x["w"])  # NCHW, OIHW
    s = int(p["stride"])
    _, _, kh, kw = w.shape
    oh = (v.shape[2] - kh) // s + 1
    ow = (v.shape[3] - kw) // s + 1
    out = np.zeros((v.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", v[:, :, i : i + s * oh : s, j : j + s * ow : s], w[:, :, i, j])
    return {"out": out}


def _depthwise(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v, w = _f(x["x"]), _f(x["w"])  # HWC, KKC, valid, stride 1
    k = w.shape[0]
    oh = v.shape[0] - k + 1
    ow = v.shape[1] - k + 1
    out = np.zeros((oh, ow, v.shape[2]))
    for i in range(k):
        for j in range(k):
            out += v[i : i + oh, j : j + ow, :] * w[i, j, :]
    return {"out": out}


def _pool(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v = _f(x["x"])
    _, h, w, _, kh, kw, sh, sw = (int(t) for t in p["args"])
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    win = _windows(v, kh, kw, sh, sw, oh, ow)
    red = getattr(np, {"avgpool": "mean", "maxpool": "max", "minpool": "min", "sumpool": "sum"}[p["op"]])
    return {"out": red(win, axis=0)}


def _concat(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    return {"out": np.concatenate([_f(x["a"]), _f(x["b"])], axis=int(p["axis"]))}


def scatter_indices(shape: tuple[int, ...], axis: int) -> Arr:
    """The permutation the runner's entry shim passes as ``indices``: reversal along ``axis``."""
    n = shape[axis]
    line = np.arange(n - 1, -1, -1, dtype=np.int64)
    view = [1] * len(shape)
    view[axis] = n
    return np.broadcast_to(line.reshape(view), shape)


def _scatter(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    v = _f(x["x"])
    axis = int(p["axis"])
    out = v.copy()
    np.put_along_axis(out, scatter_indices(v.shape, axis), v, axis=axis)
    return {"out": out}


def _gather(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    params, idx = _f(x["params"]), np.asarray(x["idx"]).astype(np.int64).reshape(-1)
    axis = int(p["axis"])
    length = params.shape[axis]
    ok = (idx >= 0) & (idx < length)
    out = np.take(params, np.clip(idx, 0, length - 1), axis=axis)
    view = [1] * params.ndim
    view[axis] = -1
    return {"out": np.where(ok.reshape(view), out, 0.0)}


def _transpose(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    return {"out": np.transpose(_f(x["x"]), tuple(int(t) for t in p["perm"]))}


def _reduce(p: Mapping[str, Any], x: Mapping[str, Arr]) -> dict[str, Arr]:
    fn = getattr(np, {"max": "max", "min": "min", "sum": "sum", "mean": "mean"}[p["op"]])
    return {"out": np.asarray(fn(_f(x["x"]), axis=int(p["axis"])))}


REFS: dict[str, Ref] = {
    **{op: _elementwise for op in ("add", "sub", "relu", "sigmoid", "sign", "sin", "gelu")},
    "softmax": _softmax_ref,
    "rmsnorm": _rmsnorm,
    "layernorm": _layernorm,
    "batchnorm": _batchnorm,
    "instancenorm": _instancenorm,
    "gemv": _gemv,
    "gemm": _matmul,
    "bmm": _matmul,
    "dense": _dense,
    "gatemlp": _gatemlp,
    "gqa": _gqa,
    "mha": _mha,
    "conv1d": _conv1d,
    "conv2d": _conv2d_nhwc,
    "conv2dnchw": _conv2d_nchw,
    "depthwiseconv": _depthwise,
    **{op: _pool for op in ("avgpool", "maxpool", "minpool", "sumpool")},
    "concat": _concat,
    "scatter": _scatter,
    "gather": _gather,
    "transpose": _transpose,
    **{op: _reduce for op in ("max", "min", "sum", "mean")},
}


def compute(op: str, params: Mapping[str, Any], inputs: Mapping[str, Arr]) -> dict[str, Arr]:
    """The outputs of ``op`` on ``inputs`` (slot -> array), float64."""
    return REFS[op]({**params, "op": op}, inputs)
