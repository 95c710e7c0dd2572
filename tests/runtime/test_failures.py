"""Deadlocks, faults and endless loops are reported with the kernel name; the Python process survives."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

from xpiler_core.dialect import Dialect
from xpiler_core.progress import Cancelled, CancelToken
from xpiler_core.runtime.build import build_library
from xpiler_core.runtime.call import run_kernel
from xpiler_core.runtime.entry import kernel_entry_glue
from xpiler_core.runtime.sandbox import CallArg, call_library

SOURCE = r"""
#include <cooperative_groups.h>
__global__ void divergent_barrier(const float* x, float* y) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 256 + t];
  if (t < 128) {
    __syncthreads();
  }
  __syncthreads();
  y[blockIdx.x * 256 + t] = s[255 - t];
}
__global__ void wild_store(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float* p = nullptr;
  if (i == 77) p[1 << 20] = x[i];
  y[i] = x[i];
}
__global__ void spin_forever(const float* x, float* y) {
  volatile int flag = 0;
  while (!flag) {}
}
__global__ void grid_barrier(const float* x, float* y) {
  cooperative_groups::this_grid().sync();
}
__global__ void huge_locals(const float* x, float* y) {
  volatile float big[100000];  // 400 kB of locals: more than a fiber stack
  for (int i = 0; i < 100000; ++i) big[i] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = big[threadIdx.x];
}
__global__ void shfl_vs_barrier(const float* x, float* y) {
  float v = x[threadIdx.x];
  if (threadIdx.x == 0) __syncthreads();
  else v = __shfl_sync(0xffffffff, v, 0);
  __syncthreads();
  y[threadIdx.x] = v;
}
#define HOST_ENTRY(k) extern "C" void t_##k(const float* x, float* y) { k<<<2, 256>>>(x, y); }
HOST_ENTRY(divergent_barrier)
HOST_ENTRY(wild_store)
HOST_ENTRY(grid_barrier)
HOST_ENTRY(huge_locals)
HOST_ENTRY(shfl_vs_barrier)
"""


@pytest.fixture(scope="module")
def lib(built_factory):  # type: ignore[no-untyped-def]
    return built_factory(SOURCE)


def _run(lib, kernel: str):  # type: ignore[no-untyped-def]
    """Launch through an extern "C" host entry (one build for the whole module)."""
    x = np.ones(512, np.float32)
    return lib.call(f"t_{kernel}", [x, np.zeros_like(x)])


def test_divergent_barrier_is_reported_as_deadlock(lib) -> None:  # type: ignore[no-untyped-def]
    res = _run(lib, "divergent_barrier")
    assert not res.ok
    assert res.error is not None
    assert res.error.startswith("deadlock in kernel divergent_barrier")
    assert "line 8" in res.error and "line 10" in res.error  # source lines of the two barriers
    assert os.getpid() > 0  # still here


def test_segfault_is_reported_with_kernel_and_thread(lib) -> None:  # type: ignore[no-untyped-def]
    res = _run(lib, "wild_store")
    assert not res.ok
    assert res.error is not None
    assert res.error.startswith("segmentation fault in kernel wild_store")
    assert "thread (77,0,0)" in res.error and "block (0,0,0)" in res.error


def test_stack_overflow_is_reported_as_such(lib) -> None:  # type: ignore[no-untyped-def]
    res = _run(lib, "huge_locals")
    assert not res.ok
    assert res.error is not None and res.error.startswith("stack overflow")
    assert "in kernel huge_locals" in res.error


def test_endless_loop_times_out_and_names_the_kernel() -> None:
    x = np.ones(512, np.float32)  # through the generated kernel entry (run_kernel), not a host entry
    res = run_kernel(SOURCE, "spin_forever", grid=2, block=256, args=[x, np.zeros_like(x)], timeout_s=2.0)
    assert not res.ok
    assert res.error is not None
    assert "timeout after 2 s in kernel spin_forever" in res.error


def test_barrier_against_warp_collective_is_a_deadlock(lib) -> None:  # type: ignore[no-untyped-def]
    res = _run(lib, "shfl_vs_barrier")
    assert not res.ok
    assert res.error is not None and res.error.startswith("deadlock in kernel shfl_vs_barrier")


def test_invalid_launch_configuration_is_an_error_not_a_run() -> None:
    x = np.ones(4, np.float32)
    res = run_kernel(SOURCE, "wild_store", grid=1, block=2048, args=[x, np.zeros_like(x)])
    assert not res.ok
    assert res.error is not None and "invalid configuration" in res.error


def test_grid_sync_outside_a_cooperative_launch_is_refused_with_a_message(lib) -> None:  # type: ignore[no-untyped-def]
    res = _run(lib, "grid_barrier")  # a plain launch: CUDA leaves grid.sync() there undefined
    assert not res.ok
    assert res.error is not None and res.error.startswith("grid-wide sync (this_grid().sync()) in a kernel not launched "
                                                          "with cudaLaunchCooperativeKernel")


def test_cancel_stops_a_running_child() -> None:
    token = CancelToken()
    x = np.ones(512, np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        built = build_library(
            SOURCE, Dialect.CUDA, Path(tmp), extra=kernel_entry_glue("spin_forever", [("float32", True)] * 2)
        )
        assert built.library is not None
        threading.Timer(0.5, token.cancel).start()
        with pytest.raises(Cancelled):
            call_library(
                built.library,
                "xpiler_entry",
                "kernel",
                [CallArg("x", "float32", x), CallArg("y", "float32", x)],
                ["y"],
                Path(tmp) / "run",
                config=(1, 1, 1, 32, 1, 1, 0),
                timeout_s=120,
                cancel=token,
            )


def test_memory_limit_is_enforced_and_reported() -> None:
    greedy = (
        "#include <vector>\n"
        'extern "C" void hog(float* out) {\n'
        "  std::vector<char> big(3ull << 30, 1);  // 3 GiB, over the 1 GiB limit\n"
        "  out[0] = big[12345];\n"
        "}\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        built = build_library(greedy, Dialect.CUDA, Path(tmp))
        assert built.library is not None, built.log
        res = call_library(
            built.library,
            "hog",
            "host",
            [CallArg("out", "float32", np.zeros(1, np.float32))],
            ["out"],
            Path(tmp) / "run",
            memory_bytes=1 << 30,
        )
    assert not res.ok and res.error == "out of memory (limit 1 GiB)"
