"""What receivers add to a step: the acoustic wave equation of wave3d (radius 8, float32) with and without RECEIVERS
receivers at random points between the nodes (trilinear, recorded every step), through sf.run, interleaved rounds,
median time a step of each.

usage: python benchmarks/receivers_bench.py [--backend numba] [--shape 512 512 512] [--steps 20] [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np

import stencilforge as sf

RECEIVERS = 1000


def wave(shape, receivers: int) -> sf.Problem:
    g = sf.Grid(tuple(shape), extent=1.0, dtype="float32")
    u = sf.Field("u", g, levels=3)
    dt = 0.2 * min(g.spacing)
    x, y, z = g.coordinates
    rng = np.random.default_rng(0)
    points = rng.uniform(0.1, 0.9, (receivers, 3))
    return sf.Problem([sf.Eq(u.next, 2 * u - u.prev + dt**2 * sf.laplacian(u, order=16))],
                      initial={u: sf.sin(np.pi * x) * sf.sin(np.pi * y) * sf.sin(np.pi * z)}, boundary={u: sf.Dirichlet(0.0)},
                      receivers=[sf.Receiver(u, tuple(p)) for p in points], dt=dt, name=f"wave r8, {receivers} receivers")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--shape", type=int, nargs=3, default=(512, 512, 512))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    cases = {n: wave(args.shape, n) for n in (0, RECEIVERS)}
    for p in cases.values():  # compile, and load the cache
        sf.run(p, steps=2, backend=args.backend)
    times: dict[int, list[float]] = {n: [] for n in cases}
    for _ in range(args.rounds):
        for n, p in cases.items():
            s = sf.run(p, steps=args.steps, backend=args.backend, check_every=args.steps).summary
            times[n].append(s["wall_s"] / args.steps)
    ms = {n: 1e3 * statistics.median(t) for n, t in times.items()}
    added = 100 * (ms[RECEIVERS] / ms[0] - 1)
    print(f"{args.backend} {'x'.join(map(str, args.shape))}: {ms[0]:.3f} ms a step, {ms[RECEIVERS]:.3f} with {RECEIVERS} "
          f"receivers (+{added:.1f}%); rounds {times}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "shape": list(args.shape), "steps": args.steps, "ms_per_step": ms,
                       "seconds_per_step": times, "added_percent": added}, f, indent=1)


if __name__ == "__main__":
    main()
