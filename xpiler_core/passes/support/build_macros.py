"""Preprocessor conditions read as the source's compiler read them.

A translation is built by another compiler, which defines other macros. CPU output is built with
``-fopenmp``, so ``_OPENMP`` is defined there and not in the CUDA/HIP build: code shared between a project's
CUDA and OpenMP versions (``float2`` defined only ``#if defined(_OPENMP)``) would otherwise take the OpenMP
branch and change meaning. hipcc and g++ define no CUDA version, so ``#if CUDART_VERSION >= 2020`` would take
the branch for an old or missing CUDA. The translation fixes each such condition to the value the source's
build gave it. The CUDA version is taken as 12.0: the newest release whose device API the runtime and the
mapping tables cover in full (12.8 adds the ``__nv_atomic_*`` builtins, not mapped yet), so a program's
version gates pick code every target can build; the runtime's own headers say the same version, so the
source run and the translation read each gate alike.
"""

from __future__ import annotations

import re

# The CUDA release the source's build is taken to be (runtime/include/cuda_runtime.h and cuda.h say the same).
SOURCE_CUDA_VERSION = 12000

# Macro → its value in a CUDA source's build (None: not defined there), for macros the target build
# defines differently. CUDA_VERSION comes from <cuda.h> and is only fixed where that header is included.
_CUDA_BUILD: dict[str, int | None] = {
    "_OPENMP": None,
    "CUDART_VERSION": SOURCE_CUDA_VERSION,
    "__CUDACC_VER_MAJOR__": SOURCE_CUDA_VERSION // 1000,
    "__CUDACC_VER_MINOR__": SOURCE_CUDA_VERSION % 1000 // 10,
}
_CUDA_DRIVER_HEADER = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]cuda\.h[>"]', re.M)

# a condition with its continued lines (`#if A \` then `    || B`): the note goes after its last line
_DIRECTIVE = re.compile(r"^(?P<lead>[ \t]*#[ \t]*)(?P<kind>ifdef|ifndef|if|elif)\b(?P<rest>(?:[^\n]*\\\n)*[^\n]*)$",
                        re.M)


def _source_build(text: str) -> dict[str, int | None]:
    values = dict(_CUDA_BUILD)
    if _CUDA_DRIVER_HEADER.search(text):
        values["CUDA_VERSION"] = SOURCE_CUDA_VERSION
    return values


def _note(macro: str, value: int | None) -> str:
    return (f"/* xpiler: {macro} is not defined in the source's build */" if value is None
            else f"/* xpiler: {macro} is {value} in the source's build */")


def _tested(text: str, macros: dict[str, int | None]) -> list[str]:
    return [m for m in macros if m in text and any(re.search(rf"\b{m}\b", d["rest"]) for d in _DIRECTIVE.finditer(text))]


def tests_source_build_macros(text: str) -> bool:
    """Whether a preprocessor condition of ``text`` tests a macro the source's build defines differently."""
    return bool(_tested(text, _source_build(text)))


def as_source_build_saw(text: str) -> str:
    """``text`` with every condition on such a macro replaced by its value in the source's (CUDA) build."""
    values = _source_build(text)
    tested = _tested(text, values)
    if not tested:
        return text

    def directive(match: re.Match[str]) -> str:
        lead, kind, rest = match["lead"], match["kind"], match["rest"]
        for macro in tested:
            if not re.search(rf"\b{macro}\b", rest):
                continue
            value = values[macro]
            defined = "0" if value is None else "1"
            if kind in ("ifdef", "ifndef") and rest.split()[0:1] == [macro]:
                holds = defined if kind == "ifdef" else str(1 - int(defined))
                return f"{lead}if {holds} {_note(macro, value)}"
            rest = re.sub(rf"\bdefined\s*\(\s*{macro}\s*\)|\bdefined\s+{macro}\b", defined, rest)
            rest = re.sub(rf"\b{macro}\b", "0" if value is None else str(value), rest)
            rest = f"{rest} {_note(macro, value)}"
        return f"{lead}{kind}{rest}"

    return _DIRECTIVE.sub(directive, text)
