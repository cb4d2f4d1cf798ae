#!/usr/bin/env bash
# One `stencilforge bench` run of the whole default GPU matrix, JSON and roofline.
set -o pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
export PYTHONPATH=src PYTHONUNBUFFERED=1 STENCILFORGE_CACHE_DIR=/tmp/sfc
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 570 python3 -m stencilforge.cli bench --json $OUT/h100-bench.json --plot $OUT/roofline.png > $OUT/bench.log 2>&1
echo "== bench: exit $?"
python3 benchmarks/make_table.py $OUT/h100-bench.json | grep "^|"
