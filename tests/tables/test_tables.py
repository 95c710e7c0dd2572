"""The mapping tables against the real headers: every pair names something CUDA declares and HIP declares."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from xpiler_core.tables import TABLE_FILES, load_mapping, raw_table

CUDA_INCLUDE = Path("/usr/local/cuda/include")
HIP_INCLUDE = Path("/usr/include/hip")
# tables whose both sides are declared by headers installed on this machine
HEADER_CHECKED = ("runtime_api", "runtime_types", "runtime_enums", "error_codes", "driver_api", "complex")


@lru_cache(maxsize=2)
def _identifiers(root: str) -> frozenset[str]:
    names: set[str] = set()
    for path in Path(root).rglob("*.h*"):
        names.update(re.findall(r"\b[A-Za-z_]\w*\b", path.read_text(errors="ignore")))
    return frozenset(names)


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir() or not HIP_INCLUDE.is_dir(), reason="CUDA or HIP headers not installed")
@pytest.mark.parametrize("table", HEADER_CHECKED)
def test_every_pair_is_declared_by_both_toolkits(table: str) -> None:
    cuda_names = _identifiers(str(CUDA_INCLUDE))
    hip_names = _identifiers(str(HIP_INCLUDE))
    data = raw_table(table)
    missing_cuda = [c for c in data["pairs"] if c not in cuda_names]
    missing_hip = [h for h in data["pairs"].values() if h not in hip_names]
    assert not missing_cuda, f"{table}: not in CUDA headers: {missing_cuda[:10]}"
    assert not missing_hip, f"{table}: not in HIP headers: {missing_hip[:10]}"
    for hip_name, cuda_name in data.get("reverse", {}).items():
        assert hip_name in hip_names and cuda_name in cuda_names, (hip_name, cuda_name)


@pytest.mark.skipif(not HIP_INCLUDE.is_dir(), reason="HIP headers not installed")
def test_mapped_hip_headers_exist_where_hip_ships_them() -> None:
    forward = load_mapping("cuda->hip")
    for cuda_header, hip_header in forward.headers.items():
        if hip_header.startswith("hip/") and hip_header not in ("hip/hip_bf16.h", "hip/hip_fp8.h"):
            assert (HIP_INCLUDE.parent / hip_header).exists(), f"{cuda_header} -> {hip_header}"


def test_reverse_direction_is_consistent_with_forward() -> None:
    """Mapping back and forth again lands on the same HIP name (the tables run both ways)."""
    forward = load_mapping("cuda->hip")
    backward = load_mapping("hip->cuda")
    checked = 0
    for hip_name, cuda_name in backward.names.items():
        if cuda_name in forward.names:
            assert forward.names[cuda_name] == hip_name or hip_name in raw_table("driver_api")["pairs"].values() \
                or hip_name.startswith("__"), (hip_name, cuda_name)
            checked += 1
    assert checked > 700
    for hip_header, cuda_header in backward.headers.items():
        if hip_header in forward.headers.values():
            assert forward.map_header(cuda_header) == hip_header


def test_tables_cover_the_issue_categories() -> None:
    forward = load_mapping("cuda->hip")
    categories = set(forward.categories.values())
    assert {"runtime API functions", "types", "enums and constants", "error codes", "driver API", "libraries"} <= categories
    for name, expected in {
        "cublasSgemm": "hipblasSgemm", "curand_init": "hiprand_init", "cufftExecC2C": "hipfftExecC2C",
        "cusparseSpMV": "hipsparseSpMV", "cudnnCreate": "miopenCreate", "cuLaunchKernel": "hipModuleLaunchKernel",
    }.items():
        assert forward.names[name] == expected
    assert forward.map_header("cub/cub.cuh") == "hipcub/hipcub.hpp"
    assert forward.map_header("cub/warp/warp_reduce.cuh") == "hipcub/warp/warp_reduce.hpp"
    assert forward.namespaces["cub"] == "hipcub"
    assert "cudnnConvolutionForward" in forward.unsupported
    assert len(TABLE_FILES) == 9


@pytest.mark.parametrize(("prefix", "header_dir"), [("hiprand", "/usr/include/hiprand"),
                                                    ("hipsparse", "/usr/include/hipsparse")])
def test_library_names_exist_in_installed_rocm_library_headers(prefix: str, header_dir: str) -> None:
    if not Path(header_dir).is_dir():
        pytest.skip(f"{header_dir} not installed (apt {'libhiprand-dev' if 'rand' in prefix else 'libhipsparse-dev'})")
    names = _identifiers(header_dir) | _identifiers(str(HIP_INCLUDE))
    pairs = raw_table("libraries")["pairs"]
    ours = {v for v in pairs.values() if v.lower().startswith(prefix)}
    assert ours, prefix
    assert sorted(v for v in ours if v not in names) == []


@pytest.mark.skipif(not (CUDA_INCLUDE / "math_constants.h").is_file(), reason="CUDA headers not installed")
def test_math_constants_are_cudas_values() -> None:
    header = (CUDA_INCLUDE / "math_constants.h").read_text()
    defined = dict(re.findall(r"^#define\s+(CUDART_\w+)\s+(.+?)\s*$", header, re.M))
    assert raw_table("math_constants")["constants"] == defined


@pytest.mark.skipif(not CUDA_INCLUDE.is_dir(), reason="CUDA headers not installed")
def test_cuda_headers_mapped_to_hips_runtime_header_exist_in_cuda() -> None:
    """The per-architecture and internal headers the table sends to hip/hip_runtime.h are CUDA's own."""
    forward = load_mapping("cuda->hip")
    for cuda_header in [*forward.headers, *forward.defined_in_place]:
        if "/" not in cuda_header and cuda_header.endswith(".h") and not cuda_header.startswith(("cublas", "cufft",
                                                                                                  "cusparse", "cudnn",
                                                                                                  "curand", "nvrtc")):
            assert (CUDA_INCLUDE / cuda_header).is_file(), cuda_header


def test_the_runtime_has_every_cuda_header_whose_api_hips_runtime_header_holds() -> None:
    """A CUDA header whose declarations come with HIP's runtime header (``sm_35_intrinsics.h``,
    ``device_functions.h``, ...) is declared by the SIMT runtime's cuda_runtime.h too: the runtime has the header
    (a source that includes it builds there as with nvcc)."""
    from importlib import resources

    from xpiler_core.tables import raw_table

    include = resources.files("xpiler_core.runtime") / "include"
    pairs = raw_table("headers")["pairs"]
    standing_in = [cuda for cuda, hip in pairs.items() if hip in ("hip/hip_runtime.h", "hip/hip_vector_types.h")]
    assert "sm_35_intrinsics.h" in standing_in
    assert [h for h in standing_in if not (include / h).is_file()] == []
