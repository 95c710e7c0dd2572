"""LLM proposals grounded by BM25 over ``manuals/`` (off by default, never trusted).

``propose`` asks an OpenAI-compatible endpoint for a pass's transformation with retrieved manual sections
in a per-pass meta-prompt, and returns only replies that verified like any other candidate. Nothing here
is imported, and no network call is made, unless a proposer other than "rules" is configured.

Configuration: ``TranslateOptions.proposer`` is "rules" (default), "llm" (ask first, rules as fallback) or
"rules-then-llm" (ask only when the rules' result is not verified); ``TranslateOptions.llm`` takes an
:class:`LLMConfig`, else ``XPILER_LLM_BASE_URL``, ``XPILER_LLM_MODEL``, ``XPILER_LLM_API_KEY_ENV`` (the name
of the variable holding the key), ``XPILER_LLM_TIMEOUT`` and ``XPILER_LLM_RETRIES`` are read. Modules:
``tokens`` (code-aware tokenizer), ``manuals`` (chunks with stable ids), ``retrieval`` (BM25),
``prompts`` (+ ``prompts.toml``), ``client`` (OpenAI client, cache), ``propose`` (proposals and their
verification), ``hook`` (what ``pipeline.translate`` calls).
"""

from xpiler_core.llm.client import LLMConfig, LLMError, LLMUnavailable
from xpiler_core.llm.propose import Proposal, ProposerConfig, extract_code_block, propose, verify_proposal

__all__ = ["LLMConfig", "LLMError", "LLMUnavailable", "Proposal", "ProposerConfig", "extract_code_block",
           "propose", "verify_proposal"]
