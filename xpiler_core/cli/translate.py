"""``xpiler translate FILE|DIR --to hip|cuda|cpu|c|bang [-o OUT] [--spec SPEC] [-I DIR] [-D NAME[=V]] [--std S]``.

Translates FILE, verifies the result (the target's real compiler, then the source and the translation run
on the same inputs, or the whole program when it has ``main``), writes the translation next to the source
(never over it), its translated headers beside it and a manifest under ``.xpiler/`` next to the output, and
prints a short summary. A folder is translated file by file into ``-o OUTDIR`` (layout kept, files that
need no change copied) with a table. Exit status (``translation.EXIT_CODES``): 0 verified, 3 unresolved
(the reasons are printed as ``file:line:col`` warnings), 4 compiled but not executed, 5 an error of xpiler's
own harness, 1 a user error (unreadable file, bad flags), 2 a usage error.

``--proposer`` is "rules" by default: no LLM code is loaded and no network call is made. "llm" and
"rules-then-llm" ask the endpoint named by ``--llm-base-url``/``--llm-model``/``--llm-api-key-env``, each
falling back to its ``XPILER_LLM_*`` environment variable (see ``xpiler_core.llm``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xpiler_core.diagnostics import Severity, XpilerError
from xpiler_core.dialect import Dialect

if TYPE_CHECKING:
    from xpiler_core.llm.client import LLMConfig
    from xpiler_core.project import ProjectConfig
    from xpiler_core.translation import TranslateOptions, TranslationResult

# The same names as xpiler_core.llm.hook.PROPOSERS, repeated so the default path never imports the LLM code.
PROPOSERS = ("rules", "llm", "rules-then-llm")
# Target names users type: the dialects, plus "cpu" for the C/OpenMP target (what the editor calls it).
TARGET_NAMES: dict[str, Dialect] = {**{d.value: d for d in Dialect}, "cpu": Dialect.C}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "translate",
        help="translate a kernel file to another dialect and verify the result",
        description="Translate FILE to the --to dialect, verify it, write it next to FILE and print a summary.",
    )
    parser.add_argument("file", metavar="FILE", help="source file (.cu, .hip, .c, .mlu) or a folder of them")
    parser.add_argument("--to", required=True, choices=sorted(TARGET_NAMES), help="target (cpu is an alias of c)")
    parser.add_argument("--from", dest="source", choices=sorted(n for n in TARGET_NAMES if n != "cpu"),
                        help="the source's dialect (default: detected from the code compiled for its platform)")
    parser.add_argument("-o", "--output", metavar="OUT", help="output path (default: FILE with the target suffix)")
    parser.add_argument("--spec", metavar="SPEC", help="test spec (TOML) to verify against; default: built from the code")
    parser.add_argument("--manifest", metavar="FILE", help="also write the run's manifest (JSON) here")
    parser.add_argument("--no-verify", action="store_true", help="skip compiling and testing (never 'verified')")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random test inputs (default 0)")
    parser.add_argument("--warp-size", type=int, help="warp size the translation runs at (HIP default 64)")
    parser.add_argument("--passes", help="comma-separated pass list instead of the direction's default")
    parser.add_argument("--param", action="append", default=[], metavar="PASS.NAME=VALUE",
                        help="a pass parameter, e.g. warp_size.strategy=lanes32 (repeatable)")
    parser.add_argument("--tier", choices=["auto", "portable"], default="auto",
                        help="CPU targets: auto (structural translation, the portable tier where it fails) or "
                             "portable (the source on the SIMT header set: exact, slower; needs verification)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON instead of the summary")
    parser.add_argument("--keep-going", action="store_true",
                        help="translate a source with syntax errors (what parses); by default they stop the run")
    tree = parser.add_argument_group("folders", "when FILE is a folder (translated into -o OUTDIR)")
    tree.add_argument("--jobs", type=int, metavar="N", help="files translated at once (default: one per core)")
    tree.add_argument("--cluster", metavar="ADDRESS",
                      help="run the files as tasks on a Ray cluster (ray://HOST:PORT or auto; default $RAY_ADDRESS "
                           "when set; needs pip install xpiler[cluster])")
    tree.add_argument("--fresh", action="store_true",
                      help="redo every file (default: files unchanged since the last run into OUTDIR are kept)")
    add_project_flags(parser)
    llm = parser.add_argument_group("LLM proposer", "used only with --proposer llm or rules-then-llm")
    llm.add_argument("--proposer", choices=PROPOSERS, default="rules",
                     help="rules (default, no network), llm (ask the LLM first, rules as fallback) or "
                          "rules-then-llm (ask only when the rules' result is not verified)")
    llm.add_argument("--llm-base-url", metavar="URL",
                     help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default: $XPILER_LLM_BASE_URL)")
    llm.add_argument("--llm-model", metavar="NAME", help="model name (default: $XPILER_LLM_MODEL)")
    llm.add_argument("--llm-api-key-env", metavar="VAR",
                     help="name of the environment variable holding the API key "
                          "(default: $XPILER_LLM_API_KEY_ENV, else OPENAI_API_KEY)")
    parser.set_defaults(func=run)


def add_project_flags(parser: argparse.ArgumentParser, *, programs: bool = True) -> None:
    """``-I``, ``-D``, ``--std`` (and, where whole programs run, their arguments and units): what the compilers
    and the program runs get, on top of ``compile_commands.json`` and ``xpiler.toml`` found upward from the file."""
    group = parser.add_argument_group("project", "build flags (added to compile_commands.json / xpiler.toml)")
    group.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR", help="include directory")
    group.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]", help="macro")
    group.add_argument("--std", metavar="STD", help="language standard, e.g. c++17")
    group.add_argument("--reference", choices=("runtime", "gpu"), default="runtime",
                       help="where the CUDA source runs as the reference: the SIMT runtime (default) or this "
                            "machine's CUDA GPU, built with nvcc")
    if not programs:
        parser.set_defaults(program_args=[], sources=[], timeout=None)
        return
    group.add_argument("--arg", dest="program_args", action="append", default=[], metavar="ARG",
                       help="an argument for the whole-program runs (repeatable)")
    group.add_argument("--unit", dest="sources", action="append", default=[], metavar="FILE",
                       help="another translation unit of the program (repeatable): built and translated with FILE")
    group.add_argument("--timeout", type=float, metavar="S", help="time limit of one program or test run")


def project_from_args(args: argparse.Namespace) -> ProjectConfig | None:
    from xpiler_core.project import ProjectConfig

    if args.timeout is not None and not args.timeout > 0:
        raise XpilerError(f"--timeout must be a positive number of seconds, got {args.timeout:g}", "<command line>")
    given = ProjectConfig(include_dirs=tuple(str(Path(d).resolve()) for d in args.include_dirs),
                          defines=tuple(args.defines), std=args.std, program_args=tuple(args.program_args),
                          timeout_s=args.timeout, sources=tuple(str(Path(s).resolve()) for s in args.sources),
                          origins=("command line",), reference_device=getattr(args, "reference", "runtime"))
    if given.reference_device == "gpu":
        from xpiler_core.verify.gpu_reference import require_gpu

        require_gpu()  # refused at once, not after the translation
    return given if given != ProjectConfig() else None


def parse_params(items: list[str]) -> dict[str, dict[str, Any]]:
    params: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        pass_name, dot, name = key.partition(".")
        if not sep or not dot or not pass_name or not name:
            raise XpilerError(f"--param expects PASS.NAME=VALUE, got '{item}'")
        value: Any = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            try:
                value = int(raw)
            except ValueError:
                try:
                    value = float(raw)
                except ValueError:
                    value = raw
        params.setdefault(pass_name, {})[name] = value
    return params


def options_from_args(args: argparse.Namespace) -> TranslateOptions:
    from xpiler_core.translation import TranslateOptions

    return TranslateOptions(
        target=TARGET_NAMES[args.to],
        warp_size=args.warp_size,
        spec_path=args.spec,
        verify=not args.no_verify,
        seed=args.seed,
        passes=[p.strip() for p in args.passes.split(",") if p.strip()] if args.passes else None,
        pass_params=parse_params(args.param),
        proposer=args.proposer,
        llm=llm_config_from_args(args),
        source_dialect=TARGET_NAMES[args.source] if args.source else None,
        project=project_from_args(args),
        # compiler messages about the translation name the file written (a tree names each file itself)
        output_path=args.output if args.output and not Path(args.file).is_dir() else None,
        cpu_tier=args.tier,
        keep_going=args.keep_going,
    )


def given_llm_flags(args: argparse.Namespace) -> list[str]:
    given = (("--llm-base-url", args.llm_base_url), ("--llm-model", args.llm_model),
             ("--llm-api-key-env", args.llm_api_key_env))
    return [flag for flag, value in given if value]


def llm_config_from_args(args: argparse.Namespace) -> LLMConfig | None:
    """The LLM settings for a proposer other than "rules": the ``--llm-*`` flags over ``XPILER_LLM_*``."""
    if args.proposer == "rules":
        return None
    return llm_config(args.llm_base_url, args.llm_model, args.llm_api_key_env)


def llm_config(base_url: str | None, model: str | None, api_key_env: str | None) -> LLMConfig:
    """The ``XPILER_LLM_*`` settings with the given (non-empty) endpoint, model and key variable over them."""
    from xpiler_core.llm.client import LLMConfig  # imported here: "rules" never loads the LLM code

    env = LLMConfig.from_env()
    return dataclasses.replace(env, base_url=base_url or env.base_url, model=model or env.model,
                               api_key_env=api_key_env or env.api_key_env)


def read_source(path: str) -> str:
    from xpiler_core.frontend.source import decode_lenient

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise XpilerError(f"cannot read file: {exc.strerror}", path) from None
    text, warning = decode_lenient(data, path)
    if warning:
        print(warning, file=sys.stderr)
    return text


def run(args: argparse.Namespace) -> int:
    if args.proposer == "rules" and given_llm_flags(args):
        flags = ", ".join(given_llm_flags(args))
        print(f"xpiler translate: error: {flags} only apply with --proposer llm or rules-then-llm", file=sys.stderr)
        return 2
    if args.tier == "portable" and (args.to != "cpu" or args.no_verify):
        print("xpiler translate: error: --tier portable applies to --to cpu with verification (a tier is chosen by "
              "its checks)", file=sys.stderr)
        return 2
    options = options_from_args(args)
    if not args.spec and Path(args.file).is_file():
        from xpiler_core.verify.spec import spec_beside

        beside = spec_beside(args.file)
        if beside is not None:  # as the editor and the tuner do: the user's own spec, kept beside the file
            print(f"note: testing against the spec beside it: {beside} (give --spec to choose another)",
                  file=sys.stderr)
            options = dataclasses.replace(options, spec_path=beside)
    if Path(args.file).is_dir():
        import os

        from xpiler_core.cli._translate_tree import translate_tree

        if args.jobs is not None and args.jobs < 1:
            raise XpilerError(f"--jobs must be at least 1, got {args.jobs}", "<command line>")
        return translate_tree(Path(args.file), Path(args.output) if args.output else None, options, args.json,
                              jobs=args.jobs or os.cpu_count() or 1,
                              cluster=args.cluster or os.environ.get("RAY_ADDRESS") or None, fresh=args.fresh)
    from xpiler_core.pipeline import check_output_path, translate, write_outputs

    # everything about where the result goes is checked before minutes of work, not after
    check_output_path(args.file, args.output, options.target, args.manifest)
    text = read_source(args.file)
    from xpiler_core.cli._progress import TerminalProgress

    with TerminalProgress() as progress:
        result = translate(text, args.file, options, progress=progress)
    try:
        out_path, manifest_path = write_outputs(result, args.output, args.manifest)
    except (OSError, XpilerError) as exc:
        return keep_unwritten(result, args, exc)
    if args.json:
        json.dump({"status": result.status.value, "reason": result.reason, "output": str(out_path),
                   "manifest": str(manifest_path), "summary": result.summary, "manifest_data": result.manifest},
                  sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print_summary(result, str(out_path), str(manifest_path))
    return exit_code(result)


def print_summary(result: TranslationResult, out_path: str, manifest_path: str) -> None:
    print(result.summary)
    if result.output_text:
        folders = sorted({name.split("/")[0] + "/" for name in result.companions if "/" in name})
        files = sorted(name for name in result.companions if "/" not in name)
        beside = [*files, *(f"{f} ({sum(n.startswith(f) for n in result.companions)} headers)" for f in folders)]
        print(f"wrote {out_path}" + (f" and {', '.join(beside)}" if beside else "") + f" (manifest {manifest_path})")
    else:
        print(f"no translation to write; {out_path} left as it was (manifest {manifest_path})")
    for item in result.unresolved:
        print(f"{result.source_path}:{item.span.start_line + 1}:{item.span.start_col + 1}: warning: "
              f"unresolved: {item.reason}", file=sys.stderr)
    for diagnostic in result.diagnostics:
        if diagnostic.severity in (Severity.ERROR, Severity.WARNING):
            print(diagnostic.format(), file=sys.stderr)


def exit_code(result: TranslationResult) -> int:
    from xpiler_core.translation import EXIT_CODES

    return EXIT_CODES[result.status]


def keep_unwritten(result: TranslationResult, args: argparse.Namespace, exc: BaseException) -> int:
    """The output could not be written after all (the folder changed during the run): the result is still
    printed and the translation kept in a file outside the run's scratch folder, named in the message."""
    import os
    import tempfile

    reason = exc.message if isinstance(exc, XpilerError) else str(getattr(exc, "strerror", None) or exc)
    print(result.summary)
    kept = ""
    if result.output_text:
        base = os.environ.get("XPILER_KEEP_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "xpiler", "unwritten")
        try:
            os.makedirs(base, exist_ok=True)
            handle, name = tempfile.mkstemp(prefix=Path(args.file).stem + "-", suffix=Path(
                result.suggested_output_path).suffix, dir=base)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(result.output_text)
            kept = f"; the translation is kept in {name}"
        except OSError:
            kept = "; it could not be kept anywhere either"
    where = args.output or result.suggested_output_path
    print(f"{where}:1:1: error: cannot write the translation: {reason}{kept}", file=sys.stderr)
    return 1
