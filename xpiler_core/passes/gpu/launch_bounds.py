"""``__launch_bounds__`` for AMD: keep the thread limit, drop CUDA's second argument, check the 1024 cap.

CUDA's ``__launch_bounds__(maxThreads, minBlocksPerSM[, maxBlocksPerCluster])`` and HIP's
``__launch_bounds__(maxThreads, minWavesPerEU)`` share the first argument only: the second means
something else on AMD (waves per execution unit, not blocks per multiprocessor), so it is removed rather
than passed on with a different meaning. A thread limit above 1024 (the AMD maximum) is unresolved.
"""

from __future__ import annotations

from typing import Any

from xpiler_core.diagnostics import Span
from xpiler_core.frontend.source import parse_text
from xpiler_core.passes.base import PassContext, PassInfo, SourceUnit, Unresolved
from xpiler_core.passes.support.cst import Edit, apply_edits, walk

INFO = PassInfo(
    name="launch_bounds",
    summary="Adapt __launch_bounds__ to AMD: drop the CUDA-only second argument, check the 1024-thread cap",
    kind="cst",
    directions=("cuda->hip",),
)

AMD_MAX_THREADS = 1024


def apply(module: SourceUnit, params: dict[str, Any], ctx: PassContext) -> SourceUnit:
    src = parse_text(module.text, module.path, module.dialect)
    edits: list[Edit] = []
    dropped = 0
    for node in walk(src.root, skip=frozenset({"comment", "string_literal"})):
        if node.type != "launch_bounds":
            continue
        args = [c for c in node.named_children if c.type != "comment"]
        if not args:
            continue
        first = src.node_text(args[0]).strip()
        if first.isdigit() and int(first) > AMD_MAX_THREADS:
            ctx.unresolved.append(Unresolved(f"__launch_bounds__({first}) exceeds AMD's {AMD_MAX_THREADS} threads per "
                                             "block", Span.of(node), "__launch_bounds__"))
        if len(args) > 1:
            edits.append(Edit(args[0].end_byte, args[-1].end_byte, ""))
            dropped += 1
    if dropped:
        ctx.notes.append(f"launch_bounds: dropped the CUDA min-blocks-per-SM argument ×{dropped} "
                         "(HIP's second argument means min waves per EU)")
    data, _ = apply_edits(src.data, edits)
    return SourceUnit(data.decode("utf-8"), module.dialect, module.path)
