"""Time per step of small problems through sf.run (host overhead dominates): a 1D line of 81 points and a 41x41
square, explicit diffusion, one step per pass, median of 7 runs of 20000 steps after a warm-up run.

    python benchmarks/small_steps_bench.py
"""

import statistics

import stencilforge as sf

STEPS = 20000


def line():
    g = sf.Grid((81,), extent=2.0, dtype="float64")
    u = sf.Field("u", g)
    return sf.Problem([sf.Eq(u.next, u + 0.3 * (u[1] - 2 * u + u[-1]))], initial={u: sf.sin(g.x)},
                      boundary={u: sf.Dirichlet(0.0)}, dt=0.01)


def square():
    g = sf.Grid((41, 41), extent=2.0, dtype="float64")
    v = sf.Field("v", g)
    return sf.Problem([sf.Eq(v.next, v + 1e-4 * sf.laplacian(v))], initial={v: sf.sin(g.x) * g.y},
                      boundary={v: sf.Dirichlet(0.0)}, dt=0.01)


for name, problem in (("1D 81", line()), ("2D 41^2", square())):
    for backend in ("numba", "numpy"):
        sf.run(problem, steps=100, backend=backend)
        runs = [sf.run(problem, steps=STEPS, backend=backend, check_every=STEPS, fuse_steps=False) for _ in range(7)]
        print(name, backend, round(statistics.median(r.summary["wall_s"] / STEPS * 1e6 for r in runs), 2), "us/step")
