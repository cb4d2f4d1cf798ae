"""cuda_profile time of streaming_vec with a #pragma unroll U on its z loop (H100, round 9):

    PYTHONPATH=src python3 benchmarks/experiments/streaming_vec_unroll.py N OUTPREFIX U=variant,... (U 0: none)
"""
import dataclasses
import sys
sys.path.insert(0, "benchmarks")
import cuda_profile
import stencilforge.backends.cuda.codegen as c

plain = c.streaming_vector_sweep
n, out = int(sys.argv[1]), sys.argv[2]
cuda_profile.LARGE["wave3d"] = (n, n, n)
for arg in sys.argv[3:]:
    u, variants = arg.split("=")

    def patched(*a, u=int(u), **k):
        kern = plain(*a, **k)
        if not u:
            return kern
        return dataclasses.replace(kern, source=kern.source.replace("    for (int z = z0;", f"    #pragma unroll {u}\n    for (int z = z0;"))

    c.streaming_vector_sweep = patched
    print(f"=== {n}^3 z-loop unroll {u}", flush=True)
    sys.argv = ["cuda_profile.py", "time", *variants.split(","), "--json", f"{out}-{n}-u{u}.json"]
    cuda_profile.main()
