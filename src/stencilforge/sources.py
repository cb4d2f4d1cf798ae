"""The code a run of a problem compiles, for people to read (`stencilforge show-kernel`); no GPU needed.

A problem whose step lowers to a sweep shows the sweep's kernels (the CUDA
strategy `auto` or `strategy` picks, or numba's row kernel), with the
residual's reduction; any other problem shows each generated pass's kernel
with the schedule and ghost-image stores a run uses, and on CUDA the
two-steps-per-pass kernel where the run would take one. The passes are found
by building the problem's `Simulation` on NumPy, with a stand-in that keeps
the source each pass would be compiled from.
"""

from __future__ import annotations

from .backends.cuda import kernel_source
from .backends.cuda.backend import pair_kernel, pass_kernel
from .backends.numba_cpu import constant_shape, sweep_source
from .backends.numpy_ref import NumpyBackend
from .errors import StencilforgeError
from .ir.analysis import slot_name
from .printers import numba as printers_numba
from .problem import Problem
from .problems.base import lowered, lowers
from .simulation import Simulation

TARGETS = ("cuda", "numba")


class _Recorder:
    """NumPy's backend, keeping the source `target` would compile for each pass (and for a two-step pass)."""

    def __init__(self, target: str):
        self.target = target
        self.writes_ghost_images = target == "cuda"
        self.sources: list[str] = []
        self._numpy = NumpyBackend()

    def __getattr__(self, name: str):
        return getattr(self._numpy, name)

    def equation_pass(self, p, lattice, constants, images=None, background: bool = False):
        writes = ", ".join(slot_name(s) for s in p.writes)
        if self.target == "cuda":
            k = pass_kernel(p, lattice, constants, images)
            self.sources.append(f"// pass {len(self.sources) + 1}: {writes}; grid {k.blocks}, block {k.threads}\n{k.source}")
        else:
            source = printers_numba.pass_source(p, lattice.ndim, lattice.dtype, constants)[0]
            self.sources.append(f"# pass {len(self.sources) + 1}: {writes}\n{source}")
        return self._numpy.equation_pass(p, lattice, constants)

    def equation_pair(self, p, lattice, constants, walls, reach: int, images=None):
        k = pair_kernel(p, lattice, constants, walls, reach, images) if self.target == "cuda" else None
        if k is not None:
            self.sources.append(f"// two steps per pass (where the run fuses them); grid {k.blocks}, block {k.threads}\n{k.source}")
        return None


def problem_source(problem: Problem, backend: str = "cuda", strategy: str = "auto") -> str:
    """The kernels a run of `problem` on `backend` ("cuda" or "numba") compiles, as source text."""
    if backend not in TARGETS:
        raise StencilforgeError(f"show-kernel shows the {' and '.join(TARGETS)} backends' code, not {backend!r}")
    sweeps = (2, 3) if backend == "cuda" else (1, 2, 3)
    if lowers(problem) and problem.grid.ndim in sweeps:
        setup = lowered(problem)
        if backend == "cuda":
            return kernel_source(setup, strategy)
        if strategy != "auto":
            raise StencilforgeError("--strategy applies to the cuda backend")
        padded = constant_shape(setup.grid)
        assert setup.sweep is not None, "a lowered problem steps by a sweep"
        texts = [sweep_source(setup.sweep, reduce=False, padded=padded)]
        if setup.residual is not None:
            texts.append(sweep_source(setup.residual, reduce=True, padded=padded))
        return "\n".join(texts)
    if strategy != "auto":
        raise StencilforgeError(f"--strategy chooses among the schedules of one linear equation; {problem.name} runs "
                                "as generated passes")
    recorder = _Recorder(backend)
    sim = Simulation(problem, recorder)
    if backend == "cuda":
        sim.build_fused()
    return "\n".join(recorder.sources)
