"""The typed core API the language server (and any other client) calls: plain data in, plain data out.

The server imports this module directly and holds no translation logic: analysis of a document, the
diagnostics of a target, translation, single passes, the verification of a source against its spec (with
progress per case), localization of a failing case, tuning, and the settings that reach the toolchains.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span, XpilerError
from xpiler_core.dialect import Dialect, detect_dialect
from xpiler_core.frontend.model import KernelModel, build_model
from xpiler_core.frontend.source import ParsedSource, parse_text
from xpiler_core.passes import all_passes
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.passes.driver import run_passes
from xpiler_core.pipeline import PassOutcome, direction_name
from xpiler_core.pipeline import run_pass as pipeline_run_pass
from xpiler_core.pipeline import translate as pipeline_translate
from xpiler_core.progress import CancelToken, ProgressFn
from xpiler_core.project import ProjectConfig
from xpiler_core.repair.engine import RepairResult
from xpiler_core.translation import (
    Evidence,
    Status,
    TranslateOptions,
    TranslationResult,
    decide_status,
)
from xpiler_core.translation import output_suffix as translation_output_suffix
from xpiler_core.verify.harness import CaseResult, SpecReport
from xpiler_core.verify.spec import KernelSpec
from xpiler_core.verify.spec import load_spec as verify_load_spec
from xpiler_core.verify.targets import runner_for
from xpiler_core.verify.toolchains import CompileVerdict, forget_toolchains

log = logging.getLogger(__name__)

__all__ = ["CaseResult", "Dialect", "KernelInfo", "ParsedSource", "PassEntry", "PassOutcome", "ProjectConfig",
           "SourceVerification", "SpecDraft", "TranslationResult", "VerifyStep", "XpilerError", "ProgramOutcome", "analyze_model", "available_targets",
           "detect_dialect", "draft_spec", "find_spec", "load_spec", "localize_failure", "output_suffix", "parse_text", "passes",
           "repair", "run_pass", "run_program", "target_diagnostics", "translate", "tune", "use_llm", "use_toolchains",
           "verify_source"]


@dataclass(frozen=True)
class KernelInfo:
    """What the editor shows about one kernel: where it is and what it uses."""

    name: str
    span: Span
    name_span: Span
    reference_spans: tuple[Span, ...] = ()
    features: tuple[str, ...] = ()
    params: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------------------
# Model


def analyze_model(parsed: ParsedSource) -> tuple[KernelModel | None, list[KernelInfo], list[Diagnostic]]:
    """The kernel model of a parse, its kernels and its diagnostics (unsupported constructs…)."""
    try:
        model = build_model(parsed)
    except Exception as exc:  # the frontend promises not to raise; if it does, say so on line 1
        log.exception("build_model failed on %s", parsed.path)
        return None, [], [
            Diagnostic(Severity.WARNING, "server.model-failed", f"kernel model failed: {exc}", Span.empty(), parsed.path)
        ]
    return model, _kernels_from_model(model), tool_text_filtered(parsed, list(model.diagnostics))


@functools.cache
def _tool_preludes() -> tuple[bytes, ...]:
    """The preludes this tool writes verbatim into its outputs (encoded once: every analysis looks for them)."""
    from xpiler_core.passes.support.cpu_prelude import PRELUDE
    from xpiler_core.passes.support.rebind_gpu import GPU_PRELUDE

    return PRELUDE.encode("utf-8"), GPU_PRELUDE.encode("utf-8")


def tool_text_filtered(parsed: ParsedSource, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """``diagnostics`` without the grammar's syntax errors inside a prelude this tool wrote into its output (the
    CPU prelude's file-scope macro invocations, which g++ compiles and tree-sitter misreads): a user who opens a
    translation sees the problems of their code, not of ours."""
    regions = []
    for prelude in _tool_preludes():
        at = parsed.data.find(prelude)
        if at >= 0:
            regions.append((at, at + len(prelude)))
    if not regions:
        return diagnostics
    return [d for d in diagnostics if not d.code.startswith("syntax.")
            or not any(a <= d.span.start_byte < b for a, b in regions)]


def _kernels_from_model(model: KernelModel) -> list[KernelInfo]:
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


def target_diagnostics(parsed: ParsedSource, model: KernelModel | None, target: Dialect, warp_size: int) -> list[Diagnostic]:
    """What the configured target will need attention for: warp-size hazards (CUDA → HIP: the 32-lane
    assumptions and what the warp pass cannot settle) and API names the HIP tables do not map."""
    if target is not Dialect.HIP or parsed.dialect is not Dialect.CUDA:
        return []
    ctx = PassContext(Dialect.CUDA, Dialect.HIP, warp_size=warp_size, file=parsed.path)
    try:
        run_passes(SourceUnit(parsed.text, Dialect.CUDA, parsed.path), ["warp_size", "api_map"], ctx)
    except Exception:
        log.exception("target check failed")
        return []
    out = [d for d in ctx.diagnostics if d.code.startswith(("warp_size", "api_map"))]
    for item in ctx.unresolved:
        out.append(Diagnostic(Severity.WARNING, f"{item.construct or 'translate'}.unresolved",
                              f"warp size {warp_size}: {item.reason}" if item.construct == "warp_size" else item.reason,
                              item.span, parsed.path))
    return out


# ---------------------------------------------------------------------------------------------------------
# Directions, translation, passes


def available_targets(source: Dialect) -> list[Dialect]:
    """Targets the pipeline has a plan for from ``source`` (a plan is a module in ``xpiler_core.plans``)."""
    targets = []
    for target in (Dialect.HIP, Dialect.C, Dialect.CUDA, Dialect.BANG):
        if target is not source and importlib.util.find_spec(f"xpiler_core.plans.{direction_name(source, target)}"):
            targets.append(target)
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
    project: ProjectConfig | None = None,
) -> TranslationResult:
    options = TranslateOptions(target=target, warp_size=warp_size, spec_path=spec_path, verify=verify,
                               proposer=proposer, project=project)
    if llm and proposer != "rules":
        from xpiler_core.llm.client import LLMConfig

        env = LLMConfig.from_env()
        options.llm = dataclasses.replace(env, base_url=llm.get("base_url") or env.base_url,
                                          model=llm.get("model") or env.model,
                                          api_key_env=llm.get("api_key_env") or env.api_key_env)
    return pipeline_translate(text, path, options, progress=progress, cancel=cancel)


@dataclass(frozen=True)
class PassEntry:
    name: str
    summary: str
    directions: tuple[str, ...]
    params: tuple[str, ...]


@dataclass(frozen=True)
class ProgramOutcome:
    """One run of a whole program on the CPU runtime, as plain data."""

    dialect: Dialect
    built: bool
    exit_code: int | None
    stdout: str
    stderr: str
    failure: str  # why it is not a successful run ("" when it is), its own FAIL verdict included
    seconds: float
    build_log: str = ""


def run_program(text: str, path: str, *, project: ProjectConfig | None = None, source_dialect: Dialect | None = None,
                warp_size: int | None = None, cancel: CancelToken | None = None) -> ProgramOutcome:
    """Build ``text`` (a program with ``main``) for the runtime as a translation's checks build its source
    (project headers, other units, flags) and run it once with the project's arguments and limits."""
    from xpiler_core.frontend.unit import ParsedUnit
    from xpiler_core.plans._project import ProjectFiles
    from xpiler_core.verify.program import run_failure

    dialect = source_dialect or detect_dialect(text, path)
    if dialect not in (Dialect.CUDA, Dialect.HIP, Dialect.C, Dialect.BANG):
        raise XpilerError(f"cannot run {dialect.value} programs", path)
    unit = ParsedUnit(text, path, dialect)
    files = ProjectFiles.of(unit, TranslateOptions(target=dialect, project=project), dialect)
    if not files.has_main():
        raise XpilerError("no main(): not a whole program (xpiler test runs kernels with a spec)", path)
    warp = warp_size or (64 if dialect is Dialect.HIP else 32)
    run = files.run_source(warp, cancel)
    return ProgramOutcome(dialect, run.built, run.exit_code, run.stdout, run.stderr, run_failure(run), run.seconds,
                          run.build_log)


def output_suffix(target: Dialect) -> str:
    """The file suffix the core gives translations to ``target``."""
    return translation_output_suffix(target)


def passes() -> list[PassEntry]:
    return [PassEntry(name, module.INFO.summary, tuple(module.INFO.directions), tuple(p.name for p in module.INFO.params))
            for name, module in all_passes().items()]


def run_pass(name: str, text: str, path: str, params: dict[str, Any], target: Dialect) -> PassOutcome:
    return pipeline_run_pass(name, text, path, params, target)


# ---------------------------------------------------------------------------------------------------------
# Verification


def find_spec(path: str) -> str | None:
    """The kernel test spec (TOML) next to ``path`` whose ``source`` is this file, if any."""
    from xpiler_core.verify.spec import spec_beside

    return spec_beside(path)


@dataclass(frozen=True)
class SpecDraft:
    """A test spec drafted from a kernel's signature: where to write it, its text, the values left to fill."""

    path: str
    text: str
    to_fill: int


def draft_spec(text: str, path: str, kernel: str | None = None) -> SpecDraft:
    """Draft the test spec of ``kernel`` (default: the file's first) in ``path``'s folder as ``<kernel>.toml``."""
    from xpiler_core.verify.spec_init import draft_spec as draft
    from xpiler_core.verify.spec_init import placeholders

    model = build_model(parse_text(text, path))
    spec_text = draft(text, path, model, kernel)
    entry = next(line.split('"')[1] for line in spec_text.splitlines() if line.startswith("entry = "))
    return SpecDraft(str(Path(path).with_name(f"{entry}.toml")), spec_text, placeholders(spec_text))


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
    status: str = ""  # a translation.Status value, decided by translation.decide_status
    reason: str = ""
    toolchain: str = ""
    compile_ok: bool | None = None
    compile_diagnostics: list[Diagnostic] = field(default_factory=list)
    cases_total: int = 0
    steps: list[VerifyStep] = field(default_factory=list)
    failing: CaseResult | None = None  # the first failing case
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
    if wanted:
        forget_toolchains()  # their lookups were cached under the old PATH
    return problems


def use_llm(endpoint: str, model: str, api_key_env: str) -> None:
    """Point the core's LLM client (configured through the environment) at the user's endpoint and model.

    Called only when the user enabled LLM proposals; the key itself stays in the variable it names.
    """
    from xpiler_core.llm import client

    for variable, value in ((client.ENV_BASE_URL, endpoint), (client.ENV_MODEL, model),
                            (client.ENV_API_KEY_ENV, api_key_env)):
        if value:
            os.environ[variable] = value


def load_spec(spec_path: str) -> KernelSpec:
    return verify_load_spec(spec_path)


def verify_source(
    text: str, path: str, spec_path: str, dialect: Dialect, warp_size: int, *, max_cases: int | None,
    budget_s: float, progress: ProgressFn, cancel: CancelToken, live: SourceVerification | None = None,
) -> SourceVerification:
    """The source itself against its spec, one case at a time (progress per case, a time budget), judged by
    the same evidence and status decision as a translation."""
    evidence = live or SourceVerification(spec_path=spec_path)
    spec = load_spec(spec_path)
    evidence.tolerance = {"atol": spec.atol, "rtol": spec.rtol}
    cases = list(range(len(spec.cases)))[: max_cases if max_cases is not None else None]
    evidence.cases_total = len(cases)
    runner = runner_for(dialect, warp_size, warp_size)
    progress(0.02, "compiling")
    verdict: CompileVerdict = runner.compile(text)
    evidence.toolchain = f"{verdict.toolchain} {verdict.version}".strip()
    evidence.compile_ok = verdict.ok
    evidence.compile_diagnostics = [dataclasses.replace(d, source=verdict.toolchain) for d in verdict.diagnostics]
    found = Evidence(compile=verdict)
    if verdict.ok:
        progress(0.1, f"compiled with {evidence.toolchain}; running {len(cases)} test cases")
        started = time.monotonic()
        results: list[CaseResult] = []
        for done_count, case in enumerate(cases):
            cancel.check()
            if time.monotonic() - started > budget_s:
                evidence.error = f"test budget of {budget_s:g} s used up after {done_count}/{len(cases)} cases"
                evidence.status, evidence.reason = Status.NOT_EXECUTED.value, evidence.error
                evidence.passed = None  # not verified, not refuted
                return evidence
            report = runner.run(spec, text, 0, cancel, cases=[case])
            for result in report.cases:
                evidence.steps.append(VerifyStep(case, dict(result.sizes), bool(result.passed),
                                                 float(result.max_abs_err or 0.0), result.error or ""))
                if not result.passed and evidence.failing is None:
                    evidence.failing = result
                results.append(result)
            if report.build_error:
                evidence.error = report.build_error
                found.tests = report
                break
            passed = sum(1 for s in evidence.steps if s.passed)
            progress(0.1 + 0.9 * (done_count + 1) / max(1, len(cases)), f"case {done_count + 1}/{len(cases)}: {passed} passed")
        if found.tests is None:
            found.tests = SpecReport(bool(results) and all(r.passed for r in results), results, None, 0.0, warp_size)
    status, reason = decide_status(found, [])
    evidence.status, evidence.reason = status.value, reason
    evidence.passed = None if status is Status.NOT_EXECUTED else status is Status.VERIFIED
    return evidence


def project_for(path: str, workspace_root: str | None, *, include_dirs: tuple[str, ...] = (),
                defines: tuple[str, ...] = (), std: str | None = None,
                program_args: tuple[str, ...] = ()) -> ProjectConfig:
    """The build settings of a file in the editor: its compile_commands.json and xpiler.toml (from its folder
    upward, then the workspace folder), with the client's settings added (relative dirs: the workspace's)."""
    from xpiler_core.project import load_project

    base = Path(workspace_root) if workspace_root else Path(path).parent
    given = ProjectConfig(include_dirs=tuple(str((base / d).resolve()) for d in include_dirs), defines=defines,
                          std=std, program_args=program_args, origins=("editor settings",))
    return load_project(path, given, search_root=workspace_root)


def status_anchor(parsed: ParsedSource | None, kernels: list[KernelInfo], result: TranslationResult) -> Span | None:
    """Where in the user's file a translation's status belongs: ``main`` for a whole-program run, else the
    kernel the tests launched, else the first kernel."""
    if parsed is None:
        return None
    evidence = result.evidence
    if evidence is not None and evidence.program is not None:
        model = build_model(parsed)
        main = next((f for f in model.functions if f.name == "main"), None)
        if main is not None:
            return main.name_span
    entry = ((evidence.spec_info or {}).get("entry") if evidence is not None else None) or ""
    kernel = next((k for k in kernels if k.name == entry), kernels[0] if kernels else None)
    return kernel.name_span if kernel is not None else None


def localize_failure(parsed: ParsedSource | None, kernel: KernelInfo | None, case: CaseResult) -> tuple[Span, str] | None:
    """Where a failing case points: the last statement of the kernel that stores into the mismatching output
    buffer (``out[...] = ...``), or None."""
    if parsed is None or kernel is None or not case.output_name:
        return None
    store = _last_store_to(parsed, kernel.span, case.output_name)
    return (store, f"the store to {case.output_name}") if store is not None else None


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
    from xpiler_core.tune import TuneOptions
    from xpiler_core.tune import tune as core_tune

    options = TuneOptions(target=target, spec_path=spec_path, budget_s=budget_s, max_trials=max_trials)
    return core_tune(text, path, options, progress=progress, cancel=cancel, on_event=on_event)


def repair(text: str, path: str, spec_path: str, dialect: Dialect, warp_size: int | None, *, budget_s: float,
           progress: ProgressFn, cancel: CancelToken) -> RepairResult:
    """A local SMT repair of ``text`` against its spec (the editor's quick fix)."""
    from xpiler_core.repair.engine import repair_candidate

    return repair_candidate(text, path, spec_path, dialect=dialect, warp_size=warp_size, budget_s=budget_s,
                            progress=progress, cancel=cancel)
