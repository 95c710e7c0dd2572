"""The CUDA → CPU tuning problem: render a configuration to C++, verify it, time it against the untuned one.

The fixed prefix of the CPU plan (detensorization, loop recovery with the spec's launch shape) runs once;
each configuration adds structural passes (split, reorder, fuse, cache, pipeline, tensorization, …) and
then loop binding with its parameters. A candidate counts only after the harness has compiled it and run
it on every case of the spec against the reference; then it is timed interleaved with the untuned
translation on the largest case. Identical candidate texts are evaluated once (and across runs, through
the records).
"""

from __future__ import annotations

import itertools
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xpiler_core import ast as A
from xpiler_core.diagnostics import XpilerError
from xpiler_core.frontend.dialect import Dialect
from xpiler_core.frontend.lower import lower_text
from xpiler_core.passes import all_passes, get_pass
from xpiler_core.passes._ast_support import find_loops
from xpiler_core.passes.base import PassContext, PassRefused
from xpiler_core.printer import print_module
from xpiler_core.progress import CancelToken
from xpiler_core.tune.config import Config, Params, Step, freeze
from xpiler_core.tune.measure import (
    LatencyStats,
    MeasureError,
    MeasureSettings,
    largest_case,
    measure_libraries,
)
from xpiler_core.tune.records import RecordStore, TrialRecord, sha256_text
from xpiler_core.verify.spec import KernelSpec

DIRECTION = "cuda->cpu"
PREFIX = ("detensorization", "loop_recovery")
BINDING = "loop_binding"
# String parameters that pick *where* a pass applies; the tuner enumerates their values from the code.
TARGET_PARAMS = ("function", "loop", "array")


@dataclass(frozen=True)
class Action:
    """A structural pass at one place (its target parameters); its tunable parameters are searched later."""

    name: str
    target: Params

    def describe(self) -> str:
        return Step(self.name, self.target).describe()


def tunable_space(name: str) -> dict[str, tuple[Any, ...]]:
    """The declared choices of a pass's parameters (only those with two or more choices)."""
    info = get_pass(name).INFO
    return {p.name: tuple(p.choices) for p in info.params if len(p.choices) >= 2}


def structural_passes() -> list[str]:
    """AST passes of the CUDA → CPU direction that the search may insert (the plan's fixed ones excluded)."""
    return [name for name, mod in all_passes().items()
            if mod.INFO.kind == "ast" and DIRECTION in mod.INFO.directions and name not in (*PREFIX, BINDING)]


class CpuTuningProblem:
    """Everything one tuning session of a CUDA file for the CPU needs: prefix module, spec, baseline."""

    def __init__(self, text: str, path: str, spec: KernelSpec, workdir: Path, *, seed: int = 0,
                 settings: MeasureSettings | None = None, cancel: CancelToken | None = None) -> None:
        from xpiler_core.plans.cuda_to_cpu import run_ast_passes, spec_launch_params, spec_with_launch_args

        self.text, self.path, self.seed, self.cancel = text, path, seed, cancel
        self.workdir = workdir
        self.settings = settings or MeasureSettings()
        module = lower_text(text, path)
        self.ctx = PassContext(source_dialect=module.dialect, target=Dialect.C, file=path)
        recovery: dict[str, Any] = dict(spec_launch_params(spec, module.function(spec.entry)))
        if spec.kind == "host":
            recovery.setdefault("wrapper", False)
        prefix, records = run_ast_passes(module, list(PREFIX), self.ctx, {"loop_recovery": recovery})
        refused = next((r["refused"] for r in records if r["name"] == "loop_recovery" and r["refused"]), None)
        if refused:
            raise XpilerError(f"cannot tune: the CPU translation is unresolved (loop recovery refused: {refused})", path)
        self.prefix_module: A.Module = prefix
        launch = next((str(r["params"].get("launch_params") or "") for r in records if r["name"] == "loop_recovery"), "")
        self.spec = spec_with_launch_args(spec, launch, workdir) if launch else spec
        self.entry = spec.entry
        self.case_index = largest_case(self.spec)
        self.binding_defaults: Params = freeze(get_pass(BINDING).INFO.defaults())
        self.baseline = Config((), self.binding_defaults)
        baseline_text = self.render(self.baseline)
        if baseline_text is None:
            raise XpilerError("cannot tune: loop binding refused the untuned translation", path)
        self.baseline_text = baseline_text
        self.records = RecordStore(text, DIRECTION, spec.path.read_text(encoding="utf-8") if spec.path.is_file() else "",
                                   self.case_index)
        self.baseline_library: Path | None = None
        self.baseline_stats: LatencyStats | None = None
        self.trials_measured = 0
        self.trials_resumed = 0
        self._memo: dict[str, TrialRecord] = {}

    # ------------------------------------------------------------------ rendering
    def module_after(self, steps: tuple[Step, ...]) -> A.Module | None:
        """The AST after the prefix and ``steps`` (None when a step refuses or changes nothing)."""
        module = self.prefix_module
        for step in steps:
            mod = get_pass(step.name)
            params = {**mod.INFO.defaults(), **dict(step.params)}
            ctx = PassContext(source_dialect=self.ctx.source_dialect, target=Dialect.C, file=self.path)
            try:
                new = mod.apply(module, params, ctx)
            except PassRefused:
                return None
            except Exception:  # a pass bug on this input: treat the step as illegal, never crash tuning
                return None
            if new == module:
                return None
            module = new
        return module

    def render(self, config: Config) -> str | None:
        module = self.module_after(config.steps)
        if module is None:
            return None
        mod = get_pass(BINDING)
        ctx = PassContext(source_dialect=self.ctx.source_dialect, target=Dialect.C, file=self.path)
        try:
            bound = mod.apply(module, {**mod.INFO.defaults(), **dict(config.binding)}, ctx)
        except PassRefused:
            return None
        return print_module(bound, Dialect.C)

    # ------------------------------------------------------------------ the search space
    def actions(self, steps: tuple[Step, ...]) -> list[Action]:
        """Legal structural pass applications after ``steps``: each pass at each place it accepts."""
        module = self.module_after(steps)
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
                if self.module_after((*steps, Step(name, action.target))) is not None:
                    found.append(action)
        return found

    def live_space(self, steps: tuple[Step, ...], action: Action | None, binding: Params) -> dict[str, tuple[Any, ...]]:
        """The parameters of ``action`` (or of loop binding when None) that change the output here.

        A parameter whose every choice gives the same text as its default (``block`` is for CUDA targets, a
        ``collapse`` deeper than the nest…) is dropped, so the search spends no trials on it.
        """
        name = action.name if action is not None else BINDING
        space = tunable_space(name)
        defaults = get_pass(name).INFO.defaults()

        def text_for(params: dict[str, Any]) -> str | None:
            if action is None:
                return self.render(Config(steps, freeze({**dict(binding), **params})))
            step = Step(name, freeze({**dict(action.target), **params}))
            return self.render(Config((*steps, step), binding))

        base = text_for({k: defaults[k] for k in space})
        live: dict[str, tuple[Any, ...]] = {}
        for key, choices in space.items():
            texts = {text_for({key: c}) for c in choices}
            if len(texts - {base}) > 0:
                live[key] = choices
        return live

    # ------------------------------------------------------------------ evaluation
    def start(self) -> LatencyStats:
        """Verify and build the untuned translation and time it alone (the reference of every speedup)."""
        from xpiler_core.runtime.build import build_library
        from xpiler_core.verify.harness import run_spec

        report = run_spec(self.spec, candidate_text=self.baseline_text, candidate_dialect=Dialect.C,
                          candidate_entry=self.entry, candidate_kind="host", seed=self.seed, cancel=self.cancel)
        if not report.passed:
            raise XpilerError("cannot tune: the untuned CPU translation does not pass its tests:\n" + report.summary(),
                              self.path)
        built = build_library(self.baseline_text, Dialect.C, self.workdir / "baseline", display_name="baseline.cpp",
                              cplusplus_c=True)
        if not built.ok or built.library is None:
            raise XpilerError("cannot tune: the untuned translation does not build: " + built.log[-400:], self.path)
        self.baseline_library = built.library
        stats = measure_libraries([built.library, built.library], self.spec, self.entry, self.case_index,
                                  self.workdir / "measure-baseline", settings=self.settings, seed=self.seed,
                                  cancel=self.cancel)
        self.baseline_stats = stats[0]
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
        from xpiler_core.runtime.build import build_library
        from xpiler_core.verify.harness import run_spec

        started = time.perf_counter()
        report = run_spec(self.spec, candidate_text=text, candidate_dialect=Dialect.C, candidate_entry=self.entry,
                          candidate_kind="host", seed=self.seed, cancel=self.cancel)
        if not report.passed:
            reason = report.build_error or next((c.summary() for c in report.cases if not c.passed), "failed")
            return TrialRecord(config.as_dict(), sha, False, error=reason[-300:],
                               seconds=time.perf_counter() - started)
        built = build_library(text, Dialect.C, self.workdir / sha[:12], display_name="candidate.cpp", cplusplus_c=True)
        if not built.ok or built.library is None or self.baseline_library is None:
            return TrialRecord(config.as_dict(), sha, False, error="build failed", seconds=time.perf_counter() - started)
        try:
            base, cand = measure_libraries([self.baseline_library, built.library], self.spec, self.entry,
                                           self.case_index, self.workdir / f"measure-{sha[:12]}",
                                           settings=self.settings, seed=self.seed, cancel=self.cancel)
        except MeasureError as exc:
            return TrialRecord(config.as_dict(), sha, True, error=str(exc), seconds=time.perf_counter() - started)
        from xpiler_core.tune.measure import paired_speedup

        return TrialRecord(config.as_dict(), sha, True, latency_s=cand.median_s, baseline_latency_s=base.median_s,
                           speedup=paired_speedup(base, cand), spread=cand.spread,
                           seconds=time.perf_counter() - started, extra={"samples": cand.samples,
                                                                           "baseline_samples": base.samples})

    def confirm(self, configs: list[Config], rounds: int = 15) -> list[tuple[Config, LatencyStats, LatencyStats]]:
        """Re-time the finalists against the baseline with more rounds: (config, baseline stats, candidate stats)."""
        from xpiler_core.runtime.build import build_library

        out = []
        settings = MeasureSettings(self.settings.warmup, rounds, self.settings.sample_s, self.settings.max_s * 2,
                                   self.settings.timeout_s)
        for i, config in enumerate(configs):
            text = self.render(config)
            if text is None or self.baseline_library is None:
                continue
            built = build_library(text, Dialect.C, self.workdir / f"final{i}", display_name="candidate.cpp",
                                  cplusplus_c=True)
            if not built.ok or built.library is None:
                continue
            try:
                base, cand = measure_libraries([self.baseline_library, built.library], self.spec, self.entry,
                                               self.case_index, self.workdir / f"confirm{i}", settings=settings,
                                               seed=self.seed, cancel=self.cancel)
            except MeasureError:
                continue
            out.append((config, base, cand))
        return out


def open_problem(text: str, path: str, spec: KernelSpec, **kwargs: Any) -> tuple[CpuTuningProblem, Any]:
    """A problem with its own temp dir; the caller closes the returned TemporaryDirectory."""
    tmp = tempfile.TemporaryDirectory(prefix="xpiler-tune-")
    try:
        return CpuTuningProblem(text, path, spec, Path(tmp.name), **kwargs), tmp
    except BaseException:
        tmp.cleanup()
        raise
