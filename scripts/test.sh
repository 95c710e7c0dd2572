#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs them.
#   scripts/test.sh            default suite (< 15 min on 2 cores)
#   scripts/test.sh -m slow    the long tests
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh --dev

if [ -f vscode-client/package.json ]; then
  command -v npm >/dev/null 2>&1 || { echo "ERROR: npm not found; the VS Code client's tests need Node.js 20 + npm" >&2; exit 1; }
  echo "== installing vscode-client npm packages"
  (cd vscode-client && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error; })
fi

PY=${PYTHON:-python3}
echo "== import contracts (pyproject.toml [tool.importlinter])"
lint-imports --no-cache
echo "== ruff"
"$PY" -m ruff check .
echo "== pytest"
exec "$PY" -m pytest -q "$@"
