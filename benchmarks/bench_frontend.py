"""Frontend speed: parse + kernel model of a generated CUDA file, and incremental reparse after an edit.

Run: ``python benchmarks/bench_frontend.py [--lines 1000] [--repeat 50]``. Prints a table of medians
(and p90) in milliseconds. Goals from issue 2: parse + model of 1,000 lines < 20 ms; incremental
reparse after a one-line edit < 2 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

from xpiler_core.frontend.model import build_model
from xpiler_core.frontend.source import parse_text

_KERNEL = """\
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) reduce_{i}(const T* __restrict__ x, T* __restrict__ y, int n) {{
    __shared__ float partial[BLOCK / 32];
    extern __shared__ float scratch[];
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float v = tid < n ? static_cast<float>(x[tid]) : 0.0f;
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {{
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }}
    if (threadIdx.x % warpSize == 0) {{
        partial[threadIdx.x / warpSize] = v;
    }}
    __syncthreads();
    scratch[threadIdx.x] = v * {i}.0f;
    if (threadIdx.x == 0) {{
        float total = 0.0f;
        for (int w = 0; w < BLOCK / 32; ++w) {{
            total += partial[w];
        }}
        atomicAdd(y, static_cast<T>(total));
    }}
}}

__device__ __forceinline__ float scale_{i}(float a, float b) {{
    return a * b + {i}.0f;
}}

void launch_{i}(const float* x, float* y, int n, cudaStream_t stream) {{
    const int grid = (n + 255) / 256;
    reduce_{i}<float, 256><<<grid, 256, 256 * sizeof(float), stream>>>(x, y, n);
    cudaStreamSynchronize(stream);
}}

"""


def generate_cuda(lines: int) -> str:
    """A CUDA file of about ``lines`` lines: templated kernels, device functions, host launches."""
    header = "#include <cuda_runtime.h>\n\n"
    out = [header]
    count = header.count("\n")
    i = 0
    while count < lines:
        block = _KERNEL.format(i=i)
        out.append(block)
        count += block.count("\n")
        i += 1
    return "".join(out)


Timing = tuple[list[float], list[float]]  # (wall ms, CPU ms of this thread) per run


def _measure(action: Callable[[], object], repeat: int) -> Timing:
    action()  # warm caches (language, query)
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(repeat):
        start_wall, start_cpu = time.perf_counter(), time.thread_time()
        action()
        cpu.append((time.thread_time() - start_cpu) * 1000.0)
        wall.append((time.perf_counter() - start_wall) * 1000.0)
    return wall, cpu


def _row(name: str, timing: Timing, goal: float | None) -> str:
    wall, cpu = timing
    median = statistics.median(wall)
    p90 = sorted(wall)[int(0.9 * (len(wall) - 1))]
    cpu_median = statistics.median(cpu)
    verdict = "" if goal is None else ("meets" if median < goal else "MISSES")
    goal_text = f"< {goal:g}" if goal is not None else ""
    return f"| {name:<38} | {median:9.3f} | {p90:9.3f} | {cpu_median:9.3f} | {goal_text:>7} | {verdict:<6} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args(argv)

    text = generate_cuda(args.lines)
    line_count = text.count("\n")
    parsed = parse_text(text, "bench.cu")
    model = build_model(parsed)
    assert not parsed.diagnostics, parsed.diagnostics[:3]

    parse_times = _measure(lambda: parse_text(text, "bench.cu"), args.repeat)
    model_times = _measure(lambda: build_model(parsed), args.repeat)
    both_times = _measure(lambda: build_model(parse_text(text, "bench.cu")), args.repeat)

    # A one-line edit in the middle of the file: change a literal inside a kernel body.
    target = text.index("v * 7.0f") if "v * 7.0f" in text else text.index("v * 0.0f")
    start = len(text[:target].encode()) + len("v * ")
    edited_once = parsed.edit(start, start + 1, "8")
    edit_times = _measure(lambda: parsed.edit(start, start + 1, "8"), args.repeat)
    edit_model_times = _measure(lambda: build_model(parsed.edit(start, start + 1, "8")), args.repeat)
    # The incremental tree must equal a fresh parse of the edited text.
    fresh = parse_text(edited_once.text, "bench.cu")
    assert str(fresh.root) == str(edited_once.root), "incremental reparse differs from a full parse"

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"frontend benchmark: generated CUDA, {line_count} lines, {len(text.encode())} bytes, "
        f"{len(model.kernels)} kernels, {len(model.launches)} launches; {args.repeat} runs each (ms); "
        f"{os.cpu_count()} CPUs, load average {load}"
    )
    print("wall = elapsed time (the goal's measure); cpu = this thread's CPU time (robust to a busy machine)")
    print(f"| {'measurement':<38} | {'wall med':>9} | {'wall p90':>9} | {'cpu med':>9} | {'goal':>7} | {'':<6} |")
    print(f"|{'-' * 40}|{'-' * 11}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 8}|")
    print(_row("parse (tree-sitter, full)", parse_times, None))
    print(_row("model (build_model on a parsed file)", model_times, None))
    print(_row("parse + model", both_times, 20.0))
    print(_row("incremental reparse, one-line edit", edit_times, 2.0))
    print(_row("incremental reparse + model", edit_model_times, None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
