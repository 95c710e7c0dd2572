"""The pipeline's proposer hook: "llm" and "rules-then-llm" around a direction's rule-based plan.

``rules-then-llm``: the plan runs as usual; only when its result is not verified is the LLM asked, for the
pass that refused (or, when none refused, for the whole translation), with the rules' partial output and
the reason in the prompt. ``llm``: the LLM is asked first; when no proposal verifies, the rule-based plan
runs as usual. Either way a proposal replaces the result only after it verified, and the manifest records
the model, prompts, retrieved chunk ids and reply hashes under ``"proposer"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from xpiler_core.diagnostics import Diagnostic, Severity, Span, XpilerError
from xpiler_core.frontend.unit import ParsedUnit
from xpiler_core.llm.client import LLMConfig, LLMUnavailable
from xpiler_core.llm.propose import Proposal, ProposerConfig, propose
from xpiler_core.passes.base import PassContext, PassRecord, SourceUnit
from xpiler_core.progress import CancelToken, ProgressFn, report
from xpiler_core.translation import Status, TranslateOptions, TranslationResult

PROPOSERS = ("rules", "llm", "rules-then-llm")
Plan = Callable[[ParsedUnit, TranslateOptions, ProgressFn | None, CancelToken | None], TranslationResult]


def resolve_config(options: Any) -> LLMConfig:
    """The LLM settings: ``options.llm`` when the caller set one, else the XPILER_LLM_* variables."""
    given = getattr(options, "llm", None)
    return given if isinstance(given, LLMConfig) else LLMConfig.from_env()


def translate_with_proposer(
    plan: Plan, unit: ParsedUnit, options: TranslateOptions, progress: ProgressFn | None, cancel: CancelToken | None
) -> TranslationResult:
    text, path = unit.text, unit.path
    mode = options.proposer
    if mode not in PROPOSERS:
        raise XpilerError(f"unknown proposer '{mode}' (expected one of: {', '.join(PROPOSERS)})", path)
    config = resolve_config(options)
    source = unit.dialect
    warp = options.warp_size or (64 if options.target.value == "hip" else 32)
    ctx = PassContext(source_dialect=source, target=options.target, warp_size=warp, file=path)
    rules_result = None
    pass_name, problem, partial = "translate", "", None
    if mode == "rules-then-llm":
        rules_result = plan(unit, options, progress, cancel)
        if rules_result.status is Status.VERIFIED:
            _record(rules_result, mode, config, None, [], "the rules verified; the LLM was not asked")
            return rules_result
        pass_name, problem = failed_pass(rules_result)
        partial = rules_result.output_text
    if not options.verify:
        note = "verification is off, and an LLM proposal is only accepted when verified: the LLM was not asked"
        result = rules_result or plan(unit, options, progress, cancel)
        _record(result, mode, config, None, [], note)
        return result
    report(progress, 0.5, f"asking the LLM ({config.model or 'unconfigured'}) for {pass_name}")
    proposer_config = ProposerConfig(llm=config, spec_path=options.spec_path, seed=options.seed, problem=problem,
                                     rules_candidate=partial, cancel=cancel, repair_budget_s=config.repair_budget_s)
    proposals: list[Proposal] = []
    unavailable: str | None = None
    try:
        proposals = propose(pass_name, SourceUnit(text, source, path), ctx, proposer_config)
    except LLMUnavailable as exc:
        unavailable = exc.message
    if proposals:
        skeleton = rules_result or plan(unit, dataclasses.replace(options, verify=False), progress, cancel)
        return adopt(skeleton, proposals[0], mode, config, proposer_config.attempts, ctx.diagnostics)
    result = rules_result or plan(unit, options, progress, cancel)
    result.diagnostics.extend(ctx.diagnostics)
    if unavailable is not None:
        result.diagnostics.append(Diagnostic(Severity.WARNING, "llm.unavailable", unavailable, Span.empty(), path))
    note = unavailable or "no LLM proposal verified"
    _record(result, mode, config, None, proposer_config.attempts, note)
    return result


def failed_pass(result: TranslationResult) -> tuple[str, str]:
    """The pass to ask the LLM about and why: the first refusal, else the first pass that left constructs
    unresolved, else the whole translation (with the result's reason: a compile error, a failing test)."""
    for record in result.passes_applied:
        if record.get("refused"):
            return str(record["name"]), str(record["refused"])
    reason = result.reason or result.summary
    for record in result.passes_applied:
        if record.get("unresolved"):
            return str(record["name"]), reason
    return "translate", reason


def adopt(
    skeleton: TranslationResult, proposal: Proposal, mode: str, config: LLMConfig, attempts: list[dict[str, Any]],
    diagnostics: list[Diagnostic],
) -> TranslationResult:
    """The translation result carrying a verified proposal and its evidence."""
    from xpiler_core.translation import report_dict, sha256_text, verdict_dict

    evidence = proposal.verification
    cases = len(evidence.tests.cases) if evidence.tests is not None else 0
    toolchain = getattr(evidence.compile, "toolchain", "the target toolchain")
    summary = (f"verified: LLM proposal ({proposal.model}) for {proposal.pass_name}, accepted by {toolchain} "
               f"and {cases} test case(s)")
    llm_record: PassRecord = {"name": f"llm:{proposal.pass_name}", "params": {"model": proposal.model},
                              "changed": True, "refused": None,
                              "notes": ["the output is the verified LLM proposal, replacing the rules' output"],
                              "unresolved": 0, "seconds": 0.0}
    passes = [*skeleton.passes_applied, llm_record]
    manifest = skeleton.manifest
    manifest["passes"] = passes
    manifest["options"]["verify"] = True
    manifest["candidate_sha256"] = sha256_text(proposal.text)
    manifest["spec"] = evidence.spec_info
    manifest["outcome"].update({"status": Status.VERIFIED.value, "reason": "",
                                "compile": verdict_dict(evidence.compile), "tests": report_dict(evidence.tests),
                                "unresolved": []})
    result = dataclasses.replace(
        skeleton, output_text=proposal.text, status=Status.VERIFIED, summary=summary, reason="",
        compile=evidence.compile, passes_applied=passes, tests=evidence.tests, unresolved=[], manifest=manifest,
        diagnostics=[*diagnostics, Diagnostic(Severity.INFO, "llm.accepted", summary, Span.empty(),
                                              skeleton.source_path)],
    )
    _record(result, mode, config, proposal, attempts, "")
    return result


def _record(result: TranslationResult, mode: str, config: LLMConfig, accepted: Proposal | None,
            attempts: list[dict[str, Any]], note: str) -> None:
    result.manifest["proposer"] = {
        "mode": mode,
        "model": config.model,
        "base_url": config.base_url,
        "api_key_env": config.api_key_env,
        "accepted": None if accepted is None else {
            "pass": accepted.pass_name, "prompt": accepted.prompt.as_text(),
            "chunk_ids": list(accepted.prompt.chunk_ids), "reply_sha256": accepted.reply_sha256,
            "cached": accepted.cached},
        "attempts": attempts,
        "note": note,
    }
