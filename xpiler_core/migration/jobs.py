"""One file of a tree migration as a job: what it needs in, what it gives back, both plain data (JSON) so that
a job crosses a pipe to a local worker or the network to a Ray node unchanged."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from xpiler_core import __version__
from xpiler_core.dialect import Dialect
from xpiler_core.project import ProjectConfig, load_project, local_includes
from xpiler_core.translation import TranslateOptions

# statuses a re-run keeps: the outcome of the translation itself; anything else (xpiler's harness failed, a
# worker died, the job timed out) is a failure of the environment, retried by the next run
FINAL = ("verified", "unresolved", "compiled-not-executed")


def options_to_dict(options: TranslateOptions) -> dict[str, Any]:
    data = dataclasses.asdict(dataclasses.replace(options, project=None, llm=None))
    data["target"] = options.target.value
    data["source_dialect"] = options.source_dialect.value if options.source_dialect else None
    data["project"] = options.project.to_dict() if options.project is not None else None
    if options.llm is not None:
        data["llm"] = dataclasses.asdict(options.llm)
    return data


def options_from_dict(data: dict[str, Any]) -> TranslateOptions:
    values = dict(data)
    values["target"] = Dialect(values["target"])
    values["source_dialect"] = Dialect(values["source_dialect"]) if values.get("source_dialect") else None
    values["project"] = ProjectConfig.from_dict(values["project"]) if values.get("project") else None
    if values.get("llm"):
        from xpiler_core.llm.client import LLMConfig

        values["llm"] = LLMConfig(**values["llm"])
    names = {f.name for f in dataclasses.fields(TranslateOptions)}
    return TranslateOptions(**{k: v for k, v in values.items() if k in names})


@dataclass
class FileJob:
    relative: str  # the file's path below the tree's root (also its key in the record and the report)
    path: str  # where the worker reads it (the same tree on every node of a cluster)
    text: str
    output: str  # the output's path below the output root
    options: dict[str, Any]  # options_to_dict; spec_path: the spec beside the file, if any
    digest: str = ""  # every input of the job (see :func:`job_digest`)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, line: str) -> FileJob:
        return cls(**json.loads(line))


@dataclass
class FileOutcome:
    relative: str
    status: str  # a Status value, or "error" when xpiler failed
    reason: str = ""
    where: str = ""  # file:line:col of the first reason, when it has one
    tier: str = ""
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    output: str = ""  # relative output path ("" when nothing was produced)
    output_text: str = ""
    companions: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)
    diff: str = ""  # unified diff source -> output (for the report)
    node: str = ""  # where it ran
    digest: str = ""
    attempts: int = 1

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), default=str)

    @classmethod
    def from_json(cls, line: str) -> FileOutcome:
        return cls(**json.loads(line))


def job_digest(relative: str, path: str, text: str, options: TranslateOptions) -> str:
    """A hash of everything the job's outcome depends on: the file's text, the texts of the local headers it
    includes, the spec beside it (and its reference), the project's flags, the options, xpiler's version."""
    project = load_project(path, options.project)
    headers = local_includes(text, path, project)
    parts: list[Any] = [__version__, relative, text, sorted((k, _sha(v)) for k, v in headers.items()),
                        options_to_dict(dataclasses.replace(options, output_path=None)), project.to_dict()]
    if options.spec_path:
        from pathlib import Path

        spec = Path(options.spec_path)
        parts.append(spec.read_text(encoding="utf-8", errors="replace") if spec.is_file() else "")
        for sibling in sorted(spec.parent.glob("*.py")):  # a reference the spec names lies beside it
            parts.append((sibling.name, _sha(sibling.read_text(encoding="utf-8", errors="replace"))))
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()


def run_job(job: FileJob, node: str = "") -> FileOutcome:
    """Translate and verify one file; never raises (xpiler's own failure is an outcome with status "error")."""
    from xpiler_core.diagnostics import XpilerError
    from xpiler_core.pipeline import translate

    started = time.monotonic()
    options = options_from_dict(job.options)
    try:
        result = translate(job.text, job.path, options)
    except XpilerError as exc:
        return FileOutcome(job.relative, "unresolved", exc.message, f"{exc.file}:{exc.line + 1}:{exc.col + 1}",
                           seconds=time.monotonic() - started, node=node, digest=job.digest)
    except Exception as exc:  # noqa: BLE001 - xpiler's own bug: this file's outcome, not the run's end
        trace = traceback.format_exc(limit=8)
        return FileOutcome(job.relative, "error", f"a bug in xpiler: {type(exc).__name__}: {exc}\n{trace}",
                           seconds=time.monotonic() - started, node=node, digest=job.digest)
    first = next(iter(result.unresolved), None)
    where = (f"{job.relative}:{first.span.start_line + 1}:{first.span.start_col + 1}" if first is not None
             and first.span is not None else "")
    manifest: dict[str, Any] = dict(result.manifest)
    facts = manifest.get("facts")
    tier = str(facts.get("tier") or "") if isinstance(facts, dict) else ""
    if not tier and options.target is Dialect.C and result.output_text:
        tier = "structural"
    diff = ""
    if result.output_text:
        diff = "".join(difflib.unified_diff(job.text.splitlines(keepends=True),
                                            result.output_text.splitlines(keepends=True),
                                            fromfile=job.relative, tofile=job.output, n=2))
    return FileOutcome(job.relative, result.status.value, result.reason, where, tier,
                       time.monotonic() - started, {k: float(v) for k, v in (manifest.get("timings") or {}).items()
                                                    if isinstance(v, (int, float))},
                       job.output if result.output_text else "", result.output_text, dict(result.companions),
                       manifest, diff[:400_000], node, job.digest)
