#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs them.
#   scripts/test.sh            default suite (< 15 min on 2 cores)
#   scripts/test.sh -m slow    the long tests
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

need_root_apt() {
  # apt packages the tests need; installed when missing and we are root, else a loud failure.
  local missing=()
  command -v hipcc >/dev/null 2>&1 || missing+=(hipcc)
  command -v nvim >/dev/null 2>&1 || missing+=(neovim)
  [ -f /usr/include/boost/context/fiber.hpp ] || missing+=(libboost-context-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "== installing apt packages: ${missing[*]}"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
      echo "ERROR: missing system packages: ${missing[*]} (apt-get install ${missing[*]})" >&2
      exit 1
    fi
  fi
}

need_root_apt
# Optional: ROCm library headers the HIP mapping tables are checked against (tests skip without them).
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
   && { [ ! -f /usr/include/hiprand/hiprand.h ] || [ ! -f /usr/include/hipsparse/hipsparse.h ]; }; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libhiprand-dev libhipsparse-dev >/dev/null 2>&1 || true
fi
for tool in g++ gcc hipcc; do
  command -v "$tool" >/dev/null 2>&1 || { echo "ERROR: required toolchain '$tool' not found" >&2; exit 1; }
done
if ! command -v nvcc >/dev/null 2>&1; then
  echo "ERROR: nvcc (CUDA toolkit) not found; it is required to judge CUDA compile success" >&2
  exit 1
fi

PY=${PYTHON:-python3}
echo "== installing xpiler with dev extras"
"$PY" -m pip install -q -e ".[dev]"

if [ -f vscode-client/package.json ] && command -v npm >/dev/null 2>&1; then
  echo "== installing vscode-client npm packages"
  (cd vscode-client && { [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error; })
fi

echo "== pytest"
exec "$PY" -m pytest -q "$@"
