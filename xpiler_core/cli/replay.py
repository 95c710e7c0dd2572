"""``xpiler replay MANIFEST``: redo a recorded translation and say whether it reproduced.

Works for every direction (one manifest schema, ``translation.MANIFEST_SCHEMA``). The source must still hash
to the recorded value (and so must every local header it read). The run is repeated with the recorded
direction, passes and parameters, spec, seed, warp size and project settings; reproduced means the same
translation text (hash), the same status and the same test outcome per case (pass/fail and max abs error
within 1e-12 relative) or the same whole-program verdict. Exit 0 when reproduced, 1 when not. A run with
an LLM proposer is repeated with the recorded endpoint, model and key variable (over ``XPILER_LLM_*``);
replies are cached by model and prompt, so a replay on the machine that made the run asks nobody.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

from xpiler_core.cli.translate import llm_config, read_source
from xpiler_core.diagnostics import XpilerError
from xpiler_core.pipeline import translate
from xpiler_core.translation import Manifest, options_from_manifest, read_manifest, sha256_text


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("replay", help="redo a recorded translation run and check it reproduces",
                                   description="Redo the run recorded in MANIFEST and compare the outcome.")
    parser.add_argument("manifest", metavar="MANIFEST", help="manifest JSON written by `xpiler translate`")
    parser.set_defaults(func=run)


def load_manifest(path: str) -> Manifest:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise XpilerError(f"cannot read manifest: {exc.strerror}", path) from None
    except json.JSONDecodeError as exc:
        raise XpilerError(f"not a manifest (invalid JSON: {exc.msg})", path, exc.lineno - 1, exc.colno - 1) from None
    return read_manifest(data, path)


def compare(old: Manifest, new: Manifest) -> list[str]:
    """Differences between two manifests' outcomes (empty: reproduced)."""
    diffs: list[str] = []
    if old["candidate_sha256"] != new["candidate_sha256"]:
        diffs.append("the translation text differs")
    if old["outcome"]["status"] != new["outcome"]["status"]:
        diffs.append(f"status {old['outcome']['status']} → {new['outcome']['status']}")
    old_compile = (old["outcome"].get("compile") or {}).get("ok")
    new_compile = (new["outcome"].get("compile") or {}).get("ok")
    if old_compile != new_compile:
        diffs.append(f"compile verdict {old_compile} → {new_compile}")
    old_program = old["outcome"].get("program") or {}
    new_program = new["outcome"].get("program") or {}
    if old_program.get("matched") != new_program.get("matched"):
        diffs.append(f"whole-program verdict {old_program.get('matched')} → {new_program.get('matched')}")
    old_cases = ((old["outcome"].get("tests") or {}).get("cases")) or []
    new_cases = ((new["outcome"].get("tests") or {}).get("cases")) or []
    if len(old_cases) != len(new_cases):
        diffs.append(f"{len(old_cases)} test cases → {len(new_cases)}")
    for i, (a, b) in enumerate(zip(old_cases, new_cases, strict=False)):
        if a.get("sizes") != b.get("sizes"):
            diffs.append(f"case {i}: sizes {a.get('sizes')} → {b.get('sizes')}")
        if a.get("passed") != b.get("passed"):
            diffs.append(f"case {i} {a.get('sizes')}: passed {a.get('passed')} → {b.get('passed')}")
        ea, eb = a.get("max_abs_err"), b.get("max_abs_err")
        if isinstance(ea, (int, float)) and isinstance(eb, (int, float)) and not math.isclose(ea, eb, rel_tol=1e-12, abs_tol=0.0):
            diffs.append(f"case {i} {a.get('sizes')}: max abs error {ea} → {eb}")
    return diffs


def _changed_headers(manifest: Manifest) -> list[str]:
    changed = []
    for header, digest in manifest["source"].get("includes", {}).items():
        try:
            now = hashlib.sha256(Path(header).read_text(encoding="utf-8", errors="replace").encode(
                "utf-8", errors="replace")).hexdigest()
        except OSError:
            now = ""
        if now != digest:
            changed.append(header)
    return changed


def run(args: argparse.Namespace) -> int:
    data = load_manifest(args.manifest)
    source_path = data["source"]["path"]
    text = read_source(source_path)
    if sha256_text(text) != data["source"]["sha256"]:
        print(f"{source_path}:1:1: error: the source changed since the recorded run (sha256 differs); "
              "not reproducible", file=sys.stderr)
        return 1
    for header in _changed_headers(data):
        print(f"{header}:1:1: error: this header of the source changed since the recorded run; not reproducible",
              file=sys.stderr)
        return 1
    options = options_from_manifest(data)
    if options.proposer != "rules":
        recorded: dict[str, Any] = dict(data.get("proposer") or {})
        options = dataclasses.replace(options, llm=llm_config(recorded.get("base_url"), recorded.get("model"),
                                                              recorded.get("api_key_env")))
    result = translate(text, source_path, options)
    diffs = compare(data, result.manifest)
    old_t = data.get("timings", {}).get("total")
    print(f"replayed {data['direction']} of {source_path}: status {result.status.value} "
          f"(recorded {data['outcome']['status']}); {result.seconds:.2f} s (recorded {old_t} s)")
    if diffs:
        print("NOT reproduced:")
        for d in diffs:
            print(f"  - {d}")
        return 1
    print("reproduced: same translation, same status, same test outcomes")
    return 0
