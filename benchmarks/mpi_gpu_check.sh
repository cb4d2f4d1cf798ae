#!/usr/bin/env bash
# Multi-GPU check of decomposed cuda runs: bitwise comparison on 1/2/4 GPUs, the CLI under mpiexec,
# weak scaling (heat3d and wave3d r8, 512^3 per GPU), strong scaling (heat3d 1024^3).
# usage: OUT=dir benchmarks/mpi_gpu_check.sh [bitwise] [cli] [scaling]     (no argument: all three)
# Writes JSON under $OUT and prints a compact table last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
# NVLink multicast stays off on shared multi-GPU hosts.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
export STENCILFORGE_CACHE_DIR=${STENCILFORGE_CACHE_DIR:-/tmp/stencilforge-cache}
NGPU=$(python3 -c "import cupy; print(cupy.cuda.runtime.getDeviceCount())")
echo "GPUs: $NGPU; mpiexec: $(command -v mpiexec)"
nvidia-smi topo -m > "$OUT/mpi_gpu_topology.txt" 2>&1
# mpiexec and mpi4py must be the same MPI: N singletons would pass every check on one GPU each.
SIZE=$(mpiexec -n "$NGPU" python3 -c "from mpi4py import MPI; print(MPI.COMM_WORLD.size)" | sort -u)
if [ "$SIZE" != "$NGPU" ]; then
  echo "error: mpiexec -n $NGPU started ranks that see a world of '$SIZE' (mpi4py and mpiexec from different MPIs?)" >&2
  exit 2
fi

stages=${*:-bitwise cli scaling}
for stage in $stages; do
  case $stage in
    bitwise)
      echo "== bitwise: tests/mpi_driver.py problems, cuda naive and auto, 1 vs 2/4 GPUs"
      python3 benchmarks/mpi_gpu_bitwise.py "$OUT/mpi_gpu_bitwise.json" "$NGPU" ;;
    cli)
      for n in 1 "$NGPU"; do
        echo "== CLI: mpiexec -n $n stencilforge run heat3d --backend cuda --json"
        mpiexec -n "$n" python3 -m stencilforge.cli run heat3d --shape 512 512 512 --backend cuda --steps 200 --json \
          | tee "$OUT/mpi_gpu_cli_$n.json"
      done ;;
    scaling)
      echo "== scaling: weak heat3d / wave3d r8 (512^3 per GPU), strong heat3d 1024^3"
      mpiexec -n "$NGPU" python3 benchmarks/mpi_gpu_bench.py "$OUT/mpi_gpu_bench.json" ;;
    *)
      echo "unknown stage $stage: choose bitwise, cli or scaling" >&2; exit 2 ;;
  esac
done

python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
path = os.path.join(out, "mpi_gpu_bitwise.json")
rows = json.load(open(path))["configs"] if os.path.exists(path) else []
print("\nbitwise vs 1 GPU (same strategy; auto also vs one plain process):" if rows else "")
for r in rows:
    status = "EQUAL" if r.get("all_equal") else ("NOT DECOMPOSED" if r["rc"] == 0 and not r["ranks_used"] else ("FAIL rc=%d" % r["rc"] if r["rc"] else "DIFFER " + ",".join(k for k, c in r["cases"].items() if not (c["bitwise_equal"] and c.get("equal_to_plain", True)))))
    fused = [k for k, c in r.get("cases", {}).items() if c.get("plain_fused_steps")]
    status += f" (also equal to one plain process, fused in {','.join(fused)})" if fused and r.get("all_equal") else ""
    halos = sorted({c["halo"] for c in r.get("cases", {}).values()})
    print(f"  {r['strategy']:6s} n={r['ranks']} grid={r['grid']:5s} halo={r['halo']}->{','.join(halos):12s}  {status}")
path = os.path.join(out, "mpi_gpu_bench.json")
if os.path.exists(path):
    recs = json.load(open(path))["records"]
    base = {(r["group"], r["problem"], r["config"]): r["ms_per_step"] for r in recs if r["gpus"] == 1}
    print("\n%-6s %-7s %-4s %-14s %-8s %-6s %9s %9s %9s %7s" % ("group", "problem", "gpus", "config", "procs", "halo", "ms/step", "comm ms", "kern ms", "eff/su"))
    for r in recs:
        one = base.get((r["group"], r["problem"], "auto"))
        ratio = one / r["ms_per_step"] if one else float("nan")
        print("%-6s %-7s %-4d %-14s %-8s %-6s %9.3f %9.3f %9.3f %7.3f" % (
            r["group"], r["problem"], r["gpus"], r["config"], "x".join(map(str, r["procs"])), r["halo"],
            r["ms_per_step"], r["comm_ms_per_step"], r["compute_ms_per_step"], ratio))
EOF
