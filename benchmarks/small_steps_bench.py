"""Time per step of small problems through sf.run, where the host's work per step is what a step costs, against
the same explicit diffusion as a plain NumPy loop (what a course writes): a 1D line of 81 points, 2D squares of
41², 64² and 256², a 3D cube of 32³; examples/gray_scott.py at 64² against its update written with np.roll;
examples/cavity_jacobi.py at 39² (52 passes a step) against its kernels called in a bare loop. Median of 7 runs
of STEPS steps after a warm-up run; sf.run checks once.
With --device, on the GPU: sf.run on cuda as it runs (CUDA graphs where they apply), with single steps
(fuse_steps=False: no graph, no fused kernel) and the same loop in CuPy, plus Gray-Scott and the 52-pass cavity
of examples/ (checks every 100 steps, as a run's default).

    python benchmarks/small_steps_bench.py [--device] [--json OUT]
"""

import argparse
import json
import statistics
import time

import numpy as np

import stencilforge as sf

STEPS = 20000
CELLS = 2e6  # fewer steps for larger grids: about this many cell updates a run
NU = 0.1  # nu dt / h^2 of every case, stable in 1D, 2D and 3D


def problem(shape):
    g = sf.Grid(shape, extent=2.0, dtype="float64")
    u = sf.Field("u", g)
    return sf.Problem([sf.Eq(u.next, u + NU * sf.laplacian(u) * min(g.spacing) ** 2)], initial={u: sf.sin(g.x)},
                      boundary={u: sf.Dirichlet(0.0)}, dt=0.01)


def numpy_loop(shape, steps: int, xp=np) -> float:
    """Seconds a step of the course's loop: copy, update the interior from slices, walls at rest (`xp`: NumPy or
    CuPy, synchronised before the clock stops)."""
    u = xp.zeros(tuple(n + 2 for n in shape))
    u[(slice(1, -1),) * len(shape)] = xp.asarray(np.random.default_rng(0).random(shape))
    inner = (slice(1, -1),) * len(shape)
    sync = xp.cuda.Device().synchronize if xp is not np else (lambda: None)
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        un = u.copy()
        lap = -2.0 * len(shape) * un[inner]
        for a in range(len(shape)):
            lap = lap + un[tuple(slice(2, None) if b == a else slice(1, -1) for b in range(len(shape)))]
            lap = lap + un[tuple(slice(None, -2) if b == a else slice(1, -1) for b in range(len(shape)))]
        u[inner] = un[inner] + NU * lap
    sync()
    return (time.perf_counter() - start) / steps


def numpy_gray_scott(p, steps: int) -> float:
    """Seconds a step of Gray-Scott `p` (examples/gray_scott.py) as NumPy code writes it, periodic by np.roll."""
    c = p.values(None)
    du, dv, feed, kill = (c[name] for name in ("Du", "Dv", "F", "k"))
    h, dt, dtype = p.grid.spacing[0], p.dt.value, p.grid.dtype
    rng = np.random.default_rng(0)
    u, v = (rng.random(p.grid.shape).astype(dtype) for _ in range(2))

    def lap(a):
        return (np.roll(a, 1, 0) + np.roll(a, -1, 0) + np.roll(a, 1, 1) + np.roll(a, -1, 1) - 4 * a) / (h * h)

    start = time.perf_counter()
    for _ in range(steps):
        uvv = u * v * v
        u, v = u + dt * (du * lap(u) - uvv + feed * (1 - u)), v + dt * (dv * lap(v) + uvv - (feed + kill) * v)
    return (time.perf_counter() - start) / steps


def kernels_alone(p, steps: int, backend: str = "numba") -> float:
    """Seconds a step of `p`'s compiled passes called in a bare loop, as many times and in the order a step runs them
    (an sf.Iterate's passes once per iteration), without walls, checks or bookkeeping."""
    sim = sf.Simulation(p, backend)
    arrays, params = sim.arrays(), sim.params
    start = time.perf_counter()
    for _ in range(steps):
        for runs, stages, _ in sim._segments:
            for _ in range(runs):
                for _, run in stages:
                    run(arrays, params, 0.0)
    return (time.perf_counter() - start) / steps


def seconds_a_step(p, steps: int, backend: str, fuse: bool = True, check_every: int | None = None):
    """A run of `p` through sf.run, its seconds a step (default: one check, at the end)."""
    return lambda: sf.run(p, steps=steps, backend=backend, check_every=check_every or steps, fuse_steps=fuse).summary["wall_s"] / steps


def device_rows() -> dict:
    """The GPU's rows: each problem on cuda as it runs, with single steps, and (diffusion) the loop in CuPy."""
    import cupy

    from stencilforge.convergence import load_problem_file

    cases = {"x".join(map(str, shape)): (problem(shape), shape) for shape in ((81,), (64, 64), (256, 256), (32, 32, 32))}
    cases["gray_scott.py 64x64 float32"] = (load_problem_file("examples/gray_scott.py").build(shape=(64, 64), dtype="float32"), None)
    cases["cavity_jacobi.py 39x39 (52 passes a step)"] = (load_problem_file("examples/cavity_jacobi.py").build(shape=(39, 39)), None)
    rows = {}
    for name, (p, shape) in cases.items():
        steps = 2000 if shape is not None else 400
        summary = sf.run(p, steps=200, backend="cuda", check_every=100).summary
        row = {"steps": steps, "graph_steps": summary.get("graph_steps"),
               "cuda": median_us(seconds_a_step(p, steps, "cuda", check_every=100)),
               "cuda single steps": median_us(seconds_a_step(p, steps, "cuda", False, check_every=100))}
        if shape is not None:
            row["CuPy loop"] = median_us(lambda shape=shape, steps=steps: numpy_loop(shape, steps, cupy))
        rows[name] = row
        print(name, row, flush=True)
    return rows


def median_us(run) -> float:
    run()
    return round(statistics.median(run() for _ in range(7)) * 1e6, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    parser.add_argument("--device", action="store_true", help="the GPU's rows instead of the CPU's")
    args = parser.parse_args()
    if args.device:
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"what": "us a step, median of 7 runs (after a warm-up run), checks every 100 steps",
                           "rows": device_rows()}, f, indent=1)
        else:
            device_rows()
        return
    rows = {}
    for shape in ((81,), (41, 41), (64, 64), (256, 256), (32, 32, 32)):
        steps = int(min(STEPS, max(500, CELLS / np.prod(shape))))
        p = problem(shape)

        row = {"steps": steps, "numba": median_us(seconds_a_step(p, steps, "numba")),
               "numba one step a pass": median_us(seconds_a_step(p, steps, "numba", False)),
               "numpy backend": median_us(seconds_a_step(p, steps, "numpy")),
               "plain NumPy loop": median_us(lambda shape=shape, steps=steps: numpy_loop(shape, steps))}
        row["numba vs plain NumPy"] = round(row["plain NumPy loop"] / row["numba"], 2)
        name = "x".join(map(str, shape))
        rows[name] = row
        print(name, row, flush=True)
    from stencilforge.convergence import load_problem_file

    gs = load_problem_file("examples/gray_scott.py").build(shape=(64, 64), dtype="float32")
    row = {"steps": 5000, "numba": median_us(seconds_a_step(gs, 5000, "numba")),
           "plain NumPy loop": median_us(lambda: numpy_gray_scott(gs, 5000))}
    row["numba vs plain NumPy"] = round(row["plain NumPy loop"] / row["numba"], 2)
    rows["gray_scott.py 64x64 float32"] = row
    print("gray_scott.py 64x64 float32", row, flush=True)
    cavity = load_problem_file("examples/cavity_jacobi.py").build(shape=(39, 39))
    row = {"steps": 300, "numba": median_us(seconds_a_step(cavity, 300, "numba")),
           "its kernels alone": median_us(lambda: kernels_alone(cavity, 300))}
    row["loop over kernels"] = round(row["numba"] / row["its kernels alone"], 2)
    rows["cavity_jacobi.py 39x39 (52 passes a step)"] = row
    print("cavity_jacobi.py 39x39 (52 passes a step)", row, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"what": "us a step, median of 7 runs (after a warm-up run)", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
