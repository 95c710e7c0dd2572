"""The loop many passes share: rewrite every function they apply to, collect why the others were left.

A pass gives a selector (which top-level functions it looks at) and a rewrite (the new function, or a
string saying why not); :func:`rewrite_each` returns the module with every successful rewrite in place,
the names rewritten and the reasons for the rest, and refuses the pass with all reasons when nothing was
rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xpiler_core import ast as A
from xpiler_core.passes.base import PassRefused


@dataclass
class Rewritten:
    module: A.Module
    done: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # "name: why", for the functions left as they were


def kernel_or_why(fn: A.Function) -> bool | str:
    """``__global__`` kernels are rewritten unless they hold code the AST does not model (then: why not)."""
    if not fn.is_kernel:
        return False
    return "unmodeled code" if any(isinstance(n, A.Opaque) for n in A.walk(fn.body)) else True


def is_bound_kernel(fn: A.Function) -> bool:
    """A kernel bound to blocks by loop recovery (it takes the launch grid as ``xp_grid``)."""
    return any(isinstance(p, A.Param) and p.name == "xp_grid" for p in fn.params)


def rewrite_each(
    module: A.Module,
    select: Callable[[A.Function], bool | str],
    rewrite: Callable[[A.Function], A.Function | str],
    *,
    nothing: str,
    tolerate: tuple[type[Exception], ...] = (),
) -> Rewritten:
    """``rewrite`` on every function ``select`` accepts (a string from ``select`` is a reason to skip it);
    a :class:`PassRefused` or one of the ``tolerate`` exceptions (an unforeseen shape) leaves that function
    as it was. Refuses with every reason (or ``nothing``) when no function was rewritten."""
    out = Rewritten(module)
    items = list(module.items)
    for k, item in enumerate(items):
        if not isinstance(item, A.Function):
            continue
        chosen = select(item)
        if isinstance(chosen, str):
            out.reasons.append(f"{item.name}: {chosen}")
            continue
        if not chosen:
            continue
        try:
            new = rewrite(item)
        except PassRefused as refusal:
            new = refusal.reason
        except tolerate as exc:
            new = f"not analysable ({type(exc).__name__})"
        if isinstance(new, str):
            out.reasons.append(f"{item.name}: {new}")
            continue
        items[k] = new
        out.done.append(item.name)
    if not out.done:
        raise PassRefused("; ".join(out.reasons) or nothing)
    out.module = A.replace(module, items=tuple(items))
    return out
