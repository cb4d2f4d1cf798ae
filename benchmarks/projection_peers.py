"""A projection step of the lid-driven cavity (examples/cavity.py, Re = 100) through sf.run on numba against the
same scheme written in NumPy with SciPy's sparse solvers for the pressure: conjugate gradients warm-started from the
last pressure to the same relative residual, and a sparse LU factorised once (the fastest way SciPy offers for a
fixed matrix). All three start from rest and take the same steps; the fields are compared at the end.

usage: python benchmarks/projection_peers.py [--n 511] [--steps 20] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import stencilforge as sf
from stencilforge.simulation import SOLVE_TOL

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import cavity  # noqa: E402


def neumann_laplacian(n: int, h: float) -> sp.csr_matrix:
    """Minus the 5-point Laplacian on n x n nodes with zero flux through every wall (no face beyond the first and
    last node), as the project's multigrid builds it."""
    main = np.full(n, 2.0)
    main[0] = main[-1] = 1.0
    one = sp.diags([-np.ones(n - 1), main, -np.ones(n - 1)], [-1, 0, 1]) / (h * h)
    eye = sp.identity(n)
    return (sp.kron(eye, one) + sp.kron(one, eye)).tocsr()  # -lap: symmetric, positive semi-definite


class NumpyProjection:
    """The example's step in NumPy: momentum by centred differences, lap p = div(u*) / dt, u = u* - dt grad p."""

    def __init__(self, n: int, solver: str):
        self.n, self.h = n, 1.0 / (n + 1)
        problem = cavity.build((n, n))
        self.dt, self.nu = problem.dt.value, 1.0 / cavity.RE
        self.u, self.v = np.zeros((n + 2, n + 2)), np.zeros((n + 2, n + 2))
        self.u[-1, :] = 1.0  # the lid, on the wall y = 1 (ghost row), as sf.Dirichlet(where(y > 1 - h/2, 1, 0)) fills it
        self.p = np.zeros(n * n)
        self.a = neumann_laplacian(n, self.h)  # solved as -lap p = -div(u*) / dt
        self.solver, self.iterations = solver, 0
        if solver == "lu":  # the null space removed by pinning the first node, then the zero-mean solution taken
            pinned = self.a.tolil()
            pinned[0, :] = 0.0
            pinned[0, 0] = 1.0
            self.lu = spla.splu(pinned.tocsc())

    def _dx(self, a):
        return (a[1:-1, 2:] - a[1:-1, :-2]) / (2 * self.h)

    def _dy(self, a):
        return (a[2:, 1:-1] - a[:-2, 1:-1]) / (2 * self.h)

    def _lap(self, a):
        return (a[1:-1, 2:] + a[1:-1, :-2] + a[2:, 1:-1] + a[:-2, 1:-1] - 4 * a[1:-1, 1:-1]) / (self.h * self.h)

    def step(self) -> None:
        u, v, dt, n = self.u, self.v, self.dt, self.n
        us, vs = u.copy(), v.copy()  # the walls carry over
        us[1:-1, 1:-1] = u[1:-1, 1:-1] + dt * (-u[1:-1, 1:-1] * self._dx(u) - v[1:-1, 1:-1] * self._dy(u) + self.nu * self._lap(u))
        vs[1:-1, 1:-1] = v[1:-1, 1:-1] + dt * (-u[1:-1, 1:-1] * self._dx(v) - v[1:-1, 1:-1] * self._dy(v) + self.nu * self._lap(v))
        rhs = ((self._dx(us) + self._dy(vs)) / dt).ravel()
        rhs = -(rhs - rhs.mean())
        if self.solver == "cg":
            counted = []
            self.p, _ = spla.cg(self.a, rhs, x0=self.p, rtol=SOLVE_TOL["float64"], maxiter=20 * n, callback=counted.append)
            self.iterations += len(counted)
        else:
            pinned = rhs.copy()
            pinned[0] = 0.0
            self.p = self.lu.solve(pinned)
        self.p -= self.p.mean()
        pp = np.pad(self.p.reshape(n, n), 1, mode="symmetric")  # sf.Neumann: ghosts mirror the first interior node
        u[1:-1, 1:-1] = us[1:-1, 1:-1] - dt * self._dx(pp)
        v[1:-1, 1:-1] = vs[1:-1, 1:-1] - dt * self._dy(pp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=511, help="interior nodes per axis")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()
    problem = cavity.build((args.n, args.n))
    sf.run(problem, steps=2, backend="numba")  # compile, and load the cache
    ours = sf.run(problem, steps=args.steps, backend="numba", check_every=args.steps)
    rows = {"stencilforge numba": {"ms_per_step": 1e3 * ours.summary["wall_s"] / args.steps,
                                   "cycles_per_solve": ours.summary["solves"]["p"]["cycles_per_solve"]}}
    for solver in ("cg", "lu"):
        peer = NumpyProjection(args.n, solver)
        start = time.perf_counter()
        for _ in range(args.steps):
            peer.step()
        seconds = time.perf_counter() - start
        gap = max(float(np.abs(peer.u[1:-1, 1:-1] - np.asarray(ours.fields["u"])).max()),
                  float(np.abs(peer.v[1:-1, 1:-1] - np.asarray(ours.fields["v"])).max()))
        rows[f"NumPy + SciPy {solver}"] = {"ms_per_step": 1e3 * seconds / args.steps, "largest_difference_in_u_v": gap,
                                          **({"cg_iterations_per_solve": peer.iterations / args.steps} if solver == "cg" else {}),
                                          **({"includes_the_factorisation": False} if solver == "lu" else {})}
    base = rows["stencilforge numba"]["ms_per_step"]
    for name, row in rows.items():
        row["ours_faster_by"] = round(row["ms_per_step"] / base, 2)
        print(f"{name:22s} {row['ms_per_step']:10.2f} ms a step  {row['ours_faster_by']:6.2f}x  "
              f"{ {k: v for k, v in row.items() if k not in ('ms_per_step', 'ours_faster_by')} }", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": args.n, "steps": args.steps, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
