"""Names the kernel model recognizes, as data: one table per feature kind.

The model builder looks names up here; it has no per-name logic. Adding a barrier, an intrinsic or an
API family is an edit of this file only. Each table maps a name to a short sub-kind that the model
records next to the occurrence (for example ``"shuffle"`` for ``__shfl_down_sync``).
"""

from __future__ import annotations

import re
from typing import Final

# ---------------------------------------------------------------------------------------------------
# Function qualifiers (the CUDA grammar keeps these as tokens; BANG ones are masked and read back).
GPU_KERNEL_QUALIFIERS: Final = frozenset({"__global__", "__mlu_global__", "__mlu_entry__"})
DEVICE_QUALIFIERS: Final = frozenset({"__device__", "__mlu_func__", "__mlu_device__"})
HOST_QUALIFIERS: Final = frozenset({"__host__", "__mlu_host__"})
FUNCTION_QUALIFIERS: Final = GPU_KERNEL_QUALIFIERS | DEVICE_QUALIFIERS | HOST_QUALIFIERS | frozenset(
    {"__forceinline__", "__noinline__", "__inline__"}
)

# Memory-space qualifiers on variable declarations → the model's memory name.
MEMORY_QUALIFIERS: Final[dict[str, str]] = {
    "__shared__": "shared",
    "__constant__": "constant",
    "__managed__": "managed",
    "__nram__": "nram",
    "__wram__": "wram",
    "__ldram__": "ldram",
    "__mlu_shared__": "sram",
    "__mlu_const__": "constant",
}
# Memories that are on-chip scratchpads shared by a block / a core: the "shared buffers" of a kernel.
SCRATCHPAD_MEMORIES: Final = frozenset({"shared", "nram", "wram", "sram", "ldram"})

# ---------------------------------------------------------------------------------------------------
# Barriers and fences: name → sub-kind.
BARRIERS: Final[dict[str, str]] = {
    "__syncthreads": "block",
    "__syncthreads_count": "block-count",
    "__syncthreads_and": "block-and",
    "__syncthreads_or": "block-or",
    "__syncwarp": "warp",
    "__barrier_sync": "named",
    "__threadfence": "fence-device",
    "__threadfence_block": "fence-block",
    "__threadfence_system": "fence-system",
    "__builtin_amdgcn_s_barrier": "block",
    "__builtin_amdgcn_wave_barrier": "warp",
    "__builtin_amdgcn_fence": "fence",
    # BANG C
    "__sync_all": "all-cores",
    "__sync_cluster": "cluster",
    "__sync_all_ipu": "all-ipu",
    "__sync_all_mpu": "all-mpu",
    "__sync_compute": "compute",
    "__sync_io": "io",
    "__sync_io_move_compute": "io-compute",
    "__sync": "core",
    # CPU (OpenMP runtime call)
    "omp_barrier": "omp",
}
# Methods of cooperative-groups objects that synchronize: `block.sync()`, `cg::sync(grid)`.
COOPERATIVE_SYNC_METHODS: Final = frozenset({"sync", "barrier_wait", "arrive_and_wait"})

# ---------------------------------------------------------------------------------------------------
# Warp (wavefront) intrinsics: name → sub-kind. Their meaning depends on the warp width.
WARP_INTRINSICS: Final[dict[str, str]] = {
    **{f"__shfl{v}{s}": "shuffle" for v in ("", "_up", "_down", "_xor") for s in ("", "_sync")},
    "__ballot": "ballot",
    "__ballot_sync": "ballot",
    "__any": "vote",
    "__all": "vote",
    "__any_sync": "vote",
    "__all_sync": "vote",
    "__uni_sync": "vote",
    "__match_any_sync": "match",
    "__match_all_sync": "match",
    "__activemask": "mask",
    "__lanemask_lt": "mask",
    "__lanemask_le": "mask",
    "__lanemask_gt": "mask",
    "__lanemask_ge": "mask",
    "__lanemask_eq": "mask",
    "__lane_id": "lane",
    **{f"__reduce_{op}_sync": "reduce" for op in ("add", "min", "max", "and", "or", "xor")},
    "__builtin_amdgcn_ds_bpermute": "shuffle",
    "__builtin_amdgcn_ds_permute": "shuffle",
    "__builtin_amdgcn_ds_swizzle": "shuffle",
    "__builtin_amdgcn_mov_dpp": "shuffle",
    "__builtin_amdgcn_update_dpp": "shuffle",
    "__builtin_amdgcn_readfirstlane": "broadcast",
    "__builtin_amdgcn_readlane": "broadcast",
    "__builtin_amdgcn_mbcnt_lo": "lane",
    "__builtin_amdgcn_mbcnt_hi": "lane",
}
# Population counts: `__popc(__ballot_sync(...))` counts lanes, and a 32-bit popcount of a 64-lane
# ballot is a classic porting bug, so the model records the combination as its own warp operation.
POPCOUNTS: Final = frozenset({"__popc", "__popcll", "__builtin_popcount", "__builtin_popcountll"})
BALLOTS: Final = frozenset(name for name, kind in WARP_INTRINSICS.items() if kind == "ballot")

# ---------------------------------------------------------------------------------------------------
# Atomics: name → operation.
_ATOMIC_OPS: Final = ("Add", "Sub", "Exch", "Min", "Max", "Inc", "Dec", "CAS", "And", "Or", "Xor")
ATOMICS: Final[dict[str, str]] = {
    **{f"atomic{op}{scope}": op.lower() for op in _ATOMIC_OPS for scope in ("", "_block", "_system")},
    "atomicAdd_noret": "add",
    "unsafeAtomicAdd": "add",
    "safeAtomicAdd": "add",
    "atomicCAS_system": "cas",
    **{f"__atomic_{op}": op for op in ("load", "store", "exchange", "compare_exchange")},
    **{f"__atomic_fetch_{op}": op for op in ("add", "sub", "and", "or", "xor", "max", "min")},
    **{f"__atomic_{op}_fetch": op for op in ("add", "sub", "and", "or", "xor")},
    **{f"__sync_fetch_and_{op}": op for op in ("add", "sub", "and", "or", "xor")},
    "__sync_val_compare_and_swap": "cas",
    "__sync_bool_compare_and_swap": "cas",
    **{f"__bang_atomic_{op}": op for op in ("add", "exch", "max", "min", "and", "or", "xor", "cas")},
    **{f"__bang_atomic_reduce_{op}": op for op in ("add", "max", "min", "and", "or", "xor")},
}

# ---------------------------------------------------------------------------------------------------
# Tensor-core / matrix-unit operations. Qualified-name prefixes (after `::` normalization) and
# name prefixes for builtins; the first matching entry wins, longest first.
TENSOR_CORE_SCOPES: Final[dict[str, str]] = {
    "nvcuda::wmma::": "wmma",
    "wmma::": "wmma",
    "rocwmma::": "rocwmma",
    "nvcuda::experimental::": "wmma",
}
TENSOR_CORE_PREFIXES: Final[dict[str, str]] = {
    "__builtin_amdgcn_mfma_": "mfma",
    "__builtin_amdgcn_smfmac_": "mfma",
    "__builtin_amdgcn_wmma_": "amd-wmma",
    "__hmma_": "hmma",
    "__imma_": "imma",
    "__bmma_": "bmma",
    "__bang_matmul": "bang-matmul",
    "__bang_conv": "bang-conv",
    "__bang_mlp": "bang-mlp",
    # wmma functions called unqualified after `using namespace nvcuda::wmma;`
    "load_matrix_sync": "wmma",
    "store_matrix_sync": "wmma",
    "fill_fragment": "wmma",
    "mma_sync": "wmma",
    "bmma_sync": "wmma",
}
# Words in inline assembly that use the tensor cores (PTX mma, wgmma, ldmatrix; GCN mfma).
TENSOR_CORE_ASM: Final = re.compile(r"\b(w?mma(\.sync)?|ldmatrix|stmatrix|v_mfma\w*|v_wmma\w*)\b")

# ---------------------------------------------------------------------------------------------------
# Runtime and library APIs: call-name prefix → library. Longest prefix wins.
API_PREFIXES: Final[dict[str, str]] = {
    "cuda": "cuda-runtime",
    "cu": "cuda-driver",
    "cublasLt": "cublasLt",
    "cublas": "cublas",
    "cudnn": "cudnn",
    "cufft": "cufft",
    "curand": "curand",
    "cusparse": "cusparse",
    "cusolver": "cusolver",
    "nccl": "nccl",
    "nvrtc": "nvrtc",
    "hip": "hip-runtime",
    "hipblasLt": "hipblasLt",
    "hipblas": "hipblas",
    "hipfft": "hipfft",
    "hiprand": "hiprand",
    "hipsparse": "hipsparse",
    "hipsolver": "hipsolver",
    "rocblas": "rocblas",
    "rocfft": "rocfft",
    "rocrand": "rocrand",
    "miopen": "miopen",
    "rccl": "rccl",
    "cnrt": "cnrt",
    "cnnl": "cnnl",
    "cndrv": "cndrv",
    "cn": "cndrv",
    "omp_": "openmp",
}
# Namespaced libraries: qualified-name prefix → library.
API_SCOPES: Final[dict[str, str]] = {
    "cub::": "cub",
    "hipcub::": "hipcub",
    "thrust::": "thrust",
    "cutlass::": "cutlass",
    "cute::": "cute",
    "rocprim::": "rocprim",
    "cooperative_groups::": "cooperative-groups",
    "cg::": "cooperative-groups",
}
# A name prefix only counts when the next character starts a new word: `cudaMalloc`, `cuMemAlloc`,
# `omp_get_thread_num`, but not `cube` or `curve` (see PrefixMatcher's boundary).

# Kernel launch APIs: name → (index of the kernel argument, config roles by argument index,
# index of the first kernel argument or None when they are passed as an array).
LAUNCH_FUNCTIONS: Final[dict[str, tuple[int, dict[int, str], int | None]]] = {
    "hipLaunchKernelGGL": (0, {1: "grid", 2: "block", 3: "smem", 4: "stream"}, 5),
    "hipLaunchKernelEx": (0, {1: "grid", 2: "block", 3: "smem", 4: "stream"}, 5),
    "cudaLaunchKernel": (0, {1: "grid", 2: "block", 3: "args", 4: "smem", 5: "stream"}, None),
    "hipLaunchKernel": (0, {1: "grid", 2: "block", 3: "args", 4: "smem", 5: "stream"}, None),
    "cudaLaunchCooperativeKernel": (0, {1: "grid", 2: "block", 3: "args", 4: "smem", 5: "stream"}, None),
    "hipLaunchCooperativeKernel": (0, {1: "grid", 2: "block", 3: "args", 4: "smem", 5: "stream"}, None),
}
# Wrappers around the kernel name in a launch API call (`HIP_KERNEL_NAME(k<float>)`).
KERNEL_NAME_WRAPPERS: Final = frozenset({"HIP_KERNEL_NAME"})
# Macros that declare a dynamic shared buffer: name → (index of the element type, index of the name).
DYNAMIC_SHARED_MACROS: Final[dict[str, tuple[int, int]]] = {"HIP_DYNAMIC_SHARED": (0, 1)}
# Roles of the `<<<...>>>` configuration expressions, per dialect family.
CHEVRON_ROLES: Final[dict[str, tuple[str, ...]]] = {
    "gpu": ("grid", "block", "smem", "stream"),
    "bang": ("dim", "ktype", "queue"),
}

# ---------------------------------------------------------------------------------------------------
# Built-in variables: identifier → (canonical builtin, fixed component or None).
BUILTIN_VARIABLES: Final[dict[str, tuple[str, str | None]]] = {
    "threadIdx": ("threadIdx", None),
    "blockIdx": ("blockIdx", None),
    "blockDim": ("blockDim", None),
    "gridDim": ("gridDim", None),
    "warpSize": ("warpSize", None),
    **{f"hipThreadIdx_{c}": ("threadIdx", c) for c in "xyz"},
    **{f"hipBlockIdx_{c}": ("blockIdx", c) for c in "xyz"},
    **{f"hipBlockDim_{c}": ("blockDim", c) for c in "xyz"},
    **{f"hipGridDim_{c}": ("gridDim", c) for c in "xyz"},
    "taskId": ("taskId", None),
    "taskDim": ("taskDim", None),
    **{f"taskId{c}": ("taskId", c.lower()) for c in "XYZ"},
    **{f"taskDim{c}": ("taskDim", c.lower()) for c in "XYZ"},
    "clusterId": ("clusterId", None),
    "clusterDim": ("clusterDim", None),
    "coreId": ("coreId", None),
    "coreDim": ("coreDim", None),
}

# ---------------------------------------------------------------------------------------------------
# Device intrinsics that are none of the above (memory movement, vector units, fast math): prefix →
# sub-kind. Longest prefix wins.
INTRINSIC_PREFIXES: Final[dict[str, str]] = {
    "__memcpy": "bang-memcpy",
    "__memset_nram": "bang-memset",
    "__bang_": "bang-vector",
    "__ldg": "load",
    "__ldcg": "load",
    "__ldca": "load",
    "__ldcs": "load",
    "__stcg": "store",
    "__stcs": "store",
    "__builtin_nontemporal_": "load-store",
    "__pipeline_": "async-copy",
    "__cp_async": "async-copy",
    "__half2": "half",
    "__float2half": "half",
    "__half": "half",
    "__float2bfloat16": "bfloat16",
    "__bfloat16": "bfloat16",
    "__h": "half-math",
    "__expf": "fast-math",
    "__logf": "fast-math",
    "__sinf": "fast-math",
    "__cosf": "fast-math",
    "__powf": "fast-math",
    "__fdividef": "fast-math",
    "__frcp_": "fast-math",
    "__fsqrt_": "fast-math",
    "__fmaf_": "fast-math",
    "__fadd_": "fast-math",
    "__fmul_": "fast-math",
    "__saturatef": "fast-math",
    "__clz": "bit",
    "__ffs": "bit",
    "__brev": "bit",
    "__byte_perm": "bit",
    "__funnelshift": "bit",
    "__mul24": "integer",
    "__umul24": "integer",
    "__mulhi": "integer",
    "__umulhi": "integer",
    "__dp4a": "dot",
    "__dp2a": "dot",
    "_mm": "x86-simd",
    "__builtin_ia32_": "x86-simd",
    "__nanosleep": "timing",
    "clock64": "timing",
    "__builtin_amdgcn_s_memtime": "timing",
}
# Popcounts are intrinsics too when they do not count a ballot.
INTRINSIC_NAMES: Final[dict[str, str]] = {name: "bit" for name in POPCOUNTS} | {"clock": "timing"}


class PrefixMatcher:
    """Longest-prefix lookup over a prefix → value table, compiled once into one regex."""

    def __init__(self, table: dict[str, str], boundary: str | None = None) -> None:
        self.table = table
        # A prefix ending in a letter must be followed by a character matching `boundary`, so that
        # `cuda` matches `cudaMalloc` but `cu` does not match `cube`. Longest alternatives first.
        alternatives = []
        for prefix in sorted(table, key=len, reverse=True):
            guard = f"(?={boundary})" if boundary and prefix[-1].isalnum() else ""
            alternatives.append(re.escape(prefix) + guard)
        self._regex = re.compile("|".join(alternatives)) if alternatives else None

    def lookup(self, name: str) -> str | None:
        if self._regex is None:
            return None
        match = self._regex.match(name)
        return self.table[match.group(0)] if match else None


TENSOR_CORE_MATCHER: Final = PrefixMatcher({**TENSOR_CORE_SCOPES, **TENSOR_CORE_PREFIXES})
INTRINSIC_MATCHER: Final = PrefixMatcher(INTRINSIC_PREFIXES)
_API_NAME_MATCHER: Final = PrefixMatcher(API_PREFIXES, boundary="[A-Z_0-9]")
_API_SCOPE_MATCHER: Final = PrefixMatcher(API_SCOPES)


def api_library(name: str) -> str | None:
    """The library a call belongs to, by namespace or by a word-bounded name prefix."""
    if "::" in name:
        return _API_SCOPE_MATCHER.lookup(name)
    return _API_NAME_MATCHER.lookup(name)
