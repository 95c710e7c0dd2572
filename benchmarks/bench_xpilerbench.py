"""XpilerBench (ShouyangDong/xpiler-eval): translate every benchmark kernel with ``xpiler`` and check it.

    python benchmarks/bench_xpilerbench.py PATH [--direction cuda->hip ...] [--op OP ...] [--limit N | --middle | --largest]
                                           [--mode shipped|spec] [--json OUT] [--workdir DIR] [--timeout S]
    python benchmarks/bench_xpilerbench.py PATH --report RUN1.json [RUN2.json ...]   # tables of saved runs

PATH is a work tree of the benchmark repository (``git archive HEAD | tar -x``; nothing of it is kept in this
repository). Directions: cuda->hip, cuda->cpu, cuda->bang, hip->cuda, hip->cpu, cpu->cuda (the CPP files:
fixed-shape plain C, some with AVX-512/VNNI intrinsics), bang->cuda (the MLU files that are real BANG C, not
the 88 placeholders) and hip->bang (a direction the paper reports; the row says what the tool answers).
``--limit N`` takes the N smallest configurations of each operator (by elements), per direction.

Per case (one benchmark file, at the shape of its name and the ``axis``/``perm`` of its JSON config):

1. the file is copied to a scratch folder with the minimal prelude it needs (the benchmark's files have no
   ``#include``); a BANG kernel gets a CNRT host wrapper (16 tasks, Union1), a scatter kernel an entry shim
   that passes a permutation as indices (random indices collide and make the result thread-order dependent);
2. a ``kind = "host"`` spec is written (entry = the file's host wrapper, arguments in its order, shapes and
   integers from the file name) whose reference is the numpy reference of the benchmark's per-operator test
   script (``xpilerbench_refs.py``);
3. the source itself is run against that reference (``xpiler test``): a source that fails is reported as
   "source fails its reference" and not charged to the translation; the translation is then compared with
   the source instead (differential test) and that fidelity verdict is shown separately;
4. ``xpiler translate SRC --to T -o OUT --spec SPEC --json`` gives the tool's own verdict and time;
5. compile accuracy: the target's real compiler on OUT (``hipcc --offload-arch=gfx90a`` with
   ``HIP_PLATFORM=amd``, ``nvcc -arch=sm_80``, ``g++ -fopenmp``; BANG: the MLU model build as the tool
   reports it);
6. compute accuracy: ``xpiler test SPEC --candidate OUT`` with the benchmark's reference on two input sets
   (one more than the tool used) — the independent check;
7. control: the benchmark's own file of the target platform with the same configuration is run against the
   same reference (a ground truth that fails is listed).

``--mode shipped`` (the default) is what a user meets: the tool gets the benchmark's file as it ships, with the
benchmark's own prelude (``evaluation/macros.py``: every header the platform might need), no spec, no reference
and no size cap, only a time limit (``--timeout``, reported as time-outs); the runner judges afterwards (steps 5
to 7). The case's limit is three times ``--timeout`` (which bounds each test run inside the tool). ``--mode spec`` is the runner's help described above (minimal prelude, the spec handed in, a CNRT wrapper
for BANG kernels, the size cap below). ``--middle`` / ``--largest`` take each operator's middle / largest
configuration (hold out what the tool was developed on).

In spec mode, cases above 2^24 elements or 4 M multiply-accumulates (tensor-core / attention kernels) are translated
without verification and compiled, but "skipped: too large for the CPU runtime" for compute.

The table (stdout) gives per direction compile % and compute % with counts, per operator group, the median
time per translation, the paper's figures, every case where the tool said "verified" but the independent check
says wrong (this list must be empty), and every failure with its reason. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench_cli import first_error, log, pct, run, run_xpiler, short, test_verdict

HERE = Path(__file__).resolve().parent
ELEMENT_CAP = 1 << 24
MAC_CAP = 4 << 20

PLATFORMS: dict[str, tuple[str, str, str]] = {  # key -> (folder, suffix, config json)
    "cuda": ("CUDA", "cu", "cuda.json"),
    "hip": ("HIP", "hip", "hip.json"),
    "cpu": ("CPP", "cpp", "cpp.json"),
    "bang": ("MLU", "mlu", "mlu.json"),
}
PLATFORM_NAMES = {"cuda": "CUDA", "hip": "HIP", "cpu": "C", "bang": "BANG"}
DIRECTIONS = [
    "cuda->hip",
    "cuda->cpu",
    "cuda->bang",
    "hip->cuda",
    "hip->cpu",
    "cpu->cuda",
    "bang->cuda",
    "hip->bang",
]
# QiMeng-Xpiler paper (Table: compile % / compute %); CUDA->C there is C with VNNI intrinsics.
PAPER: dict[str, tuple[float, float, str]] = {
    "cuda->hip": (100.0, 100.0, ""),
    "cuda->bang": (100.0, 91.7, ""),
    "cuda->cpu": (100.0, 95.2, "paper: CUDA->C (VNNI)"),
    "hip->cuda": (100.0, 100.0, ""),
    "hip->bang": (100.0, 86.9, ""),
    "cpu->cuda": (100.0, 98.2, ""),
}
GROUPS: dict[str, list[str]] = {
    "Elementwise": ["add", "sign", "sub", "sin"],
    "Reduction": ["sum", "mean", "max", "min"],
    "Matrix": ["gemm", "gemv", "bmm", "dense"],
    "Convolution": ["conv1d", "conv2d", "conv2dnchw", "depthwiseconv"],
    "Normalization": ["batchnorm", "layernorm", "rmsnorm", "instancenorm"],
    "Activation": ["relu", "gelu", "sigmoid", "softmax"],
    "Pooling": ["maxpool", "avgpool", "minpool", "sumpool"],
    "Layout": ["gather", "transpose", "scatter", "concat"],
    "LLM": ["mha", "deformable", "gatemlp", "gqa"],
}
GROUP_OF = {op: g for g, ops in GROUPS.items() for op in ops}
CTYPES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "int": "int32",
    "int32_t": "int32",
    "int64_t": "int64",
    "long": "int64",
    "int16_t": "int16",
    "short": "int16",
    "int8": "int8",
    "int8_t": "int8",
    "char": "int8",
    "uint8_t": "uint8",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
}
SUFFIX = {"cuda": "cu", "hip": "hip", "cpu": "cpp", "bang": "mlu"}
# the tool's tree is edited while benchmarks run: a crash of xpiler itself on these is rerun, not counted


# ----------------------------------------------------------------------------------------------------
# configurations


@dataclass
class Config:
    plat: str
    op: str
    args: list[int]
    axis: int | None
    perm: list[int] | None
    path: Path

    @property
    def name(self) -> str:
        return f"{self.op}_{'_'.join(map(str, self.args))}"

    def same_as(self, other: Config) -> bool:
        return (self.op, self.args, self.axis, self.perm) == (other.op, other.args, other.axis, other.perm)


def load_configs(root: Path, plat: str) -> list[Config]:
    folder, suffix, js = PLATFORMS[plat]
    seen: dict[str, Config] = {}
    for c in json.loads((root / "TransEval" / js).read_text()):
        args = [int(a) for a in c["args"]]
        name = f"{c['op_name']}_{'_'.join(map(str, args))}"
        if name in seen:  # hip.json and mlu.json list some configs twice
            continue
        seen[name] = Config(
            plat,
            c["op_name"],
            args,
            c.get("axis"),
            c.get("perm"),
            root / "XpilerBench" / folder / f"{name}.{suffix}",
        )
    return list(seen.values())


def is_placeholder(text: str, plat: str) -> bool:
    return plat == "bang" and "__mlu_global__" not in text


# ----------------------------------------------------------------------------------------------------
# what each operator's file takes: slots in the CUDA wrapper's order, the integers, the reference parameters


@dataclass
class Slot:
    key: str  # the reference's name for the buffer
    shape: list[int]
    role: str  # "in" | "out"
    init: str = "uniform(0, 1)"
    dtype: str = "float32"  # used when the file's type is unknown


@dataclass
class Semantics:
    slots: list[Slot]
    ints: list[int]
    params: dict[str, Any] = field(default_factory=dict)
    macs: int = 0  # multiply-accumulates of tensor-core / matrix-core code (slow on the CPU runtime)
    tol: float = 1e-3
    reference: bool = True  # False: no numpy reference here (still translated and compiled)
    scatter_axis: int | None = None  # indices come from an entry shim (a permutation along this axis)


def _prod(xs: Sequence[int]) -> int:
    return math.prod(xs) if xs else 1


def semantics(c: Config) -> Semantics | str:
    op, a, plat = c.op, c.args, c.plat
    quantized = plat in ("cpu", "bang")  # VNNI / int8 matrix code: integer-valued inputs keep it exact
    mat_init = "randint(0, 4)" if quantized else "uniform(-1, 1)"
    P: dict[str, Any] = {"args": a}
    if op in ("add", "sub"):
        return Semantics([Slot("a", a, "in"), Slot("b", a, "in"), Slot("out", a, "out")], [_prod(a)], P)
    if op in ("relu", "sigmoid", "sign", "gelu", "sin"):
        init = {
            "relu": "uniform(-1, 1)",
            "sigmoid": "normal",
            "sign": "normal",
            "gelu": "uniform(-3, 3)",
            "sin": "uniform(0, 12.566)",
        }[op]
        return Semantics([Slot("x", a, "in", init), Slot("out", a, "out")], [_prod(a)], P)
    if op == "softmax":
        return Semantics(
            [Slot("x", a, "in", "normal(0, 10)"), Slot("out", a, "out")], [_prod(a[:-1]), a[-1]], P
        )
    if op == "rmsnorm":
        return Semantics([Slot("x", a, "in", "normal"), Slot("out", a, "out")], list(a), P)
    if op == "layernorm":
        d = a[-1]
        return Semantics(
            [Slot("x", a, "in"), Slot("gamma", [d], "in"), Slot("beta", [d], "in"), Slot("out", a, "out")],
            list(a),
            P,
        )
    if op == "gemv":
        m, n = a
        init = "randint(0, 4)" if quantized else "normal"
        return Semantics(
            [Slot("A", [m, n], "in", init), Slot("x", [n], "in", init), Slot("y", [m], "out")],
            [m, n],
            P,
        )
    if op == "gemm":
        m, k, n = a
        return Semantics(
            [
                Slot("A", [m, k], "in", mat_init, "float16"),
                Slot("B", [k, n], "in", mat_init, "float16"),
                Slot("C", [m, n], "out"),
            ],
            [m, k, n],
            P,
            macs=m * k * n,
            tol=1e-2,
        )
    if op == "bmm":
        b, m, k, n = a
        return Semantics(
            [
                Slot("A", [b, m, k], "in", mat_init, "float16"),
                Slot("B", [b, k, n], "in", mat_init, "float16"),
                Slot("C", [b, m, n], "out"),
            ],
            [b, m, k, n],
            P,
            macs=b * m * k * n,
            tol=1e-2,
        )
    if op == "dense":
        m, k, n = a
        return Semantics(
            [
                Slot("A", [m, k], "in", mat_init, "float16"),
                Slot("B", [k, n], "in", mat_init, "float16"),
                Slot("bias", [n], "in", mat_init),
                Slot("D", [m, n], "out"),
            ],
            [m, k, n],
            P,
            macs=m * k * n,
            tol=1e-2,
        )
    if op == "gatemlp":
        b, k, n = a
        init = mat_init if quantized else "uniform(-0.5, 0.5)"
        return Semantics(
            [
                Slot("X", [b, k], "in", init, "float16"),
                Slot("A", [k, n], "in", init, "float16"),
                Slot("B", [k, n], "in", init, "float16"),
                Slot("O", [b, n], "out"),
            ],
            [b, k, n],
            P,
            macs=2 * b * k * n,
            tol=1e-2,
        )
    if op == "gqa":
        if plat == "cpu":
            return "no numpy reference: the C file is int16-quantized attention with a fixed scale"
        b, h, m, k, n = a
        return Semantics(
            [
                Slot("Q", [b, h, m, k], "in", "uniform(0, 1)", "float16"),
                Slot("K", [b, h, k, n], "in", "uniform(0, 1)", "float16"),
                Slot("V", [b, h, n, k], "in", "uniform(0, 1)", "float16"),
                Slot("O", [b, h, m, k], "out", dtype="float16"),
            ],
            [b, h, m, k, n] if plat != "hip" else [b, h, m, n, k],
            P,
            macs=2 * b * h * m * n * k,
            tol=1e-2,
        )
    if op == "mha":
        if plat == "cuda":
            b, h, s, d = a
            shape = [b, h, s, d]
        else:  # HIP/C/BANG name the shape batch, seq, heads, dim
            b, s, h, d = a
            shape = [b, s, h, d]
        return Semantics(
            [
                Slot("Q", shape, "in", "normal", "float16"),
                Slot("K", shape, "in", "normal", "float16"),
                Slot("V", shape, "in", "normal", "float16"),
                Slot("O", shape, "out", dtype="float16"),
            ],
            list(a),
            P,
            macs=2 * b * h * s * s * d,
            tol=1e-2,
            reference=plat == "cuda",
        )
    if op == "conv1d":
        o, i = a
        return Semantics(
            [Slot("x", [i], "in"), Slot("w", [i - o + 1], "in"), Slot("out", [o], "out")],
            [i, o],
            P,
        )
    if op in ("conv2d", "conv2dnchw"):
        init = "randint(0, 4)" if quantized else "uniform(0, 1)"
        if op == "conv2d":
            n, h, w, ch, o, kh, kw, ci, s, _pad = a
            xs, ws = [n, h, w, ch], [o, kh, kw, ci]
        else:
            n, ch, h, w, o, ci, kh, kw, s, _pad = a
            xs, ws = [n, ch, h, w], [o, ci, kh, kw]
        oh, ow = (h - kh) // s + 1, (w - kw) // s + 1
        outs = [n, oh, ow, o] if op == "conv2d" else [n, o, oh, ow]
        P["stride"] = s
        return Semantics(
            [Slot("x", xs, "in", init), Slot("w", ws, "in", init), Slot("out", outs, "out")],
            [n, h, ch, o, kh, s],
            P,
        )
    if op == "depthwiseconv":
        h, k, ch = a
        oh = h - k + 1
        return Semantics(
            [Slot("x", [h, h, ch], "in"), Slot("w", [k, k, ch], "in"), Slot("out", [oh, oh, ch], "out")],
            [h, k, ch],
            P,
        )
    if op in ("avgpool", "maxpool", "minpool", "sumpool"):
        n, h, w, ch, kh, kw, sh, sw = a
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        return Semantics(
            [Slot("x", [n, h, w, ch], "in", "normal"), Slot("out", [n, oh, ow, ch], "out")],
            [n, ch, h, kh, sh],
            P,
        )
    if op == "batchnorm":
        ch = a[1]
        return Semantics(
            [
                Slot("x", a, "in"),
                Slot("out", a, "out"),
                Slot("mean", [ch], "in"),
                Slot("var", [ch], "in", "uniform(0.5, 1.5)"),
                Slot("gamma", [ch], "in"),
                Slot("beta", [ch], "in"),
            ],
            [],
            P,
        )
    if op == "instancenorm":
        ch = a[1]
        slots = [Slot("x", a, "in"), Slot("out", a, "out")]
        if plat != "cpu":  # the C files normalise without an affine part
            slots += [Slot("gamma", [ch], "in"), Slot("beta", [ch], "in")]
        return Semantics(slots, [], P)
    if op == "concat":
        if c.axis is None:
            return "no axis in the JSON config"
        out = list(a)
        out[c.axis] *= 2
        P["axis"] = c.axis
        return Semantics([Slot("a", a, "in"), Slot("b", a, "in"), Slot("out", out, "out")], [], P)
    if op == "scatter":
        axis = c.axis if c.axis is not None else len(a) - 1
        P["axis"] = axis
        return Semantics(
            [Slot("x", a, "in"), Slot("idx", a, "in", dtype="int32"), Slot("out", a, "out")],
            [],
            P,
            scatter_axis=axis,
        )
    if op == "gather":
        if plat == "cpu":  # params [batch, len], indices [n] (int32), output [n, len], along axis 0
            b, ln, n = a
            P["axis"] = 0
            return Semantics(
                [
                    Slot("params", [b, ln], "in", "normal"),
                    Slot("idx", [n], "in", f"randint(-1, {b + 1})", "int32"),
                    Slot("out", [n, ln], "out"),
                ],
                [],
                P,
            )
        if c.axis is None:
            return "no axis in the JSON config"
        length = a[c.axis]
        n = max(1, length // 2)
        out = list(a)
        out[c.axis] = n
        P["axis"] = c.axis
        return Semantics(
            [
                Slot("params", a, "in", "normal"),
                Slot("idx", [n], "in", f"randint(-1, {length + 1})", "int64"),
                Slot("out", out, "out"),
            ],
            [n],
            P,
        )
    if op == "transpose":
        if c.perm is None:
            return "no perm in the JSON config"
        P["perm"] = c.perm
        return Semantics([Slot("x", a, "in"), Slot("out", [a[i] for i in c.perm], "out")], list(a), P)
    if op in ("max", "min", "sum", "mean"):
        if c.axis is None:
            return "no axis in the JSON config"
        out = [s for i, s in enumerate(a) if i != c.axis] or [1]
        P["axis"] = c.axis
        return Semantics([Slot("x", a, "in", "normal"), Slot("out", out, "out")], [], P)
    if op == "deformable":
        n, m, d, lq, lv, pt = a
        spatial = 84 * 117 + 42 * 59 + 21 * 30 + 11 * 15
        slots = [
            Slot("value", [n, spatial, m, d], "in"),
            Slot("shapes", [lv, 2], "in", dtype="int32"),
            Slot("start", [lv], "in", dtype="int32"),
            Slot("loc", [n, lq, m, lv, pt, 2], "in"),
            Slot("attn", [n, lq, m, lv, pt], "in"),
            Slot("out", [n, lq, m * d], "out"),
        ]
        if plat == "cpu" or plat == "bang":
            slots = [s for s in slots if s.key != "start"]
        return Semantics(slots, [], P, reference=False)
    return f"no reference for operator {op!r}"


# file-specific orders that differ from the CUDA wrapper's
PTR_ORDER: dict[tuple[str, str], list[str]] = {("hip", "conv2dnchw"): ["x", "out", "w"]}


# ----------------------------------------------------------------------------------------------------
# the file's entry and the spec


@dataclass
class Param:
    name: str
    ctype: str
    pointer: bool


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def entry_of(text: str, plat: str) -> tuple[str, list[Param]] | None:
    body = strip_comments(text)
    if plat == "bang":
        m = re.search(r"__mlu_global__\s+void\s+(\w+)\s*\(([^)]*)\)", body)
    else:
        m = re.search(r'extern\s+"C"\s+void\s+(\w+)\s*\(([^)]*)\)', body)
    if m is None:
        return None
    params: list[Param] = []
    for raw in m.group(2).split(","):
        p = " ".join(raw.replace("const", " ").replace("__restrict__", " ").split())
        if not p:
            continue
        name = re.split(r"[\s*&]+", p)[-1]
        ctype = p[: p.rfind(name)].replace("*", " ").strip()
        params.append(Param(name, " ".join(ctype.split()), "*" in p))
    return m.group(1), params


def shipped_preludes(root: Path) -> dict[str, str]:
    """The benchmark's own prelude per platform (``evaluation/macros.py``: ``CUDA_MACROS = \"\"\"...\"\"\"``)."""
    names = {"cuda": "CUDA", "hip": "HIP", "cpu": "CPP", "bang": "MLU"}
    try:
        text = (root / "evaluation" / "macros.py").read_text()
    except OSError:
        return {}
    found = dict(re.findall(r'^(\w+)_MACROS\s*=\s*"""(.*?)"""', text, re.S | re.M))
    return {plat: found[name].lstrip("\n") for plat, name in names.items() if name in found}


def needed_prelude(text: str, plat: str) -> str:
    """Only the includes the file uses (the benchmark's files have none)."""
    body = strip_comments(text)
    inc: list[str] = []

    def has(pattern: str) -> bool:
        return re.search(pattern, body) is not None

    if plat == "hip":
        inc.append("#include <hip/hip_runtime.h>")
        if has(r"\b(half|__half)\b"):
            inc.append("#include <hip/hip_fp16.h>")
    if plat == "bang":
        inc.append("#include <bang.h>")
    if has(r"\b(printf|fprintf|puts)\s*\("):
        inc.append("#include <stdio.h>")
    if has(r"\b(malloc|exit)\s*\("):
        inc.append("#include <stdlib.h>")
    if has(
        r"\b(M_PI|INFINITY|NAN)\b|\b(expf?|sqrtf?|tanhf?|sinf?|cosf?|powf?|fabsf?|logf?|erff?|fmaxf?"
        r"|fminf?|rsqrtf|floorf?|ceilf?|roundf?|lround)\s*\("
    ):
        inc.append("#include <math.h>")
    if has(r"\b(FLT_MAX|FLT_MIN|DBL_MAX)\b"):
        inc.append("#include <float.h>")
    if has(r"\b(u?int(8|16|32|64)_t)\b"):
        inc.append("#include <stdint.h>")
    if plat == "cuda":
        if has(r"\b(half|__half|__float2half|__half2float)\b"):
            inc.append("#include <cuda_fp16.h>")
        if has(r"\bwmma::"):
            inc.append("#include <mma.h>")
            if has(r"(?<!nvcuda::)\bwmma::"):
                inc.append("using namespace nvcuda;")
    if plat == "cpu":
        if has(r"\b_mm\w*\(|__m(128|256|512)"):
            inc.append("#include <immintrin.h>")
        if has(r"\bhalf\b"):
            inc.append("typedef unsigned short half;")
        if has(r"std::numeric_limits"):
            inc.append("#include <limits>")
        if has(r"std::(max|min)\b"):
            inc.append("#include <algorithm>")
        if has(r"std::(exp|lround)\b"):
            inc.append("#include <cmath>")
    return "\n".join(inc) + ("\n" if inc else "")


@dataclass
class SpecPlan:
    entry: str
    kind: str
    args: list[dict[str, Any]]  # spec [[args]] tables, in the entry's order
    slot_of: dict[str, str]  # spec arg name -> slot
    params: dict[str, Any]
    tol: float
    extra_source: str = ""  # appended to the source copy (BANG host wrapper)
    entry_shim: str = ""
    elements: int = 0
    macs: int = 0  # multiply-accumulates of tensor-core / matrix-core code (slow on the CPU runtime)
    reference: bool = True


def plan_spec(c: Config, text: str) -> SpecPlan | str:
    sem = semantics(c)
    if isinstance(sem, str):
        return sem
    found = entry_of(text, c.plat)
    if found is None:
        return "no entry function found"
    entry, params = found
    ptrs = [p for p in params if p.pointer]
    scalars = [p for p in params if not p.pointer]
    order = PTR_ORDER.get((c.plat, c.op), [s.key for s in sem.slots])
    by_key = {s.key: s for s in sem.slots}
    if len(ptrs) != len(order):
        return f"signature not understood: {len(ptrs)} pointers, the operator has {len(order)} buffers"
    ints = [p for p in scalars if CTYPES.get(p.ctype, "").startswith("int")]
    floats = [p for p in scalars if p.ctype in ("float", "double")]
    if len(ints) > len(sem.ints) or len(ints) + len(floats) != len(scalars):
        return f"signature not understood: scalars {[p.ctype + ' ' + p.name for p in scalars]}"
    args: list[dict[str, Any]] = []
    slot_of: dict[str, str] = {}
    int_values = iter(sem.ints)
    ptr_iter = iter(order)
    for p in params:
        if p.pointer:
            s = by_key[next(ptr_iter)]
            dtype = CTYPES.get(p.ctype, s.dtype)
            arg: dict[str, Any] = {"name": p.name, "dtype": dtype, "role": s.role, "shape": s.shape}
            if s.role == "in":
                arg["init"] = s.init
            slot_of[p.name] = s.key
            args.append(arg)
        elif p in floats:
            args.append({"name": p.name, "dtype": CTYPES[p.ctype], "role": "scalar", "value": 1e-5})
        else:
            args.append(
                {"name": p.name, "dtype": CTYPES[p.ctype], "role": "scalar", "value": next(int_values)}
            )
    plan = SpecPlan(
        entry,
        "host",
        args,
        slot_of,
        sem.params,
        sem.tol,
        macs=sem.macs,
        reference=sem.reference,
        elements=sum(_prod(s.shape) for s in sem.slots),
    )
    if c.plat == "bang":
        plan.extra_source = bang_host_wrapper(entry, args, params)
        plan.entry = f"xb_host_{entry}"
    if sem.scatter_axis is not None:
        plan.entry_shim, plan.entry, plan.args = scatter_shim(plan, sem.scatter_axis)
    return plan


def _ctype_of(dtype: str) -> str:
    return {
        "float32": "float",
        "float16": "half",
        "int32": "int",
        "int64": "int64_t",
        "int16": "int16_t",
        "int8": "int8_t",
        "uint8": "uint8_t",
        "float64": "double",
    }[dtype]


def bang_host_wrapper(kernel: str, args: list[dict[str, Any]], params: list[Param]) -> str:
    """A CNRT host function for a BANG kernel without host code (as the benchmark's mlu_host_generate.py
    intends): copy in, launch 16 tasks as Union1 (4 clusters x 4 cores), copy out."""
    sig, body, call, tail = [], [], [], []
    for a, p in zip(args, params, strict=True):
        if a["role"] == "scalar":
            sig.append(f"{p.ctype} {p.name}")
            call.append(p.name)
            continue
        n_bytes = f"{_prod(a['shape'])} * sizeof({p.ctype})"
        sig.append(f"{p.ctype} *{p.name}")
        body.append(f"  {p.ctype} *d_{p.name};\n  cnrtMalloc((void **)&d_{p.name}, {n_bytes});")
        if a["role"] == "in":
            body.append(f"  cnrtMemcpy(d_{p.name}, {p.name}, {n_bytes}, cnrtMemcpyHostToDev);")
        else:
            tail.append(f"  cnrtMemcpy({p.name}, d_{p.name}, {n_bytes}, cnrtMemcpyDevToHost);")
        call.append(f"d_{p.name}")
    frees = [f"  cnrtFree(d_{p.name});" for a, p in zip(args, params, strict=True) if a["role"] != "scalar"]
    return "\n".join(
        [
            "",
            f'extern "C" void xb_host_{kernel}({", ".join(sig)}) {{',
            "  cnrtQueue_t queue;",
            "  cnrtQueueCreate(&queue);",
            *body,
            "  cnrtDim3_t dim = {16, 1, 1};",
            f"  {kernel}<<<dim, cnrtFuncTypeUnion1, queue>>>({', '.join(call)});",
            "  cnrtQueueSync(queue);",
            *tail,
            *frees,
            "  cnrtQueueDestroy(queue);",
            "}",
            "",
        ]
    )


def scatter_shim(plan: SpecPlan, axis: int) -> tuple[str, str, list[dict[str, Any]]]:
    """Scatter needs indices that are a permutation along the axis (the benchmark's random indices collide):
    an extern "C" forwarder builds the reversal and calls the file's entry."""
    idx = next(a for a in plan.args if plan.slot_of.get(a["name"]) == "idx")
    shape = idx["shape"]
    inner = _prod(shape[axis + 1 :])
    n = shape[axis]
    total = _prod(shape)
    bufs = [a for a in plan.args if a is not idx]
    sig = ", ".join(f"{_ctype_of(a['dtype'])} *{a['name']}" for a in bufs)
    call = ", ".join(a["name"] if a is not idx else "xb_idx" for a in plan.args)
    shim = (
        f'extern "C" void xb_scatter_entry({sig}) {{\n'
        f"  static int xb_idx[{total}];\n"
        f"  for (int i = 0; i < {total}; ++i) xb_idx[i] = {n} - 1 - (i / {inner}) % {n};\n"
        f"  {plan.entry}({call});\n}}\n"
    )
    return shim, "xb_scatter_entry", bufs


def toml_value(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def write_spec(
    path: Path,
    plan: SpecPlan,
    source: str,
    n_cases: int,
    *,
    reference_source: str | None = None,
    timeout_s: int = 240,
) -> None:
    lines = [
        f'name = "{path.stem}"',
        f'source = "{source}"',
        f'entry = "{plan.entry}"',
        f'kind = "{plan.kind}"',
    ]
    if reference_source is None:
        lines.append('reference = "ref.py:ref"')
    else:
        lines += [
            f'reference_source = "{reference_source}"',
            f'reference_entry = "{plan.entry}"',
            f'reference_kind = "{plan.kind}"',
        ]
    lines.append(f"tolerance = {{ atol = {plan.tol}, rtol = {plan.tol} }}")
    lines.append(f"timeout_s = {timeout_s}")
    if plan.entry_shim:
        lines.append(f"entry_shim = '''\n{plan.entry_shim}'''")
    for a in plan.args:
        lines.append("\n[[args]]")
        for k in ("name", "dtype", "role", "shape", "init", "value"):
            if k in a:
                lines.append(f"{k} = {toml_value(a[k])}")
    for i in range(n_cases):
        lines.append(f"\n[[cases]]\nseed_case = {i}")
    path.write_text("\n".join(lines) + "\n")


def write_ref(path: Path, op: str, plan: SpecPlan) -> None:
    outs = {plan.slot_of[a["name"]]: a["name"] for a in plan.args if a["role"] == "out"}
    shapes = {a["name"]: a["shape"] for a in plan.args if a["role"] == "out"}
    path.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from xpilerbench_refs import compute\n\n"
        f"SLOT = {plan.slot_of!r}\nOUT = {outs!r}\nSHAPE = {shapes!r}\nPARAMS = {plan.params!r}\n\n\n"
        "def ref(**kw):\n"
        "    got = compute(" + repr(op) + ", PARAMS, {SLOT[k]: v for k, v in kw.items() if k in SLOT})\n"
        "    return {OUT[k]: v.reshape(SHAPE[OUT[k]]) for k, v in got.items()}\n"
    )


# ----------------------------------------------------------------------------------------------------
# running things


def compile_output(
    path: Path, target: str, cwd: Path, timeout: float, march: str = "native"
) -> tuple[bool | None, str]:
    """The platform's real compiler on a file (None: not checked here)."""
    obj = cwd / "compile_check.o"
    if target == "hip":
        hipcc = shutil.which("hipcc")
        if hipcc is None:
            return None, "no hipcc"
        env = dict(os.environ, HIP_PLATFORM="amd")
        r = run(
            [hipcc, "--offload-arch=gfx90a", "-std=c++17", "-c", str(path), "-o", str(obj)], cwd, timeout, env
        )
    elif target == "cuda":
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            return None, "no nvcc"
        r = run([nvcc, "-arch=sm_80", "-std=c++17", "-c", str(path), "-o", str(obj)], cwd, timeout)
    elif target == "cpu":
        r = run(
            [
                "g++",
                "-x",
                "c++",
                "-std=c++17",
                "-O2",
                "-fopenmp",
                f"-march={march}",
                "-c",
                str(path),
                "-o",
                str(obj),
            ],
            cwd,
            timeout,
        )
    else:
        return None, "BANG: the tool's MLU model build"
    obj.unlink(missing_ok=True)
    return r.rc == 0, first_error(r.out)


# ----------------------------------------------------------------------------------------------------
# one case


@dataclass
class Case:
    direction: str
    name: str
    op: str
    group: str
    status: str = ""  # translated | skipped | not-run
    reason: str = ""
    tool_status: str = ""
    tool_reason: str = ""
    tool_compile: bool | None = None
    compile_ok: bool | None = None
    compile_reason: str = ""
    compute: str = ""  # pass | fail | unrunnable | source-fails-ref | too-large | no-reference | not-run
    compute_reason: str = ""
    source_check: str = ""
    source_reason: str = ""
    source_compiles: bool | None = None  # the source platform's compiler on the source (+ prelude)
    source_compile_reason: str = ""
    differential: str = ""
    differential_reason: str = ""
    ground_truth: str = ""
    ground_truth_reason: str = ""
    seconds: float = 0.0
    workdir: str = ""
    mode: str = "spec"  # shipped: the file as it ships, no spec; spec: the runner's spec and minimal prelude
    timed_out: bool = False


def tool_digest() -> str:
    """What a file's check depends on in this checkout: every file of the runtime and the verifier (a change to
    either makes every stored check stale)."""
    h = hashlib.sha256()
    core = HERE.parent / "xpiler_core"
    for folder in ("runtime", "verify"):
        for f in sorted((core / folder).rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(core)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


class FileChecks:
    """The benchmark files' own verdicts (a source or a ground truth against the numpy reference, and the
    platform compiler's verdict on it), kept across runs and directions in one JSON file: CUDA→HIP, CUDA→CPU and
    CUDA→BANG check the same CUDA sources, and HIP→CUDA's sources are CUDA→HIP's ground truths. A check is
    keyed by the file's prepared text, its check spec, the timeout and :func:`tool_digest`; a compile by the
    text, the target flags and the compiler's version."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.records: dict[str, list[Any]] = {}
        if path is not None and path.is_file():
            try:
                self.records = dict(json.loads(path.read_text()))
            except (OSError, ValueError):
                self.records = {}
        self.digest = tool_digest() if path is not None else ""
        self._compilers: dict[str, str] = {}

    def compiler(self, plat: str) -> str:
        """The platform compiler's ``--version`` text (a compile verdict is the compiler's)."""
        if plat not in self._compilers:
            tool = {"hip": "hipcc", "cuda": "nvcc", "cpu": "g++"}.get(plat)
            found = shutil.which(tool) if tool else None
            done = run([found, "--version"], Path.cwd(), 60) if found else None
            self._compilers[plat] = f"{found}\n{done.out}" if done is not None else "none"
        return self._compilers[plat]

    def key(self, kind: str, *parts: str) -> str:
        return hashlib.sha256("\0".join((kind, self.digest, *parts)).encode()).hexdigest()

    def get(self, key: str) -> list[Any] | None:
        return self.records.get(key) if self.path is not None else None

    def put(self, key: str, value: list[Any]) -> None:
        if self.path is None:
            return
        self.records[key] = value
        partial = self.path.with_suffix(self.path.suffix + ".partial")
        partial.write_text(json.dumps(self.records))
        partial.replace(self.path)


class Bench:
    def __init__(self, root: Path, workdir: Path, timeout: float, mode: str = "spec",
                 file_checks: Path | None = None) -> None:
        self.root = root
        self.workdir = workdir
        self.timeout = timeout
        self.mode = mode
        self.preludes = shipped_preludes(root)
        self.configs = {p: {c.name: c for c in load_configs(root, p)} for p in PLATFORMS}
        self._source_checks: dict[str, tuple[str, str]] = {}
        self._source_compiles: dict[str, tuple[bool | None, str]] = {}
        self._unsupported: dict[str, str] = {}
        self.stored = FileChecks(file_checks)

    # ---- preparing a file
    def prepare(self, c: Config, where: Path) -> tuple[SpecPlan, Path] | str:
        if not c.path.is_file():
            return f"file missing: {c.path.name}"
        text = c.path.read_text(errors="replace")
        if is_placeholder(text, c.plat):
            return "placeholder file (no BANG kernel)"
        plan = plan_spec(c, text)
        if isinstance(plan, str):
            return plan
        where.mkdir(parents=True, exist_ok=True)
        src = where / c.path.name
        src.write_text(needed_prelude(text, c.plat) + text + plan.extra_source)
        write_ref(where / "ref.py", c.op, plan)
        write_spec(where / "tool.toml", plan, src.name, 1)
        write_spec(where / "check.toml", plan, src.name, 2)
        return plan, src

    @staticmethod
    def testable(out: Path) -> Path:
        """A CPU output on the tool's portable tier includes ``xpiler_simt/`` beside it, which ``xpiler test``
        does not find once it copies the candidate away: test a copy that includes it by absolute path."""
        text = out.read_text(errors="replace")
        if '#include "xpiler_simt/' not in text:
            return out
        copy = out.with_name(f"check_{out.name}")
        copy.write_text(text.replace('#include "xpiler_simt/', f'#include "{out.parent}/xpiler_simt/'))
        return copy

    def too_large(self, plan: SpecPlan) -> str:
        if self.mode == "shipped":
            return ""  # a time limit instead
        if plan.elements > ELEMENT_CAP:
            return f"skipped: too large for the CPU runtime ({plan.elements} elements)"
        if plan.macs > MAC_CAP:
            return f"skipped: too large for the CPU runtime ({plan.macs} multiply-accumulates)"
        return ""

    def check_file(self, c: Config) -> tuple[str, str]:
        """A benchmark file (a source or a ground truth) against the numpy reference, once per file."""
        key = f"{c.plat}/{c.name}"
        if key not in self._source_checks:
            where = self.workdir / "files" / c.plat / c.name
            prep = self.prepare(c, where)
            if isinstance(prep, str):
                self._source_checks[key] = ("n/a", prep)
            else:
                plan, _ = prep
                big = self.too_large(plan)
                if big:
                    self._source_checks[key] = ("n/a", big)
                elif not plan.reference:
                    self._source_checks[key] = ("n/a", "no numpy reference for this file")
                else:
                    _, src = prep
                    stored = self.stored.key("check", key, src.read_text(errors="replace"),
                                             (where / "check.toml").read_text(), f"{self.timeout:g}")
                    found = self.stored.get(stored)
                    if found is not None:
                        self._source_checks[key] = (str(found[0]), str(found[1]))
                        return self._source_checks[key]
                    r = run_xpiler(["test", "check.toml"], where, self.timeout)  # BANG: on the MLU model
                    self._source_checks[key] = test_verdict(r)
                    if r.rc != 124:  # a time-out is the machine's moment, not the file's verdict
                        self.stored.put(stored, list(self._source_checks[key]))
        return self._source_checks[key]

    # ---- one direction and one configuration
    def case(self, direction: str, c: Config) -> Case:
        src_plat, dst = direction.split("->")
        k = Case(direction, c.name, c.op, GROUP_OF.get(c.op, "?"))
        if direction in self._unsupported:
            k.status, k.reason = "not-run", self._unsupported[direction]
            return k
        where = self.workdir / direction.replace("->", "_to_") / c.name
        k.workdir = str(where)
        prep = self.prepare(c, where)
        if isinstance(prep, str):
            k.status, k.reason = "skipped", prep
            return k
        plan, src = prep
        key = f"{c.plat}/{c.name}"
        if key not in self._source_compiles:  # the benchmark compiles C with -march=icelake-server (VNNI)
            march = "icelake-server" if c.plat == "cpu" else "native"
            stored = self.stored.key("compile", key, src.read_text(errors="replace"), march,
                                     self.stored.compiler(c.plat))
            found = self.stored.get(stored)
            if found is not None:
                self._source_compiles[key] = (found[0], str(found[1]))
            else:
                self._source_compiles[key] = compile_output(src, c.plat, where, self.timeout, march)
                self.stored.put(stored, list(self._source_compiles[key]))
        k.source_compiles, k.source_compile_reason = self._source_compiles[key]
        big = self.too_large(plan)
        # the source against the benchmark's reference
        if big:
            k.source_check, k.source_reason = "n/a", big
        elif not plan.reference:
            k.source_check, k.source_reason = "n/a", "no numpy reference for this operator/platform"
        else:
            k.source_check, k.source_reason = self.check_file(c)
        # the tool's own verdict
        out = where / f"out.{SUFFIX[dst]}"
        k.mode = self.mode
        if self.mode == "shipped":
            # the file as the benchmark ships it, in a folder of its own (nothing of the runner's beside it)
            shipped = where / "shipped" / c.path.name
            shipped.parent.mkdir(exist_ok=True)
            shipped.write_text(self.preludes.get(c.plat, "") + c.path.read_text(errors="replace"))
            cmd = ["translate", str(shipped), "--to", dst, "-o", str(out), "--json",
                   "--timeout", f"{self.timeout:g}"]
        else:
            cmd = ["translate", src.name, "--to", dst, "-o", out.name, "--json"]
            cmd += ["--no-verify"] if big else ["--spec", "tool.toml"]
        r = run_xpiler(cmd, where, self.timeout * 3)
        k.seconds = r.seconds
        k.timed_out = r.rc == 124
        k.status = "translated"
        try:
            # the JSON document, whatever follows it (stderr comes after stdout in r.out)
            res = json.JSONDecoder().raw_decode(r.out[r.out.index("{") :])[0] if "{" in r.out else None
        except ValueError:
            res = None
        if res is None:
            k.tool_status = "crash" if r.rc not in (124,) else "timeout"
            k.tool_reason = short(r.out)
            if "no translation plan" in r.out:
                self._unsupported[direction] = f"not supported by xpiler: {short(r.out)}"
                k.status, k.reason = "not-run", self._unsupported[direction]
                return k
        else:
            k.tool_status, k.tool_reason = res.get("status", "?"), res.get("reason", "")
            comp = ((res.get("manifest_data") or {}).get("outcome") or {}).get("compile") or {}
            k.tool_compile = comp.get("ok")
        # compile accuracy
        if not out.is_file():
            k.compile_ok, k.compile_reason = (
                False,
                "no output written: " + (k.tool_reason or short(r.out))[:200],
            )
            k.compute = "not-run"
            k.compute_reason = "no translation"
            return k
        ok, why = compile_output(out, dst, where, self.timeout)
        if ok is None:
            ok = k.tool_compile
            why = "" if ok else f"MLU model build: {k.tool_reason[:200]}"
        k.compile_ok, k.compile_reason = ok, "" if ok else why
        # compute accuracy
        if big:
            k.compute, k.compute_reason = "too-large", big
        elif not plan.reference:
            k.compute, k.compute_reason = "no-reference", "no numpy reference for this operator/platform"
        else:
            check = "check.toml"
            if self.mode == "shipped" and src_plat == "bang" and plan.entry.startswith("xb_host_"):
                # the file shipped without the runner's CNRT wrapper: the translation is called through the host
                # entry it writes with the kernel's own symbol (buffers the runtime shares with the host)
                check = "check_kernel_symbol.toml"
                write_spec(where / check, dataclasses.replace(plan, entry=plan.entry[len("xb_host_"):]), src.name, 2)
            t = run_xpiler(
                ["test", check, "--candidate", self.testable(out).name], where, self.timeout
            )
            verdict, reason = test_verdict(t)
            if t.rc == 124:  # the check ran out of time: no verdict on the translation either way
                verdict = "timeout"
            elif verdict in ("build", "error") and dst in ("hip", "cuda"):
                # a GPU translation the CPU runtime cannot build or run: not a verdict on the translation
                verdict = "unrunnable"
            elif verdict in ("build", "error"):  # the CPU compiler / MLU model is the target's own
                verdict = "fail"
            if k.source_check in ("build", "error"):
                reason = f"(the source does not run on the CPU runtime) {reason}".strip()
            if k.source_check == "fail":
                k.compute = "source-fails-ref"
                k.compute_reason = f"translation vs reference: {verdict} {reason}".strip()
                if src_plat == "bang":
                    k.differential = "n/a"
                    k.differential_reason = "a BANG source cannot be a spec's reference_source"
                else:
                    write_spec(where / "diff.toml", plan, src.name, 2, reference_source=src.name)
                    d = run_xpiler(
                        ["test", "diff.toml", "--candidate", self.testable(out).name], where, self.timeout
                    )
                    k.differential, k.differential_reason = test_verdict(d)
            else:
                k.compute, k.compute_reason = verdict, reason
        # control: the benchmark's own file of the target platform at the same configuration
        gt = self.configs.get(dst, {}).get(c.name)
        if gt is not None and gt.same_as(c) and not big:
            k.ground_truth, k.ground_truth_reason = self.check_file(gt)
        return k


# ----------------------------------------------------------------------------------------------------
# report


def summarize(cases: list[Case], directions: list[str]) -> str:
    out: list[str] = []
    w = out.append
    modes = sorted({k.mode for k in cases})
    w(f"mode: {', '.join(modes)} (shipped = the file with the benchmark's prelude, no spec, no size cap; "
      "spec = the runner's spec and minimal prelude)")
    w(
        "XpilerBench (ShouyangDong/xpiler-eval) with xpiler: compile = the target's real compiler accepts"
        " the output;"
    )
    w("compute = the benchmark's numpy reference passes on the translation (cases whose source fails its")
    w("reference are excluded and shown apart, with the translation's fidelity to the source; cases whose")
    w("source does not compile with its own platform's compiler are left out of compile %; 'unrunnable' =")
    w("a GPU translation the CPU runtime cannot build, 'too large' = over the CPU runtime's size cap; a check that")
    w("ran out of time is a time-out, not a verdict).\n")
    hdr = (
        f"{'direction':<12} {'cases':>5} {'compile %':>17} {'compute %':>17} {'tool verified':>15} "
        f"{'v. wrong':>8} {'time-outs':>9} "
        f"{'src fails':>9} {'src no cc':>9} {'too large':>9} {'unrunnable':>10} {'median s':>8}   "
        "paper compile/compute"
    )
    w(hdr)
    w("-" * len(hdr))
    for d in directions:
        ks = [k for k in cases if k.direction == d]
        paper = PAPER.get(d)
        ptxt = f"{paper[0]:.1f} / {paper[1]:.1f} {paper[2]}" if paper else "(not in the paper)"
        src, dst = d.split("->")
        label = f"{PLATFORM_NAMES[src]}->{PLATFORM_NAMES[dst]}"
        notrun = [k for k in ks if k.status == "not-run"]
        if ks and len(notrun) == len(ks):
            w(f"{label:<12} {len(ks):>5}   {notrun[0].reason[:70]}   paper {ptxt}")
            continue
        tr = [k for k in ks if k.status == "translated"]
        nosrc = [k for k in tr if k.source_compiles is False]
        comp = [k for k in tr if k.compile_ok and k.source_compiles is not False]
        judged = [k for k in tr if k.compute in ("pass", "fail", "error", "not-run")]
        passed = [k for k in judged if k.compute == "pass"]
        unrun = [k for k in tr if k.compute == "unrunnable"]
        ver = [k for k in tr if k.tool_status == "verified"]
        srcf = [k for k in tr if k.compute == "source-fails-ref"]
        big = [k for k in tr if k.compute == "too-large"]
        timeouts = sum(1 for k in tr if k.timed_out or k.compute == "timeout")
        med = statistics.median([k.seconds for k in tr]) if tr else 0.0
        w(
            f"{label:<12} {len(ks):>5} {pct(len(comp), len(tr) - len(nosrc)):>17} "
            f"{pct(len(passed), len(judged)):>17} {len(ver):>6}/{len(tr):<8} "
            f"{sum(1 for k in ver if k.compute == 'fail'):>8} {timeouts:>9} "
            f"{len(srcf):>9} {len(nosrc):>9} "
            f"{len(big):>9} {len(unrun):>10} {med:>8.1f}   {ptxt}"
        )
    w("")
    w("Per operator group (compile % / compute %):")
    ds = [d for d in directions if any(k.direction == d and k.status == "translated" for k in cases)]
    w(f"{'group':<14}" + "".join(f"{d:>30}" for d in ds))
    for g in GROUPS:
        row = f"{g:<14}"
        for d in ds:
            tr = [k for k in cases if k.direction == d and k.group == g and k.status == "translated"]
            judged = [k for k in tr if k.compute in ("pass", "fail", "error", "not-run")]
            cc = [k for k in tr if k.source_compiles is not False]
            cp = sum(1 for k in cc if k.compile_ok)
            ok = sum(1 for k in judged if k.compute == "pass")
            cell = (f"{cp}/{len(cc)} | {ok}/{len(judged)}") if tr else "-"
            row += f"{cell:>30}"
        w(row)
    w("")
    bad = [k for k in cases if k.tool_status == "verified" and k.compute == "fail"]
    w(f"Tool said 'verified' but the independent check says wrong: {len(bad)} (must be 0)")
    for k in bad:
        w(f"  {k.direction:<11} {k.name:<32} {k.compute_reason}")
    unchecked = [k for k in cases if k.tool_status == "verified" and k.compute in ("error", "unrunnable")]
    if unchecked:
        w(f"Tool said 'verified' but the independent check could not run the translation: {len(unchecked)}")
        for k in unchecked:
            w(f"  {k.direction:<11} {k.name:<32} {k.compute_reason[:150]}")
    bad_diff = [k for k in cases if k.tool_status == "verified" and k.differential == "fail"]
    if bad_diff:
        w(f"Tool said 'verified' but the translation differs from its (wrong) source: {len(bad_diff)}")
        for k in bad_diff:
            w(f"  {k.direction:<11} {k.name:<32} {k.differential_reason}")
    w("")
    failing_sources = sorted(
        {
            (k.direction.split("->")[0], k.name, k.source_reason)
            for k in cases
            if k.source_check in ("fail", "error")
        }
    )
    w(f"Sources that fail the benchmark's reference (not charged to the translation): {len(failing_sources)}")
    for plat, name, why in failing_sources:
        w(f"  {plat:<5} {name:<32} {why[:150]}")
    gts = sorted(
        {
            (k.direction.split("->")[1], k.name, k.ground_truth_reason)
            for k in cases
            if k.ground_truth in ("fail", "error")
        }
    )
    gtp = len({(k.direction, k.name) for k in cases if k.ground_truth == "pass"})
    w(
        "Ground-truth files of the target that fail the same reference or cannot run on the CPU runtime: "
        f"{len(gts)}"
        f" (passing: {gtp})"
    )
    for plat, name, why in gts:
        w(f"  {plat:<5} {name:<32} {why[:150]}")
    w("")
    w("Failures (compile or compute) of the translation:")
    for k in cases:
        if k.status != "translated":
            continue
        if not k.compile_ok or k.compute in ("fail", "error", "not-run", "unrunnable"):
            why = k.compile_reason if not k.compile_ok else k.compute_reason
            w(
                f"  {k.direction:<11} {k.name:<32} tool={k.tool_status:<22} "
                f"compile={'ok' if k.compile_ok else 'NO'}"
                f" compute={k.compute:<8} {why[:160]}"
            )
            if k.tool_status != "verified" and k.tool_reason:
                w(f"  {'':<44} tool: {k.tool_reason[:170]}")
    fid = [k for k in cases if k.compute == "source-fails-ref"]
    if fid:
        w("")
        w("Cases whose source fails its reference: translation vs source (differential)")
        for k in fid:
            w(
                f"  {k.direction:<11} {k.name:<32} tool={k.tool_status:<22} "
                f"fidelity={k.differential or 'n/a':<6} "
                f"{k.differential_reason[:120]}"
            )
    skipped = [k for k in cases if k.status == "skipped"]
    if skipped:
        w("")
        w(f"Not translated (no spec could be built): {len(skipped)}")
        reasons: dict[str, list[str]] = {}
        for k in skipped:
            reasons.setdefault(f"{k.direction}: {k.reason[:90]}", []).append(k.name)
        for r_, names in sorted(reasons.items()):
            w(f"  {r_}  [{len(names)}] e.g. {names[0]}")
    return "\n".join(out)


def select(configs: list[Config], ops: list[str] | None, limit: int | None, pick: str | None = None) -> list[Config]:
    def size(c: Config) -> int:
        return _prod(c.args)

    by_op: dict[str, list[Config]] = {}
    for c in configs:
        if ops and c.op not in ops:
            continue
        by_op.setdefault(c.op, []).append(c)
    chosen: list[Config] = []
    for op in sorted(by_op):
        cs = sorted(by_op[op], key=size)
        if pick == "middle":
            chosen.append(cs[len(cs) // 2])
        elif pick == "largest":
            chosen.append(cs[-1])
        else:
            chosen += cs[:limit] if limit else cs
    return chosen


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="work tree of ShouyangDong/xpiler-eval")
    ap.add_argument("--direction", action="append", choices=DIRECTIONS, help="repeatable (default: all)")
    ap.add_argument("--op", action="append", help="operator name, repeatable (default: all)")
    ap.add_argument("--limit", type=int, help="the N smallest configurations of each operator")
    ap.add_argument("--middle", dest="pick", action="store_const", const="middle",
                    help="each operator's middle configuration")
    ap.add_argument("--largest", dest="pick", action="store_const", const="largest",
                    help="each operator's largest configuration")
    ap.add_argument("--mode", choices=("shipped", "spec"), default="shipped",
                    help="shipped: as a user runs the tool (default); spec: the runner hands the tool a spec")
    ap.add_argument("--json", type=Path, help="write every case record here (after each case)")
    ap.add_argument(
        "--resume", action="store_true", help="keep the cases already in --json and run only the others"
    )
    ap.add_argument("--workdir", type=Path, help="scratch folder (kept; default: a new temp folder)")
    ap.add_argument("--timeout", type=float, default=300.0, help="time limit of each subprocess (s)")
    ap.add_argument("--file-checks", type=Path, metavar="JSON",
                    help="keep the benchmark files' own verdicts (source / ground truth vs the reference, their "
                         "compiles) here and reuse them across runs and directions while the runtime and "
                         "verifier are unchanged")
    ap.add_argument(
        "--report", type=Path, nargs="+", metavar="JSON", help="only print the tables of earlier --json runs"
    )
    ns = ap.parse_args(argv)
    if ns.report:
        try:
            old = [k for f in ns.report for k in read_cases(f)]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"cannot read the runs: {exc}", file=sys.stderr)
            return 2
        present = [d for d in DIRECTIONS if any(k.direction == d for k in old)]
        print(summarize(old, [d for d in (ns.direction or present) if d in present]))
        return 0
    if not (ns.path / "XpilerBench").is_dir() or not (ns.path / "TransEval").is_dir():
        print(
            f"{ns.path}: not a work tree of ShouyangDong/xpiler-eval (XpilerBench/, TransEval/)",
            file=sys.stderr,
        )
        return 2
    workdir = ns.workdir or Path(tempfile.mkdtemp(prefix="xpilerbench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log(f"scratch: {workdir}")
    bench = Bench(ns.path, workdir, ns.timeout, ns.mode, ns.file_checks)
    directions = ns.direction or DIRECTIONS
    cases: list[Case] = read_cases(ns.json) if ns.resume and ns.json and ns.json.exists() else []
    done = {(k.direction, k.name) for k in cases}
    for d in directions:
        src = d.split("->")[0]
        todo = select(list(bench.configs[src].values()), ns.op, ns.limit, ns.pick)
        log(f"== {d}: {len(todo)} configurations ({sum((d, c.name) in done for c in todo)} already run)")
        for i, c in enumerate(todo, 1):
            if (d, c.name) in done:
                continue
            try:
                k = bench.case(d, c)
            except Exception as exc:  # a bug of this runner on one case must not stop the others
                k = Case(
                    d,
                    c.name,
                    c.op,
                    GROUP_OF.get(c.op, "?"),
                    status="not-run",
                    reason=f"runner error: {type(exc).__name__}: {exc}",
                )
            cases.append(k)
            log(
                f"  [{i}/{len(todo)}] {d} {c.name}: {k.status} tool={k.tool_status} "
                f"compile={k.compile_ok} compute={k.compute} src={k.source_check} gt={k.ground_truth} "
                f"{k.seconds:.1f}s {(k.reason or k.compute_reason or k.compile_reason)[:100]}"
            )
            if ns.json:  # after each case: a run stopped part way keeps what it measured (--resume goes on)
                write_cases(ns.json, ns.path, cases)
    print(summarize(cases, directions))
    return 0


def read_cases(path: Path) -> list[Case]:
    fields = set(Case.__dataclass_fields__)
    cases = [Case(**{k: v for k, v in r.items() if k in fields}) for r in json.loads(path.read_text())["cases"]]
    for k in cases:  # runs recorded before time-outs of the compute check had their own verdict
        if k.compute == "fail" and k.compute_reason.startswith("timeout after"):
            k.compute = "timeout"
    return cases


def write_cases(path: Path, root: Path, cases: list[Case]) -> None:
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(json.dumps({"root": str(root), "cases": [asdict(k) for k in cases]}, indent=1))
    partial.replace(path)


if __name__ == "__main__":
    sys.exit(main())
