#!/usr/bin/env bash
# End-to-end test of the VS Code extension in a real VS Code: code-server 4.100.3 (VS Code 1.100.3) driven
# by Debian Chromium through playwright-core. Loads vscode-client/ as a development extension and runs the three
# flows the extension exists for, from a clean profile:
#  1. translate: opens examples/vector_add.cu, runs "Translate to HIP" from the code action menu, waits for the
#     .hip editor beside the source and the status bar's "verified", then "Translate to CPU" from the palette;
#     compiles the created files with hipcc and g++ (translate_to_hip.mjs);
#  2. repair: a kernel with a seeded bug and its spec: Verify, the failing test in the Problems panel, the
#     quick fix "Apply repair (verified)", save, verified (repair_and_tune.mjs);
#  3. tune: "Tune This File" on that kernel, progress in the status bar, the hover while it runs and after, the
#     tuned file compiled with g++ (repair_and_tune.mjs).
# Screenshots of each final state are saved.
#
#   scripts/e2e_vscode.sh                       run it (screenshots in vscode-client/e2e/out/)
#   scripts/e2e_vscode.sh --update-screenshots  also copy them to vscode-client/media/ (the README's)
#
# Environment: PYTHON (interpreter with xpiler installed; default python3), XPILER_E2E_CACHE (install cache,
# default ~/.cache/xpiler-e2e), XPILER_E2E_TIMEOUT (whole run, seconds; default 1200), XPILER_E2E_OUT.
# Exits 0 on success; otherwise non-zero with a line "e2e_vscode: FAIL: <why>".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

fail() {
  echo "e2e_vscode: FAIL: $*" >&2
  exit 1
}

# The whole run is bounded: every step that can take long runs under `timeout` with at most the time left.
limit=${XPILER_E2E_TIMEOUT:-1200}
deadline=$(($(date +%s) + limit))
left() { # seconds left for a step, capped at $1
  local rest=$((deadline - $(date +%s)))
  [ "$rest" -gt 0 ] || fail "did not finish within ${limit} s (XPILER_E2E_TIMEOUT)"
  echo $((rest < $1 ? rest : $1))
}
bounded() { # bounded CAP COMMAND...: run COMMAND for at most CAP seconds (and never past the deadline)
  local cap=$1 seconds rc=0
  shift
  seconds=$(left "$cap") || exit 1
  timeout --kill-after=10 "$seconds" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    [ "$(date +%s)" -lt "$deadline" ] || fail "did not finish within ${limit} s (XPILER_E2E_TIMEOUT)"
    fail "step timed out after ${seconds} s: $*"
  fi
  return "$rc"
}

update_screenshots=0
for arg in "$@"; do
  case $arg in
    --update-screenshots) update_screenshots=1 ;;
    *) fail "unknown argument: $arg" ;;
  esac
done

CODE_SERVER_VERSION=4.100.3
cache=${XPILER_E2E_CACHE:-$HOME/.cache/xpiler-e2e}
out=${XPILER_E2E_OUT:-$root/vscode-client/e2e/out}
source_name=vector_add.cu
started=$(date +%s)
elapsed() { echo $(($(date +%s) - started)); }
say() { echo "== [$(elapsed) s] $*"; }

# ---------------------------------------------------------------- prerequisites
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
[ -e /usr/include/gssapi/gssapi_krb5.h ] || missing+=(libkrb5-dev) # code-server's kerberos module builds against it
command -v hipcc >/dev/null 2>&1 || missing+=(hipcc)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing apt packages: ${missing[*]}"
    bounded 300 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive bounded 600 apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    fail "missing system packages: ${missing[*]} (apt-get install ${missing[*]})"
  fi
fi
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || fail "node and npm are required"

PY=${PYTHON:-python3}
PY=$(command -v "$PY") || fail "Python interpreter '${PYTHON:-python3}' not found"
# From / so that the check does not pass only thanks to the checkout being the current directory.
(cd / && "$PY" -c "import importlib.util, sys; sys.exit(not importlib.util.find_spec('xpiler_server.__main__'))") 2>/dev/null ||
  fail "$PY cannot run the server (python -m xpiler_server); install it with: $PY -m pip install -e $root"

# ---------------------------------------------------------------- cached installs
say "code-server $CODE_SERVER_VERSION (cached in $cache)"
bounded 600 bash vscode-client/e2e/install_code_server.sh "$cache/code-server-$CODE_SERVER_VERSION" "$CODE_SERVER_VERSION" ||
  fail "installing code-server $CODE_SERVER_VERSION failed (see above)"
code_server=$cache/code-server-$CODE_SERVER_VERSION/node_modules/.bin/code-server

npm_ci() { # npm ci when node_modules is missing or older than the lock file
  local dir=$1
  if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    (cd "$dir" && bounded 300 npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $dir failed"
  fi
}
say "extension and test-driver npm packages"
npm_ci vscode-client
npm_ci vscode-client/e2e
(cd vscode-client && bounded 120 npm run --silent check && bounded 60 npm run --silent bundle >/dev/null 2>&1) ||
  fail "building the extension failed"

# ---------------------------------------------------------------- a fresh VS Code
work=$(mktemp -d /tmp/xpiler-e2e.XXXXXX)
cs_pid=
cleanup() {
  if [ -n "$cs_pid" ]; then
    kill -- "-$cs_pid" 2>/dev/null || true # code-server and its extension host run in their own group
    sleep 1
    kill -9 -- "-$cs_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap "exit 143" TERM INT

ws=$work/workspace
mkdir -p "$ws" "$work/user/User" "$work/extensions" "$work/xdg" "$out"
rm -f "$out"/*.png
cp -r examples/. "$ws/"
# A kernel with a syntax error (missing ')' and ';'): the server must publish a diagnostic for it.
broken_name=e2e_syntax_error.cu
cat >"$ws/$broken_name" <<'CUDA'
__global__ void scale(float* x, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n x[i] *= s
}
CUDA
# The repair flow's kernel: the suite's broadcast add with an index bug (the operand wraps one column early).
repair_name=e2e_repair_add.cu
repair_kernel=default_function_kernel
sed 's/& 63)/\& 62)/' benchmarks/suite/elementwise/add/add.cu >"$ws/$repair_name"
grep -q '& 62)' "$ws/$repair_name" || fail "could not seed the bug in $repair_name"
sed "s/^source = .*/source = \"$repair_name\"/; s/^reference = \"ref.py:/reference = \"e2e_repair_ref.py:/" \
  benchmarks/suite/elementwise/add/spec.toml >"$ws/${repair_name%.cu}.toml"
cp benchmarks/suite/elementwise/add/ref.py "$ws/e2e_repair_ref.py"
cat >"$work/user/User/settings.json" <<JSON
{
  "xpiler.server.python": "$PY",
  "xpiler.trace.server": "messages",
  "xpiler.tuning.budgetSeconds": 40,
  "xpiler.tuning.trials": 8,
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "update.mode": "none",
  "files.autoSave": "off",
  "editor.minimap.enabled": false,
  "window.commandCenter": false
}
JSON

port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
say "starting code-server on 127.0.0.1:$port"
XDG_CONFIG_HOME=$work/xdg XDG_DATA_HOME=$work/xdg XDG_CACHE_HOME=$work/xdg \
  setsid "$code_server" --auth none --bind-addr "127.0.0.1:$port" --user-data-dir "$work/user" \
  --extensions-dir "$work/extensions" --disable-telemetry --disable-update-check --disable-workspace-trust \
  "$ws" >"$work/code-server.log" 2>&1 &
cs_pid=$!
for _ in $(seq 60); do
  curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" && break
  kill -0 "$cs_pid" 2>/dev/null || { cat "$work/code-server.log" >&2; fail "code-server exited at start"; }
  sleep 0.5
done
curl -fs -o /dev/null "http://127.0.0.1:$port/healthz" || fail "code-server did not answer within 30 s"

payload=$(EXT="vscode-remote://127.0.0.1:$port$root/vscode-client" node -e \
  'console.log(encodeURIComponent(JSON.stringify([["extensionDevelopmentPath", process.env.EXT]])))')

# run_flow NAME CAP SCRIPT [VAR=VALUE...]: one browser flow, bounded; on failure the server's last lines and why
run_flow() {
  local name=$1 cap=$2 script=$3 rc=0 flow_limit log
  shift 3
  flow_limit=$(left "$cap") || exit 1
  env XPILER_E2E_URL="http://127.0.0.1:$port/?folder=$ws&payload=$payload" XPILER_E2E_SHOTS="$out" \
    XPILER_E2E_STEP_MS=60000 "$@" timeout --kill-after=10 "$flow_limit" node "vscode-client/e2e/$script" || rc=$?
  log=$(find "$work/user/logs" -name 'Xpiler.log' 2>/dev/null | head -1)
  if [ "$rc" != 0 ]; then
    if [ -n "$log" ]; then
      echo "---- last lines of the Xpiler output ($log)" >&2
      tail -n 30 "$log" | cut -c1-400 >&2
    fi
    [ "$rc" = 124 ] && fail "the $name flow did not finish in time ($cap s, or the XPILER_E2E_TIMEOUT of ${limit} s)"
    fail "the $name flow failed (exit $rc); screenshots in $out"
  fi
  [ -n "$log" ] && grep -h -m1 -o 'Starting the Xpiler server: .*' "$log" | sed 's/^/   /'
  return 0
}

say "driving VS Code: Translate to HIP through the code action menu"
run_flow translate 420 translate_to_hip.mjs XPILER_E2E_SOURCE="$source_name" XPILER_E2E_BROKEN="$broken_name"

# ---------------------------------------------------------------- the created file compiles
hip_file=$ws/${source_name%.cu}.hip
[ -s "$hip_file" ] || fail "the translated file $hip_file was not written to disk"
cmp -s "examples/$source_name" "$ws/$source_name" || fail "the translation modified its source $source_name"
say "compiling $(basename "$hip_file") with hipcc"
compile_log=$work/hipcc.log
if ! (cd "$work" && HIP_PLATFORM=amd bounded 300 hipcc --offload-arch=gfx90a -c "$hip_file" -o "$work/translated.o") >"$compile_log" 2>&1; then
  cat "$compile_log" >&2
  fail "the translated file does not compile with HIP_PLATFORM=amd hipcc --offload-arch=gfx90a -c"
fi
cp "$hip_file" "$out/"
cpu_file=$ws/${source_name%.cu}.cpp
[ -s "$cpu_file" ] || fail "the CPU translation $cpu_file was not written to disk"
say "compiling $(basename "$cpu_file") with g++"
(cd "$ws" && bounded 300 g++ -std=c++17 -O2 -fopenmp -c "$cpu_file" -o "$work/translated_cpu.o") >"$work/gxx_cpu.log" 2>&1 ||
  { cat "$work/gxx_cpu.log" >&2; fail "the CPU translation does not compile with g++ -std=c++17 -O2 -fopenmp -c"; }

# ---------------------------------------------------------------- repair and tune
say "driving VS Code: repair a failing kernel inline, then tune it"
run_flow repair/tune 600 repair_and_tune.mjs XPILER_E2E_REPAIR="$repair_name" XPILER_E2E_KERNEL="$repair_kernel"
grep -q '& 63)' "$ws/$repair_name" || fail "the accepted repair is not in $repair_name on disk"
tuned_file=$ws/${repair_name%.cu}.tuned.cpp
[ -s "$tuned_file" ] || fail "the tuned file $tuned_file was not written to disk"
say "compiling $(basename "$tuned_file") with g++"
(cd "$ws" && bounded 300 g++ -std=c++17 -O2 -fopenmp -c "$tuned_file" -o "$work/tuned.o") >"$work/gxx.log" 2>&1 ||
  { cat "$work/gxx.log" >&2; fail "the tuned file does not compile with g++ -std=c++17 -O2 -fopenmp -c"; }
cp "$tuned_file" "$out/"

if [ "$update_screenshots" = 1 ]; then
  mkdir -p vscode-client/media
  cp "$out/code-action-menu.png" "$out/translated-beside.png" "$out/repair-quick-fix.png" "$out/tune-hover-done.png" \
    vscode-client/media/
  say "screenshots copied to vscode-client/media/"
fi
say "PASS: Translate to HIP, inline repair and tuning in VS Code $CODE_SERVER_VERSION; hipcc and g++ compiled the results; screenshots in $out"
