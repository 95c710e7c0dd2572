"""LLM proposals grounded by BM25 over ``manuals/`` (off by default, never trusted).

``propose`` asks an OpenAI-compatible endpoint for a pass's transformation with retrieved manual sections
in a per-pass meta-prompt, and returns only replies that verified like any other candidate. Nothing here
is imported, and no network call is made, unless a proposer other than "rules" is configured.
"""

from xpiler_core.llm.client import LLMConfig, LLMError, LLMUnavailable
from xpiler_core.llm.propose import Proposal, ProposerConfig, extract_code_block, propose, verify_proposal

__all__ = ["LLMConfig", "LLMError", "LLMUnavailable", "Proposal", "ProposerConfig", "extract_code_block",
           "propose", "verify_proposal"]
