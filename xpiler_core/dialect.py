"""Source dialects and their detection from file suffix and content."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import PurePath


class Dialect(StrEnum):
    CUDA = "cuda"
    HIP = "hip"
    BANG = "bang"
    C = "c"

    @property
    def suffix(self) -> str:
        return {"cuda": ".cu", "hip": ".hip", "bang": ".mlu", "c": ".c"}[self.value]


_SUFFIXES: dict[str, Dialect] = {
    ".cu": Dialect.CUDA,
    ".cuh": Dialect.CUDA,
    ".hip": Dialect.HIP,
    ".mlu": Dialect.BANG,
    ".c": Dialect.C,
    ".h": Dialect.C,
    ".cc": Dialect.C,
    ".cpp": Dialect.C,
    ".cxx": Dialect.C,
    ".hpp": Dialect.C,
}

# Content markers that override the suffix: a `.cu` that calls hipMalloc is HIP source.
_HIP_MARKERS = re.compile(
    r"\b(hipMalloc|hipMemcpy|hipLaunchKernelGGL|hipDeviceSynchronize|hipStream_t|hipFree|hipError_t)\b"
    r"|#\s*include\s*[<\"]hip/"
)
_BANG_MARKERS = re.compile(r"\b(__mlu_global__|__mlu_func__|__mlu_entry__|__nram__|__wram__|__bang_\w+)\b")
_BANG_WORDS = ("__mlu_", "__nram__", "__wram__", "__bang_")
# A C/C++ file that is host code of a CUDA program: it includes the CUDA runtime or a CUDA library.
_CUDA_HOST_CODE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"](cuda_runtime(_api)?|cuda|cublas(_v2|Lt)?|cufft|curand(_kernel)?|'
                             r'cusparse|cusolverDn|cudnn|nvrtc|npp\w*)\.h[>"]|^[ \t]*#[ \t]*include[ \t]*<thrust/', re.M)
_CUDA_MARKERS = re.compile(r"\b(__global__|__device__|__shared__|threadIdx|blockIdx|cudaMalloc)\b")


def dialect_from_suffix(path: str | None) -> Dialect | None:
    if not path:
        return None
    return _SUFFIXES.get(PurePath(path).suffix.lower())


# Macros a HIP build defines and a CUDA build does not (and the other way round).
_HIP_MACROS = frozenset({"__HIPCC__", "__HIP_PLATFORM_AMD__", "__HIP_PLATFORM_HCC__", "__HIP__",
                         "__HIP_DEVICE_COMPILE__", "__HIP_PLATFORM_NVIDIA__", "USE_HIP", "__HIP_ROCclr__"})
_CUDA_MACROS = frozenset({"__CUDACC__", "__NVCC__", "__CUDA_ARCH__", "__CUDACC_VER_MAJOR__", "CUDART_VERSION"})
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b(.*)$")
_TOKEN = re.compile(r"defined|\|\||&&|!|\(|\)|[A-Za-z_]\w*|\d+|\S")


def _evaluate(condition: str, defined: frozenset[str], undefined: frozenset[str]) -> bool | None:
    """A preprocessor condition under partial knowledge: True/False when the known macros decide it, None when
    it depends on others. Understands ``defined``, ``!``, ``&&``, ``||``, parentheses and integer literals."""
    tokens = _TOKEN.findall(condition.split("//")[0].split("/*")[0])
    pos = 0

    def atom() -> bool | None:
        nonlocal pos
        if pos >= len(tokens):
            return None
        token = tokens[pos]
        pos += 1
        if token == "!":
            value = atom()
            return None if value is None else not value
        if token == "(":
            value = either()
            if pos < len(tokens) and tokens[pos] == ")":
                pos += 1
            return value
        if token == "defined":
            parens = pos < len(tokens) and tokens[pos] == "("
            if parens:
                pos += 1
            name = tokens[pos] if pos < len(tokens) else ""
            pos += 1
            if parens and pos < len(tokens) and tokens[pos] == ")":
                pos += 1
            return True if name in defined else False if name in undefined else None
        if token.isdigit():
            return int(token) != 0
        return True if token in defined else False if token in undefined else None

    def both() -> bool | None:
        nonlocal pos
        value = atom()
        while pos < len(tokens) and tokens[pos] == "&&":
            pos += 1
            other = atom()
            value = False if value is False or other is False else None if None in (value, other) else True
        return value

    def either() -> bool | None:
        nonlocal pos
        value = both()
        while pos < len(tokens) and tokens[pos] == "||":
            pos += 1
            other = both()
            value = True if value is True or other is True else None if None in (value, other) else False
        return value

    result = either()
    # anything left over (comparisons, arithmetic) makes the condition unknown unless already decided by
    # known macros alone
    return result if pos >= len(tokens) else None


def platform_view(text: str, defined: frozenset[str], undefined: frozenset[str]) -> str:
    """``text`` without the conditional branches a build with these macros never compiles (branches whose
    condition depends on other macros are kept)."""
    out: list[str] = []
    # per open #if: (this branch compiled?, some earlier branch certainly taken?)
    stack: list[tuple[bool, bool]] = []
    for line in text.splitlines():
        directive = _DIRECTIVE.match(line)
        active = all(compiled for compiled, _ in stack)
        if directive is None:
            if active:
                out.append(line)
            continue
        kind, rest = directive.group(1), directive.group(2).strip()
        if kind in ("if", "ifdef", "ifndef"):
            if kind == "ifdef":
                value = _evaluate(f"defined({rest.split()[0] if rest else ''})", defined, undefined)
            elif kind == "ifndef":
                value = _evaluate(f"!defined({rest.split()[0] if rest else ''})", defined, undefined)
            else:
                value = _evaluate(rest, defined, undefined)
            stack.append((value is not False, value is True))
        elif kind == "elif" and stack:
            _, taken = stack[-1]
            value = _evaluate(rest, defined, undefined)
            stack[-1] = (not taken and value is not False, taken or value is True)
        elif kind == "else" and stack:
            _, taken = stack[-1]
            stack[-1] = (not taken, True)
        elif kind == "endif" and stack:
            stack.pop()
        if active:
            out.append(line)  # directives stay (the branches they guard were filtered)
    return "\n".join(out)


# the include of the SIMT header set a portable-tier CPU output carries beside it (relative or absolute)
_PORTABLE_TIER = re.compile(r'^\s*#\s*include\s*"[^"\n]*xpiler_simt/', re.MULTILINE)


def detect_dialect(text: str, path: str | None = None) -> Dialect:
    """Dialect from content first (HIP/BANG markers are unambiguous), then suffix, then CUDA markers.

    HIP markers count only in code a HIP-less build compiles when the file also holds CUDA code: a ``.cu``
    file whose ``#ifdef __HIP_PLATFORM_AMD__`` branch includes HIP headers is CUDA source."""
    sample = text[:2_000_000]
    if "xpiler_simt/" in sample and _PORTABLE_TIER.search(sample):
        return Dialect.C  # a CPU output on the portable tier: GPU code compiled against its SIMT headers
    # Substring checks first: a regex scan costs ~1 ms per 35 kB and most files have no marker at all.
    if any(word in sample for word in _BANG_WORDS) and _BANG_MARKERS.search(sample):
        return Dialect.BANG
    if "hip" in sample and _HIP_MARKERS.search(sample):
        if "#" not in sample or not re.search(r"#\s*(if|ifdef|ifndef)\b", sample):
            return Dialect.HIP
        cuda_build = platform_view(sample, _CUDA_MACROS, _HIP_MACROS)
        if _HIP_MARKERS.search(cuda_build) or not _CUDA_MARKERS.search(cuda_build):
            return Dialect.HIP
    by_suffix = dialect_from_suffix(path)
    if by_suffix is Dialect.C and _CUDA_HOST_CODE.search(sample):
        return Dialect.CUDA  # a .cpp host program of a CUDA project (CUDA runtime or library calls)
    if by_suffix is not None:
        return by_suffix
    if _CUDA_MARKERS.search(sample):
        return Dialect.CUDA
    return Dialect.C
