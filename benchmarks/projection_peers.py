"""A projection step of the lid-driven cavity (examples/cavity.py, Re = 100) through sf.run on numba against the
same scheme written in NumPy with SciPy's sparse solvers for the pressure: conjugate gradients warm-started from the
last pressure to the same relative residual, and a sparse LU factorised once (the fastest way SciPy offers for a
fixed matrix). With --device, sf.run on cuda against the same NumPy code run by CuPy with cupyx's conjugate
gradients (a GPU user's way). All start from rest and take the same steps; the fields are compared at the end.

usage: python benchmarks/projection_peers.py [--n 511] [--steps 20] [--device] [--json OUT]
"""

from __future__ import annotations

import argparse
import inspect
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
    """The example's step in NumPy (or CuPy, `xp`): momentum by centred differences, lap p = div(u*) / dt,
    u = u* - dt grad p."""

    def __init__(self, n: int, solver: str, xp=np):
        self.n, self.h, self.xp = n, 1.0 / (n + 1), xp
        problem = cavity.build((n, n))
        self.dt, self.nu = problem.dt.value, 1.0 / cavity.RE
        self.u, self.v = xp.zeros((n + 2, n + 2)), xp.zeros((n + 2, n + 2))
        self.u[-1, :] = 1.0  # the lid, on the wall y = 1 (ghost row), as sf.Dirichlet(where(y > 1 - h/2, 1, 0)) fills it
        self.p = xp.zeros(n * n)
        self.a = neumann_laplacian(n, self.h)  # solved as -lap p = -div(u*) / dt
        self.cg = spla.cg
        if xp is not np:
            import cupyx.scipy.sparse as csp
            import cupyx.scipy.sparse.linalg as cspla

            self.a, self.cg = csp.csr_matrix(self.a), cspla.cg
        self.solver, self.iterations = solver, 0
        if solver == "lu":  # the null space removed by pinning the first node, then the zero-mean solution taken
            pinned = self.a.tolil()
            pinned[0, :] = 0.0
            pinned[0, 0] = 1.0
            self.lu = spla.splu(pinned.tocsc())

    def _count(self, x) -> None:
        """CG's callback: one iteration (keeping no iterate: a list of them held every one, 149 GB at 2047² on a GPU)."""
        self.iterations += 1

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
            tol = "rtol" if "rtol" in inspect.signature(self.cg).parameters else "tol"  # older cupyx names it tol
            self.p, _ = self.cg(self.a, rhs, x0=self.p, maxiter=20 * n, callback=self._count, **{tol: SOLVE_TOL["float64"]})
        else:
            pinned = rhs.copy()
            pinned[0] = 0.0
            self.p = self.lu.solve(pinned)
        self.p -= self.p.mean()
        pp = self.xp.pad(self.p.reshape(n, n), 1, mode="symmetric")  # sf.Neumann: ghosts mirror the first interior node
        u[1:-1, 1:-1] = us[1:-1, 1:-1] - dt * self._dx(pp)
        v[1:-1, 1:-1] = vs[1:-1, 1:-1] - dt * self._dy(pp)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=511, help="interior nodes per axis")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", action="store_true", help="ours on cuda against CuPy with cupyx's CG")
    parser.add_argument("--json")
    args = parser.parse_args()
    backend = "cuda" if args.device else "numba"
    problem = cavity.build((args.n, args.n))
    sf.run(problem, steps=2, backend=backend)  # compile, and load the cache
    ours = sf.run(problem, steps=args.steps, backend=backend, check_every=args.steps)
    ours_u, ours_v = (np.asarray(a.get() if hasattr(a, "get") else a) for a in (ours.fields["u"], ours.fields["v"]))
    rows = {f"stencilforge {backend}": {"ms_per_step": 1e3 * ours.summary["wall_s"] / args.steps,
                                        "cycles_per_solve": ours.summary["solves"]["p"]["cycles_per_solve"]}}
    if args.device:
        import cupy

        peers = [("CuPy + cupyx CG", "cg", cupy)]
    else:
        peers = [("NumPy + SciPy cg", "cg", np), ("NumPy + SciPy lu", "lu", np)]
    for name, solver, xp in peers:
        peer = NumpyProjection(args.n, solver, xp)
        if xp is not np:
            xp.cuda.Device().synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            peer.step()
        if xp is not np:
            xp.cuda.Device().synchronize()
        seconds = time.perf_counter() - start
        pu, pv = (np.asarray(a.get() if hasattr(a, "get") else a) for a in (peer.u, peer.v))
        gap = max(float(np.abs(pu[1:-1, 1:-1] - ours_u).max()), float(np.abs(pv[1:-1, 1:-1] - ours_v).max()))
        rows[name] = {"ms_per_step": 1e3 * seconds / args.steps, "largest_difference_in_u_v": gap,
                      **({"cg_iterations_per_solve": peer.iterations / args.steps} if solver == "cg" else {}),
                      **({"includes_the_factorisation": False} if solver == "lu" else {})}
    base = rows[f"stencilforge {backend}"]["ms_per_step"]
    for name, row in rows.items():
        row["ours_faster_by"] = round(row["ms_per_step"] / base, 2)
        print(f"{name:22s} {row['ms_per_step']:10.2f} ms a step  {row['ours_faster_by']:6.2f}x  "
              f"{ {k: v for k, v in row.items() if k not in ('ms_per_step', 'ours_faster_by')} }", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": args.n, "steps": args.steps, "backend": backend, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
