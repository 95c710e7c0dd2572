"""Unroll pragmas: CUDA's ``#pragma unroll`` becomes GCC's ``#pragma GCC unroll``.

g++ ignores ``#pragma unroll`` (an unknown pragma), so a kernel's small filter loops (``for (r = 0; r < KS;
++r)`` under ``#pragma unroll``) stay loops inside the element loop, and at ``-O2`` the element loop then does
not vectorize (measured: a 3×3 depthwise convolution ran 2.9× slower). CUDA's meaning carries over: ``#pragma
unroll N`` unrolls by ``N`` (``1``: not at all) → ``#pragma GCC unroll N``; a bare ``#pragma unroll`` unrolls
completely a loop whose trip count is a compile-time constant (literals, the enclosing template's non-type
parameters) → ``#pragma GCC unroll 64``, and leaves other loops to the compiler → the pragma is dropped. A
pragma whose count is not an integer literal is dropped too. Refuses when the code holds no unroll pragma.
"""

from __future__ import annotations

import re
from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import PassContext, PassInfo, PassRefused
from xpiler_core.passes.support.ast_support import enter, leave

INFO = PassInfo(
    name="unroll_pragmas",
    summary="CUDA #pragma unroll → GCC's unroll pragma (full unroll only for compile-time trip counts)",
    kind="ast",
    directions=("cuda->cpu",),
)

_UNROLL = re.compile(r"^unroll\b\s*(.*?)\s*$")
_GCC_MAX = 65534  # the largest count GCC accepts
_FULL = 64  # a bare pragma on a constant-trip loop: unroll it completely up to this many iterations


def _template_constants(template: str | None) -> set[str]:
    """Non-type template parameter names (``<int KS, typename T>`` → {KS})."""
    if not template:
        return set()
    return set(re.findall(r"\b(?:int|unsigned|long|short|size_t|bool|char|auto)\s+(\w+)\s*(?:[=,>])", template))


def _compile_time(e: A.Expr, constants: set[str]) -> bool:
    return A.free_names(e) <= constants and not any(isinstance(n, (A.Call, A.Index)) for n in A.walk(e))


def _mapped(pragma: A.Pragma, loop: A.For, constants: set[str]) -> A.Pragma | None:
    """GCC's pragma for a CUDA unroll pragma on ``loop`` (None: drop it)."""
    match = _UNROLL.match(pragma.text.strip())
    assert match is not None
    count = match.group(1)
    if count:
        value = int(count) if count.isdigit() else None
        return A.Pragma(f"GCC unroll {min(value, _GCC_MAX)}") if value is not None and value >= 1 else None
    view = loop.canonical()
    if view is not None and _compile_time(view.start, constants) and _compile_time(view.stop, constants):
        return A.Pragma(f"GCC unroll {_FULL}")
    return None


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    counts = {"mapped": 0, "dropped": 0}

    def rewrite_function(fn: A.Function) -> A.Function:
        constants = _template_constants(fn.template)

        def visit(n: A.Node) -> A.Node | None:
            if not isinstance(n, A.Block):
                return None
            out: list[A.Stmt] = []
            stmts = [A.rewrite(s, visit) for s in n.stmts]
            for k, s in enumerate(stmts):
                nxt = stmts[k + 1] if k + 1 < len(stmts) else None
                if isinstance(s, A.Pragma) and _UNROLL.match(s.text.strip()) and isinstance(nxt, A.For):
                    mapped = _mapped(s, nxt, constants)
                    counts["mapped" if mapped else "dropped"] += 1
                    if mapped is not None:
                        out.append(mapped)
                    continue
                out.append(s)
            return A.replace(n, stmts=tuple(out))

        return A.replace(fn, body=A.rewrite(fn.body, visit))

    new_module = module
    for fn in module.functions():
        new_fn = rewrite_function(fn)
        if new_fn != fn:
            new_module = new_module.replace_function(fn.name, new_fn)
    if not counts["mapped"] and not counts["dropped"]:
        raise PassRefused("no #pragma unroll before a loop")
    ctx.notes.append(f"unroll pragmas: {counts['mapped']} mapped to GCC's, {counts['dropped']} left to the "
                     "compiler (trip count not a compile-time constant, or a count that is not a literal)")
    return leave(unit, new_module, ctx)
