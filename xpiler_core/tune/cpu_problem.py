"""The CUDA → CPU tuning problem: render a configuration to C++, verify it, time it against the untuned one.

The untuned translation is the CPU plan's own: its pass list (``plans.cuda_to_cpu.DEFAULT_PASSES``) with the
parameters the plan gives each pass (read back from the plan's records), so improvements of the plan reach
every candidate and a pass added to the plan is tuned over its declared parameter space. A configuration
overrides parameters of the plan's passes before loop binding, inserts structural passes (split, reorder,
fuse, cache, pipeline, tensorization, …) before loop binding, sets loop binding's parameters and picks
compile flags (recorded in the candidate's first line, so the text says how it must be built). For a kernel
whose launch we choose (no launch site, no ``__launch_bounds__``, result independent of the block size) the
block size is a parameter too. A candidate counts only after the harness has compiled it with its flags and
run it on every case of the spec against the reference; then it is timed interleaved with the untuned
translation (and the best candidate so far) on the largest case. Identical candidate texts are evaluated once
(and across runs, through the records).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from xpiler_core import ast as A
from xpiler_core.diagnostics import XpilerError
from xpiler_core.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import all_passes, get_pass
from xpiler_core.passes.base import PassContext
from xpiler_core.passes.driver import run_passes
from xpiler_core.passes.support.ast_support import find_loops
from xpiler_core.printer import print_module
from xpiler_core.progress import CancelToken
from xpiler_core.project import BuildSettings, ProjectConfig
from xpiler_core.tune.config import Config, Params, Step, freeze
from xpiler_core.tune.measure import (
    LatencyStats,
    MeasureError,
    MeasureSettings,
    case_elements,
    largest_case,
    measure_libraries,
    median_interval,
    paired_ratios,
    paired_speedup,
    speedup_interval,
)
from xpiler_core.tune.records import RecordStore, TrialRecord, sha256_text
from xpiler_core.verify.spec import KernelSpec

DIRECTION = "cuda->cpu"
RECOVERY = "loop_recovery"
BINDING = "loop_binding"
# String parameters that pick *where* a pass applies; the tuner enumerates their values from the code.
TARGET_PARAMS = ("function", "loop", "array")
# Declared choices that describe the source rather than choose an implementation: never searched.
SOURCE_FACTS = {(RECOVERY, "warp_size")}
# Compile flags a candidate may add to the default build (-O2 -fopenmp): none changes IEEE semantics
# (-fno-math-errno only drops errno writes of math functions; -march=native only adds instructions, and the
# plan already contracts with FMA where the ISA has it). Every candidate is verified with its flags.
FLAG_SPACE: dict[str, tuple[str, ...]] = {
    "flags.opt": ("", "-O3"),
    "flags.unroll": ("", "-funroll-loops"),
    "flags.errno": ("", "-fno-math-errno"),
    "flags.arch": ("", "-march=native"),
}
BLOCK_CHOICES = (64, 128, 256, 512, 1024)
BLOCK_KEY = f"{RECOVERY}.block"
WITHOUT_KEY = "plan.without"  # one optional pass of the plan left out (a pass may cost more than it saves)
MARGIN = 0.02  # a win must clear the noise interval by this much too
FLAGS_MARK = "// xpiler tune: compile with g++ -O2 -fopenmp -shared -fPIC"


@dataclass(frozen=True)
class Action:
    """A structural pass at one place (its target parameters); its tunable parameters are searched later."""

    name: str
    target: Params

    def describe(self) -> str:
        return Step(self.name, self.target).describe()


@lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    try:
        return frozenset(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return frozenset()


def _useful_here(param: str, choice: Any) -> bool:
    """Choices that cannot help on this machine are not searched: more OpenMP threads than cores, an
    instruction set the CPU lacks (it would only fail verification)."""
    if param == "threads" and isinstance(choice, int):
        return choice <= (os.cpu_count() or 1)
    if param == "isa" and isinstance(choice, str) and choice:
        return all(ext.strip() in _cpu_flags() for ext in choice.split(","))
    return True


def tunable_space(name: str) -> dict[str, tuple[Any, ...]]:
    """The declared choices of a pass's parameters (only those with two or more choices useful here)."""
    info = get_pass(name).INFO
    space: dict[str, tuple[Any, ...]] = {}
    for p in info.params:
        if (name, p.name) in SOURCE_FACTS:
            continue
        choices = tuple(c for c in p.choices if _useful_here(p.name, c))
        if len(choices) >= 2:
            space[p.name] = choices
    return space


def plan_passes() -> list[str]:
    """The CPU plan's pass list as it is now."""
    from xpiler_core.plans.cuda_to_cpu import DEFAULT_PASSES

    return list(DEFAULT_PASSES)


def structural_passes() -> list[str]:
    """AST passes of the CUDA → CPU direction that the search may insert (the plan's own excluded)."""
    planned = set(plan_passes())
    return [name for name, mod in all_passes().items()
            if mod.INFO.kind == "ast" and DIRECTION in mod.INFO.directions and name not in planned]


def flags_comment(flags: tuple[str, ...]) -> str:
    return f"{FLAGS_MARK} {' '.join(flags)}\n" if flags else ""


# A case with fewer elements over all buffers is scaled up for timing (by these factors, in turn): 1 MiB of float
# data, past the first two cache levels a test-sized case fits in (a matrix product there is ~10^8 multiply-adds,
# milliseconds a trial; larger targets made a GEMM trial take most of a second)
TIMING_ELEMENTS = 1 << 18
TIMING_SCALES = (2, 4, 8, 16, 32, 64)


class CpuTuningProblem:
    """Everything one tuning session of a CUDA file for the CPU needs: the plan, spec, baseline, incumbent."""

    def __init__(self, text: str, path: str, spec: KernelSpec, workdir: Path, *, seed: int = 0,
                 settings: MeasureSettings | None = None, cancel: CancelToken | None = None,
                 project: ProjectConfig | None = None) -> None:
        from xpiler_core.dialect import detect_dialect
        from xpiler_core.frontend.unit import ParsedUnit
        from xpiler_core.passes.support.launch import block_size_agnostic
        from xpiler_core.plans._project import ProjectFiles
        from xpiler_core.plans.cuda_to_cpu import (
            as_the_build_sees_it,
            spec_with_launch_args,
            translate_to_cpu,
        )
        from xpiler_core.translation import TranslateOptions

        self.text, self.path, self.seed, self.cancel = text, path, seed, cancel
        # the candidates translate what `xpiler translate` translates: local headers of device code and the
        # program's other units inlined (a launcher's error-check macro, a helper another unit defines)
        files = ProjectFiles.of(ParsedUnit(text, path, detect_dialect(text, path)),
                                TranslateOptions(target=Dialect.C, project=project), Dialect.C)
        # the project's include dirs and defines reach every build (source reference, trials, timings)
        self.project = files.config
        text = as_the_build_sees_it(files, files)[0]
        self.workdir = workdir
        self.settings = settings or MeasureSettings()
        names = plan_passes()
        if BINDING not in names or RECOVERY not in names:
            raise XpilerError("cannot tune: the CPU plan has no loop recovery / loop binding step", path)
        # the plan's own translation: its output is the untuned candidate, its records give each pass's params
        # the project's -D values, as the translation reads them (a tile size the file leaves to its build)
        self.defines = self.project.define_values()
        plan_text, records, _ = translate_to_cpu(text, path, spec, None, names, self.defines)
        if plan_text is None:
            refused = next((r["refused"] for r in records if r["name"] == RECOVERY and r["refused"]), "")
            raise XpilerError(f"cannot tune: the CPU translation is unresolved (loop recovery refused: {refused})",
                              path)
        self.plan_params: dict[str, dict[str, Any]] = {r["name"]: dict(r["params"]) for r in records}
        at = names.index(BINDING)
        self.prefix_names: list[str] = names[:at]
        self.suffix_names: list[str] = names[at + 1:]
        self.lowered = lower_text(text, path)
        self.ctx = PassContext(source_dialect=self.lowered.dialect, target=Dialect.C, file=path, defines=self.defines)
        self._prefix_memo: dict[tuple[Step, ...], A.Module | None] = {}
        # rendering a configuration runs the passes after the prefix (a second or more on a large kernel); the
        # search asks for the same configuration's text many times (live-space probes, trials, finalists)
        self._render_memo: dict[tuple[tuple[str, ...], Config], str | None] = {}
        launch = str(self.plan_params.get(RECOVERY, {}).get("launch_params") or "")
        self.spec = spec_with_launch_args(spec, launch, workdir) if launch else spec
        self.entry = A.instance_symbol(spec.entry)  # the C symbol (a template instance exports a wrapper)
        self.case_index = largest_case(self.spec)
        self.test_cases = list(range(len(self.spec.cases)))  # what every candidate is verified on
        self.scaled_by = 1  # the timing case is the spec's largest times this (see _scale_timing_case)
        kernel = self.lowered.function(spec.entry)
        self.block_tunable = (
            spec.kind == "kernel" and not launch and kernel is not None and kernel.is_kernel
            and not kernel.launch_bounds and block_size_agnostic(kernel, self.lowered)
            and not any(isinstance(n, A.Launch) for f in self.lowered.functions() for n in A.walk(f.body)))
        self.binding_defaults: Params = freeze(self.plan_params[BINDING])
        self.baseline = Config((), self.binding_defaults)
        baseline_text = self.render(self.baseline)
        if baseline_text is None:
            raise XpilerError("cannot tune: loop binding refused the untuned translation", path)
        self.baseline_text = baseline_text
        self.records = session_records(text, path, spec, self.spec.cases[self.case_index], self.project)
        self.baseline_library: Path | None = None
        self.baseline_stats: LatencyStats | None = None
        self.noise: tuple[float, float] = (1.0, 1.0)  # A/A interval: the untuned one timed against itself
        self.incumbent: TrialRecord | None = None  # the best verified candidate so far (None: the untuned one)
        self.incumbent_library: Path | None = None
        self.trials_measured = 0
        self.trials_resumed = 0
        self._memo: dict[str, TrialRecord] = {}

    # ------------------------------------------------------------------ rendering
    def _prefix(self, overrides: tuple[Step, ...]) -> A.Module | None:
        """The module after the plan's passes before loop binding, with ``overrides`` of their parameters."""
        if overrides in self._prefix_memo:
            return self._prefix_memo[overrides]
        extra = {s.name: dict(s.params) for s in overrides}
        without = str(extra.pop(WITHOUT_KEY.partition(".")[0], {}).get("without") or "")
        names = [n for n in self.prefix_names if n != without]
        params = {n: {**self.plan_params.get(n, {}), **extra.get(n, {})} for n in names}
        ctx = PassContext(source_dialect=self.ctx.source_dialect, target=Dialect.C, file=self.path,
                          defines=self.defines)
        # a pass bug on these parameters is an illegal point, never a crash of tuning
        run = run_passes(self.lowered, names, ctx, params, contain_errors=True)
        recovered = run.crashed is None and not any(r["refused"] for r in run.records if r["name"] == RECOVERY)
        module = run.unit if recovered and isinstance(run.unit, A.Module) else None
        self._prefix_memo[overrides] = module
        return module

    def module_after(self, steps: tuple[Step, ...], plan: tuple[Step, ...] = ()) -> A.Module | None:
        """The AST after the plan's prefix and ``steps`` (None when a step refuses or changes nothing)."""
        module = self._prefix(plan)
        if module is None:
            return None
        if not steps:
            return module
        ctx = PassContext(source_dialect=self.ctx.source_dialect, target=Dialect.C, file=self.path,
                          defines=self.defines)
        # a refusal, a crash (a pass bug on this input) or a step that changes nothing makes the point illegal
        run = run_passes(module, [(s.name, dict(s.params)) for s in steps], ctx, stop_on_refusal=True,
                         contain_errors=True, require_change=True)
        if run.refused is not None or run.crashed is not None or run.unchanged is not None:
            return None
        return run.unit if isinstance(run.unit, A.Module) else None

    def render(self, config: Config) -> str | None:
        key = (tuple(self.prefix_names), config)
        if key not in self._render_memo:
            self._render_memo[key] = self._render(config)
        return self._render_memo[key]

    def _render(self, config: Config) -> str | None:
        module = self.module_after(config.steps, config.plan)
        if module is None:
            return None
        ctx = PassContext(source_dialect=self.ctx.source_dialect, target=Dialect.C, file=self.path,
                          defines=self.defines)
        steps = [(BINDING, dict(config.binding)), *((name, {**self.plan_params.get(name, {}), **config.plan_params(name)})
                                                    for name in self.suffix_names)]
        run = run_passes(module, steps, ctx, contain_errors=True)
        binding = run.records[0] if run.records else None
        if run.crashed is not None or binding is None or binding["refused"] or not isinstance(run.unit, A.Module):
            return None  # optional steps after binding may refuse; binding itself may not
        return flags_comment(config.flags) + print_module(run.unit, Dialect.C)

    # ------------------------------------------------------------------ the plan's own parameters
    def plan_space(self) -> dict[str, tuple[Any, ...]]:
        """Namespaced choices (``pass.param``, ``flags.*``) of the plan's passes, loop binding, the compile
        flags and, where we choose the launch, the block size; the plan's own value is always a choice."""
        space: dict[str, tuple[Any, ...]] = {}
        for name in (*self.prefix_names, BINDING, *self.suffix_names):
            own = self.plan_params.get(name, {})
            for key, choices in tunable_space(name).items():
                current = own.get(key, choices[0])
                space[f"{name}.{key}"] = choices if current in choices else (current, *choices)
        if self.block_tunable:
            current = str(self.plan_params.get(RECOVERY, {}).get("block") or "")
            choices = tuple(str(b) for b in BLOCK_CHOICES)
            space[BLOCK_KEY] = choices if current in choices else (current, *choices)
        optional = tuple(n for n in self.prefix_names if n != RECOVERY)
        if optional:
            space[WITHOUT_KEY] = ("", *optional)
        space.update(FLAG_SPACE)
        return space

    def plan_defaults(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, choices in self.plan_space().items():
            name, _, param = key.partition(".")
            if name == "flags" or key == WITHOUT_KEY:
                out[key] = ""
            elif key == BLOCK_KEY:
                out[key] = str(self.plan_params.get(RECOVERY, {}).get("block") or "")
            else:
                out[key] = self.plan_params.get(name, {}).get(param, choices[0])
        return out

    def config_for(self, point: dict[str, Any], steps: tuple[Step, ...] = ()) -> Config:
        """The configuration of a point of :meth:`plan_space` (keys left out keep the plan's values)."""
        defaults = self.plan_defaults()
        binding = dict(self.binding_defaults)
        overrides: dict[str, dict[str, Any]] = {}
        flags: list[str] = []
        for key in sorted(point):
            value = point[key]
            name, _, param = key.partition(".")
            if name == "flags":
                if value:
                    flags.append(str(value))
            elif name == BINDING:
                binding[param] = value
            elif key == BLOCK_KEY:
                if value != defaults.get(key):
                    overrides.setdefault(RECOVERY, {}).update(block=str(value), grid="")
            elif key == WITHOUT_KEY:
                if value:
                    overrides.setdefault("plan", {})["without"] = value
            elif value != defaults.get(key):
                overrides.setdefault(name, {})[param] = value
        plan = tuple(Step(n, freeze(v)) for n, v in sorted(overrides.items()))
        return Config(steps, freeze(binding), plan, tuple(flags))

    def live_plan_space(self, stop: Callable[[], bool] = lambda: False,
                        first: tuple[str, ...] = ()) -> dict[str, tuple[Any, ...]]:
        """The plan space without parameters whose every choice prints the same text as the plan's value.

        Each probe renders the whole translation, so the probing stops when ``stop()`` says so (the tuning
        budget): parameters not probed by then stay in the space (a trial whose text was seen costs no
        measurement). Keys matching ``first`` are probed first; compile flags need no probe (they are live)."""
        space = self.plan_space()
        defaults = self.plan_defaults()
        base = self.render(self.config_for(defaults))
        live: dict[str, tuple[Any, ...]] = {}
        order = sorted(space, key=lambda k: next((i for i, f in enumerate(first) if f in k), len(first)))
        for key in order:
            choices = space[key]
            if key.startswith("flags.") or stop():
                live[key] = choices
                continue
            texts = {self.render(self.config_for({**defaults, key: c})) for c in choices}
            if len(texts - {base, None}) > 0:
                live[key] = choices
        return {k: space[k] for k in space if k in live}

    # ------------------------------------------------------------------ the search space
    def actions(self, steps: tuple[Step, ...], plan: tuple[Step, ...] = ()) -> list[Action]:
        """Legal structural pass applications after ``steps``: each pass at each place it accepts."""
        module = self.module_after(steps, plan)
        if module is None:
            return []
        found: list[Action] = []
        for name in structural_passes():
            info = get_pass(name).INFO
            declared = {p.name for p in info.params}
            options: list[list[tuple[str, Any]]] = []
            for fn in module.functions():
                loops = sorted({v.var for v in (lp.canonical() for lp in find_loops(fn.body)) if v is not None})
                if not loops:
                    continue
                arrays = sorted(p.name for p in fn.params if isinstance(p, A.Param) and p.name and p.type.pointers) \
                    if "array" in declared else [""]
                loop_choices = loops if "loop" in declared else [""]
                for loop, array in itertools.product(loop_choices, arrays):
                    target = [("function", fn.name)] if "function" in declared else []
                    if loop:
                        target.append(("loop", loop))
                    if array:
                        target.append(("array", array))
                    options.append(target)
            for target in options:
                action = Action(name, tuple(sorted(target)))
                if self.module_after((*steps, Step(name, action.target)), plan) is not None:
                    found.append(action)
        return found

    def live_space(self, base: Config, action: Action,
                   stop: Callable[[], bool] = lambda: False) -> dict[str, tuple[Any, ...]]:
        """The parameters of ``action`` appended to ``base``'s steps that change the output here.

        A parameter whose every choice gives the same text as its default is dropped, so the search spends no
        trials on it; once ``stop()`` says so the rest are kept unprobed.
        """
        space = tunable_space(action.name)
        defaults = get_pass(action.name).INFO.defaults()

        def text_for(params: dict[str, Any]) -> str | None:
            step = Step(action.name, freeze({**dict(action.target), **params}))
            return self.render(Config((*base.steps, step), base.binding, base.plan, base.flags))

        reference = text_for({k: defaults[k] for k in space})
        live: dict[str, tuple[Any, ...]] = {}
        for key, choices in space.items():
            if stop() or len({text_for({key: c}) for c in choices} - {reference, None}) > 0:
                live[key] = choices
        return live

    # ------------------------------------------------------------------ evaluation
    def build_of(self, text: str) -> BuildSettings:
        from xpiler_core.project import build_settings

        return build_settings(self.project, self.path, text)

    def _verify(self, text: str, flags: tuple[str, ...], spec: KernelSpec | None = None,
                cases: list[int] | None = None) -> Any:
        """``text`` built with ``flags`` against the reference on the spec's own cases (or ``cases`` of ``spec``)."""
        from xpiler_core.runtime.build import candidate_flags
        from xpiler_core.verify.harness import run_spec

        with candidate_flags(flags):
            return run_spec(spec or self.spec, candidate_text=text, candidate_dialect=Dialect.C,
                            candidate_entry=self.entry, candidate_kind="host", seed=self.seed, cancel=self.cancel,
                            build=self.build_of(text), reference_build=self.build_of(self.text),
                            cases=self.test_cases if cases is None else cases)

    def _build(self, text: str, flags: tuple[str, ...], folder: str) -> Path | None:
        from xpiler_core.runtime.build import build_library

        # the harness's display name: the same translation unit, so the build it verified is reused from the cache
        built = build_library(text, Dialect.C, self.workdir / folder, display_name=f"candidate{Dialect.C.suffix}",
                              cplusplus_c=True, extra_flags=flags, build=self.build_of(text))
        return built.library if built.ok else None

    def _prefix_variants(self) -> list[list[str]]:
        """The plan's prefix, then (as the plan itself retries when a step fails verification) without each of
        its other steps, then loop recovery alone."""
        names = list(self.prefix_names)
        optional = [n for n in names if n != RECOVERY]
        variants = [names, *([n for n in names if n != o] for o in optional), [RECOVERY]]
        unique: list[list[str]] = []
        for v in variants:
            if v not in unique:
                unique.append(v)
        return unique

    def _scale_timing_case(self, deadline: float) -> None:
        """Time at a case worth tuning for. A spec's cases are chosen to test (a 32 x 16 x 48 GEMM), and what is
        fastest at such a size can be many times slower at the sizes the kernel runs at (a direct loop nest
        beat the packed GEMM 1.8x at the test size and lost 17x at 509 x 523 x 517). A largest case below
        ``TIMING_ELEMENTS`` is scaled by whole factors (every size times k keeps what the sizes are multiples
        of) while the untuned translation still passes the reference there, until it reaches that size or
        ``deadline``; trials are still verified on the spec's own cases."""
        base = self.spec.cases[self.case_index]
        if case_elements(self.spec, base) >= TIMING_ELEMENTS:
            return
        for factor in TIMING_SCALES:
            left = deadline - time.monotonic()
            if left <= 1.0:
                return
            scaled = {k: v * factor if isinstance(v, int) and not isinstance(v, bool) else v for k, v in base.items()}
            spec = dataclasses.replace(self.spec, cases=[*self.spec.cases, scaled])
            probe = dataclasses.replace(spec, timeout_s=min(spec.timeout_s, left))
            if not self._verify(self.baseline_text, (), probe, [len(spec.cases) - 1]).passed:
                return  # sizes this kernel does not take (built-in shapes), or too slow to check in time
            self.spec, self.case_index = spec, len(spec.cases) - 1
            self.scaled_by = factor
            if case_elements(spec, scaled) >= TIMING_ELEMENTS:
                return

    def start(self, deadline: float | None = None) -> LatencyStats:
        """Verify and build the untuned translation, choose the timing case (scaled up until ``deadline``) and
        time it against itself (the reference of every speedup, and the noise this machine shows now)."""
        report = None
        for names in self._prefix_variants():
            self.prefix_names = names
            self._prefix_memo.clear()
            text = self.render(self.baseline)
            if text is None:
                continue
            report = self._verify(text, ())
            if report.passed:
                self.baseline_text = text
                break
        if report is None or not report.passed:
            summary = report.summary() if report is not None else "no variant of the plan renders"
            raise XpilerError("cannot tune: the untuned CPU translation does not pass its tests:\n" + summary,
                              self.path)
        library = self._build(self.baseline_text, (), "baseline")
        if library is None:
            raise XpilerError("cannot tune: the untuned translation does not build", self.path)
        self.baseline_library = library
        if deadline is not None:
            self._scale_timing_case(deadline)
        if self.scaled_by > 1:  # the records of a session are those of its timed case
            self.records = session_records(self.text, self.path, self.spec, self.spec.cases[self.case_index],
                                           self.project)
        stats = measure_libraries([library, library], self.spec, self.entry, self.case_index,
                                  self.workdir / "measure-baseline", settings=self.settings, seed=self.seed,
                                  cancel=self.cancel)
        self.baseline_stats = stats[0]
        self.noise = median_interval(paired_ratios(stats[0], stats[1]))
        return stats[0]

    def evaluate(self, config: Config) -> tuple[TrialRecord | None, bool]:
        """The trial of ``config`` and whether it cost a measurement (False: illegal, memoized or resumed)."""
        text = self.render(config)
        if text is None:
            return None, False
        sha = sha256_text(text)
        if sha in self._memo:
            return self._memo[sha], False
        stored = self.records.get(sha)
        if stored is not None:
            self._memo[sha] = stored
            self.trials_resumed += 1
            return stored, False
        record = self._measure(config, text, sha)
        self._memo[sha] = record
        self.records.put(record)
        self.trials_measured += 1
        return record, True

    def seen_trials(self) -> list[TrialRecord]:
        """Every trial of this run (measured now or answered from the records), one per candidate text."""
        return list(self._memo.values())

    def _measure(self, config: Config, text: str, sha: str) -> TrialRecord:
        started = time.perf_counter()
        report = self._verify(text, config.flags)
        if not report.passed:
            reason = report.build_error or next((c.summary() for c in report.cases if not c.passed), "failed")
            return TrialRecord(config.as_dict(), sha, False, error=reason[-300:],
                               seconds=time.perf_counter() - started)
        library = self._build(text, config.flags, sha[:12])
        if library is None or self.baseline_library is None:
            return TrialRecord(config.as_dict(), sha, False, error="build failed", seconds=time.perf_counter() - started)
        libraries = [self.baseline_library, library]
        if self.incumbent is not None and self.incumbent_library is not None:
            libraries.insert(1, self.incumbent_library)  # timed in the same rounds: a direct paired comparison
        try:
            stats = measure_libraries(libraries, self.spec, self.entry, self.case_index,
                                      self.workdir / f"measure-{sha[:12]}", settings=self.settings, seed=self.seed,
                                      cancel=self.cancel)
        except MeasureError as exc:
            return TrialRecord(config.as_dict(), sha, True, error=str(exc), seconds=time.perf_counter() - started)
        base, cand = stats[0], stats[-1]
        extra: dict[str, Any] = {"samples": cand.samples, "baseline_samples": base.samples,
                                 "speedup_interval": list(speedup_interval(base, cand))}
        if len(stats) == 3 and self.incumbent is not None:
            extra["incumbent"] = self.incumbent.text_sha256
            extra["vs_incumbent"] = list(speedup_interval(stats[1], cand))
        return TrialRecord(config.as_dict(), sha, True, latency_s=cand.median_s, baseline_latency_s=base.median_s,
                           speedup=paired_speedup(base, cand), spread=cand.spread,
                           seconds=time.perf_counter() - started, extra=extra)

    # ------------------------------------------------------------------ the incumbent
    def beats_incumbent(self, record: TrialRecord) -> bool:
        return beats(record, self.incumbent)

    def promote(self, config: Config, record: TrialRecord) -> None:
        """Make ``record`` the incumbent that later candidates are timed against."""
        text = self.render(config)
        library = self._build(text, config.flags, f"incumbent-{record.text_sha256[:12]}") if text else None
        if library is not None:
            self.incumbent, self.incumbent_library = record, library

    def confirm(self, configs: list[Config], rounds: int = 21) -> list[tuple[Config, LatencyStats, LatencyStats]]:
        """Re-time the finalists against the untuned translation, all in the same interleaved rounds, with more
        rounds: (config, baseline stats, candidate stats) per finalist that built and ran. Each sample here is
        one whole burst (no fastest-of-bursts): a candidate whose speed needs an idle core (an OpenMP team
        waiting for a descheduled thread) must win with its stalls counted."""
        if self.baseline_library is None:
            return []
        built: list[tuple[Config, Path]] = []
        for i, config in enumerate(configs):
            text = self.render(config)
            library = self._build(text, config.flags, f"final{i}") if text is not None else None
            if library is not None:
                built.append((config, library))
        if not built:
            return []
        settings = dataclasses.replace(self.settings, rounds=rounds, max_s=self.settings.max_s * 2, bursts=1,
                                       sample_s=self.settings.sample_s * 2)
        try:
            stats = measure_libraries([self.baseline_library, *(lib for _, lib in built)], self.spec, self.entry,
                                      self.case_index, self.workdir / "confirm", settings=settings, seed=self.seed,
                                      cancel=self.cancel)
        except MeasureError:
            return []
        return [(config, stats[0], s) for (config, _), s in zip(built, stats[1:], strict=True)]


def beats(record: TrialRecord, incumbent: TrialRecord | None, margin: float = MARGIN) -> bool:
    """Whether ``record`` is faster than the best candidate so far beyond the noise.

    Against the untuned translation (no incumbent): the confidence interval of its paired speedup lies above
    1 + margin. Against an incumbent timed in the same rounds: the interval of its paired speedup over the
    incumbent lies above 1 + margin. A record timed before this incumbent existed (resumed from the records)
    must have its whole interval over the untuned one above the incumbent's speedup times 1 + margin.
    """
    if not record.verified or not record.latency_s or record.speedup <= 0:
        return False
    interval = record.extra.get("speedup_interval") or [record.speedup, record.speedup]
    if incumbent is None:
        return float(interval[0]) > 1 + margin
    if record.text_sha256 == incumbent.text_sha256:
        return False
    direct = record.extra.get("vs_incumbent")
    if direct and record.extra.get("incumbent") == incumbent.text_sha256:
        return float(direct[0]) > 1 + margin
    return float(interval[0]) > incumbent.speedup * (1 + margin)


def session_records(text: str, path: str, spec: KernelSpec, case: Mapping[str, Any],
                    project: ProjectConfig | None = None) -> RecordStore:
    """The trial records of tuning ``text`` on ``spec`` timed at ``case`` with the project's settings."""
    from xpiler_core.project import build_settings, load_project

    build = build_settings(load_project(path, project), path, text)
    return RecordStore(text, DIRECTION, spec.path.read_text(encoding="utf-8") if spec.path.is_file() else "",
                       json.dumps(dict(case), sort_keys=True, default=str), build_key=repr((build.flags, build.depends)))


def open_problem(text: str, path: str, spec: KernelSpec, **kwargs: Any) -> tuple[CpuTuningProblem, Any]:
    """A problem with its own temp dir; the caller closes the returned TemporaryDirectory."""
    tmp = tempfile.TemporaryDirectory(prefix="xpiler-tune-")
    try:
        return CpuTuningProblem(text, path, spec, Path(tmp.name), **kwargs), tmp
    except BaseException:
        tmp.cleanup()
        raise
