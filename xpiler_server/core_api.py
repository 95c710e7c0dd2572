"""The one place where the server calls the core. Everything the server needs from ``xpiler_core`` goes
through these functions, so the features stay thin and a core API that has not landed yet degrades to a
clear message instead of an ImportError in a handler.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.frontend.dialect import Dialect
from xpiler_core.frontend.source import ParsedSource
from xpiler_core.progress import CancelToken, ProgressFn

log = logging.getLogger(__name__)


class CoreUnavailable(Exception):
    """A core feature this request needs is not available in this installation."""


@dataclass(frozen=True)
class KernelInfo:
    """What the editor shows about one kernel: where it is and what it uses."""

    name: str
    span: Span
    name_span: Span
    reference_spans: tuple[Span, ...] = ()
    features: tuple[str, ...] = ()
    params: tuple[str, ...] = ()


def _optional(module: str) -> Any | None:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name and module.startswith(exc.name):
            return None  # the module itself is missing: the feature has not landed
        raise


# ---------------------------------------------------------------------------------------------------------
# Model


def analyze_model(parsed: ParsedSource) -> tuple[Any, list[KernelInfo], list[Diagnostic]]:
    """The kernel model of a parse, its kernels and its diagnostics (unsupported constructs…)."""
    model_module = _optional("xpiler_core.frontend.model")
    if model_module is None:
        return None, [], []
    try:
        model = model_module.build_model(parsed)
    except Exception as exc:  # the frontend promises not to raise; if it does, say so on line 1
        log.exception("build_model failed on %s", parsed.path)
        return None, [], [
            Diagnostic(Severity.WARNING, "server.model-failed", f"kernel model failed: {exc}", Span.empty(), parsed.path)
        ]
    return model, _kernels_from_model(model), list(getattr(model, "diagnostics", []) or [])


def _kernels_from_model(model: Any) -> list[KernelInfo]:
    kernels: list[KernelInfo] = []
    for kernel in model.kernels:
        # A launch site's span starts at the launched name (``K<<<...>>>(...)``, ``hipLaunchKernelGGL(K, ...)``
        # starts with the API name, so only chevron launches give a reference under the cursor).
        references = tuple(
            _name_prefix(launch.span, kernel.name)
            for launch in model.launches
            if launch.kernel == kernel.name and launch.style == "chevron"
        )
        params = tuple(p.name for p in kernel.params if p.name)
        features = tuple(model.reachable_features(kernel.name))
        kernels.append(KernelInfo(kernel.name, kernel.span, kernel.name_span, references, features, params))
    return kernels


def _name_prefix(span: Span, name: str) -> Span:
    width = len(name.encode("utf-8"))
    return Span(span.start_byte, span.start_byte + width, span.start_line, span.start_col, span.start_line, span.start_col + width)


# ---------------------------------------------------------------------------------------------------------
# Hazards on the configured target


def target_diagnostics(parsed: ParsedSource, model: Any, target: Dialect, warp_size: int) -> list[Diagnostic]:
    """Warp-size hazards (HIP targets) and constructs the target does not support."""
    out: list[Diagnostic] = []
    if target is Dialect.HIP and parsed.dialect is Dialect.CUDA:
        out.extend(_warp_hazards(parsed, model, warp_size))
    pipeline = _optional("xpiler_core.pipeline")
    checker = getattr(pipeline, "unsupported_constructs", None) if pipeline is not None else None
    if checker is not None and model is not None:
        try:
            out.extend(checker(model, target))
        except Exception:
            log.exception("unsupported-construct check failed")
    return out


def _warp_hazards(parsed: ParsedSource, model: Any, warp_size: int) -> list[Diagnostic]:
    warp = _optional("xpiler_core.passes.warp_size")
    if warp is None:
        return []
    finder = getattr(warp, "find_hazards", None)
    try:
        if finder is not None:
            return list(finder(model, warp_size=warp_size))
        # No finder exposed: run the pass itself (pure, text in → text out) and keep what it reports
        # about the source: its 32-lane assumption diagnostics and the constructs it left unresolved.
        from xpiler_core.passes.base import PassContext, SourceUnit

        ctx = PassContext(Dialect.CUDA, Dialect.HIP, warp_size=warp_size, file=parsed.path)
        warp.apply(SourceUnit(parsed.text, Dialect.CUDA, parsed.path), warp.INFO.defaults(), ctx)
    except Exception:
        log.exception("warp-size hazard check failed")
        return []
    out = [d for d in ctx.diagnostics if d.code.startswith("warp_size")]
    for item in ctx.unresolved:
        out.append(
            Diagnostic(
                Severity.WARNING,
                "warp_size.unresolved",
                f"warp size {warp_size}: {item.reason}",
                item.span,
                parsed.path,
            )
        )
    return out


# ---------------------------------------------------------------------------------------------------------
# Directions, translation, passes

def available_targets(source: Dialect) -> list[Dialect]:
    """Targets the pipeline has a plan for from ``source`` (a plan is a module in ``xpiler_core.plans``)."""
    pipeline = _optional("xpiler_core.pipeline")
    if pipeline is None:
        return []
    targets = []
    for target in (Dialect.HIP, Dialect.C, Dialect.CUDA, Dialect.BANG):
        if target is source:
            continue
        name = f"xpiler_core.plans.{pipeline.direction_name(source, target)}"
        try:
            if importlib.util.find_spec(name) is not None:
                targets.append(target)
        except ImportError:
            continue
    return targets


def translate(
    text: str,
    path: str,
    target: Dialect,
    *,
    warp_size: int | None,
    spec_path: str | None,
    verify: bool,
    proposer: str,
    progress: ProgressFn,
    cancel: CancelToken,
    llm: dict[str, str] | None = None,  # LLM settings (base_url, model, api_key_env) for proposer != "rules"
) -> Any:
    pipeline = _optional("xpiler_core.pipeline")
    if pipeline is None:
        raise CoreUnavailable("translation is not available: xpiler_core.pipeline is missing")
    options = pipeline.TranslateOptions(
        target=target, warp_size=warp_size, spec_path=spec_path, verify=verify, proposer=proposer
    )
    llm_module = _optional("xpiler_core.llm") if llm and proposer != "rules" else None
    if llm_module is not None and llm is not None:  # added for issue 10 (LLM room): endpoint settings → core
        options.llm = llm_module.LLMConfig(**llm)
    return pipeline.translate(text, path, options, progress=progress, cancel=cancel)


@dataclass(frozen=True)
class PassEntry:
    name: str
    summary: str
    directions: tuple[str, ...]
    params: tuple[str, ...]


def output_suffix(target: Dialect) -> str:
    """The file suffix the core gives translations to ``target``."""
    from xpiler_core.pipeline import output_suffix as core_output_suffix

    return core_output_suffix(target)


def passes() -> list[PassEntry]:
    registry = _optional("xpiler_core.passes")
    if registry is None:
        return []
    try:
        found = registry.all_passes()
    except Exception:
        log.exception("pass discovery failed")
        return []
    entries = []
    for name, module in found.items():
        info = module.INFO
        entries.append(PassEntry(name, info.summary, tuple(info.directions), tuple(p.name for p in info.params)))
    return entries


def run_pass(name: str, text: str, path: str, params: dict[str, Any], target: Dialect) -> Any:
    pipeline = _optional("xpiler_core.pipeline")
    if pipeline is None or not hasattr(pipeline, "run_pass"):
        raise CoreUnavailable("running a single pass is not available: xpiler_core.pipeline.run_pass is missing")
    return pipeline.run_pass(name, text, path, params, target)


# ---------------------------------------------------------------------------------------------------------
# Verification


def find_spec(path: str) -> str | None:
    """The kernel test spec (TOML) next to ``path`` whose ``source`` is this file, if any."""
    source = Path(path)
    folder = source.parent
    if not folder.is_dir():
        return None
    candidates = [folder / f"{source.stem}.toml", folder / "spec.toml", *sorted(folder.glob("*.toml"))]
    import tomllib

    seen: set[Path] = set()
    for candidate in candidates:
        if candidate in seen or not candidate.is_file():
            continue
        seen.add(candidate)
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        named = data.get("source")
        if isinstance(named, str) and (folder / named).resolve() == source.resolve():
            return str(candidate)
    return None


@dataclass
class VerifyStep:
    """One verification step's outcome, for the job's live state."""

    case_index: int
    sizes: dict[str, int]
    passed: bool
    max_abs_err: float
    detail: str


@dataclass
class SourceVerification:
    """The evidence of one verification of a source file against its spec."""

    spec_path: str
    toolchain: str = ""
    compile_ok: bool | None = None
    compile_diagnostics: list[Diagnostic] = field(default_factory=list)
    cases_total: int = 0
    steps: list[VerifyStep] = field(default_factory=list)
    failing: Any = None  # the first failing CaseResult
    tolerance: dict[str, float] = field(default_factory=dict)
    passed: bool | None = None
    error: str | None = None


def use_toolchains(paths: dict[str, str]) -> list[str]:
    """Make the configured compilers (name → executable path) the ones the core finds on PATH.

    The core looks compilers up by name on PATH; putting each configured executable's folder first is how
    a setting reaches it. Returns the problems (a path that is not an executable) for the log.
    """
    problems = []
    folders = []
    for name, path in sorted(paths.items()):
        exe = Path(path).expanduser()
        if not (exe.is_file() and os.access(exe, os.X_OK)):
            problems.append(f"toolchains.{name}: {path} is not an executable file")
            continue
        if exe.name != name:
            problems.append(f"toolchains.{name}: {path} is not named {name}; it is only found as {exe.name}")
        folders.append(str(exe.parent))
    current = os.environ.get("PATH", "").split(os.pathsep)
    wanted = list(dict.fromkeys(folders))
    os.environ["PATH"] = os.pathsep.join(wanted + [p for p in current if p not in wanted])
    toolchains = _optional("xpiler_core.verify.toolchains")
    probe = getattr(toolchains, "_probe", None) if toolchains is not None else None
    if wanted and probe is not None and hasattr(probe, "cache_clear"):
        probe.cache_clear()  # its lookups were cached under the old PATH
    return problems


def use_llm(endpoint: str, model: str, api_key_env: str) -> None:
    """Point the core's LLM client (configured through the environment) at the user's endpoint and model.

    Called only when the user enabled LLM proposals; the key itself stays in the variable it names.
    """
    client = _optional("xpiler_core.llm.client")
    if client is None:
        return
    for name, value in (("ENV_BASE_URL", endpoint), ("ENV_MODEL", model), ("ENV_API_KEY_ENV", api_key_env)):
        variable = getattr(client, name, None)
        if isinstance(variable, str) and value:
            os.environ[variable] = value


def load_spec(spec_path: str) -> Any:
    spec_module = _optional("xpiler_core.verify.spec")
    if spec_module is None:
        raise CoreUnavailable("verification is not available: xpiler_core.verify.spec is missing")
    return spec_module.load_spec(spec_path)


def compile_check(text: str, dialect: Dialect) -> Any:
    toolchains = _optional("xpiler_core.verify.toolchains")
    if toolchains is None:
        raise CoreUnavailable("compile checks are not available: xpiler_core.verify.toolchains is missing")
    return toolchains.compile_check(text, dialect)


def run_spec_case(spec: Any, text: str, dialect: Dialect, case: int, warp_size: int, cancel: CancelToken) -> Any:
    harness = _optional("xpiler_core.verify.harness")
    if harness is None:
        raise CoreUnavailable("verification is not available: xpiler_core.verify.harness is missing")
    return harness.run_spec(
        spec,
        candidate_text=text,
        candidate_dialect=dialect,
        warp_size=warp_size,
        cases=[case],
        cancel=cancel,
    )


def localize_failure(parsed: ParsedSource | None, model: Any, kernel: KernelInfo | None, case: Any) -> tuple[Span, str] | None:
    """Where a failing case points: (span, how it was found), or None.

    The repair engine's localizer is used when the core has one; otherwise the last statement of the
    kernel that stores into the mismatching output buffer (``out[...] = ...``).
    """
    if parsed is None or kernel is None:
        return None
    repair = _optional("xpiler_core.repair.localize")
    finder = getattr(repair, "localize_statement", None) if repair is not None else None
    if finder is not None:
        try:
            span = finder(parsed, model, kernel.name, case)
            if isinstance(span, Span):
                return span, "localized"
        except Exception:
            log.exception("localization failed")
    output = getattr(case, "output_name", None)
    if not output:
        return None
    store = _last_store_to(parsed, kernel.span, output)
    return (store, f"the store to {output}") if store is not None else None


def _last_store_to(parsed: ParsedSource, within: Span, buffer: str) -> Span | None:
    """The last expression statement inside ``within`` that assigns to ``buffer[...]`` (iterative walk)."""
    found: Span | None = None
    node = parsed.root.descendant_for_byte_range(within.start_byte, within.end_byte)
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if current.type == "assignment_expression":
            left = current.child_by_field_name("left")
            target = left.child_by_field_name("argument") if left is not None and left.type == "subscript_expression" else None
            if target is not None and parsed.node_text(target) == buffer:
                statement = current.parent if current.parent is not None and current.parent.type == "expression_statement" else current
                span = Span.of(statement)
                if found is None or span.start_byte > found.start_byte:
                    found = span
        stack.extend(current.children)
    return found


# ---------------------------------------------------------------------------------------------------------
# Tuning


def tuning_entry() -> Any | None:
    """The core's tuning entry point (``tune(text, path, options, progress, cancel, on_event)``), or None."""
    tune = _optional("xpiler_core.tune")
    return getattr(tune, "tune", None) if tune is not None else None


def tune(
    text: str,
    path: str,
    target: Dialect,
    *,
    spec_path: str | None,
    budget_s: float,
    max_trials: int,
    progress: ProgressFn,
    cancel: CancelToken,
    on_event: Any,
) -> Any:
    module = _optional("xpiler_core.tune")
    if module is None:
        raise CoreUnavailable("tuning not available: xpiler_core.tune is missing")
    options = module.TuneOptions(target=target, spec_path=spec_path, budget_s=budget_s, max_trials=max_trials)
    return module.tune(text, path, options, progress=progress, cancel=cancel, on_event=on_event)
