"""Optional dependencies: each is imported where it is needed, so the core (numpy, numba, typer, rich) runs
alone, and a missing one is reported in one line naming the extra that installs it."""

from __future__ import annotations

import importlib

from .errors import StencilforgeError

# top-level module: (distribution users know it by, install hint)
EXTRAS = {
    "h5py": ("h5py", 'pip install "stencilforge[io]"'),
    "h5netcdf": ("h5netcdf", 'pip install "stencilforge[netcdf]"'),
    "matplotlib": ("matplotlib", 'pip install "stencilforge[plot]"'),
    "cupy": ("CuPy", 'pip install "stencilforge[gpu]" (CUDA 13) or "stencilforge[cuda12]"'),
    "xarray": ("xarray", 'pip install "stencilforge[xarray]"'),
    "mpi4py": ("mpi4py", 'pip install "stencilforge[mpi]" (built against your MPI) or "stencilforge[mpi-wheel]"'),
}


def missing(module: str, what: str) -> StencilforgeError:
    """The error for `what` (e.g. 'snapshot file run.h5') needing the absent optional `module`."""
    package, hint = EXTRAS[module.partition(".")[0]]
    return StencilforgeError(f"{what} needs {package}: {hint}")


def require(module: str, what: str):
    """The optional module `module` (dotted names allowed), or the one-line error of `missing`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise missing(module, what) from None
