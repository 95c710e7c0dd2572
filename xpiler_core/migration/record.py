"""The run record of a tree migration, ``OUT/.xpiler/run.json``: per file, the digest of its job's inputs and
its outcome (without the texts, which are in the output tree). Saved after every file, so a killed run
resumes where it stopped; a re-run redoes only the files whose inputs changed, and those whose last outcome
was a failure of the environment (xpiler's harness, a worker that died)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpiler_core import __version__
from xpiler_core.migration.jobs import FINAL, FileOutcome
from xpiler_core.safe_io import write_confined

RECORD = Path(".xpiler") / "run.json"
RECORD_SCHEMA = 1
# what the record keeps of an outcome (the texts live in the output tree)
_KEPT = ("relative", "status", "reason", "where", "tier", "seconds", "timings", "output", "node", "digest",
         "attempts", "diff")


@dataclass
class RunRecord:
    root: str
    target: str
    files: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, out_root: Path, root: Path, target: str) -> RunRecord:
        path = out_root / RECORD
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls(str(root), target)
        if not isinstance(data, dict) or data.get("schema") != RECORD_SCHEMA or data.get("root") != str(root) \
                or data.get("target") != target or not isinstance(data.get("files"), dict):
            return cls(str(root), target)  # another tree or target wrote here: start over
        return cls(str(root), target, {k: v for k, v in data["files"].items() if isinstance(v, dict)})

    def reusable(self, relative: str, digest: str) -> FileOutcome | None:
        """The recorded outcome when the file's inputs are unchanged and it was final."""
        kept = self.files.get(relative)
        if not kept or kept.get("digest") != digest or kept.get("status") not in FINAL:
            return None
        return FileOutcome(**{k: v for k, v in kept.items() if k in _KEPT})

    def put(self, outcome: FileOutcome) -> None:
        previous = self.files.get(outcome.relative)
        if previous is not None and previous.get("digest") == outcome.digest:
            outcome.attempts = int(previous.get("attempts", 1)) + 1
        self.files[outcome.relative] = {k: getattr(outcome, k) for k in _KEPT}

    def save(self, out_root: Path) -> None:
        blob = json.dumps({"schema": RECORD_SCHEMA, "xpiler_version": __version__, "root": self.root,
                           "target": self.target, "files": self.files}, indent=1, sort_keys=True, default=str)
        write_confined(out_root / RECORD, blob, out_root)
