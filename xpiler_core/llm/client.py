"""The OpenAI-compatible chat client: endpoint settings, timeouts, retries, and a disk cache of replies.

Works with any server speaking the chat-completions protocol (hosted APIs, vLLM, llama.cpp, Ollama). The
API key is read from the environment variable the configuration names; it is never stored. Replies are
cached under ``get_cache("llm")`` with the key model + sha256 of the prompt, so a replay costs no call.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from xpiler_core.cache import caching_disabled, get_cache, stable_key
from xpiler_core.diagnostics import XpilerError

ENV_BASE_URL = "XPILER_LLM_BASE_URL"
ENV_MODEL = "XPILER_LLM_MODEL"
ENV_API_KEY_ENV = "XPILER_LLM_API_KEY_ENV"
ENV_TIMEOUT = "XPILER_LLM_TIMEOUT"
ENV_RETRIES = "XPILER_LLM_RETRIES"
ENV_REPAIR_BUDGET = "XPILER_LLM_REPAIR_BUDGET"


class LLMUnavailable(XpilerError):
    """The endpoint could not be reached or did not answer in time."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"LLM endpoint {url} is unavailable: {reason}", url)
        self.url = url
        self.reason = reason

    def format(self) -> str:  # not located in a source file: no line:col
        return f"error: {self.message}"


class LLMError(XpilerError):
    """The endpoint answered, but not with a usable chat completion (HTTP error, malformed body)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"LLM endpoint {url} gave no usable reply: {reason}", url)
        self.url = url
        self.reason = reason

    def format(self) -> str:
        return f"error: {self.message}"


@dataclass(frozen=True)
class LLMConfig:
    base_url: str = ""  # e.g. "http://127.0.0.1:8000/v1"; empty: not configured
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"  # the variable's name, not the key
    timeout_s: float = 60.0
    max_retries: int = 2
    temperature: float = 0.0
    max_tokens: int = 4096
    repair_budget_s: float = 30.0  # SMT repair time for a reply that runs but computes wrong results; 0: off

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMConfig:
        env = os.environ if environ is None else environ
        return cls(
            base_url=env.get(ENV_BASE_URL, ""),
            model=env.get(ENV_MODEL, ""),
            api_key_env=env.get(ENV_API_KEY_ENV, "OPENAI_API_KEY") or "OPENAI_API_KEY",
            timeout_s=float(env.get(ENV_TIMEOUT, "") or 60.0),
            max_retries=int(env.get(ENV_RETRIES, "") or 2),
            repair_budget_s=float(env.get(ENV_REPAIR_BUDGET, "") or 30.0),
        )

    def missing(self) -> str | None:
        """Why this configuration cannot be used, or None."""
        if not self.base_url:
            return f"no LLM endpoint configured (set {ENV_BASE_URL} or the xpiler.llm.endpoint setting)"
        if not self.model:
            return f"no LLM model configured (set {ENV_MODEL} or the xpiler.llm.model setting)"
        return None


@dataclass(frozen=True)
class LLMReply:
    text: str
    model: str
    prompt_sha256: str
    reply_sha256: str
    cached: bool


def prompt_hash(messages: Sequence[Mapping[str, str]]) -> str:
    blob = json.dumps(list(messages), sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def reply_cache_key(model: str, prompt_sha256: str) -> str:
    return stable_key("llm-reply", model, prompt_sha256)


def complete(config: LLMConfig, messages: Sequence[Mapping[str, str]]) -> LLMReply:
    """One chat completion (from the cache when this model has answered this prompt before)."""
    problem = config.missing()
    if problem is not None:
        raise LLMUnavailable(config.base_url or "<unset>", problem)
    digest = prompt_hash(messages)
    key = reply_cache_key(config.model, digest)
    cache = get_cache("llm")
    if not caching_disabled():
        hit = cache.get(key)
        if isinstance(hit, str):
            return LLMReply(hit, config.model, digest, _sha256(hit), cached=True)
    text = _call(config, messages)
    cache.set(key, text)
    return LLMReply(text, config.model, digest, _sha256(text), cached=False)


def _call(config: LLMConfig, messages: Sequence[Mapping[str, str]]) -> str:
    import openai  # imported here: the default (rules) path never loads the client

    client = openai.OpenAI(
        base_url=config.base_url,
        # Local servers accept any key; the SDK insists on a non-empty one.
        api_key=os.environ.get(config.api_key_env) or "unused",
        timeout=config.timeout_s,
        max_retries=config.max_retries,
    )
    try:
        response: Any = client.chat.completions.create(
            model=config.model,
            messages=[dict(m) for m in messages],  # type: ignore[misc]
            temperature=config.temperature,
            max_tokens=config.max_tokens,
        )
    except openai.APITimeoutError:
        raise LLMUnavailable(config.base_url, f"no answer within {config.timeout_s:g} s") from None
    except openai.APIConnectionError as exc:
        raise LLMUnavailable(config.base_url, _connection_reason(exc)) from None
    except openai.APIStatusError as exc:
        raise LLMError(config.base_url, f"HTTP {exc.status_code}: {_short(str(exc.message))}") from None
    except openai.APIError as exc:  # malformed or unexpected response bodies
        raise LLMError(config.base_url, _short(str(exc))) from None
    except ValueError as exc:  # the SDK could not decode the body at all
        raise LLMError(config.base_url, f"malformed response ({_short(str(exc))})") from None
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise LLMError(config.base_url, "the response has no choices[0].message") from None
    if not isinstance(content, str) or not content.strip():
        raise LLMError(config.base_url, "the reply is empty")
    return content


def _connection_reason(exc: Exception) -> str:
    cause: BaseException | None = exc
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    detail = str(cause) if cause is not None and cause is not exc else ""
    return _short(detail or str(exc) or "connection failed")


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()
