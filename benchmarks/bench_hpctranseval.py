"""HPCTransEval (PJLAB-CHIP/HPCTransCompile): CUDA -> CPU with ``xpiler``, checked against the benchmark's C.

    python benchmarks/bench_hpctranseval.py PATH
        [--category IndependentOperator|ComputationGraph|ModelBuildingBlock] [--op NAME] [--limit N]
        [--json OUT] [--workdir DIR] [--timeout S] [--runs N] [--warmup N] [--threads N]
    python benchmarks/bench_hpctranseval.py PATH --report RUN.json [...]   # tables of saved runs

PATH is a work tree of PJLAB-CHIP/HPCTransCompile (``git archive HEAD | tar -x``; nothing of it is kept in
this repository); the items are read from ``HPCTransEval/<Category>.json`` (``cuda_code``, ``c_code``,
``ir_code``).

The benchmark ships TVM's CUDA device code only (no host code, no grid/block). Per item the runner

1. reads the operator's buffers (names, shapes, dtypes) from the ``main`` of the TVM IR and the C reference's
   parameter order from its signature;
2. derives each kernel's launch the way TVM generates it: block = ``__launch_bounds__``; grid from the guard
   ``if (E(blockIdx, threadIdx) < R)``, or from the largest index into a buffer of known size, or from a
   grid-stride loop; kernels launched in suffix order, parameters bound by name (by position when every
   kernel calls its output ``compute``), temporaries sized by their largest index (multi-dimensional
   launches and host loops are not derivable: such items are listed);
3. writes ``ITEM.cu`` = the device code + ``xb_launch`` (the launches, on device buffers) + ``run_all``
   (an ``extern "C"`` host wrapper in the C function's parameter order: cudaMalloc/cudaMemcpy, xb_launch, copy
   back; device buffers get ``PAD`` spare elements, as some unguarded TVM kernels write past the end), and a
   ``kind = "host"`` spec whose ``reference_source`` is the benchmark's C (+ the small prelude it needs:
   math.h, stdint.h, ``max``/``min``), ``reference_kind = "host"``, inputs U(0, 1);
4. runs the CUDA source against the C reference on the SIMT-on-CPU runtime (a source/launch that fails is
   "source fails its reference", not charged to the translation);
5. ``--mode shipped`` (default, as a user meets it): ``xpiler translate ITEM_kernels.cu --to cpu --json`` on the
   device code exactly as the benchmark ships it, no host code, no spec (the tool finds its own launch and
   tests, or says why not); OUT = that translation + the runner's host code in plain C++ calling each kernel as
   the translation exports it at the derived launch. ``--mode spec``: ``xpiler translate ITEM.cu --to cpu -o OUT
   --spec SPEC --json`` (the device code with the runner's host code and spec). Either way: the tool's verdict
   and time;
6. compile: ``g++`` with the optimization flags of ``--flags`` (``native``: ``-O3 -march=native``, the default;
   ``tool``: ``-O2``, what the tool's own compile check and a user's plain build use) and ``-fopenmp`` on OUT; correct (the independent check, outside xpiler's
   harness): OUT's ``run_all`` and the C reference, both built here, called through ctypes in a child process
   on the same two input sets, every output compared (atol = rtol = 1e-4, NaN equals NaN);
7. speed: OUT and the C reference built with the same flags, timed by the one method every benchmark shares
   (``benchmarks/timing.py``): both in one child process through ctypes, interleaved, ``--rounds`` samples of
   at least 1 ms each after a warm-up, the minimum of thread CPU time (wall time when ``--threads`` > 1), the
   ratio with a 95 % interval, the load recorded and a busy machine flagged (the translation's ``xb_launch``
   on preallocated buffers vs ``default_function_kernel``).

Goals reported against: tool-verified = correct >= 97 % per category, and speed >= 1.0x the reference C per
category (geometric mean of reference time / translation time). Progress goes to stderr, tables to stdout.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import re
import statistics
import sys
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench_cli import first_error, log, pct, run, run_xpiler, short, test_verdict

HERE = Path(__file__).resolve().parent
CATEGORIES = ["IndependentOperator", "ComputationGraph", "ModelBuildingBlock"]
C_PRELUDE = (
    "#include <math.h>\n#include <stdint.h>\n#include <stdbool.h>\n#include <float.h>\n"
    "#define max(a,b) ((a)>(b)?(a):(b))\n#define min(a,b) ((a)<(b)?(a):(b))\n"
)
CUDA_PRELUDE = "#include <stdint.h>\n"
FLAGS = ["-fopenmp", "-shared", "-fPIC", "-pthread"]  # after the optimization flags of --flags
IO_GROUPS: dict[str, list[str]] = {  # jiaqiLv/HPCTransEval evaluation/code_verification.sh
    "Elementwise": """erf leaky_relu sqrt asin tanh floor log sin prelu fast_exp log2 sign sigmoid isnan
        relu cos fast_tanh log10 round atan negative add tan atanh acos ceil asinh abs exp rsqrt sinh cosh
        combination_op fast_erf""".split(),
    "Reduction": """min global_pool_max global_pool_avg sum max rms_norm log_softmax softmax fast_softmax
        softmax_common prod pool3d pool1d pool2d adaptive_pool_max adaptive_pool_avg""".split(),
    "Layout_Transform": """unpack_NCHWc_to_nchw flatten scale_shift_nchw flip depth_to_space batch_to_space_nd
        strided_slice space_to_depth scale_shift_nchwc mirror_pad dilate reshape transpose gather_nd
        scatter_nd reorg""".split(),
    "Logic_Intensive": """fifo_buffer multi_out_op shape upsampling resize2d resize3d grid_sample
        argsort""".split(),
    "Compute_Intensive": "lrn matmul conv2d_opt dft group_conv2d_opt batch_matmul_opt".split(),
}
GROUP_OF = {op: g for g, ops in IO_GROUPS.items() for op in ops}
DTYPE_C = {
    "float32": "float",
    "int32": "int",
    "int64": "int64_t",
    "bool": "bool",
    "int8": "int8_t",
    "float64": "double",
    "uint8": "uint8_t",
    "int16": "int16_t",
}
# the tool's tree is edited while benchmarks run: a crash of xpiler itself on these is rerun, not counted
PAD = 4096  # elements added to every device buffer: some unguarded TVM kernels write past the end (32 threads
# on an 18-element buffer); the harness must not turn that source bug into a crash of the translation
STACK_BYTES = 1 << 30  # TVM's C references keep up to ~95 MiB arrays on the stack


# ------------------------------------------------------------------------------------------------------------
# items


@dataclass
class Buffer:
    name: str
    shape: list[int]
    dtype: str

    @property
    def size(self) -> int:
        return max(1, math.prod(self.shape))


@dataclass
class Kernel:
    name: str
    block: int
    params: list[tuple[str, str]]  # (name, C type of the pointee)
    text: str
    grid: int = 0
    bind: dict[str, str] = field(default_factory=dict)  # local parameter name -> the operator's buffer

    @property
    def order(self) -> int:
        m = re.search(r"_(\d+)$", self.name)
        return int(m.group(1)) + 1 if m else 0


@dataclass
class Item:
    category: str
    index: int
    op: str
    label: str
    cuda: str
    c: str
    ir: str

    @property
    def tag(self) -> str:
        return f"{self.category[:2]}_{self.index:03d}_{self.op}"


def load_items(root: Path, category: str) -> list[Item]:
    data = json.loads((root / "HPCTransEval" / f"{category}.json").read_text())
    items = []
    for i, x in enumerate(data):
        label = f"{x['op_name']}_{x['op_args']}_{x['input_shape']}"
        items.append(
            Item(category, i, x["op_name"], label, x.get("cuda_code") or "", x["c_code"], x["ir_code"])
        )
    return items


def main_buffers(ir: str) -> dict[str, Buffer]:
    m = re.search(r"def main\((.*?)\):", ir, re.S)
    if m is None:
        return {}
    found = re.findall(r'(\w+): T\.Buffer\(\(([^)]*)\),\s*"(\w+)"', m.group(1))
    return {n: Buffer(n, [int(v) for v in s.split(",") if v.strip()], d) for n, s, d in found}


def c_params(c: str) -> list[tuple[str, str]]:
    m = re.search(r"void\s+default_function_kernel\s*\(([^)]*)\)", c)
    if m is None:
        return []
    out = []
    for p in m.group(1).split(","):
        p = p.strip()
        if p:
            name = re.split(r"[\s*]+", p)[-1]
            out.append((name, p[: p.rfind(name)].replace("*", "").strip()))
    return out


# ------------------------------------------------------------------------------------------------------------
# launch derivation (TVM conventions)

_SAFE = re.compile(r"^[\w\s()+\-*/%<>&|^~]*$")


def _py(expr: str) -> str:
    e = expr.replace("((int)blockIdx.x)", "bx").replace("((int)threadIdx.x)", "tx")
    e = e.replace("blockIdx.x", "bx").replace("threadIdx.x", "tx")
    return re.sub(r"(?<![/])/(?![/])", "//", e)


def _vars(e: str) -> list[str]:
    return sorted({v for v in re.findall(r"\b[A-Za-z_]\w*\b", e) if v not in ("bx", "tx")})


def _eval(e: str, bx: int, tx: int, extra: dict[str, int] | None = None) -> int:
    if not _SAFE.match(e) or "__" in e:
        raise ValueError(f"unexpected expression {e!r}")
    env: dict[str, int] = {v: 0 for v in _vars(e)}
    env.update(extra or {})
    env.update(bx=bx, tx=tx)
    return int(eval(e, {"__builtins__": {}}, env))  # noqa: S307 - whitelisted integer arithmetic only


def _grid_from(e: str, bound: int) -> int | None:
    """Smallest grid whose first thread reaches ``bound`` (E increasing in blockIdx), or for a grid-stride
    loop the loop variable's stride over the block stride."""
    loop_vars = _vars(e)
    if loop_vars:
        per_block = _eval(e, 1, 0) - _eval(e, 0, 0)
        per_iter = _eval(e, 0, 0, {loop_vars[0]: 1}) - _eval(e, 0, 0)
        if per_block > 0 and per_iter > 0 and per_iter % per_block == 0:
            return per_iter // per_block
        return None
    if _eval(e, 1, 0) <= _eval(e, 0, 0):
        return None
    g = 0
    while _eval(e, g, 0) < bound:
        g += 1
        if g > 1 << 22:
            return None
    return g


def _loop_bounds(body: str) -> dict[str, int]:
    """Constant trip counts of ``for (int v = 0; v < N; ++v)`` loops."""
    found = re.findall(r"for \(int (\w+) = 0; \1 < (\d+); \+\+\1\)", body)
    return {v: int(n) for v, n in found}


def _corner_max(e: str, k: Kernel, bounds: dict[str, int]) -> int:
    """Largest value of an index at the corners of its iteration space (TVM's indices are sums of non-negative
    terms, monotone in each variable; a temporary sized too small shows up as the source failing)."""
    names = _vars(e)
    best = 0
    for mask in range(1 << len(names)):
        extra = {v: (bounds[v] - 1 if mask >> i & 1 else 0) for i, v in enumerate(names)}
        for bx, tx in ((0, 0), (k.grid - 1, k.block - 1), (k.grid - 1, 0), (0, k.block - 1)):
            best = max(best, _eval(e, bx, tx, extra))
    return best


def parse_kernels(cuda: str) -> list[Kernel]:
    parts = [p for p in re.split(r'(?=extern "C" __global__)', cuda) if "__global__" in p]
    kernels = []
    for p in parts:
        m = re.search(r"__global__\s+void\s+(?:__launch_bounds__\((\d+)\)\s+)?(\w+)\s*\(([^)]*)\)", p)
        if m is None:
            continue
        params = []
        for q in m.group(3).split(","):
            q = q.replace("__restrict__", " ").strip()
            if not q:
                continue
            name = re.split(r"[\s*]+", q)[-1]
            ctype = " ".join(q[: q.rfind(name)].replace("*", " ").split())
            params.append((name, ctype if "*" in q else f"scalar {ctype}"))
        kernels.append(Kernel(m.group(2), int(m.group(1)) if m.group(1) else 1, params, p))
    return sorted(kernels, key=lambda k: k.order)


@dataclass
class Launch:
    kernels: list[Kernel]
    temps: dict[str, tuple[str, int]]  # name -> (C type, elements)
    outputs: list[str]


def derive_launch(item: Item, bufs: dict[str, Buffer], cparams: list[tuple[str, str]]) -> Launch | str:
    if not item.cuda:
        return "no CUDA code"
    if any(s in item.cuda for s in ("blockIdx.y", "blockIdx.z", "threadIdx.y", "threadIdx.z")):
        return "multi-dimensional launch (grid/block not derivable from the device code)"
    if {n for n, _ in cparams} != set(bufs):
        return "the C function's parameters are not the operator's buffers (IR main)"
    kernels = parse_kernels(item.cuda)
    if not kernels:
        return "no kernel found"
    scalars = sorted({t for k in kernels for _, t in k.params if t.startswith("scalar ")})
    if scalars:
        return f"kernels take scalar parameters ({', '.join(scalars)}): launched from a host loop"
    written = [n for n, _ in cparams if _writes(item.c, n)]
    why = bind_outputs(kernels, written, item.c)
    if why:
        return why
    sizes = {n: b.size for n, b in bufs.items()}
    temps: dict[str, tuple[str, int]] = {}
    for k in kernels:
        body = k.text
        if "blockIdx.x" not in body:
            k.grid = 1
        else:
            g = re.search(r"if \((.*?blockIdx.*?) < (\d+)\) \{", body)
            grid: int | None = None
            if g:
                grid = _grid_from(_py(g.group(1)), int(g.group(2)))
                if grid is None:
                    return f"{k.name}: guard not usable for the grid"
            else:
                for st in re.finditer(r"(\w+)\[([^\[\]]*(?:\[[^\]]*\][^\[\]]*)*)\]", body):
                    buf, idx = st.group(1), _py(st.group(2))
                    if "bx" not in idx:
                        continue
                    size = sizes.get(k.bind.get(buf, buf)) or temps.get(buf, ("", 0))[1]
                    if not size:
                        continue
                    try:
                        grid = _grid_from(idx, size)
                    except (ValueError, SyntaxError, ZeroDivisionError):
                        grid = None
                    if grid:
                        break
            if not grid:
                return f"{k.name}: no grid derivable (no guard, no indexed buffer of known size)"
            k.grid = grid
        for pname, ptype in k.params:
            if pname in bufs or pname in k.bind:
                continue
            most = 0
            bounds = _loop_bounds(body)
            for st in re.finditer(r"\b" + re.escape(pname) + r"\[([^\[\]]*)\]", body):
                e = _py(st.group(1))
                unknown = [v for v in _vars(e) if v not in bounds]
                if unknown:
                    return f"{k.name}: temporary {pname} indexed by {unknown[0]} (no constant loop bound)"
                try:
                    most = max(most, _corner_max(e, k, bounds) + 1)
                except (ValueError, SyntaxError, ZeroDivisionError):
                    return f"{k.name}: temporary {pname} not sizable"
            old = temps.get(pname, (ptype, 0))[1]
            temps[pname] = (ptype, max(old, most))
    if any(n == 0 for _, n in temps.values()):
        return f"temporaries not sizable: {sorted(t for t, (_, n) in temps.items() if n == 0)}"
    return Launch(kernels, temps, written)


def _base(name: str) -> str:
    return re.sub(r"_\d+$", "", name)


def bind_outputs(kernels: list[Kernel], written: list[str], c: str) -> str:
    """Kernel parameter names are local to each kernel (every kernel of a graph may call its output
    ``compute``). When the C function's outputs are not all written under their own names, bind them by
    position: the k-th output the kernels write (launch order) is the k-th output the C code writes, provided
    their base names agree and no other kernel reads such a local name. Returns a reason when impossible."""
    by_name = {n for k in kernels for n, _ in k.params if _writes(k.text, n)}
    if all(n in by_name for n in written):
        return ""
    bases = {_base(o) for o in written}
    order = sorted(written, key=lambda n: _first_write(c, n))
    slots = [(k, n) for k in kernels for n, _ in k.params if _writes(k.text, n) and _base(n) in bases]
    if len(slots) != len(order) or any(_base(n) != _base(o) for (_, n), o in zip(slots, order, strict=True)):
        return f"kernel parameter names are local and outputs {order[:3]} cannot be bound by position"
    local = {n for _, n in slots}
    for k in kernels:
        if any(n in local and not _writes(k.text, n) for n, _ in k.params):
            return "kernel parameter names are local and a kernel reads another kernel's output name"
    for (k, n), o in zip(slots, order, strict=True):
        k.bind[n] = o
    return ""


def _first_write(code: str, name: str) -> int:
    m = re.search(r"\b" + re.escape(name) + r"\[[^\]]*\]\s*=(?!=)", code)
    return m.start() if m else len(code)


def _writes(code: str, name: str) -> bool:
    return re.search(r"\b" + re.escape(name) + r"\[[^\]]*\]\s*=(?!=)", code) is not None


def host_code(bufs: dict[str, Buffer], cparams: list[tuple[str, str]], launch: Launch, call: str = "cuda",
              launched_by_output: frozenset[str] = frozenset()) -> str:
    """``xb_launch`` (kernels on device buffers, temporaries as parameters) and ``run_all`` (host wrapper in
    the C function's parameter order). ``call``: ``cuda`` (the device code + this is the CUDA source), or, for
    the CPU translation of the device code as shipped (shipped mode), in plain C++ on host buffers: ``cpu``
    calls each kernel as the translation exports it, ``NAME(dim3 grid, dim3 block, size_t shared, ...)``, and
    ``portable`` through the runtime's launch (the portable tier); a kernel in ``launched_by_output`` is a host
    function of the translation with the kernel's own parameters (it launches the grid the kernel's guards fix,
    the one this runner derives too). Buffers get ``PAD`` spare elements."""
    ctype = {n: t for n, t in cparams}
    dev = [(n, ctype[n]) for n, _ in cparams] + [(t, ty) for t, (ty, _) in launch.temps.items()]
    on_host = call != "cuda"
    lines = ["#include <stdlib.h>", "#include <string.h>"] if on_host else []
    lines.append(f'extern "C" void xb_launch({", ".join(f"{ty}* {n}" for n, ty in dev)}) {{')
    for k in launch.kernels:
        args = ", ".join(f"({ty}*){k.bind.get(n, n)}" for n, ty in k.params)
        if k.name in launched_by_output:
            lines.append(f"  {k.name}({args});")
            continue
        lines.append({
            "cuda": f"  {k.name}<<<{k.grid}, {k.block}>>>({args});",
            "cpu": f"  {k.name}(dim3({k.grid}), dim3({k.block}), (size_t)0, {args});",
            "portable": f'  ::xpiler::launch(::xpiler::deduced_kernel("{k.name}", [&](auto... a) {{ {k.name}(a...); }}),'
                        f" dim3({k.grid}), dim3({k.block}), 0)({args});",
        }[call])
    lines.append("}")
    lines.append(f'extern "C" void run_all({", ".join(f"{ctype[n]}* h_{n}" for n, _ in cparams)}) {{')
    for n, ty in dev:
        count = bufs[n].size if n in bufs else launch.temps[n][1]
        lines.append(f"  {ty}* {n} = ({ty}*)calloc({count} + {PAD}, sizeof({ty}));" if on_host else
                     f"  {ty}* {n}; cudaMalloc((void**)&{n}, ({count} + {PAD}) * sizeof({ty}));")
        if n in bufs and n not in launch.outputs:
            lines.append(f"  memcpy({n}, h_{n}, {count} * sizeof({ty}));" if on_host else
                         f"  cudaMemcpy({n}, h_{n}, {count} * sizeof({ty}), cudaMemcpyHostToDevice);")
    lines.append(f"  xb_launch({', '.join(n for n, _ in dev)});")
    for n, ty in dev:
        if n in launch.outputs:
            lines.append(f"  memcpy(h_{n}, {n}, {bufs[n].size} * sizeof({ty}));" if on_host else
                         f"  cudaMemcpy(h_{n}, {n}, {bufs[n].size} * sizeof({ty}), cudaMemcpyDeviceToHost);")
    lines += [f"  free({n});" if on_host else f"  cudaFree({n});" for n, _ in dev]
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_spec(
    path: Path,
    item: Item,
    bufs: dict[str, Buffer],
    cparams: list[tuple[str, str]],
    outputs: list[str],
    n_cases: int,
    timeout_s: int = 240,
) -> None:
    lines = [
        f'name = "{item.tag}"',
        f'source = "{item.tag}.cu"',
        'entry = "run_all"',
        'kind = "host"',
        f'reference_source = "{item.tag}_ref.c"',
        'reference_entry = "default_function_kernel"',
        'reference_kind = "host"',
        "tolerance = { atol = 1e-4, rtol = 1e-4 }",
        f"timeout_s = {timeout_s}",
    ]
    for n, _ in cparams:
        b = bufs[n]
        lines += ["", "[[args]]", f'name = "{n}"', f'dtype = "{b.dtype}"', f"shape = {b.shape or [1]}"]
        if n in outputs:
            lines.append('role = "out"')
        else:
            lines += [
                'role = "in"',
                'init = "uniform(0, 1)"' if b.dtype.startswith("float") else 'init = "zeros"',
            ]
    for i in range(n_cases):
        lines += ["", "[[cases]]", f"seed_case = {i}"]
    path.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------------------------
# running things


# ------------------------------------------------------------------------------------------------------------
# timing: both sides in one process, interleaved (benchmarks/timing.py)


def time_pair(ref_so: str, ours_so: str, ref_bufs: list[dict[str, Any]], ours_bufs: list[dict[str, Any]],
              rounds: int, threads: int) -> dict[str, Any]:
    """The reference's ``default_function_kernel`` and the translation's ``xb_launch``, each on its own buffers,
    timed by the shared method (run in a child process, so a crash costs only this item)."""
    from timing import compare

    calls = []
    for so, symbol, bufs in ((ref_so, "default_function_kernel", ref_bufs), (ours_so, "xb_launch", ours_bufs)):
        fn = getattr(ctypes.CDLL(so), symbol)
        fn.restype = None
        arrays = _inputs(bufs, 0)
        fn.argtypes = [ctypes.c_void_p] * len(arrays)
        ptrs = [a.ctypes.data for a in arrays]
        calls.append((fn, ptrs, arrays))  # arrays kept alive with their pointers
    (f_ref, p_ref, _), (f_ours, p_ours, _) = calls
    got = compare(lambda: f_ref(*p_ref), lambda: f_ours(*p_ours), names=("reference", "translation"),
                  rounds=rounds, clock="cpu" if threads == 1 else "wall")
    return {"t_ref": got.a.cpu_min if got.clock == "cpu" else got.a.wall_min,
            "t_ours": got.b.cpu_min if got.clock == "cpu" else got.b.wall_min,
            "interval": list(got.interval), "busy": got.busy, "load": [got.load_before, got.load_after],
            "clock": got.clock}


def _inputs(buffers: list[dict[str, Any]], seed: int) -> list[Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    arrays = []
    for b in buffers:
        n = b["size"] + b.get("pad", 0)
        if b["dtype"].startswith("float") and not b.get("out"):
            arrays.append(rng.uniform(0, 1, size=n).astype(b["dtype"]))
        else:
            arrays.append(np.zeros(n, dtype=b["dtype"]))
    return arrays


def check_one(ours: str, ref: str, buffers: list[dict[str, Any]], tol: float) -> str:
    """Call ``run_all`` of the translation and the C reference on the same inputs (two input sets) and compare
    every output (run in a child process)."""
    import numpy as np

    f_ours, f_ref = ctypes.CDLL(ours).run_all, ctypes.CDLL(ref).default_function_kernel
    for f in (f_ours, f_ref):
        f.restype = None
        f.argtypes = [ctypes.c_void_p] * len(buffers)
    for seed in (0, 1):
        a = _inputs(buffers, seed)
        b = [x.copy() for x in a]
        f_ref(*[x.ctypes.data for x in a])
        f_ours(*[x.ctypes.data for x in b])
        for i, spec in enumerate(buffers):
            if not spec["out"]:
                continue
            exp, got = a[i].astype(np.float64), b[i].astype(np.float64)
            ok = np.isclose(got, exp, atol=tol, rtol=tol, equal_nan=True)
            if not ok.all():
                j = int(np.flatnonzero(~ok)[0])
                return (
                    f"fail output #{i}: {int((~ok).sum())} of {ok.size} differ, first at {j}: expected "
                    f"{exp[j]!r}, got {got[j]!r}"
                )
    return "pass"


def checked(
    ours: Path, ref: Path, buffers: list[dict[str, Any]], cwd: Path, timeout: float
) -> tuple[str, str]:
    job = json.dumps({"ours": str(ours), "ref": str(ref), "buffers": buffers, "tol": 1e-4})
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = run([sys.executable, str(Path(__file__).resolve()), "--check-one", job], cwd, timeout, env, STACK_BYTES)
    m = re.search(r"XB_CHECK (pass|fail)(.*)", r.out)
    if m:
        return m.group(1), m.group(2).strip()
    if r.rc == 124:
        return "fail", r.out
    return "fail", f"crashed (exit {r.rc}): {short(r.out)}"


def timed(ref_so: Path, ours_so: Path, ref_bufs: list[dict[str, Any]], ours_bufs: list[dict[str, Any]],
          rounds: int, threads: int, cwd: Path, timeout: float) -> tuple[dict[str, Any] | None, str]:
    job = json.dumps({"ref": str(ref_so), "ours": str(ours_so), "ref_bufs": ref_bufs, "ours_bufs": ours_bufs,
                      "rounds": rounds, "threads": threads})
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), XPILER_THREADS=str(threads),
               PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent),
                                                        os.environ.get("PYTHONPATH")])))
    r = run([sys.executable, str(Path(__file__).resolve()), "--time-pair", job], cwd, timeout, env, STACK_BYTES)
    m = re.search(r"XB_TIMING (\{.*\})", r.out)
    return (json.loads(m.group(1)), "") if m else (None, short(r.out) or f"exit {r.rc}")


OPT_FLAGS = {"native": ["-O3", "-march=native"], "tool": ["-O2"]}


def build_so(src: Path, so: Path, cwd: Path, timeout: float, cplusplus: bool, opt: str = "native") -> tuple[bool, str]:
    compiler = ["g++", "-x", "c++", "-std=c++17"] if cplusplus else ["gcc", "-x", "c"]
    r = run([*compiler, *OPT_FLAGS[opt], *FLAGS, f"-I{src.parent}", str(src), "-o", str(so)], cwd, timeout, stack_bytes=STACK_BYTES)
    return r.rc == 0, first_error(r.out)


# ------------------------------------------------------------------------------------------------------------
# one item


@dataclass
class Result:
    category: str
    tag: str
    op: str
    label: str
    group: str = ""
    status: str = ""  # translated | skipped
    reason: str = ""
    source_check: str = ""
    source_reason: str = ""
    tool_status: str = ""
    tool_reason: str = ""
    compile_ok: bool | None = None
    compile_reason: str = ""
    correct: str = ""  # pass | fail | error | source-fails-ref | not-run
    correct_reason: str = ""
    seconds: float = 0.0
    t_ref: float | None = None
    t_ours: float | None = None
    t_interval: list[float] | None = None  # 95 % interval of the median per-round ratio
    timed_busy: bool = False  # the load exceeded the cores while timing: not a result
    speed_reason: str = ""
    launches: list[str] = field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        return self.t_ref / self.t_ours if self.t_ref and self.t_ours else None


def evaluate(item: Item, workdir: Path, ns: argparse.Namespace) -> Result:
    res = Result(item.category, item.tag, item.op, item.label, GROUP_OF.get(item.op, item.category))
    bufs = main_buffers(item.ir)
    cparams = c_params(item.c)
    if not bufs or not cparams:
        res.status, res.reason = "skipped", "no IR main or no C signature"
        return res
    bad = [b.dtype for b in bufs.values() if b.dtype not in DTYPE_C]
    if bad:
        res.status, res.reason = "skipped", f"buffer dtypes {bad}"
        return res
    launch = derive_launch(item, bufs, cparams)
    if isinstance(launch, str):
        res.status, res.reason = "skipped", launch
        return res
    res.launches = [f"{k.name}<<<{k.grid},{k.block}>>>" for k in launch.kernels]
    where = workdir / item.tag
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{item.tag}.cu").write_text(
        CUDA_PRELUDE + item.cuda + "\n" + host_code(bufs, cparams, launch)
    )
    (where / f"{item.tag}_ref.c").write_text(C_PRELUDE + item.c)
    write_spec(where / "tool.toml", item, bufs, cparams, launch.outputs, 1)
    write_spec(where / "check.toml", item, bufs, cparams, launch.outputs, 2)
    res.status = "translated"
    # the CUDA source (with the derived launch) against the C reference
    res.source_check, res.source_reason = test_verdict(run_xpiler(["test", "check.toml"], where, ns.timeout, STACK_BYTES))
    out = where / "out.cpp"
    if ns.mode == "shipped":
        # as a user runs it: the device code as the benchmark ships it, no host code, no spec
        (where / f"{item.tag}_kernels.cu").write_text(item.cuda)
        translated = where / "out_kernels.cpp"
        translated.unlink(missing_ok=True)
        command = ["translate", f"{item.tag}_kernels.cu", "--to", "cpu", "-o", translated.name, "--json"]
    else:
        translated = out
        command = ["translate", f"{item.tag}.cu", "--to", "cpu", "-o", out.name, "--spec", "tool.toml", "--json"]
    r = run_xpiler(command, where, ns.timeout, STACK_BYTES)
    if ns.mode == "shipped":
        out.unlink(missing_ok=True)
        if translated.is_file():
            text = translated.read_text()
            own = frozenset(k.name for k in launch.kernels
                            if re.search(rf'extern "C" void {re.escape(k.name)}\s*\((?!\s*dim3)', text))
            out.write_text(text + "\n" + host_code(bufs, cparams, launch, "portable" if "xpiler_simt" in text else "cpu",
                                                    own))
    res.seconds = r.seconds
    try:
        tool = json.JSONDecoder().raw_decode(r.out[r.out.index("{") :])[0] if "{" in r.out else None
    except ValueError:
        tool = None
    if tool is None:
        res.tool_status, res.tool_reason = ("timeout" if r.rc == 124 else "crash"), short(r.out)
    else:
        res.tool_status, res.tool_reason = tool.get("status", "?"), tool.get("reason", "")
    if not out.is_file():
        res.compile_ok, res.compile_reason = False, "no output: " + (res.tool_reason or short(r.out))[:200]
        res.correct, res.correct_reason = "not-run", "no translation"
        return res
    # compile: the translation and the reference with the same flags (the .so files serve check and timing)
    so_ours, so_ref = where / "ours.so", where / "ref.so"
    res.compile_ok, why = build_so(out, so_ours, where, ns.timeout, cplusplus=True, opt=ns.flags)
    res.compile_reason = "" if res.compile_ok else why
    ref_ok, ref_why = build_so(where / f"{item.tag}_ref.c", so_ref, where, ns.timeout, cplusplus=False, opt=ns.flags)
    # correct: run_all of the translation vs the C reference through ctypes, outside xpiler's harness
    ref_bufs = [
        {"size": bufs[n].size, "dtype": bufs[n].dtype, "out": n in launch.outputs} for n, _ in cparams
    ]
    if not ref_ok:
        verdict, why = "error", f"the C reference does not build: {ref_why}"
    elif not res.compile_ok:
        verdict, why = "not-run", "the translation does not compile"
    else:
        verdict, why = checked(so_ours, so_ref, ref_bufs, where, ns.timeout)
    if res.source_check != "pass":
        res.correct = "source-fails-ref"
        res.correct_reason = f"translation vs C reference: {verdict} {why}".strip()
    else:
        res.correct, res.correct_reason = verdict, why
    # speed, only for a correct translation: xb_launch on preallocated buffers vs default_function_kernel
    if res.correct == "pass" and ns.rounds > 0:
        ours_bufs = [dict(b, pad=PAD) for b in ref_bufs] + [
            {"size": n, "dtype": _np_dtype_c(ty), "out": False, "pad": PAD} for ty, n in launch.temps.values()
        ]
        got, err = timed(so_ref, so_ours, ref_bufs, ours_bufs, ns.rounds, ns.threads, where, ns.timeout)
        if got is None:
            res.speed_reason = err
        else:
            res.t_ref, res.t_ours, res.t_interval, res.timed_busy = (got["t_ref"], got["t_ours"], got["interval"],
                                                                    got["busy"])
    return res


def _np_dtype_c(ctype: str) -> str:
    return {
        "float": "float32",
        "int": "int32",
        "signed char": "int8",
        "char": "int8",
        "bool": "bool",
        "int64_t": "int64",
        "double": "float64",
    }.get(ctype, "float32")


# ------------------------------------------------------------------------------------------------------------
# report


def _interval(r: Result) -> str:
    return f"[{r.t_interval[0]:.2f}, {r.t_interval[1]:.2f}]" if r.t_interval else ""


def geomean(xs: list[float]) -> float | None:
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None


def summarize(results: list[Result], ns: argparse.Namespace) -> str:
    out: list[str] = []
    w = out.append
    w(
        "HPCTransEval (PJLAB-CHIP/HPCTransCompile) CUDA -> CPU with xpiler. correct = the benchmark's C "
        "reference"
    )
    w("and the translation agree on the same inputs (ctypes, outside xpiler); tool-verified = the tool's own")
    w("verdict on " + ("the device code as the benchmark ships it (no host code, no spec: the tool finds its own "
                       "launch and tests; the runner judges the translation at its derived launch)"
                       if ns.mode == "shipped" else
                       "the device code + the runner's host code and spec (the spec-given mode)") + ";")
    w(
        f"speed = reference C time / translation time (gcc/g++ {' '.join(OPT_FLAGS[ns.flags])} "
        f"{' '.join(FLAGS[:1])} on both sides, {ns.threads} thread(s),"
    )
    w(f"both sides in one process, interleaved, min of {ns.rounds} rounds of "
      f"{'thread CPU' if ns.threads == 1 else 'wall'} time, each sample >= 1 ms; benchmarks/timing.py).")
    busy = [r for r in results if r.timed_busy]
    if busy:
        w(f"FLAG: {len(busy)} item(s) were timed while the load exceeded the cores: their speed is not a result.")
    w("Goals: tool-verified = correct >= 97 %; speed geomean >= 1.0x per category.\n")
    hdr = (
        f"{'category':<20} {'items':>5} {'launch ok':>9} {'compile':>16} {'correct':>16} "
        f"{'tool verified':>16} "
        f"{'src fails':>9} {'speed geomean':>13} {'median s':>8}"
    )
    w(hdr)
    w("-" * len(hdr))
    rows = defaultdict(list)
    for r in results:
        rows[r.category].append(r)
        if r.category == "IndependentOperator":
            rows[f"  IO/{r.group}"].append(r)
    for cat in sorted(rows, key=lambda c: (c.strip().startswith("IO/"), c)):
        rs = rows[cat]
        tr = [r for r in rs if r.status == "translated"]
        judged = [r for r in tr if r.correct in ("pass", "fail", "error", "not-run")]
        comp = sum(1 for r in tr if r.compile_ok)
        ok = sum(1 for r in judged if r.correct == "pass")
        ver = sum(1 for r in tr if r.tool_status == "verified")
        srcf = sum(1 for r in tr if r.correct == "source-fails-ref")
        sp = geomean([r.speedup for r in tr if r.speedup])
        med = statistics.median([r.seconds for r in tr]) if tr else 0.0
        nsp = sum(1 for r in tr if r.speedup)
        sptxt = f"{sp:.2f}x ({nsp})" if sp else "n/a"
        w(
            f"{cat:<20} {len(rs):>5} {len(tr):>9} {pct(comp, len(tr)):>16} {pct(ok, len(judged)):>16} "
            f"{pct(ver, len(tr)):>16} {srcf:>9} {sptxt:>13} {med:>8.1f}"
        )
    w("")
    for cat in CATEGORIES:
        tr = [r for r in results if r.category == cat and r.status == "translated"]
        if not tr:
            continue
        judged = [r for r in tr if r.correct in ("pass", "fail", "error", "not-run")]
        ok = sum(1 for r in judged if r.correct == "pass")
        ver = sum(1 for r in judged if r.tool_status == "verified")
        sp = geomean([r.speedup for r in tr if r.speedup])
        goal1 = "MET" if judged and ver >= 0.97 * ok and ok > 0 else "NOT MET"
        goal2 = "MET" if sp and sp >= 1.0 else "NOT MET"
        w(
            f"{cat}: tool-verified {ver} vs correct {ok} of {len(judged)} judged -> goal tool-verified = "
            "correct "
            f">= 97 %: {goal1}; speed {sp and f'{sp:.2f}x'} -> goal >= 1.0x: {goal2}"
        )
    w("")
    bad = [r for r in results if r.tool_status == "verified" and r.correct in ("fail", "error")]
    w(f"Tool said 'verified' but the C reference disagrees with the translation: {len(bad)} (must be 0)")
    for r in bad:
        w(f"  {r.tag:<34} {r.correct_reason[:150]}")
    w("")
    timed_rs = sorted((r for r in results if r.speedup), key=lambda r: r.speedup or 0)
    w("Slowest ten translations relative to the reference C:")
    for r in timed_rs[:10]:
        w(
            f"  {r.tag:<34} {r.speedup:6.3f}x {_interval(r):>17}  ref {(r.t_ref or 0) * 1e6:9.1f} us  "
            f"ours {(r.t_ours or 0) * 1e6:9.1f} us  "
            f"{' '.join(r.launches)[:60]}"
        )
    w("")
    w("Failures of the translation (compile or correctness) and tool verdicts other than verified:")
    for r in results:
        if r.status != "translated":
            continue
        if (
            not r.compile_ok
            or r.correct in ("fail", "error", "not-run")
            or (r.correct == "pass" and r.tool_status != "verified")
        ):
            why = r.compile_reason if not r.compile_ok else r.correct_reason
            w(
                f"  {r.tag:<34} tool={r.tool_status:<22} compile={'ok' if r.compile_ok else 'NO'} "
                f"correct={r.correct:<8} {why[:120]}"
            )
            if r.tool_status != "verified" and r.tool_reason:
                w(f"  {'':<34} tool: {r.tool_reason[:160]}")
    failing_sources = [
        r
        for r in results
        if r.correct == "source-fails-ref" or (r.status == "translated" and r.source_check != "pass")
    ]
    if failing_sources:
        w("")
        w("CUDA source + derived launch fails the C reference (not charged to the translation):")
        for r in failing_sources:
            w(f"  {r.tag:<34} {r.source_reason[:110]} || translation: {r.correct_reason[:60]}")
    spr = [r for r in results if r.speed_reason]
    if spr:
        w("")
        w("Not timed:")
        for r in spr:
            w(f"  {r.tag:<34} {r.speed_reason[:150]}")
    skipped = [r for r in results if r.status == "skipped"]
    if skipped:
        w("")
        w(f"Not translated (launch or buffers not derivable from the benchmark's data): {len(skipped)}")
        for r in skipped:
            w(f"  {r.tag:<34} {r.reason[:120]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--time-pair":  # child process of timed()
        job = json.loads(sys.argv[2])
        got = time_pair(job["ref"], job["ours"], job["ref_bufs"], job["ours_bufs"], job["rounds"], job["threads"])
        print("XB_TIMING " + json.dumps(got))
        return 0
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--check-one":  # child process of checked()
        job = json.loads(sys.argv[2])
        print(f"XB_CHECK {check_one(job['ours'], job['ref'], job['buffers'], job['tol'])}")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", type=Path, help="work tree of PJLAB-CHIP/HPCTransCompile")
    ap.add_argument("--category", action="append", choices=CATEGORIES, help="repeatable (default: all)")
    ap.add_argument("--op", action="append", help="operator name (op_name), repeatable")
    ap.add_argument("--limit", type=int, help="first N items of each category")
    ap.add_argument("--json", type=Path, help="write every item's record here")
    ap.add_argument("--workdir", type=Path, help="scratch folder (kept; default: a new temp folder)")
    ap.add_argument("--timeout", type=float, default=300.0, help="time limit of each subprocess (s)")
    ap.add_argument("--rounds", type=int, default=31, help="interleaved timing rounds per side (0: no timing)")
    ap.add_argument("--threads", type=int, default=1, help="OpenMP threads, both sides (1: thread CPU time)")
    ap.add_argument("--mode", choices=("shipped", "spec"), default="shipped",
                    help="shipped: the tool gets the device code as the benchmark ships it (no host code, no spec; "
                         "the runner calls the translation at its derived launch to judge it); spec: the tool gets "
                         "the device code with the runner's host code and spec")
    ap.add_argument("--flags", choices=sorted(OPT_FLAGS), default="native",
                    help="optimization flags of both sides: native = -O3 -march=native, tool = -O2 (the tool's own)")
    ap.add_argument(
        "--report", type=Path, nargs="+", metavar="JSON", help="only print the tables of earlier --json runs"
    )
    ns = ap.parse_args(argv)
    if ns.report:
        fields = set(Result.__dataclass_fields__)
        try:
            old = [
                Result(**{k: v for k, v in r.items() if k in fields})
                for f in ns.report
                for r in json.loads(f.read_text())["results"]
            ]
            settings = json.loads(ns.report[0].read_text()).get("settings", {})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"cannot read the runs: {exc}", file=sys.stderr)
            return 2
        for key in ("threads", "rounds", "flags", "mode"):
            setattr(ns, key, settings.get(key, getattr(ns, key)))
        print(summarize(old, ns))
        return 0
    if not (ns.path / "HPCTransEval").is_dir():
        print(f"{ns.path}: not a work tree of PJLAB-CHIP/HPCTransCompile (HPCTransEval/)", file=sys.stderr)
        return 2
    workdir = ns.workdir or Path(tempfile.mkdtemp(prefix="hpctranseval-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log(f"scratch: {workdir}")
    results: list[Result] = []
    for cat in ns.category or CATEGORIES:
        items = [i for i in load_items(ns.path, cat) if not ns.op or i.op in ns.op]
        items = items[: ns.limit] if ns.limit else items
        log(f"== {cat}: {len(items)} items")
        for n, item in enumerate(items, 1):
            try:
                r = evaluate(item, workdir / cat, ns)
            except Exception as exc:  # a bug of this runner on one item must not stop the others
                r = Result(
                    cat,
                    item.tag,
                    item.op,
                    item.label,
                    status="skipped",
                    reason=f"runner error: {type(exc).__name__}: {exc}",
                )
            results.append(r)
            sp = f"{r.speedup:.2f}x" if r.speedup else "-"
            log(
                f"  [{n}/{len(items)}] {r.tag}: {r.status} src={r.source_check} tool={r.tool_status} "
                f"compile={r.compile_ok} correct={r.correct} speed={sp} {r.seconds:.1f}s "
                f"{(r.reason or r.correct_reason or r.compile_reason)[:90]}"
            )
    print(summarize(results, ns))
    if ns.json:
        recs = [dict(asdict(r), speedup=r.speedup) for r in results]
        settings = {"threads": ns.threads, "rounds": ns.rounds, "flags": ns.flags, "mode": ns.mode}
        ns.json.write_text(
            json.dumps({"root": str(ns.path), "settings": settings, "results": recs}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
