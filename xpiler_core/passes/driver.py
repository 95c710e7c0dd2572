"""The one pass driver: runs a list of passes on a unit, with instruments before and after each pass.

Every plan, ``xpiler pass`` and the tuner run passes through :func:`run_passes`. A unit is a
:class:`SourceUnit` (CST passes edit its text) or an AST :class:`~xpiler_core.ast.Module`; AST passes lower a
source unit on entry and CST passes get a printed module, so any pass list runs on either. Each pass yields
one :class:`~xpiler_core.passes.base.PassRecord` (name, parameters, changed, refusal, notes,
unresolved count, seconds, where a refusal points). Instruments observe the run (timing is in the record;
:class:`DumpIntermediates` writes each intermediate program; cancellation is checked between passes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from xpiler_core import ast as A
from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.passes import get_pass
from xpiler_core.passes.base import PassContext, PassRecord, PassRefused, SourceUnit
from xpiler_core.progress import CancelToken, ProgressFn, report

Unit = SourceUnit | A.Module
#: A pass to run: its name (parameters from the run's ``params``), or its name with its own parameters.
Step = str | tuple[str, Mapping[str, Any]]


class Instrument(Protocol):
    """Observes a pass run: called before each pass and after it with its record and its output."""

    def before(self, name: str, unit: Unit) -> None: ...

    def after(self, record: PassRecord, unit: Unit) -> None: ...


@dataclass
class DumpIntermediates:
    """Writes the program after each pass to ``folder/NN-<pass>.<suffix>`` (``--dump-passes``)."""

    folder: Path
    dialect: Dialect
    count: int = 0

    def before(self, name: str, unit: Unit) -> None:
        return None

    def after(self, record: PassRecord, unit: Unit) -> None:
        from xpiler_core.printer import print_module

        self.count += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        text = unit.text if isinstance(unit, SourceUnit) else print_module(unit, self.dialect)
        suffix = unit.dialect.suffix if isinstance(unit, SourceUnit) else self.dialect.suffix
        (self.folder / f"{self.count:02d}-{record['name']}{suffix}").write_text(text, encoding="utf-8")


@dataclass
class PassRun:
    unit: Unit
    records: list[PassRecord] = field(default_factory=list)
    refused: PassRecord | None = None  # the first refusal (with ``stop_on_refusal`` the run ended there)
    crashed: str | None = None  # a pass raised something else (with ``contain_errors``); the run ended there
    unchanged: str | None = None  # with ``require_change``: the first pass that changed nothing


def _as_ast(unit: Unit, ctx: PassContext) -> A.Module:
    if isinstance(unit, A.Module):
        return unit
    from xpiler_core.frontend.lower import lower_text

    return lower_text(unit.text, unit.path, unit.dialect)


def _as_source(unit: Unit, ctx: PassContext) -> SourceUnit:
    if isinstance(unit, SourceUnit):
        return unit
    from xpiler_core.printer import print_module

    return SourceUnit(print_module(unit, ctx.target), ctx.target, ctx.file)


def run_passes(
    unit: Unit,
    steps: Sequence[Step],
    ctx: PassContext,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    cancel: CancelToken | None = None,
    instruments: Sequence[Instrument] = (),
    stop_on_refusal: bool = False,
    contain_errors: bool = False,
    require_change: bool = False,
    progress: ProgressFn | None = None,
    progress_band: tuple[float, float] = (0.05, 0.3),
) -> PassRun:
    """Run ``steps`` in order on ``unit``. A refusal is recorded (CST passes also warn, since a CST pass
    refusing leaves an API unmapped; an AST pass refusing means it does not apply); ``stop_on_refusal`` ends
    the run there. ``contain_errors`` turns a crash of a pass into the end of the run (the tuner's illegal
    points) instead of an exception; ``require_change`` ends the run at a pass that changed nothing."""
    import time

    run = PassRun(unit)
    low, high = progress_band
    for index, step in enumerate(steps):
        name, own = (step, None) if isinstance(step, str) else step
        if cancel is not None:
            cancel.check()
        report(progress, low + (high - low) * index / max(len(steps), 1), f"pass {name} ({index + 1}/{len(steps)})")
        module = get_pass(name)
        merged = {**module.INFO.defaults(), **((params or {}).get(name, {}) if own is None else own)}
        before = run.unit
        entered: Unit = _as_ast(before, ctx) if module.INFO.kind == "ast" else _as_source(before, ctx)
        notes_before, unresolved_before = len(ctx.notes), len(ctx.unresolved)
        for instrument in instruments:
            instrument.before(name, entered)
        started = time.perf_counter()
        refused: str | None = None
        where: Span | None = None
        try:
            out = module.apply(entered, merged, ctx)
        except PassRefused as refusal:
            out, refused, where = entered, refusal.reason, refusal.span
            if module.INFO.kind == "cst":
                ctx.diagnostics.append(Diagnostic(Severity.WARNING, f"{name}.refused", refusal.reason,
                                                  refusal.span or Span.empty(), ctx.file))
        except Exception as exc:
            if not contain_errors:
                raise
            run.crashed = f"{name}: {type(exc).__name__}: {exc}"
            return run
        changed = (out.text != entered.text) if isinstance(out, SourceUnit) and isinstance(entered, SourceUnit) \
            else out != entered
        record: PassRecord = {
            "name": name, "params": merged, "changed": changed, "refused": refused,
            "notes": ctx.notes[notes_before:], "unresolved": len(ctx.unresolved) - unresolved_before,
            "seconds": round(time.perf_counter() - started, 4),
        }
        if where is not None and where != Span.empty():
            record["span"] = where.to_dict()
        run.records.append(record)
        run.unit = out
        for instrument in instruments:
            instrument.after(record, out)
        if refused is not None and run.refused is None:
            run.refused = record
            if stop_on_refusal:
                return run
        if require_change and not changed:
            run.unchanged = name
            return run
    return run
