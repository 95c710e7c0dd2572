"""The prelude a CUDA → BANG translation starts with: the CPU prelude's CUDA vocabulary spelled for the MLU
model, and the launch shape. BANG → CUDA recognises it by its mark and replaces it."""

from __future__ import annotations

import re

from xpiler_core.passes.support.cpu_prelude import PRELUDE

TASKS = 16  # 4 clusters × 4 cores (Union1); the binding is correct for any task count

BANG_PRELUDE_MARK = "/* xpiler BANG prelude */"


def bang_prelude(tasks: int = TASKS) -> str:
    """The CPU prelude's CUDA vocabulary (half/vector types, shuffles over per-thread arrays, dim3, host
    memory API) minus what BANG already names (``half`` is the MLU's own type), plus the launch shape."""
    body = PRELUDE.split("\n", 1)[1]
    body = body.replace("typedef __half half;\n", "")
    body = re.sub(r"#ifdef _OPENMP\n#include <omp.h>\n#endif\n", "", body)
    # atomics: tasks of one launch interleave only at barriers on the model, and GDRAM read-modify-write
    # from one core is not interrupted there; the _Pragma is an OpenMP-only hint, dropped here.
    body = body.replace('_Pragma("omp atomic capture") ', "")
    return (
        f"{BANG_PRELUDE_MARK}\n#include <bang.h>\n"
        "#ifndef __mlu_const__\n#define __mlu_const__ /* constant data lives in GDRAM on the model */\n#endif\n"
        f"{body}"
        f"static inline cnrtDim3_t xp_task_dim(void) {{ cnrtDim3_t d = {{{tasks}, 1, 1}}; return d; }}\n"
    )


