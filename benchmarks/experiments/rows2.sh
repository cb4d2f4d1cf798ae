#!/usr/bin/env bash
# rows: tiles and register caps; derivatives against naive-cuda.
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-rows-out}; L=$OUT/logs; mkdir -p "$L"
export PYTHONPATH=src PYTHONUNBUFFERED=1 STENCILFORGE_CACHE_DIR=/tmp/sfc
SF="python3 -m stencilforge.cli"
V="heat3d:streaming heat3d:rows:1x4x256 heat3d:rows:1x4x256::2048 heat3d:rows:1x4x256::1536 heat3d:rows:2x2x256 heat3d:rows:2x2x256::2048 heat3d:rows:4x1x256 heat3d:rows:4x2x256 heat3d:rows:4x2x256::1536 heat3d:rows:4x4x128 heat3d:rows:8x2x128 heat3d:rows:2x4x128 heat3d:rows:1x4x128 heat3d:rows:1x2x256 heat3d:rows:2x1x512 heat3d:rows:1x3x256 heat3d:rows:1x6x256"
V="$V heat2d:pipelined heat2d:rows:4x512 heat2d:rows:4x512::2048 heat2d:rows:4x512::1536 heat2d:rows:2x512 heat2d:rows:4x256 heat2d:rows:3x512 heat2d:rows:6x512"
V="$V poisson2d:rows:4x512 poisson2d:rows:4x512::2048 poisson2d:rows:2x512 poisson2d:rows:4x256 poisson2d:rows:3x512 poisson2d:rows:6x512 poisson2d:streaming:64x512"
timeout 300 python3 benchmarks/cuda_profile.py time $V --json $OUT/profile2.json > $L/profile.log 2>&1
echo "== profile: exit $?"
timeout 150 $SF bench --problems derivatives,derivatives-fused --strategies naive,rows,pencil --peers naive-cuda,torch.compile --json $OUT/deriv.json > $L/deriv.log 2>&1
echo "== bench: exit $?"
timeout 80 $SF tune derivatives-fused --budget 60 --no-store > $L/tune-fused.log 2>&1; echo "== tune fused: exit $?"
timeout 60 $SF tune derivatives --budget 40 --no-store > $L/tune-single.log 2>&1; echo "== tune single: exit $?"
tar -czf $OUT/logs.tgz -C $OUT logs && rm -rf $L
sed -n '/^memcpy/,$p' <(tar -xzOf $OUT/logs.tgz logs/profile.log)
tar -xzOf $OUT/logs.tgz logs/deriv.log | tail -30
