"""Preprocessor conditions read as the source's compiler read them.

CPU output is built with ``-fopenmp``, so ``_OPENMP`` is defined there; the CUDA/HIP source was built without
it. Code shared between a project's CUDA and OpenMP versions (a header that defines ``float2`` only
``#if defined(_OPENMP)``) would otherwise take the OpenMP branch in the translation and change meaning. The
translation fixes each such condition to the value the source's build gave it.
"""

from __future__ import annotations

import re

# Macros the CPU build defines that a CUDA/HIP build does not.
_CPU_BUILD_ONLY = ("_OPENMP",)

_DIRECTIVE = re.compile(r"^(?P<lead>[ \t]*#[ \t]*)(?P<kind>ifdef|ifndef|if|elif)\b(?P<rest>[^\n]*)$", re.M)


def _fixed(macro: str) -> str:
    return f"/* xpiler: {macro} is not defined in the source's build */"


def tests_cpu_build_macros(text: str) -> bool:
    """Whether a preprocessor condition of ``text`` tests a macro only the CPU build defines."""
    return any(m in text for m in _CPU_BUILD_ONLY) and any(
        re.search(rf"\b{m}\b", d["rest"]) for d in _DIRECTIVE.finditer(text) for m in _CPU_BUILD_ONLY)


def as_source_build_saw(text: str) -> str:
    """``text`` with every condition on a CPU-build-only macro replaced by its value in the GPU build."""
    if not any(m in text for m in _CPU_BUILD_ONLY):
        return text

    def directive(match: re.Match[str]) -> str:
        lead, kind, rest = match["lead"], match["kind"], match["rest"]
        for macro in _CPU_BUILD_ONLY:
            if not re.search(rf"\b{macro}\b", rest):
                continue
            if kind in ("ifdef", "ifndef") and rest.split()[0:1] == [macro]:
                return f"{lead}if {'0' if kind == 'ifdef' else '1'} {_fixed(macro)}"
            rest = re.sub(rf"\bdefined\s*\(\s*{macro}\s*\)|\bdefined\s+{macro}\b|\b{macro}\b", "0", rest)
            rest = f"{rest} {_fixed(macro)}"
        return f"{lead}{kind}{rest}"

    return _DIRECTIVE.sub(directive, text)
