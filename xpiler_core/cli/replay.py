"""``xpiler replay MANIFEST``: redo a recorded translation and say whether it reproduced.

Works for every direction (one manifest schema, ``translation.MANIFEST_SCHEMA``). The source must still hash
to the recorded value (and so must every local header it read). The run is repeated with the recorded
direction, passes and parameters, spec, seed, warp size and project settings; reproduced means the same
translation text (hash), the same status and the same test outcome per case (pass/fail and max abs error
within 1e-12 relative) or the same whole-program verdict.

Exit status: 0 reproduced, 3 not reproduced (the differences are printed), 1 the manifest cannot be replayed
(unreadable or malformed, the source or a header changed, an LLM run without ``--allow-llm``), 2 a usage
error, 5 a bug in xpiler.

A manifest is a file from the workspace, and workspaces are shared: it never decides where anything is sent.
A run recorded with an LLM proposer is replayed only with ``--allow-llm``, and then with the endpoint and key
variable the user gives (``--llm-base-url``/``--llm-api-key-env`` or ``XPILER_LLM_*``), never the recorded
ones; the endpoint is printed before any call. The recorded model is used unless the user names one. Replies
are cached by model and prompt, so a replay on the machine that made the run asks nobody.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpiler_core.cli.translate import llm_config, read_source
from xpiler_core.diagnostics import XpilerError

if TYPE_CHECKING:
    from xpiler_core.llm.client import LLMConfig
    from xpiler_core.translation import Manifest

EXIT_NOT_REPRODUCED = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("replay", help="redo a recorded translation run and check it reproduces",
                                   description="Redo the run recorded in MANIFEST and compare the outcome.")
    parser.add_argument("manifest", metavar="MANIFEST", help="manifest JSON written by `xpiler translate`")
    llm = parser.add_argument_group("LLM runs", "a run recorded with an LLM proposer replays only when you allow it")
    llm.add_argument("--allow-llm", action="store_true",
                     help="replay an LLM run, sending the source to YOUR endpoint (never the manifest's)")
    llm.add_argument("--llm-base-url", metavar="URL", help="your endpoint (default: $XPILER_LLM_BASE_URL)")
    llm.add_argument("--llm-model", metavar="NAME", help="model (default: the recorded one, else $XPILER_LLM_MODEL)")
    llm.add_argument("--llm-api-key-env", metavar="VAR",
                     help="the variable holding your key (default: $XPILER_LLM_API_KEY_ENV, else OPENAI_API_KEY)")
    parser.set_defaults(func=run)


def load_manifest(path: str) -> Manifest:
    from xpiler_core.translation import read_manifest

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


def _llm_settings(args: argparse.Namespace, data: Manifest, options_proposer: str) -> LLMConfig:
    """The user's LLM settings for replaying an LLM run; an error unless the user allowed it."""
    recorded: dict[str, Any] = dict(data.get("proposer") or {})
    if not args.allow_llm:
        raise XpilerError(f"this run used the LLM proposer ('{options_proposer}'); replaying it sends the source to "
                          "an LLM endpoint, which a manifest cannot decide: give --allow-llm (your endpoint and key "
                          "come from --llm-base-url/--llm-api-key-env or XPILER_LLM_*, never from the manifest)",
                          args.manifest)
    config = llm_config(args.llm_base_url, args.llm_model or recorded.get("model"), args.llm_api_key_env)
    if not config.base_url:
        raise XpilerError("--allow-llm needs your endpoint: --llm-base-url URL or XPILER_LLM_BASE_URL", args.manifest)
    shown = recorded.get("base_url")
    print(f"replay asks the LLM at {config.base_url} (model {config.model or '?'}, key from ${config.api_key_env})"
          + (f"; the run was recorded against {shown}" if shown and shown != config.base_url else ""),
          file=sys.stderr, flush=True)
    return config


def run(args: argparse.Namespace) -> int:
    from xpiler_core.pipeline import translate
    from xpiler_core.translation import options_from_manifest, sha256_text

    if not args.allow_llm and (args.llm_base_url or args.llm_model or args.llm_api_key_env):
        print("xpiler replay: error: --llm-* flags only apply with --allow-llm", file=sys.stderr)
        return 2
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
        options = dataclasses.replace(options, llm=_llm_settings(args, data, options.proposer))
    result = translate(text, source_path, options)
    diffs = compare(data, result.manifest)
    old_t = data.get("timings", {}).get("total")
    print(f"replayed {data['direction']} of {source_path}: status {result.status.value} "
          f"(recorded {data['outcome']['status']}); {result.seconds:.2f} s (recorded {old_t} s)")
    if diffs:
        print("NOT reproduced:")
        for d in diffs:
            print(f"  - {d}")
        return EXIT_NOT_REPRODUCED
    print("reproduced: same translation, same status, same test outcomes")
    return 0
