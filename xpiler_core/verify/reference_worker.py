"""Child process that runs a spec's Python reference (``file.py:function``), so the user's Python code runs
under the run's time and memory limits and never inside xpiler's own process.

``python reference_worker.py MODULE.py FUNCTION``. Protocol on stdin/stdout: one JSON object per line.
First the worker answers ``{"ready": true}`` or ``{"error": "..."}`` (the module did not import, the function
is missing). Then each request ``{"inputs": "in.npz", "outputs": "out.npz"}`` calls the function with the
arrays and scalars of ``in.npz`` as keyword arguments and answers ``{"kind": "dict"|"seq"|"one", "names":
[...]}`` with the results in ``out.npz``, or ``{"error": "..."}``. Arrays travel as ``.npz`` files loaded
without pickle in both directions.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from typing import Any


def _reply(message: dict[str, Any]) -> None:
    sys.__stdout__.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
    sys.__stdout__.flush()  # type: ignore[union-attr]


def main(argv: list[str]) -> int:
    import numpy as np

    module_path, function = argv[1], argv[2]
    sys.stdout = sys.stderr  # the reference's prints must not corrupt the protocol
    try:
        spec = importlib.util.spec_from_file_location("xpiler_reference", module_path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {module_path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - user code: report, do not crash
        _reply({"error": f"reference module failed to import: {exc!r}"})
        return 0
    fn = getattr(module, function, None)
    if not callable(fn):
        _reply({"error": f"reference function {function!r} not found"})
        return 0
    _reply({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            with np.load(request["inputs"], allow_pickle=False) as data:
                kwargs = {name: (data[name].item() if data[name].ndim == 0 and name in request.get("scalars", [])
                                 else data[name]) for name in data.files}
            result = fn(**kwargs)
            if isinstance(result, dict):
                kind, names, arrays = "dict", [str(k) for k in result], list(result.values())
            elif isinstance(result, (tuple, list)):
                kind, names, arrays = "seq", [], list(result)
            else:
                kind, names, arrays = "one", [], [result]
            np.savez(request["outputs"], *[np.asarray(a) for a in arrays])
            _reply({"kind": kind, "names": names})
        except BaseException as exc:  # noqa: BLE001 - user code: a failing case, not a crash
            _reply({"error": f"{exc!r}", "trace": traceback.format_exc(limit=3)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
