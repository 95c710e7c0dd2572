"""LLM proposals for a pass: retrieve manual sections, prompt, extract the code, and verify it.

A proposal is never trusted. The reply's code block is parsed by the frontend, compiled by the target's real
toolchain and executed against the test spec (the spec given by the user, or one built from the source),
exactly as the rule-based candidates are. Only proposals that pass are returned; every attempt, accepted or
not, is recorded in ``config.attempts`` for the manifest.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span
from xpiler_core.dialect import Dialect
from xpiler_core.llm.client import LLMConfig, LLMError, LLMReply, complete
from xpiler_core.llm.manuals import Chunk
from xpiler_core.llm.prompts import Prompt, build_prompt, templates
from xpiler_core.llm.retrieval import (
    FOLDERS,
    ManualIndex,
    build_query,
    default_index,
    folders_for,
    kernel_terms,
)
from xpiler_core.passes.base import PassContext, SourceUnit
from xpiler_core.progress import CancelToken

_FENCE = re.compile(r"^```[^\n`]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


@dataclass
class ProposerConfig:
    llm: LLMConfig
    spec_path: str | None = None  # None: tests are built from the source (verify/autospec.py)
    seed: int = 0
    top_k: int = 4  # manual sections put into the prompt
    replies: int = 1  # distinct prompts asked (attempt numbers vary the prompt, hence the cache key)
    problem: str = ""  # why the rules could not finish (a refusal reason, a failing test)
    rules_candidate: str | None = None
    cancel: CancelToken | None = None
    repair_budget_s: float = 30.0  # SMT repair of replies that run but compute wrong results; 0: off
    index: ManualIndex | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)  # filled in: one record per reply


@dataclass(frozen=True)
class Verification:
    passed: bool
    reason: str  # why it was rejected ("" when it passed)
    compile: Any | None = None  # CompileVerdict
    tests: Any | None = None  # SpecReport
    spec_info: dict[str, Any] | None = None
    text: str | None = None  # set when SMT repair changed the candidate: the text that verified


@dataclass(frozen=True)
class Proposal:
    """A verified LLM proposal (unverified replies are never turned into a Proposal)."""

    pass_name: str
    text: str
    model: str
    prompt: Prompt
    reply_sha256: str
    cached: bool
    verification: Verification


def extract_code_block(reply: str) -> str | None:
    """The code of the reply's fenced block (the longest when there are several), or None."""
    blocks = [m.group(1) for m in _FENCE.finditer(reply)]
    blocks = [b for b in blocks if b.strip()]
    return max(blocks, key=len) if blocks else None


def retrieve(pass_name: str, unit: SourceUnit, ctx: PassContext, config: ProposerConfig) -> tuple[str, list[Chunk]]:
    """The retrieval query for this pass and kernel, and the manual sections it finds."""
    summary = ""
    try:
        from xpiler_core.passes import get_pass

        summary = get_pass(pass_name).INFO.summary
    except KeyError:
        summary = "translate the file"
    terms = kernel_terms(unit.text, unit.path, unit.dialect)
    target_facts = " ".join(templates()["targets"].get(ctx.target.value, {}).get("facts", []))
    query = build_query(pass_name, summary, [*terms, target_facts], config.problem)
    index = config.index or default_index()
    # At least half of the sections come from the target's own notes: the source's API alone would
    # otherwise fill the prompt with what the kernel already uses.
    own = index.search(query, (config.top_k + 1) // 2, [FOLDERS[ctx.target][0]])
    both = index.search(query, config.top_k, folders_for(ctx.source_dialect, ctx.target))
    chunks = list({hit.chunk.id: hit.chunk for hit in [*own, *both]}.values())[: config.top_k]
    return query, chunks


def propose(pass_name: str, unit: SourceUnit, ctx: PassContext, config: ProposerConfig) -> list[Proposal]:
    """Ask the LLM for ``pass_name``'s transformation of ``unit`` into ``ctx.target``; verified ones only.

    Raises :class:`~xpiler_core.llm.client.LLMUnavailable` when the endpoint cannot be reached. Rejected
    replies become warnings in ``ctx.diagnostics`` and records in ``config.attempts``.
    """
    query, chunks = retrieve(pass_name, unit, ctx, config)
    accepted: list[Proposal] = []
    for attempt in range(max(1, config.replies)):
        if config.cancel is not None:
            config.cancel.check()
        problem = config.problem + (f" (attempt {attempt + 1}: an earlier reply was rejected)" if attempt else "")
        prompt = build_prompt(pass_name, unit.text, ctx.source_dialect, ctx.target, ctx.warp_size, chunks,
                              problem=problem, rules_candidate=config.rules_candidate)
        record: dict[str, Any] = {"pass": pass_name, "model": config.llm.model, "query": query,
                                  "chunk_ids": list(prompt.chunk_ids), "prompt": prompt.as_text()}
        config.attempts.append(record)
        try:
            reply: LLMReply = complete(config.llm, prompt.messages)
        except LLMError as exc:
            _reject(ctx, record, pass_name, f"malformed reply: {exc.reason}")
            continue
        record.update({"prompt_sha256": reply.prompt_sha256, "reply_sha256": reply.reply_sha256,
                       "cached": reply.cached})
        code = extract_code_block(reply.text)
        if code is None:
            _reject(ctx, record, pass_name, "malformed reply: no fenced code block")
            continue
        verification = verify_proposal(code, unit, ctx, spec_path=config.spec_path, seed=config.seed,
                                       cancel=config.cancel, repair_budget_s=config.repair_budget_s)
        record["tests"] = _report_summary(verification.tests)
        if not verification.passed:
            _reject(ctx, record, pass_name, verification.reason)
            continue
        record["verdict"] = "verified" if verification.text is None else "verified after SMT repair"
        accepted.append(Proposal(pass_name, verification.text or code, config.llm.model, prompt,
                                 reply.reply_sha256, reply.cached, verification))
        break
    return accepted


def _reject(ctx: PassContext, record: dict[str, Any], pass_name: str, reason: str) -> None:
    record["verdict"] = "rejected"
    record["reason"] = reason
    ctx.diagnostics.append(Diagnostic(Severity.WARNING, "llm.rejected",
                                      f"LLM proposal for {pass_name} discarded: {reason}", Span.empty(), ctx.file))


def _report_summary(report: Any | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {"passed": bool(report.passed), "cases": len(report.cases),
            "failed": sum(1 for c in report.cases if not c.passed), "build_error": bool(report.build_error)}


def verify_proposal(
    candidate: str,
    unit: SourceUnit,
    ctx: PassContext,
    *,
    spec_path: str | None = None,
    seed: int = 0,
    cancel: CancelToken | None = None,
    repair_budget_s: float = 0.0,
) -> Verification:
    """Parse, compile and test ``candidate`` (in ``ctx.target``) against the source's tests.

    Passes only with a clean parse, the target toolchain's acceptance and every test case matching.
    With ``repair_budget_s > 0`` a candidate that runs but computes wrong results goes to SMT repair
    (``xpiler_core.repair``); the repaired text must then pass the same checks, and is what the returned
    verification's ``text`` holds.
    """
    from xpiler_core.frontend.source import parse_text

    target = ctx.target
    display = str(Path(unit.path).with_suffix(target.suffix))
    parsed = parse_text(candidate, display, target)
    errors = [d for d in parsed.diagnostics if d.severity is Severity.ERROR]
    if errors:
        first = errors[0]
        return Verification(False, f"does not parse: {first.span.start_line + 1}:{first.span.start_col + 1}: "
                                   f"{first.message}")
    try:
        from xpiler_core.verify.harness import run_spec  # noqa: F401 - checked here, used by _run
        from xpiler_core.verify.spec import load_spec
    except ImportError as exc:
        return Verification(False, f"verification unavailable ({exc}); an LLM proposal needs evidence")
    with tempfile.TemporaryDirectory(prefix="xpiler-llm-spec-") as tmp:
        if spec_path:
            spec = load_spec(spec_path)
            spec_info: dict[str, Any] = {"path": spec_path, "auto": False}
        else:
            from xpiler_core.verify import autospec

            built = autospec.build_spec(unit.text, unit.path, unit.dialect, Path(tmp))
            if built.spec_path is None:
                return Verification(False, f"no tests could be built ({built.reason}); an LLM proposal is "
                                           "only accepted with test evidence")
            spec = load_spec(str(built.spec_path))
            spec_info = {"auto": True, "reason": built.reason}
        verdict = _compile_and_test(candidate, spec, spec_info, ctx, seed, cancel)
        if verdict.passed or verdict.tests is None or verdict.tests.build_error or repair_budget_s <= 0:
            return verdict
        repaired, note = _try_repair(candidate, display, spec, ctx, verdict, seed, repair_budget_s, cancel)
        if repaired is None:
            return dataclasses.replace(verdict, reason=f"{verdict.reason}; SMT repair: {note}")
        second = _compile_and_test(repaired, spec, {**spec_info, "repair": note}, ctx, seed, cancel)
        if not second.passed:
            return dataclasses.replace(verdict, reason=f"{verdict.reason}; the SMT repair did not verify either")
        return dataclasses.replace(second, text=repaired)


def _compile_and_test(
    candidate: str, spec: Any, spec_info: dict[str, Any], ctx: PassContext, seed: int, cancel: CancelToken | None,
) -> Verification:
    """The same evidence and the same status decision as any translation (``translation.gather_evidence``)."""
    from xpiler_core.translation import Status, TestSet, decide_status, gather_evidence
    from xpiler_core.verify.targets import runner_for

    runner = runner_for(ctx.target, ctx.warp_size if ctx.target is not Dialect.C else None, ctx.warp_size)
    tests = TestSet([spec], auto=bool(spec_info.get("auto")), spec_path=spec_info.get("path"))
    evidence = gather_evidence(candidate, tests, runner, seed=seed, cancel=cancel, shrink=False)
    status, reason = decide_status(evidence, [])
    return Verification(status is Status.VERIFIED, reason, evidence.compile, evidence.tests, spec_info)


def _try_repair(
    candidate: str, display: str, spec: Any, ctx: PassContext, failed: Verification, seed: int,
    budget_s: float, cancel: CancelToken | None,
) -> tuple[str | None, str]:
    """Hand a candidate that runs but computes wrong results to SMT repair: (repaired text or None, note)."""
    try:
        from xpiler_core.repair.engine import repair_candidate
    except ImportError:
        return None, "not available"
    kind = "host" if ctx.target is Dialect.C else spec.kind
    try:
        result = repair_candidate(candidate, display, spec, dialect=ctx.target, entry=spec.entry, kind=kind,
                                  warp_size=ctx.warp_size if ctx.target is not Dialect.C else None,
                                  budget_s=budget_s, seed=seed, initial_report=failed.tests, cancel=cancel)
    except Exception as exc:  # noqa: BLE001 - a repair that breaks leaves the proposal rejected, as it was
        return None, f"failed ({exc.__class__.__name__})"
    text = getattr(result, "text", None)
    note = f"{getattr(result, 'status', '?')}: {getattr(result, 'message', '')}"
    return (text if getattr(result, "status", "") == "repaired" and isinstance(text, str) else None), note
