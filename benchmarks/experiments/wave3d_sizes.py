"""cuda_profile's timing of wave3d variants at several cubic sizes (its LARGE shape swapped), one JSON per size.

    PYTHONPATH=src python3 benchmarks/experiments/wave3d_sizes.py OUT_PREFIX N[,N...] VARIANT ... [--dtype float64] [--radius R]
"""
import sys
sys.path.insert(0, "benchmarks")
import cuda_profile

args = sys.argv[1:]
radius = int(args.pop(args.index("--radius") + 1)) if "--radius" in args else 8
if "--radius" in args:
    args.remove("--radius")
dtype = ["--dtype", args.pop(args.index("--dtype") + 1)] if "--dtype" in args else []
if dtype:
    args.remove("--dtype")
prefix, sizes, variants = args[0], [int(n) for n in args[1].split(",")], args[2:]
cuda_profile.PARAMS["wave3d"] = {"radius": radius}
for n in sizes:
    cuda_profile.LARGE["wave3d"] = (n, n, n)
    cuda_profile.FIELDS.clear()
    print(f"=== wave3d r{radius} {n}^3 {dtype[1:] or ['float32']}", flush=True)
    sys.argv = ["cuda_profile.py", "time", *variants, "--json", f"{prefix}_{n}.json", *dtype]
    cuda_profile.main()
