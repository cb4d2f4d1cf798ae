#!/usr/bin/env bash
# The `rows` strategy on one H100: GPU tests, timings against streaming/pipelined and peers, ncu vs torch.compile.
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-rows-out}; L=$OUT/logs; mkdir -p "$L"
export PYTHONPATH=src PYTHONUNBUFFERED=1 STENCILFORGE_CACHE_DIR=/tmp/sfc
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_cuda_gpu.py -k rows > $L/pytest.log 2>&1
echo "== pytest -k rows: exit $?"; tail -2 $L/pytest.log; grep -E "^(FAILED|ERROR)" $L/pytest.log | head -5
V="heat3d:streaming heat3d:rows:1x4x256 heat3d:rows:1x4x512 heat3d:rows:1x2x512 heat3d:rows:1x8x512 heat3d:rows:1x1x512 heat3d:rows:2x4x256 heat3d:rows:1x8x256 heat3d:rows:2x2x512 heat3d:peer"
V="$V heat2d:pipelined heat2d:rows:4x512 heat2d:rows:8x512 heat2d:rows:2x1024 heat2d:rows:8x256 heat2d:rows:4x1024 heat2d:peer"
V="$V poisson2d:streaming:64x512 poisson2d:streaming poisson2d:rows:4x512 poisson2d:rows:8x512 poisson2d:rows:2x1024 poisson2d:rows:4x1024"
V="$V wave3d:streaming wave3d:rows:1x4x256 wave3d:rows:1x8x128"
timeout 300 python3 benchmarks/cuda_profile.py time $V --json $OUT/profile.json > $L/profile.log 2>&1
echo "== profile: exit $?"
timeout 200 python3 -m stencilforge.cli bench --problems derivatives,derivatives-fused,heat3d,poisson2d --strategies naive,rows,pencil,streaming,auto --peers naive-cuda,torch.compile --json $OUT/bench.json > $L/bench.log 2> $L/bench.err
echo "== bench: exit $?"
M="--clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,l1tex__t_sector_hit_rate.pct"
timeout 150 ncu $M --kernel-name regex:'sf_|peer_' python3 benchmarks/cuda_profile.py ncu heat3d:streaming heat3d:rows:1x4x512 heat3d:peer > $L/ncu_ours.log 2>&1
echo "== ncu ours: exit $?"
TORCH_LOGS=output_code timeout 150 ncu $M --kernel-name regex:triton --launch-skip 2 --launch-count 1 python3 benchmarks/experiments/peer_steps.py torch.compile heat3d > $L/ncu_triton.log 2>&1
echo "== ncu triton: exit $?"
tar -czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
sed -n '/^memcpy/,$p' <(tar -xzOf $OUT/logs.tgz logs/profile.log)
tar -xzOf $OUT/logs.tgz logs/bench.log | tail -40
