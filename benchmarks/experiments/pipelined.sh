#!/usr/bin/env bash
# The `pipelined` sweep strategy on one H100, about 6 minutes: GPU tests, sanitizers, timings against streaming.
#   OUT=/some/dir bash benchmarks/experiments/pipelined.sh        (from the repo root; logs and JSON go to $OUT)
# The timing table (last thing printed) is also in $OUT/bench.log and $OUT/pipelined_bench.json.
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-pipelined-out}
mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 STENCILFORGE_CACHE_DIR=/tmp/sfc
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
python3 -c "import cupy, sys; from stencilforge.backends.cuda.compile import nvrtc_version; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'nvrtc', nvrtc_version())"

# 1. correctness: every pipelined GPU test (oracle, awkward shapes, radius 1..8, odd tiles), ~37 tests
timeout 180 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_gpu.py -k pipelined > "$OUT/pytest.log" 2>&1
rc=$?; echo "== pytest -k pipelined: exit $rc"; tail -4 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)|Error" "$OUT/pytest.log" | head -5
[ $rc -eq 0 ] || status=1

# 2. sanitizers: the small cases of every sweep problem, then rings at depths 1..3 and odd tiles
for tool in memcheck racecheck; do
  for workload in "benchmarks/cuda_sanitize.py pipelined" "benchmarks/experiments/pipelined_bench.py --sanitize"; do
    log="$OUT/$tool-$(basename ${workload%% *} .py).log"
    timeout 70 compute-sanitizer --tool $tool --error-exitcode 9 python3 $workload > "$log" 2>&1
    rc=$?; echo "== compute-sanitizer --tool $tool $workload: exit $rc"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|WRONG|Traceback" "$log" | sort | uniq -c | head -4
    [ $rc -eq 0 ] || status=1
  done
done

# 3. timings: streaming (default tile) vs pipelined tiles and depths; heat3d, wave3d r8 512^3 and heat2d 16384^2, fp32
timeout 210 python3 benchmarks/experiments/pipelined_bench.py --out "$OUT/pipelined_bench.json" > "$OUT/bench.log" 2>&1
rc=$?; echo "== pipelined_bench: exit $rc"; [ $rc -eq 0 ] || { status=1; tail -5 "$OUT/bench.log"; }
sed -n '/^case /,$p' "$OUT/bench.log"
exit $status
