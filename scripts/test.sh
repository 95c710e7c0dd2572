#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs them on every core.
#   scripts/test.sh            default suite (target: < 15 min on 2 cores, cold cache; 14.6 min on the last 2-core run)
#   scripts/test.sh -m extended  more instances of what the default run covers (CI runs them after it)
#   scripts/test.sh -m slow    the long tests
# Extra arguments go to pytest (e.g. -n 0 to run in one process). Each phase prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
phase_start=$started
phase() { # phase NAME: the time since the previous phase mark
  local now
  now=$(date +%s)
  echo "== phase $1: $((now - phase_start)) s"
  phase_start=$now
}

bash scripts/setup.sh --dev

if [ -f vscode-client/package.json ]; then
  command -v npm >/dev/null 2>&1 || { echo "ERROR: npm not found; the VS Code client's tests need Node.js 20 + npm" >&2; exit 1; }
  echo "== installing vscode-client npm packages"
  (cd vscode-client && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error; })
fi
phase setup

PY=${PYTHON:-python3}
echo "== import contracts (pyproject.toml [tool.importlinter])"
lint-imports --no-cache
echo "== ruff"
"$PY" -m ruff check .
phase lint

echo "== pytest (every core: pytest-xdist; the runtime's headers precompiled once per flag set)"
rc=0
"$PY" -m pytest -q "$@" || rc=$?
phase tests
echo "== total: $(( $(date +%s) - started )) s"
exit $rc
