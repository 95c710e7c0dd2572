"""``xpiler replay MANIFEST``: redo a recorded translation and say whether it reproduced.

The source must still hash to the recorded value. The run is repeated with the recorded direction, passes
and parameters, spec, seed and warp size; reproduced means the same translation text (hash), the same
status and the same test outcome per case (pass/fail and max abs error within 1e-12 relative). Exit 0 when
reproduced, 1 when not. A run with an LLM proposer is repeated with the recorded endpoint, model and key
variable (over ``XPILER_LLM_*``); replies are cached by model and prompt, so a replay on the machine that
made the run asks nobody.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from xpiler_core.cli.translate import llm_config, read_source
from xpiler_core.diagnostics import XpilerError
from xpiler_core.frontend.dialect import Dialect
from xpiler_core.pipeline import TranslateOptions, sha256_text, translate


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("replay", help="redo a recorded translation run and check it reproduces",
                                   description="Redo the run recorded in MANIFEST and compare the outcome.")
    parser.add_argument("manifest", metavar="MANIFEST", help="manifest JSON written by `xpiler translate`")
    parser.set_defaults(func=run)


def load_manifest(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise XpilerError(f"cannot read manifest: {exc.strerror}", path) from None
    except json.JSONDecodeError as exc:
        raise XpilerError(f"not a manifest (invalid JSON: {exc.msg})", path, exc.lineno - 1, exc.colno - 1) from None
    for key in ("source", "options", "outcome"):
        if key not in data:
            raise XpilerError(f"not a manifest: no '{key}' entry", path)
    return data


def options_from_manifest(data: dict[str, Any]) -> TranslateOptions:
    opts = data["options"]
    spec = data.get("spec") or {}
    proposer = str(opts.get("proposer", "rules"))
    recorded = data.get("proposer") or {}  # the LLM settings of the run, when it used a proposer
    return TranslateOptions(
        target=Dialect(opts["target"]),
        warp_size=opts.get("warp_size"),
        spec_path=opts.get("spec_path") if not spec.get("auto") else None,
        verify=bool(opts.get("verify", True)),
        seed=int(opts.get("seed", 0)),
        passes=list(opts.get("passes") or []) or None,
        pass_params={k: dict(v) for k, v in (opts.get("pass_params") or {}).items()},
        proposer=proposer,
        llm=None if proposer == "rules" else llm_config(recorded.get("base_url"), recorded.get("model"),
                                                         recorded.get("api_key_env")),
    )


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Differences between two manifests' outcomes (empty: reproduced)."""
    diffs: list[str] = []
    if old.get("candidate_sha256") != new.get("candidate_sha256"):
        diffs.append("the translation text differs")
    if old["outcome"]["status"] != new["outcome"]["status"]:
        diffs.append(f"status {old['outcome']['status']} → {new['outcome']['status']}")
    old_compile = (old["outcome"].get("compile") or {}).get("ok")
    new_compile = (new["outcome"].get("compile") or {}).get("ok")
    if old_compile != new_compile:
        diffs.append(f"compile verdict {old_compile} → {new_compile}")
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


def run(args: argparse.Namespace) -> int:
    data = load_manifest(args.manifest)
    source_path = data["source"]["path"]
    text = read_source(source_path)
    if sha256_text(text) != data["source"]["sha256"]:
        print(f"{source_path}:1:1: error: the source changed since the recorded run (sha256 differs); "
              "not reproducible", file=sys.stderr)
        return 1
    result = translate(text, source_path, options_from_manifest(data))
    diffs = compare(data, result.manifest)
    old_t = data.get("timings", {}).get("total")
    print(f"replayed {data.get('direction')} of {source_path}: status {result.status} "
          f"(recorded {data['outcome']['status']}); {result.seconds:.2f} s (recorded {old_t} s)")
    if diffs:
        print("NOT reproduced:")
        for d in diffs:
            print(f"  - {d}")
        return 1
    print("reproduced: same translation, same status, same test outcomes")
    return 0
