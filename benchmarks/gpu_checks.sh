#!/bin/bash
# The checks that need a CUDA GPU, in one run (a lent GPU machine's time is short): the GPU tests (--reference gpu,
# the runtime against the GPU), the corpus sources built by nvcc and run on the GPU (bench_gpu_truth.py), and
# CPU translations of programs judged against the GPU (bench_programs.py --reference gpu).
#
# Prepare here (the corpus stays outside the repository; .gpu_check/ and .whl/ are ignored via .git/info/exclude):
#   python benchmarks/corpus/build_corpus.py CORPUS --mirrors /work/.mirror
#   python benchmarks/bench_gpu_truth.py pack CORPUS .gpu_check/pack
#   mkdir -p .gpu_check/corpus/programs && cp -r CORPUS/programs/<ids to translate> .gpu_check/corpus/programs/
#   pip download (cp312 manylinux wheels of tree-sitter, tree-sitter-cuda, diskcache, z3-solver) into .whl/
# Run there with .whl and .gpu_check carried: bash benchmarks/gpu_checks.sh   (results under $OUT)
# Then here: python benchmarks/bench_gpu_truth.py compare .gpu_check/pack OUT/truth.json --json ...
set -u
export PYTHONUNBUFFERED=1
R=$PWD
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
T0=$(date +%s)
if [ -z "${SKIP_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    > "$OUT/setup.log" 2>&1 || { cat "$OUT/setup.log"; exit 1; }
  export PYTHONPATH=/tmp/site:$R
fi
{ nvidia-smi; nvcc --version; python3 --version; g++ --version | head -1; nproc; uptime;
  python3 -c "import xpiler_core.cli, tree_sitter_cuda, z3, diskcache, numpy; print('imports ok')"; } > "$OUT/env.txt" 2>&1
echo "setup done at $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt"
(timeout "${TRUTH_S:-240}" python3 benchmarks/bench_gpu_truth.py gpu .gpu_check/pack --json "$OUT/truth.json" --jobs 8 \
   > "$OUT/truth.log" 2>&1; echo "truth rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt") &
timeout "${PYTEST_S:-240}" python3 -m pytest -p no:cacheprovider -o addopts="" -n 6 -ra tests/verify/test_gpu_reference.py \
  tests/runtime/test_gpu_fidelity.py > "$OUT/pytest.log" 2>&1
echo "pytest rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt"
wait
ONLY=$(for d in .gpu_check/corpus/programs/*/; do printf -- "--only %s " "$(basename "$d")"; done)
# shellcheck disable=SC2086
timeout "${REF_S:-260}" python3 benchmarks/bench_programs.py .gpu_check/corpus --to cpu --reference gpu --jobs 8 \
  --timeout 230 $ONLY --json "$OUT/refgpu.json" > "$OUT/refgpu.log" 2>&1
echo "refgpu rc=$? at $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt"
cat "$OUT/env.txt"; tail -5 "$OUT/pytest.log"; tail -3 "$OUT/truth.log"; tail -15 "$OUT/refgpu.log"
