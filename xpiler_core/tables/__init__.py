"""The CUDA ⇄ HIP mapping tables: data files in this package, loaded once, usable in both directions.

Each ``*.toml`` file holds one category (runtime API, types, enums, error codes, driver API, headers,
intrinsics, complex numbers, libraries) with ``[pairs]`` (CUDA name = HIP name) and optional ``[reverse]``
entries that choose the CUDA name where several CUDA names share one HIP name. ``intrinsics.toml`` adds
``[[calls]]`` whose argument lists change; ``[legacy_pairs]`` are names current CUDA headers dropped; ``[hip_only]`` HIP-only names (HIP → CUDA only); ``libraries.toml`` adds ``[unsupported]`` calls (reported, never
renamed blindly) and ``[namespaces]``; ``headers.toml`` adds ``[[prefix]]`` rules for header families and
``[defined_in_place]``: CUDA headers of constants (``math_constants.h``) whose values a table holds;
``[pasted_prefixes]`` (runtime API): the API prefix a macro pastes names onto (``cuda##fn`` → ``hip##fn``);
``[member_order]`` (types): structs whose members the two APIs declare in different orders.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from typing import Literal

Direction = Literal["cuda->hip", "hip->cuda"]


@dataclass(frozen=True)
class CallRewrite:
    """A call whose name and leading arguments change between CUDA and HIP."""

    cuda: str
    hip: str
    drop_leading: int = 0
    drop_all: bool = False
    reverse_prepend: tuple[str, ...] = ()
    # index of an argument HIP declares as `const void*` (a kernel): cast with reinterpret_cast, -1 = none
    void_ptr_arg: int = -1
    # index of an out-parameter HIP declares as `void**` where CUDA adds a `T**` template: cast, -1 = none
    void_ptr_ptr_arg: int = -1
    # trailing arguments HIP declares without a default (CUDA's C++ API gives them one): the full count and
    # the defaults of the last ones, appended where a call leaves them out
    arity: int = 0
    trailing_defaults: tuple[str, ...] = ()


@dataclass(frozen=True)
class HeaderPrefix:
    cuda: str
    hip: str
    cuda_suffix: str = ""
    hip_suffix: str = ""


@dataclass
class MappingTable:
    """One direction's view of every table: names, calls, headers, namespaces, refusals."""

    direction: Direction
    names: dict[str, str] = field(default_factory=dict)
    # name -> the table category it came from (for diagnostics and the manifest)
    categories: dict[str, str] = field(default_factory=dict)
    calls: dict[str, CallRewrite] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    header_prefixes: list[HeaderPrefix] = field(default_factory=list)
    # include path -> the prefixes of every name it declares: dropped when the file uses none of them
    drop_when_unused: dict[str, tuple[str, ...]] = field(default_factory=dict)
    namespaces: dict[str, str] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    # every name of the source API the tables know, mapped or not (to tell "unknown API" from "user name")
    known_source_names: frozenset[str] = frozenset()
    # rows with a status other than "ok" ([status] tables): source name -> (status, what it needs)
    status: dict[str, tuple[str, str]] = field(default_factory=dict)
    # struct members the target's struct lacks: member -> the expression that stands for it ({object}{op}: the
    # object and its '.' or '->'), CUDA -> HIP only
    members: dict[str, str] = field(default_factory=dict)
    # CUDA headers of constants the target has no header for (CUDA -> HIP only): include path -> macro -> value;
    # the include is replaced by definitions of the macros the file uses
    defined_in_place: dict[str, dict[str, str]] = field(default_factory=dict)
    # an API prefix a macro body pastes names onto (`(cuda##fn)` in a project's error-check macro) -> the
    # target's prefix
    pasted_prefixes: dict[str, str] = field(default_factory=dict)
    # source struct name -> (its members in the source's order, the same members in the target's order):
    # positional brace initializers are reordered
    member_orders: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)

    def map_header(self, path: str) -> str | None:
        if path in self.headers:
            return self.headers[path]
        for rule in self.header_prefixes:
            src_prefix, dst_prefix, src_suffix, dst_suffix = (
                (rule.cuda, rule.hip, rule.cuda_suffix, rule.hip_suffix)
                if self.direction == "cuda->hip"
                else (rule.hip, rule.cuda, rule.hip_suffix, rule.cuda_suffix)
            )
            if path.startswith(src_prefix) and path.endswith(src_suffix):
                stem = path[len(src_prefix) : len(path) - len(src_suffix) if src_suffix else None]
                return dst_prefix + stem + dst_suffix
        return None


#: Per-row statuses of the [status] tables (a row without one is "ok": declared by both installed toolkits).
ROW_STATUSES = ("needs-newer-hip", "unsupported", "library-not-installed")

TABLE_FILES = (
    "runtime_api",
    "runtime_types",
    "runtime_enums",
    "error_codes",
    "driver_api",
    "complex",
    "intrinsics",
    "libraries",
    "headers",
)


@cache
def raw_table(name: str) -> dict:
    """One table file parsed as TOML."""
    text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _invert(pairs: dict[str, str], preferred: dict[str, str]) -> dict[str, str]:
    """HIP -> CUDA: the [reverse] choice where given, else the first CUDA name (sorted) for each HIP name."""
    out: dict[str, str] = {}
    for cuda_name in sorted(pairs):
        out.setdefault(pairs[cuda_name], cuda_name)
    out.update(preferred)
    return out


@lru_cache(maxsize=2)
def load_mapping(direction: Direction) -> MappingTable:
    """All tables, oriented for ``direction``."""
    table = MappingTable(direction)
    source_names: set[str] = set()
    forward = direction == "cuda->hip"
    for name in TABLE_FILES:
        data = raw_table(name)
        category = str(data.get("meta", {}).get("category", name))
        pairs: dict[str, str] = {**data.get("legacy_pairs", {}), **data.get("pairs", {})}
        reverse: dict[str, str] = dict(data.get("reverse", {}))
        if name == "headers":
            table.headers.update(pairs if forward else _invert(pairs, reverse))
            table.header_prefixes.extend(HeaderPrefix(**rule) for rule in data.get("prefix", []))
            table.drop_when_unused.update({path: tuple(prefixes) for path, prefixes
                                           in data.get("drop_when_unused", {}).items()})
            if forward:
                table.defined_in_place.update({path: dict(raw_table(constants)["constants"]) for path, constants
                                               in data.get("defined_in_place", {}).items()})
                table.unsupported.update(data.get("unsupported", {}))  # header paths: api_map reports the include
            continue
        oriented = pairs if forward else {**_invert(pairs, reverse), **data.get("hip_only", {})}
        for src, dst in oriented.items():
            table.names.setdefault(src, dst)
            table.categories.setdefault(src, category)
        source_names.update(oriented)
        for call in data.get("calls", []):
            rewrite = CallRewrite(
                cuda=call["cuda"],
                hip=call["hip"],
                drop_leading=int(call.get("drop_leading", 0)),
                drop_all=bool(call.get("drop_all", False)),
                reverse_prepend=tuple(call.get("reverse_prepend", ())),
                void_ptr_arg=int(call.get("void_ptr_arg", -1)),
                void_ptr_ptr_arg=int(call.get("void_ptr_ptr_arg", -1)),
                arity=int(call.get("arity", 0)),
                trailing_defaults=tuple(call.get("trailing_defaults", ())),
            )
            table.calls[rewrite.cuda if forward else rewrite.hip] = rewrite
            source_names.add(rewrite.cuda if forward else rewrite.hip)
        if forward:
            table.members.update(data.get("members", {}))
        for cuda_struct, orders in data.get("member_order", {}).items():
            cuda_order, hip_order = tuple(orders["cuda"]), tuple(orders["hip"])
            if sorted(cuda_order) != sorted(hip_order):
                raise ValueError(f"tables/{name}.toml: member_order.{cuda_struct} lists different members")
            if forward:
                table.member_orders[cuda_struct] = (cuda_order, hip_order)
            elif cuda_struct in pairs:
                table.member_orders[pairs[cuda_struct]] = (hip_order, cuda_order)
        prefixes: dict[str, str] = dict(data.get("pasted_prefixes", {}))
        table.pasted_prefixes.update(prefixes if forward else {v: k for k, v in prefixes.items()})
        namespaces: dict[str, str] = dict(data.get("namespaces", {}))
        table.namespaces.update(namespaces if forward else {v: k for k, v in namespaces.items()})
        if forward:
            table.unsupported.update(data.get("unsupported", {}))
            source_names.update(data.get("unsupported", {}))
        for cuda_name, row in data.get("status", {}).items():
            if row.get("status") not in ROW_STATUSES:
                raise ValueError(f"tables/{name}.toml: {cuda_name} has an unknown status {row.get('status')!r}")
            key = cuda_name if forward else pairs.get(cuda_name, cuda_name)
            table.status[key] = (str(row["status"]), str(row.get("needs", "")))
    table.known_source_names = frozenset(source_names)
    return table


@cache
def c_math_functions() -> frozenset[str]:
    """The C-linkage functions of ``<math.h>``, each in its double, float and long double form."""
    bases = raw_table("c_library")["math"]["bases"]
    return frozenset(f"{base}{suffix}" for base in bases for suffix in ("", "f", "l"))


@cache
def c_library_functions() -> frozenset[str]:
    """Every C-linkage function ``c_library.toml`` lists: the math functions and those of the other headers."""
    return c_math_functions() | frozenset(raw_table("c_library")["other"]["names"])


def table_summary() -> dict[str, int]:
    """Pair counts per category (for documentation and the manifest)."""
    return {
        str(raw_table(n).get("meta", {}).get("category", n)): len(raw_table(n).get("pairs", {}))
        + len(raw_table(n).get("calls", []))
        for n in TABLE_FILES
    }


# Header families that belong to a GPU toolchain beyond those the [pairs] name: a CPU translation drops them
# (its prelude provides the vocabulary it keeps), other includes stay.
_GPU_HEADER_PREFIXES = ("cuda", "cub/", "thrust/", "cooperative_groups", "hip/", "hipcub/", "rocwmma/", "rocprim/",
                        "curand", "cublas", "cufft", "cusparse", "cudnn", "nvtx", "nvToolsExt", "sm_", "crt/",
                        "device_", "vector_types", "mma.h", "nvrtc", "helper_cuda", "hiprand/", "hipblas/")


def is_gpu_header(path: str) -> bool:
    """Whether an include path names a header of the CUDA or HIP toolchains or their libraries."""
    table = load_mapping("cuda->hip")
    if path in table.headers or path in table.headers.values() or table.map_header(path) is not None:
        return True
    return path.startswith(_GPU_HEADER_PREFIXES) or path.split("/")[-1].startswith(_GPU_HEADER_PREFIXES)
