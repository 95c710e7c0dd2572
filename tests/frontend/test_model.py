"""The kernel model against hand-written expectations on small sources.

Each source below was written for the test together with what a reader finds in it: the expected
names, kinds, positions (1-based line:col as an editor shows them) and texts are typed by hand,
not produced by the model.
"""

from __future__ import annotations

import json

import pytest

from xpiler_core.diagnostics import Severity
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.model import FunctionKind, KernelModel, build_model, load_model
from xpiler_core.frontend.source import parse_text


def model_of(text: str, path: str = "t.cu", dialect: Dialect | None = None) -> KernelModel:
    return build_model(parse_text(text, path, dialect))


def at(span: object) -> tuple[int, int]:
    """1-based (line, column) of a span's start."""
    return (span.start_line + 1, span.start_col + 1)  # type: ignore[attr-defined]


CUDA = """\
#include <cuda_runtime.h>
template <typename T, int BLOCK = 128>
__global__ void __launch_bounds__(BLOCK, 2) scale(const T* __restrict__ x, T* y, int n, float alpha) {
    __shared__ float tile[BLOCK][4];
    extern __shared__ float dyn[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = __shfl_down_sync(0xffffffff, alpha, 1);
    unsigned votes = __popc(__ballot_sync(0xffffffff, i < n));
    __syncthreads();
    atomicAdd(&y[0], (T)v);
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0}, {%1}, {%2}, {%3};" : "=f"(v));
    nvcuda::wmma::fill_fragment(frag, 0.0f);
    if (i < n) y[i] = helper(x[i]) * alpha + votes + warpSize;
}
__device__ __forceinline__ float helper(float a) { return a * 2.0f; }
void run(float* x, float* y, int n, cudaStream_t s) {
    cudaMalloc(&x, n);
    scale<float, 64><<<dim3((n + 63) / 64), 64, 64 * sizeof(float), s>>>(x, y, n, 1.5f);
    cublasSgemm(handle, a, b);
}
"""


def test_cuda_kernel_signature_template_and_launch_bounds() -> None:
    model = model_of(CUDA)
    assert [f.name for f in model.functions] == ["scale", "helper", "run"]
    assert [f.kind for f in model.functions] == [FunctionKind.KERNEL, FunctionKind.DEVICE, FunctionKind.HOST_ENTRY]
    kernel = model.functions[0]
    assert kernel.qualifiers == ["__global__"]
    assert kernel.return_type == "void"
    assert at(kernel.span) == (2, 1)  # the template header belongs to the definition
    assert at(kernel.name_span) == (3, 45)
    assert [(t.kind, t.name, t.type_text, t.default) for t in kernel.template_params or []] == [
        ("type", "T", None, None),
        ("value", "BLOCK", "int", "128"),
    ]
    assert kernel.launch_bounds is not None
    assert kernel.launch_bounds.max_threads.text == "BLOCK"
    assert kernel.launch_bounds.min_blocks is not None and kernel.launch_bounds.min_blocks.text == "2"
    params = {p.name: p for p in kernel.params}
    assert list(params) == ["x", "y", "n", "alpha"]
    x, y, n, alpha = params["x"], params["y"], params["n"], params["alpha"]
    assert (x.type_text, x.is_pointer, x.is_const, x.is_restrict) == ("const T* __restrict__", True, True, True)
    assert (y.type_text, y.is_pointer, y.is_const, y.is_restrict) == ("T*", True, False, False)
    assert (n.type_text, n.is_pointer) == ("int", False)
    assert (alpha.base_type, alpha.pointer_depth) == ("float", 0)
    assert at(x.span) == (3, 51)


def test_cuda_buffers_and_feature_uses() -> None:
    kernel = model_of(CUDA).functions[0]
    tile, dyn = kernel.buffers
    assert (tile.name, tile.memory, tile.element_type, tile.dynamic) == ("tile", "shared", "float", False)
    assert [s.text for s in tile.sizes] == ["BLOCK", "4"]
    assert at(tile.span) == (4, 5)
    assert (dyn.name, dyn.memory, dyn.element_type, dyn.dynamic, dyn.sizes) == ("dyn", "shared", "float", True, ())
    assert [(b.name, b.kind, at(b.span)) for b in kernel.barriers] == [("__syncthreads", "block", (9, 5))]
    assert [(w.name, w.kind) for w in kernel.warp_ops] == [
        ("__shfl_down_sync", "shuffle"),
        ("__popc", "ballot-count"),
        ("__ballot_sync", "ballot"),
    ]
    assert [(a.name, a.kind, at(a.span)) for a in kernel.atomics] == [("atomicAdd", "add", (10, 5))]
    assert [(t.name, t.kind) for t in kernel.tensor_core] == [("nvcuda::wmma::fill_fragment", "wmma")]
    (asm,) = kernel.inline_asm
    assert asm.volatile and asm.tensor_core
    assert asm.text.startswith("mma.sync.aligned.m16n8k16")
    assert kernel.builtin_names == ["blockDim.x", "blockIdx.x", "threadIdx.x", "warpSize"]
    assert kernel.calls == ["helper"]
    assert set(kernel.features()) >= {
        "template",
        "launch-bounds",
        "shared",
        "dynamic-shared",
        "barrier",
        "warp-shuffle",
        "warp-ballot",
        "atomics",
        "tensor-core",
        "inline-asm",
    }


def test_cuda_launch_site_and_api_calls() -> None:
    model = model_of(CUDA)
    (launch,) = model.launches
    assert (launch.kernel, launch.template_args, launch.style, launch.caller) == ("scale", "<float, 64>", "chevron", "run")
    assert launch.resolved
    assert [(c.role, c.expr.text) for c in launch.config] == [
        ("grid", "dim3((n + 63) / 64)"),
        ("block", "64"),
        ("smem", "64 * sizeof(float)"),
        ("stream", "s"),
    ]
    grid = launch.config_expr("grid")
    assert grid is not None and at(grid.span) == (18, 24)
    assert [a.text for a in launch.args] == ["x", "y", "n", "1.5f"]
    assert at(launch.span) == (18, 5)
    host = model.function("run")
    assert host is not None
    assert [(c.name, c.kind) for c in host.api_calls] == [("cudaMalloc", "cuda-runtime"), ("cublasSgemm", "cublas")]


def test_builtin_span_covers_the_component() -> None:
    model = model_of("__global__ void k(int* o) {\n  o[0] = threadIdx . y;\n}\n")
    (use,) = model.functions[0].builtins
    assert (use.name, use.component, use.spelled) == ("threadIdx", "y", "threadIdx")
    assert (use.span.start_line, use.span.start_col, use.span.end_col) == (1, 9, 22)


def test_builtins_in_comments_and_strings_are_not_uses() -> None:
    model = model_of('__global__ void k(int* o) {\n  // threadIdx.x\n  printf("blockIdx");\n}\n')
    assert model.functions[0].builtins == []


HIP = """\
#include <hip/hip_runtime.h>
__global__ void relu(const float* x, float* y, int n) {
    int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x;
    if (i < n) y[i] = x[i] > 0 ? x[i] : 0;
    unsigned long long live = __ballot(1);
    HIP_DYNAMIC_SHARED(float, smem);
}
void launch(const float* x, float* y, int n, hipStream_t stream) {
    hipLaunchKernelGGL(HIP_KERNEL_NAME(relu), dim3(n / 256 + 1), dim3(256), 0, stream, x, y, n);
}
"""


def test_hip_launch_builtins_and_macro_shared() -> None:
    model = model_of(HIP, "t.hip")
    assert model.dialect is Dialect.HIP
    kernel = model.functions[0]
    assert kernel.builtin_names == ["blockDim.x", "blockIdx.x", "threadIdx.x"]
    assert [(w.name, w.kind) for w in kernel.warp_ops] == [("__ballot", "ballot")]
    (smem,) = kernel.buffers
    assert (smem.name, smem.element_type, smem.dynamic, smem.memory) == ("smem", "float", True, "shared")
    (launch,) = model.launches
    assert (launch.kernel, launch.style, launch.caller, launch.resolved) == ("relu", "hipLaunchKernelGGL", "launch", True)
    assert [(c.role, c.expr.text) for c in launch.config] == [
        ("grid", "dim3(n / 256 + 1)"),
        ("block", "dim3(256)"),
        ("smem", "0"),
        ("stream", "stream"),
    ]
    assert [a.text for a in launch.args] == ["x", "y", "n"]
    assert model.function("launch").kind is FunctionKind.HOST_ENTRY  # type: ignore[union-attr]


BANG = """\
#include <bang.h>
__mlu_shared__ float shared_sram[64];
template <typename T>
__mlu_func__ void add_chunk(T* a, T* b, int n) { __bang_add(a, a, b, n); }
__mlu_global__ void vadd(float* x, float* y, int n) {
  __nram__ float a[256];
  __wram__ float w[16][16];
  int per = n / taskDim;
  __memcpy(a, x + taskId * per, per * sizeof(float), GDRAM2NRAM);
  add_chunk(a, a, per);
  __sync_cluster();
  int c = clusterId + coreId;
}
void host(cnrtQueue_t q) {
  cnrtDim3_t dim = {4, 1, 1};
  vadd<<<dim, cnrtFuncTypeUnion1, q>>>(0, 0, 16);
}
"""


def test_bang_masked_keywords_are_read_back() -> None:
    model = model_of(BANG, "t.mlu")
    assert model.dialect is Dialect.BANG
    assert [(f.name, f.kind, f.qualifiers) for f in model.functions] == [
        ("add_chunk", FunctionKind.DEVICE, ["__mlu_func__"]),
        ("vadd", FunctionKind.KERNEL, ["__mlu_global__"]),
        ("host", FunctionKind.HOST_ENTRY, []),
    ]
    kernel = model.functions[1]
    assert at(kernel.span) == (5, 1)  # starts at the masked keyword
    assert [(b.name, b.memory, [s.text for s in b.sizes]) for b in kernel.buffers] == [
        ("a", "nram", ["256"]),
        ("w", "wram", ["16", "16"]),
    ]
    assert at(kernel.buffers[0].span) == (6, 3)
    assert [(b.name, b.memory) for b in model.buffers] == [("shared_sram", "sram")]
    assert kernel.builtin_names == ["clusterId", "coreId", "taskDim", "taskId"]
    assert [(b.name, b.kind) for b in kernel.barriers] == [("__sync_cluster", "cluster")]
    assert [(i.name, i.kind) for i in kernel.intrinsics] == [("__memcpy", "bang-memcpy")]
    assert kernel.calls == ["add_chunk"]
    (launch,) = model.launches
    assert [(c.role, c.expr.text) for c in launch.config] == [("dim", "dim"), ("ktype", "cnrtFuncTypeUnion1"), ("queue", "q")]


C_SOURCE = """\
#include <math.h>
static float square(float v) { return v * v; }
void norm(int n, const float *restrict x, float *restrict y) {
#pragma omp parallel for
  for (int i = 0; i < n; ++i) y[i] = sqrtf(square(x[i]));
}
int main(void) { return 0; }
"""


def test_c_entries_pragmas_and_static_helpers() -> None:
    model = model_of(C_SOURCE, "t.c")
    assert [(f.name, f.kind) for f in model.functions] == [
        ("square", FunctionKind.HOST),
        ("norm", FunctionKind.CPU_KERNEL),
        ("main", FunctionKind.HOST),
    ]
    norm = model.functions[1]
    assert [(p.name, p.type_text, p.is_restrict, p.is_const) for p in norm.params] == [
        ("n", "int", False, False),
        ("x", "const float *restrict", True, True),
        ("y", "float *restrict", True, False),
    ]
    assert [(p.kind, p.text, at(p.span)) for p in norm.pragmas] == [("omp", "omp parallel for", (4, 1))]
    assert model.functions[2].params == []  # `main(void)` has no parameters
    assert [k.name for k in model.kernels] == ["norm"]


def test_extern_c_in_cpp_is_a_cpu_kernel_only_in_c_dialect() -> None:
    text = 'extern "C" void entry(float* x, int n) { }\nextern "C" { void other(int n) {} }\n'
    assert [f.kind for f in model_of(text, "t.cpp").functions] == [FunctionKind.CPU_KERNEL, FunctionKind.CPU_KERNEL]
    assert [f.extern_c for f in model_of(text, "t.cpp").functions] == [True, True]
    assert [f.kind for f in model_of(text, "t.cu").functions] == [FunctionKind.HOST_ENTRY, FunctionKind.HOST_ENTRY]


@pytest.mark.parametrize(
    ("declaration", "depth", "const", "const_pointer", "restrict", "reference", "array"),
    [
        ("float const* p", 1, True, False, False, False, False),
        ("float* const p", 1, False, True, False, False, False),
        ("const float** __restrict p", 2, True, False, True, False, False),
        ("const Tensor& t", 0, True, False, False, True, False),
        ("int p[16]", 0, False, False, False, False, True),
        ("Array<const float*, 2> a", 0, False, False, False, False, False),
    ],
)
def test_parameter_shapes(
    declaration: str, depth: int, const: bool, const_pointer: bool, restrict: bool, reference: bool, array: bool
) -> None:
    (param,) = model_of(f"__device__ void f({declaration}) {{}}\n").functions[0].params
    assert (param.pointer_depth, param.is_const, param.is_const_pointer, param.is_restrict) == (
        depth,
        const,
        const_pointer,
        restrict,
    )
    assert (param.is_reference, param.is_array) == (reference, array)


def test_barrier_and_warp_tables_cover_issue_names() -> None:
    text = (
        "__global__ void k(int* o) {\n"
        "  __syncthreads_or(1); __syncwarp(); __threadfence();\n"
        "  o[0] = __any_sync(~0u, 1) + __all_sync(~0u, 1) + __activemask() + __shfl_xor_sync(~0u, 1, 2);\n"
        "  atomicCAS(o, 0, 1); atomicMax_block(o, 3);\n"
        "  __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, 0, 0, 0);\n"
        "  rocwmma::mma_sync(d, a, b, c);\n"
        "}\n"
    )
    kernel = model_of(text).functions[0]
    assert [(b.name, b.kind) for b in kernel.barriers] == [
        ("__syncthreads_or", "block-or"),
        ("__syncwarp", "warp"),
        ("__threadfence", "fence-device"),
    ]
    assert [w.kind for w in kernel.warp_ops] == ["vote", "vote", "mask", "shuffle"]
    assert [(a.name, a.kind) for a in kernel.atomics] == [("atomicCAS", "cas"), ("atomicMax_block", "max")]
    assert [(t.name, t.kind) for t in kernel.tensor_core] == [
        ("__builtin_amdgcn_mfma_f32_32x32x8f16", "mfma"),
        ("rocwmma::mma_sync", "rocwmma"),
    ]


def test_api_prefixes_respect_word_boundaries() -> None:
    text = "void h() { cuMemAlloc(p, 4); cube(3); curve(); omp_get_thread_num(); hipFree(p); cudnnCreate(&h); }\n"
    host = model_of(text).functions[0]
    assert [(c.name, c.kind) for c in host.api_calls] == [
        ("cuMemAlloc", "cuda-driver"),
        ("omp_get_thread_num", "openmp"),
        ("hipFree", "hip-runtime"),
        ("cudnnCreate", "cudnn"),
    ]


def test_cooperative_groups_sync_and_grid_sync_are_barriers_without_a_warning() -> None:
    text = (
        "#include <cooperative_groups.h>\n"
        "namespace cg = cooperative_groups;\n"
        "__global__ void k() {\n"
        "  cg::thread_block block = cg::this_thread_block();\n"
        "  block.sync();\n"
        "  cg::this_grid().sync();\n"
        "}\n"
    )
    model = model_of(text)
    assert [b.kind for b in model.functions[0].barriers] == ["cooperative", "cooperative"]
    # the runtime runs grid-wide barriers (a cooperative launch): nothing to warn about at parse time
    assert [d.code for d in model.diagnostics] == []


def test_unsupported_constructs_are_named() -> None:
    lam = model_of("__global__ void k(float* x) {\n  auto f = [=] __device__ (int i) { return x[i]; };\n}\n")
    (diag,) = lam.diagnostics
    assert diag.code == "unsupported.extended-lambda"
    assert diag.severity is Severity.ERROR
    assert "extended lambda" in diag.message
    assert at(diag.span) == (2, 16)

    kr = model_of("int add(a, b)\nint a;\nint b;\n{ return a + b; }\n", "t.c")
    assert "unsupported.kr-definition" in [d.code for d in kr.diagnostics]
    assert "K&R" in next(d.message for d in kr.diagnostics if d.code == "unsupported.kr-definition")

    nested = model_of("__global__ void child() {}\n__global__ void parent() { child<<<1, 1>>>(); }\n")
    assert [d.code for d in nested.diagnostics] == ["unsupported.device-launch"]
    assert nested.diagnostics[0].span.start_line == 1

    tex = model_of("__global__ void k(float* o, cudaTextureObject_t t) { o[0] = tex1Dfetch<float>(t, 0); }\n")
    assert [d.code for d in tex.diagnostics] == ["unsupported.texture"]


def test_clean_sources_have_no_diagnostics() -> None:
    assert model_of(CUDA).diagnostics == []
    assert model_of(HIP, "t.hip").diagnostics == []
    assert model_of(BANG, "t.mlu").diagnostics == []
    assert model_of(C_SOURCE, "t.c").diagnostics == []


def test_reachable_features_follow_calls() -> None:
    text = (
        "__device__ float leaf(float v) { return __shfl_xor_sync(~0u, v, 1); }\n"
        "__device__ float mid(float v) { return leaf(v); }\n"
        "__global__ void k(float* o) { o[0] = mid(o[0]); }\n"
    )
    model = model_of(text)
    assert "warp-shuffle" not in model.functions[2].features()
    assert "warp-shuffle" in model.reachable_features("k")
    assert [f.name for f in model.reachable("k")] == ["k", "mid", "leaf"]


def test_to_dict_is_json_with_spans() -> None:
    data = json.loads(json.dumps(model_of(CUDA).to_dict()))
    kernel = data["functions"][0]
    assert kernel["name"] == "scale" and kernel["kind"] == "kernel"
    assert kernel["params"][0]["is_pointer"] is True
    assert kernel["buffers"][0]["size_text"] == "(BLOCK) * (4)"
    assert set(kernel["span"]) == {"start_byte", "end_byte", "start_line", "start_col", "end_line", "end_col"}
    assert data["launches"][0]["config"][0] == {
        "role": "grid",
        "expr": {"text": "dim3((n + 63) / 64)", "span": data["launches"][0]["config"][0]["expr"]["span"]},
    }
    assert "warp-shuffle" in data["features"]


def test_load_model_accepts_text_and_paths(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "k.hip"
    path.write_text(HIP)
    by_path = load_model(path)
    by_name = load_model(str(path))
    by_text = load_model(HIP)
    assert by_path.dialect is Dialect.HIP and by_name.path == str(path)
    assert [f.name for f in by_text.functions] == ["relu", "launch"]


def test_namespaced_and_cast_launches_resolve() -> None:
    text = (
        "namespace ops {\n"
        "__global__ __launch_bounds__(256) void fill(float* x) { x[threadIdx.x] = 0; }\n"
        "}\n"
        "void h(void** args) {\n"
        "  ops::fill<<<1, 32>>>(nullptr);\n"
        "  cudaLaunchKernel((void*)ops::fill, dim3(1), dim3(32), args, 0, 0);\n"
        "}\n"
    )
    model = model_of(text)
    kernel = model.functions[0]
    assert (kernel.name, kernel.kind) == ("fill", FunctionKind.KERNEL)
    assert kernel.launch_bounds is not None and kernel.launch_bounds.max_threads.text == "256"
    chevron, api = model.launches
    assert (chevron.kernel, chevron.style, chevron.resolved) == ("ops::fill", "chevron", True)
    assert (api.kernel, api.style, api.resolved) == ("ops::fill", "cudaLaunchKernel", True)
    assert [(c.role, c.expr.text) for c in api.config] == [
        ("grid", "dim3(1)"),
        ("block", "dim3(32)"),
        ("args", "args"),
        ("smem", "0"),
        ("stream", "0"),
    ]
    assert api.args == ()


def test_gnu_asm_spellings() -> None:
    text = '__device__ void f() { __asm__ __volatile__("nop"); }\n__device__ void g() { asm("ld" "matrix"); }\n'
    first, second = model_of(text).functions
    assert [(a.text, a.volatile, a.tensor_core) for a in first.inline_asm] == [("nop", True, False)]
    assert [(a.text, a.volatile, a.tensor_core) for a in second.inline_asm] == [("ldmatrix", False, True)]


def test_every_masked_bang_keyword_is_known_to_the_model() -> None:
    from xpiler_core.frontend import names
    from xpiler_core.frontend.source import BANG_KEYWORD_PATTERN

    keywords = BANG_KEYWORD_PATTERN.pattern.decode().split("(", 1)[1].rsplit(")", 1)[0].split("|")
    known = names.FUNCTION_QUALIFIERS | set(names.MEMORY_QUALIFIERS)
    assert keywords and not set(keywords) - known
