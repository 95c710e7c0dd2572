"""The server's settings: from ``initializationOptions`` first, then ``workspace/configuration`` (section
``xpiler``), which wins when the client answers. Unknown keys are ignored and wrong types fall back to the
default, so a bad settings file can never take the server down.

Keys (camelCase, as they appear under ``xpiler.`` in an editor's settings)::

    target                   default translation target: "hip" | "cpu" | "cuda" | "bang"   ("hip")
    hipWarpSize              wavefront width assumed for HIP: 32 | 64                        (64)
    toolchains.nvcc/hipcc/gcc  paths of the compilers used for verification              (from PATH)
    testBudget.cases         how many test cases a verification runs (null: all of the spec)
    testBudget.seconds       wall-clock budget of one verification                          (120)
    llm.enabled / endpoint / model / apiKeyEnv   LLM proposals (off by default)
    tuning.budgetSeconds / tuning.trials         tuning budget                          (60 s / 64)
    diagnostics.debounceMs   delay between the last edit and the diagnostics run            (25)
    project.includeDirs / defines / std / programArgs   build and run settings added to those of
                             compile_commands.json and xpiler.toml (found from the file's folder upward,
                             then in the workspace folder)                                 (none)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xpiler_core.dialect import Dialect

SECTION = "xpiler"

# Editor-facing target names → dialects; "cpu" is the C/OpenMP dialect.
TARGET_NAMES: dict[str, Dialect] = {
    "hip": Dialect.HIP,
    "cpu": Dialect.C,
    "c": Dialect.C,
    "cuda": Dialect.CUDA,
    "bang": Dialect.BANG,
}


def target_name(dialect: Dialect) -> str:
    return "cpu" if dialect is Dialect.C else dialect.value


@dataclass
class XpilerConfig:
    target: str = "hip"
    hip_warp_size: int = 64
    toolchains: dict[str, str] = field(default_factory=dict)
    test_cases: int | None = None
    test_seconds: float = 120.0
    llm_enabled: bool = False
    llm_endpoint: str = ""
    llm_model: str = ""
    llm_api_key_env: str = "OPENAI_API_KEY"
    tuning_seconds: float = 60.0
    tuning_trials: int = 64
    debounce_ms: int = 25
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    std: str | None = None
    program_args: tuple[str, ...] = ()

    @property
    def target_dialect(self) -> Dialect:
        return TARGET_NAMES.get(self.target, Dialect.HIP)

    def merged(self, raw: Any) -> XpilerConfig:
        """A copy with the values of ``raw`` (a settings dict) that have the right type."""
        new = XpilerConfig(**self.__dict__)
        if not isinstance(raw, dict):
            return new
        if isinstance(raw.get(SECTION), dict):  # accept {"xpiler": {...}} as well as the section itself
            raw = raw[SECTION]

        def pick(obj: Any, key: str, kind: type | tuple[type, ...]) -> Any:
            if isinstance(obj, dict):
                value = obj.get(key)
                if isinstance(value, bool) and kind is not bool:
                    return None  # bool is an int subclass; true is not a warp size
                if isinstance(value, kind):
                    return value
            return None

        if (target := pick(raw, "target", str)) and target.lower() in TARGET_NAMES:
            new.target = target.lower()
        if (warp := pick(raw, "hipWarpSize", int)) in (32, 64):
            new.hip_warp_size = warp
        toolchains = raw.get("toolchains")
        if isinstance(toolchains, dict):
            new.toolchains = {k: v for k, v in toolchains.items() if isinstance(k, str) and isinstance(v, str) and v}
        budget = raw.get("testBudget")
        if (cases := pick(budget, "cases", int)) is not None and cases > 0:
            new.test_cases = cases
        if (seconds := pick(budget, "seconds", (int, float))) is not None and seconds > 0:
            new.test_seconds = float(seconds)
        llm = raw.get("llm")
        if (enabled := pick(llm, "enabled", bool)) is not None:
            new.llm_enabled = enabled
        for key, attr in (("endpoint", "llm_endpoint"), ("model", "llm_model"), ("apiKeyEnv", "llm_api_key_env")):
            if (value := pick(llm, key, str)) is not None:
                setattr(new, attr, value)
        tuning = raw.get("tuning")
        if (seconds := pick(tuning, "budgetSeconds", (int, float))) is not None and seconds > 0:
            new.tuning_seconds = float(seconds)
        if (trials := pick(tuning, "trials", int)) is not None and trials > 0:
            new.tuning_trials = trials
        diagnostics = raw.get("diagnostics")
        if (debounce := pick(diagnostics, "debounceMs", int)) is not None and 0 <= debounce <= 5000:
            new.debounce_ms = debounce
        project = raw.get("project")

        def strings(key: str) -> tuple[str, ...] | None:
            value = project.get(key) if isinstance(project, dict) else None
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else None

        for key, attr in (("includeDirs", "include_dirs"), ("defines", "defines"), ("programArgs", "program_args")):
            if (values := strings(key)) is not None:
                setattr(new, attr, values)
        if (std := pick(project, "std", str)) is not None:
            new.std = std
        return new

    def warp_size_for(self, dialect: Dialect) -> int:
        return self.hip_warp_size if dialect is Dialect.HIP else 32
