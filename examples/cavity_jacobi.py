"""The lid-driven cavity of step 11 of the "12 steps to Navier-Stokes" course, as taught: the pressure Poisson
equation by a fixed number of Jacobi iterations (nit = 50) inside every step, in one sf.Iterate.

    u_t + (u . grad) u = -grad p / rho + nu lap u,   lap p = rho (div(u) / dt - u_x^2 - 2 u_y v_x - v_y^2)

on [0, 2] x [0, 2], 41 x 41 nodes, rho = 1, nu = 0.1, dt = 0.001. Each step, with the course's expressions
(backward differences for advection, centred ones elsewhere, the same operations in the same order):

    b = rho (div(u) / dt - u_x^2 - 2 u_y v_x - v_y^2)                    the pressure's source
    nit times: p = ((p_E + p_W) dy^2 + (p_N + p_S) dx^2 - b dx^2 dy^2) / (2 (dx^2 + dy^2))
               then the walls: dp/dx = 0 at x = 0 and 2, dp/dy = 0 at y = 0, p = 0 at y = 2
    u, v from the old u, v and the last iterate of p

The grid's points are the interior nodes; the outer nodes are the ghost cells, where the walls hold (the lid,
y = 2, moves at u = 1). The course's arrays start at zero everywhere, the lid too, so its first step changes
nothing but the walls: its nt steps are nt - 1 here, where the walls hold from the start (699 for its nt = 700;
tests/test_iterate.py compares the fields bit for bit). The pressure pass is compiled once and launched nit
times a step. `examples/cavity.py` solves such a step's pressure to a tolerance by multigrid (sf.Solve) instead.
"""

import stencilforge as sf

NIT = 50  # Jacobi iterations per step, as the course takes
DT_41 = 0.001  # the course's step at 41 x 41 nodes, scaled by h^2 on other grids


def build(shape=None, dtype="float64", nit: int = NIT) -> sf.Problem:
    shape = shape or (39, 39)  # 41 x 41 nodes with the walls
    dy, dx = (2.0 / (n + 1) for n in shape)
    grid = sf.Grid(shape, spacing=(dy, dx), origin=(dy, dx), dtype=dtype)
    dt = DT_41 * (20 * min(dx, dy)) ** 2
    rho, nu = sf.Constant("rho", 1.0), sf.Constant("nu", 0.1)

    u, v, p = sf.Field("u", grid), sf.Field("v", grid), sf.Field("p", grid)
    b = sf.Field("b", grid, levels=1)

    # offsets in array order (y, x): u[0, 1] is the course's u[1:-1, 2:], u[-1, 0] its u[0:-2, 1:-1]
    source = sf.Eq(b, rho * (1 / dt * ((u[0, 1] - u[0, -1]) / (2 * dx) + (v[1, 0] - v[-1, 0]) / (2 * dy))
                             - ((u[0, 1] - u[0, -1]) / (2 * dx)) ** 2
                             - 2 * ((u[1, 0] - u[-1, 0]) / (2 * dy) * (v[0, 1] - v[0, -1]) / (2 * dx))
                             - ((v[1, 0] - v[-1, 0]) / (2 * dy)) ** 2))
    jacobi = sf.Eq(p.next, ((p[0, 1] + p[0, -1]) * dy**2 + (p[1, 0] + p[-1, 0]) * dx**2) / (2 * (dx**2 + dy**2))
                   - dx**2 * dy**2 / (2 * (dx**2 + dy**2)) * b)
    pn = p.next  # the last iterate
    return sf.Problem(
        [
            source,
            sf.Iterate(nit, [jacobi]),
            sf.Eq(u.next, u - u * dt / dx * (u - u[0, -1]) - v * dt / dy * (u - u[-1, 0])
                  - dt / (2 * rho * dx) * (pn[0, 1] - pn[0, -1])
                  + nu * (dt / dx**2 * (u[0, 1] - 2 * u + u[0, -1]) + dt / dy**2 * (u[1, 0] - 2 * u + u[-1, 0]))),
            sf.Eq(v.next, v - u * dt / dx * (v - v[0, -1]) - v * dt / dy * (v - v[-1, 0])
                  - dt / (2 * rho * dy) * (pn[1, 0] - pn[-1, 0])
                  + nu * (dt / dx**2 * (v[0, 1] - 2 * v + v[0, -1]) + dt / dy**2 * (v[1, 0] - 2 * v + v[-1, 0]))),
        ],
        boundary={
            u: ((sf.Dirichlet(0.0), sf.Dirichlet(1.0)), sf.Dirichlet(0.0)),  # per axis (y, x); the lid at y = 2
            v: sf.Dirichlet(0.0),
            p: ((sf.Neumann(), sf.Dirichlet(0.0)), sf.Neumann()),
        },
        dt=dt,
        steps=699,  # the course's nt = 700
        name="cavity_jacobi",
    )
