#!/usr/bin/env bash
# Everything the cuda backend needs a GPU for, in one command (see docs/gpu-testing.md):
#   benchmarks/cuda_gpu_check.sh [tests] [sanitize] [bench]    (no argument: all three)
# Logs and the benchmark JSON go to $OUT (or ./gpu-check-out).
set -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check-out}
mkdir -p "$OUT"
# a fresh cache by default: a stored `tune` winner would change what `auto` picks in the tests
export PYTHONPATH=src PYTHONUNBUFFERED=1 STENCILFORGE_CACHE_DIR=${STENCILFORGE_CACHE_DIR:-$(mktemp -d)}
stages=${*:-tests sanitize bench}
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
python3 -c "import cupy, sys; from stencilforge.backends.cuda.compile import nvrtc_version; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'nvrtc', nvrtc_version())"
for stage in $stages; do
  case $stage in
    tests)
      python3 -m pytest -q -p no:cacheprovider tests/test_cuda_codegen.py tests/test_cuda_gpu.py tests/test_equations_gpu.py tests/test_multigrid_gpu.py tests/test_examples_gpu.py 2>&1 | tee "$OUT/pytest.log" | tail -25 || status=1 ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 python3 benchmarks/cuda_sanitize.py > "$OUT/$tool.log" 2>&1
        rc=$?; echo "compute-sanitizer --tool $tool: exit $rc"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Error" "$OUT/$tool.log" | sort | uniq -c | head -5
        [ $rc -eq 0 ] || status=1
      done ;;
    bench)
      python3 benchmarks/cuda_bench.py --out "$OUT/cuda_bench.json" 2>&1 | tee "$OUT/bench.log" || status=1 ;;
    *)
      echo "unknown stage $stage: choose tests, sanitize or bench"; status=2 ;;
  esac
done
exit $status
