"""Tuning records: every trial stored in the ``tune`` diskcache, keyed by source + target + machine.

A session key is the hash of (source text, target, the test spec's content, the machine). Under it the
store keeps the index of trials (one per distinct candidate text) and the best result. A re-run of the
same session finds its earlier trials and reuses their verdicts and measurements instead of repeating them;
the best record holds the configuration, from which the candidate text is rebuilt and compared by hash.
"""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from xpiler_core.cache import get_cache, stable_key


@lru_cache(maxsize=1)
def machine_id() -> str:
    """What makes measurements comparable: CPU model, core count, architecture, C++ compiler."""
    from xpiler_core.runtime.build import compiler_version

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        model = platform.processor()
    return f"{model} x{os.cpu_count()} {platform.machine()} {compiler_version('g++')}"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class TrialRecord:
    """One evaluated candidate."""

    config: dict[str, Any]
    text_sha256: str
    verified: bool
    latency_s: float | None = None  # median per call on the measured case
    baseline_latency_s: float | None = None  # the untuned translation, timed in the same rounds
    speedup: float = 0.0  # paired median of baseline / candidate; 0 when not verified
    spread: float = 0.0
    error: str | None = None
    seconds: float = 0.0  # wall time the trial took
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> TrialRecord:
        known = {k: data[k] for k in TrialRecord.__dataclass_fields__ if k in data}
        return TrialRecord(**known)


class RecordStore:
    """The trials and best result of one tuning session (source, target, spec, machine)."""

    def __init__(self, source_text: str, target: str, spec_text: str, case_key: str, build_key: str = "") -> None:
        """``case_key``: the timed case's values; ``build_key``: the project's flags and header digests (a trial
        measured at another size, with other headers or defines is another trial)."""
        self.source_sha256 = sha256_text(source_text)
        self.target = target
        self.machine = machine_id()
        self.session = stable_key("tune-session-v2", self.source_sha256, target, sha256_text(spec_text), case_key,
                                  self.machine, build_key)
        self._cache = get_cache("tune")

    def _trial_key(self, text_sha: str) -> str:
        return stable_key("tune-trial-v1", self.session, text_sha)

    def get(self, text_sha: str) -> TrialRecord | None:
        raw = self._cache.get(self._trial_key(text_sha))
        return TrialRecord.from_dict(raw) if isinstance(raw, dict) else None

    def put(self, record: TrialRecord) -> None:
        self._cache.set(self._trial_key(record.text_sha256), record.as_dict())
        index_key = stable_key("tune-index-v1", self.session)
        with self._cache.transact():
            index = list(self._cache.get(index_key) or [])
            if record.text_sha256 not in index:
                index.append(record.text_sha256)
                self._cache.set(index_key, index)

    def trials(self) -> list[TrialRecord]:
        index = self._cache.get(stable_key("tune-index-v1", self.session)) or []
        found = (self.get(sha) for sha in index)
        return [r for r in found if r is not None]

    def put_best(self, record: TrialRecord) -> None:
        self._cache.set(stable_key("tune-best-v1", self.session), record.as_dict())

    def best(self) -> TrialRecord | None:
        raw = self._cache.get(stable_key("tune-best-v1", self.session))
        return TrialRecord.from_dict(raw) if isinstance(raw, dict) else None
