"""The source run on a real CUDA GPU as the reference (``--reference gpu``): the strongest judge there is.

Only on the user's own command line (never from a workspace's settings or a manifest): the source is built
with nvcc for the GPU of this machine, and the harness calls it like the runtime build — a host entry with the
arguments themselves (it manages device memory itself), a kernel through generated glue that copies each
buffer to the device, launches at the case's configuration and copies every buffer back. Runs of the
candidate stay where they are (the SIMT runtime, g++, the MLU model); only the reference moves.

``gpu_unavailable()`` says why a machine cannot (no nvcc, no CUDA device); nothing here is needed otherwise.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from functools import lru_cache
from pathlib import Path

from xpiler_core.diagnostics import XpilerError
from xpiler_core.project import BuildSettings
from xpiler_core.runtime import children
from xpiler_core.runtime.build import BuildResult
from xpiler_core.runtime.entry import C_TYPES

GPU_ENTRY_SYMBOL = "xpiler_gpu_entry"
GPU_ERROR_MARK = "xpiler-gpu:"  # the glue's line on stderr naming a CUDA error
DEVICES = ("runtime", "gpu")
BUILD_TIMEOUT_S = 300.0


@lru_cache(maxsize=1)
def gpu_unavailable() -> str | None:
    """None when this machine has nvcc and a CUDA device; else why not (for the user's message)."""
    if shutil.which("nvcc") is None:
        return "nvcc is not on PATH"
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "no NVIDIA driver (nvidia-smi is not on PATH)"
    try:
        listed = children.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nvidia-smi failed: {exc}"
    if listed.returncode != 0 or "GPU" not in listed.stdout:
        return "nvidia-smi lists no CUDA device"
    return None


def require_gpu(where: str = "<command line>") -> None:
    """Refuse ``--reference gpu`` on a machine that cannot run it (an honest error, not a silent fallback)."""
    why = gpu_unavailable()
    if why is not None:
        raise XpilerError(f"--reference gpu needs a CUDA GPU and nvcc on this machine: {why}", where)


def gpu_kernel_glue(kernel: str, args: list[tuple[str, bool]]) -> str:
    """CUDA C++ for ``int xpiler_gpu_entry(void** args, const unsigned long long* bytes, const unsigned* cfg)``:
    every buffer (``args[i]``, ``bytes[i]`` long) copied to the device, ``kernel`` launched with grid
    ``cfg[0..2]``, block ``cfg[3..5]`` and ``cfg[6]`` dynamic shared bytes, every buffer copied back; returns
    the CUDA error of the launch or of the run (0: none), named on stderr after ``GPU_ERROR_MARK``.

    ``args`` lists (dtype, is_buffer) in parameter order; a device buffer converts to the parameter's
    pointer type."""
    actuals = []
    buffers = [i for i, (_, is_buffer) in enumerate(args) if is_buffer]
    for i, (dtype, is_buffer) in enumerate(args):
        actuals.append(f"xp_gpu::AnyPtr{{dev[{i}]}}" if is_buffer else f"*static_cast<{C_TYPES[dtype]}*>(args[{i}])")
    count = max(1, len(args))
    copy_in = "".join(
        f"  if (!err) err = cudaMalloc(&dev[{i}], bytes[{i}] ? bytes[{i}] : 1);\n"
        f"  if (!err) err = cudaMemcpy(dev[{i}], args[{i}], bytes[{i}], cudaMemcpyHostToDevice);\n" for i in buffers)
    copy_out = "".join(
        f"  if (!err) err = cudaMemcpy(args[{i}], dev[{i}], bytes[{i}], cudaMemcpyDeviceToHost);\n" for i in buffers)
    return (
        "#include <cstdio>\n"
        "#include <cuda_runtime.h>\n"
        "namespace xp_gpu {\n"
        "struct AnyPtr {\n"
        "  void* p;\n"
        "  template <class T> operator T*() const { return static_cast<T*>(p); }\n"
        "};\n"
        "}  // namespace xp_gpu\n"
        f'extern "C" int {GPU_ENTRY_SYMBOL}(void** args, const unsigned long long* bytes, const unsigned* cfg) {{\n'
        f"  void* dev[{count}] = {{}};\n"
        "  cudaError_t err = cudaSuccess;\n"
        f"{copy_in}"
        "  if (!err && cfg[6] > 48 * 1024)  // more dynamic shared memory than a launch gets unasked\n"
        f"    err = cudaFuncSetAttribute({kernel}, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cfg[6]);\n"
        "  if (!err) {\n"
        f"    {kernel}<<<dim3(cfg[0], cfg[1], cfg[2]), dim3(cfg[3], cfg[4], cfg[5]), cfg[6]>>>(\n"
        f"        {', '.join(actuals)});\n"
        "    err = cudaGetLastError();\n"
        "    if (!err) err = cudaDeviceSynchronize();\n"
        "  }\n"
        f"{copy_out}"
        f"  for (int i = 0; i < {count}; ++i) if (dev[i]) cudaFree(dev[i]);\n"
        "  (void)bytes;\n"
        f'  if (err) std::fprintf(stderr, "{GPU_ERROR_MARK} %s (CUDA error %d)\\n", cudaGetErrorString(err), (int)err);\n'
        "  return static_cast<int>(err);\n"
        "}\n"
    )


def gpu_arch() -> str:
    """nvcc's ``-arch`` for this machine's GPU (``native``: the device present), or sm_80 to compile only."""
    return "native" if gpu_unavailable() is None else "sm_80"


def build_gpu_library(text: str, out_dir: Path, *, display_name: str = "kernel.cu", extra: str = "",
                      build: BuildSettings | None = None, executable: bool = False) -> BuildResult:
    """Compile CUDA ``text`` (plus ``extra`` glue) with nvcc into ``out_dir/libgpu<hash>.so`` (``executable``:
    a whole program, ``out_dir/gpu<hash>``); failures come back as the compiler's log, never as an exception.
    The project's flags and files apply as for any build."""
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    body = build.with_units(text) if build is not None else text
    source = f'#line 1 "{display_name}"\n{body}\n#line 1 "xpiler-gpu-glue"\n{extra}'
    flags = [*(build.flags if build is not None else ())]
    arch = gpu_arch()
    key = "\0".join([source, arch, *flags, repr(build.key()) if build is not None else ""])
    digest = hashlib.sha256(key.encode("utf-8", errors="replace")).hexdigest()[:16]
    src = out_dir / f"gpu{digest}.cu"
    library = out_dir / (f"gpu{digest}" if executable else f"libgpu{digest}.so")
    if build is not None:
        build.write_files(out_dir)
    src.write_text(source, encoding="utf-8")
    shared = [] if executable else ["-shared", "-Xcompiler", "-fPIC"]
    command = ["nvcc", f"-arch={arch}", "-O2", "-std=c++17", *shared, "-w", *flags, "-o", str(library), str(src)]
    if shutil.which("nvcc") is None:
        return BuildResult(False, None, "nvcc is not on PATH", command, False, 0.0)
    try:
        done = children.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=out_dir)
    except subprocess.TimeoutExpired:
        return BuildResult(False, None, f"nvcc did not finish within {BUILD_TIMEOUT_S:g} s", command, False,
                           time.monotonic() - started)
    ok = done.returncode == 0 and library.is_file()
    return BuildResult(ok, library if ok else None, (done.stdout + done.stderr).strip(), command, False,
                       time.monotonic() - started)


def gpu_error(stderr: str) -> str | None:
    """The CUDA error the glue named on ``stderr``, as the reason of a failed run of the reference."""
    line = next((ln for ln in stderr.splitlines() if ln.startswith(GPU_ERROR_MARK)), None)
    return f"the source on the GPU: {line[len(GPU_ERROR_MARK):].strip()}" if line else None
