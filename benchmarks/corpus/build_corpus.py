"""Rebuild the real-program corpus (``programs.toml``) in a folder outside this repository.

    python benchmarks/corpus/build_corpus.py OUT [--mirrors DIR] [--clone-cache DIR] [--only ID ...]

For every program the files listed in ``programs.toml`` are read at the recorded commit of the recorded
repository and written to ``OUT/programs/<id>/`` (relative to the program's ``root``); the human HIP and
OpenMP ports to ``OUT/ports/<id>/hip|omp/``. Repositories come from ``--mirrors`` (bare git folders named
``owner+name`` or ``owner+name/repo``, as the team's fetch tool lays them out) or are cloned from GitHub
into ``--clone-cache``. Shrink edits are not applied here (``bench_programs.py`` applies them to its own
working copy and says so). Nothing here builds or runs the programs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load_programs(path: Path = HERE / "programs.toml") -> list[dict[str, object]]:
    return list(tomllib.loads(path.read_text(encoding="utf-8"))["program"])


def git_dir(repo: str, mirrors: Path | None, clone_cache: Path) -> Path:
    name = repo.replace("/", "+")
    if mirrors is not None:
        for candidate in (mirrors / name / "repo", mirrors / name):
            if (candidate / "HEAD").is_file() or (candidate / ".git").is_dir():
                return candidate
    target = clone_cache / name
    if not target.exists():
        clone_cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--bare", "--filter=blob:none", f"https://github.com/{repo}.git", str(target)],
                       check=True)
    return target


def show(git: Path, commit: str, path: str) -> bytes | None:
    done = subprocess.run(["git", f"--git-dir={git}", "show", f"{commit}:{path}"], capture_output=True)
    return done.stdout if done.returncode == 0 else None


def tree_files(git: Path, commit: str, folder: str) -> list[str]:
    done = subprocess.run(["git", f"--git-dir={git}", "ls-tree", "-r", "--name-only", commit, folder + "/"],
                          capture_output=True, text=True)
    return done.stdout.split() if done.returncode == 0 else []


def build(out: Path, mirrors: Path | None, clone_cache: Path, only: set[str] | None = None) -> int:
    missing = 0
    for program in load_programs():
        if only and str(program["id"]) not in only:
            continue
        ident, repo, commit, root = str(program["id"]), str(program["repo"]), str(program["commit"]), str(program["root"])
        git = git_dir(repo, mirrors, clone_cache)
        dest = out / "programs" / ident
        for relative in program["paths"]:  # type: ignore[attr-defined]
            repo_path = f"{root}/{relative}" if root else str(relative)
            data = show(git, commit, repo_path)
            if data is None:
                print(f"{ident}: {repo}@{commit[:10]}:{repo_path} not found", file=sys.stderr)
                missing += 1
                continue
            target = dest / str(relative)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        for kind in ("hip", "omp"):
            folder = program.get(f"{kind}_port")
            if not folder:
                continue
            for repo_path in tree_files(git, commit, str(folder)):
                data = show(git, commit, repo_path)
                if data is None or len(data) > 4 * 1024 * 1024:
                    continue
                target = out / "ports" / ident / kind / repo_path[len(str(folder)) + 1:]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        print(f"{ident}: {len(program['paths'])} file(s)")  # type: ignore[arg-type]
    return 1 if missing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the corpus to (outside the repository)")
    parser.add_argument("--mirrors", type=Path, help="folder of bare repositories named owner+name")
    parser.add_argument("--clone-cache", type=Path, default=Path.home() / ".cache" / "xpiler-corpus-repos")
    parser.add_argument("--only", action="append", default=[], help="program ids to write (default: all)")
    args = parser.parse_args()
    return build(args.out.resolve(), args.mirrors, args.clone_cache, set(args.only) or None)


if __name__ == "__main__":
    sys.exit(main())
