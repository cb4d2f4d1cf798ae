"""The manufactured Dirichlet Poisson problem shared by the multigrid benchmarks (numpy only, no GPU imports)."""

from __future__ import annotations

import numpy as np


def manufactured(shape):
    """(f, exact u, h) on the nodes (i + 1) h of the unit box, h = 1 / (n + 1), as float64 host arrays.

    u = (1 + x^2) prod sin(pi x_a): zero on the walls and, unlike prod sin(pi x_a) alone, not an
    eigenvector of the discrete Laplacian (on which CG and the FFT solve would be trivially exact).
    """
    axes = [np.arange(1, n + 1) / (n + 1) for n in shape]
    mesh = np.meshgrid(*axes, indexing="ij")
    x = mesh[0]
    s = np.prod([np.sin(np.pi * m) for m in mesh], axis=0)
    others = np.prod([np.sin(np.pi * m) for m in mesh[1:]], axis=0)
    g = 1 + x * x
    f = -len(shape) * np.pi**2 * s * g + 4 * x * np.pi * np.cos(np.pi * x) * others + 2 * s
    return f, s * g, tuple(1.0 / (n + 1) for n in shape)
