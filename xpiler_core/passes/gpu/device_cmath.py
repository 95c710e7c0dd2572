"""C++ standard math that is host-only in device code. libstdc++'s integral overloads of ``<cmath>``
(``sqrt(dim)`` with an ``int`` ``dim``) and ``std::max``/``std::min`` are ``constexpr`` host templates, which nvcc
rejects in ``__global__``/``__device__`` code (without ``--expt-relaxed-constexpr``):

* an integral overload computes the ``double`` function of the converted argument, so the argument is cast to
  ``double`` (the same value, the device overload);
* ``std::max(a, b)`` / ``std::min(a, b)`` become ``xp_std_max`` / ``xp_std_min``, ``__host__ __device__``
  templates with the standard's definition (``a < b ? b : a``; ``b < a ? b : a``: NaN and tie behaviour kept,
  unlike ``fmaxf``).

Applies to ``__global__``/``__device__`` functions only. Changes nothing (and does not refuse) when no such call
exists.
"""

from __future__ import annotations

from typing import Any

from xpiler_core import ast as A
from xpiler_core.passes.base import PassContext, PassInfo
from xpiler_core.passes.support.ast_support import enter, leave

INFO = PassInfo(
    name="device_cmath",
    summary="Host-only C++ math in device code (integral <cmath> overloads, std::max/min) → device forms",
    kind="ast",
    directions=("c->cuda",),
)

# <cmath> functions with integral overloads (C++11 [c.math]) that have CUDA device double overloads
MATH = frozenset({
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "tgamma", "lgamma",
    "floor", "ceil", "trunc", "round", "fabs", "fmod", "hypot", "fmin", "fmax", "std::sqrt", "std::exp",
    "std::log", "std::pow", "std::sin", "std::cos", "std::tanh", "std::floor", "std::ceil", "std::fabs",
})
INTEGER_TYPES = frozenset({
    "int", "unsigned", "unsigned int", "long", "unsigned long", "long long", "unsigned long long", "short",
    "unsigned short", "char", "signed char", "unsigned char", "size_t", "int8_t", "int16_t", "int32_t", "int64_t",
    "uint8_t", "uint16_t", "uint32_t", "uint64_t", "bool",
})
_DEVICE = ("__global__", "__device__")
STD_MINMAX = {"std::max": "xp_std_max", "std::min": "xp_std_min"}
STD_MINMAX_TEXT = (
    "/* xpiler(device_cmath): std::max / std::min as the standard defines them, callable in device code */\n"
    "template <class T> static __host__ __device__ inline const T &xp_std_max(const T &a, const T &b) "
    "{ return (a < b) ? b : a; }\n"
    "template <class T> static __host__ __device__ inline const T &xp_std_min(const T &a, const T &b) "
    "{ return (b < a) ? b : a; }\n"
)


def _integral(arg: A.Expr, types: dict[str, A.Type]) -> bool:
    if isinstance(arg, A.Literal):
        return arg.int_value is not None and not arg.text.lower().endswith(("f", "l")) and "." not in arg.text
    if isinstance(arg, A.Name) and arg.id in types:
        t = types[arg.id]
        return not t.pointers and not t.reference and t.base in INTEGER_TYPES
    return False


def apply(unit: Any, params: dict[str, Any], ctx: PassContext) -> Any:
    module = enter(unit)
    changed: list[str] = []
    minmax = [False]
    new_module = module
    for fn in module.functions():
        if not any(q in fn.qualifiers for q in _DEVICE):
            continue
        types = A.declared_types(fn)
        count = [0]

        def widen(n: A.Node, types: dict[str, A.Type] = types, count: list[int] = count) -> A.Node | None:
            if isinstance(n, A.Call) and n.callee in STD_MINMAX and len(n.args) == 2:
                count[0] += 1
                minmax[0] = True
                return A.replace(n, func=A.Name(STD_MINMAX[n.callee or ""]),
                                 args=tuple(A.rewrite(a, widen) for a in n.args))
            if isinstance(n, A.Call) and n.callee in MATH and any(_integral(a, types) for a in n.args):
                count[0] += 1
                return A.replace(n, args=tuple(A.Cast(A.ctype("double"), a) if _integral(a, types) else a
                                               for a in n.args))
            return None

        new_fn = A.rewrite(fn, widen)
        if count[0]:
            new_module = new_module.replace_function(fn.name, new_fn)
            changed.append(f"{fn.name} ({count[0]})")
    if not changed:
        return unit
    if minmax[0]:
        first = next(i for i, item in enumerate(new_module.items) if isinstance(item, A.Function))
        items = (*new_module.items[:first], A.Opaque(STD_MINMAX_TEXT), *new_module.items[first:])
        new_module = A.replace(new_module, items=items)
    ctx.notes.append(f"device_cmath: host-only standard math made device code in {', '.join(changed)}")
    return leave(unit, new_module, ctx)
