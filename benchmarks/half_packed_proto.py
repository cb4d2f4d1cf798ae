"""Prototype: float16 heat2d with two adjacent cells per thread loaded as 4-byte words, against the generated
pass (2-byte loads, the PASS_HALF schedule) and the float32 generated pass. Checked bitwise against the
generated float16 pass before timing. Usage: python3 benchmarks/half_packed_proto.py [--out FILE]"""

from __future__ import annotations

import argparse
import json
import re

import cupy as cp
import numpy as np
from half_storage_bench import copy_gbps, timed

import stencilforge as sf
from stencilforge.backends.cuda import CudaBackend
from stencilforge.printers.cuda import HALF, pass_source
from stencilforge.problems import heat

N = 16384
ROWS = 4

SOURCE = HALF + r"""
__device__ __forceinline__ float lo(unsigned int w) { return sf_h2f((unsigned short)(w & 0xffffu)); }
__device__ __forceinline__ float hi(unsigned int w) { return sf_h2f((unsigned short)(w >> 16)); }
extern "C" __global__ void packed(unsigned short* __restrict__ out, const unsigned short* __restrict__ u,
                                  const float k, const float cy, const float cx, const float cc, const int n0, const int n1)
{
    // padded row pitch w = n1 + 2 (even), interior cell (i, j) at padded (i + 1, j + 1); thread: padded columns 2p, 2p + 1
    const int w = n1 + 2, words = w / 2;
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= words) return;
    const int first = (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
    const unsigned int* U = (const unsigned int*)u;
    unsigned int* O = (unsigned int*)out;
    unsigned int up = U[(first) * words + p];
    unsigned int mid = U[(first + 1) * words + p];
    #pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int i = first + r;  // interior row index; padded row i + 1
        if (i >= n0) return;
        const unsigned int dn = U[(i + 2) * words + p];
        const unsigned int left = p > 0 ? U[(i + 1) * words + p - 1] : 0u;
        const unsigned int right = p + 1 < words ? U[(i + 1) * words + p + 1] : 0u;
        // cell A at padded column 2p, cell B at 2p + 1
        const float a_c = lo(mid), b_c = hi(mid);
        const float a = a_c + (k * (((((cy * lo(up)) + (cx * hi(left))) + (cc * a_c)) + (cx * b_c)) + (cy * lo(dn))));
        const float b = b_c + (k * (((((cy * hi(up)) + (cx * a_c)) + (cc * b_c)) + (cx * lo(right))) + (cy * hi(dn))));
        const unsigned int ha = sf_f2h(a), hb = sf_f2h(b);
        const bool a_in = 2 * p >= 1 && 2 * p <= n1, b_in = 2 * p + 1 <= n1;
        if (a_in && b_in) O[(i + 1) * words + p] = ha | (hb << 16);
        else if (a_in) out[(i + 1) * w + 2 * p] = (unsigned short)ha;
        else if (b_in) out[(i + 1) * w + 2 * p + 1] = (unsigned short)hb;
        up = mid;
        mid = dn;
    }
}
""".replace("ROWS", str(ROWS))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    gbps = copy_gbps()
    backend = CudaBackend()
    report = {"copy_gbps": gbps, "n": N, "rows": ROWS}
    for storage in ("float32", "float16"):
        p = heat.problem(2, (N, N), storage=storage)
        sim = sf.Simulation(p, backend)
        (pas,) = p.analysis.passes
        run = backend.equation_pass(pas, sim.lattice, p.constants)
        arrays = sim.arrays()
        report[f"generated_{storage}_ms"] = timed(lambda run=run, arrays=arrays, sim=sim: run(arrays, sim.params, 0.0)) * 1e3
    # the generated pass's arithmetic: u + (alpha dt) * ((((cy n + cx w) + cc u) + cx e) + cy s), no contraction
    source, _ = pass_source(pas, 2, np.float32, p.constants)
    line = next(ln for ln in source.splitlines() if "const float e0" in ln)
    literals = [np.float32(float.fromhex(t)) for t in re.findall(r"(-?0x[0-9a-f.]+p[+-]\d+)f", line)]
    cy, cx, cc = literals[0], literals[1], literals[2]  # north, west, centre (east and south repeat cx and cy)
    assert literals[3] == cx and literals[4] == cy
    k = np.float32(np.float32(sim.params["alpha"]) * np.float32(sim.params["dt"]))
    kernel = cp.RawModule(code=SOURCE, options=("--fmad=false",)).get_function("packed")
    u, ref = arrays["u"], arrays["u_next"]
    run(arrays, sim.params, 0.0)
    out = cp.full_like(ref, cp.nan)
    threads = (128, 2)
    grid = ((N + 2) // 2 // threads[0] + 1, -(-N // (threads[1] * ROWS)), 1)
    kargs = (out, u, k, cy, cx, cc, np.int32(N), np.int32(N))
    kernel(grid, threads, kargs)
    same = bool((out[1:-1, 1:-1].view(cp.uint16) == ref[1:-1, 1:-1].view(cp.uint16)).all())
    report["packed_bitwise"] = same
    report["packed_float16_ms"] = timed(lambda: kernel(grid, threads, kargs)) * 1e3
    for key in ("generated_float32_ms", "generated_float16_ms", "packed_float16_ms"):
        bytes_ = 8 if "32" in key else 4
        report[key.replace("_ms", "_pct")] = bytes_ * N * N / (report[key] / 1e3) / 1e9 / gbps * 100
    print(json.dumps(report))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
