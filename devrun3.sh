#!/usr/bin/env bash
export PYTHONPATH=src STENCILFORGE_CACHE_DIR=/tmp/sfc PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_gpu.py tests/test_cuda_codegen.py -k "fused or fusion" > $OUT/tests.log 2>&1; echo "tests rc=$?"; tail -3 $OUT/tests.log
python3 benchmarks/fused_steps_sweep.py $OUT/fused-steps-h200.json > $OUT/sweep.log 2>&1; echo "sweep rc=$?"
python3 -m stencilforge.cli bench --problems jacobi2d,heat2d,poisson2d --strategies auto,fused --peers none --no-time-loop --no-cold-start --json $OUT/bench2d-h200.json > $OUT/bench.log 2>&1; echo "bench rc=$?"
grep -E "fused|auto" $OUT/bench.log | tail -12
tail -40 $OUT/sweep.log | grep "^|"
